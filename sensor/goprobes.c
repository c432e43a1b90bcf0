/* goprobes.c - loads and attaches the Go probes the symbolizer plans
 * (see goprobes.h, docs/go-probes.md).
 *
 * The sensor reads nothing of the target here: the plan says which object,
 * which consts and which file offsets; the consts go into the object's
 * .rodata by name (found in its own BTF), and the uprobes go on the mapped
 * inode itself (/proc/PID/map_files), so a file replaced on disk or a
 * process in another mount namespace gets the right one.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "go_http_client.skel.h"
#include "go_http_server.skel.h"
#include "flush.h"
#include "goprobes.h"
#include "probes/go_http.h"
#include "log.h"
#include "validate.h"

/* Bounds on what a plan may ask for (checked by validate.c). */
#define MAX_FILES 256          /* loaded executables */
#define MAX_SETS VALIDATE_MAX_PROBES
#define MAX_CONSTS VALIDATE_MAX_CONSTS
#define MAX_ATTACHES VALIDATE_MAX_ATTACHES
#define MAX_NAME VALIDATE_MAX_NAME
#define MAX_QUEUED 64          /* plans waiting for the main thread */
/* The ring every probe object shares; records wait for the flush in a
 * bounded batch. */
#define EVENTS_BYTES (1u << 20)
#define MAX_RECORD 4096
#define MAX_PENDING 16384
#define PENDING_BYTES ((size_t)MAX_PENDING * 512) /* their bytes, in all */
#define EVENTS_PER_MESSAGE 512
/* Names a probe object may have (programs, consts), for the catalog. */
#define MAX_OBJ_NAMES 32
/* One refusal logged per this interval (the rest counted). */
#define REFUSAL_LOG_INTERVAL_NS (10ull * 1000000000)

/* The probes this sensor can load: name (ProbeSet.probe) -> object. */
static const struct probe_def {
	const char *name;
	const void *(*elf_bytes)(size_t *sz);
} probe_defs[] = {
	{ "go_http_server", go_http_server_bpf__elf_bytes },
	{ "go_http_client", go_http_client_bpf__elf_bytes },
};

#define N_PROBE_DEFS (sizeof(probe_defs) / sizeof(probe_defs[0]))

/* What one probe object offers, listed from the object itself at start:
 * validate_probe_plan() accepts only these names. */
struct catalog_entry {
	char *programs[MAX_OBJ_NAMES];
	char *consts[MAX_OBJ_NAMES];
};

struct plan_attach {
	char program[MAX_NAME];
	char symbol[VALIDATE_MAX_SYMBOL];
	uint64_t file_offset;
	bool optional;
};

struct plan_set {
	const struct probe_def *def;
	char probe[MAX_NAME];
	size_t n_consts;
	struct { char name[MAX_NAME]; uint64_t value; } consts[MAX_CONSTS];
	size_t n_attaches;
	struct plan_attach *attaches;
	/* After load: */
	struct bpf_object *obj;
	struct bpf_program **progs; /* one per attach */
};

struct plan {
	uint8_t file_id[FILEID_LEN];
	size_t n_sets;
	struct plan_set sets[MAX_SETS];
	struct plan *next;
};

/* The links of one process to one loaded file. */
struct attachment {
	uint32_t pid;
	size_t file;           /* index in gp->files */
	size_t n_links;
	struct bpf_link **links;
};

struct goprobes {
	int spans_fd, events_fd, lost_fd;
	struct ring_buffer *ring;

	pthread_mutex_t lock;  /* the queue only */
	struct plan *queue, **queue_tail;
	size_t n_queued;

	struct plan *files[MAX_FILES]; /* loaded, by file ID */
	size_t n_files;
	struct attachment *att;
	size_t n_att, cap_att;

	/* Records waiting for the flush (flush.c's buffer). */
	struct flush_records *pending;
	uint64_t lost_unsent, lost_bpf_seen;

	struct catalog_entry cat_names[N_PROBE_DEFS];
	struct validate_probe_def cat[N_PROBE_DEFS];
	uint64_t last_refusal_log_ns;

	struct goprobes_stats st;
};

static void plan_free(struct plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_sets; i++) {
		bpf_object__close(p->sets[i].obj);
		free(p->sets[i].progs);
		free(p->sets[i].attaches);
	}
	free(p);
}

static const char *hex_id(const uint8_t *id, char *buf)
{
	for (int i = 0; i < FILEID_LEN; i++)
		sprintf(buf + 2 * i, "%02x", id[i]);
	return buf;
}

/* Copies a protobuf string if it fits; false otherwise. */
static bool copy_name(char *dst, size_t size, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n == 0 || n >= size)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

/* ---- the catalog: what the probe objects offer ---- */

/* Lists each object's programs and 64-bit .rodata consts (our own
 * embedded objects, not the target's bytes). Returns 0 or a negative
 * errno. */
static int catalog_add(struct goprobes *gp, size_t i)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = probe_defs[i].name);
	struct catalog_entry *ce = &gp->cat_names[i];
	struct validate_probe_def *d = &gp->cat[i];
	const struct btf_var_secinfo *vs;
	const struct btf_type *sec;
	struct bpf_object *obj;
	struct bpf_program *prog;
	const void *bytes;
	struct btf *btf;
	size_t sz;
	int id, r = 0;

	d->name = probe_defs[i].name;
	d->programs = (const char *const *)ce->programs;
	d->consts = (const char *const *)ce->consts;
	bytes = probe_defs[i].elf_bytes(&sz);
	obj = bpf_object__open_mem(bytes, sz, &oo);
	if (!obj)
		return -errno;
	bpf_object__for_each_program(prog, obj) {
		if (d->n_programs == MAX_OBJ_NAMES ||
		    !(ce->programs[d->n_programs] = strdup(bpf_program__name(prog)))) {
			r = -ENOMEM;
			goto out;
		}
		d->n_programs++;
	}
	btf = bpf_object__btf(obj);
	if (!btf || (id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC)) < 0)
		goto out; /* no consts */
	sec = btf__type_by_id(btf, id);
	vs = btf_var_secinfos(sec);
	for (int k = 0; k < btf_vlen(sec); k++, vs++) {
		const struct btf_type *var = btf__type_by_id(btf, vs->type);

		if (!var || vs->size != sizeof(uint64_t))
			continue;
		if (d->n_consts == MAX_OBJ_NAMES ||
		    !(ce->consts[d->n_consts] = strdup(btf__name_by_offset(btf, var->name_off)))) {
			r = -ENOMEM;
			goto out;
		}
		d->n_consts++;
	}
out:
	bpf_object__close(obj);
	return r;
}

static void catalog_free(struct goprobes *gp)
{
	for (size_t i = 0; i < N_PROBE_DEFS; i++) {
		for (size_t k = 0; k < MAX_OBJ_NAMES; k++) {
			free(gp->cat_names[i].programs[k]);
			free(gp->cat_names[i].consts[k]);
		}
	}
}

const struct validate_probe_def *goprobes_catalog(const struct goprobes *gp, size_t *ret_n)
{
	*ret_n = N_PROBE_DEFS;
	return gp->cat;
}

/* A refusal: counted, and logged once per REFUSAL_LOG_INTERVAL_NS. */
static void refused(struct goprobes *gp, uint32_t pid, const uint8_t *id, const char *reason)
{
	struct timespec ts;
	uint64_t now;
	char hex[2 * FILEID_LEN + 1];

	gp->st.plans_refused++;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
	if (gp->last_refusal_log_ns && now - gp->last_refusal_log_ns < REFUSAL_LOG_INTERVAL_NS)
		return;
	gp->last_refusal_log_ns = now;
	if (pid)
		log_warn("go probes: refusing the symbolizer's plan for %s in pid %" PRIu32 ": %s "
			 "(%" PRIu64 " refused so far; next log in 10 s at most)", hex_id(id, hex),
			 pid, reason, gp->st.plans_refused);
	else
		log_warn("go probes: refusing the symbolizer's plan for %s: %s (%" PRIu64
			 " refused so far; next log in 10 s at most)", hex_id(id, hex), reason,
			 gp->st.plans_refused);
}

/* ---- the queue (uplink thread -> main thread) ---- */

int goprobes_queue_plan(struct goprobes *gp, const Sonde__V1__ProbePlan *pp)
{
	char hex[2 * FILEID_LEN + 1];
	struct plan *p;

	/* validate_probe_plan() passed: the copies below fit. */
	if (!pp || pp->file_id.len != FILEID_LEN || pp->n_probes > MAX_SETS)
		return -EPROTO;
	if (pp->error && pp->error[0]) {
		log_info("go probes: no plan for %s: %.200s", hex_id(pp->file_id.data, hex), pp->error);
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p->file_id, pp->file_id.data, FILEID_LEN);
	for (size_t i = 0; i < pp->n_probes; i++) {
		const Sonde__V1__ProbeSet *ps = pp->probes[i];
		struct plan_set *s = &p->sets[p->n_sets];

		if (ps->error && ps->error[0]) {
			log_info("go probes: %s: probe %.64s not applicable: %.200s",
				 hex_id(p->file_id, hex), ps->probe ? ps->probe : "?", ps->error);
			continue;
		}
		for (size_t k = 0; k < N_PROBE_DEFS; k++)
			if (!strcmp(probe_defs[k].name, ps->probe))
				s->def = &probe_defs[k];
		if (!s->def || !copy_name(s->probe, sizeof(s->probe), ps->probe) ||
		    ps->n_consts > MAX_CONSTS || ps->n_attaches > MAX_ATTACHES)
			goto bad;
		s->attaches = calloc(ps->n_attaches, sizeof(*s->attaches));
		if (!s->attaches)
			goto nomem;
		p->n_sets++; /* plan_free() frees what is filled so far */
		for (size_t k = 0; k < ps->n_consts; k++) {
			if (!copy_name(s->consts[k].name, MAX_NAME, ps->consts[k]->name))
				goto bad;
			s->consts[k].value = ps->consts[k]->value;
		}
		s->n_consts = ps->n_consts;
		for (size_t k = 0; k < ps->n_attaches; k++) {
			const Sonde__V1__ProbeAttach *a = ps->attaches[k];

			if (!copy_name(s->attaches[k].program, MAX_NAME, a->program))
				goto bad;
			if (!a->symbol || !copy_name(s->attaches[k].symbol, sizeof(s->attaches[k].symbol),
						     a->symbol))
				snprintf(s->attaches[k].symbol, sizeof(s->attaches[k].symbol), "?");
			s->attaches[k].file_offset = a->file_offset;
			s->attaches[k].optional = a->optional;
		}
		s->n_attaches = ps->n_attaches;
	}
	if (p->n_sets == 0) {
		plan_free(p);
		return 0;
	}
	pthread_mutex_lock(&gp->lock);
	if (gp->n_queued >= MAX_QUEUED) {
		pthread_mutex_unlock(&gp->lock);
		log_warn("go probes: too many plans waiting, dropping the one for %s",
			 hex_id(p->file_id, hex));
		plan_free(p);
		return 0;
	}
	*gp->queue_tail = p;
	gp->queue_tail = &p->next;
	gp->n_queued++;
	pthread_mutex_unlock(&gp->lock);
	return 0;
bad:
	plan_free(p);
	return -EBADMSG; /* not validated: a caller's bug */
nomem:
	plan_free(p);
	return -ENOMEM;
}

/* ---- the plan against the process table (validate_probe_offsets) ---- */

#define MAX_RANGES 64 /* executable mappings of one file in one process */

/* The executable mappings of file id in pr, from its /proc/PID/maps. */
static size_t exec_ranges(const struct proc *pr, const uint8_t *id,
			  struct validate_exec_range *ret, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < pr->n_maps && n < max; i++) {
		const struct proc_mapping *m = &pr->maps[i];

		if (m->file && !memcmp(m->info.id.bytes, id, FILEID_LEN))
			ret[n++] = (struct validate_exec_range){ m->start, m->end, m->offset };
	}
	return n;
}

/* Checks set s's attach offsets against pr's executable mappings of file
 * id. Returns 0 or -EBADMSG with *ret_reason. */
static int check_set_in(const struct plan_set *s, const struct proc *pr, const uint8_t *id,
			const char **ret_reason)
{
	struct validate_exec_range ranges[MAX_RANGES];
	uint64_t offsets[MAX_ATTACHES];
	size_t n = exec_ranges(pr, id, ranges, MAX_RANGES);

	for (size_t k = 0; k < s->n_attaches; k++)
		offsets[k] = s->attaches[k].file_offset;
	return validate_probe_offsets(offsets, s->n_attaches, ranges, n, ret_reason);
}

struct plan_check {
	const struct plan *p;
	bool mapped, ok;
	const char *reason;
};

static int check_plan_in(const struct proc *pr, void *ctx)
{
	struct plan_check *pc = ctx;
	struct validate_exec_range one;
	const char *reason = NULL;
	int r = 0;

	if (pr->exited || !exec_ranges(pr, pc->p->file_id, &one, 1))
		return 0;
	pc->mapped = true;
	for (size_t i = 0; i < pc->p->n_sets && r == 0; i++)
		r = check_set_in(&pc->p->sets[i], pr, pc->p->file_id, &reason);
	if (r < 0) {
		pc->reason = reason;
		return 0;
	}
	pc->ok = true;
	return 1; /* one process where the whole plan fits is enough */
}

/* Before loading: the file is mapped by a tracked process and the plan's
 * offsets are inside its executable mappings there. Each attach checks
 * again for its own process (check_set_in in attach_file). */
static int check_plan(struct procs *procs, const struct plan *p, const char **ret_reason)
{
	struct plan_check pc = { .p = p };

	procs_visit(procs, check_plan_in, &pc);
	if (pc.ok)
		return 0;
	*ret_reason = pc.mapped ? pc.reason : "the file is not mapped by a tracked process";
	return -EBADMSG;
}

/* ---- loading ---- */

/* Writes the set's consts into the object's .rodata by name, before load.
 * Every const of the plan must be a 64-bit global of .rodata. */
static int set_consts(struct plan_set *s)
{
	struct btf *btf = bpf_object__btf(s->obj);
	const struct btf_var_secinfo *vs;
	const struct btf_type *sec;
	struct bpf_map *map, *rodata = NULL;
	const void *init;
	uint8_t *data = NULL;
	size_t size = 0;
	int id, r = 0;

	bpf_object__for_each_map(map, s->obj) {
		const char *name = bpf_map__name(map);
		size_t n = strlen(name);

		if (bpf_map__is_internal(map) && n >= 7 && !strcmp(name + n - 7, ".rodata"))
			rodata = map;
	}
	if (s->n_consts == 0)
		return 0;
	if (!btf || !rodata || !(init = bpf_map__initial_value(rodata, &size)) ||
	    (id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC)) < 0) {
		log_warn("go probes: %s: refusing the plan: the object has no consts", s->probe);
		return -ENOENT;
	}
	data = malloc(size);
	if (!data)
		return -ENOMEM;
	memcpy(data, init, size);
	sec = btf__type_by_id(btf, id);
	for (size_t k = 0; k < s->n_consts && r == 0; k++) {
		bool found = false;

		vs = btf_var_secinfos(sec);
		for (int i = 0; i < btf_vlen(sec); i++, vs++) {
			const struct btf_type *var = btf__type_by_id(btf, vs->type);

			if (!var || strcmp(btf__name_by_offset(btf, var->name_off), s->consts[k].name))
				continue;
			found = true;
			if (vs->size != sizeof(uint64_t) || vs->offset + vs->size > size) {
				log_warn("go probes: %s: refusing the plan: const %s is not a 64-bit "
					 ".rodata global", s->probe, s->consts[k].name);
				r = -EINVAL;
				break;
			}
			memcpy(data + vs->offset, &s->consts[k].value, sizeof(uint64_t));
		}
		if (!found) {
			log_warn("go probes: %s: refusing the plan: unknown const '%s'", s->probe,
				 s->consts[k].name);
			r = -ENOENT;
		}
	}
	if (r == 0)
		r = bpf_map__set_initial_value(rodata, data, size);
	free(data);
	return r;
}

static int load_set(struct goprobes *gp, struct plan_set *s)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = s->def->name);
	const void *bytes;
	struct bpf_map *m;
	size_t sz;
	int r;

	bytes = s->def->elf_bytes(&sz);
	s->obj = bpf_object__open_mem(bytes, sz, &oo);
	if (!s->obj) {
		r = -errno;
		log_warn_errno(r, "go probes: cannot open the %s object", s->probe);
		return r;
	}
	s->progs = calloc(s->n_attaches, sizeof(*s->progs));
	if (!s->progs)
		return -ENOMEM;
	for (size_t k = 0; k < s->n_attaches; k++) {
		s->progs[k] = bpf_object__find_program_by_name(s->obj, s->attaches[k].program);
		if (!s->progs[k]) {
			log_warn("go probes: %s: refusing the plan: unknown program '%s'", s->probe,
				 s->attaches[k].program);
			return -ENOENT;
		}
	}
	r = set_consts(s);
	if (r < 0)
		return r;
	/* One ring, one span map, one lost counter for all objects. */
	if ((m = bpf_object__find_map_by_name(s->obj, "go_events")) &&
	    (r = bpf_map__reuse_fd(m, gp->events_fd)) < 0)
		return r;
	if ((m = bpf_object__find_map_by_name(s->obj, "go_spans")) &&
	    (r = bpf_map__reuse_fd(m, gp->spans_fd)) < 0)
		return r;
	if ((m = bpf_object__find_map_by_name(s->obj, "go_lost")) &&
	    (r = bpf_map__reuse_fd(m, gp->lost_fd)) < 0)
		return r;
	r = bpf_object__load(s->obj);
	if (r < 0)
		log_warn_errno(r, "go probes: cannot load %s (run with --verbose for the verifier "
				  "log)", s->probe);
	return r;
}

static struct plan *find_file(struct goprobes *gp, const uint8_t *id, size_t *ret_idx)
{
	for (size_t i = 0; i < gp->n_files; i++)
		if (!memcmp(gp->files[i]->file_id, id, FILEID_LEN)) {
			if (ret_idx)
				*ret_idx = i;
			return gp->files[i];
		}
	return NULL;
}

/* ---- attaching ---- */

static struct attachment *find_att(struct goprobes *gp, uint32_t pid, size_t file)
{
	for (size_t i = 0; i < gp->n_att; i++)
		if (gp->att[i].pid == pid && gp->att[i].file == file)
			return &gp->att[i];
	return NULL;
}

static void attach_file(struct goprobes *gp, const struct proc *pr, size_t fi,
			const struct proc_mapping *m)
{
	struct plan *p = gp->files[fi];
	struct attachment a = { .pid = pr->pid, .file = fi };
	char path[96];
	size_t total = 0;

	if (gp->n_att == gp->cap_att) {
		size_t cap = gp->cap_att ? 2 * gp->cap_att : 16;
		struct attachment *n = realloc(gp->att, cap * sizeof(*n));

		if (!n)
			return;
		gp->att = n;
		gp->cap_att = cap;
	}
	for (size_t i = 0; i < p->n_sets; i++)
		total += p->sets[i].obj ? p->sets[i].n_attaches : 0;
	a.links = calloc(total ? total : 1, sizeof(*a.links));
	if (!a.links)
		return;
	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/map_files/%" PRIx64 "-%" PRIx64, pr->pid,
		 m->start, m->end);
	for (size_t i = 0; i < p->n_sets; i++) {
		struct plan_set *s = &p->sets[i];
		size_t first = a.n_links, n_ok = 0;
		const char *reason = NULL;

		if (!s->obj)
			continue;
		/* This process's own executable mappings of the file: another
		 * process's (checked at load) say nothing about this one. */
		if (check_set_in(s, pr, p->file_id, &reason) < 0) {
			refused(gp, pr->pid, p->file_id, reason);
			continue;
		}
		for (size_t k = 0; k < s->n_attaches; k++) {
			LIBBPF_OPTS(bpf_uprobe_opts, uo);
			struct bpf_link *l;
			int r;

			l = bpf_program__attach_uprobe_opts(s->progs[k], (pid_t)pr->pid, path,
							    s->attaches[k].file_offset, &uo);
			if (l) {
				a.links[a.n_links++] = l;
				n_ok++;
				continue;
			}
			r = -errno;
			gp->st.attach_failures++;
			if (s->attaches[k].optional) {
				log_info("go probes: pid %" PRIu32 ": optional %s at %.128s+0x%" PRIx64
					 " not attached (%s), skipped", pr->pid, s->attaches[k].program,
					 s->attaches[k].symbol, s->attaches[k].file_offset, strerror(-r));
				continue;
			}
			log_warn("go probes: pid %" PRIu32 ": cannot attach %s at %.128s+0x%" PRIx64
				 " (%s): probe %s left out", pr->pid, s->attaches[k].program,
				 s->attaches[k].symbol, s->attaches[k].file_offset, strerror(-r), s->probe);
			/* Half a probe (entries without returns) would only
			 * leave state behind. */
			while (a.n_links > first)
				bpf_link__destroy(a.links[--a.n_links]);
			n_ok = 0;
			break;
		}
		if (n_ok) {
			gp->st.attached += n_ok;
			log_info("go probes: pid %" PRIu32 ": %s attached (%zu uprobes)", pr->pid,
				 s->probe, n_ok);
		}
	}
	/* Recorded even with no links, so a failing process is not retried
	 * at each of its rescans. */
	gp->att[gp->n_att++] = a;
}

void goprobes_process(struct goprobes *gp, const struct proc *pr)
{
	if (!gp || pr->exited)
		return;
	for (size_t fi = 0; fi < gp->n_files; fi++) {
		if (find_att(gp, pr->pid, fi))
			continue;
		for (size_t i = 0; i < pr->n_maps; i++) {
			const struct proc_mapping *m = &pr->maps[i];

			if (m->file && !memcmp(m->info.id.bytes, gp->files[fi]->file_id, FILEID_LEN)) {
				attach_file(gp, pr, fi, m);
				break;
			}
		}
	}
}

static void detach(struct attachment *a)
{
	for (size_t i = 0; i < a->n_links; i++)
		bpf_link__destroy(a->links[i]);
	free(a->links);
}

/* Deletes the entries of pid from a map keyed by struct sonde_go_span_key:
 * a process that exits mid-request leaves its per-call state and span
 * behind, which a later process with the same pid and goroutine address
 * would inherit (a wrong parent). Bounded by the map's size. */
static void purge_pid(int fd, uint32_t pid)
{
	struct sonde_go_span_key key, next, gone[256];
	size_t n = 0;
	bool first = true;

	if (fd < 0)
		return;
	for (unsigned i = 0; i < (1u << 16); i++) {
		if (bpf_map_get_next_key(fd, first ? NULL : &key, &next) != 0)
			break;
		first = false;
		key = next;
		if (next.pid == pid && n < sizeof(gone) / sizeof(gone[0]))
			gone[n++] = next;
	}
	for (size_t i = 0; i < n; i++)
		bpf_map_delete_elem(fd, &gone[i]);
}

void goprobes_process_gone(struct goprobes *gp, uint32_t pid)
{
	size_t kept = 0;
	bool had = false;

	if (!gp)
		return;
	for (size_t i = 0; i < gp->n_att; i++)
		had = had || gp->att[i].pid == pid;
	if (had) {
		purge_pid(gp->spans_fd, pid);
		for (size_t f = 0; f < gp->n_files; f++)
			for (size_t k = 0; k < gp->files[f]->n_sets; k++) {
				struct bpf_object *obj = gp->files[f]->sets[k].obj;
				struct bpf_map *m;

				if (!obj)
					continue;
				bpf_object__for_each_map(m, obj)
					if (!strcmp(bpf_map__name(m), "server_calls") ||
					    !strcmp(bpf_map__name(m), "client_calls"))
						purge_pid(bpf_map__fd(m), pid);
			}
	}
	for (size_t i = 0; i < gp->n_att; i++) {
		if (gp->att[i].pid == pid)
			detach(&gp->att[i]);
		else
			gp->att[kept++] = gp->att[i];
	}
	gp->n_att = kept;
}

static int apply_to_proc(const struct proc *pr, void *ctx)
{
	goprobes_process(ctx, pr);
	return 0;
}

void goprobes_apply(struct goprobes *gp, struct procs *procs)
{
	struct plan *q, *next;
	char hex[2 * FILEID_LEN + 1];
	bool added = false;

	if (!gp)
		return;
	pthread_mutex_lock(&gp->lock);
	q = gp->queue;
	gp->queue = NULL;
	gp->queue_tail = &gp->queue;
	gp->n_queued = 0;
	pthread_mutex_unlock(&gp->lock);
	for (; q; q = next) {
		const char *reason = NULL;
		size_t loaded = 0;
		int r;

		next = q->next;
		q->next = NULL;
		gp->st.plans++;
		/* Once per file ID: a reconnect sends the plan again. */
		if (find_file(gp, q->file_id, NULL) || gp->n_files == MAX_FILES) {
			if (gp->n_files == MAX_FILES)
				log_warn("go probes: %d executables instrumented already, ignoring %s",
					 MAX_FILES, hex_id(q->file_id, hex));
			plan_free(q);
			continue;
		}
		r = check_plan(procs, q, &reason);
		if (r < 0) {
			refused(gp, 0, q->file_id, reason);
			plan_free(q);
			continue;
		}
		for (size_t i = 0; i < q->n_sets; i++) {
			struct plan_set *s = &q->sets[i];

			if (load_set(gp, s) < 0) {
				gp->st.load_failures++;
				bpf_object__close(s->obj);
				s->obj = NULL;
				continue;
			}
			loaded++;
		}
		if (!loaded) {
			plan_free(q);
			continue;
		}
		log_info("go probes: %zu of %zu probes loaded for %s", loaded, q->n_sets,
			 hex_id(q->file_id, hex));
		gp->files[gp->n_files++] = q;
		gp->st.files_loaded++;
		added = true;
	}
	if (added)
		procs_visit(procs, apply_to_proc, gp);
}

/* ---- records ---- */

static int on_record(void *ctx, void *data, size_t size)
{
	struct goprobes *gp = ctx;

	if (size == 0 || size > MAX_RECORD || flush_records_add(gp->pending, 0, 0, data, size) < 0) {
		gp->lost_unsent++;
		return 0;
	}
	gp->st.records++;
	return 0;
}

int goprobes_fd(struct goprobes *gp)
{
	return ring_buffer__epoll_fd(gp->ring);
}

int goprobes_consume(struct goprobes *gp)
{
	if (!gp)
		return 0;
	return ring_buffer__consume(gp->ring);
}

bool goprobes_half_full(const struct goprobes *gp)
{
	return gp && flush_records_half_full(gp->pending);
}

/* Ring-full drops BPF counted since the last call. */
static uint64_t bpf_lost_delta(struct goprobes *gp)
{
	int ncpus = libbpf_num_possible_cpus();
	uint64_t vals[ncpus > 0 ? ncpus : 1], total = 0, d;
	uint32_t zero = 0;

	if (ncpus <= 0 || bpf_map_lookup_elem(gp->lost_fd, &zero, vals) < 0)
		return 0;
	for (int i = 0; i < ncpus; i++)
		total += vals[i];
	d = total - gp->lost_bpf_seen;
	gp->lost_bpf_seen = total;
	return d;
}

/* What each ProbeEvents message carries beside its records. */
struct events_batch {
	int64_t mono_to_real_ns;
	uint64_t lost; /* said in the first message, then 0 */
};

static int send_events(void *ctx, struct uplink *u, uint64_t gen, const struct flush_rec *recs,
		       size_t n, bool last)
{
	struct events_batch *eb = ctx;
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__ProbeEvents pe = SONDE__V1__PROBE_EVENTS__INIT;
	ProtobufCBinaryData bin[EVENTS_PER_MESSAGE];
	int r;

	(void)last;
	for (size_t i = 0; i < n && i < EVENTS_PER_MESSAGE; i++)
		bin[i] = (ProtobufCBinaryData){ .data = (uint8_t *)recs[i].data, .len = recs[i].len };
	pe.monotonic_to_unix_ns = eb->mono_to_real_ns;
	pe.n_records = n;
	pe.records = bin;
	pe.records_lost = eb->lost;
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_PROBE_EVENTS;
	msg.probe_events = &pe;
	r = uplink_send(u, gen, &msg, true);
	if (r == 0)
		eb->lost = 0;
	return r;
}

int goprobes_flush(struct goprobes *gp, struct uplink *u, uint64_t gen, size_t max_bytes,
		   int64_t mono_to_real_ns)
{
	struct events_batch eb = { .mono_to_real_ns = mono_to_real_ns };
	const struct flush_batch b = { .per_message = EVENTS_PER_MESSAGE, .max_bytes = max_bytes,
				       .overhead = 8, .send = send_events, .ctx = &eb };
	size_t unsent = 0;
	int r;

	if (!gp)
		return 0;
	eb.lost = gp->lost_unsent + bpf_lost_delta(gp);
	gp->lost_unsent = 0;
	if (flush_records_count(gp->pending) == 0 && eb.lost == 0)
		return 0;
	/* With no records, one message says what was lost. */
	r = flush_records_send(gp->pending, u, gen, &b, eb.lost != 0, &unsent);
	if (r < 0) /* the failed batch and the rest are lost; say so next time */
		gp->lost_unsent += unsent + eb.lost;
	gp->st.lost += gp->lost_unsent;
	return r;
}

void goprobes_get_stats(const struct goprobes *gp, struct goprobes_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!gp)
		return;
	*st = gp->st;
	st->files = gp->n_files;
	for (size_t i = 0; i < gp->n_att; i++)
		st->links += gp->att[i].n_links;
}

/* ---- life cycle ---- */

struct goprobes *goprobes_new(int spans_fd)
{
	struct goprobes *gp = calloc(1, sizeof(*gp));

	if (!gp)
		return NULL;
	gp->spans_fd = spans_fd;
	gp->events_fd = gp->lost_fd = -1;
	pthread_mutex_init(&gp->lock, NULL);
	gp->queue_tail = &gp->queue;
	gp->pending = flush_records_new(MAX_PENDING, PENDING_BYTES);
	gp->events_fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "go_events", 0, 0, EVENTS_BYTES, NULL);
	gp->lost_fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "go_lost", sizeof(uint32_t),
				     sizeof(uint64_t), 1, NULL);
	if (!gp->pending || gp->events_fd < 0 || gp->lost_fd < 0) {
		log_error_errno(-errno, "go probes: cannot create the shared maps");
		goto fail;
	}
	for (size_t i = 0; i < N_PROBE_DEFS; i++) {
		int r = catalog_add(gp, i);

		if (r < 0) {
			log_error_errno(r, "go probes: cannot list the %s object", probe_defs[i].name);
			goto fail;
		}
	}
	gp->ring = ring_buffer__new(gp->events_fd, on_record, gp, NULL);
	if (!gp->ring) {
		log_error_errno(-errno, "go probes: cannot map the ring buffer");
		goto fail;
	}
	return gp;
fail:
	goprobes_free(gp);
	return NULL;
}

void goprobes_free(struct goprobes *gp)
{
	struct plan *q, *next;

	if (!gp)
		return;
	for (size_t i = 0; i < gp->n_att; i++)
		detach(&gp->att[i]);
	free(gp->att);
	for (size_t i = 0; i < gp->n_files; i++)
		plan_free(gp->files[i]);
	for (q = gp->queue; q; q = next) {
		next = q->next;
		plan_free(q);
	}
	ring_buffer__free(gp->ring);
	if (gp->events_fd >= 0)
		close(gp->events_fd);
	if (gp->lost_fd >= 0)
		close(gp->lost_fd);
	flush_records_free(gp->pending);
	catalog_free(gp);
	pthread_mutex_destroy(&gp->lock);
	free(gp);
}
