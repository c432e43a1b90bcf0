/* otlp_exporter.c - windows of samples to OTLP requests, and a sender
 * thread that delivers them (see otlp_exporter.h).
 *
 * Loop thread: otlp_exporter_add() copies each sample (strings and raw
 * stack in one block) onto the held list, otlp_exporter_add_span() each
 * span (the traces of the Go probes) onto another; the tick symbolizes the held
 * samples into a model, encodes it and appends the bytes to the backlog,
 * dropping the oldest requests when the backlog is over its bounds.
 * Sender thread: takes the oldest request, calls Export with a deadline
 * (waiting for the receiver to be reachable within it), and on failure
 * puts the request back in front and sleeps with exponential backoff; so
 * a receiver that is away gets the backlog in order when it is back.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "otlp.h"
#include "otlp_exporter.h"
#include "otlp_profiles_service.pb-c.h"
#include "otlp_trace_service.pb-c.h"
#include "otlp_traces.h"
#include "otlp_v150.h"

#define DEFAULT_INTERVAL_MS 10000u
#define DEFAULT_HELD_BYTES (64u << 20)
#define DEFAULT_BACKLOG_BYTES (64u << 20)
#define DEFAULT_BACKLOG_REQUESTS 64u
#define DEFAULT_REQUEST_BYTES (4u << 20) /* gRPC servers' default receive limit */
#define DEFAULT_SEND_TIMEOUT_MS 10000u
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 5000
#define SUMMARY_EVERY_MS 60000
/* Spans per TraceService request: a few hundred bytes each, so far below
 * the receive limit. */
#define SPANS_PER_REQUEST 2000
#define TRACES_EXPORT_PATH "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

struct held {
	struct held *next;
	struct export_sample es; /* pointers into data */
	size_t size;
	char data[];
};

struct request {
	struct request *next;
	uint8_t *data;
	size_t len;
	uint64_t samples; /* a profiles request */
	uint64_t spans;   /* a traces request */
};

struct held_span {
	struct held_span *next;
	size_t size;
	struct trace_span ts; /* strings point into data */
	char data[];
};

struct otlp_exporter {
	const struct symbolize_ctx *sc; /* borrowed */
	struct otlp_exporter_opts o;
	char *target;

	/* loop thread only */
	struct held *held, **held_tail;
	size_t n_held, held_bytes;
	struct held_span *spans, **spans_tail;
	size_t n_spans; /* their bytes count in held_bytes */
	int64_t window_start_ms;
	uint64_t window_start_unix_ns;
	int64_t last_summary_ms;
	uint64_t summary_requests;

	/* shared with the sender, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct request *head, *tail;
	size_t n_backlog, backlog_bytes;
	struct otlp_counters c;
	bool stop;
	int64_t drain_until_ms; /* when stopping */

	/* sender thread only */
	struct rpc_channel *ch;
	bool said_unimplemented[2]; /* profiles, traces */
	pthread_t thread;
	bool thread_started;
	bool failing;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void request_free(struct request *q)
{
	if (!q)
		return;
	free(q->data);
	free(q);
}

/* ---- sender thread ---- */

/* Waits on cond until ms (monotonic) or a signal. mu held. */
static void wait_until(struct otlp_exporter *x, int64_t ms)
{
	struct timespec ts;

	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000;
	pthread_cond_timedwait(&x->cond, &x->mu, &ts);
}

/* Sends q once. Returns 0 or a negative errno; err says why. */
static int send_traces(struct otlp_exporter *x, const struct request *q, int timeout_ms,
		       struct rpc_error *err)
{
	Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse *rep;
	ProtobufCMessage *reply = NULL;
	int r;

	r = rpc_unary_packed(x->ch, TRACES_EXPORT_PATH, q->data, q->len,
			     &opentelemetry__proto__collector__trace__v1__export_trace_service_response__descriptor,
			     timeout_ms, true, &reply, err);
	if (r < 0)
		return r;
	rep = (void *)reply;
	if (rep->partial_success && rep->partial_success->rejected_spans > 0)
		log_warn("OTLP receiver rejected %lld spans: %.200s",
			 (long long)rep->partial_success->rejected_spans,
			 rep->partial_success->error_message ? rep->partial_success->error_message : "");
	rpc_message_free(reply);
	return 0;
}

static int send_one(struct otlp_exporter *x, const struct request *q, int timeout_ms,
		    struct rpc_error *err)
{
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse *rep;
	ProtobufCMessage *reply = NULL;
	int r;

	if (q->spans)
		return send_traces(x, q, timeout_ms, err);

	/* wait_for_ready: while the receiver is away the call waits (up to
	 * its deadline) for the channel to reconnect instead of failing at
	 * once. */
	r = rpc_unary_packed(
		x->ch, OTLP_PROFILES_EXPORT_PATH, q->data, q->len,
		&opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__descriptor,
		timeout_ms, true, &reply, err);
	if (r < 0)
		return r;
	rep = (void *)reply;
	if (rep->partial_success && rep->partial_success->rejected_profiles > 0)
		log_warn("OTLP receiver rejected %lld profiles: %.200s",
			 (long long)rep->partial_success->rejected_profiles,
			 rep->partial_success->error_message ? rep->partial_success->error_message : "");
	rpc_message_free(reply);
	return 0;
}

static void *sender_main(void *arg)
{
	struct otlp_exporter *x = arg;
	int backoff = BACKOFF_MIN_MS;

	pthread_mutex_lock(&x->mu);
	for (;;) {
		struct request *q;
		struct rpc_error err = { 0 };
		int timeout = (int)x->o.send_timeout_ms;
		int r;

		while (!x->head && !x->stop)
			pthread_cond_wait(&x->cond, &x->mu);
		if (!x->head || (x->stop && mono_ms() >= x->drain_until_ms))
			break;
		q = x->head;
		x->head = q->next;
		if (!x->head)
			x->tail = NULL;
		if (x->stop && x->drain_until_ms - mono_ms() < timeout)
			timeout = (int)(x->drain_until_ms - mono_ms());
		pthread_mutex_unlock(&x->mu);

		r = send_one(x, q, timeout, &err);

		pthread_mutex_lock(&x->mu);
		if (r == 0) {
			x->c.requests++;
			x->c.samples += q->samples;
			x->c.spans += q->spans;
			x->n_backlog--;
			x->backlog_bytes -= q->len;
			request_free(q);
			if (x->failing)
				log_info("OTLP export to %s works again (%zu requests waiting)",
					 x->target, x->n_backlog);
			x->failing = false;
			backoff = BACKOFF_MIN_MS;
			continue;
		}
		if (err.status == RPC_UNIMPLEMENTED) {
			/* A receiver without this signal (profiles are still in
			 * development; many receivers take traces only): drop
			 * the request rather than block the others behind it. */
			bool *said = &x->said_unimplemented[q->spans ? 1 : 0];

			if (!*said)
				log_warn("OTLP receiver %s does not accept %s (%.200s): dropping them",
					 x->target, q->spans ? "traces" : "profiles", err.message);
			*said = true;
			x->n_backlog--;
			x->backlog_bytes -= q->len;
			x->c.dropped_requests++;
			x->c.dropped_samples += q->samples;
			x->c.dropped_spans += q->spans;
			request_free(q);
			continue;
		}
		x->c.failures++;
		if (!x->failing)
			log_warn("OTLP export to %s failed: %.200s; retrying with backoff, keeping up to %zu requests",
				 x->target, err.message, x->o.max_backlog_requests);
		x->failing = true;
		/* Back in front: requests go out in order. */
		q->next = x->head;
		x->head = q;
		if (!x->tail)
			x->tail = q;
		if (x->stop)
			break;
		wait_until(x, mono_ms() + backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	pthread_mutex_unlock(&x->mu);
	return NULL;
}

/* ---- loop thread ---- */

/* Appends a request, dropping the oldest while over the bounds. */
static void backlog_push(struct otlp_exporter *x, uint8_t *data, size_t len, uint64_t samples,
			 uint64_t spans)
{
	struct request *q = calloc(1, sizeof(*q));

	if (!q) {
		free(data);
		pthread_mutex_lock(&x->mu);
		x->c.dropped_samples += samples;
		x->c.dropped_spans += spans;
		x->c.dropped_requests++;
		pthread_mutex_unlock(&x->mu);
		return;
	}
	q->data = data;
	q->len = len;
	q->samples = samples;
	q->spans = spans;
	pthread_mutex_lock(&x->mu);
	while (x->head && (x->n_backlog + 1 > x->o.max_backlog_requests ||
			   x->backlog_bytes + len > x->o.max_backlog_bytes)) {
		struct request *old = x->head;

		x->head = old->next;
		if (!x->head)
			x->tail = NULL;
		x->n_backlog--;
		x->backlog_bytes -= old->len;
		x->c.dropped_requests++;
		x->c.dropped_samples += old->samples;
		x->c.dropped_spans += old->spans;
		request_free(old);
	}
	if (len > x->o.max_backlog_bytes) {
		x->c.dropped_requests++;
		x->c.dropped_samples += samples;
		x->c.dropped_spans += spans;
		request_free(q);
	} else {
		if (x->tail)
			x->tail->next = q;
		else
			x->head = q;
		x->tail = q;
		x->n_backlog++;
		x->backlog_bytes += len;
		pthread_cond_signal(&x->cond);
	}
	pthread_mutex_unlock(&x->mu);
}

static void count_dropped(struct otlp_exporter *x, uint64_t samples)
{
	pthread_mutex_lock(&x->mu);
	x->c.dropped_samples += samples;
	pthread_mutex_unlock(&x->mu);
}

/* Symbolizes v[0..n), samples of one profile type, into one model and
 * queues its request; a request over max_request_bytes is made again as
 * two halves. */
static void build_range(struct otlp_exporter *x, struct held **v, size_t n, uint32_t profile,
			uint64_t start_ns, uint64_t end_ns)
{
	struct pmodel m;
	uint64_t samples = 0, bad = 0;
	uint8_t *data = NULL;
	size_t len = 0;
	int r;

	if (n == 0)
		return;
	if (pm_init(&m) < 0) {
		r = -ENOMEM;
		goto fail;
	}
	m.profile = profile;
	for (size_t i = 0; i < n; i++) {
		r = pm_add_export_sample(&m, x->sc, &v[i]->es);
		if (r == -EBADMSG) {
			bad += v[i]->es.count;
			continue;
		}
		if (r < 0)
			goto fail;
		samples += v[i]->es.count;
	}
	if (bad) {
		log_debug("OTLP: %llu samples with a damaged raw stack dropped",
			  (unsigned long long)bad);
		count_dropped(x, bad);
	}
	if (samples == 0) {
		pm_free(&m);
		return;
	}
	/* The window, widened to samples that were stored late (stacks wait
	 * for their files' analysis). */
	if (!m.start_ns || start_ns < m.start_ns)
		m.start_ns = start_ns;
	if (end_ns > m.end_ns)
		m.end_ns = end_ns;
	if (x->o.layout == OTLP_LAYOUT_V1_5_0)
		r = otlp_v150_encode(&m, &data, &len);
	else
		r = otlp_encode(&m, &data, &len);
	pm_free(&m);
	if (r < 0)
		goto fail_counted;
	if (len > x->o.max_request_bytes && n > 1) {
		free(data);
		build_range(x, v, n / 2, profile, start_ns, end_ns);
		build_range(x, v + n / 2, n - n / 2, profile, start_ns, end_ns);
		return;
	}
	log_debug("OTLP: window of %llu samples, %zu bytes queued", (unsigned long long)samples, len);
	backlog_push(x, data, len, samples, 0);
	return;
fail:
	pm_free(&m);
	samples = 0;
	for (size_t i = 0; i < n; i++)
		samples += v[i]->es.count;
fail_counted:
	log_warn_errno(r, "OTLP: cannot build a request of %llu samples, dropped them",
		       (unsigned long long)samples);
	count_dropped(x, samples);
}

static void flush_window(struct otlp_exporter *x)
{
	struct held **v = NULL;
	struct held *h, *next;
	uint64_t now = unix_ns();
	size_t i = 0;

	if (x->n_held) {
		v = malloc(x->n_held * sizeof(*v));
		if (v) {
			/* One request per profile type: a Profile's samples
			 * share one value type. */
			for (uint32_t t = 0; t < PM_PROFILES; t++) {
				i = 0;
				for (h = x->held; h; h = h->next)
					if (h->es.profile == t)
						v[i++] = h;
				build_range(x, v, i, t, x->window_start_unix_ns, now);
			}
		} else {
			uint64_t lost = 0;

			for (h = x->held; h; h = h->next)
				lost += h->es.count;
			log_warn("OTLP: out of memory, %llu samples dropped", (unsigned long long)lost);
			count_dropped(x, lost);
		}
	}
	free(v);
	for (h = x->held; h; h = next) {
		next = h->next;
		free(h);
	}
	x->held = NULL;
	x->held_tail = &x->held;
	x->n_held = 0;
	x->held_bytes = 0;
	x->window_start_unix_ns = now;
}

static void free_spans(struct otlp_exporter *x)
{
	for (struct held_span *h = x->spans, *n; h; h = n) {
		n = h->next;
		free(h);
	}
	x->spans = NULL;
	x->spans_tail = &x->spans;
	x->n_spans = 0;
}

/* The held spans as TraceService requests of up to SPANS_PER_REQUEST. */
static void flush_spans(struct otlp_exporter *x)
{
	struct trace_span *v = NULL;
	struct held_span *h = x->spans;
	size_t n;

	if (!x->n_spans)
		return;
	v = malloc((x->n_spans < SPANS_PER_REQUEST ? x->n_spans : SPANS_PER_REQUEST) * sizeof(*v));
	while (h) {
		uint8_t *data = NULL;
		size_t len = 0;
		int r = -ENOMEM;

		for (n = 0; v && h && n < SPANS_PER_REQUEST; h = h->next)
			v[n++] = h->ts;
		if (v)
			r = otlp_traces_encode(v, n, &data, &len);
		if (r < 0) {
			log_warn_errno(r, "OTLP: cannot build a request of %zu spans, dropped them",
				       x->n_spans);
			pthread_mutex_lock(&x->mu);
			x->c.dropped_spans += v ? n : x->n_spans;
			pthread_mutex_unlock(&x->mu);
			if (!v)
				break;
			continue;
		}
		backlog_push(x, data, len, 0, n);
	}
	free(v);
	free_spans(x);
}

static size_t slen(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

/* Copies s into the block at *p; NULL stays NULL. */
static const char *put(char **p, const char *s)
{
	char *at = *p;
	size_t n = slen(s);

	if (!s)
		return NULL;
	memcpy(at, s, n);
	*p += n;
	return at;
}

void otlp_exporter_add(struct otlp_exporter *x, const struct export_sample *s)
{
	struct held *h;
	size_t size;
	char *p;

	if (!x || !s || !s->count)
		return;
	size = sizeof(*h) + slen(s->host) + slen(s->thread_name) + slen(s->comm) +
	       slen(s->exe_path) + slen(s->container_id) + slen(s->host_id) + slen(s->pod_uid) +
	       slen(s->command_line) + s->raw_len;
	if (x->held_bytes + size > x->o.max_held_bytes || !(h = malloc(size))) {
		count_dropped(x, s->count);
		return;
	}
	h->next = NULL;
	h->size = size;
	h->es = *s;
	p = h->data;
	memcpy(p, s->raw, s->raw_len);
	h->es.raw = p;
	p += s->raw_len;
	h->es.host = put(&p, s->host);
	h->es.thread_name = put(&p, s->thread_name);
	h->es.comm = put(&p, s->comm);
	h->es.exe_path = put(&p, s->exe_path);
	h->es.container_id = put(&p, s->container_id);
	h->es.host_id = put(&p, s->host_id);
	h->es.pod_uid = put(&p, s->pod_uid);
	h->es.command_line = put(&p, s->command_line);
	*x->held_tail = h;
	x->held_tail = &h->next;
	x->n_held++;
	x->held_bytes += size;
}

void otlp_exporter_add_span(struct otlp_exporter *x, const struct trace_span *s)
{
	struct held_span *h;
	size_t size;
	char *p;

	if (!x || !s)
		return;
	size = sizeof(*h) + slen(s->name) + slen(s->service_name) + slen(s->host) +
	       slen(s->method) + slen(s->path) + slen(s->scheme) + slen(s->server_address) +
	       slen(s->url_full);
	if (x->held_bytes + size > x->o.max_held_bytes || !(h = malloc(size))) {
		pthread_mutex_lock(&x->mu);
		x->c.dropped_spans++;
		pthread_mutex_unlock(&x->mu);
		return;
	}
	h->next = NULL;
	h->size = size;
	h->ts = *s;
	p = h->data;
	h->ts.name = put(&p, s->name);
	h->ts.service_name = put(&p, s->service_name);
	h->ts.host = put(&p, s->host);
	h->ts.method = put(&p, s->method);
	h->ts.path = put(&p, s->path);
	h->ts.scheme = put(&p, s->scheme);
	h->ts.server_address = put(&p, s->server_address);
	h->ts.url_full = put(&p, s->url_full);
	*x->spans_tail = h;
	x->spans_tail = &h->next;
	x->n_spans++;
	x->held_bytes += size;
}

static void log_summary(struct otlp_exporter *x, const char *when)
{
	struct otlp_counters c;

	otlp_exporter_counters(x, &c);
	log_info("OTLP export to %s%s: %llu requests (%llu samples, %llu spans) delivered, %llu failed attempts, %llu samples and %llu spans dropped (%llu requests), %llu requests waiting",
		 x->target, when, (unsigned long long)c.requests, (unsigned long long)c.samples,
		 (unsigned long long)c.spans,
		 (unsigned long long)c.failures, (unsigned long long)c.dropped_samples,
		 (unsigned long long)c.dropped_spans, (unsigned long long)c.dropped_requests, (unsigned long long)c.backlog_requests);
}

void otlp_exporter_tick(struct otlp_exporter *x, int64_t now_ms)
{
	if (!x)
		return;
	if (now_ms - x->window_start_ms >= (int64_t)x->o.interval_ms) {
		x->window_start_ms = now_ms;
		flush_window(x);
		flush_spans(x);
	}
	if (now_ms - x->last_summary_ms >= SUMMARY_EVERY_MS) {
		struct otlp_counters c;

		x->last_summary_ms = now_ms;
		otlp_exporter_counters(x, &c);
		/* Only when something happened since the last line. */
		if (c.requests + c.failures + c.dropped_requests != x->summary_requests) {
			x->summary_requests = c.requests + c.failures + c.dropped_requests;
			log_summary(x, "");
		}
	}
}

int64_t otlp_exporter_due_ms(const struct otlp_exporter *x, int64_t now_ms)
{
	int64_t left;

	if (!x)
		return INT64_MAX;
	left = x->window_start_ms + (int64_t)x->o.interval_ms - now_ms;
	return left > 0 ? left : 0;
}

void otlp_exporter_counters(struct otlp_exporter *x, struct otlp_counters *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!x)
		return;
	pthread_mutex_lock(&x->mu);
	*ret = x->c;
	ret->backlog_requests = x->n_backlog;
	ret->backlog_bytes = x->backlog_bytes;
	pthread_mutex_unlock(&x->mu);
}

int otlp_layout_parse(const char *s, enum otlp_layout *ret)
{
	static const struct {
		const char *name;
		enum otlp_layout layout;
	} names[] = {
		{ "1.10", OTLP_LAYOUT_CURRENT }, { "1.10.0", OTLP_LAYOUT_CURRENT },
		{ "1.11", OTLP_LAYOUT_CURRENT }, { "1.11.0", OTLP_LAYOUT_CURRENT },
		{ "1.5", OTLP_LAYOUT_V1_5_0 },   { "1.5.0", OTLP_LAYOUT_V1_5_0 },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(s, names[i].name) == 0) {
			*ret = names[i].layout;
			return 0;
		}
	}
	return -EINVAL;
}

const char *otlp_layout_name(enum otlp_layout layout)
{
	return layout == OTLP_LAYOUT_V1_5_0 ? "1.5.0" : "1.10/1.11";
}

struct otlp_exporter *otlp_exporter_new(const struct symbolize_ctx *sc,
				       const struct otlp_exporter_opts *opts)
{
	struct otlp_exporter *x = calloc(1, sizeof(*x));
	struct rpc_channel_opts copts = {
		.max_message_bytes = 1u << 20, /* replies are tiny */
		.reconnect_min_ms = 250,
		.reconnect_max_ms = 2000,
		.gzip = true,
	};
	int r;

	if (!x)
		return NULL;
	pthread_mutex_init(&x->mu, NULL);
	{
		pthread_condattr_t ca;

		/* Backoff waits use the monotonic clock. */
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&x->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	x->sc = sc;
	x->o = *opts;
	if (!x->o.interval_ms)
		x->o.interval_ms = DEFAULT_INTERVAL_MS;
	if (!x->o.max_held_bytes)
		x->o.max_held_bytes = DEFAULT_HELD_BYTES;
	if (!x->o.max_backlog_bytes)
		x->o.max_backlog_bytes = DEFAULT_BACKLOG_BYTES;
	if (!x->o.max_backlog_requests)
		x->o.max_backlog_requests = DEFAULT_BACKLOG_REQUESTS;
	if (!x->o.max_request_bytes)
		x->o.max_request_bytes = DEFAULT_REQUEST_BYTES;
	if (!x->o.send_timeout_ms)
		x->o.send_timeout_ms = DEFAULT_SEND_TIMEOUT_MS;
	x->held_tail = &x->held;
	x->spans_tail = &x->spans;
	x->window_start_ms = x->last_summary_ms = mono_ms();
	x->window_start_unix_ns = unix_ns();
	x->target = strdup(opts->target ? opts->target : "");
	copts.tls = opts->tls;
	x->ch = opts->target ? rpc_channel_new(opts->target, &copts) : NULL;
	if (!x->target || !x->ch) {
		log_error("OTLP: cannot create a channel to %s%s", opts->target ? opts->target : "(none)",
			  opts->tls ? " (are the TLS files readable?)" : "");
		goto fail;
	}
	r = pthread_create(&x->thread, NULL, sender_main, x);
	if (r != 0) {
		log_error_errno(-r, "OTLP: cannot start the sender thread");
		goto fail;
	}
	x->thread_started = true;
	return x;
fail:
	otlp_exporter_free(x, 0);
	return NULL;
}

void otlp_exporter_free(struct otlp_exporter *x, int drain_ms)
{
	struct request *q, *next;

	if (!x)
		return;
	if (x->thread_started) {
		flush_window(x);
		flush_spans(x);
		pthread_mutex_lock(&x->mu);
		x->stop = true;
		x->drain_until_ms = mono_ms() + (drain_ms > 0 ? drain_ms : 0);
		pthread_cond_signal(&x->cond);
		pthread_mutex_unlock(&x->mu);
		pthread_join(x->thread, NULL);
	}
	for (q = x->head; q; q = next) {
		next = q->next;
		x->c.dropped_requests++;
		x->c.dropped_samples += q->samples;
		x->c.dropped_spans += q->spans;
		request_free(q);
	}
	x->head = x->tail = NULL;
	x->n_backlog = 0;
	x->backlog_bytes = 0;
	if (x->thread_started)
		log_summary(x, " at exit");
	for (struct held *h = x->held, *n; h; h = n) {
		n = h->next;
		free(h);
	}
	free_spans(x);
	rpc_channel_free(x->ch);
	free(x->target);
	pthread_cond_destroy(&x->cond);
	pthread_mutex_destroy(&x->mu);
	free(x);
}
