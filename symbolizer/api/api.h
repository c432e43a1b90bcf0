/* api.h - what service.c hands every rpc handler: the core they work on.
 * Each handler keeps its own state behind its own header (ingest.h,
 * symbols.h, upload.h, spans.h, pprof_call.h) and includes no other
 * handler's; what one handler needs of another is wired in service.c.
 *
 * Everything runs on the rpc loop thread (see rpc_server.h), so nothing is
 * locked.
 */
#pragma once

#include <stdint.h>

#include "access.h"
#include "analysis.h"
#include "cache.h"
#include "profile.h"
#include "registry.h"
#include "sensor_stats.h"
#include "symbolize.h"

#define API_MAX_MESSAGE (16u << 20) /* largest request or answer */

struct otlp_exporter;

/* All borrowed from the service, valid from service_attach() until
 * service_free(); handlers are created before the members are set. */
struct api_core {
	struct cache *cache;
	struct profile_store *profile;
	struct registry *reg;
	struct analysis *analysis;
	const struct symbolize_ctx *sym; /* reg, analysis, cache */
	struct access *access;
	struct sensor_stats *stats;
	struct otlp_exporter *otlp;      /* NULL: no OTLP export */
	int64_t start_ms;                /* clock_now_ms() at start */
	uint32_t interp_kinds;           /* bit k: sensors get configs of kind k */
};
