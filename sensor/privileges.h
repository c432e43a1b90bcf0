/* privileges.h - the sensor's least privilege after set-up.
 *
 * Called once, after the BPF programs are loaded and attached, the perf
 * events open and the ring buffer mapped: from then on the sensor keeps
 * only the capabilities docs/security.md lists (privileges.c says why for
 * each), in every capability set of every thread, sets no_new_privs and
 * installs its own seccomp allow-list. The uid stays 0: what the kernel
 * checks for the sensor's work is capabilities, and a switch of uid with
 * kept capabilities would need the same per-thread dance for no gain that
 * the read-only open filter below does not give already.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The capabilities kept, as a mask of 1ull << CAP_*. */
uint64_t privileges_kept(void);

/* Drops everything else and confines the process (all threads). debug:
 * the seccomp filter traps and names a missing system call instead of
 * killing. Returns 0 or a negative errno; on failure the caller exits. */
int privileges_drop(bool debug);
/* privileges_drop() that also keeps CAP_SYS_ADMIN, for --go-probes:
 * creating a uprobe perf event needs it (the kernel's
 * perf_uprobe_event_init() checks CAP_SYS_ADMIN again since the 2025
 * stable fix; CAP_PERFMON is not enough), and Go probes attach to
 * processes that start after set-up. */
int privileges_drop_keep_admin(bool debug);

/* One line per kept capability and why, for --help and the logs. */
void privileges_print(FILE *f);
