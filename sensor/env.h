/* env.h - sonde-sensor's command line: one struct env, filled from argv
 * (and SONDE_SYMBOLIZER) with every number through parse.h's strict
 * parsers and every range checked here, so that the rest of the sensor
 * takes the values as given. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "rpc.h"

#define ENV_MAX_PIDS 64
#define ENV_MAX_NODE_NAME 100 /* bytes; the symbolizer cuts longer names */

/* How BPF walks user stacks (bpf/sample.bpf.c). */
enum env_bpf_walk { ENV_WALK_AUTO, ENV_WALK_LOOP, ENV_WALK_TAIL };

/* Strings point into argv or the environment: they live as long as the
 * process. */
struct env {
	const char *symbolizer;
	uint32_t frequency;
	uint32_t pids[ENV_MAX_PIDS];
	int n_pids;
	const char *cgroup;
	uint32_t duration_s;
	uint32_t buffer_stacks;
	uint32_t flush_ms;
	uint32_t ringbuf_mb; /* 0: sized from the CPUs and the frequency */
	uint32_t unwind_rows;
	bool idle;
	enum env_bpf_walk bpf_walk;
	bool verbose;
	bool no_drop_privileges;
	bool go_probes;
	bool sandbox_selftest;
	struct rpc_tls tls;
	bool insecure;
	const char *symbolizer_user; /* --symbolizer-uid; NULL: the default */
	const char *user; /* --user: who the running sensor is */
	const char *selftest_socket; /* --sandbox-selftest-socket */
	const char *node_name; /* --node-name; NULL: the host name */
	bool command_line; /* --command-line: send processes' command lines */
	/* Profile types (docs/exports.md): CPU samples unless --no-cpu;
	 * --off-cpu adds blocked stacks weighed by the time off the CPU,
	 * at least off_cpu_min_us long; --memory adds address-space growth. */
	bool no_cpu;
	bool off_cpu;
	uint32_t off_cpu_min_us;
	bool memory;
	uint32_t memory_every; /* --memory-every: one fault of a task in this many */
	bool memory_reserved; /* --memory-reserved (sets memory): brk/mmap, not faults */
};

/* Fills *ret with the defaults, then with argv. --help prints the usage
 * to stdout and exits 0. Returns 0, or -EINVAL after logging what was
 * wrong (a bad option also prints the usage to stderr); *ret is then
 * partly filled and not to be used. */
int env_parse(int argc, char **argv, struct env *ret);
/* Is the symbolizer reached over tcp: (mutual TLS)? */
bool env_symbolizer_is_tcp(const struct env *e);
