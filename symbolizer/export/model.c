/* model.c - the builders of a profile model (see model.h). Each table has
 * a hash map from its entry's identity to index + 1, so adding what is
 * already there costs one lookup. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fileid.h"
#include "hmap.h"
#include "interp_kinds.h"
#include "model.h"
#include "utf8.h"

struct pm_index {
	struct hmap *strings, *mappings, *functions, *locations, *stacks, *processes, *samples;
	struct hmap *links;
	size_t cap_strings, cap_mappings, cap_functions, cap_lines, cap_locations, cap_stack_locs,
		cap_stacks, cap_processes, cap_samples, cap_links;
};

static const char *const frame_type_names[PM_FRAME_INTERP] = {
	[PM_FRAME_NATIVE] = "native",
	[PM_FRAME_KERNEL] = "kernel",
	[PM_FRAME_GO] = "go",
};

const char *pm_frame_type_name(enum pm_frame_type t)
{
	const char *name;

	if ((unsigned)t < PM_FRAME_INTERP)
		return frame_type_names[t];
	if ((unsigned)t >= PM_N_FRAME_TYPES)
		return "native";
	name = sonde_interp_kind_name((uint32_t)t - PM_FRAME_INTERP + 1);
	return name ? name : "native";
}

/* Makes room for one more element of size sz in *arr (n used, *cap). */
static int grow(void *arr, size_t n, size_t *cap, size_t sz, size_t *bytes)
{
	void **p = arr;
	size_t nc;
	void *na;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	na = realloc(*p, nc * sz);
	if (!na)
		return -ENOMEM;
	*bytes += (nc - *cap) * sz;
	*p = na;
	*cap = nc;
	return 0;
}

static inline void *idx_val(size_t i)
{
	return (void *)(uintptr_t)(i + 1);
}

static inline uint32_t val_idx(void *v)
{
	return (uint32_t)((uintptr_t)v - 1);
}

int pm_init(struct pmodel *m)
{
	uint32_t empty;

	memset(m, 0, sizeof(*m));
	m->ix = calloc(1, sizeof(*m->ix));
	if (!m->ix)
		return -ENOMEM;
	m->ix->strings = hmap_new();
	m->ix->mappings = hmap_new();
	m->ix->functions = hmap_new();
	m->ix->locations = hmap_new();
	m->ix->stacks = hmap_new();
	m->ix->processes = hmap_new();
	m->ix->samples = hmap_new();
	m->ix->links = hmap_new();
	if (!m->ix->strings || !m->ix->mappings || !m->ix->functions || !m->ix->locations ||
	    !m->ix->stacks || !m->ix->processes || !m->ix->samples || !m->ix->links ||
	    pm_string(m, "", &empty) < 0) {
		pm_free(m);
		return -ENOMEM;
	}
	return 0;
}

void pm_free(struct pmodel *m)
{
	if (m->ix) {
		hmap_free(m->ix->strings, NULL);
		hmap_free(m->ix->mappings, NULL);
		hmap_free(m->ix->functions, NULL);
		hmap_free(m->ix->locations, NULL);
		hmap_free(m->ix->stacks, NULL);
		hmap_free(m->ix->processes, NULL);
		hmap_free(m->ix->samples, NULL);
		hmap_free(m->ix->links, NULL);
		free(m->ix);
	}
	for (size_t i = 0; i < m->n_strings; i++)
		free(m->strings[i]);
	free(m->strings);
	free(m->mappings);
	free(m->functions);
	free(m->lines);
	free(m->locations);
	free(m->stack_locs);
	free(m->stacks);
	free(m->processes);
	free(m->samples);
	free(m->links);
	memset(m, 0, sizeof(*m));
}

int pm_string(struct pmodel *m, const char *s, uint32_t *ret)
{
	size_t len;
	void *v;
	char *copy;

	if (!s)
		s = "";
	len = strlen(s);
	v = hmap_get(m->ix->strings, s, len);
	if (v) {
		*ret = val_idx(v);
		return 0;
	}
	if (grow(&m->strings, m->n_strings, &m->ix->cap_strings, sizeof(*m->strings), &m->bytes) < 0)
		return -ENOMEM;
	/* Names and paths come from targets; pprof and OTLP strings must be
	 * UTF-8 for their decoders (common/utf8.h). */
	copy = utf8_valid(s, len) ? strdup(s) : utf8_escape_dup(s, SIZE_MAX - 1);
	if (!copy)
		return -ENOMEM;
	if (hmap_put(m->ix->strings, s, len, idx_val(m->n_strings), NULL) < 0) {
		free(copy);
		return -ENOMEM;
	}
	m->bytes += len + 1;
	m->strings[m->n_strings] = copy;
	*ret = (uint32_t)m->n_strings++;
	return 0;
}

int pm_mapping(struct pmodel *m, const uint8_t file_id[16], const char *path, const char *build_id,
	       uint64_t size, uint32_t *ret)
{
	struct pm_mapping mp = { .size = size };
	char id_hex[FILEID_HEX_LEN + 1];
	void *v = hmap_get(m->ix->mappings, file_id, 16);

	if (v) {
		*ret = val_idx(v);
		return 0;
	}
	bytes_to_hex(file_id, FILEID_LEN, id_hex);
	if (pm_string(m, path, &mp.path) < 0 || pm_string(m, build_id, &mp.build_id) < 0 ||
	    pm_string(m, id_hex, &mp.file_id) < 0)
		return -ENOMEM;
	if (grow(&m->mappings, m->n_mappings, &m->ix->cap_mappings, sizeof(mp), &m->bytes) < 0 ||
	    hmap_put(m->ix->mappings, file_id, 16, idx_val(m->n_mappings), NULL) < 0)
		return -ENOMEM;
	m->mappings[m->n_mappings] = mp;
	*ret = (uint32_t)m->n_mappings++;
	return 0;
}

int pm_function(struct pmodel *m, const char *name, const char *system_name, const char *file,
		uint32_t *ret)
{
	struct pm_function f;
	void *v;

	if (pm_string(m, name, &f.name) < 0 || pm_string(m, system_name ? system_name : name,
							  &f.system_name) < 0 ||
	    pm_string(m, file, &f.file) < 0)
		return -ENOMEM;
	v = hmap_get(m->ix->functions, &f, sizeof(f));
	if (v) {
		*ret = val_idx(v);
		return 0;
	}
	if (grow(&m->functions, m->n_functions, &m->ix->cap_functions, sizeof(f), &m->bytes) < 0 ||
	    hmap_put(m->ix->functions, &f, sizeof(f), idx_val(m->n_functions), NULL) < 0)
		return -ENOMEM;
	m->functions[m->n_functions] = f;
	*ret = (uint32_t)m->n_functions++;
	return 0;
}

/* Kernel and user addresses never overlap, so mapping 0 serves both. */
struct loc_key {
	uint64_t address;
	uint32_t mapping, pad;
};

bool pm_find_location(const struct pmodel *m, uint32_t mapping, uint64_t address, uint32_t *ret)
{
	struct loc_key key = { address, mapping, 0 };
	void *v = hmap_get(m->ix->locations, &key, sizeof(key));

	if (v)
		*ret = val_idx(v);
	return v != NULL;
}

int pm_location(struct pmodel *m, uint32_t mapping, uint64_t address, enum pm_frame_type type,
		const struct pm_line *lines, size_t n_lines, uint32_t *ret)
{
	struct loc_key key = { address, mapping, 0 };
	struct pm_location loc = { .mapping = mapping, .address = address, .type = (uint8_t)type };
	void *v = hmap_get(m->ix->locations, &key, sizeof(key));

	if (v) {
		*ret = val_idx(v);
		return 0;
	}
	loc.first_line = (uint32_t)m->n_lines;
	for (size_t i = 0; i < n_lines; i++) {
		if (grow(&m->lines, m->n_lines, &m->ix->cap_lines, sizeof(*m->lines), &m->bytes) < 0)
			return -ENOMEM;
		m->lines[m->n_lines++] = lines[i];
	}
	loc.n_lines = (uint32_t)n_lines;
	if (grow(&m->locations, m->n_locations, &m->ix->cap_locations, sizeof(loc), &m->bytes) < 0 ||
	    hmap_put(m->ix->locations, &key, sizeof(key), idx_val(m->n_locations), NULL) < 0) {
		m->n_lines = loc.first_line;
		return -ENOMEM;
	}
	m->locations[m->n_locations] = loc;
	*ret = (uint32_t)m->n_locations++;
	return 0;
}

int pm_stack(struct pmodel *m, const uint32_t *locs, size_t n, uint32_t *ret)
{
	struct pm_stack st = { .first_loc = (uint32_t)m->n_stack_locs, .n_locs = (uint32_t)n };
	void *v = hmap_get(m->ix->stacks, locs, n * sizeof(*locs));

	if (v) {
		*ret = val_idx(v);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (grow(&m->stack_locs, m->n_stack_locs, &m->ix->cap_stack_locs,
			 sizeof(*m->stack_locs), &m->bytes) < 0)
			goto nomem;
		m->stack_locs[m->n_stack_locs++] = locs[i];
	}
	if (grow(&m->stacks, m->n_stacks, &m->ix->cap_stacks, sizeof(st), &m->bytes) < 0 ||
	    hmap_put(m->ix->stacks, locs, n * sizeof(*locs), idx_val(m->n_stacks), NULL) < 0)
		goto nomem;
	m->stacks[m->n_stacks] = st;
	*ret = (uint32_t)m->n_stacks++;
	return 0;
nomem:
	m->n_stack_locs = st.first_loc;
	return -ENOMEM;
}

int pm_process(struct pmodel *m, const struct pm_process *p, uint32_t *ret)
{
	struct {
		uint32_t pid, host;
		uint64_t start;
	} key = { p->pid, p->host_name, p->start };
	void *v = hmap_get(m->ix->processes, &key, sizeof(key));

	if (v) {
		*ret = val_idx(v);
		return 0;
	}
	if (grow(&m->processes, m->n_processes, &m->ix->cap_processes, sizeof(*p), &m->bytes) < 0 ||
	    hmap_put(m->ix->processes, &key, sizeof(key), idx_val(m->n_processes), NULL) < 0)
		return -ENOMEM;
	m->processes[m->n_processes] = *p;
	*ret = (uint32_t)m->n_processes++;
	return 0;
}

int pm_link(struct pmodel *m, const uint8_t span[24], uint32_t *ret)
{
	void *v = hmap_get(m->ix->links, span, 24);

	if (v) {
		*ret = val_idx(v) + 1;
		return 0;
	}
	if (grow(&m->links, m->n_links, &m->ix->cap_links, sizeof(*m->links), &m->bytes) < 0 ||
	    hmap_put(m->ix->links, span, 24, idx_val(m->n_links), NULL) < 0)
		return -ENOMEM;
	memcpy(m->links[m->n_links].trace_id, span, 16);
	memcpy(m->links[m->n_links].span_id, span + 16, 8);
	*ret = (uint32_t)++m->n_links;
	return 0;
}

const struct pm_value_types *pm_profile_value_types(uint32_t profile)
{
	static const struct pm_value_types types[PM_PROFILES] = {
		[PM_PROFILE_CPU] = { "samples", "count", "cpu", "nanoseconds" },
		[PM_PROFILE_OFF_CPU] = { "off_cpu", "nanoseconds", "events", "count" },
		[PM_PROFILE_MEMORY] = { "memory", "bytes", "events", "count" },
	};

	return &types[profile < PM_PROFILES ? profile : PM_PROFILE_CPU];
}

const char *pm_profile_name(uint32_t profile)
{
	static const char *const names[PM_PROFILES] = { "cpu", "off-cpu", "memory" };

	return profile < PM_PROFILES ? names[profile] : "unknown";
}

int pm_sample(struct pmodel *m, const struct pm_sample *s)
{
	struct {
		uint32_t stack, process, tid, thread_name, link;
	} key = { s->stack, s->process, s->tid, s->thread_name, s->link };
	void *v = hmap_get(m->ix->samples, &key, sizeof(key));
	struct pm_sample *t;

	if (v) {
		t = &m->samples[val_idx(v)];
		t->count += s->count;
		t->weight = t->weight + s->weight < t->weight ? UINT64_MAX : t->weight + s->weight;
		if (s->first_ns && (!t->first_ns || s->first_ns < t->first_ns))
			t->first_ns = s->first_ns;
		if (s->last_ns > t->last_ns)
			t->last_ns = s->last_ns;
	} else {
		if (grow(&m->samples, m->n_samples, &m->ix->cap_samples, sizeof(*s), &m->bytes) < 0 ||
		    hmap_put(m->ix->samples, &key, sizeof(key), idx_val(m->n_samples), NULL) < 0)
			return -ENOMEM;
		m->samples[m->n_samples++] = *s;
	}
	m->total += s->count;
	if (s->first_ns && (!m->start_ns || s->first_ns < m->start_ns))
		m->start_ns = s->first_ns;
	if (s->last_ns > m->end_ns)
		m->end_ns = s->last_ns;
	return 0;
}
