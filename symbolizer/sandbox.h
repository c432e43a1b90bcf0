/* sandbox.h - the symbolizer's sandbox: what it may still do once it
 * handles bytes that a profiled process controls.
 *
 * Two steps, around the uid drop in main.c:
 *   sandbox_drop_bounding()  as root, before setuid(): empties the
 *                            capability bounding set on every thread
 *                            (dropping it needs CAP_SETPCAP, which setuid()
 *                            takes away).
 *   sandbox_apply()          as the service user, once the sockets are
 *                            bound and the databases open, before the
 *                            server accepts a connection: no capabilities
 *                            in any set, no_new_privs, rlimits, Landlock,
 *                            then the seccomp allow-list.
 * docs/security.md explains the policy; --print-policy shows it.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SANDBOX_MAX_DIRS 20
#define SANDBOX_MAX_PORTS 9 /* OTLP and 8 debuginfod servers */

enum sandbox_seccomp_mode {
	SANDBOX_SECCOMP_KILL, /* release default: kill the process */
	SANDBOX_SECCOMP_TRAP, /* debug builds: SIGSYS, name the call, exit */
	SANDBOX_SECCOMP_LOG,  /* --sandbox-log: allow but log (audit/dmesg) */
	SANDBOX_SECCOMP_SELFTEST, /* --sandbox-selftest: trap, answer EPERM */
};

struct sandbox_policy {
	const char *rw_dirs[SANDBOX_MAX_DIRS]; /* borrowed */
	size_t n_rw;
	/* --debuginfod: directories may be made and removed under rw_dirs too
	 * (the debuginfod cache: a directory per build ID, swept by age). */
	bool rw_make_dirs;
	const char *ro_dirs[SANDBOX_MAX_DIRS]; /* borrowed */
	size_t n_ro;
	/* The TCP ports it may connect to (Landlock ABI 4+; seccomp then
	 * allows TCP socket() and connect()): --otlp-endpoint's, and the
	 * --debuginfod servers'. None: no outgoing connection. */
	uint16_t connect_ports[SANDBOX_MAX_PORTS];
	size_t n_connect_ports;
	uint64_t max_memory;     /* RLIMIT_DATA in bytes; 0: leave as is */
	uint64_t max_open_files; /* RLIMIT_NOFILE; 0: leave as is */
	/* --allow-unsandboxed: run without Landlock (a warning) instead of
	 * refusing to start. */
	bool allow_unsandboxed;
	enum sandbox_seccomp_mode seccomp_mode;
};

/* As root, before the uid drop. Returns 0 or a negative errno (-EPERM
 * when not permitted: not fatal, the caller says so). */
int sandbox_drop_bounding(void);

/* Applies the policy to the whole process (every thread). Landlock
 * missing (not built in, not in lsm=, or its calls refused) fails closed:
 * -EOPNOTSUPP, unless policy->allow_unsandboxed, then a logged warning.
 * An old Landlock ABI (fewer rule kinds) is a warning. Returns 0 or a negative errno; on
 * failure the process must exit, it may be half-restricted. */
int sandbox_apply(const struct sandbox_policy *policy);

/* Writes the policy as it would be applied (uid, capabilities, Landlock
 * ABI and paths, seccomp allow-list, rlimits) to f. */
void sandbox_print_policy(FILE *f, const struct sandbox_policy *policy);

/* After sandbox_apply() with SANDBOX_SECCOMP_SELFTEST: tries what the
 * sandbox must prevent (ptrace, /proc/1/mem, files outside the rules,
 * sockets, exec, privileges) and writes one line per attempt,
 * "denied NAME: how" or "ALLOWED NAME". Returns the number allowed. */
int sandbox_selftest(FILE *f, const char *outside_file);
