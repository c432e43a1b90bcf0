/* privileges.h - the sensor's least privilege after set-up.
 *
 * Called once, after the BPF programs are loaded and attached, the perf
 * events open and the ring buffer mapped, and before the first read of a
 * target's /proc: from then on the sensor keeps only the capabilities
 * docs/security.md lists for its mode (privileges.c says why for each), in
 * every capability set of every thread, sets no_new_privs and installs its
 * own seccomp allow-list, narrowed to the mode as well. The uid stays 0:
 * what the kernel checks for the sensor's work is capabilities, and a
 * switch of uid with kept capabilities would need the same per-thread
 * dance for no gain that the read-only open filter does not give already.
 */
#pragma once

#include <stdint.h>
#include <stdio.h>

/* What the running sensor still does, which decides what it keeps. */
enum privileges_mode {
	/* --go-probes: loads and attaches uprobe programs at run time. */
	PRIVILEGES_GO_PROBES = 1u << 0,
	/* A tcp: symbolizer: INET sockets (a unix: one gets AF_UNIX only). */
	PRIVILEGES_TCP = 1u << 1,
	/* Debug builds: the filter traps and names a blocked system call
	 * (then exits) instead of killing the process. */
	PRIVILEGES_DEBUG = 1u << 2,
	/* --sandbox-selftest: the real capabilities and allow-list, but what
	 * the filter would kill is answered EPERM, so each attempt reports. */
	PRIVILEGES_SELFTEST = 1u << 3,
};

/* The capabilities kept in mode, as a mask of 1ull << CAP_*. */
uint64_t privileges_kept(unsigned mode);

/* Drops everything else and confines the process (all threads). Returns 0
 * or a negative errno; on failure the caller exits. */
int privileges_drop(unsigned mode);

/* After privileges_drop(mode | PRIVILEGES_SELFTEST): attempts what the
 * running sensor must not do (BPF_PROG_LOAD, BPF_LINK_CREATE,
 * perf_event_open, bind, an INET socket for a unix: symbolizer, signals
 * and prlimit64 to pid 1, a write open of a root-owned file, execve) and
 * writes one line per attempt to f: "denied ..." when the filter refused
 * it (EPERM), "ALLOWED ..." otherwise. Returns how many were allowed. */
int privileges_selftest(FILE *f, unsigned mode);

/* One line per kept capability of mode and why, for --help and the logs. */
void privileges_print(FILE *f, unsigned mode);
