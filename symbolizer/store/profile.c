/* profile.c - the recent-profile store (see profile.h).
 *
 * Stacks are interned in stacks(text, raw) and counted in samples(minute,
 * node, pid, start, tid, span, stack_id, uid, profile) with the sum of
 * their weights; node is the sensor's node
 * (nodes(id, name)), so pid 1234 of two nodes stays two processes; uid is
 * the process's owner, so a query can be scoped to one user's processes
 * (docs/security.md, roles). Top is computed here from the per-stack sums of the window:
 * SQL cannot split the folded text, and the number of distinct stacks in
 * a window is small next to the number of samples.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "hmap.h"
#include "profile.h"
#include "stack_texts.h"
#include "store_internal.h"
#include "utf8.h"

/* The batch is keyed by a digest of the stack, not its text: keys of
 * kilobytes (folded text and raw frames) hashed and compared per sample
 * were most of the symbolizer's CPU under load. Two distinct stacks of
 * equal lengths whose 64-bit digests collide in one (minute, pid, tid)
 * would be merged: about 2^-64 per pair. */
struct batch_key {
	uint64_t minute;
	uint64_t start;
	uint32_t node, profile;
	uint32_t pid, tid;
	uint8_t span[PROFILE_SPAN_LEN]; /* all zero: none */
	uint32_t uid, uid_pad; /* before stack_hash: not part of the stack-id cache key */
	uint64_t stack_hash;
	uint32_t frames_len, raw_len;
	uint32_t comm_len, pad;
	/* followed by the comm as given (not NUL-terminated) */
};

/* The row's text ("comm;frames") and raw stack, copied once per key;
 * or, for a sample with a shared stack, only the comm's part ("comm") and
 * a reference to the stack (its frames and raw stack). */
struct batch_val {
	uint64_t count;
	uint64_t weight;
	const struct stack_text *shared;
	uint32_t text_len, raw_len;
	char data[]; /* text, then raw */
};

/* A row of the draining batch (key and value borrowed from the map),
 * with its place in the samples table's key order in the row itself, so
 * that sorting a batch does not chase every key through memory. */
struct drain_row {
	uint64_t minute_node; /* minute << 32 | node */
	uint64_t pid_tid;     /* pid << 32 | tid */
	const void *key;
	size_t klen;
	const struct batch_val *val;
};

struct profile_store {
	struct cache *cache;
	sqlite3 *db;
	/* The disk under the database filled up: profiles live in this
	 * in-memory database from then on (bounded by the retention, like
	 * the file), so the symbolizer keeps serving Top and Folded. */
	struct cache *mem;
	unsigned retention_minutes;
	struct hmap *batch; /* batch_key + comm -> struct batch_val */
	/* The previous batch, written a slice per profile_flush_step() so
	 * the loop thread never stops for a whole batch. */
	struct hmap *draining;
	/* Its rows in the samples table's key order (drain_rows entries,
	 * drain_next the next to write): rows written in key order touch
	 * each B-tree page once, where the map's order touched a page a row. */
	struct drain_row *drain;
	size_t drain_rows, drain_next;
	struct hmap *ids; /* batch_key from stack_hash on + comm -> int64_t stacks.id */
	struct hmap *nodes; /* name -> id (uintptr_t), every row of the nodes table */
	struct hmap *node_names; /* id (u64) -> name, the same rows */
	sqlite3_stmt *st_stack_get, *st_stack_put, *st_sample, *st_total, *st_folded, *st_sums;
	sqlite3_stmt *st_rows, *st_node_put;
	sqlite3_stmt *st_expire_samples, *st_expire_stacks;
	char *keybuf;
	size_t keycap;
	uint64_t added, dropped; /* samples: accepted; lost in a failed flush */
};

static int grow(struct folded *f, size_t need)
{
	size_t cap;
	char *p;

	if (f->len + need + 1 <= f->cap)
		return 0;
	if (f->len + need + 1 > PROFILE_MAX_STACK)
		return -E2BIG;
	cap = f->cap ? f->cap : 256;
	while (cap < f->len + need + 1)
		cap *= 2;
	p = realloc(f->buf, cap);
	if (!p)
		return -ENOMEM;
	f->buf = p;
	f->cap = cap;
	return 0;
}

int folded_push(struct folded *f, const char *name, bool kernel)
{
	size_t n = name ? strnlen(name, PROFILE_MAX_NAME) : 0;
	size_t start = f->len;
	int r;

	if (n == 0) {
		name = "[unknown]";
		n = strlen(name);
	}
	r = grow(f, utf8_escaped_len(name, n) + 1 + (kernel ? 4 : 0));
	if (r < 0)
		return r;
	if (f->len > 0)
		f->buf[f->len++] = ';';
	for (size_t i = 0; i < n;) {
		const uint8_t *u = (const uint8_t *)name + i;
		size_t k = utf8_char_len(u, n - i);

		if (k == 0) {
			/* Not UTF-8 (a target's name or path): escaped, as
			 * common/utf8.h does, so every client can decode it. */
			f->len += utf8_escape(f->buf + f->len, 5, name + i, 1);
			i++;
			continue;
		}
		if (k == 1 && *u == ';') {
			f->buf[f->len++] = ':';
		} else if (k > 1 || (*u >= 0x20 && *u != 0x7f)) { /* drop newlines, control bytes */
			memcpy(f->buf + f->len, u, k);
			f->len += k;
		}
		i += k;
	}
	if (f->len == start + (start > 0)) {
		/* Nothing printable: keep the frame visible. */
		memcpy(f->buf + f->len, "?", 1);
		f->len++;
	}
	if (kernel) {
		memcpy(f->buf + f->len, "_[k]", 4);
		f->len += 4;
	}
	f->buf[f->len] = '\0';
	f->n_frames++;
	return 0;
}

void folded_done(struct folded *f)
{
	free(f->buf);
	memset(f, 0, sizeof(*f));
}

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **st)
{
	int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);

	if (rc != SQLITE_OK) {
		log_debug("prepare failed: %s", sqlite3_errmsg(db));
		return -EIO;
	}
	return 0;
}

static int prepare_all(struct profile_store *p, sqlite3 *db);

/* Remembers node id <-> name (name copied). Returns 0 or -ENOMEM. */
static int remember_node(struct profile_store *p, const char *name, size_t len, uint32_t id)
{
	char *copy = strndup(name, len);

	if (!copy)
		return -ENOMEM;
	if (hmap_put(p->nodes, copy, len, (void *)(uintptr_t)id, NULL) < 0) {
		free(copy);
		return -ENOMEM;
	}
	if (hmap_put_u64(p->node_names, id, copy, NULL) < 0) {
		hmap_remove(p->nodes, copy, len);
		free(copy);
		return -ENOMEM;
	}
	return 0;
}

/* The nodes a previous run stored, so queries find their samples. */
static int load_nodes(struct profile_store *p)
{
	sqlite3_stmt *st = NULL;
	int r = 0, rc;

	if (prep(p->db, "SELECT id, name FROM nodes", &st) < 0)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && r == 0) {
		int64_t id = sqlite3_column_int64(st, 0);
		const char *name = (const char *)sqlite3_column_text(st, 1);

		if (!name || id <= 0 || id > UINT32_MAX)
			continue; /* the file is outside input too */
		if (hmap_count(p->nodes) >= PROFILE_MAX_NODES)
			break;
		r = remember_node(p, name, strnlen(name, PROFILE_MAX_NODE_NAME), (uint32_t)id);
	}
	if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = -EIO;
	sqlite3_finalize(st);
	return r;
}

/* Writes every known node into the current database (after a move to
 * memory: the new database has none). */
static int store_nodes(struct profile_store *p)
{
	struct hmap_iter it;
	const void *key;
	size_t klen;
	void *val;
	int r = 0;

	hmap_iter_init(p->nodes, &it);
	while (r == 0 && hmap_next(p->nodes, &it, &key, &klen, &val)) {
		sqlite3_bind_int64(p->st_node_put, 1, (int64_t)(uintptr_t)val);
		sqlite3_bind_text(p->st_node_put, 2, key, (int)klen, SQLITE_STATIC);
		if (sqlite3_step(p->st_node_put) != SQLITE_DONE)
			r = -EIO;
		sqlite3_reset(p->st_node_put);
	}
	return r;
}

static int move_to_memory(struct profile_store *p);

/* Writes node id's row. Returns 0, -ENOSPC (the disk is full) or -EIO. */
static int put_node(struct profile_store *p, const char *name, size_t len, uint32_t id)
{
	int r = 0;

	sqlite3_bind_int64(p->st_node_put, 1, id);
	sqlite3_bind_text(p->st_node_put, 2, name, (int)len, SQLITE_STATIC);
	if (sqlite3_step(p->st_node_put) != SQLITE_DONE)
		r = (sqlite3_errcode(p->db) & 0xff) == SQLITE_FULL ? -ENOSPC : -EIO;
	sqlite3_reset(p->st_node_put);
	return r;
}

int profile_node(struct profile_store *p, const char *name, uint32_t *ret_id)
{
	size_t len = name ? strnlen(name, PROFILE_MAX_NODE_NAME) : 0;
	void *got;
	uint32_t id;
	int r;

	name = name ? name : "";
	/* Cut at a character boundary: the name stays valid UTF-8. */
	while (len && len < strlen(name) && ((unsigned char)name[len] & 0xc0) == 0x80)
		len--;
	got = hmap_get(p->nodes, name, len);
	if (got) {
		*ret_id = (uint32_t)(uintptr_t)got;
		return 0;
	}
	if (hmap_count(p->nodes) >= PROFILE_MAX_NODES)
		return -E2BIG;
	id = (uint32_t)hmap_count(p->nodes) + 1;
	while (hmap_get_u64(p->node_names, id))
		id++;
	r = put_node(p, name, len, id);
	/* A full disk moves the store to memory (as a flush does), which
	 * copies the known nodes; this one is then written there. */
	if (r == -ENOSPC && !p->mem && move_to_memory(p) == 0)
		r = put_node(p, name, len, id);
	if (r == -ENOSPC)
		r = -EIO;
	if (r == 0)
		r = remember_node(p, name, len, id);
	if (r == 0)
		*ret_id = id;
	return r;
}

/* The name of node id, or "" (borrowed). */
static const char *node_name(const struct profile_store *p, int64_t id)
{
	const char *n = id > 0 ? hmap_get_u64(p->node_names, (uint64_t)id) : NULL;

	return n ? n : "";
}

const char *profile_node_name(const struct profile_store *p, uint32_t id)
{
	return node_name(p, id);
}

/* What ?6 of the queries binds: -1 every node, the node's id, or -2
 * (matches nothing) for a name no sensor gave. */
static int64_t query_node(const struct profile_store *p, const char *name)
{
	void *got;

	if (!name || !*name)
		return -1;
	got = hmap_get(p->nodes, name, strnlen(name, PROFILE_MAX_NODE_NAME + 1));
	return got ? (int64_t)(uintptr_t)got : -2;
}

struct profile_store *profile_new(struct cache *c, unsigned retention_minutes)
{
	struct profile_store *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->cache = c;
	p->retention_minutes = retention_minutes ? retention_minutes : 60;
	p->batch = hmap_new();
	p->ids = hmap_new();
	p->nodes = hmap_new();
	p->node_names = hmap_new();
	if (!p->batch || !p->ids || !p->nodes || !p->node_names ||
	    prepare_all(p, cache_db(c)) < 0 || load_nodes(p) < 0)
		goto fail;
	return p;
fail:
	profile_free(p);
	return NULL;
}

static void finalize_all(struct profile_store *p)
{
	sqlite3_finalize(p->st_stack_get);
	sqlite3_finalize(p->st_stack_put);
	sqlite3_finalize(p->st_sample);
	sqlite3_finalize(p->st_total);
	sqlite3_finalize(p->st_folded);
	sqlite3_finalize(p->st_sums);
	sqlite3_finalize(p->st_rows);
	sqlite3_finalize(p->st_node_put);
	sqlite3_finalize(p->st_expire_samples);
	sqlite3_finalize(p->st_expire_stacks);
	p->st_stack_get = p->st_stack_put = p->st_sample = p->st_total = p->st_folded = NULL;
	p->st_sums = p->st_rows = p->st_expire_samples = p->st_expire_stacks = NULL;
	p->st_node_put = NULL;
}

/* What Top and Folded add up: samples for CPU, weights (ns, bytes) for
 * the other types (?7 is the query's profile). */
#define VALUE "CASE WHEN ?7 = 0 THEN s.count ELSE s.weight END"

static int prepare_all(struct profile_store *p, sqlite3 *db)
{
	p->db = db;
	if (prep(p->db, "SELECT id FROM stacks WHERE hash = ?3 AND text = ?1 AND raw = ?2",
		 &p->st_stack_get) < 0 ||
	    prep(p->db, "INSERT INTO stacks (text, raw, hash) VALUES (?1, ?2, ?3)",
		 &p->st_stack_put) < 0 ||
	    prep(p->db,
		 "INSERT INTO samples (minute, pid, tid, span, stack_id, count, uid, node, start,"
		 " profile, weight) VALUES (?1, ?2, ?3, ?6, ?4, ?5, ?7, ?8, ?9, ?10, ?11)"
		 " ON CONFLICT (minute, node, pid, start, tid, span, stack_id, uid, profile)"
		 " DO UPDATE SET count = count + excluded.count, weight = weight + excluded.weight",
		 &p->st_sample) < 0 ||
	    prep(p->db,
		 "SELECT COALESCE(SUM(CASE WHEN ?7 = 0 THEN count ELSE weight END), 0) FROM samples"
		 " WHERE minute >= ?1 AND minute < ?2 AND (?3 = 0 OR pid = ?3)"
		 " AND (?5 < 0 OR uid = ?5) AND (?6 = -1 OR node = ?6) AND profile = ?7",
		 &p->st_total) < 0 ||
	    prep(p->db,
		 "SELECT st.text, SUM(" VALUE ") AS n, MIN(s.pid), MAX(s.pid), s.node"
		 " FROM samples s JOIN stacks st ON st.id = s.stack_id"
		 " WHERE s.minute >= ?1 AND s.minute < ?2 AND (?3 = 0 OR s.pid = ?3)"
		 " AND (?5 < 0 OR s.uid = ?5) AND (?6 = -1 OR s.node = ?6) AND s.profile = ?7"
		 " GROUP BY s.node, st.text ORDER BY n DESC, st.text, s.node LIMIT ?4",
		 &p->st_folded) < 0 ||
	    prep(p->db,
		 "SELECT s.minute, s.pid, s.tid, st.text, st.raw, s.count, s.span, s.node, s.start,"
		 " s.weight"
		 " FROM samples s JOIN stacks st ON st.id = s.stack_id"
		 " WHERE s.minute >= ?1 AND s.minute < ?2 AND (?3 = 0 OR s.pid = ?3)"
		 " AND (?5 < 0 OR s.uid = ?5) AND (?6 = -1 OR s.node = ?6) AND s.profile = ?7",
		 &p->st_rows) < 0 ||
	    prep(p->db,
		 "SELECT st.text, SUM(" VALUE "), s.node FROM samples s"
		 " JOIN stacks st ON st.id = s.stack_id"
		 " WHERE s.minute >= ?1 AND s.minute < ?2 AND (?3 = 0 OR s.pid = ?3)"
		 " AND (?5 < 0 OR s.uid = ?5) AND (?6 = -1 OR s.node = ?6) AND s.profile = ?7"
		 " GROUP BY s.node, s.stack_id",
		 &p->st_sums) < 0 ||
	    prep(p->db, "INSERT OR IGNORE INTO nodes (id, name) VALUES (?1, ?2)",
		 &p->st_node_put) < 0 ||
	    prep(p->db, "DELETE FROM samples WHERE minute < ?1", &p->st_expire_samples) < 0 ||
	    prep(p->db,
		 "DELETE FROM stacks WHERE id NOT IN (SELECT DISTINCT stack_id FROM samples)",
		 &p->st_expire_stacks) < 0) {
		finalize_all(p);
		return -EIO;
	}
	return 0;
}

static void batch_val_free(void *val);

void profile_free(struct profile_store *p)
{
	if (!p)
		return;
	if (p->batch)
		profile_flush(p);
	hmap_free(p->batch, batch_val_free);
	hmap_free(p->draining, batch_val_free);
	free(p->drain);
	hmap_free(p->ids, free);
	hmap_free(p->nodes, NULL);
	hmap_free(p->node_names, free); /* the names, shared with nodes' keys */
	finalize_all(p);
	cache_close(p->mem);
	free(p->keybuf);
	free(p);
}

static int rotate(struct profile_store *p);

/* FNV-1a over 8-byte words, once per stack (not per sample). Fixed, not
 * seeded: stacks.hash keeps it across restarts. */
static uint64_t hash_two(const void *a, size_t a_len, const void *b, size_t b_len)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	const unsigned char *parts[2] = { a, b };
	size_t lens[2] = { a_len, b_len };

	for (int k = 0; k < 2; k++) {
		const unsigned char *q = parts[k];
		size_t n = lens[k];
		uint64_t v;

		for (; n >= 8; q += 8, n -= 8) {
			memcpy(&v, q, 8);
			h = (h ^ v) * 0x100000001b3ULL;
			h ^= h >> 29;
		}
		v = 0;
		if (n)
			memcpy(&v, q, n);
		h = (h ^ v ^ ((uint64_t)lens[k] << 32)) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

uint64_t profile_stack_hash(const char *frames, const void *raw, size_t raw_len)
{
	return hash_two(frames ? frames : "", frames ? strlen(frames) : 0, raw, raw ? raw_len : 0);
}

static void batch_val_free(void *val)
{
	struct batch_val *v = val;

	if (v)
		stack_text_unref(v->shared);
	free(v);
}

/* A new row: the text as folded_push() makes it, and the raw stack. */
static struct batch_val *batch_val_new(const struct profile_sample *smp, size_t flen)
{
	struct folded f = { 0 };
	struct batch_val *v = NULL;
	size_t tlen;

	if (folded_push(&f, smp->comm, false) < 0)
		goto cleanup;
	if (smp->shared) {
		v = malloc(sizeof(*v) + f.len);
		if (!v)
			goto cleanup;
		v->count = 0;
		v->weight = 0;
		v->shared = smp->shared;
		stack_text_ref(v->shared);
		v->text_len = (uint32_t)f.len;
		v->raw_len = 0;
		memcpy(v->data, f.buf, f.len);
		goto cleanup;
	}
	tlen = f.len + (flen ? 1 + flen : 0);
	v = malloc(sizeof(*v) + tlen + smp->raw_len);
	if (!v)
		goto cleanup;
	v->count = 0;
	v->weight = 0;
	v->shared = NULL;
	v->text_len = (uint32_t)tlen;
	v->raw_len = (uint32_t)smp->raw_len;
	memcpy(v->data, f.buf, f.len);
	if (flen) {
		v->data[f.len] = ';';
		memcpy(v->data + f.len + 1, smp->frames, flen);
	}
	if (smp->raw_len)
		memcpy(v->data + tlen, smp->raw, smp->raw_len);
cleanup:
	folded_done(&f);
	return v;
}

static int drain(struct profile_store *p, size_t max_rows, int64_t budget_us);

/* The batch is full: it becomes the one being written. Writing fell
 * behind if the previous one is not written yet: the rest of that one is
 * written now, on the caller's thread (memory stays bounded at two
 * batches; the new one is still written a slice a tick). */
static int batch_full(struct profile_store *p)
{
	int r = 0, r2;

	if (!p->ids && !(p->ids = hmap_new()))
		return -ENOMEM;
	if (p->draining)
		r = drain(p, 0, 0);
	r2 = rotate(p);
	return r < 0 ? r : r2;
}

int profile_add(struct profile_store *p, const struct profile_sample *smp)
{
	struct batch_key k = { .minute = smp->unix_s / 60, .start = smp->start, .node = smp->node,
			       .profile = smp->profile, .pid = smp->pid, .tid = smp->tid, .uid = smp->uid };
	const char *comm = smp->comm ? smp->comm : "";
	size_t comm_len = strnlen(comm, PROFILE_MAX_NAME), klen;
	struct batch_val *v;
	int r;

	if (smp->count == 0)
		return 0;
	if (smp->span)
		memcpy(k.span, smp->span, PROFILE_SPAN_LEN);
	k.frames_len = smp->frames_len || !smp->frames ? (uint32_t)smp->frames_len
						       : (uint32_t)strlen(smp->frames);
	k.raw_len = (uint32_t)smp->raw_len;
	k.stack_hash = smp->stack_hash ? smp->stack_hash
				       : profile_stack_hash(smp->frames, smp->raw, smp->raw_len);
	k.comm_len = (uint32_t)comm_len;
	klen = sizeof(k) + comm_len;
	if (klen > p->keycap) {
		char *nb = realloc(p->keybuf, klen);

		if (!nb)
			return -ENOMEM;
		p->keybuf = nb;
		p->keycap = klen;
	}
	memcpy(p->keybuf, &k, sizeof(k));
	memcpy(p->keybuf + sizeof(k), comm, comm_len);
	v = hmap_get(p->batch, p->keybuf, klen);
	if (!v) {
		v = batch_val_new(smp, k.frames_len);
		if (!v)
			return -ENOMEM;
		r = hmap_put(p->batch, p->keybuf, klen, v, NULL);
		if (r < 0) {
			free(v);
			return r;
		}
	}
	v->count += smp->count;
	v->weight = v->weight + smp->weight < v->weight ? UINT64_MAX : v->weight + smp->weight;
	p->added += smp->count;
	if (hmap_count(p->batch) >= PROFILE_MAX_BATCH)
		return batch_full(p);
	return 0;
}

static int stack_id(struct profile_store *p, const char *text, size_t len, const void *raw,
		    size_t raw_len, int64_t *ret)
{
	int64_t hash = (int64_t)hash_two(text, len, raw, raw ? raw_len : 0);
	int rc, r = 0;

	sqlite3_bind_text(p->st_stack_get, 1, text, (int)len, SQLITE_STATIC);
	sqlite3_bind_blob(p->st_stack_get, 2, raw ? raw : "", (int)raw_len, SQLITE_STATIC);
	sqlite3_bind_int64(p->st_stack_get, 3, hash);
	rc = sqlite3_step(p->st_stack_get);
	if (rc == SQLITE_ROW) {
		*ret = sqlite3_column_int64(p->st_stack_get, 0);
		sqlite3_reset(p->st_stack_get);
		return 0;
	}
	sqlite3_reset(p->st_stack_get);
	sqlite3_bind_text(p->st_stack_put, 1, text, (int)len, SQLITE_STATIC);
	sqlite3_bind_blob(p->st_stack_put, 2, raw ? raw : "", (int)raw_len, SQLITE_STATIC);
	sqlite3_bind_int64(p->st_stack_put, 3, hash);
	rc = sqlite3_step(p->st_stack_put);
	if (rc == SQLITE_DONE)
		*ret = sqlite3_last_insert_rowid(p->db);
	else
		r = -EIO;
	sqlite3_reset(p->st_stack_put);
	return r;
}

/* The stacks.id of v, from the cache or the database. */
static int row_stack_id(struct profile_store *p, const void *key, size_t klen,
			const struct batch_val *v, int64_t *ret)
{
	/* The cache key: the batch key without minute, pid, tid and span. */
	const size_t skip = offsetof(struct batch_key, stack_hash);
	int64_t *id = hmap_get(p->ids, (const char *)key + skip, klen - skip);
	int r;

	if (id) {
		*ret = *id;
		return 0;
	}
	if (v->shared) {
		/* "comm;frames", as batch_val_new() makes it for a copy. */
		const struct stack_text *st = v->shared;
		size_t len = v->text_len + (st->text_len ? 1 + st->text_len : 0);
		char *text = malloc(len + 1);

		if (!text)
			return -ENOMEM;
		memcpy(text, v->data, v->text_len);
		if (st->text_len) {
			text[v->text_len] = ';';
			memcpy(text + v->text_len + 1, st->text, st->text_len);
		}
		r = stack_id(p, text, len, st->raw, st->raw_len, ret);
		free(text);
	} else {
		r = stack_id(p, v->data, v->text_len, v->data + v->text_len, v->raw_len, ret);
	}
	if (r < 0)
		return r;
	if (hmap_count(p->ids) >= PROFILE_MAX_BATCH) { /* bound it: start over */
		hmap_free(p->ids, free);
		p->ids = hmap_new();
		if (!p->ids)
			return -ENOMEM;
	}
	id = malloc(sizeof(*id));
	if (id) {
		*id = *ret;
		if (hmap_put(p->ids, (const char *)key + skip, klen - skip, id, NULL) < 0)
			free(id);
	}
	return 0;
}

/* Writes up to max_rows rows of m from *it in one transaction (0: all).
 * On failure the rows from *it on are dropped and counted. */
/* Moves the profile store to an in-memory database (the disk is full).
 * What the file holds stays there, unread until a restart. */
static int move_to_memory(struct profile_store *p)
{
	struct cache *mem = NULL;
	int r = cache_open(":memory:", NULL, &mem);

	if (r < 0)
		return r;
	finalize_all(p);
	r = prepare_all(p, cache_db(mem));
	if (r < 0) {
		cache_close(mem);
		/* Back to the file, so the store stays usable for reads. */
		if (prepare_all(p, cache_db(p->cache)) < 0)
			log_error("cannot prepare the profile store's statements again");
		return r;
	}
	p->mem = mem;
	if (store_nodes(p) < 0)
		log_warn("cannot copy the node names to memory; queries may miss some");
	log_warn("the disk under the cache is full: keeping profiles in memory from now on "
		 "(the last %u minutes, until a restart); symbol tables stay in the memory LRU",
		 p->retention_minutes);
	return 0;
}

bool profile_in_memory(const struct profile_store *p)
{
	return p->mem != NULL;
}

/* How many rows are written between two looks at the clock. */
#define WRITE_CLOCK_ROWS 64

static int write_rows(struct profile_store *p, size_t max_rows, int64_t budget_us, bool *ret_done)
{
	int64_t deadline = budget_us ? clock_now_us() + budget_us : 0;
	size_t start = p->drain_next, n = 0;
	bool full = false;
	int r = 0;

	*ret_done = false;
	if (sqlite3_exec(p->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		r = -EIO;
		full = (sqlite3_errcode(p->db) & 0xff) == SQLITE_FULL;
		goto fail;
	}
	for (;;) {
		const struct drain_row *row;
		const struct batch_val *v;
		struct batch_key k;
		int64_t id;

		if (max_rows && n == max_rows)
			break;
		if (deadline && n && n % WRITE_CLOCK_ROWS == 0 && clock_now_us() >= deadline)
			break;
		if (p->drain_next == p->drain_rows) {
			*ret_done = true;
			break;
		}
		row = &p->drain[p->drain_next];
		v = row->val;
		memcpy(&k, row->key, sizeof(k));
		r = row_stack_id(p, row->key, row->klen, v, &id);
		if (r < 0)
			break;
		sqlite3_bind_int64(p->st_sample, 1, (int64_t)k.minute);
		sqlite3_bind_int64(p->st_sample, 2, k.pid);
		sqlite3_bind_int64(p->st_sample, 3, k.tid);
		sqlite3_bind_int64(p->st_sample, 4, id);
		sqlite3_bind_int64(p->st_sample, 5, (int64_t)v->count);
		sqlite3_bind_int64(p->st_sample, 7, k.uid);
		sqlite3_bind_int64(p->st_sample, 8, k.node);
		sqlite3_bind_int64(p->st_sample, 9, (int64_t)k.start);
		sqlite3_bind_int64(p->st_sample, 10, k.profile);
		/* SQLite integers are signed: a saturated sum stays the largest. */
		sqlite3_bind_int64(p->st_sample, 11,
				   v->weight > INT64_MAX ? INT64_MAX : (int64_t)v->weight);
		{
			static const uint8_t none[PROFILE_SPAN_LEN];
			bool has = memcmp(k.span, none, sizeof(none)) != 0;

			sqlite3_bind_blob(p->st_sample, 6, has ? k.span : none, has ? PROFILE_SPAN_LEN : 0,
					  SQLITE_TRANSIENT);
		}
		if (sqlite3_step(p->st_sample) != SQLITE_DONE)
			r = -EIO;
		sqlite3_reset(p->st_sample);
		if (r < 0)
			break;
		p->drain_next++;
		n++;
	}
	if (r < 0) {
		/* The error code is the failed statement's: read it first. */
		full = (sqlite3_errcode(p->db) & 0xff) == SQLITE_FULL;
		log_debug("profile flush failed: %s", sqlite3_errmsg(p->db));
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
		goto fail;
	}
	if (sqlite3_exec(p->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		full = (sqlite3_errcode(p->db) & 0xff) == SQLITE_FULL;
		log_debug("profile commit failed: %s", sqlite3_errmsg(p->db));
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
		r = -EIO;
		goto fail;
	}
	return 0;
fail:
	/* Ids cached in the rolled-back transaction are void. */
	hmap_free(p->ids, free);
	p->ids = hmap_new();
	if (full && !p->mem && p->ids && move_to_memory(p) == 0) {
		p->drain_next = start; /* once: p->mem is set now */
		return write_rows(p, max_rows, budget_us, ret_done);
	}
	/* Rows that could not be written are dropped: keeping them would
	 * let a broken database grow the batch without bound. Counted, so
	 * Status can say what was lost. */
	for (size_t i = start; i < p->drain_rows; i++)
		p->dropped += p->drain[i].val->count;
	p->drain_next = p->drain_rows;
	*ret_done = true;
	return r;
}

/* The samples table's key order as far as minute, node, pid and tid
 * (the rest of the key varies little within a thread's rows in a batch).
 * Rows are written in this order so that each B-tree page is touched
 * about once; any order would be correct. */
static int cmp_drain_row(const void *a, const void *b)
{
	const struct drain_row *x = a, *y = b;

	if (x->minute_node != y->minute_node)
		return x->minute_node < y->minute_node ? -1 : 1;
	if (x->pid_tid != y->pid_tid)
		return x->pid_tid < y->pid_tid ? -1 : 1;
	return 0;
}

/* Makes the batch the draining map (there must be none), its rows sorted
 * into p->drain, and starts a new batch. */
static int rotate(struct profile_store *p)
{
	size_t n = hmap_count(p->batch), i = 0;
	struct drain_row *rows = malloc((n ? n : 1) * sizeof(*rows));
	struct hmap *nb = hmap_new();
	struct hmap_iter it;
	const void *key;
	size_t klen;
	void *val;

	if (!nb || !rows) {
		hmap_free(nb, NULL);
		free(rows);
		return -ENOMEM;
	}
	hmap_iter_init(p->batch, &it);
	while (i < n && hmap_next(p->batch, &it, &key, &klen, &val)) {
		/* The map's keys are malloc'd: aligned for a batch_key. */
		const struct batch_key *k = key;

		rows[i++] = (struct drain_row){
			.minute_node = (k->minute & UINT32_MAX) << 32 | k->node,
			.pid_tid = (uint64_t)k->pid << 32 | k->tid,
			.key = key,
			.klen = klen,
			.val = val,
		};
	}
	qsort(rows, i, sizeof(*rows), cmp_drain_row);
	p->draining = p->batch;
	p->batch = nb;
	free(p->drain);
	p->drain = rows;
	p->drain_rows = i;
	p->drain_next = 0;
	return 0;
}

static int drain(struct profile_store *p, size_t max_rows, int64_t budget_us)
{
	bool done = false;
	int r = write_rows(p, max_rows, budget_us, &done);

	/* Every row written: done, even when the bound stopped the loop
	 * just before it would have seen that. */
	if (done || p->drain_next == p->drain_rows) {
		hmap_free(p->draining, batch_val_free);
		p->draining = NULL;
		free(p->drain);
		p->drain = NULL;
		p->drain_rows = p->drain_next = 0;
	}
	return r;
}

int profile_flush(struct profile_store *p)
{
	int r = 0, r2;

	if (!p->ids && !(p->ids = hmap_new()))
		return -ENOMEM;
	if (p->draining)
		r = drain(p, 0, 0);
	if (hmap_count(p->batch) == 0)
		return r;
	r2 = rotate(p);
	if (r2 == 0)
		r2 = drain(p, 0, 0);
	return r < 0 ? r : r2;
}

bool profile_writing(const struct profile_store *p)
{
	return p->draining != NULL;
}

size_t profile_pending_rows(const struct profile_store *p)
{
	return hmap_count(p->batch);
}

int profile_flush_step(struct profile_store *p, size_t max_rows, int64_t budget_us, bool start)
{
	int r;

	if (!p->ids && !(p->ids = hmap_new()))
		return -ENOMEM;
	if (!p->draining) {
		if (!start || hmap_count(p->batch) == 0)
			return 0;
		r = rotate(p);
		if (r < 0)
			return r;
	}
	return drain(p, max_rows, budget_us);
}

void profile_counts(const struct profile_store *p, uint64_t *ret_added, uint64_t *ret_dropped)
{
	*ret_added = p->added;
	*ret_dropped = p->dropped;
}

int profile_expire(struct profile_store *p, uint64_t now_s)
{
	uint64_t now_min = now_s / 60;
	int r = 0;

	/* Deleted stacks take their ids along. */
	hmap_free(p->ids, free);
	p->ids = hmap_new();

	if (now_min < p->retention_minutes)
		return 0;
	sqlite3_bind_int64(p->st_expire_samples, 1, (int64_t)(now_min - p->retention_minutes));
	if (sqlite3_step(p->st_expire_samples) != SQLITE_DONE)
		r = -EIO;
	sqlite3_reset(p->st_expire_samples);
	if (r == 0 && sqlite3_changes(p->db) >= 0) {
		if (sqlite3_step(p->st_expire_stacks) != SQLITE_DONE)
			r = -EIO;
		sqlite3_reset(p->st_expire_stacks);
	}
	return r;
}

static void bind_window(sqlite3_stmt *st, const struct profile_query *q)
{
	int64_t until = q->until_s ? (int64_t)((q->until_s + 59) / 60) : INT64_MAX;

	if (q->until_s > (uint64_t)INT64_MAX - 59)
		until = INT64_MAX;
	sqlite3_bind_int64(st, 1, (int64_t)(q->since_s / 60));
	sqlite3_bind_int64(st, 2, until);
	sqlite3_bind_int64(st, 3, q->pid);
	sqlite3_bind_int64(st, 5, q->scoped ? (int64_t)q->uid : -1);
}

static void bind_query(const struct profile_store *p, sqlite3_stmt *st,
		       const struct profile_query *q)
{
	bind_window(st, q);
	sqlite3_bind_int64(st, 6, query_node(p, q->node));
	sqlite3_bind_int64(st, 7, q->profile);
}

static int window_total(struct profile_store *p, const struct profile_query *q, uint64_t *ret)
{
	int r = -EIO;

	bind_query(p, p->st_total, q);
	if (sqlite3_step(p->st_total) == SQLITE_ROW) {
		*ret = (uint64_t)sqlite3_column_int64(p->st_total, 0);
		r = 0;
	}
	sqlite3_reset(p->st_total);
	return r;
}

struct top_acc {
	uint64_t self, total;
	uint64_t last_row; /* row that last counted total, so once per stack */
	const char *name;
	const char *node;  /* borrowed from the store */
};

/* The accumulator key of function name (len bytes) of node: the node's
 * id, then the name. */
static size_t top_key(char *buf, size_t cap, int64_t node, const char *name, size_t len)
{
	if (len > cap - sizeof(node))
		len = cap - sizeof(node);
	memcpy(buf, &node, sizeof(node));
	memcpy(buf + sizeof(node), name, len);
	return sizeof(node) + len;
}

static int cmp_top(const void *a, const void *b)
{
	const struct profile_top_entry *x = a, *y = b;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	if (strcmp(x->function, y->function))
		return strcmp(x->function, y->function);
	return strcmp(x->node, y->node);
}

int profile_top(struct profile_store *p, const struct profile_query *q, struct arena *a,
		struct profile_top_entry **ret_entries, size_t *ret_n, uint64_t *ret_total)
{
	struct hmap *acc = hmap_new();
	struct profile_top_entry *out = NULL;
	char key[sizeof(int64_t) + 4 * PROFILE_MAX_NAME + 16]; /* escaping makes up to 4 bytes of 1 */
	uint64_t row = 0, total = 0;
	size_t n = 0;
	struct hmap_iter it;
	void *val;
	int r, rc;

	if (!acc)
		return -ENOMEM;
	profile_flush(p);
	r = window_total(p, q, &total);
	if (r < 0)
		goto cleanup;
	bind_query(p, p->st_sums, q);
	while ((rc = sqlite3_step(p->st_sums)) == SQLITE_ROW) {
		const char *text = (const char *)sqlite3_column_text(p->st_sums, 0);
		uint64_t cnt = (uint64_t)sqlite3_column_int64(p->st_sums, 1);
		int64_t node = sqlite3_column_int64(p->st_sums, 2);
		const char *s, *semi, *leaf = NULL;
		size_t leaf_len = 0, klen;

		row++;
		if (!text)
			continue;
		s = strchr(text, ';'); /* skip the comm frame */
		while (s) {
			const char *name = s + 1;
			size_t len;
			struct top_acc *e;

			semi = strchr(name, ';');
			len = semi ? (size_t)(semi - name) : strlen(name);
			klen = top_key(key, sizeof(key), node, name, len);
			e = hmap_get(acc, key, klen);
			if (!e) {
				e = arena_alloc(a, sizeof(*e));
				if (e)
					e->node = node_name(p, node);
				if (!e || hmap_put(acc, key, klen, e, NULL) < 0) {
					r = -ENOMEM;
					goto cleanup;
				}
				e->name = arena_strndup(a, name, len);
				if (!e->name) {
					r = -ENOMEM;
					goto cleanup;
				}
			}
			if (e->last_row != row) {
				e->total += cnt;
				e->last_row = row;
			}
			leaf = name;
			leaf_len = len;
			s = semi;
		}
		if (leaf) {
			struct top_acc *e;

			klen = top_key(key, sizeof(key), node, leaf, leaf_len);
			e = hmap_get(acc, key, klen);

			if (e)
				e->self += cnt;
		}
	}
	if (rc != SQLITE_DONE) {
		r = -EIO;
		goto cleanup;
	}
	out = arena_alloc(a, (hmap_count(acc) + 1) * sizeof(*out));
	if (!out) {
		r = -ENOMEM;
		goto cleanup;
	}
	hmap_iter_init(acc, &it);
	while (hmap_next(acc, &it, NULL, NULL, &val)) {
		struct top_acc *e = val;

		out[n++] = (struct profile_top_entry){ .node = e->node, .function = e->name,
						       .self = e->self, .total = e->total };
	}
	qsort(out, n, sizeof(*out), cmp_top);
	if (q->limit && n > q->limit)
		n = q->limit;
	*ret_entries = out;
	*ret_n = n;
	*ret_total = total;
	r = 0;
cleanup:
	sqlite3_reset(p->st_sums);
	hmap_free(acc, NULL);
	return r;
}

int profile_folded(struct profile_store *p, const struct profile_query *q, struct arena *a,
		   struct profile_stack **ret_stacks, size_t *ret_n, uint64_t *ret_total)
{
	struct profile_stack *out = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	int r, rc;

	profile_flush(p);
	r = window_total(p, q, &total);
	if (r < 0)
		return r;
	bind_query(p, p->st_folded, q);
	sqlite3_bind_int64(p->st_folded, 4, q->limit ? (int64_t)q->limit : -1);
	while ((rc = sqlite3_step(p->st_folded)) == SQLITE_ROW) {
		const char *text = (const char *)sqlite3_column_text(p->st_folded, 0);
		int64_t minpid = sqlite3_column_int64(p->st_folded, 2);
		int64_t maxpid = sqlite3_column_int64(p->st_folded, 3);

		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct profile_stack *no = arena_alloc(a, ncap * sizeof(*no));

			if (!no) {
				r = -ENOMEM;
				goto cleanup;
			}
			if (n)
				memcpy(no, out, n * sizeof(*no));
			out = no;
			cap = ncap;
		}
		out[n].text = arena_strdup(a, text ? text : "");
		if (!out[n].text) {
			r = -ENOMEM;
			goto cleanup;
		}
		out[n].count = (uint64_t)sqlite3_column_int64(p->st_folded, 1);
		out[n].node = arena_strdup(a, node_name(p, sqlite3_column_int64(p->st_folded, 4)));
		if (!out[n].node) {
			r = -ENOMEM;
			goto cleanup;
		}
		out[n].pid = minpid == maxpid ? (uint32_t)minpid : 0;
		n++;
	}
	if (rc != SQLITE_DONE) {
		r = -EIO;
		goto cleanup;
	}
	*ret_stacks = out;
	*ret_n = n;
	*ret_total = total;
	r = 0;
cleanup:
	sqlite3_reset(p->st_folded);
	return r;
}

int profile_rows(struct profile_store *p, const struct profile_query *q,
		 int (*fn)(const struct profile_row *row, void *ctx), void *ctx)
{
	char comm[PROFILE_MAX_NAME + 1];
	int r = 0, rc;

	profile_flush(p);
	bind_query(p, p->st_rows, q);
	while ((rc = sqlite3_step(p->st_rows)) == SQLITE_ROW) {
		const char *text = (const char *)sqlite3_column_text(p->st_rows, 3);
		const char *semi = text ? strchr(text, ';') : NULL;
		size_t clen = text ? (semi ? (size_t)(semi - text) : strlen(text)) : 0;
		struct profile_row row = {
			.minute = (uint64_t)sqlite3_column_int64(p->st_rows, 0),
			.pid = (uint32_t)sqlite3_column_int64(p->st_rows, 1),
			.tid = (uint32_t)sqlite3_column_int64(p->st_rows, 2),
			.comm = comm,
			.raw = sqlite3_column_blob(p->st_rows, 4),
			.raw_len = (size_t)sqlite3_column_bytes(p->st_rows, 4),
			.count = (uint64_t)sqlite3_column_int64(p->st_rows, 5),
			.profile = q->profile,
			.weight = (uint64_t)sqlite3_column_int64(p->st_rows, 9),
			.node = node_name(p, sqlite3_column_int64(p->st_rows, 7)),
			.start = (uint64_t)sqlite3_column_int64(p->st_rows, 8),
		};

		if (sqlite3_column_bytes(p->st_rows, 6) == PROFILE_SPAN_LEN)
			row.span = sqlite3_column_blob(p->st_rows, 6);

		/* The comm is the folded text's first frame. */
		if (clen > PROFILE_MAX_NAME)
			clen = PROFILE_MAX_NAME;
		memcpy(comm, text ? text : "", clen);
		comm[clen] = '\0';
		r = fn(&row, ctx);
		if (r)
			break;
	}
	if (!r && rc != SQLITE_DONE)
		r = -EIO;
	sqlite3_reset(p->st_rows);
	return r;
}
