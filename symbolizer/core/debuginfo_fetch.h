/* debuginfo_fetch.h - debug files by GNU build ID from debuginfod servers
 * (--debuginfod), fetched on a worker thread of their own, never on the
 * rpc loop (debuginfo_fetch.c). The one wrapper of libdebuginfod.
 *
 * debuginfo_fetch_configure and _init run in main before the sandbox;
 * every other function but the worker runs on the loop thread.
 * The state is global (one worker per process).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fileid.h"

#define DEBUGINFO_FETCH_MAX_URLS 8
#define DEBUGINFO_FETCH_MAX_QUEUED 256u
/* A failure that is not the server's "no such file" (refused, timed out,
 * too large) is remembered this long per build ID; libdebuginfod itself
 * remembers a "no such file" on disk (DEBUGINFO_FETCH_MISS_S). */
#define DEBUGINFO_FETCH_RETRY_S 300
#define DEBUGINFO_FETCH_MISS_S 600
/* After a failure of that kind no server is asked for this long: fetches
 * queued meanwhile, and new ones, fail at once (a server that is down or
 * drops packets costs one timeout, not one per file). */
#define DEBUGINFO_FETCH_DOWN_S 60

struct debuginfo_fetch_opts {
	const char *const *urls; /* borrowed for the call; n_urls of them */
	size_t n_urls;
	const char *cache_dir;   /* the fetched files' directory; created if missing */
	unsigned timeout_s;      /* the whole of one request, connect included */
	uint64_t max_size;       /* bytes; larger files are refused */
	bool verbose;            /* libdebuginfod's own trace to stderr */
};

/* Sets libdebuginfod's environment for opts (the servers, its cache
 * directory, curl's limits), before any thread exists (setenv is not
 * thread-safe). With no URLs, fetching stays off and this does nothing.
 * Returns 0 or a negative errno. */
int debuginfo_fetch_configure(const struct debuginfo_fetch_opts *opts);
/* Creates the cache directory and the client, as the service user and
 * before the sandbox. Does nothing when not configured. Returns 0 or a
 * negative errno. */
int debuginfo_fetch_init(void);
/* Whether fetching is on (configured with URLs, and initialised). */
bool debuginfo_fetch_enabled(void);
/* Queues a fetch of the debug file of build_id (binary, build_id_len
 * bytes) for the file id; the worker thread starts on the first call.
 * Returns 0, -EAGAIN when the build ID failed less than
 * DEBUGINFO_FETCH_RETRY_S ago or the servers are taken for down
 * (DEBUGINFO_FETCH_DOWN_S), -E2BIG when the queue is full, -ENODEV
 * when fetching is off, -EINVAL or -ENOMEM. */
int debuginfo_fetch_submit(const struct fileid *id, const uint8_t *build_id,
			   size_t build_id_len);
/* Whether a fetch is queued, running or waits to be collected. */
bool debuginfo_fetch_busy(void);
/* Calls done(ctx, id, path) for each finished fetch; path (borrowed for
 * the call) names the debug file in the cache directory, or is NULL when
 * none was fetched. Returns the number of fetches collected. */
size_t debuginfo_fetch_collect(void (*done)(void *ctx, const struct fileid *id, const char *path),
			       void *ctx);
/* Joins the worker (after its current request, bounded by the timeout)
 * and drops what is left. */
void debuginfo_fetch_stop(void);
