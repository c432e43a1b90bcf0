/* cache.c - SQLite file-analysis cache with an in-memory LRU above it.
 *
 * Schema (user_version 16):
 *   files(file_id BLOB PK, status INT (0 ok, 1 error), error TEXT,
 *         analysed_at INT (unix s), build_id BLOB, symtab BLOB)
 *   unwind(file_id BLOB PK, status INT (0 ok, 1 error), error TEXT,
 *          analysed_at INT, n_rows INT, tbl BLOB)     -- since version 2
 *   lines(file_id BLOB PK, status INT, error TEXT, analysed_at INT,
 *         idx BLOB)                                    -- since version 3
 *   meta(key TEXT PK, value INT): 'line_index_version' -- since version 11
 * A version 1 cache gets the unwind table added; its files then have a
 * symtab but no unwind row, which the service treats as "analyse again".
 *   stacks(id INTEGER PK, hash INT, text TEXT, raw BLOB; INDEX(hash))
 *                                                      -- profile.c, version 12
 *   nodes(id INTEGER PK, name TEXT UNIQUE)           -- version 14
 *   samples(minute, node, pid, start, tid, span, stack_id, uid, profile,
 *           count, weight;
 *           PK(minute, node, pid, start, tid, span, stack_id, uid, profile))
 *                                                      -- version 16
 * The database file is outside input too: a blob that does not
 * deserialise is dropped and its file analysed again.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "log.h"
#include "hmap.h"
#include "store_internal.h"

#define MEM_MAX_ENTRIES_DEFAULT 4096
#define MEM_MAX_BYTES_DEFAULT (256u << 20)

/* The products the cache holds in memory as well as in SQLite, keyed by
 * (file ID, kind). */
enum mem_kind {
	MEM_SYMTAB = 0,
	MEM_UNWIND = 1,
	MEM_INDEX = 2,
	MEM_KINDS
};

struct mem_key {
	uint8_t id[FILEID_LEN];
	uint8_t kind;
};
_Static_assert(sizeof(struct mem_key) == FILEID_LEN + 1, "mem_key has no padding");

struct mem_entry {
	struct mem_key key;
	enum cache_status status;
	void *product; /* CACHE_OK: the kind's object (products[kind]) */
	char *error;
	size_t bytes;
	/* The analysis was forgotten (a damaged source index): dropped at
	 * the next lookup, not now, since a caller may hold its symtab. */
	bool stale;
	struct mem_entry *prev, *next; /* LRU list, most recent first */
};

struct cache {
	sqlite3 *db;
	/* Per kind: its row by file ID (status, error, blob), and deleting it.
	 * Storing binds differ per kind (st_put, st_uput, st_lput). */
	sqlite3_stmt *st_row[MEM_KINDS], *st_drop[MEM_KINDS];
	sqlite3_stmt *st_put, *st_bid, *st_has, *st_count;
	sqlite3_stmt *st_uput, *st_ucount;
	sqlite3_stmt *st_lput;
	sqlite3_stmt *st_pget, *st_pput;
	sqlite3_stmt *st_iget, *st_iput;
	struct checkpointer *ckpt; /* NULL: SQLite's own checkpoints (or :memory:) */
	struct hmap *mem; /* mem_key -> mem_entry */
	struct mem_entry *head, *tail;
	size_t mem_bytes;
	size_t max_entries, max_bytes;
	struct cache_stats stats;
};

/* How each kind is read from its blob, written, measured and freed, what
 * its failure reads as when the row has no message, and what a damaged
 * blob costs: its own row, or (a source index, which nothing would build
 * again for a file whose analysis is cached) the file's whole analysis. */
struct product_ops {
	const char *name;
	const char *default_error;
	void *(*load)(const void *blob, size_t size);
	void *(*save)(const void *obj, size_t *ret_size);
	size_t (*bytes)(const void *obj, size_t blob_size);
	void (*free)(void *obj);
	bool damage_forgets_analysis;
};

static void *symtab_load(const void *b, size_t n) { return symtab_deserialize(b, n); }
static void *symtab_save(const void *o, size_t *n) { return symtab_serialize(o, n); }
static void symtab_drop(void *o) { symtab_free(o); }
static void *unwind_load(const void *b, size_t n) { return unwind_table_deserialize(b, n); }
static void *unwind_save(const void *o, size_t *n) { return unwind_table_serialize(o, n); }
static void unwind_drop(void *o) { unwind_table_free(o); }
static void *index_load(const void *b, size_t n) { return line_index_deserialize(b, n); }
static void *index_save(const void *o, size_t *n) { return line_index_serialize(o, n); }
static void index_drop(void *o) { line_index_free(o); }

static size_t blob_bytes(const void *obj, size_t blob_size)
{
	(void)obj;
	return blob_size;
}

static size_t index_bytes(const void *obj, size_t blob_size)
{
	(void)blob_size;
	return line_index_bytes(obj);
}

static const struct product_ops products[MEM_KINDS] = {
	[MEM_SYMTAB] = { "analysis", "analysis failed", symtab_load, symtab_save, blob_bytes,
			 symtab_drop, false },
	[MEM_UNWIND] = { "unwind table", "unwind table compilation failed", unwind_load,
			 unwind_save, blob_bytes, unwind_drop, false },
	[MEM_INDEX] = { "source index", "no source index", index_load, index_save, index_bytes,
			index_drop, true },
};

static const char schema_v1[] =
	"CREATE TABLE files ("
	" file_id BLOB PRIMARY KEY NOT NULL CHECK (length(file_id) = 16),"
	" status INTEGER NOT NULL,"
	" error TEXT,"
	" analysed_at INTEGER NOT NULL,"
	" build_id BLOB,"
	" symtab BLOB"
	") WITHOUT ROWID;"
	"CREATE INDEX files_by_build_id ON files(build_id) WHERE build_id IS NOT NULL;"
	"CREATE TABLE stacks (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);"
	"CREATE TABLE samples ("
	" minute INTEGER NOT NULL, pid INTEGER NOT NULL, stack_id INTEGER NOT NULL,"
	" count INTEGER NOT NULL, PRIMARY KEY (minute, pid, stack_id)) WITHOUT ROWID;";

static const char schema_v2[] =
	"CREATE TABLE unwind ("
	" file_id BLOB PRIMARY KEY NOT NULL CHECK (length(file_id) = 16),"
	" status INTEGER NOT NULL,"
	" error TEXT,"
	" analysed_at INTEGER NOT NULL,"
	" n_rows INTEGER NOT NULL DEFAULT 0,"
	" tbl BLOB"
	") WITHOUT ROWID;";

static const char schema_v3[] =
	"CREATE TABLE lines ("
	" file_id BLOB PRIMARY KEY NOT NULL CHECK (length(file_id) = 16),"
	" status INTEGER NOT NULL,"
	" error TEXT,"
	" analysed_at INTEGER NOT NULL,"
	" idx BLOB"
	") WITHOUT ROWID;";

/* Profiles keep the raw stack (core/rawstack.h) next to its folded
 * text, and the thread: exports symbolize each frame with lines and
 * label samples by thread. Stored profiles are recent data: the old
 * tables are dropped, not converted. */
static const char schema_v4[] =
	"DROP TABLE samples;"
	"DROP TABLE stacks;"
	"CREATE TABLE stacks (id INTEGER PRIMARY KEY, text TEXT NOT NULL, raw BLOB NOT NULL,"
	" UNIQUE (text, raw));"
	"CREATE TABLE samples ("
	" minute INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL,"
	" stack_id INTEGER NOT NULL, count INTEGER NOT NULL,"
	" PRIMARY KEY (minute, pid, tid, stack_id)) WITHOUT ROWID;";

/* Files analysed before the source index existed (or whose index was
 * dropped for a newer format) would never get one: a file in the cache
 * is not analysed again. Forgetting them once makes the next sensor that
 * maps them bring them back whole. */
static const char schema_v5[] =
	"DELETE FROM files WHERE file_id NOT IN (SELECT file_id FROM lines);";

/* Samples carry the span the sampled goroutine served (Go probes,
 * docs/go-probes.md): trace ID and span ID, 24 bytes, or empty. Part of
 * the key, so samples of different requests stay apart. Recent data:
 * dropped, not converted. */
static const char schema_v6[] =
	"DROP TABLE samples;"
	"CREATE TABLE samples ("
	" minute INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL,"
	" span BLOB NOT NULL, stack_id INTEGER NOT NULL, count INTEGER NOT NULL,"
	" PRIMARY KEY (minute, pid, tid, span, stack_id)) WITHOUT ROWID;";

/* The probe plan of a Go executable (docs/go-probes.md): a packed
 * sonde.v1.ProbePlan, sent as it is to the sensors that map the file.
 * IF NOT EXISTS: a cache whose version was set back (as
 * test_source_index_rebuilt_for_files_analysed_before_it does) has it. */
static const char schema_v7[] =
	"CREATE TABLE IF NOT EXISTS probe_plans ("
	" file_id BLOB PRIMARY KEY NOT NULL CHECK (length(file_id) = 16),"
	" analysed_at INTEGER NOT NULL,"
	" plan BLOB NOT NULL"
	") WITHOUT ROWID;";

/* Plans are made in a file's analysis with its unwind table, so a Go
 * executable whose unwind table was cached before schema 7 never got one,
 * and plans of older planners may lack what is read now (go1.17's
 * buildinfo layout): forget unwind tables and plans once, so every
 * executable a sensor maps is analysed, and planned, again. */
static const char schema_v8[] =
	"DELETE FROM probe_plans;"
	"DELETE FROM unwind;";

/* The interpreter Loader's Data (symbolizer/interp/interp_loader.h), a
 * fourth product, for files named like interpreters only: status 0 with
 * kind, version and runtime offset, or 1 with why not. Small: no blob, no
 * memory entry. */
static const char schema_v9[] =
	"CREATE TABLE IF NOT EXISTS interp ("
	" file_id BLOB PRIMARY KEY NOT NULL CHECK (length(file_id) = 16),"
	" status INTEGER NOT NULL,"
	" error TEXT,"
	" analysed_at INTEGER NOT NULL,"
	" kind INTEGER NOT NULL DEFAULT 0,"
	" major INTEGER NOT NULL DEFAULT 0,"
	" minor INTEGER NOT NULL DEFAULT 0,"
	" runtime_offset INTEGER NOT NULL DEFAULT 0"
	") WITHOUT ROWID;";

/* Source indexes of format 3 (DWZ alternate files read): an index of an
 * older format does not load, and nothing would build it again for a file
 * whose analysis is cached, so forget every analysis once: each file is
 * analysed again, as in a new cache, when a sensor or client next has it. */
static const char schema_v10[] =
	"DELETE FROM lines;"
	"DELETE FROM unwind;"
	"DELETE FROM probe_plans;"
	"DELETE FROM interp;"
	"DELETE FROM files;";

/* The source index format the cached indexes were built with: a
 * different LINE_INDEX_VERSION forgets every analysis at open
 * (forget_other_formats), without a schema step of its own. Every
 * index was of format 3 after step 10. */
static const char schema_v11[] =
	"CREATE TABLE IF NOT EXISTS meta ("
	" key TEXT PRIMARY KEY NOT NULL,"
	" value INTEGER NOT NULL"
	") WITHOUT ROWID;"
	"INSERT OR IGNORE INTO meta (key, value) VALUES ('line_index_version', 3);";

/* Stacks are found by a 64-bit digest of their text and raw frames
 * (profile.c), indexed, instead of by UNIQUE (text, raw): that index held
 * a second copy of every stack, kilobytes a key, and looking up or
 * inserting a new stack walked and rewrote pages of it (most of the
 * symbolizer's profile-store time). Recent data: dropped, not converted. */
static const char schema_v12[] =
	"DROP TABLE samples;"
	"DROP TABLE stacks;"
	"CREATE TABLE stacks (id INTEGER PRIMARY KEY, hash INTEGER NOT NULL, text TEXT NOT NULL,"
	" raw BLOB NOT NULL);"
	"CREATE INDEX stacks_by_hash ON stacks(hash);"
	"CREATE TABLE samples ("
	" minute INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL,"
	" span BLOB NOT NULL, stack_id INTEGER NOT NULL, count INTEGER NOT NULL,"
	" PRIMARY KEY (minute, pid, tid, span, stack_id)) WITHOUT ROWID;";

/* Samples carry their process's owner (uid), so queries can be scoped to
 * one user's processes (docs/security.md, roles). Recent data: dropped,
 * not converted (the old rows have no owner: nobody but an admin could
 * have been shown them). The key's columns come first: with uid after
 * count, quick_check (SQLite 3.40.1) reported "NULL value in
 * samples.count" for rows an upsert wrote, and the next open moved the
 * cache aside as corrupt (test-store under MALLOC_PERTURB_). */
static const char schema_v13[] =
	"DROP TABLE samples;"
	"CREATE TABLE samples ("
	" minute INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL,"
	" span BLOB NOT NULL, stack_id INTEGER NOT NULL, uid INTEGER NOT NULL,"
	" count INTEGER NOT NULL,"
	" PRIMARY KEY (minute, pid, tid, span, stack_id, uid)) WITHOUT ROWID;";

/* Samples are keyed by the node that sent them and the process's start
 * time too: pids collide across a fleet (and recur on one node), and one
 * symbolizer serves many nodes. Recent data: dropped, not converted (the
 * old rows do not say which node they came from). */
static const char schema_v14[] =
	"DROP TABLE samples;"
	"CREATE TABLE IF NOT EXISTS nodes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"CREATE TABLE samples ("
	" minute INTEGER NOT NULL, node INTEGER NOT NULL, pid INTEGER NOT NULL,"
	" start INTEGER NOT NULL, tid INTEGER NOT NULL, span BLOB NOT NULL,"
	" stack_id INTEGER NOT NULL, uid INTEGER NOT NULL, count INTEGER NOT NULL,"
	" PRIMARY KEY (minute, node, pid, start, tid, span, stack_id, uid)) WITHOUT ROWID;";

/* The interpreter Loader's Data carries per-file bytes for the runtime's
 * config (a JIT runtime's constants read from the file,
 * interp_data.data): every file is analysed for it again. The table is
 * made anew (not altered), so that replaying this step over a cache set
 * back to an older version finds nothing in its way. */
static const char schema_v15[] =
	"DROP TABLE IF EXISTS interp;"
	"CREATE TABLE interp ("
	" file_id BLOB PRIMARY KEY NOT NULL CHECK (length(file_id) = 16),"
	" status INTEGER NOT NULL,"
	" error TEXT,"
	" analysed_at INTEGER NOT NULL,"
	" kind INTEGER NOT NULL DEFAULT 0,"
	" major INTEGER NOT NULL DEFAULT 0,"
	" minor INTEGER NOT NULL DEFAULT 0,"
	" runtime_offset INTEGER NOT NULL DEFAULT 0,"
	" data BLOB"
	") WITHOUT ROWID;";

/* Samples carry their profile type (CPU, off-CPU, memory) and the sum of
 * their weights. Recent data: the table is made anew. */
static const char schema_v16[] =
	"DROP TABLE samples;"
	"CREATE TABLE samples ("
	" minute INTEGER NOT NULL, node INTEGER NOT NULL, pid INTEGER NOT NULL,"
	" start INTEGER NOT NULL, tid INTEGER NOT NULL, span BLOB NOT NULL,"
	" stack_id INTEGER NOT NULL, uid INTEGER NOT NULL, profile INTEGER NOT NULL,"
	" count INTEGER NOT NULL, weight INTEGER NOT NULL,"
	" PRIMARY KEY (minute, node, pid, start, tid, span, stack_id, uid, profile)) WITHOUT ROWID;";

/* Migrations from version i to i + 1 go here as they appear; index 0
 * creates the schema in an empty database. */
static const char *const migrations[CACHE_SCHEMA_VERSION] = { schema_v1, schema_v2, schema_v3,
									 schema_v4, schema_v5, schema_v6,
									 schema_v7, schema_v8, schema_v9,
									 schema_v10, schema_v11, schema_v12,
									 schema_v13, schema_v14, schema_v15,
									 schema_v16 };

static int sqlite_to_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return -EBADMSG;
	case SQLITE_CANTOPEN:
	case SQLITE_PERM:
	case SQLITE_READONLY:
		return -EACCES;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	default:
		return -EIO;
	}
}

static int exec_int(sqlite3 *db, const char *sql, int64_t *ret)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			if (ret)
				*ret = sqlite3_column_int64(st, 0);
			rc = SQLITE_OK;
		} else if (rc == SQLITE_DONE) {
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(st);
	return sqlite_to_errno(rc);
}

/* A format the cache records in meta under key: when the cache's is not
 * want (or is not recorded), run forget (DELETE statements) and record
 * want, in one transaction. What is forgotten is analysed again, as in a
 * new cache, when a sensor or client next has the file. */
struct cache_format {
	const char *key;
	int want;
	const char *forget;
	const char *what; /* for the log */
};

static int forget_other_format(sqlite3 *db, const struct cache_format *f)
{
	int64_t have = -1;
	char sql[512], *errmsg = NULL;
	int rc, r;

	snprintf(sql, sizeof(sql), "SELECT value FROM meta WHERE key = '%s'", f->key);
	r = exec_int(db, sql, &have);
	if (r < 0 || have == f->want)
		return r;
	snprintf(sql, sizeof(sql),
		 "BEGIN IMMEDIATE; %s"
		 "INSERT OR REPLACE INTO meta (key, value) VALUES ('%s', %d);"
		 "COMMIT;",
		 f->forget, f->key, f->want);
	rc = sqlite3_exec(db, sql, NULL, NULL, &errmsg);
	if (rc != SQLITE_OK) {
		log_debug("forgetting %s of format %lld failed: %s", f->what, (long long)have,
			  errmsg ? errmsg : "?");
		sqlite3_free(errmsg);
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		r = sqlite_to_errno(rc);
		return r ? r : -EIO;
	}
	if (have >= 0)
		log_info("cached %s are of format %lld, this symbolizer's are %d: they will be "
			 "analysed again", f->what, (long long)have, f->want);
	return 0;
}

/* Source indexes of another LINE_INDEX_VERSION do not load, and nothing
 * would build one again for a file whose analysis is cached: every
 * analysis is forgotten. An interpreter's Data of another
 * INTERP_DATA_VERSION would give the sensor a config of the wrong layout:
 * only those rows are forgotten (the ingest asks for a new analysis of a
 * cached file without one). */
static const struct cache_format cache_formats[] = {
	{ "line_index_version", LINE_INDEX_VERSION,
	  "DELETE FROM lines; DELETE FROM unwind; DELETE FROM probe_plans;"
	  "DELETE FROM interp; DELETE FROM files;",
	  "source indexes" },
	{ "interp_data_version", INTERP_DATA_VERSION, "DELETE FROM interp;",
	  "interpreter configs" },
};

static int forget_other_formats(sqlite3 *db)
{
	for (size_t i = 0; i < sizeof(cache_formats) / sizeof(cache_formats[0]); i++) {
		int r = forget_other_format(db, &cache_formats[i]);

		if (r < 0)
			return r;
	}
	return 0;
}

/* A file's symbols are stored when its analysis ends, its source index
 * when the index worker is done with it, later; a symbolizer killed in
 * between leaves symbols without an index row, and nothing would build
 * that index again (the file counts as analysed). At open nothing of ours
 * is in between, so such a file is forgotten and analysed again when a
 * sensor or client next has it. (A second symbolizer on the same cache,
 * `sonde record`'s, may be in between for one of its files: that file is
 * analysed once more than needed.) */
static int forget_unindexed(sqlite3 *db)
{
	int r, n;

	r = exec_int(db, "DELETE FROM files WHERE status = 0 AND file_id NOT IN "
			 "(SELECT file_id FROM lines)", NULL);
	if (r < 0) {
		log_debug("forgetting files without a source index failed: %s", sqlite3_errmsg(db));
		return r;
	}
	n = sqlite3_changes(db);
	if (n > 0)
		log_warn("%d cached file%s had symbols but no source index (a symbolizer stopped "
			 "in between): forgotten, to be analysed again", n, n == 1 ? "" : "s");
	return 0;
}

/* Opens path and brings it to our schema. -EBADMSG: not a database or
 * corrupt (the caller moves it aside). */
static int db_open_once(const char *path, sqlite3 **ret_db)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t version = 0, n_objects = 0;
	char *errmsg = NULL;
	int rc, r;

	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				 SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		r = sqlite_to_errno(rc);
		goto cleanup;
	}
	sqlite3_extended_result_codes(db, 0);
	sqlite3_busy_timeout(db, 2000);
	/* The first statement that reads the file tells a non-database apart. */
	r = exec_int(db, "PRAGMA journal_mode=WAL", NULL);
	if (r < 0)
		goto cleanup;
	/* quick_check reads every page once: corruption found now is
	 * handled here instead of as failures at random later. */
	rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &st, NULL);
	if (rc != SQLITE_OK) {
		r = sqlite_to_errno(rc);
		goto cleanup;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		r = sqlite_to_errno(rc);
		if (r == 0)
			r = -EIO;
		goto cleanup;
	}
	if (strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
		r = -EBADMSG;
		goto cleanup;
	}
	sqlite3_finalize(st);
	st = NULL;
	r = exec_int(db, "PRAGMA user_version", &version);
	if (r < 0)
		goto cleanup;
	if (version > CACHE_SCHEMA_VERSION) {
		log_debug("%s has schema version %lld, newer than %d", path, (long long)version,
			  CACHE_SCHEMA_VERSION);
		r = -EPROTONOSUPPORT;
		goto cleanup;
	}
	if (version == 0) {
		r = exec_int(db, "SELECT count(*) FROM sqlite_master", &n_objects);
		if (r < 0)
			goto cleanup;
		if (n_objects > 0) {
			r = -EEXIST; /* someone else's database: leave it alone */
			goto cleanup;
		}
	}
	/* Before the schema steps: with WAL, NORMAL syncs at checkpoints, not
	 * at every commit, and a new cache's steps were a dozen fsyncs (a
	 * third of a second on this kind of VM, where `sonde symbolize` with
	 * no service running makes its cache). */
	r = exec_int(db, "PRAGMA synchronous=NORMAL", NULL);
	if (r < 0)
		goto cleanup;
	/* The sandbox lets the symbolizer write in its cache directory only,
	 * not in the directories SQLite puts temporary files in (/var/tmp,
	 * /tmp): a sort or GROUP BY that outgrows the page cache (a Folded
	 * query over a few thousand distinct stacks) would spill to a file
	 * there and fail with a disk I/O error, so they stay in memory. */
	r = exec_int(db, "PRAGMA temp_store=MEMORY", NULL);
	if (r < 0)
		goto cleanup;
	for (int64_t v = version; v < CACHE_SCHEMA_VERSION; v++) {
		char sql[64];

		rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &errmsg);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db, migrations[v], NULL, NULL, &errmsg);
		snprintf(sql, sizeof(sql), "PRAGMA user_version=%lld", (long long)v + 1);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db, sql, NULL, NULL, &errmsg);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db, "COMMIT", NULL, NULL, &errmsg);
		if (rc != SQLITE_OK) {
			log_debug("schema step %lld failed: %s", (long long)v, errmsg ? errmsg : "?");
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			r = sqlite_to_errno(rc);
			if (r == 0)
				r = -EIO;
			goto cleanup;
		}
	}
	r = forget_other_formats(db);
	if (r < 0)
		goto cleanup;
	r = forget_unindexed(db);
	if (r < 0)
		goto cleanup;
	*ret_db = db;
	db = NULL;
	r = 0;
cleanup:
	sqlite3_free(errmsg);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return r;
}

static int move_aside(const char *path)
{
	char stamp[32], *dst = NULL, side[4096];
	time_t now = time(NULL);
	struct tm tm;
	int r = 0;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	if (asprintf(&dst, "%s.corrupt-%s", path, stamp) < 0)
		return -ENOMEM;
	if (rename(path, dst) < 0) {
		r = -errno;
		log_error_errno(r, "cannot move corrupt cache %s aside", path);
	} else {
		log_warn("cache %s is not a valid database; moved it to %s and starting a fresh one",
			 path, dst);
	}
	/* A stale WAL would be replayed into the fresh database. */
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
	free(dst);
	return r;
}

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st)
{
	return sqlite_to_errno(sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL));
}

int cache_open(const char *path, const struct cache_opts *opts, struct cache **ret)
{
	struct cache *c = NULL;
	sqlite3 *db = NULL;
	int r;

	r = db_open_once(path, &db);
	if (r == -EBADMSG) {
		r = move_aside(path);
		if (r < 0)
			goto cleanup;
		r = db_open_once(path, &db);
	}
	if (r < 0)
		goto cleanup;
	c = calloc(1, sizeof(*c));
	if (!c) {
		r = -ENOMEM;
		goto cleanup;
	}
	c->db = db;
	db = NULL;
	c->max_entries = opts && opts->mem_max_entries ? opts->mem_max_entries
						       : MEM_MAX_ENTRIES_DEFAULT;
	c->max_bytes = opts && opts->mem_max_bytes ? opts->mem_max_bytes : MEM_MAX_BYTES_DEFAULT;
	c->mem = hmap_new();
	if (!c->mem) {
		r = -ENOMEM;
		goto cleanup;
	}
	if ((r = prepare(c->db, "SELECT status, error, symtab FROM files WHERE file_id = ?1",
			 &c->st_row[MEM_SYMTAB])) < 0 ||
	    (r = prepare(c->db,
			 "INSERT OR REPLACE INTO files (file_id, status, error, analysed_at,"
			 " build_id, symtab) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
			 &c->st_put)) < 0 ||
	    (r = prepare(c->db, "DELETE FROM files WHERE file_id = ?1", &c->st_drop[MEM_SYMTAB])) < 0 ||
	    (r = prepare(c->db,
			 "SELECT file_id FROM files WHERE build_id = ?1 AND status = 0 LIMIT 1",
			 &c->st_bid)) < 0 ||
	    (r = prepare(c->db, "SELECT 1 FROM files WHERE file_id = ?1", &c->st_has)) < 0 ||
	    (r = prepare(c->db, "SELECT status, count(*) FROM files GROUP BY status",
			 &c->st_count)) < 0 ||
	    (r = prepare(c->db, "SELECT status, error, tbl FROM unwind WHERE file_id = ?1",
			 &c->st_row[MEM_UNWIND])) < 0 ||
	    (r = prepare(c->db,
			 "INSERT OR REPLACE INTO unwind (file_id, status, error, analysed_at,"
			 " n_rows, tbl) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
			 &c->st_uput)) < 0 ||
	    (r = prepare(c->db, "DELETE FROM unwind WHERE file_id = ?1", &c->st_drop[MEM_UNWIND])) < 0 ||
	    (r = prepare(c->db, "SELECT status, count(*) FROM unwind GROUP BY status",
			 &c->st_ucount)) < 0 ||
	    (r = prepare(c->db, "SELECT status, error, idx FROM lines WHERE file_id = ?1",
			 &c->st_row[MEM_INDEX])) < 0 ||
	    (r = prepare(c->db,
			 "INSERT OR REPLACE INTO lines (file_id, status, error, analysed_at, idx)"
			 " VALUES (?1, ?2, ?3, ?4, ?5)",
			 &c->st_lput)) < 0 ||
	    (r = prepare(c->db, "DELETE FROM lines WHERE file_id = ?1", &c->st_drop[MEM_INDEX])) < 0 ||
	    (r = prepare(c->db, "SELECT plan FROM probe_plans WHERE file_id = ?1", &c->st_pget)) < 0 ||
	    (r = prepare(c->db,
			 "INSERT OR REPLACE INTO probe_plans (file_id, analysed_at, plan)"
			 " VALUES (?1, ?2, ?3)",
			 &c->st_pput)) < 0 ||
	    (r = prepare(c->db,
			 "SELECT status, error, kind, major, minor, runtime_offset, data FROM interp"
			 " WHERE file_id = ?1",
			 &c->st_iget)) < 0 ||
	    (r = prepare(c->db,
			 "INSERT OR REPLACE INTO interp (file_id, status, error, analysed_at, kind,"
			 " major, minor, runtime_offset, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
			 " ?9)",
			 &c->st_iput)) < 0)
		goto cleanup;
	if (strcmp(path, ":memory:") != 0) {
		int e = checkpointer_start(path, c->db, &c->ckpt);

		if (e < 0)
			log_warn("%s: no checkpoint thread (%s): the writer checkpoints", path,
				 strerror(-e));
	}
	*ret = c;
	c = NULL;
	r = 0;
cleanup:
	sqlite3_close(db);
	cache_close(c);
	return r;
}

static void mem_entry_free(void *p)
{
	struct mem_entry *e = p;

	if (!e)
		return;
	if (e->product)
		products[e->key.kind].free(e->product);
	free(e->error);
	free(e);
}

static void finalize_all(struct cache *c)
{
	sqlite3_stmt *other[] = { c->st_put, c->st_bid, c->st_has, c->st_count, c->st_uput,
				  c->st_ucount, c->st_lput, c->st_pget, c->st_pput,
				  c->st_iget, c->st_iput };

	for (size_t k = 0; k < MEM_KINDS; k++) {
		sqlite3_finalize(c->st_row[k]);
		sqlite3_finalize(c->st_drop[k]);
	}
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		sqlite3_finalize(other[i]);
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	checkpointer_stop(c->ckpt);
	hmap_free(c->mem, mem_entry_free);
	finalize_all(c);
	if (c->db) {
		/* Fold the WAL back so the file is self-contained at rest. */
		sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
		sqlite3_close_v2(c->db);
	}
	free(c);
}

sqlite3 *cache_db(struct cache *c)
{
	return c->db;
}

static void lru_unlink(struct cache *c, struct mem_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push_front(struct cache *c, struct mem_entry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
}

static void mem_drop(struct cache *c, struct mem_entry *e)
{
	lru_unlink(c, e);
	hmap_remove(c->mem, &e->key, sizeof(e->key));
	c->mem_bytes -= e->bytes;
	mem_entry_free(e);
}

static void mem_evict(struct cache *c)
{
	/* The two newest entries always stay, even if they alone are over the
	 * cap: the caller is about to use them (a symtab and the source index
	 * of one file are looked up together). */
	while (c->tail && c->tail != c->head && c->tail != c->head->next &&
	       (hmap_count(c->mem) > c->max_entries || c->mem_bytes > c->max_bytes))
		mem_drop(c, c->tail);
}

static struct mem_key mem_key(const struct fileid *id, enum mem_kind kind)
{
	struct mem_key k;

	memcpy(k.id, id->bytes, FILEID_LEN);
	k.kind = (uint8_t)kind;
	return k;
}

/* Takes product (an object of kind, or NULL for an error entry) and a
 * copy of error. Returns the entry, or NULL with the product freed. */
static struct mem_entry *mem_insert(struct cache *c, const struct fileid *id, enum mem_kind kind,
				    void *product, const char *error, size_t bytes)
{
	struct mem_entry *e = calloc(1, sizeof(*e)), *old = NULL;

	if (!e || (error && !(e->error = strdup(error)))) {
		free(e);
		if (product)
			products[kind].free(product);
		return NULL;
	}
	e->key = mem_key(id, kind);
	e->status = product ? CACHE_OK : CACHE_ERROR;
	e->product = product;
	e->bytes = bytes + sizeof(*e) + (error ? strlen(error) : 0);
	if (hmap_put(c->mem, &e->key, sizeof(e->key), e, (void **)&old) < 0) {
		mem_entry_free(e);
		return NULL;
	}
	if (old) {
		lru_unlink(c, old);
		c->mem_bytes -= old->bytes;
		mem_entry_free(old);
	}
	lru_push_front(c, e);
	c->mem_bytes += e->bytes;
	mem_evict(c);
	return e;
}

/* Runs a one-parameter statement on id (a delete); failures are logged. */
static void run_on_id(struct cache *c, sqlite3_stmt *st, const struct fileid *id)
{
	sqlite3_reset(st);
	sqlite3_bind_blob(st, 1, id, sizeof(*id), SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE)
		log_debug("cache delete failed: %s", sqlite3_errmsg(c->db));
	sqlite3_reset(st);
}

/* Deletes id's analysis (its symtab row and source index row) and marks
 * its memory entry stale. */
static void forget_analysis(struct cache *c, const struct fileid *id)
{
	struct mem_key key = mem_key(id, MEM_SYMTAB);
	struct mem_entry *e = hmap_get(c->mem, &key, sizeof(key));

	run_on_id(c, c->st_drop[MEM_INDEX], id);
	run_on_id(c, c->st_drop[MEM_SYMTAB], id);
	if (e)
		e->stale = true;
}

/* A row of kind whose blob does not deserialise (damaged, or written by
 * another version of its format): dropped, with what product_ops says. */
static void drop_damaged(struct cache *c, const struct fileid *id, enum mem_kind kind)
{
	const struct product_ops *ops = &products[kind];
	char hex[FILEID_HEX_LEN + 1];

	log_warn("the cached %s of %s does not deserialise; dropping %s so it is analysed again",
		 ops->name, fileid_to_hex(id, hex),
		 ops->damage_forgets_analysis ? "the file's analysis" : "it");
	if (ops->damage_forgets_analysis)
		forget_analysis(c, id);
	else
		run_on_id(c, c->st_drop[kind], id);
}

/* Reads id's row of kind from SQLite into the memory LRU. Returns its
 * entry, or NULL: no row (*ret_found false), a damaged row (dropped,
 * *ret_found false) or out of memory (*ret_found true). */
static struct mem_entry *load_row(struct cache *c, const struct fileid *id, enum mem_kind kind,
				  bool *ret_found)
{
	const struct product_ops *ops = &products[kind];
	sqlite3_stmt *st = c->st_row[kind];
	struct mem_entry *e = NULL;
	int rc;

	*ret_found = false;
	sqlite3_reset(st);
	sqlite3_bind_blob(st, 1, id, sizeof(*id), SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		int status = sqlite3_column_int(st, 0), size = sqlite3_column_bytes(st, 2);
		const void *blob = sqlite3_column_blob(st, 2);
		void *obj = status == 0 && blob && size > 0 ? ops->load(blob, (size_t)size) : NULL;

		*ret_found = obj || status == 1;
		if (obj)
			e = mem_insert(c, id, kind, obj, NULL, ops->bytes(obj, (size_t)size));
		else if (status == 1)
			e = mem_insert(c, id, kind, NULL, (const char *)sqlite3_column_text(st, 1), 0);
	} else if (rc != SQLITE_DONE) {
		log_debug("cache lookup failed: %s", sqlite3_errmsg(c->db));
	}
	sqlite3_reset(st);
	if (rc == SQLITE_ROW && !*ret_found)
		drop_damaged(c, id, kind);
	return e;
}

/* id's entry of kind, from memory or else SQLite; NULL for a miss. Counts
 * the analysis lookups (cache_stats). */
static struct mem_entry *lookup(struct cache *c, const struct fileid *id, enum mem_kind kind)
{
	struct mem_key key = mem_key(id, kind);
	struct mem_entry *e = hmap_get(c->mem, &key, sizeof(key));
	bool found;

	if (e && e->stale) {
		mem_drop(c, e);
		e = NULL;
	}
	if (e) {
		c->stats.mem_hits += kind == MEM_SYMTAB;
		if (e != c->head) {
			lru_unlink(c, e);
			lru_push_front(c, e);
		}
		return e;
	}
	e = load_row(c, id, kind, &found);
	if (kind == MEM_SYMTAB) {
		c->stats.db_hits += found;
		c->stats.misses += !found;
	}
	return e;
}

/* e's status (NULL: CACHE_MISS), with its error for CACHE_ERROR. */
static enum cache_status entry_status(const struct mem_entry *e, const char **ret_error)
{
	if (!e)
		return CACHE_MISS;
	if (e->status == CACHE_ERROR && ret_error)
		*ret_error = e->error ? e->error : products[e->key.kind].default_error;
	return e->status;
}

/* Binds the columns every product row starts with: file ID, status (0
 * ok, 1 error), error text (NULL when ok) and the analysis time. */
static void bind_head(sqlite3_stmt *st, const struct fileid *id, bool ok, const char *error,
		      int64_t analysed_at)
{
	sqlite3_bind_blob(st, 1, id, sizeof(*id), SQLITE_STATIC);
	sqlite3_bind_int(st, 2, ok ? 0 : 1);
	if (ok)
		sqlite3_bind_null(st, 3);
	else
		sqlite3_bind_text(st, 3, error, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, analysed_at);
}

static void bind_blob_or_null(sqlite3_stmt *st, int col, const void *blob, size_t size)
{
	if (blob && size)
		sqlite3_bind_blob64(st, col, blob, size, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, col);
}

/* Steps a bound INSERT and leaves it reset with no bindings. Returns 0 or
 * a negative errno. */
static int put_row(struct cache *c, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st), r = 0;

	if (rc != SQLITE_DONE) {
		r = sqlite_to_errno(rc);
		if (r == 0)
			r = -EIO;
		log_debug("cache store failed: %s", sqlite3_errmsg(c->db));
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return r;
}

/* Writes obj (or, obj NULL, error) as id's row of kind with st, whose
 * kind-specific columns the caller has bound, the blob last at blob_col;
 * then keeps obj (taken) as the memory entry. Returns 0 or a negative
 * errno; the memory entry is kept either way. */
static int store_product(struct cache *c, const struct fileid *id, enum mem_kind kind,
			 sqlite3_stmt *st, int blob_col, void *obj, const char *error,
			 int64_t analysed_at)
{
	const struct product_ops *ops = &products[kind];
	size_t size = 0;
	void *blob = NULL;
	int r = -ENOMEM;

	if (!error)
		error = ops->default_error;
	if (obj && !(blob = ops->save(obj, &size))) {
		sqlite3_clear_bindings(st);
		goto memory;
	}
	bind_head(st, id, obj != NULL, error, analysed_at);
	bind_blob_or_null(st, blob_col, blob, size);
	r = put_row(c, st);
memory:
	free(blob);
	mem_insert(c, id, kind, obj, obj ? NULL : error, obj ? ops->bytes(obj, size) : 0);
	return r;
}

enum cache_status cache_lookup(struct cache *c, const struct fileid *id,
			       const struct symtab **ret_symtab, const char **ret_error)
{
	struct mem_entry *e = lookup(c, id, MEM_SYMTAB);

	if (e && e->status == CACHE_OK && ret_symtab)
		*ret_symtab = e->product;
	return entry_status(e, ret_error);
}

int cache_contains(struct cache *c, const struct fileid *id)
{
	struct mem_key key = mem_key(id, MEM_SYMTAB);
	const struct mem_entry *e = hmap_get(c->mem, &key, sizeof(key));
	int rc;

	if (e)
		return !e->stale;
	sqlite3_reset(c->st_has);
	sqlite3_bind_blob(c->st_has, 1, id, sizeof(*id), SQLITE_STATIC);
	rc = sqlite3_step(c->st_has);
	sqlite3_reset(c->st_has);
	return rc == SQLITE_ROW;
}

int cache_store(struct cache *c, const struct fileid *id, struct symtab *t, const char *error,
		int64_t analysed_at)
{
	size_t bid_len = 0;
	const uint8_t *bid = t ? symtab_build_id(t, &bid_len) : NULL;

	sqlite3_reset(c->st_put);
	bind_blob_or_null(c->st_put, 5, bid, bid_len);
	return store_product(c, id, MEM_SYMTAB, c->st_put, 6, t, error, analysed_at);
}

int cache_find_build_id(struct cache *c, const uint8_t *build_id, size_t len,
			struct fileid *ret_id)
{
	int rc, r = -ENOENT;

	if (len == 0 || len > 64)
		return -ENOENT;
	sqlite3_reset(c->st_bid);
	sqlite3_bind_blob(c->st_bid, 1, build_id, (int)len, SQLITE_STATIC);
	rc = sqlite3_step(c->st_bid);
	if (rc == SQLITE_ROW && sqlite3_column_bytes(c->st_bid, 0) == FILEID_LEN) {
		memcpy(ret_id->bytes, sqlite3_column_blob(c->st_bid, 0), FILEID_LEN);
		r = 0;
	}
	sqlite3_reset(c->st_bid);
	return r;
}

void cache_get_stats(struct cache *c, struct cache_stats *ret)
{
	*ret = c->stats;
	ret->mem_entries = hmap_count(c->mem);
	ret->mem_bytes = c->mem_bytes;
	ret->files_ok = ret->files_failed = 0;
	sqlite3_reset(c->st_count);
	while (sqlite3_step(c->st_count) == SQLITE_ROW) {
		if (sqlite3_column_int(c->st_count, 0) == 0)
			ret->files_ok = (uint64_t)sqlite3_column_int64(c->st_count, 1);
		else
			ret->files_failed += (uint64_t)sqlite3_column_int64(c->st_count, 1);
	}
	sqlite3_reset(c->st_count);
	ret->unwind_ok = ret->unwind_failed = 0;
	sqlite3_reset(c->st_ucount);
	while (sqlite3_step(c->st_ucount) == SQLITE_ROW) {
		if (sqlite3_column_int(c->st_ucount, 0) == 0)
			ret->unwind_ok = (uint64_t)sqlite3_column_int64(c->st_ucount, 1);
		else
			ret->unwind_failed += (uint64_t)sqlite3_column_int64(c->st_ucount, 1);
	}
	sqlite3_reset(c->st_ucount);
}

enum cache_status cache_lookup_unwind(struct cache *c, const struct fileid *id,
				      const struct unwind_table **ret_table,
				      const char **ret_error)
{
	struct mem_entry *e = lookup(c, id, MEM_UNWIND);

	if (e && e->status == CACHE_OK && ret_table)
		*ret_table = e->product;
	return entry_status(e, ret_error);
}

int cache_store_unwind(struct cache *c, const struct fileid *id, struct unwind_table *t,
		       const char *error, int64_t analysed_at)
{
	sqlite3_reset(c->st_uput);
	sqlite3_bind_int64(c->st_uput, 5, t ? (int64_t)unwind_table_count(t) : 0);
	return store_product(c, id, MEM_UNWIND, c->st_uput, 6, t, error, analysed_at);
}

int cache_lookup_plan(struct cache *c, const struct fileid *id, void **ret, size_t *ret_len)
{
	int rc, r = -ENOENT;

	sqlite3_reset(c->st_pget);
	sqlite3_bind_blob(c->st_pget, 1, id, sizeof(*id), SQLITE_STATIC);
	rc = sqlite3_step(c->st_pget);
	if (rc == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(c->st_pget, 0);
		int size = sqlite3_column_bytes(c->st_pget, 0);

		r = -ENOMEM;
		if (blob && size > 0 && (*ret = malloc((size_t)size))) {
			memcpy(*ret, blob, (size_t)size);
			*ret_len = (size_t)size;
			r = 0;
		}
	} else if (rc != SQLITE_DONE) {
		log_debug("cache lookup failed: %s", sqlite3_errmsg(c->db));
		r = -EIO;
	}
	sqlite3_reset(c->st_pget);
	return r;
}

int cache_store_plan(struct cache *c, const struct fileid *id, const void *plan, size_t len,
		     int64_t analysed_at)
{
	sqlite3_reset(c->st_pput);
	sqlite3_bind_blob(c->st_pput, 1, id, sizeof(*id), SQLITE_STATIC);
	sqlite3_bind_int64(c->st_pput, 2, analysed_at);
	sqlite3_bind_blob64(c->st_pput, 3, plan, len, SQLITE_STATIC);
	return put_row(c, c->st_pput);
}

enum cache_status cache_lookup_index(struct cache *c, const struct fileid *id,
				     const struct line_index **ret_index, const char **ret_error)
{
	struct mem_entry *e = lookup(c, id, MEM_INDEX);

	if (e && e->status == CACHE_OK && ret_index)
		*ret_index = e->product;
	return entry_status(e, ret_error);
}

int cache_store_index(struct cache *c, const struct fileid *id, struct line_index *ix,
		      const char *error, int64_t analysed_at)
{
	sqlite3_reset(c->st_lput);
	return store_product(c, id, MEM_INDEX, c->st_lput, 5, ix, error, analysed_at);
}

enum cache_status cache_lookup_interp(struct cache *c, const struct fileid *id,
				      struct interp_data *ret, char *errbuf, size_t errlen)
{
	enum cache_status status = CACHE_MISS;
	int rc;

	sqlite3_reset(c->st_iget);
	sqlite3_bind_blob(c->st_iget, 1, id, sizeof(*id), SQLITE_STATIC);
	rc = sqlite3_step(c->st_iget);
	if (rc == SQLITE_ROW) {
		if (sqlite3_column_int(c->st_iget, 0) == 0) {
			int64_t major = sqlite3_column_int64(c->st_iget, 3);
			int64_t minor = sqlite3_column_int64(c->st_iget, 4);

			const void *data = sqlite3_column_blob(c->st_iget, 6);
			int len = sqlite3_column_bytes(c->st_iget, 6);

			status = CACHE_OK;
			if (ret) {
				*ret = (struct interp_data){
					.kind = (uint32_t)sqlite3_column_int64(c->st_iget, 2),
					.major = (uint8_t)major, .minor = (uint8_t)minor,
					.runtime_offset = (uint64_t)sqlite3_column_int64(c->st_iget, 5),
				};
				/* A row longer than the Data holds is not ours: none. */
				if (data && len > 0 && (size_t)len <= sizeof(ret->data)) {
					memcpy(ret->data, data, (size_t)len);
					ret->data_len = (uint32_t)len;
				}
			}
		} else {
			const char *e = (const char *)sqlite3_column_text(c->st_iget, 1);

			status = CACHE_ERROR;
			if (errbuf && errlen)
				snprintf(errbuf, errlen, "%s", e ? e : "not an interpreter");
		}
	} else if (rc != SQLITE_DONE) {
		log_debug("cache lookup failed: %s", sqlite3_errmsg(c->db));
	}
	sqlite3_reset(c->st_iget);
	return status;
}

int cache_store_interp(struct cache *c, const struct fileid *id, const struct interp_data *d,
		       const char *error, int64_t analysed_at)
{
	sqlite3_reset(c->st_iput);
	bind_head(c->st_iput, id, d != NULL, error ? error : "not an interpreter", analysed_at);
	sqlite3_bind_int64(c->st_iput, 5, d ? d->kind : 0);
	sqlite3_bind_int64(c->st_iput, 6, d ? d->major : 0);
	sqlite3_bind_int64(c->st_iput, 7, d ? d->minor : 0);
	sqlite3_bind_int64(c->st_iput, 8, d ? (int64_t)d->runtime_offset : 0);
	bind_blob_or_null(c->st_iput, 9, d ? d->data : NULL,
			  d && d->data_len <= sizeof(d->data) ? d->data_len : 0);
	return put_row(c, c->st_iput);
}
