/* service.h - the symbolizer's rpc service (service.c): it creates the
 * core (registry, analysis, access, sensor stats), the exporters and the
 * handlers, wires them together and runs the timer. main.c and the fuzz
 * harnesses use it; no handler does.
 */
#pragma once

#include <stddef.h>

#include "cache.h"
#include "rpc_server.h"

/* Largest request or answer the service takes or sends (api.h). */
#define SERVICE_MAX_MESSAGE (16u << 20)

struct service;
struct otlp_exporter_opts;

struct service_opts {
	const char *const *debug_dirs;          /* borrowed, NULL-terminated */
	unsigned retention_minutes;
	const struct otlp_exporter_opts *otlp; /* borrowed; NULL: no OTLP export */
	uint32_t interp_kinds; /* bit k: interpreter kind k is walked (interp_kinds_parse) */
};

/* opts->debug_dirs is borrowed. Returns NULL on failure. */
struct service *service_new(const struct service_opts *opts);
/* The rpc method table (static); the rpc server's ctx is the service. */
const struct rpc_method *service_methods(size_t *ret_n);
/* The method of path in the table, or NULL. */
const struct rpc_method *service_method(const char *path);
/* Gives the service its cache and the database of its profile store
 * (both borrowed, must outlive it; they may be the same), creates the
 * profile store and the analysis and installs the timer; before
 * rpc_server_start. Returns 0 or a negative errno. */
int service_attach(struct service *svc, struct rpc_server *server, struct cache *cache,
		   struct cache *profile_db);
/* After rpc_server_stop: flushes and frees. Accepts NULL. */
void service_free(struct service *svc);
