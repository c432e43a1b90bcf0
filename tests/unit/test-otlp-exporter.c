/* test-otlp-exporter.c - the OTLP exporter's windows, delivery and bounds,
 * against an in-process OTLP receiver (rpc_server.c serving Export over
 * tcp:127.0.0.1) and against a port nobody listens on. Symbolization is
 * stubbed: pm_add_export_sample() here adds one sample per raw stack. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "otlp.h"
#include "otlp_exporter.h"
#include "otlp_profiles_service.pb-c.h"
#include "otlp_trace_service.pb-c.h"
#include "rpc_server.h"

#define PERIOD_NS 10000000ull /* 100 Hz */

/* The stub: a raw stack of one byte 0xff is "damaged". */
int pm_add_export_sample(struct pmodel *m, const struct symbolize_ctx *sc,
			 const struct export_sample *s)
{
	struct pm_process p = { .pid = s->pid };
	struct pm_sample smp = { .tid = s->tid, .count = s->count, .first_ns = s->first_ns,
				 .last_ns = s->last_ns };

	(void)sc;
	if (s->raw_len == 1 && ((const uint8_t *)s->raw)[0] == 0xff)
		return -EBADMSG;
	if (pm_stack(m, NULL, 0, &smp.stack) < 0 || pm_process(m, &p, &smp.process) < 0)
		return -ENOMEM;
	if (s->frequency_hz)
		m->period_ns = 1000000000ull / s->frequency_hz;
	return pm_sample(m, &smp);
}

static atomic_uint_fast64_t got_requests, got_samples;

static void on_export(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	const Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest *req =
		(const void *)msg;
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse rep =
		OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
	uint64_t n = 0;

	(void)ctx;
	/* Values are sample counts (samples/count), in every Profile. */
	for (size_t i = 0; i < req->n_resource_profiles; i++) {
		const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
			req->resource_profiles[i]->scope_profiles[0];

		for (size_t j = 0; j < sp->n_profiles; j++)
			for (size_t k = 0; k < sp->profiles[j]->n_samples; k++)
				for (size_t v = 0; v < sp->profiles[j]->samples[k]->n_values; v++)
					n += (uint64_t)sp->profiles[j]->samples[k]->values[v];
	}
	atomic_fetch_add(&got_requests, 1);
	atomic_fetch_add(&got_samples, n);
	rpc_call_finish(call, RPC_OK, NULL, &rep.base);
}

static atomic_uint_fast64_t got_trace_requests, got_spans, got_span_500;

static void on_traces(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	const Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req =
		(const void *)msg;
	Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse rep =
		OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;

	(void)ctx;
	for (size_t i = 0; i < req->n_resource_spans; i++)
		for (size_t k = 0; k < req->resource_spans[i]->n_scope_spans; k++) {
			const Opentelemetry__Proto__Trace__V1__ScopeSpans *ss =
				req->resource_spans[i]->scope_spans[k];

			atomic_fetch_add(&got_spans, ss->n_spans);
			for (size_t j = 0; j < ss->n_spans; j++)
				if (ss->spans[j]->start_time_unix_nano == 500)
					atomic_fetch_add(&got_span_500, 1);
		}
	atomic_fetch_add(&got_trace_requests, 1);
	rpc_call_finish(call, RPC_OK, NULL, &rep.base);
}

static const struct rpc_method methods[] = {
	{ .path = OTLP_PROFILES_EXPORT_PATH,
	  .kind = RPC_UNARY,
	  .request = &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
	  .on_call = on_export },
	{ .path = "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
	  .kind = RPC_UNARY,
	  .request = &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor,
	  .on_call = on_traces },
};

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void add(struct otlp_exporter *x, uint32_t pid, uint64_t count, const void *raw, size_t len)
{
	struct export_sample s = {
		.host = "h", .pid = pid, .tid = pid, .thread_name = "t", .comm = "c",
		.exe_path = "/bin/c", .raw = raw, .raw_len = len, .count = count,
		.first_ns = 1000, .last_ns = 2000, .frequency_hz = 100,
	};

	otlp_exporter_add(x, &s);
}

/* A window of three samples reaches the receiver as one request. */
static void test_delivery(void **state)
{
	struct rpc_server *srv = rpc_server_new(methods, 2, NULL, NULL);
	struct otlp_exporter_opts o = { .interval_ms = 10, .send_timeout_ms = 5000 };
	struct otlp_counters c;
	struct otlp_exporter *x;
	uint8_t raw[4] = { 1, 0, 0, 0 };
	char target[64];
	int port = 0;

	(void)state;
	atomic_store(&got_requests, 0);
	atomic_store(&got_samples, 0);
	assert_non_null(srv);
	assert_int_equal(rpc_server_listen(srv, "tcp:127.0.0.1:0", &port), 0);
	assert_int_equal(rpc_server_start(srv), 0);
	snprintf(target, sizeof(target), "tcp:127.0.0.1:%d", port);
	o.target = target;
	x = otlp_exporter_new(NULL, &o);
	assert_non_null(x);
	add(x, 1, 2, raw, sizeof(raw));
	add(x, 2, 3, raw, sizeof(raw));
	add(x, 1, 5, raw, sizeof(raw));
	uint8_t bad = 0xff;
	add(x, 3, 7, &bad, 1); /* damaged: dropped, counted */
	sleep_ms(20);
	otlp_exporter_tick(x, now_ms());
	for (int i = 0; i < 500 && atomic_load(&got_samples) < 10; i++)
		sleep_ms(10);
	assert_int_equal(atomic_load(&got_requests), 1);
	assert_int_equal(atomic_load(&got_samples), 10);
	for (int i = 0; i < 100; i++) {
		otlp_exporter_counters(x, &c);
		if (c.requests == 1)
			break;
		sleep_ms(10);
	}
	assert_int_equal(c.requests, 1);
	assert_int_equal(c.samples, 10);
	assert_int_equal(c.dropped_samples, 7);
	assert_int_equal(c.backlog_requests, 0);
	/* What is held at exit is sent before the sender stops. */
	add(x, 1, 4, raw, sizeof(raw));
	otlp_exporter_free(x, 5000);
	assert_int_equal(atomic_load(&got_samples), 14);
	rpc_server_free(srv);
}

/* Spans of a window go out as TraceService requests of at most 2,000
 * spans, next to the profiles; each is delivered once and counted. */
static void test_spans(void **state)
{
	struct rpc_server *srv = rpc_server_new(methods, 2, NULL, NULL);
	struct otlp_exporter_opts o = { .interval_ms = 10, .send_timeout_ms = 5000 };
	struct otlp_counters c;
	struct otlp_exporter *x;
	char target[64];
	int port = 0;

	(void)state;
	atomic_store(&got_trace_requests, 0);
	atomic_store(&got_spans, 0);
	assert_non_null(srv);
	assert_int_equal(rpc_server_listen(srv, "tcp:127.0.0.1:0", &port), 0);
	assert_int_equal(rpc_server_start(srv), 0);
	snprintf(target, sizeof(target), "tcp:127.0.0.1:%d", port);
	o.target = target;
	x = otlp_exporter_new(NULL, &o);
	assert_non_null(x);
	for (int i = 0; i < 4500; i++) {
		char path[32];
		struct trace_span sp = { .trace_id = { 1 }, .span_id = { (uint8_t)i, 1 },
					 .kind = TRACE_SPAN_SERVER, .start_ns = 500 + (uint64_t)(i % 3),
					 .end_ns = 900, .service_name = "svc", .pid = 1 + (uint32_t)(i % 4),
					 .method = "GET", .path = path, .status_code = 200 };

		snprintf(path, sizeof(path), "/item/%d", i);
		otlp_exporter_add_span(x, &sp); /* path is copied */
	}
	sleep_ms(20);
	otlp_exporter_tick(x, now_ms());
	for (int i = 0; i < 500 && atomic_load(&got_spans) < 4500; i++)
		sleep_ms(10);
	assert_int_equal(atomic_load(&got_spans), 4500);
	assert_int_equal(atomic_load(&got_trace_requests), 3);
	assert_int_equal(atomic_load(&got_span_500), 1500);
	for (int i = 0; i < 100; i++) {
		otlp_exporter_counters(x, &c);
		if (c.spans == 4500)
			break;
		sleep_ms(10);
	}
	assert_int_equal(c.spans, 4500);
	assert_int_equal(c.dropped_spans, 0);
	assert_int_equal(c.samples, 0);
	otlp_exporter_free(x, 5000);
	rpc_server_free(srv);
}

/* A receiver that takes traces only (UNIMPLEMENTED for profiles): the
 * profiles requests are dropped and counted, and do not hold the spans
 * queued behind them. */
static void test_traces_only_receiver(void **state)
{
	struct rpc_server *srv = rpc_server_new(methods + 1, 1, NULL, NULL);
	struct otlp_exporter_opts o = { .interval_ms = 10, .send_timeout_ms = 5000 };
	struct otlp_counters c;
	struct otlp_exporter *x;
	uint8_t raw[4] = { 1, 0, 0, 0 };
	char target[64];
	int port = 0;

	(void)state;
	atomic_store(&got_spans, 0);
	assert_non_null(srv);
	assert_int_equal(rpc_server_listen(srv, "tcp:127.0.0.1:0", &port), 0);
	assert_int_equal(rpc_server_start(srv), 0);
	snprintf(target, sizeof(target), "tcp:127.0.0.1:%d", port);
	o.target = target;
	x = otlp_exporter_new(NULL, &o);
	assert_non_null(x);
	for (int round = 0; round < 3; round++) {
		struct trace_span sp = { .trace_id = { 1 }, .span_id = { (uint8_t)(round + 1) },
					 .kind = TRACE_SPAN_CLIENT, .start_ns = 1, .end_ns = 2,
					 .method = "GET" };

		add(x, 1, 2, raw, sizeof(raw));
		otlp_exporter_add_span(x, &sp);
		sleep_ms(20);
		otlp_exporter_tick(x, now_ms());
	}
	for (int i = 0; i < 500 && atomic_load(&got_spans) < 3; i++)
		sleep_ms(10);
	assert_int_equal(atomic_load(&got_spans), 3);
	for (int i = 0; i < 200; i++) {
		otlp_exporter_counters(x, &c);
		if (c.spans == 3 && c.dropped_samples == 6)
			break;
		sleep_ms(10);
	}
	assert_int_equal(c.spans, 3);
	assert_int_equal(c.dropped_samples, 6);
	assert_int_equal(c.samples, 0);
	assert_int_equal(c.backlog_requests, 0);
	otlp_exporter_free(x, 1000);
	rpc_server_free(srv);
}

/* A window over max_request_bytes goes out as several requests, each
 * with its own dictionary, and no sample is lost. */
static void test_split(void **state)
{
	struct rpc_server *srv = rpc_server_new(methods, 2, NULL, NULL);
	struct otlp_exporter_opts o = { .interval_ms = 10, .send_timeout_ms = 5000,
					.max_request_bytes = 400 };
	struct otlp_exporter *x;
	uint8_t raw[4] = { 1, 0, 0, 0 };
	char target[64];
	int port = 0;

	(void)state;
	atomic_store(&got_requests, 0);
	atomic_store(&got_samples, 0);
	assert_non_null(srv);
	assert_int_equal(rpc_server_listen(srv, "tcp:127.0.0.1:0", &port), 0);
	assert_int_equal(rpc_server_start(srv), 0);
	snprintf(target, sizeof(target), "tcp:127.0.0.1:%d", port);
	o.target = target;
	x = otlp_exporter_new(NULL, &o);
	assert_non_null(x);
	for (uint32_t pid = 1; pid <= 8; pid++)
		add(x, pid, pid, raw, sizeof(raw));
	sleep_ms(20);
	otlp_exporter_tick(x, now_ms());
	for (int i = 0; i < 500 && atomic_load(&got_samples) < 36; i++)
		sleep_ms(10);
	assert_int_equal(atomic_load(&got_samples), 36);
	assert_true(atomic_load(&got_requests) >= 2);
	otlp_exporter_free(x, 1000);
	rpc_server_free(srv);
}

/* Nobody listens: the backlog keeps at most max_backlog_requests, drops
 * the oldest, and every sample is either delivered or counted dropped. */
static void test_backlog_bounds(void **state)
{
	struct otlp_exporter_opts o = { .interval_ms = 1, .send_timeout_ms = 100,
					.max_backlog_requests = 2 };
	struct otlp_counters c;
	struct otlp_exporter *x;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	uint8_t raw[4] = { 1, 0, 0, 0 };
	char target[64];
	int fd;

	(void)state;
	/* A port that was free a moment ago and has no listener. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	snprintf(target, sizeof(target), "tcp:127.0.0.1:%u", ntohs(sa.sin_port));
	o.target = target;
	x = otlp_exporter_new(NULL, &o);
	assert_non_null(x);
	for (int i = 0; i < 6; i++) {
		add(x, 1, 1, raw, sizeof(raw));
		sleep_ms(5);
		otlp_exporter_tick(x, now_ms());
		otlp_exporter_counters(x, &c);
		assert_true(c.backlog_requests <= 2);
	}
	otlp_exporter_counters(x, &c);
	assert_int_equal(c.requests, 0);
	assert_true(c.dropped_requests >= 4);
	assert_int_equal(c.dropped_samples, c.dropped_requests);
	/* The refused connection is reported within the send timeout on an
	 * idle host; a loaded one may take longer to schedule the sender. */
	for (int waited = 0; waited < 5000; waited += 50) {
		otlp_exporter_counters(x, &c);
		if (c.failures >= 1)
			break;
		sleep_ms(50);
	}
	assert_true(c.failures >= 1);
	otlp_exporter_free(x, 0);
}

/* Held samples are bounded by bytes: the rest is counted dropped. */
static void test_held_bound(void **state)
{
	struct otlp_exporter_opts o = { .target = "tcp:127.0.0.1:9", .interval_ms = 100000,
					.max_held_bytes = 1000 };
	struct otlp_counters c;
	struct otlp_exporter *x;
	uint8_t raw[200] = { 1 };

	(void)state;
	x = otlp_exporter_new(NULL, &o);
	assert_non_null(x);
	for (int i = 0; i < 10; i++)
		add(x, 1, 3, raw, sizeof(raw));
	otlp_exporter_counters(x, &c);
	/* 200 bytes of stack plus the copy's header and strings: a few fit. */
	assert_true(c.dropped_samples >= 3 * 6 && c.dropped_samples <= 3 * 9);
	assert_int_equal(c.dropped_samples % 3, 0);
	otlp_exporter_free(x, 0);
	otlp_exporter_add(NULL, NULL); /* no exporter: nothing */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delivery),
		cmocka_unit_test(test_spans),
		cmocka_unit_test(test_traces_only_receiver),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_backlog_bounds),
		cmocka_unit_test(test_held_bound),
	};
	int r;

	rpc_global_init();
	r = cmocka_run_group_tests(tests, NULL, NULL);
	rpc_global_shutdown();
	return r;
}
