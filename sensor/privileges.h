/* privileges.h - the sensor's least privilege after set-up.
 *
 * Called once, after the BPF programs are loaded and attached, the perf
 * events open and the ring buffer mapped, and before the first read of a
 * target's /proc: from then on the sensor keeps only the capabilities
 * docs/security.md lists for its mode (privileges.c says why for each), in
 * every capability set of every thread, sets no_new_privs and installs its
 * own seccomp allow-list, narrowed to the mode as well. Every thread also
 * leaves uid 0 for the sensor's own unprivileged user (--user, default
 * sonde-sensor), with the symbolizer socket's group as its only
 * supplementary group: as uid 0 the sensor could connect() to any
 * root-owned Unix socket (the system bus, docker.sock, systemd's private
 * socket) and have a command run as root.
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

/* Who the running sensor is: its user and primary group, and the one
 * supplementary group it keeps (the group of the symbolizer's socket,
 * root:GROUP 0660), if any. */
struct privileges_user {
	uint32_t uid, gid;
	uint32_t group;
	int has_group;
};

/* Resolves user (the sensor's: a name that exists, or a number, which
 * without a passwd entry is that uid and gid; not root) and the
 * primary group of symbolizer_user (NULL: "sonde", skipped when no such
 * user; a number is a uid). Returns 0, -ENOENT for a user that does not
 * exist, -EINVAL for root. Before privileges_drop (it reads
 * /etc/passwd). */
int privileges_resolve(const char *user, const char *symbolizer_user,
		       struct privileges_user *ret);

/* The capabilities kept in mode, as a mask of 1ull << CAP_*. */
uint64_t privileges_kept(unsigned mode);

/* Drops everything else, switches every thread to user and confines the
 * process. Returns 0 or a negative errno; on failure the caller exits. */
int privileges_drop(unsigned mode, const struct privileges_user *user);

/* After privileges_drop(mode | PRIVILEGES_SELFTEST): attempts what the
 * running sensor must not do (BPF_PROG_LOAD, BPF_LINK_CREATE,
 * perf_event_open, bind, an INET socket for a unix: symbolizer, signals
 * and prlimit64 to pid 1, a write open of a root-owned file, execve,
 * fcntl F_SETOWN and O_ASYNC, and when socket_path is not NULL a connect()
 * to that root-owned 0600 Unix socket) and writes one line per attempt to
 * f: "denied ..." when refused (EPERM from the filter; EACCES from the
 * kernel for the connect), "ALLOWED ..." otherwise. Returns how many were
 * allowed. */
int privileges_selftest(FILE *f, unsigned mode, const char *socket_path);

/* One line per kept capability of mode and why, for --help and the logs. */
void privileges_print(FILE *f, unsigned mode);
