/* pprof.c - encodes a profile model as a gzipped pprof Profile.
 *
 * The model's tables map 1:1 onto pprof's: model index i is pprof id
 * i + 1 (pprof ids start at 1, 0 means none), except mappings, which are
 * reordered so that the executable of the busiest process comes first
 * (pprof takes mapping[0] as the main binary). The string table is the
 * model's, followed by the few names this file adds (sample types, label
 * keys). Every message is allocated in one arena, packed once, then
 * deflated with a gzip header.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "arena.h"
#include "fileid.h"
#include "pprof.h"
#include "profile.pb-c.h"
#include "rpc_message.h"

/* Labels a sample can carry: pid, tid, thread, comm, process, container,
 * host, trace_id, span_id. */
#define MAX_LABELS 9

typedef Perftools__Profiles__Profile PProfile;
typedef Perftools__Profiles__ValueType PValueType;
typedef Perftools__Profiles__Sample PSample;
typedef Perftools__Profiles__Label PLabel;
typedef Perftools__Profiles__Mapping PMapping;
typedef Perftools__Profiles__Location PLocation;
typedef Perftools__Profiles__Line PLine;
typedef Perftools__Profiles__Function PFunction;

/* Names this encoder adds after the model's strings. */
enum extra_string {
	S_SAMPLES,
	S_COUNT,
	S_CPU,
	S_NANOSECONDS,
	S_PID,
	S_TID,
	S_THREAD,
	S_COMM,
	S_PROCESS,
	S_CONTAINER,
	S_HOST,
	S_TRACE_ID,
	S_SPAN_ID,
	S_OFF_CPU,
	S_MEMORY,
	S_BYTES,
	S_EVENTS,
	N_EXTRA,
};

static const char *const extra_names[N_EXTRA] = {
	[S_SAMPLES] = "samples",     [S_COUNT] = "count",   [S_CPU] = "cpu",
	[S_NANOSECONDS] = "nanoseconds", [S_PID] = "pid",   [S_TID] = "tid",
	[S_THREAD] = "thread",       [S_COMM] = "comm",     [S_PROCESS] = "process",
	[S_CONTAINER] = "container_id", [S_HOST] = "host",
	[S_TRACE_ID] = "trace_id",   [S_SPAN_ID] = "span_id",
	[S_OFF_CPU] = "off_cpu",     [S_MEMORY] = "memory", [S_BYTES] = "bytes",
	[S_EVENTS] = "events",
};

struct enc {
	const struct pmodel *m;
	struct arena *a;
	PProfile p;
	uint64_t *mapping_id; /* model mapping index -> pprof id */
};

/* n elements of size bytes from the arena (zeroed); NULL on overflow or
 * out of memory. One extra element so that n == 0 still gets a pointer. */
static void *alloc_array(struct arena *a, size_t n, size_t size)
{
	if (n >= SIZE_MAX / size - 1)
		return NULL;
	return arena_alloc(a, (n + 1) * size);
}

static int64_t extra(const struct enc *e, enum extra_string s)
{
	return (int64_t)(e->m->n_strings + s);
}

/* A model string index, checked. */
static bool str_ok(const struct pmodel *m, uint32_t s)
{
	return s < m->n_strings;
}

static int fill_strings(struct enc *e)
{
	const struct pmodel *m = e->m;
	char **t;

	if (m->n_strings == 0 || !m->strings)
		return -EINVAL; /* strings[0] must be "" */
	if (m->n_links > (SIZE_MAX - m->n_strings - N_EXTRA) / 2)
		return -EINVAL;
	t = alloc_array(e->a, m->n_strings + N_EXTRA + 2 * m->n_links, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_strings; i++)
		t[i] = m->strings[i] ? m->strings[i] : (char *)"";
	for (size_t i = 0; i < N_EXTRA; i++)
		t[m->n_strings + i] = (char *)extra_names[i];
	/* Each link's trace and span IDs in hex, as label values. */
	for (size_t i = 0; i < m->n_links; i++) {
		char *trace = arena_alloc(e->a, 33), *span = arena_alloc(e->a, 17);

		if (!trace || !span)
			return -ENOMEM;
		t[m->n_strings + N_EXTRA + 2 * i] = bytes_to_hex(m->links[i].trace_id, 16, trace);
		t[m->n_strings + N_EXTRA + 2 * i + 1] = bytes_to_hex(m->links[i].span_id, 8, span);
	}
	e->p.string_table = t;
	e->p.n_string_table = m->n_strings + N_EXTRA + 2 * m->n_links;
	return 0;
}

static int fill_functions(struct enc *e)
{
	const struct pmodel *m = e->m;
	PFunction *f = alloc_array(e->a, m->n_functions, sizeof(*f));
	PFunction **pf = alloc_array(e->a, m->n_functions, sizeof(*pf));

	if (!f || !pf)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_functions; i++) {
		const struct pm_function *mf = &m->functions[i];

		if (!str_ok(m, mf->name) || !str_ok(m, mf->system_name) || !str_ok(m, mf->file))
			return -EINVAL;
		perftools__profiles__function__init(&f[i]);
		f[i].id = i + 1;
		f[i].name = mf->name;
		f[i].system_name = mf->system_name ? mf->system_name : mf->name;
		f[i].filename = mf->file;
		pf[i] = &f[i];
	}
	e->p.function = pf;
	e->p.n_function = m->n_functions;
	return 0;
}

/* Whether a path's file name looks like a shared library (libc.so.6). */
static bool looks_shared(const char *path)
{
	const char *base = strrchr(path, '/'), *so;

	base = base ? base + 1 : path;
	so = strstr(base, ".so");
	return so && (so[3] == '\0' || so[3] == '.');
}

/* Without a known executable: the mapping in the most samples, files that
 * do not look like shared libraries first (libc is in as many stacks as
 * the program). Index + 1, or 0. */
static uint32_t busiest_mapping(const struct pmodel *m)
{
	uint64_t *weight = calloc(m->n_mappings + 1, sizeof(*weight));
	size_t *seen = calloc(m->n_mappings + 1, sizeof(*seen));
	uint64_t best = 0;
	bool best_shared = true;
	uint32_t main = 0;

	if (!weight || !seen)
		goto out; /* only the order suffers */
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct pm_stack *st;

		if (m->samples[i].stack >= m->n_stacks)
			continue; /* fill_samples refuses it */
		st = &m->stacks[m->samples[i].stack];
		for (uint32_t k = 0; k < st->n_locs && st->first_loc + k < m->n_stack_locs; k++) {
			uint32_t l = m->stack_locs[st->first_loc + k], mp;

			if (l >= m->n_locations || !(mp = m->locations[l].mapping) || mp > m->n_mappings)
				continue;
			if (seen[mp - 1] == i + 1)
				continue; /* once per sample */
			seen[mp - 1] = i + 1;
			weight[mp - 1] += m->samples[i].count;
		}
	}
	for (size_t i = 0; i < m->n_mappings; i++) {
		uint32_t path = m->mappings[i].path;
		bool shared = path < m->n_strings && m->strings[path] && looks_shared(m->strings[path]);

		if (!weight[i] || (shared && !best_shared))
			continue;
		if ((!shared && best_shared) || weight[i] > best) {
			best = weight[i];
			best_shared = shared;
			main = (uint32_t)i + 1;
		}
	}
out:
	free(weight);
	free(seen);
	return main;
}

/* The main mapping of the process with the most samples (index + 1), or
 * 0. */
static uint32_t main_mapping(struct enc *e)
{
	const struct pmodel *m = e->m;
	uint64_t *per_proc = calloc(m->n_processes + 1, sizeof(*per_proc));
	uint64_t best = 0;
	uint32_t main = 0;

	if (!per_proc)
		return 0; /* only the order suffers */
	for (size_t i = 0; i < m->n_samples; i++)
		if (m->samples[i].process < m->n_processes)
			per_proc[m->samples[i].process] += m->samples[i].count;
	for (size_t i = 0; i < m->n_processes; i++) {
		uint32_t mm = m->processes[i].main_mapping;

		if (mm && mm <= m->n_mappings && per_proc[i] > best) {
			best = per_proc[i];
			main = mm;
		}
	}
	free(per_proc);
	return main ? main : busiest_mapping(m);
}

/* Locations reference mappings by index + 1: check them, and note per
 * mapping what its locations carry (pprof's has_* flags tell readers not
 * to symbolize again) and the highest address (the mapping's limit). */
static int fill_mappings(struct enc *e)
{
	const struct pmodel *m = e->m;
	PMapping *mp = alloc_array(e->a, m->n_mappings, sizeof(*mp));
	PMapping **pm = alloc_array(e->a, m->n_mappings, sizeof(*pm));
	uint32_t main = main_mapping(e);
	uint64_t next = 2;

	e->mapping_id = alloc_array(e->a, m->n_mappings, sizeof(*e->mapping_id));
	if (!mp || !pm || !e->mapping_id)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_mappings; i++) {
		const struct pm_mapping *mm = &m->mappings[i];
		uint64_t id = main ? (i + 1 == main ? 1 : next++) : i + 1;
		PMapping *x = &mp[id - 1];

		if (!str_ok(m, mm->path) || !str_ok(m, mm->build_id) || !str_ok(m, mm->file_id))
			return -EINVAL;
		perftools__profiles__mapping__init(x);
		x->id = id;
		/* Addresses are file offsets: the mapping starts at 0 and spans
		 * the file, so pprof's address - start + offset is the offset. */
		x->memory_limit = mm->size;
		x->filename = mm->path;
		/* The GNU build ID is what pprof tools and debuginfod look
		 * up; without one the file ID still names the file. */
		x->build_id = mm->build_id ? mm->build_id : mm->file_id;
		e->mapping_id[i] = id;
		pm[id - 1] = x;
	}
	for (size_t i = 0; i < m->n_locations; i++) {
		const struct pm_location *l = &m->locations[i];
		PMapping *x;

		if (l->mapping > m->n_mappings || l->first_line > m->n_lines ||
		    l->n_lines > m->n_lines - l->first_line)
			return -EINVAL;
		if (!l->mapping)
			continue;
		x = pm[e->mapping_id[l->mapping - 1] - 1];
		if (l->address >= x->memory_limit)
			x->memory_limit = l->address == UINT64_MAX ? UINT64_MAX : l->address + 1;
		for (uint32_t k = 0; k < l->n_lines; k++) {
			const struct pm_line *ln = &m->lines[l->first_line + k];

			if (ln->function >= m->n_functions)
				return -EINVAL;
			x->has_functions = true;
			x->has_filenames |= m->functions[ln->function].file != 0;
			x->has_line_numbers |= ln->line != 0;
		}
		x->has_inline_frames |= l->n_lines > 1;
	}
	e->p.mapping = pm;
	e->p.n_mapping = m->n_mappings;
	return 0;
}

static int fill_locations(struct enc *e)
{
	const struct pmodel *m = e->m;
	PLocation *lo = alloc_array(e->a, m->n_locations, sizeof(*lo));
	PLocation **plo = alloc_array(e->a, m->n_locations, sizeof(*plo));
	PLine *li = alloc_array(e->a, m->n_lines, sizeof(*li));
	PLine **pli = alloc_array(e->a, m->n_lines, sizeof(*pli));

	if (!lo || !plo || !li || !pli)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_lines; i++) {
		/* Checked in fill_mappings only for lines a location uses. */
		if (m->lines[i].function >= m->n_functions)
			return -EINVAL;
		perftools__profiles__line__init(&li[i]);
		li[i].function_id = (uint64_t)m->lines[i].function + 1;
		li[i].line = m->lines[i].line;
		pli[i] = &li[i];
	}
	for (size_t i = 0; i < m->n_locations; i++) {
		const struct pm_location *l = &m->locations[i];

		perftools__profiles__location__init(&lo[i]);
		lo[i].id = i + 1;
		lo[i].mapping_id = l->mapping ? e->mapping_id[l->mapping - 1] : 0;
		lo[i].address = l->address;
		/* The model's order is pprof's: inlined callee first, the
		 * function the code is in last. */
		lo[i].line = pli + l->first_line;
		lo[i].n_line = l->n_lines;
		plo[i] = &lo[i];
	}
	e->p.location = plo;
	e->p.n_location = m->n_locations;
	return 0;
}

static void label_num(PLabel *l, int64_t key, int64_t num)
{
	perftools__profiles__label__init(l);
	l->key = key;
	l->num = num;
}

static void label_str(PLabel *l, int64_t key, int64_t str)
{
	perftools__profiles__label__init(l);
	l->key = key;
	l->str = str;
}

/* The labels of s into l (MAX_LABELS room); returns how many. */
static size_t sample_labels(const struct enc *e, const struct pm_sample *s, PLabel *l)
{
	const struct pm_process *p = &e->m->processes[s->process];
	size_t n = 0;

	label_num(&l[n++], extra(e, S_PID), p->pid);
	if (s->tid)
		label_num(&l[n++], extra(e, S_TID), s->tid);
	/* comm is the thread's name, as perf and the folded output's root
	 * frame have it; "thread" says the same for tools that look for it. */
	if (s->thread_name) {
		label_str(&l[n++], extra(e, S_THREAD), s->thread_name);
		label_str(&l[n++], extra(e, S_COMM), s->thread_name);
	}
	if (p->comm)
		label_str(&l[n++], extra(e, S_PROCESS), p->comm);
	if (p->container_id)
		label_str(&l[n++], extra(e, S_CONTAINER), p->container_id);
	if (p->host_name)
		label_str(&l[n++], extra(e, S_HOST), p->host_name);
	if (s->link) {
		int64_t hex = (int64_t)(e->m->n_strings + N_EXTRA + 2 * (size_t)(s->link - 1));

		label_str(&l[n++], extra(e, S_TRACE_ID), hex);
		label_str(&l[n++], extra(e, S_SPAN_ID), hex + 1);
	}
	return n;
}

static int fill_samples(struct enc *e)
{
	const struct pmodel *m = e->m;
	/* CPU: a time value when the period is known; the other types
	 * always have their weight as a second value. */
	bool weighted = m->profile != PM_PROFILE_CPU;
	bool cpu = !weighted && m->period_ns != 0;
	uint64_t *stack_ids = alloc_array(e->a, m->n_stack_locs, sizeof(*stack_ids));
	PSample *sa = alloc_array(e->a, m->n_samples, sizeof(*sa));
	PSample **psa = alloc_array(e->a, m->n_samples, sizeof(*psa));
	int64_t *values = alloc_array(e->a, m->n_samples, 2 * sizeof(*values));
	PLabel *labels = alloc_array(e->a, m->n_samples, MAX_LABELS * sizeof(*labels));
	PLabel **plabels = alloc_array(e->a, m->n_samples, MAX_LABELS * sizeof(*plabels));

	if (!stack_ids || !sa || !psa || !values || !labels || !plabels)
		return -ENOMEM;
	/* Stacks share one array of location ids: samples point into it. */
	for (size_t i = 0; i < m->n_stack_locs; i++) {
		if (m->stack_locs[i] >= m->n_locations)
			return -EINVAL;
		stack_ids[i] = (uint64_t)m->stack_locs[i] + 1;
	}
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct pm_sample *s = &m->samples[i];
		const struct pm_stack *st;
		PLabel *l = &labels[i * MAX_LABELS];
		PLabel **pl = &plabels[i * MAX_LABELS];
		size_t nl;

		if (s->stack >= m->n_stacks || s->process >= m->n_processes ||
		    !str_ok(m, s->thread_name))
			return -EINVAL;
		st = &m->stacks[s->stack];
		if (st->first_loc > m->n_stack_locs || st->n_locs > m->n_stack_locs - st->first_loc)
			return -EINVAL;
		if (s->link > m->n_links)
			return -EINVAL;
		if (!str_ok(m, m->processes[s->process].comm) ||
		    !str_ok(m, m->processes[s->process].container_id) ||
		    !str_ok(m, m->processes[s->process].host_name))
			return -EINVAL;
		if (s->count > INT64_MAX || (cpu && s->count > (uint64_t)INT64_MAX / m->period_ns))
			return -EINVAL;
		perftools__profiles__sample__init(&sa[i]);
		sa[i].location_id = stack_ids + st->first_loc;
		sa[i].n_location_id = st->n_locs;
		values[2 * i] = (int64_t)s->count;
		values[2 * i + 1] = cpu ? (int64_t)(s->count * m->period_ns) : 0;
		if (weighted)
			values[2 * i + 1] = s->weight > INT64_MAX ? INT64_MAX : (int64_t)s->weight;
		sa[i].value = &values[2 * i];
		sa[i].n_value = cpu || weighted ? 2 : 1;
		nl = sample_labels(e, s, l);
		for (size_t k = 0; k < nl; k++)
			pl[k] = &l[k];
		sa[i].label = pl;
		sa[i].n_label = nl;
		psa[i] = &sa[i];
	}
	e->p.sample = psa;
	e->p.n_sample = m->n_samples;
	return 0;
}

/* Sample types: samples/count, then for CPU cpu/nanoseconds when the
 * sampling period is known (without it no sample has a time); for
 * off-CPU off_cpu/nanoseconds and for memory memory/bytes, each with the
 * period events/count, 1 (pm_profile_value_types). */
static int fill_header(struct enc *e)
{
	const struct pmodel *m = e->m;
	PValueType *vt = alloc_array(e->a, 3, sizeof(*vt));
	PValueType **pvt = alloc_array(e->a, 2, sizeof(*pvt));

	if (!vt || !pvt)
		return -ENOMEM;
	for (size_t i = 0; i < 3; i++)
		perftools__profiles__value_type__init(&vt[i]);
	vt[0].type = extra(e, S_SAMPLES);
	vt[0].unit = extra(e, S_COUNT);
	pvt[0] = &vt[0];
	e->p.sample_type = pvt;
	e->p.n_sample_type = 1;
	if (m->profile != PM_PROFILE_CPU) {
		bool mem = m->profile == PM_PROFILE_MEMORY;

		vt[1].type = e->p.default_sample_type = extra(e, mem ? S_MEMORY : S_OFF_CPU);
		vt[1].unit = extra(e, mem ? S_BYTES : S_NANOSECONDS);
		vt[2].type = extra(e, S_EVENTS);
		vt[2].unit = extra(e, S_COUNT);
		pvt[1] = &vt[1];
		e->p.n_sample_type = 2;
		e->p.period_type = &vt[2];
		e->p.period = 1;
	} else if (m->period_ns) {
		if (m->period_ns > INT64_MAX)
			return -EINVAL;
		vt[1].type = vt[2].type = extra(e, S_CPU);
		vt[1].unit = vt[2].unit = extra(e, S_NANOSECONDS);
		pvt[1] = &vt[1];
		e->p.n_sample_type = 2;
		e->p.period_type = &vt[2];
		e->p.period = (int64_t)m->period_ns;
		e->p.default_sample_type = extra(e, S_CPU);
	}
	if (m->start_ns <= INT64_MAX)
		e->p.time_nanos = (int64_t)m->start_ns;
	if (m->end_ns > m->start_ns && m->end_ns - m->start_ns <= INT64_MAX)
		e->p.duration_nanos = (int64_t)(m->end_ns - m->start_ns);
	return 0;
}

/* gzip of in[0, len) into a malloc'd buffer of at most max bytes. */
static int gzip_bounded(const uint8_t *in, size_t len, size_t max, uint8_t **ret, size_t *ret_len)
{
	z_stream z = { 0 };
	uint8_t *out = NULL;
	size_t cap;
	int zr, err;

	/* 15 + 16: a zlib window with a gzip header and trailer. */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	cap = deflateBound(&z, (uLong)len);
	if (cap > max)
		cap = max;
	out = malloc(cap ? cap : 1);
	if (!out) {
		err = -ENOMEM;
		goto cleanup;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	zr = deflate(&z, Z_FINISH);
	if (zr != Z_STREAM_END) {
		/* Out of room: the bound was cut to max. */
		err = zr == Z_OK || zr == Z_BUF_ERROR ? -E2BIG : -EIO;
		goto cleanup;
	}
	*ret = out;
	*ret_len = z.total_out;
	out = NULL;
	err = 0;
cleanup:
	deflateEnd(&z);
	free(out);
	return err;
}

int pprof_encode(const struct pmodel *m, size_t max_bytes, uint8_t **ret, size_t *ret_len)
{
	struct enc e = { .m = m };
	uint8_t *packed = NULL;
	size_t size;
	int err;

	if (!max_bytes || max_bytes > PPROF_MAX_PACKED)
		max_bytes = PPROF_MAX_PACKED;
	e.a = arena_new();
	if (!e.a)
		return -ENOMEM;
	perftools__profiles__profile__init(&e.p);
	if ((err = fill_strings(&e)) < 0 || (err = fill_functions(&e)) < 0 ||
	    (err = fill_mappings(&e)) < 0 || (err = fill_locations(&e)) < 0 ||
	    (err = fill_samples(&e)) < 0 || (err = fill_header(&e)) < 0)
		goto cleanup;
	/* PPROF_MAX_PACKED also keeps it in zlib's uInt for one call. */
	err = rpc_message_pack(&e.p.base, PPROF_MAX_PACKED, &packed, &size);
	if (err < 0)
		goto cleanup;
	err = gzip_bounded(packed, size, max_bytes, ret, ret_len);
cleanup:
	free(packed);
	arena_free(e.a);
	return err;
}
