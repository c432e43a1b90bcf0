/* debuginfo_fetch.h - debug files by GNU build ID from debuginfod servers
 * (--debuginfod), fetched on a worker thread of their own, never on the
 * rpc loop (debuginfo_fetch.c). The one user of libcurl.
 *
 * debuginfo_fetch_check_url may run at any time; _configure runs in main
 * before any thread exists and before the privilege drop (it resolves the
 * servers' names and reads the CA file), _init as the service user before
 * the sandbox; every other function but the worker runs on the loop
 * thread. The state is global (one worker per process).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fileid.h"

#define DEBUGINFO_FETCH_MAX_URLS 8
#define DEBUGINFO_FETCH_MAX_QUEUED 256u
/* Addresses kept per server name (getaddrinfo's first ones). */
#define DEBUGINFO_FETCH_MAX_ADDRS 8
/* The CA bundle used for https:// servers without --debuginfod-ca. */
#define DEBUGINFO_FETCH_SYSTEM_CA "/etc/ssl/certs/ca-certificates.crt"
/* The largest CA file read (Debian's bundle is about 200 KiB). */
#define DEBUGINFO_FETCH_MAX_CA (16u << 20)
/* A failure that is not the server's "no such file" (refused, timed out,
 * too large) is remembered this long per build ID; a "no such file" from
 * every server is remembered on disk this long (DIR/BUILD-ID/miss). */
#define DEBUGINFO_FETCH_RETRY_S 300
#define DEBUGINFO_FETCH_MISS_S 600
/* After a failure of that kind the server is not asked for this long;
 * when no server is left, fetches queued meanwhile, and new ones, fail at
 * once (a server that is down or drops packets costs one timeout, not one
 * per file). */
#define DEBUGINFO_FETCH_DOWN_S 60
/* Fetched files not used for this long, and stray partial downloads, are
 * removed; the cache directory is swept at the worker's start and then
 * at most this often. */
#define DEBUGINFO_FETCH_MAX_AGE_S (7 * 86400)
#define DEBUGINFO_FETCH_SWEEP_S 86400

struct debuginfo_fetch_opts {
	const char *const *urls; /* borrowed for the call; n_urls of them */
	size_t n_urls;
	/* URLs from $DEBUGINFOD_URLS: one whose host name does not resolve
	 * is left out with a warning instead of failing the call. */
	bool lenient;
	const char *cache_dir;   /* the fetched files' directory; created by _init */
	const char *ca_file;     /* https: the CAs trusted; NULL: DEBUGINFO_FETCH_SYSTEM_CA */
	unsigned timeout_s;      /* the whole of one request, connect included */
	uint64_t max_size;       /* bytes; larger files are refused */
	bool verbose;            /* curl's own trace to stderr */
};

/* Checks one server URL: http:// or https://, a host (a name, an IPv4
 * address, or an IPv6 one in brackets), an optional port and path, no
 * user, query or fragment. Resolves nothing. Returns the port (80 or 443
 * when the URL names none), or -EINVAL. */
int debuginfo_fetch_check_url(const char *url);
/* Sets up fetching from opts' servers: checks each URL, resolves each
 * host name once, now (every request then goes to those addresses: the
 * sandbox allows no DNS), reads the CA file when a server is https, and
 * initialises libcurl. Before any thread exists. With no URLs, fetching
 * stays off. Returns the number of servers kept (URLs whose names did not
 * resolve are left out when opts->lenient; 0: fetching off), or a
 * negative errno: -EINVAL (a bad URL or option), -EHOSTUNREACH (a name
 * that does not resolve), -EBADMSG (a CA file holding no certificate),
 * -EFBIG, -ENOMEM, or open()'s. Logs why. */
int debuginfo_fetch_configure(const struct debuginfo_fetch_opts *opts);
/* The ports of the servers kept by _configure, at most max of them, in
 * order. Returns how many. */
size_t debuginfo_fetch_ports(uint16_t *ports, size_t max);
/* Creates the cache directory and the transfer handle, as the service
 * user and before the sandbox. Does nothing when not configured. Returns
 * 0 or a negative errno. */
int debuginfo_fetch_init(void);
/* Whether fetching is on (configured with servers, and initialised). */
bool debuginfo_fetch_enabled(void);
/* Queues a fetch of the debug file of build_id (binary, build_id_len
 * bytes) for the file id; the worker thread starts on the first call.
 * Returns 0, -EAGAIN when the build ID failed less than
 * DEBUGINFO_FETCH_RETRY_S ago or every server is taken for down
 * (DEBUGINFO_FETCH_DOWN_S), -E2BIG when the queue is full, -ENODEV
 * when fetching is off, -EINVAL or -ENOMEM. */
int debuginfo_fetch_submit(const struct fileid *id, const uint8_t *build_id,
			   size_t build_id_len);
/* Whether a fetch is queued, running or waits to be collected. */
bool debuginfo_fetch_busy(void);
/* Calls done(ctx, id, path) for each finished fetch; path (borrowed for
 * the call) names the debug file in the cache directory, or is NULL when
 * none was fetched. The file's build ID is not checked here: the caller
 * must check it before using the file. Returns the number of fetches
 * collected. */
size_t debuginfo_fetch_collect(void (*done)(void *ctx, const struct fileid *id, const char *path),
			       void *ctx);
/* Joins the worker (after its current request, bounded by the timeout)
 * and drops what is left. */
void debuginfo_fetch_stop(void);
