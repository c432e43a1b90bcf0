/* service.c - the symbolizer's rpc service: method table, timers, the
 * global path <-> file ID index, and the one place that says where a
 * file's analysis stands (cache, job, or unknown). */
#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "service.h"
#include "otlp_exporter.h"
#include "ingest.pb-c.h"
#include "symbols.pb-c.h"

static const struct rpc_method methods[] = {
	{ .path = "/sonde.v1.Ingest/Connect",
	  .kind = RPC_BIDI,
	  .request = &sonde__v1__sensor_message__descriptor,
	  .on_open = ingest_on_open,
	  .on_message = ingest_on_message,
	  .on_close = ingest_on_close },
	{ .path = "/sonde.v1.Symbols/Symbolize",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__symbolize_request__descriptor,
	  .on_call = symbols_symbolize },
	{ .path = "/sonde.v1.Symbols/Status",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__status_request__descriptor,
	  .on_call = symbols_status },
	{ .path = "/sonde.v1.Symbols/Top",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__profile_query__descriptor,
	  .on_call = symbols_top },
	{ .path = "/sonde.v1.Symbols/Folded",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__profile_query__descriptor,
	  .on_call = symbols_folded },
	{ .path = "/sonde.v1.Symbols/Upload",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__upload_request__descriptor,
	  .on_call = upload_call },
	{ .path = "/sonde.v1.Symbols/Pprof",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__profile_query__descriptor,
	  .on_call = pprof_call },
	{ .path = "/sonde.v1.Symbols/Spans",
	  .kind = RPC_UNARY,
	  .request = &sonde__v1__spans_request__descriptor,
	  .on_call = spans_call },
};

const struct rpc_method *service_methods(size_t *ret_n)
{
	*ret_n = sizeof(methods) / sizeof(methods[0]);
	return methods;
}

struct service *service_new(const struct service_opts *opts)
{
	struct service *svc = calloc(1, sizeof(*svc));

	if (!svc)
		return NULL;
	svc->retention_minutes = opts->retention_minutes;
	svc->debug_dirs = opts->debug_dirs;
	svc->start_ms = clock_now_ms();
	svc->last_flush_ms = svc->last_expire_ms = svc->start_ms;
	svc->next_session_id = 1;
	svc->reg = registry_new();
	svc->file_acl = hmap_new();
	svc->proc_outcomes = hmap_new();
	svc->uploads = hmap_new();
	svc->spans = span_store_new();
	if (!svc->reg || !svc->file_acl || !svc->proc_outcomes || !svc->uploads || !svc->spans) {
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

#define PROFILE_FLUSH_MS 5000
#define PROFILE_FLUSH_STEP_ROWS 2000
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

static int busy_delay_ms(struct service *svc)
{
	return svc->waits && index_worker_busy() ? TICK_INDEX_WAIT_MS : TICK_BUSY_MS;
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
	return analysis_busy(svc->analysis) || svc->waits || hmap_count(svc->uploads) ||
	       index_worker_busy() || ingest_busy(svc) ||
	       (svc->profile && profile_writing(svc->profile));
}
/* At exit: how long the sender may still deliver the OTLP backlog. */
#define OTLP_DRAIN_MS 5000

/* Drops the per-process outcomes of processes gone for a while. */
static void forget_exited(struct service *svc, int64_t now)
{
	struct hmap_iter it;
	void *val;

	hmap_iter_init(svc->proc_outcomes, &it);
	while (hmap_next(svc->proc_outcomes, &it, NULL, NULL, &val)) {
		struct proc_outcome *po = val;

		if (po->exited_ms && now - po->exited_ms >= PROC_OUTCOME_KEEP_MS)
			free(hmap_remove_u64(svc->proc_outcomes, po->key));
	}
}

static void tick(void *ctx)
{
	struct service *svc = ctx;
	int64_t now = clock_now_ms();
	int r;

	analysis_tick(svc->analysis);
	index_worker_release_held(now);
	if (index_worker_collect(svc->cache, svc->reg))
		symbols_wake(svc, false);
	ingest_tick(svc);
	symbols_wake(svc, false);
	upload_expire(svc, false);
	otlp_exporter_tick(svc->otlp, now);
	/* Queries flush first (profile.h), so this only bounds the memory
	 * held between writes: once a second was the symbolizer's largest
	 * steady CPU cost under a sensor (SQLite statements per flush). */
	{
		bool start = now - svc->last_flush_ms >= PROFILE_FLUSH_MS;

		if (start)
			svc->last_flush_ms = now;
		/* A slice a tick: writing a whole batch at once stopped the
		 * loop for seconds under 500 sensors (sonde-load). */
		r = profile_flush_step(svc->profile, PROFILE_FLUSH_STEP_ROWS, start);
		if (r < 0)
			log_warn_errno(r, "writing samples to the profile store failed, dropped them");
	}
	if (now - svc->last_expire_ms >= 60000) {
		svc->last_expire_ms = now;
		r = profile_expire(svc->profile, (uint64_t)time(NULL));
		if (r < 0)
			log_warn_errno(r, "expiring old profiles failed, ignoring");
		forget_exited(svc, now);
	}
	rpc_server_timer_delay(svc->server, tick,
			       service_busy(svc) ? busy_delay_ms(svc) : idle_delay_ms(svc, now), false);
}

void service_poke(struct service *svc)
{
	if (svc->server && service_busy(svc))
		rpc_server_timer_delay(svc->server, tick, busy_delay_ms(svc), true);
}

static void poke(void *ctx)
{
	service_poke(ctx);
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
	svc->cache = cache;
	svc->profile = profile_new(profile_db, svc->retention_minutes);
	svc->analysis = analysis_new(cache, svc->reg, svc->debug_dirs, &aopts);
	if (!svc->profile || !svc->analysis)
		return -ENOMEM;
	svc->sym = (struct symbolize_ctx){ .reg = svc->reg, .analysis = svc->analysis, .cache = cache };
	/* When a file is done: sessions first (their pending stacks and
	 * unwind tables), then deferred Symbolize calls. */
	if (registry_subscribe(svc->reg, ingest_file_done, svc) < 0 ||
	    registry_subscribe(svc->reg, symbols_file_done, svc) < 0)
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
	svc->otlp = NULL;
	if (svc->cache)
		index_worker_stop(svc->cache, svc->reg);
	symbols_wake(svc, true);
	if (svc->uploads)
		upload_expire(svc, true);
	hmap_free(svc->uploads, NULL);
	analysis_free(svc->analysis);
	profile_free(svc->profile);
	hmap_free(svc->file_acl, free);
	registry_free(svc->reg);
	hmap_free(svc->proc_outcomes, free);
	span_store_free(svc->spans);
	free(svc);
}

void service_export(struct service *svc, const struct export_sample *s)
{
	otlp_exporter_add(svc->otlp, s);
}

void service_export_span(struct service *svc, const struct trace_span *span)
{
	otlp_exporter_add_span(svc->otlp, span);
}
