/* otlp_plan.c - see otlp_plan.h. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "arena.h"
#include "otlp_kv.h"
#include "otlp_plan.h"

int otlp_plan_grow(void **p, size_t *cap, size_t need, size_t elem)
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

int otlp_vec_push(struct otlp_vec *t, void *p, int32_t *ret)
{
	if (t->n >= INT32_MAX)
		return -E2BIG;
	if (otlp_plan_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(void *)) < 0)
		return -ENOMEM;
	t->v[t->n] = p;
	*ret = (int32_t)t->n++;
	return 0;
}

int otlp_plan_resources(struct arena *a, const struct pmodel *m, struct otlp_plan *plan, size_t size,
			int (*fill)(void *ctx, const struct otlp_plan *plan,
				    const struct otlp_plan_resource *res, void *msg),
			void *ctx, void ***ret, size_t *n)
{
	void **arr;
	int r = otlp_plan_build(m, plan);

	if (r < 0)
		return r;
	arr = arena_alloc(a, (plan->n_resources ? plan->n_resources : 1) * sizeof(void *));
	r = arr ? 0 : -ENOMEM;
	for (size_t i = 0; r == 0 && i < plan->n_resources; i++) {
		arr[i] = arena_alloc(a, size);
		r = arr[i] ? fill(ctx, plan, &plan->resources[i], arr[i]) : -ENOMEM;
	}
	*ret = arr;
	*n = r == 0 ? plan->n_resources : 0;
	return r;
}

const char *otlp_plan_str(const struct pmodel *m, uint32_t i)
{
	return i < m->n_strings && m->strings[i] ? m->strings[i] : "";
}

/* Where each process's timed and untimed samples start in order[]:
 * start[2p] and start[2p + 1], process by process. */
static void plan_starts(const struct pmodel *m, size_t *start)
{
	size_t at = 0, np = m->n_processes;

	for (size_t i = 0; i < m->n_samples; i++)
		if (m->samples[i].process < np)
			start[2 * m->samples[i].process + (m->samples[i].first_ns ? 0 : 1)]++;
	for (size_t k = 0; k < 2 * np; k++) {
		size_t n = start[k];

		start[k] = at;
		at += n;
	}
}

int otlp_plan_build(const struct pmodel *m, struct otlp_plan *ret)
{
	size_t np = m->n_processes;
	size_t *start = calloc(2 * np + 1, sizeof(size_t));
	size_t *fill = calloc(2 * np + 1, sizeof(size_t));
	struct otlp_plan p = { 0 };
	int r = -ENOMEM;

	p.order = malloc((m->n_samples ? m->n_samples : 1) * sizeof(uint32_t));
	p.profiles = malloc((2 * np + 1) * sizeof(*p.profiles));
	p.resources = malloc((np + 1) * sizeof(*p.resources));
	if (!start || !fill || !p.order || !p.profiles || !p.resources)
		goto cleanup;
	plan_starts(m, start);
	memcpy(fill, start, 2 * np * sizeof(size_t));
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct pm_sample *s = &m->samples[i];

		if (s->process < np)
			p.order[fill[2 * s->process + (s->first_ns ? 0 : 1)]++] = (uint32_t)i;
	}
	for (size_t k = 0; k < 2 * np; k++) {
		if (fill[k] == start[k])
			continue;
		if (!p.n_resources || p.profiles[p.n_profiles - 1].process != k / 2)
			p.resources[p.n_resources++] = (struct otlp_plan_resource){ p.n_profiles, 0 };
		p.resources[p.n_resources - 1].n++;
		p.profiles[p.n_profiles++] = (struct otlp_plan_profile){
			.process = (uint32_t)(k / 2), .timed = k % 2 == 0,
			.samples = p.order + start[k], .n_samples = fill[k] - start[k],
		};
	}
	*ret = p;
	p = (struct otlp_plan){ 0 };
	r = 0;
cleanup:
	otlp_plan_free(&p);
	free(start);
	free(fill);
	return r;
}

void otlp_plan_free(struct otlp_plan *p)
{
	free(p->profiles);
	free(p->resources);
	free(p->order);
	*p = (struct otlp_plan){ 0 };
}

void otlp_plan_types(const struct pmodel *m, struct otlp_plan_types *ret)
{
	const struct pm_value_types *vt = pm_profile_value_types(m->profile);

	*ret = (struct otlp_plan_types){ .sample_type = vt->sample_type,
					 .sample_unit = vt->sample_unit };
	if (m->profile != PM_PROFILE_CPU) {
		/* Values are weights; the period is one event (a context
		 * switch, a growth). */
		ret->period = 1;
	} else if (m->period_ns) {
		/* A sample is worth period ns of CPU; unknown rate: no period. */
		ret->period = m->period_ns > INT64_MAX ? INT64_MAX : (int64_t)m->period_ns;
	} else {
		return;
	}
	ret->period_type = vt->period_type;
	ret->period_unit = vt->period_unit;
}

void otlp_plan_values(const struct pmodel *m, const struct pm_sample *s, bool per_timestamp,
		      struct otlp_plan_values *ret)
{
	uint64_t last = s->last_ns >= s->first_ns ? s->last_ns : s->first_ns;

	*ret = (struct otlp_plan_values){ .n_v = 1 };
	if (m->profile != PM_PROFILE_CPU) {
		/* One weight (ns, bytes) at the first sample's time: the
		 * model does not keep each sample's own. */
		ret->v[0] = s->weight > INT64_MAX ? INT64_MAX : (int64_t)s->weight;
	} else if (per_timestamp && s->first_ns && s->count >= 2) {
		/* The model keeps the first and last time of an aggregated
		 * sample, not each one: the first at first_ns, the rest at
		 * last_ns, so the values still add up to count. */
		ret->v[0] = 1;
		ret->v[1] = s->count - 1 > INT64_MAX ? INT64_MAX : (int64_t)(s->count - 1);
		ret->n_v = 2;
		ret->ts[0] = s->first_ns;
		ret->ts[1] = last;
		ret->n_ts = 2;
		return;
	} else {
		ret->v[0] = s->count > INT64_MAX ? INT64_MAX : (int64_t)s->count;
	}
	if (s->first_ns)
		ret->ts[ret->n_ts++] = s->first_ns;
	if (s->first_ns && m->profile == PM_PROFILE_CPU && s->count >= 2)
		ret->ts[ret->n_ts++] = last;
}

/* A string resource attribute, left out when the model has none. */
static int res_str(struct arena *a, const struct pmodel *m,
		   Opentelemetry__Proto__Common__V1__KeyValue **kvs, size_t *n, const char *key, uint32_t v)
{
	if (!v)
		return 0;
	return otlp_kv_add(a, kvs, n, key, otlp_plan_str(m, v), 0);
}

int otlp_plan_resource(struct arena *a, const struct pmodel *m, const struct pm_process *p,
		       Opentelemetry__Proto__Resource__V1__Resource *res)
{
	Opentelemetry__Proto__Common__V1__KeyValue **kvs = arena_alloc(a, 8 * sizeof(*kvs));
	const char *exe_name = otlp_plan_str(m, p->exe_name ? p->exe_name : p->comm);
	size_t *n = &res->n_attributes;
	int r;

	opentelemetry__proto__resource__v1__resource__init(res);
	if (!kvs)
		return -ENOMEM;
	r = otlp_kv_add(a, kvs, n, "host.name", otlp_plan_str(m, p->host_name), 0);
	if (r == 0)
		r = res_str(a, m, kvs, n, "host.id", p->host_id);
	if (r == 0)
		r = otlp_kv_add(a, kvs, n, "process.pid", NULL, p->pid);
	if (r == 0)
		r = otlp_kv_add(a, kvs, n, "process.executable.name", exe_name, 0);
	if (r == 0)
		r = res_str(a, m, kvs, n, "process.executable.path", p->exe_path);
	if (r == 0)
		r = res_str(a, m, kvs, n, "process.command_line", p->command_line);
	if (r == 0)
		r = res_str(a, m, kvs, n, "container.id", p->container_id);
	if (r == 0)
		r = res_str(a, m, kvs, n, "k8s.pod.uid", p->pod_uid);
	res->attributes = kvs;
	return r;
}

Opentelemetry__Proto__Common__V1__InstrumentationScope *otlp_plan_scope(struct arena *a)
{
	Opentelemetry__Proto__Common__V1__InstrumentationScope *scope = arena_alloc(a, sizeof(*scope));

	if (!scope)
		return NULL;
	opentelemetry__proto__common__v1__instrumentation_scope__init(scope);
	scope->name = "sonde";
	scope->version = SONDE_VERSION;
	return scope;
}

ProtobufCBinaryData otlp_plan_profile_id(struct arena *a)
{
	uint8_t *id = arena_alloc(a, 16);

	/* An ID helps receivers drop a request resent after a lost reply. */
	if (!id || getrandom(id, 16, GRND_NONBLOCK) != 16)
		return (ProtobufCBinaryData){ 0, NULL };
	return (ProtobufCBinaryData){ 16, id };
}
