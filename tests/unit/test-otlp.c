/* test-otlp.c - the OTLP profiles encoder: a model built with the pm_*
 * builders is encoded, decoded back with protobuf-c, and every table,
 * index, attribute and value is checked against what went in; the same
 * for opentelemetry-proto v1.5.0's layout (otlp_v150.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model.h"
#include "otlp.h"
#include "otlp_profiles_service.pb-c.h"
#include "otlp_trace_service.pb-c.h"
#include "otlp_traces.h"
#include "otlp_v150.h"
#include "otlp_v150_profiles_service.pb-c.h"

#define P_(x) Opentelemetry__Proto__Profiles__V1development__##x
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	req_t;

static req_t *decode(const struct pmodel *m)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	req_t *req;

	assert_int_equal(otlp_encode(m, &buf, &len), 0);
	req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, len, buf);
	free(buf);
	assert_non_null(req);
	return req;
}

static const char *str(const req_t *r, int32_t i)
{
	assert_true(i >= 0 && (size_t)i < r->dictionary->n_string_table);
	return r->dictionary->string_table[i];
}

/* The string value of the attribute at index i, checking its key. */
static const Opentelemetry__Proto__Common__V1__AnyValue *attr(const req_t *r, int32_t i,
							       const char *key)
{
	const P_(KeyValueAndUnit) *kv;

	assert_true(i > 0 && (size_t)i < r->dictionary->n_attribute_table);
	kv = r->dictionary->attribute_table[i];
	assert_string_equal(str(r, kv->key_strindex), key);
	assert_non_null(kv->value);
	return kv->value;
}

static const char *res_str(const Opentelemetry__Proto__Resource__V1__Resource *res,
			   const char *key)
{
	for (size_t i = 0; i < res->n_attributes; i++)
		if (strcmp(res->attributes[i]->key, key) == 0)
			return res->attributes[i]->value->string_value;
	return NULL;
}

static int64_t res_int(const Opentelemetry__Proto__Resource__V1__Resource *res, const char *key)
{
	for (size_t i = 0; i < res->n_attributes; i++)
		if (strcmp(res->attributes[i]->key, key) == 0)
			return res->attributes[i]->value->int_value;
	return -1;
}

/* Two processes, a native stack with an inline chain under a kernel
 * frame, a second stack, thread attributes. */
static void build(struct pmodel *m, uint32_t *ret_st1)
{
	uint8_t id[16] = { 0xab, 0xcd };
	uint32_t mp, f_inl, f_outer, f_main, f_k, l_user, l_main, l_k, st1, st2, p1, p2;
	struct pm_line lines[2];
	struct pm_process proc = { .pid = 100, .start = 4242 };

	assert_int_equal(pm_init(m), 0);
	m->period_ns = 10000000; /* 100 Hz */
	assert_int_equal(pm_mapping(m, id, "/opt/app/bin/app", "0011aabb", 4096, &mp), 0);
	assert_int_equal(pm_function(m, "leaf_inline", NULL, "app.c", &f_inl), 0);
	assert_int_equal(pm_function(m, "leaf_a_compute", NULL, "app.c", &f_outer), 0);
	assert_int_equal(pm_function(m, "main", NULL, "main.c", &f_main), 0);
	assert_int_equal(pm_function(m, "do_syscall_64", NULL, NULL, &f_k), 0);
	lines[0] = (struct pm_line){ f_inl, 12 };
	lines[1] = (struct pm_line){ f_outer, 30 };
	assert_int_equal(pm_location(m, mp + 1, 0x1100, PM_FRAME_NATIVE, lines, 2, &l_user), 0);
	lines[0] = (struct pm_line){ f_main, 7 };
	assert_int_equal(pm_location(m, mp + 1, 0x1200, PM_FRAME_NATIVE, lines, 1, &l_main), 0);
	lines[0] = (struct pm_line){ f_k, 0 };
	assert_int_equal(pm_location(m, 0, 0xffffffff81000010ull, PM_FRAME_KERNEL, lines, 1, &l_k), 0);
	uint32_t s1[] = { l_k, l_user, l_main }, s2[] = { l_main };
	assert_int_equal(pm_stack(m, s1, 3, &st1), 0);
	assert_int_equal(pm_stack(m, s2, 1, &st2), 0);

	assert_int_equal(pm_string(m, "host-a", &proc.host_name), 0);
	assert_int_equal(pm_string(m, "app", &proc.comm), 0);
	assert_int_equal(pm_string(m, "app", &proc.exe_name), 0);
	assert_int_equal(pm_string(m, "/opt/app/bin/app", &proc.exe_path), 0);
	assert_int_equal(pm_string(m,
				   "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				   &proc.container_id), 0);
	assert_int_equal(pm_string(m, "3d4e5f6a-1234-5678-9abc-def012345678", &proc.pod_uid), 0);
	assert_int_equal(pm_string(m, "0f1e2d3c4b5a69788796a5b4c3d2e1f0", &proc.host_id), 0);
	proc.main_mapping = mp + 1;
	assert_int_equal(pm_process(m, &proc, &p1), 0);
	proc = (struct pm_process){ .pid = 200 };
	assert_int_equal(pm_string(m, "host-a", &proc.host_name), 0);
	assert_int_equal(pm_process(m, &proc, &p2), 0);

	struct pm_sample smp = { .stack = st1, .process = p1, .tid = 101, .count = 5,
				 .first_ns = 1000000000, .last_ns = 1900000000 };
	assert_int_equal(pm_string(m, "worker", &smp.thread_name), 0);
	assert_int_equal(pm_sample(m, &smp), 0);
	smp = (struct pm_sample){ .stack = st2, .process = p1, .tid = 100, .count = 1,
				  .first_ns = 1500000000, .last_ns = 1500000000 };
	assert_int_equal(pm_sample(m, &smp), 0);
	smp = (struct pm_sample){ .stack = st2, .process = p2, .count = 3 };
	{
		/* Taken while a traced request was served (Go probes). */
		static const uint8_t span[24] = {0x4b,0xf9,0x2f,0x35,0x77,0xb3,0x4d,0xa6,0xa3,0xce,0x92,0x9d,0x0e,0x0e,0x47,0x36,0x00,0xf0,0x67,0xaa,0x0b,0xa9,0x02,0xb7};

		assert_int_equal(pm_link(m, span, &smp.link), 0);
	}
	assert_int_equal(pm_sample(m, &smp), 0);
	*ret_st1 = st1;
}

static void test_encode_tables(void **state)
{
	struct pmodel m;
	uint32_t st1;
	req_t *r;
	const P_(ProfilesDictionary) *d;

	(void)state;
	build(&m, &st1);
	r = decode(&m);
	d = r->dictionary;
	assert_non_null(d);
	/* Index 0 of every table is the empty entry. */
	assert_string_equal(d->string_table[0], "");
	assert_true(d->n_mapping_table == m.n_mappings + 1);
	assert_true(d->n_location_table == m.n_locations + 1);
	assert_true(d->n_function_table == m.n_functions + 1);
	assert_true(d->n_stack_table == m.n_stacks + 1);
	assert_true(d->n_link_table == 2);
	assert_int_equal(d->link_table[0]->trace_id.len, 16);
	assert_int_equal(d->link_table[0]->span_id.len, 8);
	assert_int_equal(d->link_table[1]->trace_id.data[0], 0x4b);
	assert_int_equal(d->link_table[1]->trace_id.data[15], 0x36);
	assert_int_equal(d->link_table[1]->span_id.data[0], 0x00);
	assert_int_equal(d->link_table[1]->span_id.data[7], 0xb7);
	assert_int_equal(d->mapping_table[0]->filename_strindex, 0);
	assert_int_equal(d->location_table[0]->n_lines, 0);
	assert_int_equal(d->stack_table[0]->n_location_indices, 0);
	assert_int_equal(d->attribute_table[0]->key_strindex, 0);

	/* Mapping: path and both build IDs. */
	const P_(Mapping) *mp = d->mapping_table[1];
	assert_string_equal(str(r, mp->filename_strindex), "/opt/app/bin/app");
	assert_int_equal(mp->memory_limit, 4096);
	assert_int_equal(mp->n_attribute_indices, 2);
	assert_string_equal(attr(r, mp->attribute_indices[0], "process.executable.build_id.gnu")->string_value,
			    "0011aabb");
	assert_string_equal(attr(r, mp->attribute_indices[1], "process.executable.build_id.htlhash")->string_value,
			    "abcd0000000000000000000000000000");

	/* Stack 1: kernel frame, the inline chain, main; leaf first. */
	const P_(Stack) *st = d->stack_table[st1 + 1];
	assert_int_equal(st->n_location_indices, 3);
	const P_(Location) *lk = d->location_table[st->location_indices[0]];
	const P_(Location) *lu = d->location_table[st->location_indices[1]];
	const P_(Location) *lm = d->location_table[st->location_indices[2]];
	assert_int_equal(lk->mapping_index, 0);
	assert_true(lk->address == 0xffffffff81000010ull);
	assert_string_equal(attr(r, lk->attribute_indices[0], "profile.frame.type")->string_value,
			    "kernel");
	assert_string_equal(str(r, d->function_table[lk->lines[0]->function_index]->name_strindex),
			    "do_syscall_64");
	assert_int_equal(lu->mapping_index, 1);
	assert_int_equal(lu->address, 0x1100);
	assert_string_equal(attr(r, lu->attribute_indices[0], "profile.frame.type")->string_value,
			    "native");
	assert_int_equal(lu->n_lines, 2);
	const P_(Function) *fi = d->function_table[lu->lines[0]->function_index];
	const P_(Function) *fo = d->function_table[lu->lines[1]->function_index];
	assert_string_equal(str(r, fi->name_strindex), "leaf_inline");
	assert_string_equal(str(r, fi->filename_strindex), "app.c");
	assert_int_equal(lu->lines[0]->line, 12);
	assert_string_equal(str(r, fo->name_strindex), "leaf_a_compute");
	assert_int_equal(lu->lines[1]->line, 30);
	assert_string_equal(str(r, d->function_table[lm->lines[0]->function_index]->name_strindex),
			    "main");
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);
	pm_free(&m);
}

static void test_encode_resources_samples(void **state)
{
	struct pmodel m;
	uint32_t st1;
	req_t *r;
	int64_t total = 0;

	(void)state;
	build(&m, &st1);
	r = decode(&m);
	assert_int_equal(r->n_resource_profiles, 2);
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const P_(ResourceProfiles) *rp = r->resource_profiles[i];
		const Opentelemetry__Proto__Resource__V1__Resource *res = rp->resource;
		const P_(Profile) *pr;
		int64_t pid = res_int(res, "process.pid");

		assert_string_equal(res_str(res, "host.name"), "host-a");
		assert_int_equal(rp->n_scope_profiles, 1);
		assert_int_equal(rp->scope_profiles[0]->n_profiles, 1);
		pr = rp->scope_profiles[0]->profiles[0];
		/* Counts, each worth a period of CPU time. */
		assert_string_equal(str(r, pr->sample_type->type_strindex), "samples");
		assert_string_equal(str(r, pr->sample_type->unit_strindex), "count");
		assert_string_equal(str(r, pr->period_type->type_strindex), "cpu");
		assert_string_equal(str(r, pr->period_type->unit_strindex), "nanoseconds");
		assert_int_equal(pr->period, 10000000);
		assert_int_equal(pr->time_unix_nano, 1000000000);
		assert_int_equal(pr->duration_nano, 900000000);
		assert_int_equal(pr->profile_id.len, 16);
		assert_string_equal(pr->original_payload_format, "");
		/* One shape per Profile: all with timestamps, or none. */
		for (size_t k = 0; k < pr->n_samples; k++) {
			const P_(Sample) *s = pr->samples[k];

			assert_int_equal(s->n_timestamps_unix_nano ? 1 : 0,
					 pr->samples[0]->n_timestamps_unix_nano ? 1 : 0);
			assert_true(s->n_timestamps_unix_nano == 0 ||
				    s->n_timestamps_unix_nano == s->n_values);
			for (size_t v = 0; v < s->n_values; v++)
				total += s->values[v];
		}
		if (pid == 100) {
			assert_string_equal(res_str(res, "process.executable.name"), "app");
			assert_string_equal(res_str(res, "process.executable.path"), "/opt/app/bin/app");
			assert_non_null(res_str(res, "container.id"));
			assert_string_equal(res_str(res, "k8s.pod.uid"),
					    "3d4e5f6a-1234-5678-9abc-def012345678");
			assert_string_equal(res_str(res, "host.id"), "0f1e2d3c4b5a69788796a5b4c3d2e1f0");
			assert_null(res_str(res, "process.command_line"));
			assert_int_equal(pr->n_samples, 2);
			const P_(Sample) *s = pr->samples[0];
			assert_int_equal(s->stack_index, st1 + 1);
			/* 5 samples: the first at first_ns, the other 4 at last_ns. */
			assert_int_equal(s->n_values, 2);
			assert_int_equal(s->values[0], 1);
			assert_int_equal(s->values[1], 4);
			assert_int_equal(s->timestamps_unix_nano[0], 1000000000);
			assert_int_equal(s->timestamps_unix_nano[1], 1900000000);
			assert_int_equal(s->n_attribute_indices, 2);
			assert_int_equal(attr(r, s->attribute_indices[0], "thread.id")->int_value, 101);
			assert_string_equal(attr(r, s->attribute_indices[1], "thread.name")->string_value,
					    "worker");
			assert_int_equal(s->link_index, 0);
			assert_int_equal(pr->samples[1]->n_values, 1);
			assert_int_equal(pr->samples[1]->n_timestamps_unix_nano, 1);
		} else {
			assert_int_equal(pid, 200);
			assert_null(res_str(res, "container.id"));
			assert_null(res_str(res, "k8s.pod.uid"));
			assert_null(res_str(res, "host.id"));
			assert_null(res_str(res, "process.executable.path"));
			assert_int_equal(pr->n_samples, 1);
			/* No time known: one value, no timestamps. */
			assert_int_equal(pr->samples[0]->n_values, 1);
			assert_int_equal(pr->samples[0]->values[0], 3);
			assert_int_equal(pr->samples[0]->n_timestamps_unix_nano, 0);
			assert_int_equal(pr->samples[0]->n_attribute_indices, 0);
			assert_int_equal(pr->samples[0]->link_index, 1);
		}
	}
	assert_int_equal(total, (int64_t)m.total);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);
	pm_free(&m);
}

/* An empty model still makes a valid request (tables with their empty
 * entries, no resources); without a period samples are counts. */
static void test_encode_empty_and_no_period(void **state)
{
	struct pmodel m;
	struct pm_process p = { .pid = 1 };
	uint32_t st, proc;
	req_t *r;

	(void)state;
	assert_int_equal(pm_init(&m), 0);
	r = decode(&m);
	assert_int_equal(r->n_resource_profiles, 0);
	assert_int_equal(r->dictionary->n_mapping_table, 1);
	assert_int_equal(r->dictionary->n_stack_table, 1);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);

	assert_int_equal(pm_stack(&m, NULL, 0, &st), 0);
	assert_int_equal(pm_process(&m, &p, &proc), 0);
	assert_int_equal(pm_sample(&m, &(struct pm_sample){ .stack = st, .process = proc, .count = 4 }),
			 0);
	r = decode(&m);
	const P_(Profile) *pr = r->resource_profiles[0]->scope_profiles[0]->profiles[0];
	assert_string_equal(str(r, pr->sample_type->type_strindex), "samples");
	assert_string_equal(str(r, pr->sample_type->unit_strindex), "count");
	assert_int_equal(pr->samples[0]->values[0], 4);
	assert_null(pr->period_type); /* no rate known: no period */
	assert_int_equal(pr->period, 0);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);
	pm_free(&m);
}

/* A process with samples of both shapes: one without a time (count 2),
 * two with (counts 3 and 1). */
static void build_shapes(struct pmodel *mp)
{
	struct pmodel m;
	struct pm_process p = { .pid = 7 };
	uint32_t st, proc;

	assert_int_equal(pm_init(&m), 0);
	m.period_ns = 1000000;
	assert_int_equal(pm_stack(&m, NULL, 0, &st), 0);
	assert_int_equal(pm_process(&m, &p, &proc), 0);
	assert_int_equal(pm_sample(&m, &(struct pm_sample){ .stack = st, .process = proc, .count = 2 }),
			 0);
	assert_int_equal(pm_sample(&m, &(struct pm_sample){ .stack = st, .process = proc, .tid = 8,
							    .count = 3, .first_ns = 5, .last_ns = 9 }),
			 0);
	assert_int_equal(pm_sample(&m, &(struct pm_sample){ .stack = st, .process = proc, .tid = 9,
							    .count = 1, .first_ns = 6, .last_ns = 6 }),
			 0);
	*mp = m;
}

/* A process with samples of both shapes (with and without times) gets a
 * Profile per shape, timed first; together they hold every sample. */
static void test_encode_one_shape_per_profile(void **state)
{
	struct pmodel m;
	req_t *r;
	const P_(ScopeProfiles) *sp;

	(void)state;
	build_shapes(&m);
	r = decode(&m);
	assert_int_equal(r->n_resource_profiles, 1);
	sp = r->resource_profiles[0]->scope_profiles[0];
	assert_int_equal(sp->n_profiles, 2);
	assert_int_equal(sp->profiles[0]->n_samples, 2);
	for (size_t k = 0; k < 2; k++) {
		const P_(Sample) *s = sp->profiles[0]->samples[k];

		assert_true(s->n_timestamps_unix_nano > 0);
		assert_int_equal(s->n_timestamps_unix_nano, s->n_values);
	}
	assert_int_equal(sp->profiles[1]->n_samples, 1);
	assert_int_equal(sp->profiles[1]->samples[0]->n_values, 1);
	assert_int_equal(sp->profiles[1]->samples[0]->values[0], 2);
	assert_int_equal(sp->profiles[1]->samples[0]->n_timestamps_unix_nano, 0);
	for (size_t j = 0; j < 2; j++) {
		assert_string_equal(str(r, sp->profiles[j]->sample_type->type_strindex), "samples");
		assert_int_equal(sp->profiles[j]->period, 1000000);
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);
	pm_free(&m);
}

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest treq_t;

static const Opentelemetry__Proto__Common__V1__AnyValue *kv_get(
	Opentelemetry__Proto__Common__V1__KeyValue **kvs, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kvs[i]->key, key))
			return kvs[i]->value;
	return NULL;
}

/* Spans: grouped into resources by (service, host, pid), with the HTTP
 * semantic-convention attributes, kinds, parent, flags and status. */
static void test_encode_traces(void **state)
{
	struct trace_span sp[3] = {
		{ .trace_id = { 0x4b, [15] = 0x36 }, .span_id = { 1, [7] = 2 }, .kind = TRACE_SPAN_SERVER,
		  .start_ns = 1000, .end_ns = 5000, .service_name = "shop", .host = "node-1", .pid = 7,
		  .method = "GET", .path = "/users", .status_code = 503, .trace_flags = 1,
		  .parent_span_id = { 9, [7] = 9 }, .has_parent = true, .remote_parent = true,
		  .name = "GET /users" },
		{ .trace_id = { 0x4b, [15] = 0x36 }, .span_id = { 3 }, .kind = TRACE_SPAN_CLIENT,
		  .start_ns = 2000, .end_ns = 3000, .service_name = "shop", .host = "node-1", .pid = 7,
		  .method = "POST", .url_full = "http://db:80/q", .server_address = "db", .scheme = "http",
		  .path = "/q", .status_code = 404, .parent_span_id = { 1, [7] = 2 }, .has_parent = true },
		{ .trace_id = { 0x77 }, .span_id = { 4 }, .kind = TRACE_SPAN_SERVER, .start_ns = 10,
		  .end_ns = 20, .host = "node-1", .pid = 8, .method = "GET", .path = "/", .status_code = 200 },
	};
	uint8_t *buf = NULL;
	size_t len = 0;
	treq_t *r;

	(void)state;
	assert_int_equal(otlp_traces_encode(sp, 0, &buf, &len), -EINVAL);
	assert_int_equal(otlp_traces_encode(sp, 3, &buf, &len), 0);
	r = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len,
											      buf);
	assert_non_null(r);
	assert_int_equal(r->n_resource_spans, 2);
	{
		const Opentelemetry__Proto__Resource__V1__Resource *res = r->resource_spans[0]->resource;
		const Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = r->resource_spans[0]->scope_spans[0];
		const Opentelemetry__Proto__Trace__V1__Span *s0 = ss->spans[0], *s1 = ss->spans[1];

		assert_string_equal(kv_get(res->attributes, res->n_attributes, "service.name")->string_value,
				    "shop");
		assert_int_equal(kv_get(res->attributes, res->n_attributes, "process.pid")->int_value, 7);
		assert_int_equal(ss->n_spans, 2);
		assert_string_equal(ss->scope->name, "sonde");
		assert_int_equal(s0->trace_id.len, 16);
		assert_int_equal(s0->trace_id.data[15], 0x36);
		assert_int_equal(s0->span_id.len, 8);
		assert_int_equal(s0->parent_span_id.len, 8);
		assert_int_equal(s0->parent_span_id.data[0], 9);
		assert_int_equal(s0->flags, 0x301); /* sampled, parent is remote */
		assert_string_equal(s0->name, "GET /users");
		assert_int_equal(s0->kind, OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER);
		assert_int_equal(s0->start_time_unix_nano, 1000);
		assert_int_equal(s0->end_time_unix_nano, 5000);
		assert_string_equal(kv_get(s0->attributes, s0->n_attributes, "http.request.method")->string_value,
				    "GET");
		assert_string_equal(kv_get(s0->attributes, s0->n_attributes, "url.path")->string_value,
				    "/users");
		assert_int_equal(kv_get(s0->attributes, s0->n_attributes,
					"http.response.status_code")->int_value, 503);
		assert_null(kv_get(s0->attributes, s0->n_attributes, "url.full"));
		assert_int_equal(s0->status->code,
				 OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR);
		assert_int_equal(s1->kind, OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_CLIENT);
		assert_string_equal(s1->name, "POST"); /* no name given: the method */
		assert_int_equal(s1->flags, 0x100);    /* not sampled, parent is local */
		assert_string_equal(kv_get(s1->attributes, s1->n_attributes, "url.full")->string_value,
				    "http://db:80/q");
		assert_string_equal(kv_get(s1->attributes, s1->n_attributes, "server.address")->string_value,
				    "db");
		/* A client's 4xx is an error, a server's is not. */
		assert_int_equal(s1->status->code,
				 OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR);
	}
	{
		const Opentelemetry__Proto__Resource__V1__Resource *res = r->resource_spans[1]->resource;
		const Opentelemetry__Proto__Trace__V1__Span *s = r->resource_spans[1]->scope_spans[0]->spans[0];

		assert_string_equal(kv_get(res->attributes, res->n_attributes, "service.name")->string_value,
				    "unknown_service");
		assert_int_equal(s->parent_span_id.len, 0);
		assert_int_equal(s->status->code,
				 OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_UNSET);
	}
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r, NULL);
	free(buf);
}

/* opentelemetry-proto v1.5.0's layout: each Profile has its own tables. */
#define V_(x) Otlp150__Profiles__V1development__##x
typedef Otlp150__Collector__Profiles__V1development__ExportProfilesServiceRequest vreq_t;

static vreq_t *decode_v150(const struct pmodel *m)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	vreq_t *req;

	assert_int_equal(otlp_v150_encode(m, &buf, &len), 0);
	req = otlp150__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, len, buf);
	free(buf);
	assert_non_null(req);
	return req;
}

static const char *vstr(const V_(Profile) *p, int32_t i)
{
	assert_true(i >= 0 && (size_t)i < p->n_string_table);
	return p->string_table[i];
}

/* The attribute at index i of p, checking its key. */
static const Opentelemetry__Proto__Common__V1__AnyValue *vattr(const V_(Profile) *p, int32_t i,
								const char *key)
{
	assert_true(i >= 0 && (size_t)i < p->n_attribute_table);
	assert_string_equal(p->attribute_table[i]->key, key);
	return p->attribute_table[i]->value;
}

/* The location at position k of sample s's stack. */
static const V_(Location) *vloc(const V_(Profile) *p, const V_(Sample) *s, int k)
{
	int32_t i;

	assert_true(k < s->locations_length);
	assert_true(s->locations_start_index >= 0 &&
		    (size_t)(s->locations_start_index + s->locations_length) <= p->n_location_indices);
	i = p->location_indices[s->locations_start_index + k];
	assert_true(i >= 0 && (size_t)i < p->n_location_table);
	return p->location_table[i];
}

static const char *vfunc(const V_(Profile) *p, const P_(Line) *ln)
{
	assert_true(ln->function_index >= 0 && (size_t)ln->function_index < p->n_function_table);
	return vstr(p, p->function_table[ln->function_index]->name_strindex);
}

static void test_v150_process_with_stacks(const V_(Profile) *pr, uint32_t st1)
{
	const V_(Sample) *s = pr->sample[0];
	const V_(Location) *lk, *lu, *lm;
	const V_(Mapping) *mp;

	(void)st1;
	assert_int_equal(pr->n_sample, 2);
	/* One value per sample type: the count, at the first and last time. */
	assert_int_equal(s->n_value, 1);
	assert_int_equal(s->value[0], 5);
	assert_int_equal(s->n_timestamps_unix_nano, 2);
	assert_int_equal(s->timestamps_unix_nano[0], 1000000000);
	assert_int_equal(s->timestamps_unix_nano[1], 1900000000);
	assert_int_equal(s->optional_link_index_case, 0);
	assert_int_equal(s->n_attribute_indices, 2);
	assert_int_equal(vattr(pr, s->attribute_indices[0], "thread.id")->int_value, 101);
	assert_string_equal(vattr(pr, s->attribute_indices[1], "thread.name")->string_value, "worker");
	/* Kernel frame, the inline chain, main; leaf first. */
	assert_int_equal(s->locations_length, 3);
	lk = vloc(pr, s, 0);
	lu = vloc(pr, s, 1);
	lm = vloc(pr, s, 2);
	assert_int_equal(lk->optional_mapping_index_case, 0);
	assert_true(lk->address == 0xffffffff81000010ull);
	assert_string_equal(vattr(pr, lk->attribute_indices[0], "profile.frame.type")->string_value,
			    "kernel");
	assert_string_equal(vfunc(pr, lk->line[0]), "do_syscall_64");
	assert_int_equal(lu->optional_mapping_index_case,
			 OTLP150__PROFILES__V1DEVELOPMENT__LOCATION__OPTIONAL_MAPPING_INDEX_MAPPING_INDEX);
	assert_true(lu->mapping_index >= 0 && (size_t)lu->mapping_index < pr->n_mapping_table);
	mp = pr->mapping_table[lu->mapping_index];
	assert_string_equal(vstr(pr, mp->filename_strindex), "/opt/app/bin/app");
	assert_int_equal(mp->memory_limit, 4096);
	assert_int_equal(mp->n_attribute_indices, 2);
	assert_string_equal(vattr(pr, mp->attribute_indices[0], "process.executable.build_id.gnu")->string_value,
			    "0011aabb");
	assert_string_equal(vattr(pr, mp->attribute_indices[1], "process.executable.build_id.htlhash")->string_value,
			    "abcd0000000000000000000000000000");
	assert_true(mp->has_functions && mp->has_filenames && mp->has_line_numbers && mp->has_inline_frames);
	assert_int_equal(lu->address, 0x1100);
	assert_string_equal(vattr(pr, lu->attribute_indices[0], "profile.frame.type")->string_value,
			    "native");
	assert_int_equal(lu->n_line, 2);
	assert_string_equal(vfunc(pr, lu->line[0]), "leaf_inline");
	assert_string_equal(vstr(pr, pr->function_table[lu->line[0]->function_index]->filename_strindex),
			    "app.c");
	assert_int_equal(lu->line[0]->line, 12);
	assert_string_equal(vfunc(pr, lu->line[1]), "leaf_a_compute");
	assert_int_equal(lu->line[1]->line, 30);
	assert_string_equal(vfunc(pr, lm->line[0]), "main");
	/* The second sample (stack: main) has one timestamp, its own slice. */
	s = pr->sample[1];
	assert_int_equal(s->n_value, 1);
	assert_int_equal(s->value[0], 1);
	assert_int_equal(s->n_timestamps_unix_nano, 1);
	assert_int_equal(s->locations_length, 1);
	assert_ptr_equal(vloc(pr, s, 0), lm);
	/* Only what the samples use: one mapping, four functions, three
	 * locations, one frame type attribute per type. */
	assert_int_equal(pr->n_mapping_table, 1);
	assert_int_equal(pr->n_location_table, 3);
	assert_int_equal(pr->n_function_table, 4);
	assert_int_equal(pr->n_link_table, 0);
}

static void test_encode_v150(void **state)
{
	struct pmodel m;
	uint32_t st1;
	vreq_t *r;
	int64_t total = 0;

	(void)state;
	build(&m, &st1);
	r = decode_v150(&m);
	assert_int_equal(r->n_resource_profiles, 2);
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const V_(ResourceProfiles) *rp = r->resource_profiles[i];
		const Opentelemetry__Proto__Resource__V1__Resource *res = rp->resource;
		const V_(Profile) *pr;

		assert_string_equal(res_str(res, "host.name"), "host-a");
		assert_int_equal(rp->n_scope_profiles, 1);
		assert_string_equal(rp->scope_profiles[0]->scope->name, "sonde");
		assert_int_equal(rp->scope_profiles[0]->n_profiles, 1);
		pr = rp->scope_profiles[0]->profiles[0];
		assert_string_equal(pr->string_table[0], "");
		assert_int_equal(pr->n_sample_type, 1);
		assert_string_equal(vstr(pr, pr->sample_type[0]->type_strindex), "samples");
		assert_string_equal(vstr(pr, pr->sample_type[0]->unit_strindex), "count");
		assert_int_equal(pr->sample_type[0]->aggregation_temporality,
				 OTLP150__PROFILES__V1DEVELOPMENT__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_DELTA);
		assert_string_equal(vstr(pr, pr->period_type->type_strindex), "cpu");
		assert_string_equal(vstr(pr, pr->period_type->unit_strindex), "nanoseconds");
		assert_int_equal(pr->period, 10000000);
		assert_int_equal(pr->time_nanos, 1000000000);
		assert_int_equal(pr->duration_nanos, 900000000);
		assert_int_equal(pr->profile_id.len, 16);
		assert_string_equal(pr->original_payload_format, "");
		for (size_t k = 0; k < pr->n_sample; k++)
			total += pr->sample[k]->value[0];
		if (res_int(res, "process.pid") == 100) {
			assert_string_equal(res_str(res, "process.executable.path"), "/opt/app/bin/app");
			test_v150_process_with_stacks(pr, st1);
			continue;
		}
		assert_int_equal(res_int(res, "process.pid"), 200);
		assert_int_equal(pr->n_sample, 1);
		/* No time known: no timestamps; in a span: a link. */
		assert_int_equal(pr->sample[0]->value[0], 3);
		assert_int_equal(pr->sample[0]->n_timestamps_unix_nano, 0);
		assert_int_equal(pr->sample[0]->n_attribute_indices, 0);
		assert_int_equal(pr->sample[0]->optional_link_index_case,
				 OTLP150__PROFILES__V1DEVELOPMENT__SAMPLE__OPTIONAL_LINK_INDEX_LINK_INDEX);
		assert_int_equal(pr->n_link_table, 1);
		assert_int_equal(pr->sample[0]->link_index, 0);
		assert_int_equal(pr->link_table[0]->trace_id.len, 16);
		assert_int_equal(pr->link_table[0]->trace_id.data[0], 0x4b);
		assert_int_equal(pr->link_table[0]->span_id.len, 8);
		assert_int_equal(pr->link_table[0]->span_id.data[7], 0xb7);
	}
	assert_int_equal(total, (int64_t)m.total);
	otlp150__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);
	pm_free(&m);
}

/* v1.5.0: a Profile per shape as in the current layout; an empty model
 * makes an empty request. */
static void test_encode_v150_shapes_and_empty(void **state)
{
	struct pmodel m;
	vreq_t *r;
	const V_(ScopeProfiles) *sp;

	(void)state;
	assert_int_equal(pm_init(&m), 0);
	r = decode_v150(&m);
	assert_int_equal(r->n_resource_profiles, 0);
	otlp150__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);
	pm_free(&m);
	build_shapes(&m);
	r = decode_v150(&m);
	sp = r->resource_profiles[0]->scope_profiles[0];
	/* Timed first: count 3 at its first and last time, count 1 at its
	 * time; then the untimed one. One value each. */
	assert_int_equal(sp->n_profiles, 2);
	assert_int_equal(sp->profiles[0]->n_sample, 2);
	assert_int_equal(sp->profiles[0]->sample[0]->value[0], 3);
	assert_int_equal(sp->profiles[0]->sample[0]->n_timestamps_unix_nano, 2);
	assert_int_equal(sp->profiles[0]->sample[0]->timestamps_unix_nano[1], 9);
	assert_int_equal(sp->profiles[0]->sample[1]->value[0], 1);
	assert_int_equal(sp->profiles[0]->sample[1]->n_timestamps_unix_nano, 1);
	assert_int_equal(sp->profiles[1]->n_sample, 1);
	assert_int_equal(sp->profiles[1]->sample[0]->n_value, 1);
	assert_int_equal(sp->profiles[1]->sample[0]->value[0], 2);
	assert_int_equal(sp->profiles[1]->sample[0]->n_timestamps_unix_nano, 0);
	assert_int_equal(sp->profiles[1]->period, 1000000);
	/* The empty stack: an empty slice. */
	assert_int_equal(sp->profiles[1]->sample[0]->locations_length, 0);
	otlp150__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);
	pm_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_tables),
		cmocka_unit_test(test_encode_resources_samples),
		cmocka_unit_test(test_encode_empty_and_no_period),
		cmocka_unit_test(test_encode_one_shape_per_profile),
		cmocka_unit_test(test_encode_traces),
		cmocka_unit_test(test_encode_v150),
		cmocka_unit_test(test_encode_v150_shapes_and_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
