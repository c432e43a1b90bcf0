/* loader.c - open, configure and load bpf/sample.bpf.c (loader.h): the
 * filter and tunables go into rodata and the map sizes are set between
 * open and load, as libbpf-tools' profile.c does. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "loader.h"
#include "log.h"
#include "sample.h"
#include "unwind_bpf.h"
#include "unwind_maps.h"

uint32_t loader_ringbuf_size(uint32_t ringbuf_mb, uint32_t frequency)
{
	uint64_t want, size = 256u << 10;
	int ncpus = libbpf_num_possible_cpus();

	/* Ten drain intervals of slack, and no more: the sensor maps all of
	 * it (its pages count in the sensor's RSS). */
	if (ringbuf_mb)
		return ringbuf_mb << 20;
	want = (uint64_t)(ncpus > 0 ? ncpus : 1) * frequency * sizeof(struct sonde_sample);
	while (size < want && size < (64u << 20))
		size <<= 1;
	return (uint32_t)size;
}

uint32_t loader_unwind_rows(uint32_t rows)
{
	return rows - rows % SONDE_UNWIND_ROWS_PER_BUCKET;
}

/* One of the two walkers is loaded: bpf_loop() where the kernel has it
 * (5.17), tail calls elsewhere; a kernel without the helper would refuse
 * the whole object otherwise. */
static bool loader_use_loop(enum env_bpf_walk walk)
{
	return walk == ENV_WALK_LOOP ||
	       (walk == ENV_WALK_AUTO &&
		libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) == 1);
}

/* How many arguments the running kernel's raw tracepoint name passes
 * (its BTF prototype, without the hidden data pointer), or -1 when the
 * kernel has no such tracepoint (a tp_btf program on one it lacks would
 * fail the whole load). */
static int loader_tracepoint_args(const char *name)
{
	struct btf *btf = btf__load_vmlinux_btf();
	const struct btf_type *t;
	char type[128];
	int id, n = -1;

	snprintf(type, sizeof(type), "btf_trace_%s", name);
	id = btf ? btf__find_by_name_kind(btf, type, BTF_KIND_TYPEDEF) : -1;
	if (id < 0)
		goto out;
	t = btf__type_by_id(btf, btf__type_by_id(btf, id)->type); /* the pointer */
	if (!t || !btf_is_ptr(t))
		goto out;
	t = btf__type_by_id(btf, t->type);
	if (t && btf_is_func_proto(t) && btf_vlen(t) > 0)
		n = btf_vlen(t) - 1;
out:
	btf__free(btf);
	return n;
}

static void loader_configure(struct sample_bpf *skel, const struct loader_config *c,
			     bool use_loop)
{
	skel->rodata->filter_enabled = c->filter->enabled;
	skel->rodata->filter_tgids = c->filter->tgids;
	skel->rodata->filter_cgroup_id = c->filter->cgroup_id;
	skel->rodata->filter_cgroup_level = c->filter->cgroup_level;
	skel->rodata->keep_idle = c->idle;
	bpf_program__set_autoload(skel->progs.sonde_sample, use_loop);
	bpf_program__set_autoload(skel->progs.sonde_sample_tail, !use_loop);
	bpf_program__set_autoload(skel->progs.sonde_walk_tail, !use_loop);
	/* The memory profile's programs and task storage (5.11) exist only
	 * when asked for. */
	skel->rodata->memory_every = c->memory_every;
	bpf_program__set_autoload(skel->progs.sonde_fault_user, c->memory_every > 0);
	bpf_program__set_autoload(skel->progs.sonde_fault_kernel, c->memory_every > 0);
	bpf_program__set_autoload(skel->progs.sonde_sys_enter, c->memory_reserved);
	bpf_program__set_autoload(skel->progs.sonde_sys_exit, c->memory_reserved);
	bpf_map__set_autocreate(skel->maps.memory_tasks,
				c->memory_every > 0 || c->memory_reserved);
	bpf_program__set_autoload(skel->progs.sonde_offcpu_switch, c->off_cpu);
	/* Attached by loader_attach_mmap(), where the kernel has the
	 * tracepoint as (mm, write). From 5.13 to 6.10 it also passes the
	 * memcg path, which the kernel formats at every mmap_lock release of
	 * every process while any program is attached (each page fault, on
	 * kernels before per-VMA locks): there the young rescans serve. */
	bpf_program__set_autoload(skel->progs.sonde_mmap_released,
				  loader_tracepoint_args("mmap_lock_released") == 2);
	bpf_program__set_autoattach(skel->progs.sonde_mmap_released, false);
	skel->rodata->offcpu_min_ns = c->off_cpu_min_ns;
	/* Wake up for a quarter of the ring; the main loop drains it on a
	 * timer anyway (see sample.bpf.c). */
	skel->rodata->wakeup_bytes = c->ringbuf_bytes / 4;
}

/* The ring buffer and the unwind arrays. Returns 0 or a negative errno
 * (logged). */
static int loader_size_maps(struct sample_bpf *skel, const struct loader_config *c)
{
	int err, n;

	err = bpf_map__set_max_entries(skel->maps.events, c->ringbuf_bytes);
	if (err < 0) {
		log_error_errno(err, "cannot size the ring buffer");
		return err;
	}
	/* Buckets of 8 rows (bpf/unwind.h). An array cannot be empty: with
	 * tables off it has one unused bucket. */
	err = bpf_map__set_max_entries(skel->maps.unwind_rows,
				       c->unwind_rows ? c->unwind_rows / SONDE_UNWIND_ROWS_PER_BUCKET
						      : 1);
	if (err < 0) {
		log_error_errno(err, "cannot size the unwind row array");
		return err;
	}
	n = UNWIND_INDEX_ENTRIES(c->unwind_rows) / SONDE_UNWIND_INDEX_PER_BUCKET;
	err = bpf_map__set_max_entries(skel->maps.unwind_index, n > 0 ? n : 1);
	if (err < 0)
		log_error_errno(err, "cannot size the unwind index array");
	return err;
}

static int loader_install_tail_walker(struct sample_bpf *skel)
{
	uint32_t zero = 0;
	int prog_fd = bpf_program__fd(skel->progs.sonde_walk_tail), err;

	if (bpf_map_update_elem(bpf_map__fd(skel->maps.walk_progs), &zero, &prog_fd, BPF_ANY) < 0) {
		err = -errno;
		log_error_errno(err, "cannot install the tail-call walker");
		return err;
	}
	return 0;
}

int loader_load(const struct loader_config *c, struct sample_bpf **ret_skel, bool *ret_use_loop)
{
	struct sample_bpf *skel;
	bool use_loop;
	int err;

	skel = sample_bpf__open();
	if (!skel) {
		err = -errno;
		log_error_errno(err, "cannot open the BPF object");
		return err;
	}
	use_loop = loader_use_loop(c->walk);
	if ((c->off_cpu || c->memory_every || c->memory_reserved) && !use_loop) {
		/* Their walks run in tracepoints: no tail call into a
		 * perf_event program from there. */
		log_error("--off-cpu and --memory need bpf_loop() (kernel 5.17+, --bpf-walk loop)");
		err = -EOPNOTSUPP;
		goto fail;
	}
	loader_configure(skel, c, use_loop);
	err = loader_size_maps(skel, c);
	if (err < 0)
		goto fail;
	err = sample_bpf__load(skel);
	if (err < 0) {
		log_error_errno(err, "cannot load the BPF programs (run with --verbose for the "
				     "verifier log)");
		goto fail;
	}
	if (!use_loop) {
		err = loader_install_tail_walker(skel);
		if (err < 0)
			goto fail;
	}
	log_info("user stacks walked with %s", use_loop ? "bpf_loop()" : "tail calls (no bpf_loop())");
	*ret_skel = skel;
	*ret_use_loop = use_loop;
	return 0;
fail:
	sample_bpf__destroy(skel);
	return err;
}

bool loader_attach_mmap(struct sample_bpf *skel)
{
	struct bpf_link *link;

	if (!bpf_program__autoload(skel->progs.sonde_mmap_released)) {
		log_info("no mmap_lock_released tracepoint of the (mm, write) form: libraries found by rescans only");
		return false;
	}
	link = bpf_program__attach(skel->progs.sonde_mmap_released);
	if (!link) {
		log_info("cannot attach to mmap_lock_released (%s): libraries found by rescans only",
			 strerror(errno));
		return false;
	}
	skel->links.sonde_mmap_released = link; /* destroyed with the skeleton */
	return true;
}

uint64_t loader_errors(struct sample_bpf *skel, uint64_t *ret_errs)
{
	int ncpus = libbpf_num_possible_cpus();
	uint64_t vals[ncpus > 0 ? ncpus : 1];
	int fd = bpf_map__fd(skel->maps.errors);

	for (uint32_t k = 0; k < SONDE_ERR__COUNT; k++) {
		ret_errs[k] = 0;
		if (ncpus <= 0 || bpf_map_lookup_elem(fd, &k, vals) < 0)
			continue;
		for (int c = 0; c < ncpus; c++)
			ret_errs[k] += vals[c];
	}
	return ret_errs[SONDE_ERR_RINGBUF_FULL];
}

uint64_t loader_map_bytes(struct sample_bpf *skel)
{
	struct bpf_map *map;
	uint64_t total = 0;

	bpf_object__for_each_map(map, skel->obj)
		total += unwind_bpf_map_memlock(bpf_map__fd(map));
	return total;
}

static bool loader_allow_contains(void *ctx, uint32_t pid)
{
	struct sample_bpf *skel = ctx;
	uint8_t v;

	return bpf_map_lookup_elem(bpf_map__fd(skel->maps.allowed_tgids), &pid, &v) == 0;
}

static int loader_allow_add(void *ctx, uint32_t pid)
{
	struct sample_bpf *skel = ctx;
	uint8_t one = 1;

	if (bpf_map_update_elem(bpf_map__fd(skel->maps.allowed_tgids), &pid, &one, BPF_ANY) < 0)
		return -errno;
	return 0;
}

const struct targets_allow_ops loader_allow_ops = {
	.contains = loader_allow_contains,
	.add = loader_allow_add,
};

