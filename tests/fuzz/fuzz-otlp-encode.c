/* fuzz-otlp-encode.c - fuzzes both OTLP profiles encoders (otlp.c, the
 * v1.10/v1.11 layout; otlp_v150.c, v1.5.0's) with models built from the
 * input by the pm_* builders, as model_symbolize.c builds them from what
 * sensors send: any mix of mappings, functions, locations (lines, frame
 * types), stacks, processes, samples with or without times, and links.
 * Both must encode (or report -ENOMEM/-E2BIG), their bytes must unpack,
 * every index of the v1.5.0 request must be inside its Profile's tables,
 * and the values of each must add up to the model's samples.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "otlp.h"
#include "otlp_profiles_service.pb-c.h"
#include "otlp_v150.h"
#include "otlp_v150_profiles_service.pb-c.h"

#define FUZZ_MAX_INPUT 4096

#define V_(x) Otlp150__Profiles__V1development__##x
typedef Otlp150__Collector__Profiles__V1development__ExportProfilesServiceRequest vreq_t;
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest req_t;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct in {
	const uint8_t *p;
	size_t n;
};

static uint32_t take(struct in *in, size_t bytes)
{
	uint32_t v = 0;

	for (size_t i = 0; i < bytes && in->n; i++, in->p++, in->n--)
		v = v << 8 | *in->p;
	return v;
}

static void add_location(struct pmodel *m, struct in *in)
{
	struct pm_line lines[3];
	size_t n = m->n_functions ? take(in, 1) % 4 : 0;
	uint32_t mapping = take(in, 1) % (m->n_mappings + 1), type = take(in, 1) % (PM_N_FRAME_TYPES + 1);
	uint32_t ret;

	n = n > 3 ? 3 : n;
	for (size_t k = 0; k < n; k++)
		lines[k] = (struct pm_line){ take(in, 1) % m->n_functions, take(in, 1) };
	pm_location(m, mapping, take(in, 2), type, lines, n, &ret);
}

static void add_stack(struct pmodel *m, struct in *in)
{
	uint32_t locs[8], ret;
	size_t n = m->n_locations ? take(in, 1) % 9 : 0;

	for (size_t k = 0; k < n; k++)
		locs[k] = take(in, 1) % m->n_locations;
	pm_stack(m, locs, n, &ret);
}

static void add_sample(struct pmodel *m, struct in *in)
{
	struct pm_sample s = { 0 };
	uint32_t flags = take(in, 1);
	char name[16];

	if (!m->n_stacks || !m->n_processes)
		return;
	s.stack = take(in, 1) % m->n_stacks;
	s.process = take(in, 1) % m->n_processes;
	s.tid = flags & 1 ? take(in, 1) : 0;
	s.count = take(in, 1) + 1;
	s.weight = m->profile == PM_PROFILE_CPU ? 0 : take(in, 2);
	if (flags & 2) {
		s.first_ns = 1000 + take(in, 1);
		s.last_ns = s.first_ns + take(in, 1);
	}
	if (flags & 4 && m->n_links)
		s.link = take(in, 1) % m->n_links + 1;
	if (flags & 8) {
		snprintf(name, sizeof(name), "t%u", take(in, 1) % 4);
		pm_string(m, name, &s.thread_name);
	}
	pm_sample(m, &s);
}

static void add_other(struct pmodel *m, struct in *in, uint32_t op)
{
	uint8_t id[24] = { 0 };
	char name[16];
	struct pm_process p = { 0 };
	uint32_t ret;

	snprintf(name, sizeof(name), "n%u", take(in, 1) % 8);
	switch (op) {
	case 0:
		id[0] = (uint8_t)take(in, 1);
		pm_mapping(m, id, name, take(in, 1) & 1 ? "00aa" : NULL, take(in, 2), &ret);
		break;
	case 1:
		pm_function(m, name, NULL, take(in, 1) & 1 ? "f.c" : NULL, &ret);
		break;
	case 2:
		p.pid = take(in, 1);
		pm_string(m, name, &p.host_name);
		pm_process(m, &p, &ret);
		break;
	default:
		memcpy(id, name, strlen(name));
		id[23] = (uint8_t)take(in, 1);
		pm_link(m, id, &ret);
		break;
	}
}

static void build(struct pmodel *m, struct in *in)
{
	m->profile = take(in, 1) % PM_PROFILES;
	m->period_ns = take(in, 1) & 1 ? 10000000 : 0;
	while (in->n) {
		uint32_t op = take(in, 1) % 7;

		if (op == 4)
			add_location(m, in);
		else if (op == 5)
			add_stack(m, in);
		else if (op == 6)
			add_sample(m, in);
		else
			add_other(m, in, op);
	}
}

static void check_index(int32_t i, size_t n)
{
	if (i < 0 || (size_t)i >= n)
		abort();
}

static uint64_t check_profile(const V_(Profile) *p)
{
	uint64_t total = 0;

	if (p->n_string_table == 0 || p->string_table[0][0] || p->n_sample_type != 1)
		abort();
	for (size_t i = 0; i < p->n_location_table; i++) {
		const V_(Location) *l = p->location_table[i];

		if (l->optional_mapping_index_case)
			check_index(l->mapping_index, p->n_mapping_table);
		for (size_t k = 0; k < l->n_line; k++)
			check_index(l->line[k]->function_index, p->n_function_table);
		for (size_t k = 0; k < l->n_attribute_indices; k++)
			check_index(l->attribute_indices[k], p->n_attribute_table);
	}
	for (size_t i = 0; i < p->n_location_indices; i++)
		check_index(p->location_indices[i], p->n_location_table);
	for (size_t i = 0; i < p->n_sample; i++) {
		const V_(Sample) *s = p->sample[i];

		if (s->n_value != 1 || s->locations_start_index < 0 || s->locations_length < 0 ||
		    (size_t)s->locations_start_index + (size_t)s->locations_length > p->n_location_indices ||
		    (s->n_timestamps_unix_nano != 0) != (p->sample[0]->n_timestamps_unix_nano != 0))
			abort();
		if (s->optional_link_index_case)
			check_index(s->link_index, p->n_link_table);
		for (size_t k = 0; k < s->n_attribute_indices; k++)
			check_index(s->attribute_indices[k], p->n_attribute_table);
		total += (uint64_t)s->value[0];
	}
	return total;
}

/* m encoded by enc and unpacked by unpack; NULL when the encoder ran
 * out of memory or index room, the only failures allowed. */
static void *encode(const struct pmodel *m, int (*enc)(const struct pmodel *, uint8_t **, size_t *),
		    void *(*unpack)(ProtobufCAllocator *, size_t, const uint8_t *))
{
	uint8_t *buf = NULL;
	size_t len = 0;
	void *msg;
	int e = enc(m, &buf, &len);

	if (e == -ENOMEM || e == -E2BIG)
		return NULL;
	msg = e == 0 ? unpack(NULL, len, buf) : NULL;
	if (!msg)
		abort();
	free(buf);
	return msg;
}

static void check_v150(const struct pmodel *m)
{
	uint64_t total = 0;
	vreq_t *r = encode(m, otlp_v150_encode,
			   (void *(*)(ProtobufCAllocator *, size_t, const uint8_t *))
			   otlp150__collector__profiles__v1development__export_profiles_service_request__unpack);

	if (!r)
		return;
	for (size_t i = 0; i < r->n_resource_profiles; i++)
		for (size_t k = 0; k < r->resource_profiles[i]->scope_profiles[0]->n_profiles; k++)
			total += check_profile(r->resource_profiles[i]->scope_profiles[0]->profiles[k]);
	if (m->profile == PM_PROFILE_CPU && total != m->total)
		abort();
	otlp150__collector__profiles__v1development__export_profiles_service_request__free_unpacked(r, NULL);
}

static void check_current(const struct pmodel *m)
{
	uint64_t total = 0;
	req_t *r = encode(m, otlp_encode,
			  (void *(*)(ProtobufCAllocator *, size_t, const uint8_t *))
			  opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack);

	if (!r)
		return;
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
			r->resource_profiles[i]->scope_profiles[0];

		for (size_t k = 0; k < sp->n_profiles; k++)
			for (size_t j = 0; j < sp->profiles[k]->n_samples; j++)
				for (size_t v = 0; v < sp->profiles[k]->samples[j]->n_values; v++)
					total += (uint64_t)sp->profiles[k]->samples[j]->values[v];
	}
	if (m->profile == PM_PROFILE_CPU && total != m->total)
		abort();
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct pmodel m;

	if (size <= FUZZ_MAX_INPUT && pm_init(&m) == 0) {
		build(&m, &in);
		check_v150(&m);
		check_current(&m);
		pm_free(&m);
	}
	return 0;
}
