/* unwind_table.h - the compiled unwind table of one file: sorted rows of
 * struct sonde_unwind_row (bpf/unwind.h), keyed by file offset, each
 * covering [row.pc, next row.pc). Built from ranges in any order by a
 * builder, immutable afterwards, serialised for the cache and cut into
 * chunks for the sensor. Format and rules: docs/unwind-tables.md.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "unwind.h"

/* Version of the cache blob, and of what the compiler produces: bump it
 * whenever the same file would now compile to a different table, so that
 * blobs of the older compiler are dropped and rebuilt. */
/* 2: Go functions from .gopclntab; 3: across systemstack and asmcgocall */
#define UNWIND_BLOB_VERSION 3
/* Rows per UnwindTable message: about 1 MiB of rows. */
#define UNWIND_CHUNK_ROWS ((1u << 20) / sizeof(struct sonde_unwind_row))
/* Ranges a builder accepts (before merging). */
#define UNWIND_MAX_SPANS (16u << 20)

/* Priorities of sources when ranges overlap: the higher wins. */
enum unwind_source {
	UNWIND_SRC_SYNTHETIC = 1, /* .plt rules for sections without FDEs */
	UNWIND_SRC_DEBUG_FRAME = 2,
	UNWIND_SRC_GOPCLNTAB = 3, /* Go's own frame sizes beat its .debug_frame */
	UNWIND_SRC_EH_FRAME = 4,
};

struct unwind_table;
struct unwind_builder;

struct unwind_builder *unwind_builder_new(void);
void unwind_builder_free(struct unwind_builder *b);
/* [start, end) (file offsets, end <= 2^32) follows row (row->pc ignored;
 * fields a kind does not use are cleared). Returns 0, -EINVAL for an
 * empty or out-of-range span, -E2BIG over UNWIND_MAX_SPANS, -ENOMEM. */
int unwind_builder_add(struct unwind_builder *b, uint64_t start, uint64_t end,
		       const struct sonde_unwind_row *row, enum unwind_source src);
/* Builds the table: where ranges overlap, the higher source wins, then
 * the range that starts first (a later one keeps only what is left);
 * addresses between ranges get SONDE_CFA_UNSUPPORTED rows (one after the
 * last range too); identical neighbours are merged. b stays the caller's.
 * Returns 0, -E2BIG over SONDE_UNWIND_MAX_ROWS_PER_FILE, -ENOMEM. */
int unwind_builder_finish(struct unwind_builder *b, struct unwind_table **ret);

/* The rows, borrowed; *ret_n gets the count (may be 0). */
const struct sonde_unwind_row *unwind_table_rows(const struct unwind_table *t, size_t *ret_n);
size_t unwind_table_count(const struct unwind_table *t);
/* The row that holds at file offset off: the last row with pc <= off.
 * Returns 0 or -ENOENT (off before the first row). */
int unwind_table_lookup(const struct unwind_table *t, uint64_t off, struct sonde_unwind_row *ret);
/* Writes rows [first, first+n) in the wire format (12 bytes each,
 * little-endian) to out, which has room for n * 12 bytes. first + n must
 * not exceed the count. */
void unwind_table_pack(const struct unwind_table *t, size_t first, size_t n, uint8_t *out);

/* A digest of the table's wire rows, their count and the formats: the
 * same for the same rows in any process (UnwindTable.table_version);
 * never 0. */
uint64_t unwind_table_version(const struct unwind_table *t);

/* Cache blob: malloc'd (caller frees) or NULL; deserialize returns NULL
 * on any inconsistency (wrong magic/version, size, CRC, unsorted rows,
 * unknown kinds). */
void *unwind_table_serialize(const struct unwind_table *t, size_t *ret_size);
struct unwind_table *unwind_table_deserialize(const void *blob, size_t size);
void unwind_table_free(struct unwind_table *t);
