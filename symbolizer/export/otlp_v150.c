/* otlp_v150.c - a profile model in opentelemetry-proto v1.5.0's profiles
 * layout (see otlp_v150.h). Each Profile gets its own tables, built as its
 * samples are encoded: a model entry is added the first time a sample of
 * the Profile reaches it. Which model entry already has an index in the
 * Profile being built is kept in per-model-table slots stamped with the
 * Profile's generation, so nothing is cleared between Profiles. Tables
 * grow in malloc'd vectors and move into the request's arena when their
 * Profile is done; everything the request points to is freed once the
 * bytes are packed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "hmap.h"
#include "otlp_kv.h"
#include "otlp_plan.h"
#include "otlp_v150.h"
#include "otlp_v150_profiles_service.pb-c.h"

#define V_(x) Otlp150__Profiles__V1development__##x
#define v_init(x) otlp150__profiles__v1development__##x##__init
/* The messages both layouts declare alike (otlp_profiles.proto). */
#define P_(x) Opentelemetry__Proto__Profiles__V1development__##x
#define p_init(x) opentelemetry__proto__profiles__v1development__##x##__init

typedef Otlp150__Collector__Profiles__V1development__ExportProfilesServiceRequest v150_request;

/* A model entry's index in the Profile being built, when gen is its. */
struct slot {
	uint32_t gen;
	int32_t ix;
};

struct enc {
	const struct pmodel *m;
	struct arena *a;
	struct otlp_plan plan;
	struct otlp_plan_types types;
	uint32_t gen; /* of the Profile being built, from 1 */
	struct slot *slots; /* holds the tables' slots: */
	struct slot *map, *loc, *fn, *link, *stack, *tname;
	struct slot frame[PM_N_FRAME_TYPES];
	struct hmap *seen; /* of this Profile: strings (by address), thread IDs */
	struct otlp_vec strings, attrs, mappings, locations, functions, links;
	int32_t *loc_ix; /* the Profile's location_indices */
	size_t n_loc_ix, cap_loc_ix;
};

static bool slot_find(const struct enc *e, const struct slot *s, int32_t *ret)
{
	if (s->gen != e->gen)
		return false;
	*ret = s->ix;
	return true;
}

static void slot_set(const struct enc *e, struct slot *s, int32_t ix)
{
	*s = (struct slot){ e->gen, ix };
}

/* A new message of size bytes in the arena, init'ed; NULL on out of
 * memory. */
static void *new_msg(struct enc *e, size_t size, void (*init)(void *))
{
	void *o = arena_alloc(e->a, size);

	if (o)
		init(o);
	return o;
}

#define NEW(e, type, init) ((type *)new_msg((e), sizeof(type), (void (*)(void *))(init)))

/* Appends o, the entry of slot s, to table t; its index in *ret. */
static int slot_push(const struct enc *e, struct slot *s, struct otlp_vec *t, void *o, int32_t *ret)
{
	int r = otlp_vec_push(t, o, ret);

	if (r == 0)
		slot_set(e, s, *ret);
	return r;
}

/* t's entries, moved into the arena (t is empty again); NULL with *n 0
 * for an empty table, NULL with *n set on out of memory. */
static void **vec_take(struct enc *e, struct otlp_vec *t, size_t *n)
{
	void **out = t->n ? arena_alloc(e->a, t->n * sizeof(void *)) : NULL;

	*n = t->n;
	if (out)
		memcpy(out, t->v, t->n * sizeof(void *));
	t->n = 0;
	return out;
}

/* The index of s (borrowed: a model string or a constant) in the
 * Profile's string table, added once per address. */
static int str_ix(struct enc *e, const char *s, int32_t *ret)
{
	uintptr_t key = (uintptr_t)s;
	void *got = hmap_get(e->seen, &key, sizeof(key));
	int r;

	if (got) {
		*ret = (int32_t)((uintptr_t)got - 1);
		return 0;
	}
	r = otlp_vec_push(&e->strings, (char *)s, ret);
	if (r == 0)
		r = hmap_put(e->seen, &key, sizeof(key), (void *)((uintptr_t)*ret + 1), NULL);
	return r;
}

static int mstr_ix(struct enc *e, uint32_t i, int32_t *ret)
{
	return str_ix(e, otlp_plan_str(e->m, i), ret);
}

/* Appends attribute key = s (string) or, for s NULL, = v; *ret is its
 * index, or -1 when s is "" (nothing to say). */
static int attr_add(struct enc *e, const char *key, const char *s, int64_t v, int32_t *ret)
{
	size_t n = e->attrs.n;
	int r;

	*ret = -1;
	if (n >= INT32_MAX)
		return -E2BIG;
	if (otlp_plan_grow((void **)&e->attrs.v, &e->attrs.cap, n + 1, sizeof(void *)) < 0)
		return -ENOMEM;
	r = otlp_kv_add(e->a, (Opentelemetry__Proto__Common__V1__KeyValue **)e->attrs.v,
			&e->attrs.n, key, s, v);
	if (r == 0 && e->attrs.n > n)
		*ret = (int32_t)n;
	return r;
}

/* Appends attribute ix to list (room for it) unless it is -1. */
static void attr_ref(int32_t ix, int32_t *list, size_t *n)
{
	if (ix >= 0)
		list[(*n)++] = ix;
}

static int enc_mapping(struct enc *e, uint32_t mi, int32_t *ret)
{
	const struct pm_mapping *pm = &e->m->mappings[mi];
	V_(Mapping) *o;
	int32_t *ix, a;
	int r;

	if (slot_find(e, &e->map[mi], ret))
		return 0;
	o = NEW(e, V_(Mapping), v_init(mapping));
	ix = arena_alloc(e->a, 2 * sizeof(*ix));
	if (!o || !ix)
		return -ENOMEM;
	/* The model knows files, not address ranges: the mapping spans
	 * the file and locations carry file offsets. */
	o->memory_limit = pm->size;
	o->attribute_indices = ix;
	r = mstr_ix(e, pm->path, &o->filename_strindex);
	if (r == 0 && pm->build_id) {
		r = attr_add(e, OTLP_KEY_BUILD_GNU, otlp_plan_str(e->m, pm->build_id), 0, &a);
		attr_ref(a, ix, &o->n_attribute_indices);
	}
	if (r == 0 && pm->file_id) {
		r = attr_add(e, OTLP_KEY_BUILD_HTL, otlp_plan_str(e->m, pm->file_id), 0, &a);
		attr_ref(a, ix, &o->n_attribute_indices);
	}
	if (r == 0)
		r = slot_push(e, &e->map[mi], &e->mappings, o, ret);
	return r;
}

static int enc_function(struct enc *e, uint32_t fi, int32_t *ret)
{
	const struct pm_function *pf = &e->m->functions[fi];
	P_(Function) *o;
	int r;

	if (slot_find(e, &e->fn[fi], ret))
		return 0;
	o = NEW(e, P_(Function), p_init(function));
	if (!o)
		return -ENOMEM;
	r = mstr_ix(e, pf->name, &o->name_strindex);
	if (r == 0)
		r = mstr_ix(e, pf->system_name, &o->system_name_strindex);
	if (r == 0)
		r = mstr_ix(e, pf->file, &o->filename_strindex);
	if (r == 0)
		r = slot_push(e, &e->fn[fi], &e->functions, o, ret);
	return r;
}

/* The lines of location pl (innermost inlined function first, as in the
 * model), and what they tell of their mapping's symbols (mp, or NULL). */
static int enc_lines(struct enc *e, const struct pm_location *pl, V_(Location) *o, V_(Mapping) *mp)
{
	const struct pmodel *m = e->m;
	int r = 0;

	if (pl->n_lines == 0 || pl->first_line > m->n_lines ||
	    pl->n_lines > m->n_lines - pl->first_line)
		return 0;
	o->line = arena_alloc(e->a, pl->n_lines * sizeof(*o->line));
	if (!o->line)
		return -ENOMEM;
	for (uint32_t k = 0; r == 0 && k < pl->n_lines; k++) {
		const struct pm_line *ln = &m->lines[pl->first_line + k];
		P_(Line) *l = arena_alloc(e->a, sizeof(*l));

		if (!l || ln->function >= m->n_functions)
			return l ? -EINVAL : -ENOMEM;
		p_init(line)(l);
		l->line = ln->line;
		r = enc_function(e, ln->function, &l->function_index);
		o->line[o->n_line++] = l;
		if (mp) {
			mp->has_functions = true;
			mp->has_filenames |= m->functions[ln->function].file != 0;
			mp->has_line_numbers |= ln->line != 0;
		}
	}
	if (mp)
		mp->has_inline_frames |= pl->n_lines > 1;
	return r;
}

static int enc_location(struct enc *e, uint32_t li, int32_t *ret)
{
	const struct pm_location *pl = &e->m->locations[li];
	unsigned type = pl->type < PM_N_FRAME_TYPES ? pl->type : PM_FRAME_NATIVE;
	V_(Mapping) *mp = NULL;
	V_(Location) *o;
	int32_t a = -1;
	int r = 0;

	if (slot_find(e, &e->loc[li], ret))
		return 0;
	o = NEW(e, V_(Location), v_init(location));
	if (!o)
		return -ENOMEM;
	o->attribute_indices = arena_alloc(e->a, sizeof(int32_t));
	if (!o->attribute_indices)
		return -ENOMEM;
	o->address = pl->address;
	/* The model's "index + 1, 0: none"; unset is none here. */
	if (pl->mapping && pl->mapping <= e->m->n_mappings) {
		r = enc_mapping(e, pl->mapping - 1, &o->mapping_index);
		o->optional_mapping_index_case =
			OTLP150__PROFILES__V1DEVELOPMENT__LOCATION__OPTIONAL_MAPPING_INDEX_MAPPING_INDEX;
		mp = r == 0 ? e->mappings.v[o->mapping_index] : NULL;
	}
	if (r == 0 && !slot_find(e, &e->frame[type], &a)) {
		r = attr_add(e, OTLP_KEY_FRAME_TYPE, pm_frame_type_name(type), 0, &a);
		slot_set(e, &e->frame[type], a);
	}
	attr_ref(a, o->attribute_indices, &o->n_attribute_indices);
	if (r == 0)
		r = enc_lines(e, pl, o, mp);
	if (r == 0)
		r = slot_push(e, &e->loc[li], &e->locations, o, ret);
	return r;
}

/* The sample's stack as a slice of location_indices, leaf first; a
 * stack already sliced in this Profile is named again, not repeated. */
static int enc_stack(struct enc *e, uint32_t si, V_(Sample) *o)
{
	const struct pmodel *m = e->m;
	const struct pm_stack *ps;
	int32_t start;
	int r = 0;

	if (si >= m->n_stacks)
		return 0;
	ps = &m->stacks[si];
	if (ps->first_loc > m->n_stack_locs || ps->n_locs > m->n_stack_locs - ps->first_loc)
		return 0;
	o->locations_length = (int32_t)ps->n_locs;
	if (slot_find(e, &e->stack[si], &o->locations_start_index))
		return 0;
	if (e->n_loc_ix + ps->n_locs >= INT32_MAX)
		return -E2BIG;
	if (otlp_plan_grow((void **)&e->loc_ix, &e->cap_loc_ix, e->n_loc_ix + ps->n_locs + 1,
			   sizeof(int32_t)) < 0)
		return -ENOMEM;
	start = (int32_t)e->n_loc_ix;
	for (uint32_t k = 0; r == 0 && k < ps->n_locs; k++) {
		uint32_t li = m->stack_locs[ps->first_loc + k];

		if (li >= m->n_locations)
			return -EINVAL;
		r = enc_location(e, li, &e->loc_ix[e->n_loc_ix++]);
	}
	o->locations_start_index = start;
	slot_set(e, &e->stack[si], start);
	return r;
}

/* The thread attributes of s: thread.id once per ID, thread.name once per
 * name in the Profile. */
static int enc_thread(struct enc *e, const struct pm_sample *s, V_(Sample) *o)
{
	uint64_t key = (uint64_t)1 << 32 | s->tid;
	void *got = s->tid ? hmap_get(e->seen, &key, sizeof(key)) : NULL;
	int32_t a = -1;
	int r = 0;

	o->attribute_indices = arena_alloc(e->a, 2 * sizeof(int32_t));
	if (!o->attribute_indices)
		return -ENOMEM;
	if (got) {
		a = (int32_t)((uintptr_t)got - 1);
	} else if (s->tid) {
		r = attr_add(e, OTLP_KEY_THREAD_ID, NULL, s->tid, &a);
		if (r == 0)
			r = hmap_put(e->seen, &key, sizeof(key), (void *)((uintptr_t)a + 1), NULL);
	}
	attr_ref(a, o->attribute_indices, &o->n_attribute_indices);
	if (r < 0 || !s->thread_name || s->thread_name >= e->m->n_strings)
		return r;
	if (!slot_find(e, &e->tname[s->thread_name], &a)) {
		r = attr_add(e, OTLP_KEY_THREAD_NAME, otlp_plan_str(e->m, s->thread_name), 0, &a);
		slot_set(e, &e->tname[s->thread_name], a);
	}
	attr_ref(a, o->attribute_indices, &o->n_attribute_indices);
	return r;
}

static int enc_link(struct enc *e, uint32_t li, int32_t *ret)
{
	P_(Link) *o;

	if (slot_find(e, &e->link[li], ret))
		return 0;
	o = NEW(e, P_(Link), p_init(link));
	if (!o)
		return -ENOMEM;
	o->trace_id = (ProtobufCBinaryData){ 16, (uint8_t *)e->m->links[li].trace_id };
	o->span_id = (ProtobufCBinaryData){ 8, (uint8_t *)e->m->links[li].span_id };
	return slot_push(e, &e->link[li], &e->links, o, ret);
}

static int enc_sample(struct enc *e, const struct pm_sample *s, V_(Sample) *o)
{
	struct otlp_plan_values v;
	int r;

	v_init(sample)(o);
	otlp_plan_values(e->m, s, false, &v);
	o->value = arena_alloc(e->a, sizeof(v.v));
	o->timestamps_unix_nano = arena_alloc(e->a, sizeof(v.ts));
	if (!o->value || !o->timestamps_unix_nano)
		return -ENOMEM;
	memcpy(o->value, v.v, sizeof(v.v));
	o->n_value = v.n_v;
	memcpy(o->timestamps_unix_nano, v.ts, sizeof(v.ts));
	o->n_timestamps_unix_nano = v.n_ts;
	r = enc_stack(e, s->stack, o);
	if (r == 0)
		r = enc_thread(e, s, o);
	/* The model's link is its index + 1, 0: in no span (unset here). */
	if (r == 0 && s->link && s->link <= e->m->n_links) {
		o->optional_link_index_case =
			OTLP150__PROFILES__V1DEVELOPMENT__SAMPLE__OPTIONAL_LINK_INDEX_LINK_INDEX;
		r = enc_link(e, s->link - 1, &o->link_index);
	}
	return r;
}

/* A value type over the Profile's strings; DELTA, as each window holds
 * what happened in it (v1.5.0 rules out UNSPECIFIED). */
static V_(ValueType) *enc_value_type(struct enc *e, const char *type, const char *unit)
{
	V_(ValueType) *vt = arena_alloc(e->a, sizeof(*vt));

	if (!vt)
		return NULL;
	v_init(value_type)(vt);
	vt->aggregation_temporality =
		OTLP150__PROFILES__V1DEVELOPMENT__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_DELTA;
	if (str_ix(e, type, &vt->type_strindex) < 0 || str_ix(e, unit, &vt->unit_strindex) < 0)
		return NULL;
	return vt;
}

/* Moves the tables built for pr into it. */
static int enc_tables(struct enc *e, V_(Profile) *pr)
{
	pr->string_table = (char **)vec_take(e, &e->strings, &pr->n_string_table);
	pr->attribute_table = (Opentelemetry__Proto__Common__V1__KeyValue **)vec_take(
		e, &e->attrs, &pr->n_attribute_table);
	pr->mapping_table = (V_(Mapping) **)vec_take(e, &e->mappings, &pr->n_mapping_table);
	pr->location_table = (V_(Location) **)vec_take(e, &e->locations, &pr->n_location_table);
	pr->function_table = (P_(Function) **)vec_take(e, &e->functions, &pr->n_function_table);
	pr->link_table = (P_(Link) **)vec_take(e, &e->links, &pr->n_link_table);
	if ((!pr->string_table && pr->n_string_table) || (!pr->attribute_table && pr->n_attribute_table) ||
	    (!pr->mapping_table && pr->n_mapping_table) || (!pr->location_table && pr->n_location_table) ||
	    (!pr->function_table && pr->n_function_table) || (!pr->link_table && pr->n_link_table))
		return -ENOMEM;
	pr->location_indices = arena_alloc(e->a, (e->n_loc_ix ? e->n_loc_ix : 1) * sizeof(int32_t));
	if (!pr->location_indices)
		return -ENOMEM;
	memcpy(pr->location_indices, e->loc_ix, e->n_loc_ix * sizeof(int32_t));
	pr->n_location_indices = e->n_loc_ix;
	e->n_loc_ix = 0;
	return 0;
}

static int enc_profile_body(struct enc *e, const struct otlp_plan_profile *pp, V_(Profile) *pr)
{
	const struct pmodel *m = e->m;
	int32_t empty;
	int r = str_ix(e, "", &empty); /* string_table[0] */

	if (r < 0)
		return r;
	pr->sample_type = arena_alloc(e->a, sizeof(*pr->sample_type));
	pr->sample = arena_alloc(e->a, pp->n_samples * sizeof(*pr->sample));
	if (!pr->sample_type || !pr->sample ||
	    !(pr->sample_type[0] = enc_value_type(e, e->types.sample_type, e->types.sample_unit)))
		return -ENOMEM;
	pr->n_sample_type = 1;
	if (e->types.period_type) {
		pr->period_type = enc_value_type(e, e->types.period_type, e->types.period_unit);
		if (!pr->period_type)
			return -ENOMEM;
		pr->period = e->types.period;
	}
	pr->time_nanos = m->start_ns > INT64_MAX ? INT64_MAX : (int64_t)m->start_ns;
	pr->duration_nanos = m->end_ns > m->start_ns ? (int64_t)(m->end_ns - m->start_ns) : 0;
	for (size_t i = 0; r == 0 && i < pp->n_samples; i++) {
		pr->sample[i] = arena_alloc(e->a, sizeof(**pr->sample));
		r = pr->sample[i] ? enc_sample(e, &m->samples[pp->samples[i]], pr->sample[i]) : -ENOMEM;
		pr->n_sample = i + 1;
	}
	pr->profile_id = otlp_plan_profile_id(e->a);
	return r;
}

/* The Profile of plan entry pp with its own tables; NULL in *ret on
 * failure. */
static int enc_profile(struct enc *e, const struct otlp_plan_profile *pp, V_(Profile) **ret)
{
	V_(Profile) *pr = arena_alloc(e->a, sizeof(*pr));
	int r;

	*ret = NULL;
	if (!pr)
		return -ENOMEM;
	v_init(profile)(pr);
	e->gen++;
	e->seen = hmap_new();
	r = e->seen ? enc_profile_body(e, pp, pr) : -ENOMEM;
	if (r == 0)
		r = enc_tables(e, pr);
	hmap_free(e->seen, NULL);
	e->seen = NULL;
	if (r == 0)
		*ret = pr;
	return r;
}

/* The ResourceProfiles (msg) of a process, with its Profiles. */
static int enc_resource(void *ctx, const struct otlp_plan *plan,
			const struct otlp_plan_resource *pr, void *msg)
{
	struct enc *e = ctx;
	V_(ResourceProfiles) *rp = msg;
	const struct otlp_plan_profile *first = &plan->profiles[pr->first];
	Opentelemetry__Proto__Resource__V1__Resource *res = arena_alloc(e->a, sizeof(*res));
	V_(ScopeProfiles) *sp = arena_alloc(e->a, sizeof(*sp));
	int r;

	v_init(resource_profiles)(rp);
	rp->scope_profiles = arena_alloc(e->a, sizeof(*rp->scope_profiles));
	if (!res || !sp || !rp->scope_profiles)
		return -ENOMEM;
	v_init(scope_profiles)(sp);
	sp->profiles = arena_alloc(e->a, pr->n * sizeof(*sp->profiles));
	sp->scope = otlp_plan_scope(e->a);
	if (!sp->profiles || !sp->scope)
		return -ENOMEM;
	r = otlp_plan_resource(e->a, e->m, &e->m->processes[first->process], res);
	for (size_t k = 0; r == 0 && k < pr->n; k++)
		r = enc_profile(e, first + k, &sp->profiles[sp->n_profiles++]);
	rp->resource = res;
	rp->scope_profiles[0] = sp;
	rp->n_scope_profiles = 1;
	return r;
}

/* Slots for every model table a Profile indexes, in one allocation. */
static int enc_slots(struct enc *e)
{
	const struct pmodel *m = e->m;
	size_t n[] = { m->n_mappings, m->n_locations, m->n_functions, m->n_links, m->n_stacks,
		       m->n_strings };
	struct slot **at[] = { &e->map, &e->loc, &e->fn, &e->link, &e->stack, &e->tname };
	size_t total = 0;

	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
		total += n[i];
	e->slots = calloc(total + 1, sizeof(struct slot));
	if (!e->slots)
		return -ENOMEM;
	total = 0;
	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
		*at[i] = e->slots + total;
		total += n[i];
	}
	return 0;
}

static void enc_free(struct enc *e)
{
	struct otlp_vec *vecs[] = { &e->strings, &e->attrs, &e->mappings, &e->locations,
				    &e->functions, &e->links };

	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++)
		free(vecs[i]->v);
	free(e->slots);
	free(e->loc_ix);
	otlp_plan_free(&e->plan);
	arena_free(e->a);
}

int otlp_v150_encode(const struct pmodel *m, uint8_t **ret, size_t *ret_len)
{
	struct enc e = { .m = m };
	v150_request req;
	int r;

	otlp150__collector__profiles__v1development__export_profiles_service_request__init(&req);
	otlp_plan_types(m, &e.types);
	e.a = arena_new();
	r = e.a ? enc_slots(&e) : -ENOMEM;
	if (r == 0)
		r = otlp_plan_resources(e.a, m, &e.plan, sizeof(V_(ResourceProfiles)), enc_resource, &e,
					(void ***)&req.resource_profiles, &req.n_resource_profiles);
	if (r == 0)
		r = otlp_kv_pack(&req.base, ret, ret_len);
	enc_free(&e);
	return r;
}
