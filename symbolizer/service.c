/* service.c - the symbolizer's rpc service: it creates the core
 * (core/: registry, analysis, access, sensor stats), the OTLP exporter and
 * the rpc handlers (api/), wires what one piece needs of another, keeps
 * the method table and runs the timer. Nothing else lives here: a
 * handler's state is its own, behind its header.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "clock.h"
#include "index_worker.h"
#include "debuginfo_fetch.h"
#include "ingest.h"
#include "ingest.pb-c.h"
#include "log.h"
#include "otlp_exporter.h"
#include "pprof_call.h"
#include "probe_plan.h"
#include "service.h"
#include "spans.h"
#include "symbols.h"
#include "symbols.pb-c.h"
#include "upload.h"

_Static_assert(SERVICE_MAX_MESSAGE == API_MAX_MESSAGE, "one message bound");

struct service {
	struct rpc_server *server;
	unsigned retention_minutes;
	const char *const *debug_dirs; /* borrowed, NULL-terminated */

	/* The core, and what the handlers get of it (members set at attach). */
	struct registry *reg;
	struct analysis *analysis;
	struct access *access;
	struct sensor_stats *stats;
	struct profile_store *profile;
	struct otlp_exporter *otlp; /* NULL: no --otlp-endpoint */
	struct symbolize_ctx sym;
	struct api_core core;

	/* The handlers. */
	struct ingest *ingest;
	struct symbols *symbols;
	struct upload *upload;
	struct spans *spans;

	int64_t last_flush_ms, last_expire_ms;
};

/* ---- the method table: each handler gets its own state ---- */

static void on_ingest_open(struct rpc_call *call, void *ctx)
{
	ingest_on_open(call, ((struct service *)ctx)->ingest);
}

static void on_ingest_message(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	ingest_on_message(call, msg, ((struct service *)ctx)->ingest);
}

static void on_ingest_close(struct rpc_call *call, void *ctx)
{
	ingest_on_close(call, ((struct service *)ctx)->ingest);
}

static void on_symbolize(struct rpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	symbols_symbolize(call, req, ((struct service *)ctx)->symbols);
}

static void on_status(struct rpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	symbols_status(call, req, ((struct service *)ctx)->symbols);
}

static void on_top(struct rpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	symbols_top(call, req, ((struct service *)ctx)->symbols);
}

static void on_folded(struct rpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	symbols_folded(call, req, ((struct service *)ctx)->symbols);
}

static void on_upload(struct rpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	upload_call(call, req, ((struct service *)ctx)->upload);
}

static void on_pprof(struct rpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	pprof_call(call, req, &((struct service *)ctx)->core);
}

static void on_spans(struct rpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	spans_call(call, req, ((struct service *)ctx)->spans);
}

static const struct rpc_method methods[] = {
	{ .path = "/sonde.v1.Ingest/Connect",
	  .kind = RPC_BIDI,
	  .request = &sonde__v1__sensor_message__descriptor,
	  .on_open = on_ingest_open,
	  .on_message = on_ingest_message,
	  .on_close = on_ingest_close },
	{ .path = "/sonde.v1.Symbols/Symbolize",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__symbolize_request__descriptor,
	  .on_call = on_symbolize },
	{ .path = "/sonde.v1.Symbols/Status",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__status_request__descriptor,
	  .on_call = on_status },
	{ .path = "/sonde.v1.Symbols/Top",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__profile_query__descriptor,
	  .on_call = on_top },
	{ .path = "/sonde.v1.Symbols/Folded",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__profile_query__descriptor,
	  .on_call = on_folded },
	{ .path = "/sonde.v1.Symbols/Upload",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__upload_request__descriptor,
	  .on_call = on_upload },
	{ .path = "/sonde.v1.Symbols/Pprof",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__profile_query__descriptor,
	  .on_call = on_pprof },
	{ .path = "/sonde.v1.Symbols/Spans",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__spans_request__descriptor,
	  .on_call = on_spans },
};

const struct rpc_method *service_methods(size_t *ret_n)
{
	*ret_n = sizeof(methods) / sizeof(methods[0]);
	return methods;
}

const struct rpc_method *service_method(const char *path)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(methods[i].path, path) == 0)
			return &methods[i];
	return NULL;
}

/* ---- wiring ---- */

/* ingest_hooks.probe_events: Go probe records go to the spans handler. */
static void probe_events(void *ctx, const char *host, int64_t mono_to_unix_ns,
			 const ProtobufCBinaryData *recs, size_t n, uint64_t lost,
			 const char *(*service_of)(void *sctx, uint32_t pid, uint32_t *ret_uid),
			 void *sctx)
{
	spans_add_records(ctx, host, mono_to_unix_ns, recs, n, lost, service_of, sctx);
}

struct service *service_new(const struct service_opts *opts)
{
	struct service *svc = calloc(1, sizeof(*svc));
	struct ingest_hooks hooks;

	if (!svc)
		return NULL;
	svc->retention_minutes = opts->retention_minutes;
	svc->debug_dirs = opts->debug_dirs;
	svc->core.start_ms = clock_now_ms();
	svc->core.interp_kinds = opts->interp_kinds;
	svc->last_flush_ms = svc->last_expire_ms = svc->core.start_ms;
	svc->reg = registry_new();
	svc->access = access_new();
	svc->stats = sensor_stats_new();
	svc->spans = spans_new(&svc->core);
	svc->symbols = symbols_new(&svc->core);
	svc->upload = upload_new(&svc->core);
	hooks = (struct ingest_hooks){ .probe_events = probe_events, .ctx = svc->spans };
	svc->ingest = ingest_new(&svc->core, &hooks);
	if (!svc->reg || !svc->access || !svc->stats || !svc->spans || !svc->symbols ||
	    !svc->upload || !svc->ingest) {
		service_free(svc);
		return NULL;
	}
	if (opts->otlp) {
		svc->otlp = otlp_exporter_new(&svc->sym, opts->otlp);
		if (!svc->otlp) {
			service_free(svc);
			return NULL;
		}
	}
	return svc;
}

/* ---- the timer ---- */

#define PROFILE_FLUSH_MS 5000
/* A batch is written a slice a tick, each slice at most this long, with
 * ticks TICK_WRITE_MS apart while one is being written: the loop is never
 * held for long (a slice of a tenth of a 100,000-row batch held it 25-100
 * ms a tick, and a full batch written whole while the previous one was
 * still being written held it 0.4-1.6 s: the p99 of tests/bench/scale.py
 * at 500 sensors); writing takes up to a third of the loop's time (500
 * sensors make 20,000-57,000 rows a second, 2-10 us each), more when it
 * falls behind (TICK_WRITE_BEHIND_MS). */
#define PROFILE_FLUSH_STEP_US 8000
#define TICK_WRITE_MS 16
/* Writing falls behind when the next batch is half full before this one
 * is written (rows that cost more, e.g. after a restart, when each
 * updates a row of the same minute already on disk): slices then come
 * back to back, rather than the rest of the batch written at once when
 * the next one fills up (100-175 ms on the loop, every second). */
#define TICK_WRITE_BEHIND_MS 1
/* The tick runs every TICK_BUSY_MS while something waits for it (stacks
 * for their files, tables for room in a stream, jobs, indexes, deferred
 * calls, uploads, a profile batch being written a slice a tick), else
 * every TICK_IDLE_MS: each wakeup costs hundreds of microseconds on a VM, and
 * a steady sensor stream needs none. */
#define TICK_BUSY_MS 200
#define TICK_IDLE_MS 5000
/* While a Symbolize call waits for an index the worker builds: the worker
 * cannot wake the loop, so the loop looks often. */
#define TICK_INDEX_WAIT_MS 5
/* At exit: how long the sender may still deliver the OTLP backlog. */
#define OTLP_DRAIN_MS 5000

static int busy_delay_ms(struct service *svc)
{
	if (symbols_waiting(svc->symbols) && index_worker_busy())
		return TICK_INDEX_WAIT_MS;
	if (svc->profile && profile_writing(svc->profile))
		return profile_pending_rows(svc->profile) > PROFILE_MAX_BATCH / 2 ? TICK_WRITE_BEHIND_MS
										  : TICK_WRITE_MS;
	return TICK_BUSY_MS;
}

/* The next idle tick: at TICK_IDLE_MS, or sooner where the OTLP window or
 * the profile store's next write is due. */
static int idle_delay_ms(struct service *svc, int64_t now)
{
	int64_t ms = TICK_IDLE_MS, due = otlp_exporter_due_ms(svc->otlp, now);

	if (due < ms)
		ms = due;
	due = svc->last_flush_ms + PROFILE_FLUSH_MS - now;
	if (due < ms)
		ms = due;
	return ms < 1 ? 1 : (int)ms;
}

static bool service_busy(struct service *svc)
{
	return analysis_busy(svc->analysis) || symbols_waiting(svc->symbols) ||
	       upload_busy(svc->upload) || index_worker_busy() || ingest_busy(svc->ingest) ||
	       (svc->profile && profile_writing(svc->profile));
}

/* Queries flush first (profile.h), so this only bounds the memory held
 * between writes: once a second was the symbolizer's largest steady CPU
 * cost under a sensor (SQLite statements per flush). A slice a tick:
 * writing a whole batch at once stopped the loop for seconds under 500
 * sensors (sonde-load); a slice is bounded in time (PROFILE_FLUSH_STEP_US). */
static void flush_profiles(struct service *svc, int64_t now)
{
	bool start = now - svc->last_flush_ms >= PROFILE_FLUSH_MS;
	int r;

	if (start)
		svc->last_flush_ms = now;
	r = profile_flush_step(svc->profile, 0, PROFILE_FLUSH_STEP_US, start);
	if (r < 0)
		log_warn_errno(r, "writing samples to the profile store failed, dropped them");
}

static void expire(struct service *svc, int64_t now)
{
	int r;

	if (now - svc->last_expire_ms < 60000)
		return;
	svc->last_expire_ms = now;
	r = profile_expire(svc->profile, (uint64_t)time(NULL));
	if (r < 0)
		log_warn_errno(r, "expiring old profiles failed, ignoring");
	sensor_stats_forget_exited(svc->stats, now);
}

static void tick(void *ctx)
{
	struct service *svc = ctx;
	int64_t now = clock_now_ms();

	analysis_tick(svc->analysis);
	index_worker_release_held(now);
	if (index_worker_collect(svc->core.cache, svc->reg))
		symbols_wake(svc->symbols, false);
	ingest_tick(svc->ingest);
	symbols_wake(svc->symbols, false);
	upload_expire(svc->upload, false);
	otlp_exporter_tick(svc->otlp, now);
	flush_profiles(svc, now);
	expire(svc, now);
	rpc_server_timer_delay(svc->server, tick,
			       service_busy(svc) ? busy_delay_ms(svc) : idle_delay_ms(svc, now), false);
}

/* analysis_opts.poke: after a handler that may have left work for the
 * timer (pending stacks, queued tables, jobs), the tick comes within its
 * busy interval. */
static void poke(void *ctx)
{
	struct service *svc = ctx;

	if (svc->server && service_busy(svc))
		rpc_server_timer_delay(svc->server, tick, busy_delay_ms(svc), true);
}

int service_attach(struct service *svc, struct rpc_server *server, struct cache *cache,
		   struct cache *profile_db)
{
	const struct analysis_opts aopts = {
		.pack_plan = probe_plan_pack,
		.poke = poke,
		.ctx = svc,
	};

	svc->server = server;
	svc->profile = profile_new(profile_db, svc->retention_minutes);
	svc->analysis = analysis_new(cache, svc->reg, svc->debug_dirs, &aopts);
	if (!svc->profile || !svc->analysis)
		return -ENOMEM;
	svc->sym = (struct symbolize_ctx){ .reg = svc->reg, .analysis = svc->analysis, .cache = cache };
	svc->core = (struct api_core){
		.cache = cache,
		.profile = svc->profile,
		.reg = svc->reg,
		.analysis = svc->analysis,
		.sym = &svc->sym,
		.access = svc->access,
		.stats = svc->stats,
		.otlp = svc->otlp,
		.start_ms = svc->core.start_ms,
		.interp_kinds = svc->core.interp_kinds,
	};
	ingest_attach(svc->ingest);
	/* When a file is done: sessions first (their pending stacks and
	 * unwind tables), then deferred Symbolize calls. */
	if (registry_subscribe(svc->reg, ingest_file_done, svc->ingest) < 0 ||
	    registry_subscribe(svc->reg, symbols_file_done, svc->symbols) < 0)
		return -E2BIG;
	return rpc_server_add_timer(server, TICK_BUSY_MS, tick, svc);
}

void service_free(struct service *svc)
{
	if (!svc)
		return;
	/* rpc_server_stop ran on_close for every session already. The last
	 * OTLP window is symbolized while the cache is still there. */
	otlp_exporter_free(svc->otlp, OTLP_DRAIN_MS);
	svc->otlp = svc->core.otlp = NULL;
	if (svc->core.cache)
		index_worker_stop(svc->core.cache, svc->reg);
	/* Before the analysis its answers would go to. */
	debuginfo_fetch_stop();
	symbols_free(svc->symbols);
	upload_free(svc->upload);
	analysis_free(svc->analysis);
	profile_free(svc->profile);
	ingest_free(svc->ingest);
	spans_free(svc->spans);
	sensor_stats_free(svc->stats);
	access_free(svc->access);
	registry_free(svc->reg);
	free(svc);
}
