/* test-store.c - the SQLite file-analysis cache and the profile store:
 * round trip, analysed-once across reopen, a corrupt file moved aside, the
 * schema version check, and profile insert/Top/Folded over windows and a
 * pid filter, a damaged source index. The symtab and source index come
 * from analysing this test's own binary. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sqlite3.h>
#include <unistd.h>
#include <cmocka.h>

#include "cache.h"
#include "profile.h"
#include "elf_analysis.h"
#include "file_image.h"
#include "line_index.h"

static char dir[256];
static char db_path[300];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/test-store.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(db_path, sizeof(db_path), "%s/cache.db", dir);
	return 0;
}

static int teardown(void **state)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[600];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
	return 0;
}

static struct symtab *own_symtab(void)
{
	struct file_image *img = file_image_open("/proc/self/exe");
	struct symtab *t = NULL;
	struct elf_need need;
	const char *reason;

	assert_non_null(img);
	assert_int_equal(elf_analysis_step(img, &need, &t, &reason), 0);
	file_image_free(img);
	return t;
}

static void test_cache_round_trip(void **state)
{
	struct cache *c = NULL;
	struct fileid a = { { 1, 2, 3 } }, b = { { 9, 9, 9 } }, none = { { 7 } }, found;
	struct fileid u = { { 4, 4, 4 } }; /* symbols, then "killed" before its index */
	struct symtab *t = own_symtab();
	const struct symtab *got = NULL;
	const char *err = NULL;
	struct symtab_lookup l;
	struct cache_stats st;
	uint64_t addr = (uint64_t)(uintptr_t)&test_cache_round_trip;
	const uint8_t *bid;
	size_t bid_len;

	(void)addr;
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_lookup(c, &a, &got, &err), CACHE_MISS);
	bid = symtab_build_id(t, &bid_len);
	uint8_t bid_copy[64];
	size_t bl = bid_len;
	memcpy(bid_copy, bid, bid_len);
	size_t n = symtab_count(t);
	assert_true(n > 0);
	assert_int_equal(cache_store(c, &a, t, NULL, 1000), 0);
	assert_int_equal(cache_store_index(c, &a, NULL, "no source index", 1000), 0);
	assert_int_equal(cache_store(c, &b, NULL, "not an ELF file", 1001), 0);
	assert_int_equal(cache_store(c, &u, own_symtab(), NULL, 1002), 0);
	assert_int_equal(cache_lookup(c, &a, &got, &err), CACHE_OK);
	assert_int_equal(symtab_count(got), n);
	assert_int_equal(cache_lookup(c, &b, &got, &err), CACHE_ERROR);
	assert_string_equal(err, "not an ELF file");
	if (bl) {
		assert_int_equal(cache_find_build_id(c, bid_copy, bl, &found), 0);
		assert_memory_equal(found.bytes, a.bytes, FILEID_LEN);
	}
	assert_int_equal(cache_find_build_id(c, (const uint8_t *)"zz", 2, &found), -ENOENT);
	cache_get_stats(c, &st);
	assert_int_equal(st.mem_hits, 2);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.files_ok, 2);
	assert_int_equal(st.files_failed, 1);
	cache_close(c);

	/* Analysed once: after reopening, both results come from disk; the
	 * file whose index was never stored is forgotten (analysed again). */
	c = NULL;
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_true(cache_contains(c, &a));
	assert_false(cache_contains(c, &u));
	assert_false(cache_contains(c, &none));
	assert_int_equal(cache_lookup(c, &a, &got, &err), CACHE_OK);
	assert_int_equal(symtab_count(got), n);
	assert_int_equal(symtab_lookup(got, 0, &l) == 0 || 1, 1);
	assert_int_equal(cache_lookup(c, &b, &got, &err), CACHE_ERROR);
	assert_string_equal(err, "not an ELF file");
	cache_get_stats(c, &st);
	assert_int_equal(st.db_hits, 2);
	cache_close(c);
}

/* A source index blob that does not deserialise forgets its file's
 * analysis, or nothing would build the index again: the symtab handed out
 * before stays valid until the next lookup, which misses, in memory and
 * after a reopen. */
static void test_cache_damaged_index_forgets_analysis(void **state)
{
	struct fileid a = {{5}};
	struct file_image *img = file_image_open("/proc/self/exe");
	struct line_index *built = NULL;
	const struct line_index *ix = NULL;
	const struct symtab *got = NULL;
	const char *reason = NULL;
	struct cache *c;
	sqlite3 *db;
	size_t n;

	assert_non_null(img);
	assert_int_equal(line_index_build((void *)file_image_data(img), file_image_size(img), NULL,
					  0, NULL, 0, 0, &built, &reason),
			 0);
	file_image_free(img);
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_store(c, &a, own_symtab(), NULL, 1), 0);
	assert_int_equal(cache_store_index(c, &a, built, NULL, 1), 0);
	cache_close(c);

	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE lines SET idx = substr(idx, 1, length(idx) / 2)",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);

	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_lookup(c, &a, &got, NULL), CACHE_OK);
	n = symtab_count(got);
	assert_true(n > 0);
	assert_int_equal(cache_lookup_index(c, &a, &ix, NULL), CACHE_MISS);
	assert_int_equal(symtab_count(got), n); /* still valid */
	assert_false(cache_contains(c, &a));
	assert_int_equal(cache_lookup(c, &a, &got, NULL), CACHE_MISS);
	cache_close(c);
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_lookup(c, &a, &got, NULL), CACHE_MISS);
	assert_int_equal(cache_lookup_index(c, &a, &ix, NULL), CACHE_MISS);
	cache_close(c);
}

/* A cached source index counts against the memory cap at what it holds in
 * memory, its bucket directories included, not at its blob's size: both
 * when stored and when read back from the database. */
static void test_cache_index_memory_counted(void **state)
{
	struct fileid a = {{6}};
	struct file_image *img = file_image_open("/proc/self/exe");
	struct line_index *built = NULL;
	const struct line_index *ix = NULL;
	const char *reason = NULL;
	struct cache_stats before, after;
	struct cache *c;
	size_t blob_size, mem;
	void *blob;

	assert_non_null(img);
	assert_int_equal(line_index_build((void *)file_image_data(img), file_image_size(img), NULL,
					  0, NULL, 0, 0, &built, &reason),
			 0);
	file_image_free(img);
	mem = line_index_bytes(built);
	blob = line_index_serialize(built, &blob_size);
	assert_non_null(blob);
	free(blob);
	assert_true(mem > blob_size); /* the directories are not in the blob */
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	cache_get_stats(c, &before);
	assert_int_equal(cache_store_index(c, &a, built, NULL, 1), 0);
	cache_get_stats(c, &after);
	assert_true(after.mem_bytes - before.mem_bytes >= mem);
	cache_close(c);
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	cache_get_stats(c, &before);
	assert_int_equal(cache_lookup_index(c, &a, &ix, NULL), CACHE_OK);
	cache_get_stats(c, &after);
	assert_true(after.mem_bytes - before.mem_bytes >= line_index_bytes(ix));
	assert_true(line_index_bytes(ix) > blob_size);
	cache_close(c);
	(void)state;
}

static void test_cache_lru_bound(void **state)
{
	struct cache *c = NULL;
	struct cache_opts o = { .mem_max_entries = 2 };
	struct cache_stats st;

	assert_int_equal(cache_open(db_path, &o, &c), 0);
	for (uint8_t i = 0; i < 10; i++) {
		struct fileid id = { { 0xee, i } };

		assert_int_equal(cache_store(c, &id, NULL, "e", 1), 0);
	}
	cache_get_stats(c, &st);
	assert_int_equal(st.mem_entries, 2);
	for (uint8_t i = 0; i < 10; i++) {
		struct fileid id = { { 0xee, i } };
		const char *err;

		assert_int_equal(cache_lookup(c, &id, NULL, &err), CACHE_ERROR);
	}
	cache_get_stats(c, &st);
	assert_int_equal(st.mem_entries, 2);
	assert_true(st.db_hits >= 8);
	cache_close(c);
}

static int count_corrupt_files(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strstr(e->d_name, "cache.db.corrupt-") != NULL;
	if (d)
		closedir(d);
	return n;
}

static void test_cache_corrupt_moved_aside(void **state)
{
	struct cache *c = NULL;
	struct fileid a = { { 5 } };
	FILE *f = fopen(db_path, "w");

	assert_non_null(f);
	for (int i = 0; i < 2000; i++)
		fputs("this is not a database\n", f);
	fclose(f);
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(count_corrupt_files(), 1);
	assert_int_equal(cache_store(c, &a, NULL, "x", 1), 0);
	cache_close(c);
	c = NULL;
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_true(cache_contains(c, &a));
	cache_close(c);
}

static void test_cache_schema_version(void **state)
{
	struct cache *c = NULL;
	sqlite3 *db;

	/* Newer schema: refused, left alone. */
	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x); PRAGMA user_version=99", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(cache_open(db_path, NULL, &c), -EPROTONOSUPPORT);
	assert_null(c);
	assert_int_equal(count_corrupt_files(), 0);
	/* Someone else's database (version 0 with tables): refused. */
	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=0", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(cache_open(db_path, NULL, &c), -EEXIST);
	unlink(db_path);
	/* A fresh one gets our version. */
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	cache_close(c);
	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), CACHE_SCHEMA_VERSION);
	sqlite3_finalize(st);
	/* A version 13 cache (samples without node or start) is brought to
	 * 14; so is one set back further, replaying steps over tables that
	 * exist (the nodes table). */
	for (int v = 13; v >= 12; v--) {
		char sql[64];

		snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", v);
		assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
		assert_int_equal(cache_open(db_path, NULL, &c), 0);
		cache_close(c);
		assert_int_equal(sqlite3_prepare_v2(db, "SELECT node, start FROM samples", -1, &st, NULL),
				 SQLITE_OK);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
}

static void test_folded_push(void **state)
{
	struct folded f = { 0 };

	assert_int_equal(folded_push(&f, "a;b", false), 0);
	assert_int_equal(folded_push(&f, "line\nbreak", false), 0);
	assert_int_equal(folded_push(&f, "", false), 0);
	assert_int_equal(folded_push(&f, "schedule", true), 0);
	assert_string_equal(f.buf, "a:b;linebreak;[unknown];schedule_[k]");
	folded_done(&f);
}

static const struct profile_top_entry *find_top(const struct profile_top_entry *e, size_t n,
						const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(e[i].function, name) == 0)
			return &e[i];
	return NULL;
}

/* One batch of samples by thread tid (raw: a fake raw stack; NULL: none). */
static int add(struct profile_store *p, uint64_t unix_s, uint32_t pid, uint32_t tid,
	       const char *comm, const char *frames, const char *raw, uint64_t count)
{
	struct profile_sample smp = {
		.unix_s = unix_s, .pid = pid, .tid = tid, .comm = comm, .frames = frames,
		.raw = raw, .raw_len = raw ? strlen(raw) : 0, .count = count,
	};

	return profile_add(p, &smp);
}

struct rows_seen {
	uint64_t total, tid7, raw_b, in_span;
	size_t rows;
};

static const uint8_t test_span[PROFILE_SPAN_LEN] = { 0xab, 1, 2, 3, [23] = 0xcd };

static int count_row(const struct profile_row *row, void *ctx)
{
	struct rows_seen *seen = ctx;

	seen->rows++;
	seen->total += row->count;
	if (row->tid == 7)
		seen->tid7 += row->count;
	if (row->raw_len == 1 && !memcmp(row->raw, "b", 1))
		seen->raw_b += row->count;
	if (row->span) {
		assert_memory_equal(row->span, test_span, PROFILE_SPAN_LEN);
		seen->in_span += row->count;
	}
	assert_string_equal(row->comm, "app:x");
	return 0;
}

/* Off-CPU and memory samples are kept apart from CPU ones; Top and
 * Folded add up their weights, rows carry both. */
static int sum_row(const struct profile_row *row, void *ctx)
{
	uint64_t *v = ctx;

	assert_int_equal(row->profile, 1);
	v[0] += row->count;
	v[1] += row->weight;
	return 0;
}

static void test_profile_types(void **state)
{
	struct cache *c = NULL;
	struct profile_store *p;
	struct arena *a = arena_new();
	struct profile_top_entry *top;
	struct profile_stack *st;
	size_t n;
	uint64_t total, rows[2] = { 0 };
	struct profile_sample smp = { .unix_s = 1700000000, .pid = 1, .tid = 1, .comm = "app",
				      .frames = "main;wait", .count = 3 };
	struct profile_query cpu = { 0 }, off = { .profile = 1 }, mem = { .profile = 2 };

	(void)state;
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	p = profile_new(c, 60);
	assert_non_null(p);
	assert_int_equal(profile_add(p, &smp), 0);
	smp.profile = 1;
	smp.count = 2;
	smp.weight = 40000000; /* 40 ms in two blocks */
	assert_int_equal(profile_add(p, &smp), 0);
	smp.weight = 2000000;
	smp.count = 1;
	assert_int_equal(profile_add(p, &smp), 0);
	assert_int_equal(profile_flush(p), 0);
	/* The same row again after a flush: the upsert adds both. */
	assert_int_equal(profile_add(p, &smp), 0);
	assert_int_equal(profile_flush(p), 0);

	assert_int_equal(profile_top(p, &cpu, a, &top, &n, &total), 0);
	assert_int_equal(total, 3);
	assert_int_equal(profile_top(p, &off, a, &top, &n, &total), 0);
	assert_int_equal(total, 44000000);
	assert_non_null(find_top(top, n, "wait"));
	assert_int_equal(find_top(top, n, "wait")->self, 44000000);
	assert_int_equal(profile_folded(p, &off, a, &st, &n, &total), 0);
	assert_int_equal(n, 1);
	assert_int_equal(st[0].count, 44000000);
	assert_string_equal(st[0].text, "app;main;wait");
	assert_int_equal(profile_folded(p, &mem, a, &st, &n, &total), 0);
	assert_int_equal(n, 0);
	assert_int_equal(profile_rows(p, &off, sum_row, rows), 0);
	assert_int_equal(rows[0], 4);
	assert_int_equal(rows[1], 44000000);
	profile_free(p);
	cache_close(c);
	arena_free(a);
}

static void test_profile(void **state)
{
	struct cache *c = NULL;
	struct profile_store *p;
	struct arena *a = arena_new();
	struct profile_top_entry *top;
	struct profile_stack *st;
	size_t n;
	uint64_t total;
	const uint64_t t0 = 1700000000; /* a minute boundary + 20 s */
	struct profile_query all = { 0 };

	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	p = profile_new(c, 60);
	assert_non_null(p);
	/* pid 1: main;f;g x5 (twice in one minute), main;f x2; recursion
	 * main;f;f x1; pid 2: main;h x4 a few minutes later. */
	assert_int_equal(add(p, t0, 1, 1, "app;x", "main;f;g", NULL, 3), 0);
	assert_int_equal(add(p, t0 + 1, 1, 1, "app;x", "main;f;g", NULL, 2), 0);
	assert_int_equal(add(p, t0, 1, 1, "app;x", "main;f", NULL, 2), 0);
	assert_int_equal(add(p, t0, 1, 1, "app;x", "main;f;f", NULL, 1), 0);
	assert_int_equal(profile_flush(p), 0);
	assert_int_equal(add(p, t0 + 300, 2, 2, "other", "main;h", NULL, 4), 0);

	assert_int_equal(profile_top(p, &all, a, &top, &n, &total), 0);
	assert_int_equal(total, 12);
	assert_int_equal(n, 4); /* main f g h; no comm */
	assert_null(find_top(top, n, "app:x"));
	assert_int_equal(find_top(top, n, "g")->self, 5);
	assert_int_equal(find_top(top, n, "f")->self, 3);
	assert_int_equal(find_top(top, n, "f")->total, 8); /* once per stack */
	assert_int_equal(find_top(top, n, "main")->total, 12);
	assert_int_equal(find_top(top, n, "main")->self, 0);
	assert_string_equal(top[0].function, "g"); /* ordered by self */

	struct profile_query lim = { .limit = 2 };
	assert_int_equal(profile_top(p, &lim, a, &top, &n, &total), 0);
	assert_int_equal(n, 2);

	struct profile_query pid2 = { .pid = 2 };
	assert_int_equal(profile_folded(p, &pid2, a, &st, &n, &total), 0);
	assert_int_equal(n, 1);
	assert_int_equal(total, 4);
	assert_string_equal(st[0].text, "other;main;h");
	assert_int_equal(st[0].pid, 2);

	/* Windows: [t0, t0+60) has pid 1's minute only; a window ending
	 * inside the first minute still overlaps it. */
	struct profile_query w1 = { .since_s = t0, .until_s = t0 + 60 };
	assert_int_equal(profile_folded(p, &w1, a, &st, &n, &total), 0);
	assert_int_equal(total, 8);
	assert_int_equal(n, 3);
	assert_string_equal(st[0].text, "app:x;main;f;g");
	assert_int_equal(st[0].count, 5);
	struct profile_query w2 = { .since_s = t0 + 120 };
	assert_int_equal(profile_folded(p, &w2, a, &st, &n, &total), 0);
	assert_int_equal(total, 4);
	struct profile_query w3 = { .since_s = t0 - 3600, .until_s = t0 - 600 };
	assert_int_equal(profile_folded(p, &w3, a, &st, &n, &total), 0);
	assert_int_equal(total, 0);
	assert_int_equal(n, 0);

	/* Raw stacks and threads: one folded text from two raw stacks and
	 * two threads stays one folded stack, but rows keep them apart. */
	struct profile_query w4 = { .since_s = t0 + 1200, .pid = 3 };
	struct rows_seen seen = { 0 };
	assert_int_equal(add(p, t0 + 1200, 3, 7, "app;x", "main;k", "a", 2), 0);
	assert_int_equal(add(p, t0 + 1200, 3, 8, "app;x", "main;k", "b", 3), 0);
	assert_int_equal(add(p, t0 + 1201, 3, 7, "app;x", "main;k", "a", 1), 0);
	assert_int_equal(profile_folded(p, &w4, a, &st, &n, &total), 0);
	assert_int_equal(n, 1);
	assert_int_equal(st[0].count, 6);
	assert_int_equal(profile_rows(p, &w4, count_row, &seen), 0);
	assert_int_equal(seen.rows, 2);
	assert_int_equal(seen.total, 6);
	assert_int_equal(seen.tid7, 3);
	assert_int_equal(seen.raw_b, 3);

	/* The same stack and thread in a span (Go probes) is a row of its own. */
	{
		struct profile_sample smp = { .unix_s = t0 + 1202, .pid = 3, .tid = 7, .comm = "app;x",
					      .frames = "main;k", .raw = "a", .raw_len = 1,
					      .count = 4, .span = test_span };

		assert_int_equal(profile_add(p, &smp), 0);
	}
	memset(&seen, 0, sizeof(seen));
	assert_int_equal(profile_rows(p, &w4, count_row, &seen), 0);
	assert_int_equal(seen.rows, 3);
	assert_int_equal(seen.total, 10);
	assert_int_equal(seen.tid7, 7);
	assert_int_equal(seen.in_span, 4);
	assert_int_equal(profile_folded(p, &w4, a, &st, &n, &total), 0);
	assert_int_equal(n, 1);
	assert_int_equal(st[0].count, 10);

	/* Owners: a scoped query sees only its uid's processes; everything
	 * above was root's (uid 0). */
	{
		struct profile_sample smp = { .unix_s = t0 + 1203, .pid = 4, .tid = 4, .uid = 1000,
					      .comm = "app;x", .frames = "main;m", .count = 5 };
		struct profile_query mine = { .since_s = t0 + 1200, .scoped = true, .uid = 1000 };
		struct profile_query roots = { .since_s = t0 + 1200, .scoped = true, .uid = 0 };
		struct profile_query every = { .since_s = t0 + 1200 };
		struct profile_top_entry *te = NULL;

		assert_int_equal(profile_add(p, &smp), 0);
		assert_int_equal(profile_folded(p, &mine, a, &st, &n, &total), 0);
		assert_int_equal(n, 1);
		assert_int_equal(total, 5);
		assert_string_equal(st[0].text, "app:x;main;m");
		assert_int_equal(profile_top(p, &mine, a, &te, &n, &total), 0);
		assert_int_equal(total, 5);
		assert_int_equal(n, 2);
		memset(&seen, 0, sizeof(seen));
		assert_int_equal(profile_rows(p, &mine, count_row, &seen), 0);
		assert_int_equal(seen.total, 5);
		assert_int_equal(profile_folded(p, &roots, a, &st, &n, &total), 0);
		assert_int_equal(total, 10);
		assert_int_equal(profile_folded(p, &every, a, &st, &n, &total), 0);
		assert_int_equal(total, 15);
	}

	/* Retention: 60 minutes after pid 2's minute only nothing is left. */
	assert_int_equal(profile_expire(p, t0 + 300 + 60 * 60 - 60), 0);
	assert_int_equal(profile_folded(p, &all, a, &st, &n, &total), 0);
	assert_int_equal(total, 4 + 10 + 5);
	assert_int_equal(profile_expire(p, t0 + 300 + 61 * 60), 0);
	assert_int_equal(profile_folded(p, &all, a, &st, &n, &total), 0);
	assert_int_equal(total, 10 + 5);
	assert_int_equal(profile_expire(p, t0 + 1200 + 61 * 60), 0);
	assert_int_equal(profile_folded(p, &all, a, &st, &n, &total), 0);
	assert_int_equal(total, 0);
	profile_free(p);
	cache_close(c);
	arena_free(a);
}

static void test_profile_survives_reopen(void **state)
{
	struct cache *c = NULL;
	struct profile_store *p;
	struct arena *a = arena_new();
	struct profile_stack *st;
	size_t n;
	uint64_t total;
	struct profile_query all = { 0 };

	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	p = profile_new(c, 60);
	assert_int_equal(add(p, 1700000000, 9, 9, "c", "x", NULL, 1), 0);
	profile_free(p); /* flushes */
	cache_close(c);
	c = NULL;
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	p = profile_new(c, 60);
	assert_int_equal(profile_folded(p, &all, a, &st, &n, &total), 0);
	assert_int_equal(total, 1);
	profile_free(p);
	cache_close(c);
	arena_free(a);
}

/* The tick's incremental writes: a batch is written in slices while new
 * samples go to the next one; counts, digests given by the caller and
 * the accounting of what was added all agree with one whole flush. */
static void test_profile_flush_in_steps(void **state)
{
	struct cache *c = NULL;
	struct profile_store *p;
	struct arena *a = arena_new();
	struct profile_stack *st;
	uint64_t total, added, dropped;
	struct profile_query all = { 0 };
	char frames[64];
	size_t n;

	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	p = profile_new(c, 60);
	assert_non_null(p);
	/* 300 rows: 100 stacks x 3 threads, the digest given for half. */
	for (int i = 0; i < 300; i++) {
		struct profile_sample smp = { .unix_s = 1700000000, .pid = 5, .tid = 5 + i % 3,
					      .comm = "w", .frames = frames, .count = 2 };

		snprintf(frames, sizeof(frames), "main;f%d", i % 100);
		if (i % 2)
			smp.stack_hash = profile_stack_hash(frames, NULL, 0);
		assert_int_equal(profile_add(p, &smp), 0);
	}
	assert_int_equal(profile_flush_step(p, 0, 0, false), 0); /* nothing started */
	assert_int_equal(profile_flush_step(p, 50, 0, true), 0); /* rotates, writes 50 */
	assert_int_equal(add(p, 1700000001, 5, 5, "w", "main;f0", NULL, 7), 0); /* next batch */
	for (int i = 0; i < 6; i++)
		assert_int_equal(profile_flush_step(p, 50, 0, false), 0);
	profile_counts(p, &added, &dropped);
	assert_int_equal(added, 607);
	assert_int_equal(dropped, 0);
	assert_int_equal(profile_folded(p, &all, a, &st, &n, &total), 0);
	assert_int_equal(total, 607);
	assert_int_equal(n, 100);
	assert_int_equal(st[0].count, 13); /* w;main;f0: 3 x 2 + 7 */
	assert_string_equal(st[0].text, "w;main;f0");
	profile_free(p);
	cache_close(c);
	arena_free(a);
}

/* Slices bounded in time write at least a row each and, step after step,
 * the whole batch; a batch that fills up while the previous one is still
 * being written makes the rest of that one written at once (never more
 * than two batches held), and no sample is lost or counted twice. */
static void test_profile_flush_budget(void **state)
{
	struct cache *c = NULL;
	struct profile_store *p;
	struct arena *a = arena_new();
	struct profile_stack *st;
	uint64_t total, added, dropped;
	struct profile_query all = { 0 };
	const uint64_t rows = PROFILE_MAX_BATCH + PROFILE_MAX_BATCH / 2;
	size_t n, steps = 0;

	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	p = profile_new(c, 60);
	assert_non_null(p);
	/* Distinct rows: one stack, a thread each. */
	for (uint32_t i = 0; i < 300; i++)
		assert_int_equal(add(p, 1700000000, 7, 100 + i, "w", "main;f", NULL, 1), 0);
	assert_int_equal(profile_flush_step(p, 0, 1, true), 0); /* 1 us: a slice */
	assert_true(profile_writing(p));
	while (profile_writing(p) && steps < 1000) {
		assert_int_equal(profile_flush_step(p, 0, 1, false), 0);
		steps++;
	}
	assert_false(profile_writing(p));
	assert_true(steps >= 4); /* 300 rows, a clock look every 64 */
	/* A batch being written, then more rows than a batch: the new batch
	 * fills, the old one is finished, the full one is the one written. */
	for (uint32_t i = 0; i < 300; i++)
		assert_int_equal(add(p, 1700000060, 7, 100 + i, "w", "main;f", NULL, 1), 0);
	assert_int_equal(profile_flush_step(p, 10, 0, true), 0);
	assert_true(profile_writing(p));
	for (uint64_t i = 0; i < rows; i++)
		assert_int_equal(add(p, 1700000120, 8, (uint32_t)i, "w", "main;f", NULL, 1), 0);
	assert_true(profile_writing(p));
	assert_int_equal(profile_pending_rows(p), rows - PROFILE_MAX_BATCH);
	while (profile_writing(p))
		assert_int_equal(profile_flush_step(p, 0, 0, false), 0);
	profile_counts(p, &added, &dropped);
	assert_int_equal(added, 600 + rows);
	assert_int_equal(dropped, 0);
	assert_int_equal(profile_folded(p, &all, a, &st, &n, &total), 0);
	assert_int_equal(total, 600 + rows);
	assert_int_equal(n, 1);
	profile_free(p);
	cache_close(c);
	arena_free(a);
}

/* One pid on two nodes stays two processes: per-node totals, Top and
 * Folded entries apart, a node filter that picks one, an unknown node
 * that matches nothing, and node names that survive a reopen. */
static int count_rows(const struct profile_row *row, void *ctx)
{
	uint64_t *n = ctx;

	n[!strcmp(row->node, "node-b")] += row->count;
	return 0;
}

static void test_profile_nodes(void **state)
{
	struct cache *c = NULL;
	struct profile_store *p;
	struct arena *a = arena_new();
	struct profile_stack *st;
	struct profile_top_entry *top;
	struct profile_query q = { 0 };
	uint64_t total, per_node[2] = { 0 };
	uint32_t na, nb, again;
	size_t n;

	(void)state;
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	p = profile_new(c, 60);
	assert_non_null(p);
	assert_int_equal(profile_node(p, "node-a", &na), 0);
	assert_int_equal(profile_node(p, "node-b", &nb), 0);
	assert_int_not_equal(na, nb);
	assert_int_equal(profile_node(p, "node-a", &again), 0);
	assert_int_equal(again, na);
	assert_string_equal(profile_node_name(p, nb), "node-b");
	for (int i = 0; i < 2; i++) {
		struct profile_sample smp = { .unix_s = 1700000000, .node = i ? nb : na, .pid = 1234,
					      .start = 99, .tid = 1234, .comm = "w",
					      .frames = "main;spin", .count = 5 + (uint64_t)i };

		assert_int_equal(profile_add(p, &smp), 0);
	}
	assert_int_equal(profile_folded(p, &q, a, &st, &n, &total), 0);
	assert_int_equal(total, 11);
	assert_int_equal(n, 2);
	assert_string_equal(st[0].node, "node-b");
	assert_int_equal(st[0].count, 6);
	assert_string_equal(st[1].node, "node-a");
	assert_int_equal(st[1].count, 5);
	assert_int_equal(profile_top(p, &q, a, &top, &n, &total), 0);
	assert_int_equal(n, 4); /* main and spin, per node */
	assert_string_equal(top[0].function, "spin");
	assert_string_equal(top[0].node, "node-b");
	assert_int_equal(top[0].self, 6);
	q.node = "node-a";
	assert_int_equal(profile_top(p, &q, a, &top, &n, &total), 0);
	assert_int_equal(total, 5);
	assert_int_equal(n, 2);
	assert_string_equal(top[0].node, "node-a");
	assert_int_equal(top[0].self, 5);
	q.node = "node-c";
	assert_int_equal(profile_folded(p, &q, a, &st, &n, &total), 0);
	assert_int_equal(total, 0);
	assert_int_equal(n, 0);
	/* A node filter narrows a user's scope, never widens it. */
	q.node = "node-a";
	q.scoped = true;
	q.uid = 1000;
	assert_int_equal(profile_top(p, &q, a, &top, &n, &total), 0);
	assert_int_equal(total, 0);
	assert_int_equal(n, 0);
	q.scoped = false;
	q.node = NULL;
	assert_int_equal(profile_rows(p, &q, count_rows, per_node), 0);
	assert_int_equal(per_node[0], 5);
	assert_int_equal(per_node[1], 6);
	profile_free(p);
	p = profile_new(c, 60);
	assert_non_null(p);
	q.node = "node-b";
	assert_int_equal(profile_folded(p, &q, a, &st, &n, &total), 0);
	assert_int_equal(total, 6);
	assert_int_equal(profile_node(p, "node-b", &again), 0);
	assert_int_equal(again, nb);
	profile_free(p);
	cache_close(c);
	arena_free(a);
}

/* The interpreter Data: found, refused, unknown, and kept across a reopen. */
static void test_cache_interp(void **state)
{
	struct cache *c = NULL;
	struct fileid py = { { 3, 11 } }, ls = { { 4 } }, none = { { 5 } };
	struct interp_data d = { .kind = INTERP_CPYTHON, .major = 3, .minor = 11,
				 .runtime_offset = 0xa5b740 }, got = { 0 };
	char err[64] = "";

	(void)state;
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_store_interp(c, &py, &d, NULL, 1), 0);
	assert_int_equal(cache_store_interp(c, &ls, NULL, "no _PyRuntime", 1), 0);
	cache_close(c);
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_lookup_interp(c, &py, &got, err, sizeof(err)), CACHE_OK);
	assert_int_equal(got.kind, INTERP_CPYTHON);
	assert_int_equal(got.major, 3);
	assert_int_equal(got.minor, 11);
	assert_int_equal(got.runtime_offset, 0xa5b740);
	assert_int_equal(cache_lookup_interp(c, &ls, &got, err, sizeof(err)), CACHE_ERROR);
	assert_string_equal(err, "no _PyRuntime");
	assert_int_equal(cache_lookup_interp(c, &none, NULL, NULL, 0), CACHE_MISS);
	cache_close(c);
}

/* Interpreter Data of another INTERP_DATA_VERSION (an older symbolizer's)
 * is forgotten at open, and only it: the file's symbols stay, so the
 * ingest asks for the analysis again; the same version is kept. */
static void test_cache_interp_other_format_forgotten(void **state)
{
	struct cache *c = NULL;
	struct fileid py = { { 3, 12 } };
	struct interp_data d = { .kind = INTERP_CPYTHON, .major = 3, .minor = 11 };
	const struct symtab *got = NULL;
	char sql[128];
	sqlite3 *db;

	(void)state;
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_store(c, &py, own_symtab(), NULL, 1), 0);
	/* An index row ("none"), or the open forgets the unindexed file. */
	assert_int_equal(cache_store_index(c, &py, NULL, "no lines", 1), 0);
	assert_int_equal(cache_store_interp(c, &py, &d, NULL, 1), 0);
	cache_close(c);
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_lookup_interp(c, &py, NULL, NULL, 0), CACHE_OK);
	cache_close(c);

	snprintf(sql, sizeof(sql), "UPDATE meta SET value = %d WHERE key = 'interp_data_version'",
		 INTERP_DATA_VERSION - 1);
	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_changes(db), 1);
	sqlite3_close(db);
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_lookup_interp(c, &py, NULL, NULL, 0), CACHE_MISS);
	assert_true(cache_contains(c, &py));
	assert_int_equal(cache_lookup(c, &py, &got, NULL), CACHE_OK);
	assert_int_equal(cache_store_interp(c, &py, &d, NULL, 2), 0);
	cache_close(c);
	assert_int_equal(cache_open(db_path, NULL, &c), 0);
	assert_int_equal(cache_lookup_interp(c, &py, NULL, NULL, 0), CACHE_OK);
	cache_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cache_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_damaged_index_forgets_analysis, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cache_index_memory_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_lru_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_corrupt_moved_aside, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_schema_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_interp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_interp_other_format_forgotten, setup, teardown),
		cmocka_unit_test(test_folded_push),
		cmocka_unit_test_setup_teardown(test_profile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_profile_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_profile_survives_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_profile_flush_in_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_profile_flush_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_profile_nodes, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
