/* test-targets.c - the target selection (sensor/targets.c) on this
 * test's own /proc, with the BPF allow-list faked: --pid follows an
 * existing child, leaves other processes unread, and fills the
 * allow-list; --cgroup selects by the process's cgroup v2 path; the
 * filter BPF gets and the description match the options. Also the young
 * processes' rescan schedule (sensor/young.c). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fileids.h"
#include "procs.h"
#include "targets.h"
#include "young.h"

#define ALLOW_MAX 64

/* The allowed_tgids map. */
struct fake_allow {
	uint32_t pids[ALLOW_MAX];
	size_t n;
};

static bool fake_contains(void *ctx, uint32_t pid)
{
	struct fake_allow *a = ctx;

	for (size_t i = 0; i < a->n; i++)
		if (a->pids[i] == pid)
			return true;
	return false;
}

static int fake_add(void *ctx, uint32_t pid)
{
	struct fake_allow *a = ctx;

	if (fake_contains(a, pid))
		return 0;
	if (a->n == ALLOW_MAX)
		return -E2BIG;
	a->pids[a->n++] = pid;
	return 0;
}

static const struct targets_allow_ops fake_ops = {
	.contains = fake_contains,
	.add = fake_add,
};

struct fixture {
	struct fileids *ids;
	struct procs *procs;
	pid_t child;
};

static int setup(void **state)
{
	static struct fixture f;

	f.ids = fileids_new(256);
	f.procs = f.ids ? procs_new(f.ids, 4096, "/proc") : NULL;
	if (!f.procs)
		return -1;
	f.child = fork();
	if (f.child == 0) {
		pause();
		_exit(0);
	}
	*state = &f;
	return f.child > 0 ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	kill(f->child, SIGKILL);
	waitpid(f->child, NULL, 0);
	procs_free(f->procs);
	fileids_free(f->ids);
	return 0;
}

static unsigned drains;

static void count_drain(void *ctx)
{
	(void)ctx;
	drains++;
}

static void test_pid_follows_existing_children(void **state)
{
	struct fixture *f = *state;
	struct fake_allow allow = {0};
	struct targets_filter filter;
	struct targets *t = NULL;
	uint32_t self = (uint32_t)getpid();

	assert_int_equal(targets_new(&self, 1, NULL, &t), 0);
	targets_set_allow_list(t, &fake_ops, &allow);
	targets_bpf_filter(t, &filter);
	assert_true(filter.enabled);
	assert_true(filter.tgids);
	assert_int_equal(filter.cgroup_id, 0);
	assert_string_equal(targets_describe(t), "pid (and children)");
	assert_int_equal(targets_allow_pids(t), 0);
	assert_int_equal(allow.n, 1);

	drains = 0;
	assert_int_equal(targets_scan(t, f->procs, 1, count_drain, NULL), 2);
	assert_int_equal(drains, 2);
	assert_non_null(procs_find(f->procs, self));
	assert_non_null(procs_find(f->procs, (uint32_t)f->child));
	assert_true(fake_contains(&allow, (uint32_t)f->child));
	assert_int_equal(allow.n, 2);
	assert_int_equal(procs_count(f->procs), 2);
	/* Known processes are not scanned again. */
	assert_int_equal(targets_scan(t, f->procs, 1, count_drain, NULL), 0);
	targets_free(t);
}

static void test_whole_host_selects_everything(void **state)
{
	struct fixture *f = *state;
	struct targets_filter filter;
	struct targets *t = NULL;
	bool added = false;

	assert_int_equal(targets_new(NULL, 0, NULL, &t), 0);
	targets_bpf_filter(t, &filter);
	assert_false(filter.enabled);
	assert_false(filter.tgids);
	assert_string_equal(targets_describe(t), "none (whole host)");
	assert_true(targets_selects(t, f->procs, (uint32_t)getpid(), &added));
	assert_false(added);
	targets_free(t);
}

static void test_missing_pid_is_refused(void **state)
{
	uint32_t none = 2147483646u;
	struct targets *t = NULL;

	(void)state;
	assert_int_equal(targets_new(&none, 1, NULL, &t), -ESRCH);
	assert_null(t);
}

/* This process's cgroup v2 directory, or NULL without cgroup2. */
static char *own_cgroup_dir(void)
{
	char line[4096], mnt[4096] = "", rel[4096] = "", *dir = NULL;
	FILE *m = fopen("/proc/self/mounts", "re"), *c = fopen("/proc/self/cgroup", "re");

	while (m && fgets(line, sizeof(line), m)) {
		char dev[256], path[4096], type[64];

		if (sscanf(line, "%255s %4095s %63s", dev, path, type) == 3 &&
		    !strcmp(type, "cgroup2")) {
			snprintf(mnt, sizeof(mnt), "%s", path);
			break;
		}
	}
	while (c && fgets(line, sizeof(line), c))
		if (!strncmp(line, "0::", 3))
			snprintf(rel, sizeof(rel), "%.*s", (int)strcspn(line + 3, "\n"), line + 3);
	if (m)
		fclose(m);
	if (c)
		fclose(c);
	if (mnt[0] && rel[0] && asprintf(&dir, "%s%s", mnt, rel) < 0)
		dir = NULL;
	return dir;
}

static void test_cgroup_selects_its_members(void **state)
{
	struct fixture *f = *state;
	struct targets_filter filter;
	struct targets *t = NULL;
	char *dir = own_cgroup_dir(), *want = NULL;
	bool added = false;

	if (!dir || targets_new(NULL, 0, dir, &t) < 0) {
		free(dir);
		skip();
	}
	targets_bpf_filter(t, &filter);
	assert_true(filter.enabled);
	assert_false(filter.tgids);
	assert_int_not_equal(filter.cgroup_id, 0);
	assert_int_equal(asprintf(&want, "cgroup %s", dir) > 0, 1);
	assert_string_equal(targets_describe(t), want);
	/* The child is in its parent's cgroup. */
	assert_true(targets_selects(t, f->procs, (uint32_t)getpid(), &added));
	assert_true(targets_selects(t, f->procs, (uint32_t)f->child, &added));
	assert_false(targets_selects(t, f->procs, 2147483646u, &added));
	assert_false(added);
	free(want);
	free(dir);
	targets_free(t);
}

static void test_not_a_cgroup_is_refused(void **state)
{
	struct targets *t = NULL;

	(void)state;
	assert_true(targets_new(NULL, 0, "/proc", &t) < 0);
	assert_null(t);
}

/* An exec's schedule scans at its first step and ends at the first
 * rescan that finds the same mappings; a fork's ends after one step. */
static void test_young_schedule(void **state)
{
	struct fixture *f = *state;
	struct young *y = young_new(f->procs);
	uint32_t self = (uint32_t)getpid();
	uint64_t now = 1000000000ull;

	assert_non_null(y);
	young_add(y, self, YOUNG_EXEC, now);
	young_add(y, (uint32_t)f->child, YOUNG_FORK, now);
	assert_int_equal(young_count(y), 2);
	assert_int_equal(young_rescan(y, now), 3); /* the exec's step at 2 ms */
	assert_null(procs_find(f->procs, self));
	now += 2000000ull;
	assert_int_equal(young_rescan(y, now), 9); /* its next at 10 ms */
	assert_non_null(procs_find(f->procs, self));
	now += 8000000ull;
	/* Nothing new: the exec's schedule ends; the fork's waits. */
	assert_int_equal(young_rescan(y, now), (YOUNG_FORK_SCAN_MS - 10) + 1);
	assert_int_equal(young_count(y), 1);
	now += (YOUNG_FORK_SCAN_MS - 10) * 1000000ull;
	assert_int_equal(young_rescan(y, now), -1);
	assert_non_null(procs_find(f->procs, (uint32_t)f->child));
	assert_int_equal(young_count(y), 0);
	young_free(y);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pid_follows_existing_children, setup, teardown),
		cmocka_unit_test_setup_teardown(test_whole_host_selects_everything, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_pid_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cgroup_selects_its_members, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_cgroup_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_young_schedule, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
