/* spans.c - the spans of the Go probes (docs/go-probes.md): the records
 * sensors forward (ProbeEvents) are decoded here (probes/go_http_decode.c,
 * every byte checked), kept in a bounded ring for the Spans method and
 * `sonde spans`, and handed to the OTLP traces export. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access_scope.h"
#include "go_http_decode.h"
#include "log.h"
#include "otlp_exporter.h"
#include "otlp_traces.h"
#include "spans.h"
#include "symbols.pb-c.h"

#define SPANS_KEPT 10000
#define SPANS_REPLY_DEFAULT 100

struct stored_span {
	struct go_http_fields f;
	uint64_t start_unix_ns, end_unix_ns;
	uint32_t uid; /* the process's owner: who may see the span (access.c) */
	char service[128];
	char host[128];
	char server_address[sizeof(((struct go_http_fields *)0)->host)];
	char url_full[sizeof(((struct go_http_fields *)0)->scheme) +
		      sizeof(((struct go_http_fields *)0)->host) +
		      sizeof(((struct go_http_fields *)0)->path) + 4];
};

struct spans {
	const struct api_core *core;
	/* SPANS_KEPT, a ring; allocated with the first record (18 MiB that a
	 * symbolizer whose sensors run no Go probes never needs). */
	struct stored_span *v;
	size_t next, n;
	uint64_t received, rejected, lost;
};

struct spans *spans_new(const struct api_core *core)
{
	struct spans *st = calloc(1, sizeof(*st));

	if (st)
		st->core = core;
	return st;
}

void spans_free(struct spans *st)
{
	if (!st)
		return;
	free(st->v);
	free(st);
}

/* host without its port: "a:80" -> "a", "[::1]:80" -> "::1". */
static void strip_port(char *dst, size_t cap, const char *host)
{
	const char *end = host + strlen(host), *colon;

	if (host[0] == '[' && (colon = strchr(host, ']'))) {
		host++;
		end = colon;
	} else if ((colon = strchr(host, ':')) && !strchr(colon + 1, ':')) {
		end = colon;
	}
	snprintf(dst, cap, "%.*s", (int)(end - host), host);
}

static void to_trace_span(const struct stored_span *s, struct trace_span *t)
{
	const struct go_http_fields *f = &s->f;

	memset(t, 0, sizeof(*t));
	memcpy(t->trace_id, f->trace_id, 16);
	memcpy(t->span_id, f->span_id, 8);
	memcpy(t->parent_span_id, f->parent_span_id, 8);
	t->has_parent = f->has_parent;
	t->remote_parent = f->remote_parent;
	t->trace_flags = f->sampled ? 1 : 0;
	t->kind = f->kind == SONDE_GO_HTTP_CLIENT ? TRACE_SPAN_CLIENT : TRACE_SPAN_SERVER;
	t->start_ns = s->start_unix_ns;
	t->end_ns = s->end_unix_ns;
	t->name = f->method;
	t->service_name = s->service;
	t->host = s->host;
	t->pid = f->pid;
	t->method = f->method;
	t->path = f->path;
	t->scheme = f->scheme;
	t->server_address = s->server_address;
	t->url_full = s->url_full;
	t->status_code = f->status_code;
}

void spans_add_records(struct spans *st, const char *host, int64_t mono_to_unix_ns,
		       const ProtobufCBinaryData *recs, size_t n, uint64_t lost,
		       const char *(*service_of)(void *ctx, uint32_t pid, uint32_t *ret_uid),
		       void *ctx)
{
	st->lost += lost;
	if (n && !st->v && !(st->v = calloc(SPANS_KEPT, sizeof(*st->v)))) {
		/* Counted as lost, which Status shows, and said once. */
		if (st->lost == lost)
			log_warn("sensor %.100s: no memory for the spans ring; %zu spans lost", host, n);
		st->lost += n;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct stored_span *s = &st->v[st->next];
		struct trace_span t;
		const char *why, *svc_name;

		if (go_http_decode(recs[i].data, recs[i].len, &s->f, &why) < 0) {
			if (st->rejected++ == 0)
				log_warn("sensor %.100s: a Go probe record rejected (%s); counting the rest",
					 host, why);
			continue;
		}
		s->start_unix_ns = (uint64_t)((int64_t)s->f.start_ns + mono_to_unix_ns);
		s->end_unix_ns = (uint64_t)((int64_t)s->f.end_ns + mono_to_unix_ns);
		svc_name = service_of(ctx, s->f.pid, &s->uid);
		snprintf(s->service, sizeof(s->service), "%s", svc_name ? svc_name : "");
		snprintf(s->host, sizeof(s->host), "%s", host);
		strip_port(s->server_address, sizeof(s->server_address), s->f.host);
		s->url_full[0] = '\0';
		if (s->f.kind == SONDE_GO_HTTP_CLIENT && s->f.host[0])
			snprintf(s->url_full, sizeof(s->url_full), "%s://%s%s",
				 s->f.scheme[0] ? s->f.scheme : "http", s->f.host, s->f.path);
		st->next = (st->next + 1) % SPANS_KEPT;
		if (st->n < SPANS_KEPT)
			st->n++;
		st->received++;
		to_trace_span(s, &t);
		otlp_exporter_add_span(st->core->otlp, &t);
	}
}

void spans_call(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	const Sonde__V1__SpansRequest *q = (const Sonde__V1__SpansRequest *)msg;
	struct spans *st = ctx;
	Sonde__V1__SpansResponse r = SONDE__V1__SPANS_RESPONSE__INIT;
	size_t limit = q->limit ? q->limit : SPANS_REPLY_DEFAULT, k = 0;
	Sonde__V1__SpanInfo *info = NULL, **pinfo = NULL;
	struct access_scope scope;

	access_scope_of(call, &scope);
	if (limit > SPANS_KEPT)
		limit = SPANS_KEPT;
	if (limit > st->n)
		limit = st->n;
	info = calloc(limit ? limit : 1, sizeof(*info));
	pinfo = calloc(limit ? limit : 1, sizeof(*pinfo));
	if (!info || !pinfo) {
		rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
		goto cleanup;
	}
	/* Newest first. */
	for (size_t i = 0; i < st->n && k < limit; i++) {
		const struct stored_span *s = &st->v[(st->next + SPANS_KEPT - 1 - i) % SPANS_KEPT];
		Sonde__V1__SpanInfo *o = &info[k];

		if ((q->pid && s->f.pid != q->pid) || !access_sees_uid(&scope, s->uid))
			continue;
		sonde__v1__span_info__init(o);
		o->trace_id = (ProtobufCBinaryData){ 16, (uint8_t *)s->f.trace_id };
		o->span_id = (ProtobufCBinaryData){ 8, (uint8_t *)s->f.span_id };
		if (s->f.has_parent)
			o->parent_span_id = (ProtobufCBinaryData){ 8, (uint8_t *)s->f.parent_span_id };
		o->remote_parent = s->f.remote_parent;
		o->kind = s->f.kind == SONDE_GO_HTTP_CLIENT ? "client" : "server";
		o->service_name = (char *)s->service;
		o->host = (char *)s->host;
		o->pid = s->f.pid;
		o->tid = s->f.tid;
		o->start_unix_ns = s->start_unix_ns;
		o->end_unix_ns = s->end_unix_ns;
		o->method = (char *)s->f.method;
		o->path = (char *)s->f.path;
		o->server_address = (char *)s->server_address;
		o->scheme = (char *)s->f.scheme;
		o->url_full = (char *)s->url_full;
		o->status_code = s->f.status_code;
		pinfo[k++] = o;
	}
	r.spans = pinfo;
	r.n_spans = k;
	r.spans_received = st->received;
	r.records_rejected = st->rejected;
	r.records_lost = st->lost;
	rpc_call_finish(call, RPC_OK, NULL, &r.base);
cleanup:
	free(info);
	free(pinfo);
}
