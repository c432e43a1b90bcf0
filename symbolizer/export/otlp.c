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
#include <sys/random.h>

#include "arena.h"
#include "hmap.h"
#include "otlp.h"
#include "otlp_kv.h"
#include "otlp_profiles_service.pb-c.h"

#define P_(x) Opentelemetry__Proto__Profiles__V1development__##x
#define p_init(x) opentelemetry__proto__profiles__v1development__##x##__init
#define C_(x) Opentelemetry__Proto__Common__V1__##x
#define c_init(x) opentelemetry__proto__common__v1__##x##__init

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	otlp_request;
typedef Opentelemetry__Proto__Resource__V1__Resource otlp_resource;

struct enc {
	const struct pmodel *m;
	struct arena *a;
	char **strings;
	size_t n_strings, cap_strings;
	P_(KeyValueAndUnit) **attrs;
	size_t n_attrs, cap_attrs;
	struct hmap *sample_attrs; /* "i"+tid / "n"+string -> attribute index */
	/* string indexes of the names this file adds */
	int32_t k_frame_type, k_build_gnu, k_build_htl, k_tid, k_tname;
	int32_t s_samples, s_count, s_cpu, s_ns;
	/* The model's profile type's value types (pm_profile_value_types). */
	int32_t s_type, s_unit, s_ptype, s_punit;
	int32_t frame_attr[PM_N_FRAME_TYPES];
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* Appends s (borrowed: a model string or arena memory) to the string
 * table; its index in *ret. */
static int add_string(struct enc *e, char *s, int32_t *ret)
{
	if (e->n_strings >= INT32_MAX)
		return -E2BIG;
	if (grow((void **)&e->strings, &e->cap_strings, e->n_strings + 1, sizeof(char *)) < 0)
		return -ENOMEM;
	e->strings[e->n_strings] = s;
	*ret = (int32_t)e->n_strings++;
	return 0;
}

static int add_const(struct enc *e, const char *s, int32_t *ret)
{
	char *copy = arena_strdup(e->a, s);

	return copy ? add_string(e, copy, ret) : -ENOMEM;
}

/* Adds an attribute: a string value (s != NULL) or an integer. */
static int add_attr(struct enc *e, int32_t key, const char *s, int64_t v, int32_t *ret)
{
	P_(KeyValueAndUnit) *kv;
	C_(AnyValue) *val;

	if (e->n_attrs >= INT32_MAX)
		return -E2BIG;
	if (grow((void **)&e->attrs, &e->cap_attrs, e->n_attrs + 1, sizeof(*e->attrs)) < 0)
		return -ENOMEM;
	kv = arena_alloc(e->a, sizeof(*kv));
	val = arena_alloc(e->a, sizeof(*val));
	if (!kv || !val)
		return -ENOMEM;
	p_init(key_value_and_unit)(kv);
	c_init(any_value)(val);
	kv->key_strindex = key;
	if (s) {
		val->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		/* Borrowed from the model or constant: packing only reads it. */
		val->string_value = (char *)s;
	} else {
		val->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		val->int_value = v;
	}
	kv->value = val;
	e->attrs[e->n_attrs] = kv;
	*ret = (int32_t)e->n_attrs++;
	return 0;
}

static const char *mstr(const struct pmodel *m, uint32_t i)
{
	return i < m->n_strings && m->strings[i] ? m->strings[i] : "";
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
		r = add_const(e, "profile.frame.type", &e->k_frame_type);
	if (r == 0)
		r = add_const(e, "process.executable.build_id.gnu", &e->k_build_gnu);
	if (r == 0)
		r = add_const(e, "process.executable.build_id.htlhash", &e->k_build_htl);
	if (r == 0)
		r = add_const(e, "thread.id", &e->k_tid);
	if (r == 0)
		r = add_const(e, "thread.name", &e->k_tname);
	/* Values are counts of samples; the period says what one is worth
	 * in CPU time (docs/exports.md, "Value types"). */
	if (r == 0)
		r = add_const(e, "samples", &e->s_samples);
	if (r == 0)
		r = add_const(e, "count", &e->s_count);
	if (r == 0)
		r = add_const(e, "cpu", &e->s_cpu);
	if (r == 0)
		r = add_const(e, "nanoseconds", &e->s_ns);
	if (r == 0)
		r = add_const(e, pm_profile_value_types(e->m->profile)->sample_type, &e->s_type);
	if (r == 0)
		r = add_const(e, pm_profile_value_types(e->m->profile)->sample_unit, &e->s_unit);
	if (r == 0)
		r = add_const(e, pm_profile_value_types(e->m->profile)->period_type, &e->s_ptype);
	if (r == 0)
		r = add_const(e, pm_profile_value_types(e->m->profile)->period_unit, &e->s_punit);
	if (r < 0)
		return r;

	if (grow((void **)&e->attrs, &e->cap_attrs, 1, sizeof(*e->attrs)) < 0)
		return -ENOMEM;
	zero = arena_alloc(e->a, sizeof(*zero));
	if (!zero)
		return -ENOMEM;
	p_init(key_value_and_unit)(zero);
	e->attrs[e->n_attrs++] = zero;
	for (int t = 0; t < PM_N_FRAME_TYPES; t++) {
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
			r = add_attr(e, e->k_build_gnu, mstr(m, pm->build_id), 0, &ix[o->n_attribute_indices++]);
		if (r == 0 && pm->file_id)
			r = add_attr(e, e->k_build_htl, mstr(m, pm->file_id), 0, &ix[o->n_attribute_indices++]);
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
			: add_attr(e, e->k_tname, mstr(e->m, v), 0, &ix);
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
	o->values = vals;
	o->timestamps_unix_nano = ts;
	/* The model keeps the first and last time of an aggregated sample,
	 * not each one: the first sample is put at first_ns and the rest at
	 * last_ns, so the values still add up to count. Without a time it
	 * is one aggregated value, the other shape (a Profile of its own). */
	if (m->profile != PM_PROFILE_CPU) {
		/* One weight (ns, bytes) at the first sample's time: the
		 * model does not keep each sample's own. */
		vals[0] = s->weight > INT64_MAX ? INT64_MAX : (int64_t)s->weight;
		o->n_values = 1;
		if (s->first_ns) {
			ts[0] = s->first_ns;
			o->n_timestamps_unix_nano = 1;
		}
	} else if (s->first_ns && s->count >= 2) {
		vals[0] = 1;
		vals[1] = (int64_t)(s->count - 1);
		ts[0] = s->first_ns;
		ts[1] = s->last_ns >= s->first_ns ? s->last_ns : s->first_ns;
		o->n_values = o->n_timestamps_unix_nano = 2;
	} else {
		vals[0] = (int64_t)s->count;
		o->n_values = 1;
		if (s->first_ns) {
			ts[0] = s->first_ns;
			o->n_timestamps_unix_nano = 1;
		}
	}
	return 0;
}

/* A string resource attribute, left out when the model has none. */
static int res_str(struct enc *e, C_(KeyValue) **kvs, size_t *n, const char *key, uint32_t v)
{
	if (!v)
		return 0;
	return otlp_kv_add(e->a, kvs, n, key, mstr(e->m, v), 0);
}

/* The resource of process p: the node's host.name and host.id, the
 * process's attributes (docs/exports.md). */
static int enc_resource_attrs(struct enc *e, const struct pm_process *p, otlp_resource *res)
{
	const struct pmodel *m = e->m;
	C_(KeyValue) **kvs = arena_alloc(e->a, 8 * sizeof(*kvs));
	const char *exe_name = p->exe_name ? mstr(m, p->exe_name) : mstr(m, p->comm);
	int r;

	if (!kvs)
		return -ENOMEM;
	opentelemetry__proto__resource__v1__resource__init(res);
	r = otlp_kv_add(e->a, kvs, &res->n_attributes, "host.name", mstr(m, p->host_name), 0);
	if (r == 0)
		r = res_str(e, kvs, &res->n_attributes, "host.id", p->host_id);
	if (r == 0)
		r = otlp_kv_add(e->a, kvs, &res->n_attributes, "process.pid", NULL, p->pid);
	if (r == 0)
		r = otlp_kv_add(e->a, kvs, &res->n_attributes, "process.executable.name", exe_name, 0);
	if (r == 0)
		r = res_str(e, kvs, &res->n_attributes, "process.executable.path", p->exe_path);
	if (r == 0)
		r = res_str(e, kvs, &res->n_attributes, "process.command_line", p->command_line);
	if (r == 0)
		r = res_str(e, kvs, &res->n_attributes, "container.id", p->container_id);
	if (r == 0)
		r = res_str(e, kvs, &res->n_attributes, "k8s.pod.uid", p->pod_uid);
	res->attributes = kvs;
	return r;
}

/* A Profile of n samples, all of one shape. */
static P_(Profile) *enc_profile(struct enc *e, P_(Sample) **samples, size_t n)
{
	const struct pmodel *m = e->m;
	P_(Profile) *pr = arena_alloc(e->a, sizeof(*pr));
	P_(ValueType) *st = arena_alloc(e->a, sizeof(*st));
	P_(ValueType) *pt = arena_alloc(e->a, sizeof(*pt));
	uint8_t *id = arena_alloc(e->a, 16);

	if (!pr || !st || !pt || !id)
		return NULL;
	p_init(profile)(pr);
	p_init(value_type)(st);
	st->type_strindex = e->s_type;
	st->unit_strindex = e->s_unit;
	pr->sample_type = st;
	if (m->profile != PM_PROFILE_CPU) {
		/* Values are weights; the period is one event (a context
		 * switch, a growth). */
		p_init(value_type)(pt);
		pt->type_strindex = e->s_ptype;
		pt->unit_strindex = e->s_punit;
		pr->period_type = pt;
		pr->period = 1;
	} else if (m->period_ns) {
		/* A sample is worth period ns of CPU; unknown rate: no period. */
		p_init(value_type)(pt);
		pt->type_strindex = e->s_cpu;
		pt->unit_strindex = e->s_ns;
		pr->period_type = pt;
		pr->period = (int64_t)m->period_ns;
	}
	pr->time_unix_nano = m->start_ns;
	pr->duration_nano = m->end_ns > m->start_ns ? m->end_ns - m->start_ns : 0;
	pr->samples = samples;
	pr->n_samples = n;
	/* An ID helps receivers drop a request resent after a lost reply;
	 * without randomness it is left out (all zeroes is invalid). */
	if (getrandom(id, 16, GRND_NONBLOCK) == 16) {
		pr->profile_id.data = id;
		pr->profile_id.len = 16;
	}
	return pr;
}

/* The ResourceProfiles of process p: n_timed samples with timestamps
 * first, then n_untimed without (one aggregated value), each shape in a
 * Profile of its own, as the spec wants one shape per Profile. */
static int enc_resource(struct enc *e, const struct pm_process *p, P_(ResourceProfiles) *rp,
			P_(Sample) **samples, size_t n_timed, size_t n_untimed)
{
	otlp_resource *res = arena_alloc(e->a, sizeof(*res));
	P_(ScopeProfiles) *sp = arena_alloc(e->a, sizeof(*sp));
	P_(ScopeProfiles) **sps = arena_alloc(e->a, sizeof(*sps));
	C_(InstrumentationScope) *scope = arena_alloc(e->a, sizeof(*scope));
	P_(Profile) **prs = arena_alloc(e->a, 2 * sizeof(*prs));
	int r;

	if (!res || !sp || !sps || !scope || !prs)
		return -ENOMEM;
	r = enc_resource_attrs(e, p, res);
	if (r < 0)
		return r;
	c_init(instrumentation_scope)(scope);
	scope->name = "sonde";
	scope->version = SONDE_VERSION;
	p_init(scope_profiles)(sp);
	sp->scope = scope;
	sp->profiles = prs;
	if (n_timed && !(prs[sp->n_profiles++] = enc_profile(e, samples, n_timed)))
		return -ENOMEM;
	if (n_untimed && !(prs[sp->n_profiles++] = enc_profile(e, samples + n_timed, n_untimed)))
		return -ENOMEM;
	sps[0] = sp;
	p_init(resource_profiles)(rp);
	rp->resource = res;
	rp->scope_profiles = sps;
	rp->n_scope_profiles = 1;
	return 0;
}

/* One ResourceProfiles per process, with its samples. */
static int enc_processes(struct enc *e, otlp_request *req)
{
	const struct pmodel *m = e->m;
	size_t np = m->n_processes;
	size_t *count = calloc(np ? np : 1, sizeof(size_t));
	size_t *fill = calloc(np ? np : 1, sizeof(size_t));
	size_t *timed = calloc(np ? np : 1, sizeof(size_t));
	P_(Sample) ***per = calloc(np ? np : 1, sizeof(*per));
	P_(ResourceProfiles) **rps = NULL;
	size_t n_rp = 0;
	int r = -ENOMEM;

	if (!count || !fill || !per || !timed)
		goto cleanup;
	for (size_t i = 0; i < m->n_samples; i++) {
		if (m->samples[i].process >= np)
			continue;
		count[m->samples[i].process]++;
		if (m->samples[i].first_ns)
			timed[m->samples[i].process]++;
	}
	rps = arena_alloc(e->a, (np ? np : 1) * sizeof(*rps));
	if (!rps)
		goto cleanup;
	/* From here on timed[p] is where p's next untimed sample goes (after
	 * its timed ones), fill[p] where its next timed one goes. */
	for (size_t p = 0; p < np; p++) {
		if (!count[p])
			continue;
		per[p] = arena_alloc(e->a, count[p] * sizeof(**per));
		if (!per[p])
			goto cleanup;
	}
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct pm_sample *s = &m->samples[i];
		P_(Sample) *o;

		if (s->process >= np)
			continue;
		o = arena_alloc(e->a, sizeof(*o));
		if (!o)
			goto cleanup;
		p_init(sample)(o);
		r = enc_sample(e, s, o);
		if (r < 0)
			goto cleanup;
		/* Timed samples first, then untimed ones, in model order. */
		if (s->first_ns)
			per[s->process][fill[s->process]++] = o;
		else
			per[s->process][timed[s->process]++] = o;
	}
	for (size_t p = 0; p < np; p++) {
		if (!count[p])
			continue;
		rps[n_rp] = arena_alloc(e->a, sizeof(**rps));
		if (!rps[n_rp]) {
			r = -ENOMEM;
			goto cleanup;
		}
		/* fill[p] ended at the number of timed samples. */
		r = enc_resource(e, &m->processes[p], rps[n_rp], per[p], fill[p], count[p] - fill[p]);
		if (r < 0)
			goto cleanup;
		n_rp++;
	}
	req->resource_profiles = rps;
	req->n_resource_profiles = n_rp;
	r = 0;
cleanup:
	free(count);
	free(fill);
	free(timed);
	free(per);
	return r;
}

int otlp_encode(const struct pmodel *m, uint8_t **ret, size_t *ret_len)
{
	struct enc e = { .m = m };
	otlp_request req;
	P_(ProfilesDictionary) dict;
	uint8_t *out = NULL;
	size_t len;
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
		r = enc_processes(&e, &req);
	if (r < 0)
		goto cleanup;
	dict.string_table = e.strings;
	dict.n_string_table = e.n_strings;
	dict.attribute_table = e.attrs;
	dict.n_attribute_table = e.n_attrs;
	req.dictionary = &dict;

	len = protobuf_c_message_get_packed_size(&req.base);
	out = malloc(len ? len : 1);
	if (!out) {
		r = -ENOMEM;
		goto cleanup;
	}
	protobuf_c_message_pack(&req.base, out);
	*ret = out;
	*ret_len = len;
	r = 0;
cleanup:
	hmap_free(e.sample_attrs, NULL);
	free(e.strings);
	free(e.attrs);
	arena_free(e.a);
	return r;
}
