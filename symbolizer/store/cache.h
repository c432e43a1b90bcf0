/* cache.h - the file-analysis cache: one SQLite database (--cache PATH)
 * holding, per file ID, the results of analysing that file: its symtab
 * and its unwind table, each or the error that made it fail, plus a
 * bounded in-memory LRU of deserialised results above it. The profile store (profile.h) keeps its
 * tables in the same database.
 *
 * The database is in WAL mode and carries its schema version in
 * PRAGMA user_version. A file that is not a database or fails the quick
 * check is renamed to PATH.corrupt-YYYYmmddTHHMMSS and replaced by a fresh
 * one; a database with a newer schema, or an unrelated database, is
 * refused. Not thread-safe.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fileid.h"
#include "symtab.h"
#include "unwind_table.h"
#include "line_index.h"
#include "interp_loader.h"

/* 2: the unwind table, a second product per file (table unwind).
 * 3: the source index (line_index.h), a third product (table lines).
 * 4: profiles keep raw stacks and thread IDs (stacks.raw, samples.tid).
 * 5: files without a source index are forgotten once (analysed again).
 * 6: samples carry the span they were taken in.
 * 7: probe plans of Go executables (table probe_plans).
 * 8: unwind tables and plans forgotten once (analysed and planned again).
 * 9: the interpreter Loader's Data (table interp).
 * 10: every analysis forgotten once (source index format 3).
 * 11: the source index format in table meta; another one at open forgets
 *     every analysis (cache.c forget_other_index_formats).
 * 12: stacks found by an indexed digest (profile.c), not UNIQUE (text,
 *     raw); stored profiles dropped.
 * 13: samples carry their process's uid; stored profiles dropped. */
#define CACHE_SCHEMA_VERSION 16

struct cache;

struct cache_opts {
	size_t mem_max_entries; /* 0: 4096 */
	size_t mem_max_bytes;   /* serialised size of held symtabs; 0: 256 MiB */
};

enum cache_status {
	CACHE_MISS = 0,  /* never analysed */
	CACHE_OK = 1,    /* analysed: symtab */
	CACHE_ERROR = 2, /* analysis failed: error text */
};

struct cache_stats {
	uint64_t mem_hits;
	uint64_t db_hits;
	uint64_t misses;
	uint64_t mem_entries;
	uint64_t mem_bytes;
	uint64_t files_ok;     /* rows in the database */
	uint64_t files_failed; /* rows in the database */
	uint64_t unwind_ok;     /* unwind tables in the database */
	uint64_t unwind_failed; /* unwind errors in the database */
};

/* Opens or creates the database at path (see above for corrupt files).
 * opts may be NULL. Returns 0, -EPROTONOSUPPORT for a newer schema,
 * -EEXIST for a database that is not a sonde cache, -EIO/-ENOMEM/... on
 * other failures; *ret untouched on failure. Logs what it renamed. */
int cache_open(const char *path, const struct cache_opts *opts, struct cache **ret);
/* Accepts NULL. */
void cache_close(struct cache *c);

/* Looks id up in memory, then in the database. CACHE_OK: *ret_symtab is
 * borrowed; CACHE_ERROR: *ret_error is borrowed. Either stays valid until
 * the next cache_lookup or cache_store (which may evict). A row whose
 * blob does not deserialise is deleted and reported as a miss. Both ret
 * pointers may be NULL. */
enum cache_status cache_lookup(struct cache *c, const struct fileid *id,
			       const struct symtab **ret_symtab, const char **ret_error);
/* Whether id has a result, without counting a hit or miss or loading. */
int cache_contains(struct cache *c, const struct fileid *id);
/* Stores the result for id: t (taken: the cache owns it now, also on
 * failure) for success, or t == NULL and error (copied) for a failure.
 * Returns 0 or a negative errno (the memory entry is kept anyway). */
int cache_store(struct cache *c, const struct fileid *id, struct symtab *t, const char *error,
		int64_t analysed_at);
/* The file ID of an analysed file with this GNU build ID. Returns 0 or
 * -ENOENT. */
int cache_find_build_id(struct cache *c, const uint8_t *build_id, size_t len,
			struct fileid *ret_id);
void cache_get_stats(struct cache *c, struct cache_stats *ret);

/* The unwind table of id, like cache_lookup: CACHE_OK with *ret_table
 * (borrowed, valid until the next lookup or store), CACHE_ERROR with
 * *ret_error, or CACHE_MISS (never compiled, or compiled by an older
 * UNWIND_BLOB_VERSION: the row is dropped so the file is analysed again). */
enum cache_status cache_lookup_unwind(struct cache *c, const struct fileid *id,
				      const struct unwind_table **ret_table,
				      const char **ret_error);
/* Stores the unwind result for id: t (taken, also on failure) or
 * t == NULL and error (copied). Returns 0 or a negative errno. */
int cache_store_unwind(struct cache *c, const struct fileid *id, struct unwind_table *t,
		       const char *error, int64_t analysed_at);

/* The probe plan of id (a packed sonde.v1.ProbePlan, docs/go-probes.md):
 * 0 with *ret (malloc'd, the caller frees) and *ret_len; -ENOENT when the
 * file has none (not a Go executable, or not analysed), -ENOMEM, -EIO. Not
 * kept in the memory LRU: looked up once per sensor per file. */
int cache_lookup_plan(struct cache *c, const struct fileid *id, void **ret, size_t *ret_len);
/* Stores it (plan borrowed). Returns 0 or a negative errno. */
int cache_store_plan(struct cache *c, const struct fileid *id, const void *plan, size_t len,
		     int64_t analysed_at);
/* The source index of id, like cache_lookup_unwind: CACHE_OK with
 * *ret_index (borrowed, valid until the next lookup or store), CACHE_ERROR,
 * or CACHE_MISS (not built, or not yet). An index that does not
 * deserialise (damaged: another LINE_INDEX_VERSION is forgotten at open)
 * forgets the file's whole analysis, so the file is analysed again: the
 * next cache_lookup of id misses (a symtab it returned before stays valid
 * until then). ret pointers may be NULL. */
enum cache_status cache_lookup_index(struct cache *c, const struct fileid *id,
				     const struct line_index **ret_index, const char **ret_error);
/* Stores the index of id: ix (taken, also on failure) or ix == NULL and
 * error (copied). Returns 0 or a negative errno. */
int cache_store_index(struct cache *c, const struct fileid *id, struct line_index *ix,
		      const char *error, int64_t analysed_at);

/* The interpreter Data of id (interp_loader.h): CACHE_OK with *ret,
 * CACHE_ERROR when the file was looked at and is not a supported
 * interpreter (why copied into errbuf), or CACHE_MISS. ret and errbuf may
 * be NULL. */
enum cache_status cache_lookup_interp(struct cache *c, const struct fileid *id,
				      struct interp_data *ret, char *errbuf, size_t errlen);
/* Stores d (copied) or, with d == NULL, error. Returns 0 or a negative
 * errno. */
int cache_store_interp(struct cache *c, const struct fileid *id, const struct interp_data *d,
		       const char *error, int64_t analysed_at);
