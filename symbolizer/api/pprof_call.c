/* pprof_call.c - the Symbols service's Pprof method: the stored samples of
 * a window as a gzipped pprof Profile (docs/pprof.md).
 *
 * Every stored row (minute, pid, tid, thread name, raw stack, count) is
 * symbolized again from its raw stack (export/model_symbolize.c), so the
 * profile has lines and inline chains wherever the files' source indexes
 * are ready, which the folded text in the store does not keep. Runs on
 * the rpc loop thread like every handler; the model and the reply are
 * bounded, and a window too large to answer says how to narrow it.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "access_scope.h"
#include "log.h"
#include "pprof_call.h"
#include "export.h"
#include "model.h"
#include "pprof.h"
#include "symbols.pb-c.h"

/* Room left in a reply for the fields around the profile. */
#define PPROF_REPLY_MAX (API_MAX_MESSAGE - (64u << 10))
/* The model of one call (strings and tables). */
#define PPROF_MAX_MODEL (512ull << 20)

struct pprof_ctx {
	const struct api_core *core;
	struct pmodel *m;
	uint32_t frequency_hz;
	uint64_t dropped;
	uint64_t first_s, end_s; /* the rows' minutes, in unix seconds */
};

/* Unix seconds (a client's, so any u64) to ns, saturating in int64 range
 * (pprof's time fields are int64). */
static uint64_t secs_to_ns(uint64_t s)
{
	const uint64_t max_s = (uint64_t)INT64_MAX / 1000000000ull;

	return (s < max_s ? s : max_s) * 1000000000ull;
}

static int add_row(const struct profile_row *row, void *arg)
{
	struct pprof_ctx *c = arg;
	uint64_t start_s = row->minute * 60;
	struct export_sample s = {
		.host = row->node,
		.pid = row->pid,
		.start = row->start,
		.tid = row->tid,
		.thread_name = row->comm,
		.raw = row->raw,
		.raw_len = row->raw_len,
		.count = row->count,
		.profile = row->profile,
		.weight = row->weight,
		.span = row->span,
		/* The store counts per minute: its start is all we know. */
		.first_ns = start_s * 1000000000ull,
		.last_ns = start_s * 1000000000ull,
		.frequency_hz = c->frequency_hz,
	};
	int r;

	r = pm_add_export_sample(c->m, c->core->sym, &s);
	if (r == -EBADMSG) {
		/* A damaged stored stack: its samples are counted as dropped,
		 * the rest of the profile is still good. */
		c->dropped += row->count;
		return 0;
	}
	if (r < 0)
		return r;
	if (c->m->bytes > PPROF_MAX_MODEL)
		return -E2BIG;
	if (!c->first_s || start_s < c->first_s)
		c->first_s = start_s;
	if (start_s + 60 > c->end_s)
		c->end_s = start_s + 60;
	return 0;
}

void pprof_call(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	static const char too_big[] =
		"the profile is too large for one reply: narrow the window (--since) or pick a process (--pid)";
	const Sonde__V1__ProfileQuery *pq = (const Sonde__V1__ProfileQuery *)msg;
	const struct api_core *core = ctx;
	Sonde__V1__PprofResponse r = SONDE__V1__PPROF_RESPONSE__INIT;
	struct profile_query q = { .since_s = pq->since_unix_s, .until_s = pq->until_unix_s,
				   .pid = pq->pid, .node = pq->node,
				   .profile = pq->profile };
	struct pmodel m = { 0 };
	struct pprof_ctx c = { .core = core, .m = &m };
	uint8_t *gz = NULL;
	size_t len = 0;
	uint64_t until;
	struct access_scope scope;
	int err;

	access_scope_of(call, &scope);
	access_profile_query(&scope, &q);
	c.frequency_hz = pq->frequency_hz ? pq->frequency_hz : sensor_stats_frequency_hz(core->stats);
	err = profile_flush(core->profile);
	if (err < 0)
		log_warn_errno(err, "writing samples to the profile store before Pprof failed, ignoring");
	err = pm_init(&m);
	if (err < 0)
		goto fail;
	m.profile = pq->profile;
	err = profile_rows(core->profile, &q, add_row, &c);
	if (err < 0)
		goto fail;
	/* The minutes the rows span, narrowed to the window asked for (or
	 * to now): a short recording's duration is its own, not a minute. */
	if (c.frequency_hz)
		m.period_ns = 1000000000ull / c.frequency_hz;
	until = q.until_s ? q.until_s : (uint64_t)time(NULL);
	m.start_ns = secs_to_ns(q.since_s > c.first_s ? q.since_s : c.first_s);
	m.end_ns = secs_to_ns(until < c.end_s ? until : c.end_s);
	if (m.end_ns < m.start_ns)
		m.end_ns = m.start_ns;
	err = pprof_encode(&m, PPROF_REPLY_MAX, &gz, &len);
	if (err < 0)
		goto fail;
	r.profile.data = gz;
	r.profile.len = len;
	r.total_samples = m.total;
	r.samples_dropped = c.dropped;
	rpc_call_finish(call, RPC_OK, NULL, &r.base);
	goto cleanup;
fail:
	if (err == -E2BIG) {
		rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, too_big, NULL);
	} else if (err == -ENOMEM) {
		rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
	} else {
		log_warn_errno(err, "Pprof query failed");
		rpc_call_finish(call, RPC_INTERNAL, "profile query failed", NULL);
	}
cleanup:
	free(gz);
	pm_free(&m);
}
