/* perf.h - one cpu-clock perf event per online CPU, in frequency mode,
 * each attached to the sampling program. */
#pragma once

#include <stdint.h>

struct bpf_program;
struct perf_sampler;

/* prog: borrowed, must outlive the sampler. Returns 0 and an owned
 * *ret, or a negative errno (nothing left open). */
int perf_sampler_attach(struct bpf_program *prog, uint32_t frequency_hz,
			struct perf_sampler **ret);
/* CPUs attached. */
int perf_sampler_cpus(const struct perf_sampler *ps);
/* Detaches and closes every event: sampling stops. Accepts NULL. */
void perf_sampler_free(struct perf_sampler *ps);
