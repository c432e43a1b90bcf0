/* test-stacks.c - the sensor's pure core: stack dedup and ids per
 * connection, the aggregation bound, /proc/PID/maps and stat parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "maps.h"
#include "stacks.h"

struct seen {
	uint32_t def_ids[64];
	size_t n_defs;
	struct stack_count counts[64];
	size_t n_counts;
};

static int on_def(const struct stack_def *d, void *ctx)
{
	struct seen *s = ctx;

	assert_true(s->n_defs < 64);
	s->def_ids[s->n_defs++] = d->id;
	return 0;
}

static int on_count(const struct stack_count *c, void *ctx)
{
	struct seen *s = ctx;

	assert_true(s->n_counts < 64);
	s->counts[s->n_counts++] = *c;
	return 0;
}

static void flush(struct stacks *st, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	assert_int_equal(stacks_foreach_new_def(st, on_def, s), 0);
	assert_int_equal(stacks_foreach_count(st, on_count, s), 0);
	stacks_flush_done(st);
}

static struct stack_input sample(const uint64_t *k, uint32_t nk, const struct stack_frame *u,
				 uint32_t nu, uint32_t pid, uint32_t tid, uint64_t t)
{
	return (struct stack_input){.kernel = k, .n_kernel = nk, .user = u, .n_user = nu,
				    .outcome = 1, .pid = pid, .tid = tid, .comm = "worker",
				    .unix_ns = t};
}

static void test_dedup(void **state)
{
	uint64_t k[] = {0xffffffff81000010, 0xffffffff81000020};
	struct stack_frame u[2] = {{.file_id = {1}, .addr = 0x1000, .has_file_id = 1},
				   {.addr = 0x7fff0000}};
	struct stacks *st = stacks_new(16, 64, 0);
	struct stack_input in;
	struct seen s;

	assert_non_null(st);
	in = sample(k, 2, u, 2, 10, 11, 100);
	assert_int_equal(stacks_add(st, &in), 0);
	in.unix_ns = 50;
	assert_int_equal(stacks_add(st, &in), 0);
	in.unix_ns = 300;
	assert_int_equal(stacks_add(st, &in), 0);
	in.tid = 12; /* same stack, other thread: same def, new count */
	assert_int_equal(stacks_add(st, &in), 0);
	u[1].addr++; /* other stack */
	in = sample(k, 2, u, 2, 10, 11, 400);
	assert_int_equal(stacks_add(st, &in), 0);

	flush(st, &s);
	assert_int_equal(s.n_defs, 2);
	assert_int_equal(s.def_ids[0], 1);
	assert_int_equal(s.def_ids[1], 2);
	assert_int_equal(s.n_counts, 3);
	assert_int_equal(s.counts[0].count, 3);
	assert_int_equal(s.counts[0].first_unix_ns, 50);
	assert_int_equal(s.counts[0].last_unix_ns, 300);
	assert_int_equal(s.counts[0].stack_id, 1);
	assert_string_equal(s.counts[0].comm, "worker");
	assert_int_equal(s.counts[1].tid, 12);
	assert_int_equal(s.counts[1].stack_id, 1);
	assert_int_equal(s.counts[2].stack_id, 2);

	/* Defined once per connection: the next flush counts only. */
	assert_int_equal(stacks_add(st, &in), 0);
	flush(st, &s);
	assert_int_equal(s.n_defs, 0);
	assert_int_equal(s.n_counts, 1);
	assert_int_equal(s.counts[0].stack_id, 2);
	stacks_free(st);
}

/* Samples of one stack and thread but different profile types are
 * counted apart; weights add up, saturating. */
static void test_profiles_apart(void **state)
{
	uint64_t k[] = {0xffffffff81000010};
	struct stacks *st = stacks_new(16, 64, 0);
	struct stack_input in = sample(k, 1, NULL, 0, 10, 11, 100);
	struct seen s;

	(void)state;
	assert_non_null(st);
	assert_int_equal(stacks_add(st, &in), 0); /* CPU, weight 0 */
	in.profile = 1;
	in.weight = 5000000;
	assert_int_equal(stacks_add(st, &in), 0);
	in.weight = 7000000;
	assert_int_equal(stacks_add(st, &in), 0);
	in.profile = 2;
	in.weight = UINT64_MAX - 1;
	assert_int_equal(stacks_add(st, &in), 0);
	in.weight = 10;
	assert_int_equal(stacks_add(st, &in), 0);
	flush(st, &s);
	assert_int_equal(s.n_defs, 1); /* one stack */
	assert_int_equal(s.n_counts, 3);
	assert_int_equal(s.counts[0].profile, 0);
	assert_int_equal(s.counts[0].count, 1);
	assert_int_equal(s.counts[0].weight, 0);
	assert_int_equal(s.counts[1].profile, 1);
	assert_int_equal(s.counts[1].count, 2);
	assert_int_equal(s.counts[1].weight, 12000000);
	assert_int_equal(s.counts[2].profile, 2);
	assert_true(s.counts[2].weight == UINT64_MAX);
	stacks_free(st);
}

static void test_reset_reuses_ids(void **state)
{
	uint64_t k1[] = {1}, k2[] = {2}, k3[] = {3};
	struct stacks *st = stacks_new(16, 64, 0);
	struct stack_input in;
	struct seen s;

	in = sample(k1, 1, NULL, 0, 1, 1, 1);
	stacks_add(st, &in);
	in = sample(k2, 1, NULL, 0, 1, 1, 1);
	stacks_add(st, &in);
	flush(st, &s);
	assert_int_equal(s.n_defs, 2);

	/* A new connection: ids are void and restart at 1; only stacks in
	 * use are defined again, in the order they are counted. */
	stacks_reset_connection(st);
	in = sample(k2, 1, NULL, 0, 1, 1, 2);
	stacks_add(st, &in);
	in = sample(k3, 1, NULL, 0, 1, 1, 2);
	stacks_add(st, &in);
	flush(st, &s);
	assert_int_equal(s.n_defs, 2);
	assert_int_equal(s.def_ids[0], 1);
	assert_int_equal(s.def_ids[1], 2);
	assert_int_equal(s.counts[0].stack_id, 1); /* k2 */
	assert_int_equal(s.counts[1].stack_id, 2); /* k3 */

	/* Counts kept over a reset are defined again on the new connection. */
	in = sample(k1, 1, NULL, 0, 1, 1, 3);
	stacks_add(st, &in);
	stacks_reset_connection(st);
	flush(st, &s);
	assert_int_equal(s.n_defs, 1);
	assert_int_equal(s.def_ids[0], 1);
	stacks_free(st);
}

/* Churn: a stack not sampled for idle_ns is forgotten, its id reused by
 * the next new stack; a stack still sampled keeps its id and is not
 * defined again; the number remembered stays flat however many pass. */
static void test_idle_stacks_forgotten(void **state)
{
	const uint64_t sec = 1000000000ull;
	struct stacks *st = stacks_new(16, 1000, 10 * sec);
	uint64_t steady[] = {0x5000}, k[200];
	struct stacks_stats ss;
	struct stack_input in;
	uint32_t steady_id = 0, max_id = 0;
	struct seen s;

	for (int i = 0; i < 200; i++)
		k[i] = 0x9000 + i;
	/* One second per flush: the steady stack every time, a new one too. */
	for (int t = 1; t <= 200; t++) {
		in = sample(steady, 1, NULL, 0, 1, 1, t * sec);
		stacks_add(st, &in);
		in = sample(&k[t - 1], 1, NULL, 0, 100 + t, 100 + t, t * sec);
		stacks_add(st, &in);
		flush(st, &s);
		if (t == 1) {
			assert_int_equal(s.n_defs, 2);
			steady_id = s.counts[0].stack_id;
		} else {
			assert_int_equal(s.n_defs, 1); /* only the new one */
			assert_int_equal(s.counts[0].stack_id, steady_id);
		}
		for (size_t i = 0; i < s.n_defs; i++)
			if (s.def_ids[i] > max_id)
				max_id = s.def_ids[i];
		assert_true(s.counts[1].stack_id != steady_id);
	}
	stacks_get_stats(st, &ss);
	/* idle 10 s, swept every 2.5 s: at most ~13 churned stacks + the steady
	 * one are remembered, and ids were reused instead of reaching 201. */
	assert_true(ss.stacks <= 15);
	assert_true(max_id <= 16);
	stacks_free(st);
}

static int count_defs(const struct stack_def *d, void *ctx)
{
	(void)d;
	++*(size_t *)ctx;
	return 0;
}

/* The stack table starts small and grows: after growing, every stack is
 * still found (a sample of it defines nothing new). */
static void test_table_grows(void **state)
{
	struct stacks *st = stacks_new(8192, 65536, 0);
	struct stack_input in;
	struct stacks_stats ss;
	uint64_t k[5000];
	size_t defs = 0;

	for (int i = 0; i < 5000; i++) {
		k[i] = 0xa000 + i;
		in = sample(&k[i], 1, NULL, 0, 1, 1, 1);
		assert_int_equal(stacks_add(st, &in), 0);
	}
	assert_int_equal(stacks_foreach_new_def(st, count_defs, &defs), 0);
	assert_int_equal(defs, 5000);
	stacks_flush_done(st);
	for (int i = 0; i < 5000; i++) {
		in = sample(&k[i], 1, NULL, 0, 1, 1, 2);
		assert_int_equal(stacks_add(st, &in), 0);
	}
	defs = 0;
	assert_int_equal(stacks_foreach_new_def(st, count_defs, &defs), 0);
	assert_int_equal(defs, 0);
	stacks_get_stats(st, &ss);
	assert_int_equal(ss.stacks, 5000);
	assert_int_equal(ss.counts, 5000);
	stacks_free(st);
}

static void test_bound_and_drops(void **state)
{
	struct stacks *st = stacks_new(4, 8, 0);
	struct stacks_stats ss;
	struct stack_input in;
	uint64_t k[8];
	struct seen s;

	for (int i = 0; i < 8; i++)
		k[i] = 0x1000 + i;
	for (int i = 0; i < 4; i++) {
		in = sample(&k[i], 1, NULL, 0, 7, 7, i);
		assert_int_equal(stacks_add(st, &in), 0);
	}
	in = sample(&k[4], 1, NULL, 0, 7, 7, 9);
	assert_int_equal(stacks_add(st, &in), -ENOSPC);
	in = sample(&k[0], 1, NULL, 0, 8, 8, 9); /* new (pid, tid): no room either */
	assert_int_equal(stacks_add(st, &in), -ENOSPC);
	in = sample(&k[0], 1, NULL, 0, 7, 7, 9); /* existing entry: still counted */
	assert_int_equal(stacks_add(st, &in), 0);
	stacks_get_stats(st, &ss);
	assert_int_equal(ss.dropped, 2);
	assert_int_equal(ss.samples, 5);
	assert_int_equal(ss.counts, 4);

	/* Not flushed (connection down): counts stay, still bounded. */
	flush(st, &s);
	assert_int_equal(s.n_counts, 4);
	assert_int_equal(s.counts[0].count, 2);
	/* After a flush there is room again. */
	in = sample(&k[5], 1, NULL, 0, 7, 7, 10);
	assert_int_equal(stacks_add(st, &in), 0);
	stacks_get_stats(st, &ss);
	assert_int_equal(ss.counts, 1);

	/* Over max_stacks, remembered stacks are trimmed at flush; their ids
	 * are reused, so ids stay under max_stacks + max_counts + 1. */
	flush(st, &s);
	assert_int_equal(s.def_ids[0], 5);
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 4; i++) {
			in = sample(&k[(i + round * 4) % 8], 1, NULL, 0, 1, 1, 0);
			stacks_add(st, &in);
		}
	flush(st, &s);
	stacks_get_stats(st, &ss);
	assert_true(ss.stacks <= 8);
	in = sample(&k[0], 1, NULL, 0, 1, 1, 0);
	stacks_add(st, &in);
	flush(st, &s);
	assert_true(s.n_defs == 0 || s.def_ids[0] <= 8 + 4 + 1);
	stacks_get_stats(st, &ss);
	assert_int_equal(stacks_add(st, &(struct stack_input){.n_kernel = 5000}), -EINVAL);
	{
		uint64_t before = ss.dropped;

		stacks_get_stats(st, &ss);
		assert_int_equal(ss.dropped, before + 1); /* accounted for, not lost */
	}
	stacks_free(st);
	assert_null(stacks_new(0, 1, 0));
	stacks_free(NULL);
}

static void parse_ok(const char *line, struct maps_line *l)
{
	assert_int_equal(maps_parse_line(line, strlen(line), l), 0);
}

static void test_maps_lines(void **state)
{
	struct maps_line l;
	const char *bad[] = {
		"",
		"55d4a0a00000 r-xp 00002000 fd:01 1234 /bin/x",
		"55d4a0a00000-55d4a0a01000 r-x 00002000 fd:01 1234 /bin/x",
		"55d4a0a00000-55d4a0a01000 rzxp 00002000 fd:01 1234 /bin/x",
		"55d4a0a00000-55d4a0a01000 r-xp 0000200g fd:01 1234 /bin/x",
		"55d4a0a00000-55d4a0a01000 r-xp 00002000 fd01 1234 /bin/x",
		"55d4a0a00000-55d4a0a01000 r-xp 00002000 fd:01 12a4 /bin/x",
		"55d4a0a01000-55d4a0a00000 r-xp 00002000 fd:01 1234 /bin/x",
		"155d4a0a0000000-55d4a0a01000 r-xp 00002000 fd:01 1234 /bin/x",
	};

	parse_ok("55d4a0a00000-55d4a0a01000 r-xp 00002000 fd:01 1234"
		 "                       /usr/bin/cat\n", &l);
	assert_int_equal(l.start, 0x55d4a0a00000);
	assert_int_equal(l.end, 0x55d4a0a01000);
	assert_int_equal(l.offset, 0x2000);
	assert_int_equal(l.dev_major, 0xfd);
	assert_int_equal(l.dev_minor, 1);
	assert_int_equal(l.inode, 1234);
	assert_true(l.readable && l.executable && !l.writable && !l.shared);
	assert_false(l.deleted);
	assert_string_equal(l.path, "/usr/bin/cat");
	assert_true(maps_line_is_exec_file(&l));

	parse_ok("7f0000000000-7f0000001000 r-xp 00000000 08:02 99 /opt/my app/lib x.so", &l);
	assert_string_equal(l.path, "/opt/my app/lib x.so");

	parse_ok("7f0000000000-7f0000001000 r-xp 00001000 08:02 99 /tmp/a b (deleted)\n", &l);
	assert_true(l.deleted);
	assert_string_equal(l.path, "/tmp/a b");

	/* Anonymous and special mappings. */
	parse_ok("7ffd1c5f0000-7ffd1c612000 rw-p 00000000 00:00 0                   [stack]", &l);
	assert_string_equal(l.path, "[stack]");
	assert_false(maps_line_is_exec_file(&l));
	parse_ok("7f0000000000-7f0000001000 rw-p 00000000 00:00 0", &l);
	assert_string_equal(l.path, "");
	parse_ok("7f0000000000-7f0000001000 r--s 00000000 00:05 7 /memfd:x (deleted)", &l);
	assert_true(l.shared && l.deleted && !maps_line_is_exec_file(&l));

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		l.start = 42;
		assert_int_equal(maps_parse_line(bad[i], strlen(bad[i]), &l), -EINVAL);
		assert_int_equal(l.start, 42); /* untouched on failure */
	}
	{
		static char longline[MAPS_PATH_MAX + 100];
		size_t n = (size_t)snprintf(longline, sizeof(longline),
					    "7f0000000000-7f0000001000 r-xp 00000000 08:02 99 /");

		memset(longline + n, 'a', MAPS_PATH_MAX);
		assert_int_equal(maps_parse_line(longline, n + MAPS_PATH_MAX, &l), -ENAMETOOLONG);
	}
}

static void test_stat(void **state)
{
	const char *s = "4242 (a) b) (c) S 17 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 "
			"987654 10000 200 18446744073709551615\n";
	uint32_t ppid = 0;
	uint64_t start = 0;

	assert_int_equal(proc_parse_stat(s, strlen(s), &ppid, &start), 0);
	assert_int_equal(ppid, 17);
	assert_int_equal(start, 987654);
	assert_int_equal(proc_parse_stat("1 (x) S 0", 9, &ppid, &start), -EINVAL);
	assert_int_equal(proc_parse_stat("1 x S 0", 7, &ppid, &start), -EINVAL);
}

static void test_status_uid(void **state)
{
	const char *s = "Name:\tUid:\t7\t7\t7\t7\nUmask:\t0022\nState:\tS (sleeping)\n"
			"Tgid:\t42\nUid:\t1000\t1000\t1000\t1000\nGid:\t100\t100\t100\t100\n";
	const char *setuid = "Name:\tpasswd\nUid:\t1000\t0\t0\t0\nGid:\t1\t1\t1\t1\n";
	uint32_t uid = 99;

	(void)state;
	/* A comm that looks like a Uid: line is not at a line start. */
	assert_int_equal(proc_parse_status_uid(s, strlen(s), &uid), 0);
	assert_int_equal(uid, 1000);
	assert_int_equal(proc_parse_status_uid(setuid, strlen(setuid), &uid), 0);
	assert_int_equal(uid, 0);
	/* A setgid program (gids differ, uids equal): root's too. */
	const char *setgid = "Name:\tGid:\t5\t5\t5\t5\nUid:\t1000\t1000\t1000\t1000\n"
			     "Gid:\t1000\t42\t42\t42\n";
	uid = 99;
	assert_int_equal(proc_parse_status_uid(setgid, strlen(setgid), &uid), 0);
	assert_int_equal(uid, 0);
	uid = 99;
	/* No Gid: line: not well-formed. */
	assert_int_equal(proc_parse_status_uid("Uid:\t1\t1\t1\t1\n", 14, &uid), -EINVAL);
	assert_int_equal(proc_parse_status_uid("Name:\tx\n", 8, &uid), -EINVAL);
	assert_int_equal(proc_parse_status_uid("Uid:\t1\t1\t1\n", 11, &uid), -EINVAL);
	assert_int_equal(proc_parse_status_uid("Uid:\t1\t1\t1\tx\n", 13, &uid), -EINVAL);
	assert_int_equal(proc_parse_status_uid("Uid:\t1\t1\t1\t99999999999\n", 23, &uid), -EINVAL);
	assert_int_equal(uid, 99);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dedup),
		cmocka_unit_test(test_profiles_apart),
		cmocka_unit_test(test_reset_reuses_ids),
		cmocka_unit_test(test_bound_and_drops),
		cmocka_unit_test(test_idle_stacks_forgotten),
		cmocka_unit_test(test_table_grows),
		cmocka_unit_test(test_maps_lines),
		cmocka_unit_test(test_stat),
		cmocka_unit_test(test_status_uid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
