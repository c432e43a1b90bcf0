/* local.h - a private symbolizer for one command (local.c): `sonde
 * symbolize --file` without a running service (--local, or when none
 * answers at the default address), and the services `sonde record` runs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The sonde-* program name next to this binary (installed), or in the
 * build tree's layout (build/cli/sonde -> build/SUBDIR/NAME), into buf.
 * Returns 0 or -ENOENT. */
int local_find_service(const char *name, const char *subdir, char *buf, size_t len);

/* Whether a Unix-socket address (unix:PATH) has a listener: a plain
 * connect(), so nothing waits on gRPC's reconnect backoff. Other
 * addresses count as reachable (their call says if not). */
bool local_reachable(const char *address);

struct local_symbolizer {
	pid_t pid;
	char dir[64];      /* the temporary directory: socket, profile store */
	char address[128]; /* unix:DIR/symbolizer.sock */
};

/* Starts sonde-symbolizer on a socket in a new temporary directory, with
 * the user's cache ($SONDE_CACHE, else $XDG_CACHE_HOME/sonde/cache.db,
 * else ~/.cache/sonde/cache.db; as root the system cache and the user
 * sonde, as `sonde record` runs it), and waits until it listens. Its
 * output goes to DIR/symbolizer.log, shown if it fails to start (verbose:
 * to standard error). Returns 0 with *ret filled, or a negative errno
 * (reported). */
int local_symbolizer_start(struct local_symbolizer *ret, bool verbose);
/* After a failed call: if it has exited (it binds its socket before it
 * opens the cache, so it can fail after it was reachable), says so with
 * the end of its log. */
void local_symbolizer_explain(struct local_symbolizer *ls);
/* Tells it to stop (SIGTERM: it stores what it analysed, then exits, on
 * its own if that takes over 100 ms) and removes its directory. Accepts
 * a never-started one (pid 0). */
void local_symbolizer_stop(struct local_symbolizer *ls);
