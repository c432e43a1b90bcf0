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

#include "log.h"
#include "hmap.h"
#include "store_internal.h"

#define MEM_MAX_ENTRIES_DEFAULT 4096
#define MEM_MAX_BYTES_DEFAULT (256u << 20)

/* The memory LRU holds both products, keyed by (file ID, kind). */
enum mem_kind {
	MEM_SYMTAB = 0,
	MEM_UNWIND = 1,
	MEM_INDEX = 2,
};

struct mem_key {
	uint8_t id[FILEID_LEN];
	uint8_t kind;
};
_Static_assert(sizeof(struct mem_key) == FILEID_LEN + 1, "mem_key has no padding");

struct mem_entry {
	struct mem_key key;
	enum cache_status status;
	struct symtab *symtab;
	struct unwind_table *unwind;
	struct line_index *index;
	char *error;
	size_t bytes;
	/* The analysis was forgotten (a damaged source index): dropped at
	 * the next lookup, not now, since a caller may hold its symtab. */
	bool stale;
	struct mem_entry *prev, *next; /* LRU list, most recent first */
};

struct cache {
	sqlite3 *db;
	sqlite3_stmt *st_get, *st_put, *st_del, *st_bid, *st_has, *st_count;
	sqlite3_stmt *st_uget, *st_uput, *st_udel, *st_ucount;
	sqlite3_stmt *st_lget, *st_lput, *st_ldel;
	sqlite3_stmt *st_pget, *st_pput;
	sqlite3_stmt *st_iget, *st_iput;
	struct hmap *mem; /* mem_key -> mem_entry */
	struct mem_entry *head, *tail;
	size_t mem_bytes;
	size_t max_entries, max_bytes;
	struct cache_stats stats;
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
			 &c->st_get)) < 0 ||
	    (r = prepare(c->db,
			 "INSERT OR REPLACE INTO files (file_id, status, error, analysed_at,"
			 " build_id, symtab) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
			 &c->st_put)) < 0 ||
	    (r = prepare(c->db, "DELETE FROM files WHERE file_id = ?1", &c->st_del)) < 0 ||
	    (r = prepare(c->db,
			 "SELECT file_id FROM files WHERE build_id = ?1 AND status = 0 LIMIT 1",
			 &c->st_bid)) < 0 ||
	    (r = prepare(c->db, "SELECT 1 FROM files WHERE file_id = ?1", &c->st_has)) < 0 ||
	    (r = prepare(c->db, "SELECT status, count(*) FROM files GROUP BY status",
			 &c->st_count)) < 0 ||
	    (r = prepare(c->db, "SELECT status, error, tbl FROM unwind WHERE file_id = ?1",
			 &c->st_uget)) < 0 ||
	    (r = prepare(c->db,
			 "INSERT OR REPLACE INTO unwind (file_id, status, error, analysed_at,"
			 " n_rows, tbl) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
			 &c->st_uput)) < 0 ||
	    (r = prepare(c->db, "DELETE FROM unwind WHERE file_id = ?1", &c->st_udel)) < 0 ||
	    (r = prepare(c->db, "SELECT status, count(*) FROM unwind GROUP BY status",
			 &c->st_ucount)) < 0 ||
	    (r = prepare(c->db, "SELECT status, error, idx FROM lines WHERE file_id = ?1",
			 &c->st_lget)) < 0 ||
	    (r = prepare(c->db,
			 "INSERT OR REPLACE INTO lines (file_id, status, error, analysed_at, idx)"
			 " VALUES (?1, ?2, ?3, ?4, ?5)",
			 &c->st_lput)) < 0 ||
	    (r = prepare(c->db, "DELETE FROM lines WHERE file_id = ?1", &c->st_ldel)) < 0 ||
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
	symtab_free(e->symtab);
	unwind_table_free(e->unwind);
	line_index_free(e->index);
	free(e->error);
	free(e);
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	hmap_free(c->mem, mem_entry_free);
	sqlite3_finalize(c->st_get);
	sqlite3_finalize(c->st_put);
	sqlite3_finalize(c->st_del);
	sqlite3_finalize(c->st_bid);
	sqlite3_finalize(c->st_has);
	sqlite3_finalize(c->st_count);
	sqlite3_finalize(c->st_uget);
	sqlite3_finalize(c->st_uput);
	sqlite3_finalize(c->st_udel);
	sqlite3_finalize(c->st_ucount);
	sqlite3_finalize(c->st_lget);
	sqlite3_finalize(c->st_lput);
	sqlite3_finalize(c->st_ldel);
	sqlite3_finalize(c->st_pget);
	sqlite3_finalize(c->st_pput);
	sqlite3_finalize(c->st_iget);
	sqlite3_finalize(c->st_iput);
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

/* Takes t (or u) and a copy of error. Returns the entry or NULL (the
 * product freed). */
static struct mem_entry *mem_insert3(struct cache *c, const struct fileid *id,
				     enum mem_kind kind, enum cache_status status, struct symtab *t,
				     struct unwind_table *u, struct line_index *ix,
				     const char *error, size_t bytes)
{
	struct mem_entry *e = calloc(1, sizeof(*e)), *old = NULL;

	if (!e || (error && !(e->error = strdup(error)))) {
		free(e);
		symtab_free(t);
		unwind_table_free(u);
		line_index_free(ix);
		return NULL;
	}
	e->key = mem_key(id, kind);
	e->status = status;
	e->symtab = t;
	e->unwind = u;
	e->index = ix;
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

static struct mem_entry *mem_insert2(struct cache *c, const struct fileid *id,
				     enum mem_kind kind, enum cache_status status, struct symtab *t,
				     struct unwind_table *u, const char *error, size_t bytes)
{
	return mem_insert3(c, id, kind, status, t, u, NULL, error, bytes);
}

static struct mem_entry *mem_insert(struct cache *c, const struct fileid *id,
				    enum cache_status status, struct symtab *t, const char *error,
				    size_t bytes)
{
	return mem_insert2(c, id, MEM_SYMTAB, status, t, NULL, error, bytes);
}

/* An unwind entry: a table, or (t NULL) an error. */
static struct mem_entry *mem_insert_unwind(struct cache *c, const struct fileid *id,
					   enum cache_status status, struct unwind_table *t,
					   const char *error, size_t bytes)
{
	return mem_insert2(c, id, MEM_UNWIND, status, NULL, t, error, t ? bytes : 0);
}

static enum cache_status entry_result(const struct mem_entry *e, const struct symtab **ret_symtab,
				      const char **ret_error)
{
	if (e->status == CACHE_OK && ret_symtab)
		*ret_symtab = e->symtab;
	if (e->status == CACHE_ERROR && ret_error)
		*ret_error = e->error ? e->error : "analysis failed";
	return e->status;
}

enum cache_status cache_lookup(struct cache *c, const struct fileid *id,
			       const struct symtab **ret_symtab, const char **ret_error)
{
	struct mem_key key = mem_key(id, MEM_SYMTAB);
	struct mem_entry *e = hmap_get(c->mem, &key, sizeof(key));
	struct symtab *t = NULL;
	enum cache_status status = CACHE_MISS;
	const void *blob;
	int size, rc;
	const char *error = NULL;

	if (e && e->stale) {
		mem_drop(c, e);
		e = NULL;
	}
	if (e) {
		c->stats.mem_hits++;
		if (e != c->head) {
			lru_unlink(c, e);
			lru_push_front(c, e);
		}
		return entry_result(e, ret_symtab, ret_error);
	}
	sqlite3_reset(c->st_get);
	sqlite3_bind_blob(c->st_get, 1, id, sizeof(*id), SQLITE_STATIC);
	rc = sqlite3_step(c->st_get);
	if (rc == SQLITE_ROW) {
		int st = sqlite3_column_int(c->st_get, 0);

		blob = sqlite3_column_blob(c->st_get, 2);
		size = sqlite3_column_bytes(c->st_get, 2);
		if (st == 0 && blob && size > 0) {
			t = symtab_deserialize(blob, (size_t)size);
			status = t ? CACHE_OK : CACHE_MISS;
		} else if (st == 1) {
			error = (const char *)sqlite3_column_text(c->st_get, 1);
			status = CACHE_ERROR;
		}
		if (status == CACHE_MISS) {
			char hex[FILEID_HEX_LEN + 1];

			log_warn("cache row for %s does not deserialise; dropping it so the file is analysed again",
				 fileid_to_hex(id, hex));
			sqlite3_reset(c->st_get);
			sqlite3_reset(c->st_del);
			sqlite3_bind_blob(c->st_del, 1, id, sizeof(*id), SQLITE_STATIC);
			sqlite3_step(c->st_del);
			sqlite3_reset(c->st_del);
		} else {
			e = mem_insert(c, id, status, t, status == CACHE_ERROR ? error : NULL,
				       (size_t)size);
			t = NULL;
		}
	} else if (rc != SQLITE_DONE) {
		log_debug("cache lookup failed: %s", sqlite3_errmsg(c->db));
	}
	sqlite3_reset(c->st_get);
	if (status == CACHE_MISS) {
		c->stats.misses++;
		return CACHE_MISS;
	}
	c->stats.db_hits++;
	if (!e)
		return CACHE_MISS; /* out of memory: as if unknown */
	return entry_result(e, ret_symtab, ret_error);
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
	void *blob = NULL;
	size_t size = 0, bid_len = 0;
	const uint8_t *bid = NULL;
	int rc, r = 0;

	if (t) {
		blob = symtab_serialize(t, &size);
		if (!blob) {
			r = -ENOMEM;
			goto memory;
		}
		bid = symtab_build_id(t, &bid_len);
	}
	sqlite3_reset(c->st_put);
	sqlite3_bind_blob(c->st_put, 1, id, sizeof(*id), SQLITE_STATIC);
	sqlite3_bind_int(c->st_put, 2, t ? 0 : 1);
	if (t)
		sqlite3_bind_null(c->st_put, 3);
	else
		sqlite3_bind_text(c->st_put, 3, error ? error : "analysis failed", -1,
				  SQLITE_STATIC);
	sqlite3_bind_int64(c->st_put, 4, analysed_at);
	if (bid && bid_len > 0)
		sqlite3_bind_blob(c->st_put, 5, bid, (int)bid_len, SQLITE_STATIC);
	else
		sqlite3_bind_null(c->st_put, 5);
	if (blob)
		sqlite3_bind_blob64(c->st_put, 6, blob, size, SQLITE_STATIC);
	else
		sqlite3_bind_null(c->st_put, 6);
	rc = sqlite3_step(c->st_put);
	if (rc != SQLITE_DONE) {
		r = sqlite_to_errno(rc);
		if (r == 0)
			r = -EIO;
		log_debug("cache store failed: %s", sqlite3_errmsg(c->db));
	}
	sqlite3_reset(c->st_put);
	sqlite3_clear_bindings(c->st_put);
memory:
	free(blob);
	mem_insert(c, id, t ? CACHE_OK : CACHE_ERROR, t, t ? NULL : (error ? error : "analysis failed"),
		   size);
	return r;
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
	struct mem_key key = mem_key(id, MEM_UNWIND);
	struct mem_entry *e = hmap_get(c->mem, &key, sizeof(key));
	struct unwind_table *t = NULL;
	enum cache_status status = CACHE_MISS;
	const char *error = NULL;
	const void *blob;
	int size = 0, rc;

	if (!e) {
		sqlite3_reset(c->st_uget);
		sqlite3_bind_blob(c->st_uget, 1, id, sizeof(*id), SQLITE_STATIC);
		rc = sqlite3_step(c->st_uget);
		if (rc == SQLITE_ROW) {
			int st = sqlite3_column_int(c->st_uget, 0);

			blob = sqlite3_column_blob(c->st_uget, 2);
			size = sqlite3_column_bytes(c->st_uget, 2);
			if (st == 0 && blob && size > 0) {
				t = unwind_table_deserialize(blob, (size_t)size);
				status = t ? CACHE_OK : CACHE_MISS;
			} else if (st == 1) {
				error = (const char *)sqlite3_column_text(c->st_uget, 1);
				status = CACHE_ERROR;
			}
			if (status == CACHE_MISS) {
				char hex[FILEID_HEX_LEN + 1];

				/* Damaged, or from another UNWIND_BLOB_VERSION. */
				log_debug("unwind table of %s does not deserialise; dropping it",
					  fileid_to_hex(id, hex));
				sqlite3_reset(c->st_uget);
				sqlite3_reset(c->st_udel);
				sqlite3_bind_blob(c->st_udel, 1, id, sizeof(*id), SQLITE_STATIC);
				sqlite3_step(c->st_udel);
				sqlite3_reset(c->st_udel);
			} else {
				e = mem_insert_unwind(c, id, status, t, error, (size_t)size);
				t = NULL;
			}
		} else if (rc != SQLITE_DONE) {
			log_debug("cache lookup failed: %s", sqlite3_errmsg(c->db));
		}
		sqlite3_reset(c->st_uget);
		if (!e)
			return CACHE_MISS;
	} else if (e != c->head) {
		lru_unlink(c, e);
		lru_push_front(c, e);
	}
	if (e->status == CACHE_OK && ret_table)
		*ret_table = e->unwind;
	if (e->status == CACHE_ERROR && ret_error)
		*ret_error = e->error ? e->error : "unwind table compilation failed";
	return e->status;
}

int cache_store_unwind(struct cache *c, const struct fileid *id, struct unwind_table *t,
		       const char *error, int64_t analysed_at)
{
	void *blob = NULL;
	size_t size = 0;
	int rc, r = 0;

	if (t) {
		blob = unwind_table_serialize(t, &size);
		if (!blob) {
			r = -ENOMEM;
			goto memory;
		}
	}
	sqlite3_reset(c->st_uput);
	sqlite3_bind_blob(c->st_uput, 1, id, sizeof(*id), SQLITE_STATIC);
	sqlite3_bind_int(c->st_uput, 2, t ? 0 : 1);
	if (t)
		sqlite3_bind_null(c->st_uput, 3);
	else
		sqlite3_bind_text(c->st_uput, 3, error ? error : "unwind table compilation failed",
				  -1, SQLITE_STATIC);
	sqlite3_bind_int64(c->st_uput, 4, analysed_at);
	sqlite3_bind_int64(c->st_uput, 5, t ? (int64_t)unwind_table_count(t) : 0);
	if (blob)
		sqlite3_bind_blob64(c->st_uput, 6, blob, size, SQLITE_STATIC);
	else
		sqlite3_bind_null(c->st_uput, 6);
	rc = sqlite3_step(c->st_uput);
	if (rc != SQLITE_DONE) {
		r = sqlite_to_errno(rc);
		if (r == 0)
			r = -EIO;
		log_debug("cache store failed: %s", sqlite3_errmsg(c->db));
	}
	sqlite3_reset(c->st_uput);
	sqlite3_clear_bindings(c->st_uput);
memory:
	free(blob);
	mem_insert_unwind(c, id, t ? CACHE_OK : CACHE_ERROR, t,
			  t ? NULL : (error ? error : "unwind table compilation failed"), size);
	return r;
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
	int rc, r = 0;

	sqlite3_reset(c->st_pput);
	sqlite3_bind_blob(c->st_pput, 1, id, sizeof(*id), SQLITE_STATIC);
	sqlite3_bind_int64(c->st_pput, 2, analysed_at);
	sqlite3_bind_blob64(c->st_pput, 3, plan, len, SQLITE_STATIC);
	rc = sqlite3_step(c->st_pput);
	if (rc != SQLITE_DONE) {
		r = sqlite_to_errno(rc);
		if (r == 0)
			r = -EIO;
		log_debug("cache store failed: %s", sqlite3_errmsg(c->db));
	}
	sqlite3_reset(c->st_pput);
	sqlite3_clear_bindings(c->st_pput);
	return r;
}

/* Deletes id's analysis (its symtab row and source index row) and marks
 * its memory entry stale. */
static void forget_analysis(struct cache *c, const struct fileid *id)
{
	struct mem_key key = mem_key(id, MEM_SYMTAB);
	struct mem_entry *e = hmap_get(c->mem, &key, sizeof(key));
	sqlite3_stmt *del[] = {c->st_ldel, c->st_del};

	for (size_t i = 0; i < sizeof(del) / sizeof(del[0]); i++) {
		sqlite3_reset(del[i]);
		sqlite3_bind_blob(del[i], 1, id, sizeof(*id), SQLITE_STATIC);
		if (sqlite3_step(del[i]) != SQLITE_DONE)
			log_debug("cache delete failed: %s", sqlite3_errmsg(c->db));
		sqlite3_reset(del[i]);
	}
	if (e)
		e->stale = true;
}

enum cache_status cache_lookup_index(struct cache *c, const struct fileid *id,
				     const struct line_index **ret_index, const char **ret_error)
{
	struct mem_key key = mem_key(id, MEM_INDEX);
	struct mem_entry *e = hmap_get(c->mem, &key, sizeof(key));
	struct line_index *ix = NULL;
	enum cache_status status = CACHE_MISS;
	const char *error = NULL;
	const void *blob;
	int size = 0, rc;

	if (!e) {
		sqlite3_reset(c->st_lget);
		sqlite3_bind_blob(c->st_lget, 1, id, sizeof(*id), SQLITE_STATIC);
		rc = sqlite3_step(c->st_lget);
		if (rc == SQLITE_ROW) {
			int st = sqlite3_column_int(c->st_lget, 0);

			blob = sqlite3_column_blob(c->st_lget, 2);
			size = sqlite3_column_bytes(c->st_lget, 2);
			if (st == 0 && blob && size > 0) {
				ix = line_index_deserialize(blob, (size_t)size);
				status = ix ? CACHE_OK : CACHE_MISS;
			} else if (st == 1) {
				error = (const char *)sqlite3_column_text(c->st_lget, 1);
				status = CACHE_ERROR;
			}
			if (status == CACHE_MISS) {
				char hex[FILEID_HEX_LEN + 1];

				/* Damaged (another LINE_INDEX_VERSION was forgotten at
				 * open): nothing would build it again for a file whose
				 * analysis is cached, so forget that too. */
				log_warn("source index of %s does not deserialise; forgetting the file's analysis so it is analysed again",
					 fileid_to_hex(id, hex));
				sqlite3_reset(c->st_lget);
				forget_analysis(c, id);
			} else {
				e = mem_insert3(c, id, MEM_INDEX, status, NULL, NULL, ix, error,
						ix ? line_index_bytes(ix) : 0);
				ix = NULL;
			}
		} else if (rc != SQLITE_DONE) {
			log_debug("cache lookup failed: %s", sqlite3_errmsg(c->db));
		}
		sqlite3_reset(c->st_lget);
		if (!e)
			return CACHE_MISS;
	} else if (e != c->head) {
		lru_unlink(c, e);
		lru_push_front(c, e);
	}
	if (e->status == CACHE_OK && ret_index)
		*ret_index = e->index;
	if (e->status == CACHE_ERROR && ret_error)
		*ret_error = e->error ? e->error : "no source index";
	return e->status;
}

int cache_store_index(struct cache *c, const struct fileid *id, struct line_index *ix,
		      const char *error, int64_t analysed_at)
{
	void *blob = NULL;
	size_t size = 0;
	int rc, r = 0;

	if (ix) {
		blob = line_index_serialize(ix, &size);
		if (!blob) {
			r = -ENOMEM;
			goto memory;
		}
	}
	sqlite3_reset(c->st_lput);
	sqlite3_bind_blob(c->st_lput, 1, id, sizeof(*id), SQLITE_STATIC);
	sqlite3_bind_int(c->st_lput, 2, ix ? 0 : 1);
	if (ix)
		sqlite3_bind_null(c->st_lput, 3);
	else
		sqlite3_bind_text(c->st_lput, 3, error ? error : "no source index", -1,
				  SQLITE_STATIC);
	sqlite3_bind_int64(c->st_lput, 4, analysed_at);
	if (blob)
		sqlite3_bind_blob64(c->st_lput, 5, blob, size, SQLITE_STATIC);
	else
		sqlite3_bind_null(c->st_lput, 5);
	rc = sqlite3_step(c->st_lput);
	if (rc != SQLITE_DONE) {
		r = sqlite_to_errno(rc);
		if (r == 0)
			r = -EIO;
		log_debug("cache store failed: %s", sqlite3_errmsg(c->db));
	}
	sqlite3_reset(c->st_lput);
	sqlite3_clear_bindings(c->st_lput);
memory:
	free(blob);
	mem_insert3(c, id, MEM_INDEX, ix ? CACHE_OK : CACHE_ERROR, NULL, NULL, ix,
		    ix ? NULL : (error ? error : "no source index"), ix ? line_index_bytes(ix) : 0);
	return r;
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
	int rc, r = 0;

	sqlite3_reset(c->st_iput);
	sqlite3_bind_blob(c->st_iput, 1, id, sizeof(*id), SQLITE_STATIC);
	sqlite3_bind_int(c->st_iput, 2, d ? 0 : 1);
	if (d)
		sqlite3_bind_null(c->st_iput, 3);
	else
		sqlite3_bind_text(c->st_iput, 3, error ? error : "not an interpreter", -1,
				  SQLITE_STATIC);
	sqlite3_bind_int64(c->st_iput, 4, analysed_at);
	sqlite3_bind_int64(c->st_iput, 5, d ? d->kind : 0);
	sqlite3_bind_int64(c->st_iput, 6, d ? d->major : 0);
	sqlite3_bind_int64(c->st_iput, 7, d ? d->minor : 0);
	sqlite3_bind_int64(c->st_iput, 8, d ? (int64_t)d->runtime_offset : 0);
	if (d && d->data_len && d->data_len <= sizeof(d->data))
		sqlite3_bind_blob(c->st_iput, 9, d->data, (int)d->data_len, SQLITE_STATIC);
	else
		sqlite3_bind_null(c->st_iput, 9);
	rc = sqlite3_step(c->st_iput);
	if (rc != SQLITE_DONE) {
		r = sqlite_to_errno(rc);
		if (r == 0)
			r = -EIO;
		log_debug("cache store failed: %s", sqlite3_errmsg(c->db));
	}
	sqlite3_reset(c->st_iput);
	sqlite3_clear_bindings(c->st_iput);
	return r;
}
