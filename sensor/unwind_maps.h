/* unwind_maps.h - loads the unwind tables the symbolizer sends into the
 * BPF maps of bpf/unwind.h, and keeps the per-PID LPM entries that point
 * the BPF unwinder at them in step with the process table.
 *
 * Pure C: every map write goes through struct unwind_map_ops, which the
 * sensor backs with the real maps (unwind_bpf.c) and the unit tests with a
 * fake (tests/unit/test-unwind-maps.c).
 *
 * What it guarantees (ARCHITECTURE.md, rule 1): a table touches no map
 * before all of it arrived and passed the checks below; its size is
 * bounded (SONDE_UNWIND_MAX_ROWS_PER_FILE and the row array's capacity);
 * a file's rows are loaded once, however many processes map it; rows of a
 * table no live process maps are evicted when room is needed.
 *
 * Thread-safe: one internal lock. The uplink's reader thread adds chunks,
 * the main thread reports processes; neither waits on the other for long
 * (a commit is a few batched syscalls).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind.h"

#define UNWIND_FILE_ID_LEN 16

/* The map writes. ctx is the ops_ctx given to unwind_maps_new(). Each
 * returns 0 or a negative errno. */
struct unwind_map_ops {
	/* Writes rows[0..n) at row indexes first.. (first is a multiple of
	 * SONDE_UNWIND_ROWS_PER_BUCKET; the rows up to the next bucket
	 * boundary are zeroed). */
	int (*rows_write)(void *ctx, uint32_t first, const struct sonde_unwind_row *rows,
			  uint32_t n);
	/* Writes page index entries idx[0..n) at entry first.. (first is a
	 * multiple of SONDE_UNWIND_INDEX_PER_BUCKET). NULL: tables get no
	 * page index. */
	int (*index_write)(void *ctx, uint32_t first, const uint32_t *idx, uint32_t n);
	int (*lpm_update)(void *ctx, const struct sonde_unwind_lpm_key *key,
			  const struct sonde_unwind_lpm_value *value);
	int (*lpm_delete)(void *ctx, const struct sonde_unwind_lpm_key *key);
	/* True if the sensor registered this file ID (only a profiled
	 * process's file may get a table). */
	bool (*file_known)(void *ctx, const uint8_t id[UNWIND_FILE_ID_LEN]);
};

/* One sonde.v1.UnwindTable message, decoded by the uplink. Borrowed: only
 * needs to live through unwind_maps_add_chunk(). */
struct unwind_chunk {
	uint8_t file_id[UNWIND_FILE_ID_LEN];
	uint32_t format_version;
	bool first;
	bool last;
	uint32_t total_rows; /* first chunk */
	const void *rows;    /* packed struct sonde_unwind_row, little-endian */
	size_t rows_len;     /* bytes */
	bool has_error;      /* the file has no usable table */
	uint64_t table_version; /* first chunk: the symbolizer's digest (0: none) */
};

/* A loaded table, as listed in Hello.loaded_tables. */
struct unwind_loaded {
	uint8_t file_id[UNWIND_FILE_ID_LEN];
	uint64_t table_version;
};

/* Why a table was rejected. */
enum unwind_reject {
	UNWIND_REJECT_UNKNOWN_FILE = 0, /* file ID not registered by this sensor */
	UNWIND_REJECT_VERSION,          /* format_version is not ours */
	UNWIND_REJECT_TOO_BIG,          /* total_rows 0, over the per-file cap or the capacity */
	UNWIND_REJECT_NO_SPACE,         /* no room even after evicting unused tables */
	UNWIND_REJECT_CHUNK_SIZE,       /* rows not a multiple of the row size */
	UNWIND_REJECT_ROW_COUNT,        /* chunks do not add up to total_rows */
	UNWIND_REJECT_UNSORTED,         /* pc not strictly increasing */
	UNWIND_REJECT_BAD_KIND,         /* cfa_kind or fp_kind out of range */
	UNWIND_REJECT_SEQUENCE,         /* a chunk without a first chunk, or too many at once */
	UNWIND_REJECT_MAP_WRITE,        /* the row array refused the write, or ENOMEM */
	UNWIND_REJECT__COUNT,
};

/* Names for logs, indexed by enum unwind_reject. */
extern const char *const unwind_reject_names[UNWIND_REJECT__COUNT];

struct unwind_maps_stats {
	uint64_t tables_loaded;      /* files whose table is in the row array now */
	uint64_t rows_loaded;        /* their rows */
	uint64_t tables_rejected;    /* sum of rejected[] */
	uint64_t rejected[UNWIND_REJECT__COUNT];
	uint64_t tables_unavailable; /* the symbolizer said "no usable table" */
	uint64_t tables_evicted;
	uint64_t duplicates;         /* tables sent again for a loaded file, same version */
	uint64_t tables_unindexed;   /* loaded without a page index (index space full) */
	uint64_t lpm_entries;        /* prefixes in the trie now */
	uint64_t lpm_failures;       /* mappings left without an entry (trie full) */
	uint64_t lpm_capped;         /* ... (their process's UNWIND_MAX_LPM_PER_PROC used up) */
	uint32_t capacity_rows;
	uint32_t free_rows;
};

/* An executable file mapping of a process, as procs.c knows it. */
struct unwind_mapping {
	uint64_t start, end; /* [start, end) */
	uint64_t offset;     /* page offset in the file */
	uint8_t file_id[UNWIND_FILE_ID_LEN];
};

struct unwind_maps;

/* Page index entries that go with capacity_rows rows: at most half an
 * entry per row (unwind_index_shape()), rounded down to whole buckets. */
#define UNWIND_INDEX_ENTRIES(capacity_rows)                                                  \
	((capacity_rows) / 2 / SONDE_UNWIND_INDEX_PER_BUCKET * SONDE_UNWIND_INDEX_PER_BUCKET)

/* capacity_rows: rows in the row array, a multiple of
 * SONDE_UNWIND_ROWS_PER_BUCKET (rounded down; 0: tables are refused).
 * Tables are placed on bucket boundaries. The page index array holds
 * UNWIND_INDEX_ENTRIES(capacity_rows) entries.
 * ops: borrowed, must outlive the object. NULL on ENOMEM. */
struct unwind_maps *unwind_maps_new(uint32_t capacity_rows, const struct unwind_map_ops *ops,
				    void *ops_ctx);
/* Frees the bookkeeping; the maps are left as they are. Accepts NULL. */
void unwind_maps_free(struct unwind_maps *um);

/* Takes one chunk. Returns 0 when it was accepted (or the table was
 * complete and loaded), -EBADMSG when the table was rejected (counted;
 * later chunks of it are dropped until its next first chunk), or -ENOMEM.
 * No return ends the stream: a bad table only goes without rows. */
int unwind_maps_add_chunk(struct unwind_maps *um, const struct unwind_chunk *c);
/* A new connection: tables half-received on the old one are dropped. */
void unwind_maps_connection_reset(struct unwind_maps *um);

/* One process's share of the LPM trie (262,144 prefixes): a normal one
 * needs a few thousand (tens per mapping), one that maps a file with a
 * table thousands of times would crowd out every other process. Its
 * mappings beyond it unwind with frame pointers (lpm_capped). */
#define UNWIND_MAX_LPM_PER_PROC 16384

/* The executable mappings of pid are now maps[0..n) (borrowed, sorted by
 * start, not overlapping, as procs.c keeps them): entries for mappings
 * that went away are removed, entries for new mappings of files with a
 * loaded table are inserted (up to UNWIND_MAX_LPM_PER_PROC prefixes).
 * Returns 0 or -ENOMEM. */
int unwind_maps_set_process(struct unwind_maps *um, uint32_t pid,
			    const struct unwind_mapping *maps, size_t n);
/* The process exited: its entries are removed and its tables unreferenced. */
void unwind_maps_remove_process(struct unwind_maps *um, uint32_t pid);

/* The tables loaded now that have a version, at most cap of them, into
 * out (the symbolizer skips these after a reconnect). Returns how many. */
size_t unwind_maps_loaded(struct unwind_maps *um, struct unwind_loaded *out, size_t cap);
void unwind_maps_get_stats(struct unwind_maps *um, struct unwind_maps_stats *ret);

/* ---- pure helpers, exposed for the unit tests ---- */

/* First-fit allocator of row ranges in [0, capacity). */
struct row_alloc;
struct row_alloc *row_alloc_new(uint32_t capacity);
void row_alloc_free(struct row_alloc *a);
/* Reserves n > 0 contiguous rows at the lowest start that fits. Returns 0
 * with *ret_start, -ENOSPC (no free range of n rows), -EINVAL for n = 0,
 * or -ENOMEM. */
int row_alloc_take(struct row_alloc *a, uint32_t n, uint32_t *ret_start);
/* Returns a range given by row_alloc_take() (merged with free neighbours). */
void row_alloc_release(struct row_alloc *a, uint32_t start, uint32_t n);
uint32_t row_alloc_free_rows(const struct row_alloc *a);
uint32_t row_alloc_largest_free(const struct row_alloc *a);

/* The page index of a sorted table rows[0..n) (bpf/unwind.h): the
 * smallest shift >= SONDE_UNWIND_PAGE_SHIFT_MIN whose page count is at
 * most n / 2 + 1, the first page and the count. Tables under
 * UNWIND_INDEX_MIN_ROWS rows get none (*ret_count = 0): a few halvings
 * search them. */
#define UNWIND_INDEX_MIN_ROWS 64
void unwind_index_shape(const struct sonde_unwind_row *rows, uint32_t n, uint32_t *ret_shift,
			uint32_t *ret_base, uint32_t *ret_count);
/* Fills out[0..count) for that shape: entry p is the last row whose pc <=
 * (base + p) << shift (0 when no row is). */
void unwind_index_fill(const struct sonde_unwind_row *rows, uint32_t n, uint32_t shift,
		       uint32_t base, uint32_t count, uint32_t *out);

/* An aligned block of addresses: the top `bits` bits of addr are fixed,
 * the rest are free (addr has them zero). */
struct unwind_prefix {
	uint64_t addr;
	uint32_t bits; /* 1..64 */
};
#define UNWIND_MAX_PREFIXES 128
/* Splits [start, end) into the minimal set of aligned blocks that covers
 * it exactly, in address order. out must hold UNWIND_MAX_PREFIXES.
 * Returns the count (0 for an empty range). */
size_t unwind_split_range(uint64_t start, uint64_t end, struct unwind_prefix *out);
/* The LPM key of one block of pid. */
void unwind_lpm_key(uint32_t pid, const struct unwind_prefix *p, struct sonde_unwind_lpm_key *ret);
