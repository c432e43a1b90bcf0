/* targets.h - which processes the sensor profiles (--pid, --cgroup, or
 * the whole host): the selection, decided here and nowhere else.
 *
 * Two halves apply it. BPF applies it to every sample and process event:
 * before the privilege drop the sensor hands it targets_bpf_filter()'s
 * values and the --pid allow-list (targets_allow_pids()); BPF then adds a
 * child of an allowed process at fork, and a cgroup is inherited, so the
 * events path needs no decision of its own and reads nothing for one.
 * After the drop, targets_scan() applies the same selection to the
 * processes that already existed (targets_selects()), reading their
 * /proc only through procs.c.
 *
 * Main thread only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "procs.h"

struct targets;

/* The values BPF filters with (bpf/sample.bpf.c's rodata). */
struct targets_filter {
	bool enabled;          /* any of the filters below */
	bool tgids;            /* only tgids in the allow-list */
	uint64_t cgroup_id;    /* 0: none; else the cgroup v2 id (its inode) */
	uint32_t cgroup_level; /* its depth below the cgroup2 root */
};

/* The BPF allow-list of tgids (the allowed_tgids map), behind an
 * interface tests can fake. */
struct targets_allow_ops {
	/* Returns true if pid is in the list. */
	bool (*contains)(void *ctx, uint32_t pid);
	/* Returns 0 or a negative errno. */
	int (*add)(void *ctx, uint32_t pid);
};

/* Resolves the selection, before the privilege drop: cgroup (NULL: none)
 * to its id, level and path below the cgroup2 root; each of pids (n_pids,
 * copied) checked to exist in /proc, nothing of it read. On success
 * returns 0 with an owned *ret (targets_free). Errors, logged with the
 * option they concern: -ESRCH a --pid process does not exist; -ENOENT,
 * -EXDEV or another negative errno from the cgroup's path (not a cgroup v2
 * directory); -ENOMEM. */
int targets_new(const uint32_t *pids, size_t n_pids, const char *cgroup,
		struct targets **ret);
void targets_free(struct targets *t);

/* BPF's half of the selection, for the object's rodata. */
void targets_bpf_filter(const struct targets *t, struct targets_filter *ret);
/* Where the allow-list is (ops, ctx: borrowed, must outlive t). Set it
 * before targets_allow_pids() and targets_scan(). */
void targets_set_allow_list(struct targets *t, const struct targets_allow_ops *ops, void *ctx);
/* Puts the --pid processes in the allow-list, before sampling starts:
 * BPF follows their forks from then on. Nothing of them is read. Returns
 * 0 or the first error of ops->add. */
int targets_allow_pids(struct targets *t);
/* A sentence for the start-up log line: "pid (and children)", "cgroup
 * PATH", both, or "none (whole host)". Borrowed from t. */
const char *targets_describe(const struct targets *t);

/* Is the existing process pid selected? With --pid: it is in the
 * allow-list, or its parent is (it is then added, and *ret_added set);
 * with --cgroup: it is in the cgroup or below. Reads its stat (--pid, not
 * yet allowed) and its cgroup (--cgroup) through procs, after the
 * privilege drop. A process that is gone is not selected. */
bool targets_selects(struct targets *t, struct procs *procs, uint32_t pid, bool *ret_added);

/* The first scan, after the privilege drop and with sampling running:
 * every selected process not in procs yet is procs_scan()ned; with --pid,
 * the listing repeats until it finds no new descendant. drain(ctx) is
 * called every drain_every scans so that a long scan does not fill the
 * ring buffer. Returns how many processes were scanned, or a negative
 * errno when /proc cannot be listed. */
int targets_scan(struct targets *t, struct procs *procs, unsigned drain_every,
		 void (*drain)(void *ctx), void *ctx);
