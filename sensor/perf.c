/* perf.c - opens PERF_COUNT_SW_CPU_CLOCK per CPU. A CPU that is offline
 * (ENODEV) is skipped; CPUs that come online later are not sampled (a
 * known limitation). Once bpf_program__attach_perf_event() succeeds the
 * link owns the perf fd and closes it on destroy. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "perf.h"

struct perf_sampler {
	struct bpf_link **links;
	int n_links;
};

static int perf_open(int cpu, uint32_t frequency_hz)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.freq = 1;
	attr.sample_freq = frequency_hz;
	return (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

int perf_sampler_attach(struct bpf_program *prog, uint32_t frequency_hz,
			struct perf_sampler **ret)
{
	struct perf_sampler *ps = NULL;
	int ncpus = libbpf_num_possible_cpus(), r;

	if (ncpus <= 0)
		return ncpus < 0 ? ncpus : -ENODEV;
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	ps->links = calloc(ncpus, sizeof(*ps->links));
	if (!ps->links) {
		r = -ENOMEM;
		goto fail;
	}
	for (int cpu = 0; cpu < ncpus; cpu++) {
		struct bpf_link *link;
		int fd = perf_open(cpu, frequency_hz);

		if (fd < 0) {
			if (errno == ENODEV)
				continue; /* offline */
			r = -errno;
			log_debug("perf_event_open on cpu %d failed: %d", cpu, r);
			goto fail;
		}
		link = bpf_program__attach_perf_event(prog, fd);
		if (!link) {
			r = -errno;
			close(fd); /* not transferred */
			goto fail;
		}
		ps->links[ps->n_links++] = link; /* the link owns fd now */
	}
	if (ps->n_links == 0) {
		r = -ENODEV;
		goto fail;
	}
	*ret = ps;
	return 0;
fail:
	perf_sampler_free(ps);
	return r;
}

int perf_sampler_cpus(const struct perf_sampler *ps)
{
	return ps->n_links;
}

void perf_sampler_free(struct perf_sampler *ps)
{
	if (!ps)
		return;
	for (int i = 0; i < ps->n_links; i++)
		bpf_link__destroy(ps->links[i]);
	free(ps->links);
	free(ps);
}
