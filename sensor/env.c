/* env.c - sonde-sensor's options (env.h): defaults, the usage text, and
 * getopt_long with a strict number parser and a range per number. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "log.h"
#include "parse.h"

static const struct env env_defaults = {
	.user = "sonde-sensor",
	.frequency = 19,
	.buffer_stacks = 65536,
	/* Every 10 s, as Parca Agent and Pyroscope report (the OpenTelemetry
	 * profiler: 5 s): a flush costs both services several milliseconds
	 * of CPU (wakeups of both, gRPC's threads, the symbolizer's profile
	 * store), and nobody reads a profile within seconds of a sample.
	 * Short-lived processes are drained sooner anyway (the main loop);
	 * `sonde record` asks for 1 s. */
	.flush_ms = 10000,
	.ringbuf_mb = 0,
	.unwind_rows = 2097152,
	/* A sample per 256 KiB a task touches: the test workload's 10 %
	 * needs far less, and a task touching 1 GiB/s costs 4096 walks a
	 * second (docs/memory.md). */
	.memory_every = 64,
	.off_cpu_min_us = 1000,
};

static const char env_usage[] =
	"Usage: sonde-sensor --symbolizer unix:PATH|tcp:HOST:PORT [OPTIONS]\n"
	"\n"
	"  --symbolizer ADDR     where the symbolizer listens (or env SONDE_SYMBOLIZER)\n"
	"  --frequency HZ        samples per second per CPU (default 19)\n"
	"  --pid PID             profile only this process and its children (repeatable)\n"
	"  --cgroup PATH         profile only this cgroup v2 (and below)\n"
	"  --duration S          stop after S seconds (default 0: until SIGINT/SIGTERM)\n"
	"  --buffer-stacks N     bound on buffered (stack, pid, tid) entries (default 65536)\n"
	"  --flush-ms MS         how often stacks, spans and counters are sent (default 10000)\n"
	"  --ringbuf-mb MB       BPF ring buffer size, a power of two (default: a second\n"
	"                        of samples of every CPU, 256 KiB to 64 MiB)\n"
	"  --unwind-rows N       unwind table rows in BPF, 12 bytes each (default 2097152;\n"
	"                        0: frame pointers only)\n"
	"  --idle                keep samples of the idle task\n"
	"  --bpf-walk MODE       user stack walk: loop (bpf_loop, 5.17+), tail (tail calls,\n"
	"                        for 5.10-5.16) or auto (default: loop where the kernel has it)\n"
	"  --tls-ca FILE         CA that signed the symbolizer's certificate (tcp:)\n"
	"  --tls-cert FILE       this sensor's client certificate (tcp:, mutual TLS)\n"
	"  --tls-key FILE        its key\n"
	"  --tls-server-name N   name to check in the symbolizer's certificate\n"
	"  --insecure            allow plaintext tcp: (testing only)\n"
	"  --symbolizer-uid U    unix: accept only a symbolizer whose socket is served by\n"
	"                        root or user U (name or number; default: user sonde if it\n"
	"                        exists, else root only); its primary group is the\n"
	"                        socket's group, which the sensor keeps after set-up\n"
	"  --user NAME           user the sensor switches to after set-up, keeping only\n"
	"                        the capabilities it needs (default sonde-sensor; it\n"
	"                        must exist unless --no-drop-privileges; a number\n"
	"                        without a passwd entry is that uid and gid)\n"
	"  --no-drop-privileges  keep every capability and no seccomp filter (debugging)\n"
	"  --node-name NAME      this node's name in the symbolizer's queries and exports\n"
	"                        (default: the host name; at most 100 bytes)\n"
	"  --command-line        send each process's command line (OTLP\n"
	"                        process.command_line); off by default: it can hold secrets\n"
	"  --off-cpu             also record off-CPU time: the stack where a thread blocked\n"
	"                        (sleep, I/O, lock), weighed by the ns until it ran again\n"
	"                        (needs bpf_loop(): 5.17+)\n"
	"  --off-cpu-min-us US   leave out blocks shorter than US microseconds (default 1000;\n"
	"                        0: all; at most 10000000)\n"
	"  --memory              also record memory growth (bytes by stack)\n"
	"  --no-cpu              no CPU samples (no perf events), with --off-cpu or --memory\n"
	"  --memory-every N      memory: sample one first-touch fault of a task in N,\n"
	"                        weighed N pages (default 64; 1..65536)\n"
	"  --memory-reserved     memory: the address space reserved instead (brk growth,\n"
	"                        private writable anonymous mmaps), every call, not the\n"
	"                        pages touched (docs/memory.md); implies --memory\n"
	"  --go-probes           load the Go probes the symbolizer plans (docs/go-probes.md);\n"
	"                        keeps CAP_SYS_ADMIN, which the kernel wants for uprobes\n"
	"  --sandbox-selftest    set up, drop privileges with a filter that answers EPERM\n"
	"                        instead of killing, try what the running sensor must not\n"
	"                        do, print one line per attempt and exit (0: all denied)\n"
	"  --sandbox-selftest-socket PATH  with --sandbox-selftest, also connect() to\n"
	"                        this root-owned 0600 Unix socket (must be refused)\n"
	"  --verbose             debug logging, including libbpf's\n"
	"  --help\n";

enum {
	OPT_SYM = 256, OPT_FREQ, OPT_PID, OPT_CGROUP, OPT_DURATION, OPT_BUFFER, OPT_FLUSH,
	OPT_RINGBUF, OPT_UNWIND_ROWS, OPT_IDLE, OPT_VERBOSE, OPT_HELP, OPT_TLS_CA, OPT_TLS_CERT,
	OPT_TLS_KEY, OPT_TLS_NAME, OPT_INSECURE, OPT_NO_DROP, OPT_BPF_WALK, OPT_GO_PROBES,
	OPT_SELFTEST, OPT_SYM_UID, OPT_USER, OPT_SELFTEST_SOCKET, OPT_NODE_NAME, OPT_COMMAND_LINE,
	OPT_OFF_CPU, OPT_OFF_CPU_MIN, OPT_MEMORY, OPT_NO_CPU, OPT_MEMORY_EVERY,
	OPT_MEMORY_RESERVED,
};

static const struct option env_options[] = {
	{"symbolizer", required_argument, NULL, OPT_SYM},
	{"frequency", required_argument, NULL, OPT_FREQ},
	{"pid", required_argument, NULL, OPT_PID},
	{"cgroup", required_argument, NULL, OPT_CGROUP},
	{"duration", required_argument, NULL, OPT_DURATION},
	{"buffer-stacks", required_argument, NULL, OPT_BUFFER},
	{"flush-ms", required_argument, NULL, OPT_FLUSH},
	{"ringbuf-mb", required_argument, NULL, OPT_RINGBUF},
	{"unwind-rows", required_argument, NULL, OPT_UNWIND_ROWS},
	{"idle", no_argument, NULL, OPT_IDLE},
	{"bpf-walk", required_argument, NULL, OPT_BPF_WALK},
	{"verbose", no_argument, NULL, OPT_VERBOSE},
	{"help", no_argument, NULL, OPT_HELP},
	{"tls-ca", required_argument, NULL, OPT_TLS_CA},
	{"tls-cert", required_argument, NULL, OPT_TLS_CERT},
	{"tls-key", required_argument, NULL, OPT_TLS_KEY},
	{"tls-server-name", required_argument, NULL, OPT_TLS_NAME},
	{"insecure", no_argument, NULL, OPT_INSECURE},
	{"no-drop-privileges", no_argument, NULL, OPT_NO_DROP},
	{"go-probes", no_argument, NULL, OPT_GO_PROBES},
	{"sandbox-selftest", no_argument, NULL, OPT_SELFTEST},
	{"symbolizer-uid", required_argument, NULL, OPT_SYM_UID},
	{"user", required_argument, NULL, OPT_USER},
	{"sandbox-selftest-socket", required_argument, NULL, OPT_SELFTEST_SOCKET},
	{"node-name", required_argument, NULL, OPT_NODE_NAME},
	{"command-line", no_argument, NULL, OPT_COMMAND_LINE},
	{"off-cpu", no_argument, NULL, OPT_OFF_CPU},
	{"off-cpu-min-us", required_argument, NULL, OPT_OFF_CPU_MIN},
	{"memory", no_argument, NULL, OPT_MEMORY},
	{"no-cpu", no_argument, NULL, OPT_NO_CPU},
	{"memory-every", required_argument, NULL, OPT_MEMORY_EVERY},
	{"memory-reserved", no_argument, NULL, OPT_MEMORY_RESERVED},
	{},
};

static int env_parse_bpf_walk(const char *s, enum env_bpf_walk *ret)
{
	if (!strcmp(s, "auto"))
		*ret = ENV_WALK_AUTO;
	else if (!strcmp(s, "loop"))
		*ret = ENV_WALK_LOOP;
	else if (!strcmp(s, "tail"))
		*ret = ENV_WALK_TAIL;
	else {
		log_error("--bpf-walk wants auto, loop or tail, not '%.32s'", s);
		return -EINVAL;
	}
	return 0;
}

/* A string or flag option. Returns 0, -EINVAL, or -ENOENT when c is a
 * number option (env_parse_number's). */
static int env_parse_option(struct env *e, int c, const char *arg)
{
	switch (c) {
	case OPT_SYM: e->symbolizer = arg; return 0;
	case OPT_CGROUP: e->cgroup = arg; return 0;
	case OPT_IDLE: e->idle = true; return 0;
	case OPT_BPF_WALK: return env_parse_bpf_walk(arg, &e->bpf_walk);
	case OPT_TLS_CA: e->tls.ca = arg; return 0;
	case OPT_TLS_CERT: e->tls.cert = arg; return 0;
	case OPT_TLS_KEY: e->tls.key = arg; return 0;
	case OPT_TLS_NAME: e->tls.server_name = arg; return 0;
	case OPT_INSECURE: e->insecure = true; return 0;
	case OPT_NO_DROP: e->no_drop_privileges = true; return 0;
	case OPT_GO_PROBES: e->go_probes = true; return 0;
	case OPT_SELFTEST: e->sandbox_selftest = true; return 0;
	case OPT_SYM_UID: e->symbolizer_user = arg; return 0;
	case OPT_USER: e->user = arg; return 0;
	case OPT_SELFTEST_SOCKET: e->selftest_socket = arg; return 0;
	case OPT_COMMAND_LINE: e->command_line = true; return 0;
	case OPT_OFF_CPU: e->off_cpu = true; return 0;
	case OPT_MEMORY: e->memory = true; return 0;
	case OPT_MEMORY_RESERVED: e->memory = e->memory_reserved = true; return 0;
	case OPT_NO_CPU: e->no_cpu = true; return 0;
	case OPT_NODE_NAME:
		if (!*arg || strlen(arg) > ENV_MAX_NODE_NAME) {
			log_error("--node-name must be 1..%d bytes", ENV_MAX_NODE_NAME);
			return -EINVAL;
		}
		e->node_name = arg;
		return 0;
	case OPT_VERBOSE: e->verbose = true; return 0;
	case OPT_HELP:
		fputs(env_usage, stdout);
		exit(0);
	case OPT_FREQ:
	case OPT_PID:
	case OPT_DURATION:
	case OPT_BUFFER:
	case OPT_FLUSH:
	case OPT_RINGBUF:
	case OPT_UNWIND_ROWS:
	case OPT_MEMORY_EVERY:
	case OPT_OFF_CPU_MIN:
		return -ENOENT;
	default:
		fputs(env_usage, stderr);
		return -EINVAL;
	}
}

/* The range check of a number option. Returns 0 or -EINVAL (logged). */
static int env_set_number(struct env *e, int c, uint32_t v)
{
	switch (c) {
	case OPT_FREQ:
		if (v == 0 || v > 10000) {
			log_error("--frequency must be 1..10000");
			return -EINVAL;
		}
		e->frequency = v;
		return 0;
	case OPT_PID:
		if (v == 0 || e->n_pids == ENV_MAX_PIDS) {
			log_error("--pid must be > 0, at most %d times", ENV_MAX_PIDS);
			return -EINVAL;
		}
		e->pids[e->n_pids++] = v;
		return 0;
	case OPT_DURATION:
		e->duration_s = v;
		return 0;
	case OPT_BUFFER:
		if (v == 0 || v > (1u << 24)) {
			log_error("--buffer-stacks must be 1..%u", 1u << 24);
			return -EINVAL;
		}
		e->buffer_stacks = v;
		return 0;
	case OPT_FLUSH:
		if (v < 10 || v > 600000) {
			log_error("--flush-ms must be 10..600000");
			return -EINVAL;
		}
		e->flush_ms = v;
		return 0;
	case OPT_RINGBUF:
		if (v == 0 || v > 1024 || (v & (v - 1))) {
			log_error("--ringbuf-mb must be a power of two up to 1024");
			return -EINVAL;
		}
		e->ringbuf_mb = v;
		return 0;
	case OPT_MEMORY_EVERY:
		if (v == 0 || v > 65536) {
			log_error("--memory-every must be 1..65536");
			return -EINVAL;
		}
		e->memory_every = v;
		return 0;
	case OPT_OFF_CPU_MIN:
		if (v > 10000000) {
			log_error("--off-cpu-min-us must be at most 10000000");
			return -EINVAL;
		}
		e->off_cpu_min_us = v;
		return 0;
	default: /* OPT_UNWIND_ROWS */
		if (v > (64u << 20)) {
			log_error("--unwind-rows must be at most %u", 64u << 20);
			return -EINVAL;
		}
		e->unwind_rows = v;
		return 0;
	}
}

static int env_parse_number(struct env *e, int c, const char *arg)
{
	uint32_t v;

	if (parse_u32(arg, 10, &v) < 0) {
		log_error("bad number \"%.40s\"", arg);
		return -EINVAL;
	}
	return env_set_number(e, c, v);
}

int env_parse(int argc, char **argv, struct env *ret)
{
	int c, r;

	*ret = env_defaults;
	while ((c = getopt_long(argc, argv, "", env_options, NULL)) != -1) {
		r = env_parse_option(ret, c, optarg);
		if (r == -ENOENT)
			r = env_parse_number(ret, c, optarg);
		if (r < 0)
			return r;
	}
	if (optind < argc) {
		log_error("unexpected argument \"%.40s\"", argv[optind]);
		return -EINVAL;
	}
	if (ret->no_cpu && !ret->off_cpu && !ret->memory) {
		log_error("--no-cpu leaves nothing to record: add --off-cpu or --memory");
		return -EINVAL;
	}
	if (!ret->symbolizer)
		ret->symbolizer = getenv("SONDE_SYMBOLIZER");
	if (!ret->symbolizer || !*ret->symbolizer) {
		log_error("--symbolizer is required (or SONDE_SYMBOLIZER)");
		return -EINVAL;
	}
	return 0;
}

bool env_symbolizer_is_tcp(const struct env *e)
{
	return strncmp(e->symbolizer, "tcp:", 4) == 0;
}
