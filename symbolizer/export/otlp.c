/* otlp.c - a profile model as one OTLP ExportProfilesServiceRequest (see
 * otlp.h). The model's tables map 1:1 onto the dictionary's, shifted by
 * one because OTLP reserves index 0 of every table for the empty entry;
 * the string table is the model's (its index 0 is "" too) plus the few
 * names this file adds (attribute keys, units). Everything the request
 * points to lives in one arena, freed once the bytes are packed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "hmap.h"
#include "otlp.h"
#include "otlp_kv.h"
#include "otlp_plan.h"
#include "otlp_profiles_service.pb-c.h"

#define P_(x) Opentelemetry__Proto__Profiles__V1development__##x
#define p_init(x) opentelemetry__proto__profiles__v1development__##x##__init

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	otlp_request;
typedef Opentelemetry__Proto__Resource__V1__Resource otlp_resource;

struct enc {
	const struct pmodel *m;
	struct arena *a;
	struct otlp_vec strings;
	struct otlp_vec attrs; /* of KeyValueAndUnit */
	struct otlp_plan plan;
	struct hmap *sample_attrs; /* "i"+tid / "n"+string -> attribute index */
	/* string indexes of the names this file adds */
	int32_t k_frame_type, k_build_gnu, k_build_htl, k_tid, k_tname;
	struct otlp_plan_types types;
	int32_t s_type, s_unit, s_ptype, s_punit; /* types' strings */
	int32_t frame_attr[PM_N_FRAME_TYPES];
};

/* Appends s (borrowed: a model string or arena memory) to the string
 * table; its index in *ret. */
static int add_string(struct enc *e, char *s, int32_t *ret)
{
	return otlp_vec_push(&e->strings, s, ret);
}

static int add_const(struct enc *e, const char *s, int32_t *ret)
{
	char *copy = arena_strdup(e->a, s);

	return copy ? add_string(e, copy, ret) : -ENOMEM;
}

/* Adds an attribute: a string value (s != NULL) or an integer. */
static int add_attr(struct enc *e, int32_t key, const char *s, int64_t v, int32_t *ret)
{
	P_(KeyValueAndUnit) *kv = arena_alloc(e->a, sizeof(*kv));

	if (!kv)
		return -ENOMEM;
	p_init(key_value_and_unit)(kv);
	kv->key_strindex = key;
	/* s is borrowed from the model or constant: packing only reads it. */
	kv->value = otlp_kv_value(e->a, s, v);
	if (!kv->value)
		return -ENOMEM;
	return otlp_vec_push(&e->attrs, kv, ret);
}

/* Index 0 of the attribute table is the empty KeyValueAndUnit. */
static int enc_begin(struct enc *e)
{
	const struct pmodel *m = e->m;
	P_(KeyValueAndUnit) *zero;
	int32_t dummy;
	int r;

	if (m->n_strings == 0)
		r = add_const(e, "", &dummy);
	else
		r = 0;
	for (size_t i = 0; r == 0 && i < m->n_strings; i++)
		r = add_string(e, m->strings[i] ? m->strings[i] : "", &dummy);
	if (r == 0)
		r = add_const(e, OTLP_KEY_FRAME_TYPE, &e->k_frame_type);
	if (r == 0)
		r = add_const(e, OTLP_KEY_BUILD_GNU, &e->k_build_gnu);
	if (r == 0)
		r = add_const(e, OTLP_KEY_BUILD_HTL, &e->k_build_htl);
	if (r == 0)
		r = add_const(e, OTLP_KEY_THREAD_ID, &e->k_tid);
	if (r == 0)
		r = add_const(e, OTLP_KEY_THREAD_NAME, &e->k_tname);
	otlp_plan_types(m, &e->types);
	if (r == 0)
		r = add_const(e, e->types.sample_type, &e->s_type);
	if (r == 0)
		r = add_const(e, e->types.sample_unit, &e->s_unit);
	if (r == 0 && e->types.period_type)
		r = add_const(e, e->types.period_type, &e->s_ptype);
	if (r == 0 && e->types.period_type)
		r = add_const(e, e->types.period_unit, &e->s_punit);
	if (r < 0)
		return r;

	zero = arena_alloc(e->a, sizeof(*zero));
	if (!zero)
		return -ENOMEM;
	p_init(key_value_and_unit)(zero);
	r = otlp_vec_push(&e->attrs, zero, &dummy);
	for (int t = 0; r == 0 && t < PM_N_FRAME_TYPES; t++) {
		r = add_attr(e, e->k_frame_type, pm_frame_type_name(t), 0, &e->frame_attr[t]);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Allocates n + 1 message pointers, [0] the empty message of its type. */
static void **table(struct enc *e, size_t n, size_t size, void (*init)(void *))
{
	void **t;

	if (n >= INT32_MAX)
		return NULL;
	t = arena_alloc(e->a, (n + 1) * sizeof(void *));
	if (!t)
		return NULL;
	for (size_t i = 0; i <= n; i++) {
		t[i] = arena_alloc(e->a, size);
		if (!t[i])
			return NULL;
		init(t[i]);
	}
	return t;
}

#define TABLE(e, n, type, init) ((type **)table((e), (n), sizeof(type), (void (*)(void *))(init)))

static int enc_mappings(struct enc *e, P_(ProfilesDictionary) *d)
{
	const struct pmodel *m = e->m;
	P_(Mapping) **t = TABLE(e, m->n_mappings, P_(Mapping), p_init(mapping));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_mappings; i++) {
		const struct pm_mapping *pm = &m->mappings[i];
		P_(Mapping) *o = t[i + 1];
		int32_t *ix = arena_alloc(e->a, 2 * sizeof(int32_t));
		int r = 0;

		if (!ix)
			return -ENOMEM;
		/* The model knows files, not address ranges: the mapping
		 * spans the file and locations carry file offsets. */
		o->memory_start = 0;
		o->memory_limit = pm->size;
		o->file_offset = 0;
		o->filename_strindex = (int32_t)pm->path;
		if (pm->build_id)
			r = add_attr(e, e->k_build_gnu, otlp_plan_str(m, pm->build_id), 0, &ix[o->n_attribute_indices++]);
		if (r == 0 && pm->file_id)
			r = add_attr(e, e->k_build_htl, otlp_plan_str(m, pm->file_id), 0, &ix[o->n_attribute_indices++]);
		if (r < 0)
			return r;
		o->attribute_indices = ix;
	}
	d->mapping_table = t;
	d->n_mapping_table = m->n_mappings + 1;
	return 0;
}

static int enc_functions(struct enc *e, P_(ProfilesDictionary) *d)
{
	const struct pmodel *m = e->m;
	P_(Function) **t = TABLE(e, m->n_functions, P_(Function), p_init(function));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_functions; i++) {
		t[i + 1]->name_strindex = (int32_t)m->functions[i].name;
		t[i + 1]->system_name_strindex = (int32_t)m->functions[i].system_name;
		t[i + 1]->filename_strindex = (int32_t)m->functions[i].file;
	}
	d->function_table = t;
	d->n_function_table = m->n_functions + 1;
	return 0;
}

static int enc_locations(struct enc *e, P_(ProfilesDictionary) *d)
{
	const struct pmodel *m = e->m;
	P_(Location) **t = TABLE(e, m->n_locations, P_(Location), p_init(location));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_locations; i++) {
		const struct pm_location *pl = &m->locations[i];
		P_(Location) *o = t[i + 1];
		int32_t *ix = arena_alloc(e->a, sizeof(int32_t));

		if (!ix)
			return -ENOMEM;
		/* Both use "index + 1, 0: none" for the mapping. */
		o->mapping_index = pl->mapping <= m->n_mappings ? (int32_t)pl->mapping : 0;
		o->address = pl->address;
		ix[0] = e->frame_attr[pl->type < PM_N_FRAME_TYPES ? pl->type : PM_FRAME_NATIVE];
		o->attribute_indices = ix;
		o->n_attribute_indices = 1;
		if (pl->n_lines == 0 || pl->first_line > m->n_lines ||
		    pl->n_lines > m->n_lines - pl->first_line)
			continue;
		o->lines = TABLE(e, pl->n_lines - 1, P_(Line), p_init(line));
		if (!o->lines)
			return -ENOMEM;
		/* Same order in both: the innermost inlined function first,
		 * the function it was inlined into last. */
		for (uint32_t k = 0; k < pl->n_lines; k++) {
			const struct pm_line *ln = &m->lines[pl->first_line + k];

			o->lines[k]->function_index = (int32_t)ln->function + 1;
			o->lines[k]->line = ln->line;
		}
		o->n_lines = pl->n_lines;
	}
	d->location_table = t;
	d->n_location_table = m->n_locations + 1;
	return 0;
}

static int enc_stacks(struct enc *e, P_(ProfilesDictionary) *d)
{
	const struct pmodel *m = e->m;
	P_(Stack) **t = TABLE(e, m->n_stacks, P_(Stack), p_init(stack));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_stacks; i++) {
		const struct pm_stack *ps = &m->stacks[i];
		int32_t *ix;

		if (ps->first_loc > m->n_stack_locs || ps->n_locs > m->n_stack_locs - ps->first_loc)
			continue;
		ix = arena_alloc(e->a, (ps->n_locs ? ps->n_locs : 1) * sizeof(int32_t));
		if (!ix)
			return -ENOMEM;
		/* Leaf first in both. */
		for (uint32_t k = 0; k < ps->n_locs; k++)
			ix[k] = (int32_t)m->stack_locs[ps->first_loc + k] + 1;
		t[i + 1]->location_indices = ix;
		t[i + 1]->n_location_indices = ps->n_locs;
	}
	d->stack_table = t;
	d->n_stack_table = m->n_stacks + 1;
	return 0;
}

/* The span of each sample taken while a traced request was served (Go
 * probes); entry 0 is the empty link OTLP asks for: IDs of the right
 * size, all zero. A sample's link is the model's index + 1, as is. */
static int enc_links(struct enc *e, P_(ProfilesDictionary) *d)
{
	static uint8_t zero_id[16];
	const struct pmodel *m = e->m;
	P_(Link) **t = TABLE(e, m->n_links, P_(Link), p_init(link));

	if (!t)
		return -ENOMEM;
	t[0]->trace_id = (ProtobufCBinaryData){ 16, zero_id };
	t[0]->span_id = (ProtobufCBinaryData){ 8, zero_id };
	for (size_t i = 0; i < m->n_links; i++) {
		t[i + 1]->trace_id = (ProtobufCBinaryData){ 16, (uint8_t *)m->links[i].trace_id };
		t[i + 1]->span_id = (ProtobufCBinaryData){ 8, (uint8_t *)m->links[i].span_id };
	}
	d->link_table = t;
	d->n_link_table = m->n_links + 1;
	return 0;
}

/* The dictionary's index of a thread attribute, added once. */
static int sample_attr(struct enc *e, char kind, uint32_t v, int32_t *ret)
{
	uint8_t key[5] = { (uint8_t)kind };
	void *got;
	int32_t ix;
	int r;

	memcpy(key + 1, &v, sizeof(v));
	got = hmap_get(e->sample_attrs, key, sizeof(key));
	if (got) {
		*ret = (int32_t)(uintptr_t)got;
		return 0;
	}
	r = kind == 'i' ? add_attr(e, e->k_tid, NULL, v, &ix)
			: add_attr(e, e->k_tname, otlp_plan_str(e->m, v), 0, &ix);
	if (r == 0)
		r = hmap_put(e->sample_attrs, key, sizeof(key), (void *)(uintptr_t)ix, NULL);
	if (r == 0)
		*ret = ix;
	return r;
}

static int enc_sample(struct enc *e, const struct pm_sample *s, P_(Sample) *o)
{
	const struct pmodel *m = e->m;
	int32_t *ix = arena_alloc(e->a, 2 * sizeof(int32_t));
	int64_t *vals = arena_alloc(e->a, 2 * sizeof(int64_t));
	uint64_t *ts = arena_alloc(e->a, 2 * sizeof(uint64_t));
	struct otlp_plan_values v;
	int r = 0;

	if (!ix || !vals || !ts)
		return -ENOMEM;
	o->stack_index = s->stack < m->n_stacks ? (int32_t)s->stack + 1 : 0;
	o->link_index = s->link <= m->n_links ? (int32_t)s->link : 0;
	if (s->tid)
		r = sample_attr(e, 'i', s->tid, &ix[o->n_attribute_indices++]);
	if (r == 0 && s->thread_name)
		r = sample_attr(e, 'n', s->thread_name, &ix[o->n_attribute_indices++]);
	if (r < 0)
		return r;
	o->attribute_indices = ix;
	otlp_plan_values(m, s, true, &v);
	memcpy(vals, v.v, sizeof(v.v));
	memcpy(ts, v.ts, sizeof(v.ts));
	o->values = vals;
	o->n_values = v.n_v;
	o->timestamps_unix_nano = ts;
	o->n_timestamps_unix_nano = v.n_ts;
	return 0;
}

/* The Profile of plan entry pp, its samples all of one shape. */
static P_(Profile) *enc_profile(struct enc *e, const struct otlp_plan_profile *pp)
{
	const struct pmodel *m = e->m;
	P_(Profile) *pr = arena_alloc(e->a, sizeof(*pr));
	P_(ValueType) *st = arena_alloc(e->a, sizeof(*st));
	P_(Sample) **samples = arena_alloc(e->a, pp->n_samples * sizeof(*samples));

	if (!pr || !st || !samples)
		return NULL;
	p_init(profile)(pr);
	p_init(value_type)(st);
	st->type_strindex = e->s_type;
	st->unit_strindex = e->s_unit;
	pr->sample_type = st;
	if (e->types.period_type) {
		pr->period_type = arena_alloc(e->a, sizeof(*pr->period_type));
		if (!pr->period_type)
			return NULL;
		p_init(value_type)(pr->period_type);
		pr->period_type->type_strindex = e->s_ptype;
		pr->period_type->unit_strindex = e->s_punit;
		pr->period = e->types.period;
	}
	pr->time_unix_nano = m->start_ns;
	pr->duration_nano = m->end_ns > m->start_ns ? m->end_ns - m->start_ns : 0;
	for (size_t i = 0; i < pp->n_samples; i++) {
		samples[i] = arena_alloc(e->a, sizeof(**samples));
		if (!samples[i])
			return NULL;
		p_init(sample)(samples[i]);
		if (enc_sample(e, &m->samples[pp->samples[i]], samples[i]) < 0)
			return NULL;
	}
	pr->samples = samples;
	pr->n_samples = pp->n_samples;
	pr->profile_id = otlp_plan_profile_id(e->a);
	return pr;
}

/* The ResourceProfiles (msg) of a process: its resource, one scope, one
 * Profile per sample shape. */
static int enc_resource(void *ctx, const struct otlp_plan *plan,
			const struct otlp_plan_resource *pr, void *msg)
{
	struct enc *e = ctx;
	P_(ResourceProfiles) *rp = msg;
	const struct otlp_plan_profile *first = &plan->profiles[pr->first];
	otlp_resource *res = arena_alloc(e->a, sizeof(*res));
	P_(ScopeProfiles) *sp = arena_alloc(e->a, sizeof(*sp));
	P_(ScopeProfiles) **sps = arena_alloc(e->a, sizeof(*sps));
	P_(Profile) **prs = arena_alloc(e->a, pr->n * sizeof(*prs));
	int r;

	if (!res || !sp || !sps || !prs)
		return -ENOMEM;
	r = otlp_plan_resource(e->a, e->m, &e->m->processes[first->process], res);
	if (r < 0)
		return r;
	p_init(scope_profiles)(sp);
	sp->scope = otlp_plan_scope(e->a);
	for (size_t k = 0; k < pr->n; k++)
		if (!(prs[k] = enc_profile(e, first + k)))
			return -ENOMEM;
	sp->profiles = prs;
	sp->n_profiles = pr->n;
	sps[0] = sp;
	p_init(resource_profiles)(rp);
	rp->resource = res;
	rp->scope_profiles = sps;
	rp->n_scope_profiles = 1;
	return sp->scope ? 0 : -ENOMEM;
}

int otlp_encode(const struct pmodel *m, uint8_t **ret, size_t *ret_len)
{
	struct enc e = { .m = m };
	otlp_request req;
	P_(ProfilesDictionary) dict;
	int r = -ENOMEM;

	if (m->n_mappings >= INT32_MAX || m->n_functions >= INT32_MAX ||
	    m->n_locations >= INT32_MAX || m->n_stacks >= INT32_MAX || m->n_links >= INT32_MAX)
		return -E2BIG;
	e.a = arena_new();
	e.sample_attrs = hmap_new();
	if (!e.a || !e.sample_attrs)
		goto cleanup;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(&req);
	p_init(profiles_dictionary)(&dict);
	r = enc_begin(&e);
	if (r == 0)
		r = enc_mappings(&e, &dict);
	if (r == 0)
		r = enc_functions(&e, &dict);
	if (r == 0)
		r = enc_locations(&e, &dict);
	if (r == 0)
		r = enc_stacks(&e, &dict);
	if (r == 0)
		r = enc_links(&e, &dict);
	if (r == 0)
		r = otlp_plan_resources(e.a, m, &e.plan, sizeof(P_(ResourceProfiles)), enc_resource, &e,
					(void ***)&req.resource_profiles, &req.n_resource_profiles);
	if (r < 0)
		goto cleanup;
	dict.string_table = (char **)e.strings.v;
	dict.n_string_table = e.strings.n;
	dict.attribute_table = (P_(KeyValueAndUnit) **)e.attrs.v;
	dict.n_attribute_table = e.attrs.n;
	req.dictionary = &dict;
	r = otlp_kv_pack(&req.base, ret, ret_len);
cleanup:
	otlp_plan_free(&e.plan);
	hmap_free(e.sample_attrs, NULL);
	free(e.strings.v);
	free(e.attrs.v);
	arena_free(e.a);
	return r;
}
