/* young.c - the rescan schedule of young processes (young.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "young.h"

/* The exec schedule: ms after the exec of each step. */
static const uint32_t young_rescan_ms[] = { 2, 10, 40, 150 };
#define YOUNG_STEPS (sizeof(young_rescan_ms) / sizeof(young_rescan_ms[0]))

struct young_entry {
	uint32_t pid;
	uint16_t step;
	uint16_t kind; /* enum young_kind */
	uint64_t due_ns; /* CLOCK_MONOTONIC */
};

struct young {
	struct procs *procs;
	uint16_t first_exec_step; /* 1 with mmap wakeups: no 2 ms step */
	size_t n;
	struct young_entry entries[YOUNG_MAX];
};

struct young *young_new(struct procs *procs)
{
	struct young *y = calloc(1, sizeof(*y));

	if (y)
		y->procs = procs;
	return y;
}

void young_free(struct young *y)
{
	free(y);
}

void young_set_mmap_wakeups(struct young *y, bool on)
{
	y->first_exec_step = on ? 1 : 0;
}

void young_add(struct young *y, uint32_t pid, enum young_kind kind, uint64_t now_ns)
{
	uint16_t step = kind == YOUNG_FORK ? 0 : y->first_exec_step;
	uint32_t ms = kind == YOUNG_FORK ? YOUNG_FORK_SCAN_MS : young_rescan_ms[step];
	struct young_entry e = {
		.pid = pid,
		.step = step,
		.kind = kind,
		.due_ns = now_ns + ms * 1000000ull,
	};

	for (size_t i = 0; i < y->n; i++) {
		if (y->entries[i].pid == pid) {
			y->entries[i] = e;
			return;
		}
	}
	if (y->n == YOUNG_MAX)
		return;
	y->entries[y->n++] = e;
}

/* The due step of e. Returns true if its schedule goes on (e->due_ns then
 * set to its next step). */
static bool young_step(struct young *y, struct young_entry *e)
{
	const struct proc *pr = procs_find(y->procs, e->pid);
	uint32_t gen = pr ? pr->maps_gen : 0;
	/* After an exec's first scan (at the event) only the mappings
	 * change (ld.so, then dlopen); comm, exe, cgroup and the environment
	 * were read by it. A process that is unknown or exec'd again is
	 * scanned whole. */
	int r = procs_rescan_maps(y->procs, e->pid);
	bool same = e->step > 0 && r == 0 && pr && (pr = procs_find(y->procs, e->pid)) &&
		    pr->maps_gen == gen;

	if (r == -ESRCH || e->kind == YOUNG_FORK || same || ++e->step == YOUNG_STEPS)
		return false;
	e->due_ns += (young_rescan_ms[e->step] - young_rescan_ms[e->step - 1]) * 1000000ull;
	return true;
}

int young_rescan(struct young *y, uint64_t now_ns)
{
	uint64_t next = UINT64_MAX;
	size_t kept = 0;

	for (size_t i = 0; i < y->n; i++) {
		struct young_entry e = y->entries[i];

		if (e.due_ns <= now_ns && !young_step(y, &e))
			continue;
		if (e.due_ns < next)
			next = e.due_ns;
		y->entries[kept++] = e;
	}
	y->n = kept;
	return next == UINT64_MAX ? -1 : (int)((next > now_ns ? next - now_ns : 0) / 1000000) + 1;
}

size_t young_count(const struct young *y)
{
	return y->n;
}
