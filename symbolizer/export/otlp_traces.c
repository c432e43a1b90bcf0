/* otlp_traces.c - see otlp_traces.h. Everything the request points to lives
 * in one arena, freed once the bytes are packed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "otlp_kv.h"
#include "otlp_trace_service.pb-c.h"
#include "otlp_traces.h"

#define T_(x) Opentelemetry__Proto__Trace__V1__##x
#define t_init(x) opentelemetry__proto__trace__v1__##x##__init
typedef Opentelemetry__Proto__Common__V1__KeyValue kv_t;

#define SPAN_MAX_ATTRS 6
#define RESOURCE_MAX_ATTRS 3
/* Span.flags bits 8 and 9: whether the parent is remote is known, and is. */
#define FLAG_HAS_IS_REMOTE 0x100u
#define FLAG_IS_REMOTE 0x200u

static bool same_resource(const struct trace_span *a, const struct trace_span *b)
{
	return a->pid == b->pid && !strcmp(a->service_name ? a->service_name : "",
					   b->service_name ? b->service_name : "") &&
	       !strcmp(a->host ? a->host : "", b->host ? b->host : "");
}

/* Server errors are 5xx; for a client every 4xx and 5xx is (semantic
 * conventions); otherwise the status stays unset. */
static int status_code(const struct trace_span *s)
{
	if (s->status_code >= 500 || (s->kind == TRACE_SPAN_CLIENT && s->status_code >= 400))
		return OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
	return OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_UNSET;
}

static int enc_span(struct arena *a, const struct trace_span *s, T_(Span) *o)
{
	kv_t **kvs = arena_alloc(a, SPAN_MAX_ATTRS * sizeof(*kvs));
	T_(Status) *st = arena_alloc(a, sizeof(*st));
	int r = 0;

	if (!kvs || !st)
		return -ENOMEM;
	t_init(span)(o);
	o->trace_id = (ProtobufCBinaryData){ 16, (uint8_t *)s->trace_id };
	o->span_id = (ProtobufCBinaryData){ 8, (uint8_t *)s->span_id };
	if (s->has_parent)
		o->parent_span_id = (ProtobufCBinaryData){ 8, (uint8_t *)s->parent_span_id };
	o->flags = s->trace_flags | FLAG_HAS_IS_REMOTE | (s->remote_parent ? FLAG_IS_REMOTE : 0);
	o->name = (char *)(s->name && *s->name ? s->name : s->method && *s->method ? s->method
										   : "HTTP");
	o->kind = (T_(Span__SpanKind))s->kind;
	o->start_time_unix_nano = s->start_ns;
	o->end_time_unix_nano = s->end_ns >= s->start_ns ? s->end_ns : s->start_ns;
	o->attributes = kvs;
	if (s->method)
		r = otlp_kv_add(a, kvs, &o->n_attributes, "http.request.method", s->method, 0);
	if (r == 0 && s->path)
		r = otlp_kv_add(a, kvs, &o->n_attributes, "url.path", s->path, 0);
	if (r == 0 && s->scheme)
		r = otlp_kv_add(a, kvs, &o->n_attributes, "url.scheme", s->scheme, 0);
	if (r == 0 && s->server_address)
		r = otlp_kv_add(a, kvs, &o->n_attributes, "server.address", s->server_address, 0);
	if (r == 0 && s->url_full)
		r = otlp_kv_add(a, kvs, &o->n_attributes, "url.full", s->url_full, 0);
	if (r == 0 && s->status_code > 0)
		r = otlp_kv_add(a, kvs, &o->n_attributes, "http.response.status_code", NULL,
				s->status_code);
	if (r < 0)
		return r;
	t_init(status)(st);
	st->code = (T_(Status__StatusCode))status_code(s);
	o->status = st;
	return 0;
}

/* One resource: the spans spans[idx[0..n)], all of the same resource. */
static int enc_resource(struct arena *a, const struct trace_span *all, const size_t *idx, size_t n,
			T_(ResourceSpans) *rs)
{
	const struct trace_span *first = &all[idx[0]];
	Opentelemetry__Proto__Resource__V1__Resource *res = arena_alloc(a, sizeof(*res));
	Opentelemetry__Proto__Common__V1__InstrumentationScope *scope = arena_alloc(a, sizeof(*scope));
	T_(ScopeSpans) *ss = arena_alloc(a, sizeof(*ss)), **pss = arena_alloc(a, sizeof(*pss));
	T_(Span) *sp = arena_alloc(a, n * sizeof(*sp)), **psp = arena_alloc(a, n * sizeof(*psp));
	kv_t **kvs = arena_alloc(a, RESOURCE_MAX_ATTRS * sizeof(*kvs));
	int r;

	if (!res || !scope || !ss || !pss || !sp || !psp || !kvs)
		return -ENOMEM;
	opentelemetry__proto__resource__v1__resource__init(res);
	res->attributes = kvs;
	r = otlp_kv_add(a, kvs, &res->n_attributes, "service.name",
			first->service_name && *first->service_name ? first->service_name
								    : "unknown_service",
			0);
	if (r == 0 && first->host)
		r = otlp_kv_add(a, kvs, &res->n_attributes, "host.name", first->host, 0);
	if (r == 0 && first->pid)
		r = otlp_kv_add(a, kvs, &res->n_attributes, "process.pid", NULL, first->pid);
	for (size_t i = 0; r == 0 && i < n; i++) {
		r = enc_span(a, &all[idx[i]], &sp[i]);
		psp[i] = &sp[i];
	}
	if (r < 0)
		return r;
	opentelemetry__proto__common__v1__instrumentation_scope__init(scope);
	scope->name = "sonde";
	t_init(scope_spans)(ss);
	ss->scope = scope;
	ss->spans = psp;
	ss->n_spans = n;
	pss[0] = ss;
	t_init(resource_spans)(rs);
	rs->resource = res;
	rs->scope_spans = pss;
	rs->n_scope_spans = 1;
	return 0;
}

int otlp_traces_encode(const struct trace_span *spans, size_t n, uint8_t **ret, size_t *ret_len)
{
	Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req;
	struct arena *a;
	T_(ResourceSpans) *rs, **prs;
	size_t nrs = 0, *idx;
	bool *taken;
	int r = 0;

	if (n == 0)
		return -EINVAL;
	a = arena_new();
	if (!a)
		return -ENOMEM;
	rs = arena_alloc(a, n * sizeof(*rs));
	prs = arena_alloc(a, n * sizeof(*prs));
	idx = arena_alloc(a, n * sizeof(*idx));
	taken = arena_alloc(a, n * sizeof(*taken));
	if (!rs || !prs || !idx || !taken) {
		r = -ENOMEM;
		goto cleanup;
	}
	memset(taken, 0, n * sizeof(*taken));
	/* One ResourceSpans per resource, spans in their order. Quadratic in
	 * the number of resources of a request, which is small (processes). */
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		if (taken[i])
			continue;
		for (size_t j = i; j < n; j++)
			if (!taken[j] && same_resource(&spans[i], &spans[j])) {
				taken[j] = true;
				idx[k++] = j;
			}
		r = enc_resource(a, spans, idx, k, &rs[nrs]);
		if (r < 0)
			goto cleanup;
		prs[nrs] = &rs[nrs];
		nrs++;
	}
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(&req);
	req.resource_spans = prs;
	req.n_resource_spans = nrs;
	r = otlp_kv_pack(&req.base, ret, ret_len);
cleanup:
	arena_free(a);
	return r;
}
