/* otlp_traces.h - spans as one OTLP ExportTraceServiceRequest
 * (opentelemetry.proto.collector.trace.v1), grouped by resource (service,
 * host, process). Spans come from the Go probes (docs/go-probes.md); the
 * attribute names are OpenTelemetry's HTTP semantic conventions.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum trace_span_kind {
	TRACE_SPAN_SERVER = 2, /* the OTLP SpanKind numbers */
	TRACE_SPAN_CLIENT = 3,
};

/* One finished span. Strings are borrowed; NULL or "" means unknown and
 * leaves the attribute out. */
struct trace_span {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t parent_span_id[8];
	bool has_parent;
	bool remote_parent; /* the parent came from an incoming traceparent */
	uint8_t trace_flags; /* W3C trace-flags (bit 0: sampled) */
	enum trace_span_kind kind;
	uint64_t start_ns, end_ns; /* unix */
	const char *name;          /* e.g. "GET /users" or "GET" */
	/* resource */
	const char *service_name;
	const char *host;
	uint32_t pid;
	/* attributes */
	const char *method;         /* http.request.method */
	const char *path;           /* url.path */
	const char *scheme;         /* url.scheme */
	const char *server_address; /* server.address */
	const char *url_full;       /* url.full (clients) */
	int32_t status_code;        /* http.response.status_code; 0: unknown */
};

/* Encodes spans[0..n) into *ret (malloc'd, *ret_len bytes). Returns 0,
 * -EINVAL for n == 0, or -ENOMEM. */
int otlp_traces_encode(const struct trace_span *spans, size_t n, uint8_t **ret, size_t *ret_len);
