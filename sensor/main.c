/* main.c - sonde-sensor: loads the sampler, tracks processes, aggregates
 * stacks and streams them to the symbolizer.
 *
 * Threads: this one (signals, ring buffer, process table, flushes) and the
 * uplink's connection thread (connect, Welcome, ReadRange answers).
 * SIGINT/SIGTERM are blocked before any thread starts and read through a
 * signalfd here.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "events.h"
#include "fileids.h"
#include "flush.h"
#include "goprobes.h"
#include "kallsyms.h"
#include "log.h"
#include "maps.h"
#include "parse.h"
#include "perf.h"
#include "privileges.h"
#include "procs.h"
#include "rpc_client.h"
#include "sample.h"
#include "sample.skel.h"
#include "stacks.h"
#include "unwind_bpf.h"
#include "vdso.h"
#include "interp_kinds.h"
#include "interp_maps.h"
#include "unwind_maps.h"
#include "uplink.h"

#define MAX_PIDS 64
#define MAX_FILES 4096
#define MAX_PROCS 65536
#define SHUTDOWN_TIMEOUT_MS 15000
/* First gap between rescans of a process whose samples hit unknown
 * addresses; grows while rescans find nothing new (procs.c). */
#define RESCAN_INTERVAL_NS 10000000ull
/* Samples are resolved against /proc/PID/maps when drained, so a drain
 * must come while a short-lived process still exists: the ring's own
 * wakeups (wakeup_bytes) are too rare for that. Processes are short-lived
 * only where processes are being made: for EVENTS_BUSY_NS after a fork,
 * exec or exit the ring is drained again after as long as has passed since
 * that event (at least EVENTS_DRAIN_MS): at 100, 200, 400, 800, 1600 ms and
 * once more at 3.2 s, so a process that lives on for as long again as it
 * had lived when it mapped a library (its samples there trigger the
 * rescan) is drained alive; otherwise at the flush timer. Every 100 ms for the whole window
 * was 20 wakeups after every burst of execs, each 100-300 us of CPU on a
 * VM (docs/benchmarks.md). */
#define EVENTS_DRAIN_MS 100
#define EVENTS_BUSY_NS 2000000000ull
/* After exec, ld.so maps the libraries within the first milliseconds;
 * the exec-time scan may see none of them. These rescans pick them up before
 * most of the process's first samples (neither kprobes nor fentry can be
 * counted on to see the mmap calls themselves). The schedule ends at the
 * first rescan that finds nothing new: ld.so maps every library before
 * the program runs, and a later dlopen shows as samples outside the known
 * mappings, which rescan (procs_rescan_limited). */
#define YOUNG_MAX 1024
/* A stack not sampled for this long is forgotten (stacks.h): short-lived
 * processes bring new stacks all the time, and remembering them all grew
 * both services by a few hundred KiB a minute. Recurring later costs one
 * more definition on the wire. */
#define STACK_IDLE_NS 30000000000ull
static const uint32_t young_rescan_ms[] = { 2, 10, 40, 150 };
/* A fork's child that has neither exec'd nor exited by then gets its own
 * scan (and unwind entries); before, it uses its parent's. */
#define YOUNG_FORK_SCAN_MS 500
/* Processes scanned between two drains of the ring during the first scan. */
#define INITIAL_DRAIN_EVERY 64

enum young_kind { YOUNG_EXEC, YOUNG_FORK };

/* How BPF walks user stacks (bpf/sample.bpf.c). */
enum bpf_walk { WALK_AUTO, WALK_LOOP, WALK_TAIL };

static struct env {
	const char *symbolizer;
	uint32_t frequency;
	uint32_t pids[MAX_PIDS];
	int n_pids;
	const char *cgroup;
	uint32_t duration_s;
	uint32_t buffer_stacks;
	uint32_t flush_ms;
	uint32_t ringbuf_mb;
	uint32_t unwind_rows;
	bool idle;
	enum bpf_walk bpf_walk;
	bool verbose;
	bool no_drop_privileges;
	bool go_probes;
	bool sandbox_selftest;
	struct rpc_tls tls;
	bool insecure;
	const char *symbolizer_user; /* --symbolizer-uid; NULL: the default */
	const char *user; /* --user: who the running sensor is */
	const char *selftest_socket; /* --sandbox-selftest-socket */
} env = {
	.user = "sonde-sensor",
	.frequency = 19,
	.buffer_stacks = 65536,
	/* Every 10 s, as Parca Agent and Pyroscope report (the OpenTelemetry
	 * profiler: 5 s): a flush costs both services several milliseconds
	 * of CPU on a VM (wakeups of both, gRPC's threads, the symbolizer's
	 * profile store; 3.5-7 ms together at 99 Hz, docs/benchmarks.md),
	 * and nobody reads a profile within seconds of a sample. Short-lived processes are drained sooner anyway
	 * (EVENTS_DRAIN_MS); `sonde record` asks for 1 s. */
	.flush_ms = 10000,
	.ringbuf_mb = 0,
	.unwind_rows = 2097152,
};

/* Everything the record handlers touch. */
static struct sensor {
	struct procs *procs;
	struct fileids *fileids;
	struct stacks *stacks;
	struct uplink *uplink;
	struct unwind_maps *unwind;
	struct unwind_bpf unwind_bpf;
	struct goprobes *goprobes; /* Go probes (docs/go-probes.md) */
	struct interp_maps *interp; /* InterpreterConfigs -> interp_procs */
	/* Per interpreter kind: samples of processes with a config, those
	 * with frames, the frames, the walker's records. */
	uint64_t interp_samples[SONDE_INTERP_KINDS], interp_frame_samples[SONDE_INTERP_KINDS];
	uint64_t interp_frames[SONDE_INTERP_KINDS], interp_records[SONDE_INTERP_KINDS];
	struct flush_records *interp_queue; /* the walkers' records, till the flush */
	int interp_fd;
	int redirect_fd; /* lpm_redirect */
	int64_t mono_to_real_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC at start */
	uint64_t samples_taken;
	uint64_t sent_gen;
	/* Accounting (docs/reliability.md): each sample read is accounted to
	 * one connection, the one that sent it or that first reported its
	 * drop. conn_sent: samples in SampleCounts written on sent_gen;
	 * dropped_base: the drop count when sent_gen's accounting began;
	 * dropped_reported: the drop count in the last stats written;
	 * prev_taken: what was accounted to the previous connection (it
	 * broke); unconfirmed: the same, summed over all that broke. */
	uint64_t conn_sent, dropped_base, dropped_reported, prev_taken, unconfirmed;
	/* Charged for the maps, read once after load: their sizes are fixed
	 * then, and reading every map's fdinfo at each flush was a tenth of
	 * the sensor's steady CPU. */
	uint64_t bpf_map_bytes;
	bool kallsyms_pending;
	/* Processes that exec'd recently, rescanned on a schedule (see
	 * rescan_young()). */
	struct young {
		uint32_t pid;
		uint16_t step;
		uint16_t kind; /* enum young_kind */
		uint64_t due_ns; /* CLOCK_MONOTONIC */
	} young[YOUNG_MAX];
	size_t n_young;
	uint64_t last_proc_event_ns; /* CLOCK_MONOTONIC */
} S;

static const char usage[] =
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
	"  --go-probes           load the Go probes the symbolizer plans (docs/go-probes.md);\n"
	"                        keeps CAP_SYS_ADMIN, which the kernel wants for uprobes\n"
	"  --sandbox-selftest    set up, drop privileges with a filter that answers EPERM\n"
	"                        instead of killing, try what the running sensor must not\n"
	"                        do, print one line per attempt and exit (0: all denied)\n"
	"  --sandbox-selftest-socket PATH  with --sandbox-selftest, also connect() to\n"
	"                        this root-owned 0600 Unix socket (must be refused)\n"
	"  --verbose             debug logging, including libbpf's\n"
	"  --help\n";

static int parse_args(int argc, char **argv)
{
	enum { OPT_SYM = 256, OPT_FREQ, OPT_PID, OPT_CGROUP, OPT_DURATION, OPT_BUFFER,
	       OPT_FLUSH, OPT_RINGBUF, OPT_UNWIND_ROWS, OPT_IDLE, OPT_VERBOSE, OPT_HELP,
	       OPT_TLS_CA, OPT_TLS_CERT, OPT_TLS_KEY, OPT_TLS_NAME, OPT_INSECURE, OPT_NO_DROP,
	       OPT_BPF_WALK, OPT_GO_PROBES, OPT_SELFTEST, OPT_SYM_UID, OPT_USER,
	       OPT_SELFTEST_SOCKET };
	static const struct option opts[] = {
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
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		uint32_t v;

		switch (c) {
		case OPT_SYM:
			env.symbolizer = optarg;
			continue;
		case OPT_CGROUP:
			env.cgroup = optarg;
			continue;
		case OPT_IDLE:
			env.idle = true;
			continue;
		case OPT_BPF_WALK:
			if (!strcmp(optarg, "auto"))
				env.bpf_walk = WALK_AUTO;
			else if (!strcmp(optarg, "loop"))
				env.bpf_walk = WALK_LOOP;
			else if (!strcmp(optarg, "tail"))
				env.bpf_walk = WALK_TAIL;
			else {
				log_error("--bpf-walk wants auto, loop or tail, not '%.32s'", optarg);
				return -EINVAL;
			}
			continue;
		case OPT_TLS_CA:
			env.tls.ca = optarg;
			continue;
		case OPT_TLS_CERT:
			env.tls.cert = optarg;
			continue;
		case OPT_TLS_KEY:
			env.tls.key = optarg;
			continue;
		case OPT_TLS_NAME:
			env.tls.server_name = optarg;
			continue;
		case OPT_INSECURE:
			env.insecure = true;
			continue;
		case OPT_NO_DROP:
			env.no_drop_privileges = true;
			continue;
		case OPT_GO_PROBES:
			env.go_probes = true;
			continue;
		case OPT_SELFTEST:
			env.sandbox_selftest = true;
			continue;
		case OPT_SYM_UID:
			env.symbolizer_user = optarg;
			continue;
		case OPT_USER:
			env.user = optarg;
			continue;
		case OPT_SELFTEST_SOCKET:
			env.selftest_socket = optarg;
			continue;
		case OPT_VERBOSE:
			env.verbose = true;
			continue;
		case OPT_HELP:
			fputs(usage, stdout);
			exit(0);
		case OPT_FREQ:
		case OPT_PID:
		case OPT_DURATION:
		case OPT_BUFFER:
		case OPT_FLUSH:
		case OPT_RINGBUF:
		case OPT_UNWIND_ROWS:
			break;
		default:
			fputs(usage, stderr);
			return -EINVAL;
		}
		if (parse_u32(optarg, 10, &v) < 0) {
			log_error("bad number \"%.40s\"", optarg);
			return -EINVAL;
		}
		switch (c) {
		case OPT_FREQ:
			if (v == 0 || v > 10000) {
				log_error("--frequency must be 1..10000");
				return -EINVAL;
			}
			env.frequency = v;
			break;
		case OPT_PID:
			if (v == 0 || env.n_pids == MAX_PIDS) {
				log_error("--pid must be > 0, at most %d times", MAX_PIDS);
				return -EINVAL;
			}
			env.pids[env.n_pids++] = v;
			break;
		case OPT_DURATION:
			env.duration_s = v;
			break;
		case OPT_BUFFER:
			if (v == 0 || v > (1u << 24)) {
				log_error("--buffer-stacks must be 1..%u", 1u << 24);
				return -EINVAL;
			}
			env.buffer_stacks = v;
			break;
		case OPT_FLUSH:
			if (v < 10 || v > 600000) {
				log_error("--flush-ms must be 10..600000");
				return -EINVAL;
			}
			env.flush_ms = v;
			break;
		case OPT_RINGBUF:
			if (v == 0 || v > 1024 || (v & (v - 1))) {
				log_error("--ringbuf-mb must be a power of two up to 1024");
				return -EINVAL;
			}
			env.ringbuf_mb = v;
			break;
		case OPT_UNWIND_ROWS:
			if (v > (64u << 20)) {
				log_error("--unwind-rows must be at most %u", 64u << 20);
				return -EINVAL;
			}
			env.unwind_rows = v;
			break;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument \"%.40s\"", argv[optind]);
		return -EINVAL;
	}
	if (!env.symbolizer)
		env.symbolizer = getenv("SONDE_SYMBOLIZER");
	if (!env.symbolizer || !*env.symbolizer) {
		log_error("--symbolizer is required (or SONDE_SYMBOLIZER)");
		return -EINVAL;
	}
	return 0;
}

/* The uids a unix: symbolizer's listener may have (--symbolizer-uid).
 * SO_PEERCRED names the process that called listen(): sonde-symbolizer
 * binds and listens as root before it drops to --user, so root is always
 * accepted; a symbolizer started as its service user (systemd User=)
 * listens as that user, which --symbolizer-uid names (default: the user
 * `sonde` when it exists). Returns how many uids went into ret (room for
 * 2), or a negative errno for a name that does not resolve. */
static int symbolizer_uids(uint32_t *ret)
{
	const char *name = env.symbolizer_user ? env.symbolizer_user : "sonde";
	const struct passwd *pw;
	uint32_t uid;
	int n = 0;

	ret[n++] = 0;
	if (env.symbolizer_user && parse_u32(name, 10, &uid) == 0) {
		if (uid != 0)
			ret[n++] = uid;
		return n;
	}
	pw = getpwnam(name);
	if (!pw)
		return env.symbolizer_user ? -ENOENT : n; /* no user sonde: root only */
	if (pw->pw_uid != 0)
		ret[n++] = (uint32_t)pw->pw_uid;
	return n;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !env.verbose)
		return 0;
	if (level == LIBBPF_INFO && !env.verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* ---- records from BPF ---- */

static void on_sample(const struct sonde_sample *rec, void *ctx)
{
	struct stack_frame user[SONDE_MAX_USER_FRAMES];
	struct stack_input in = {0};
	char comm[SONDE_COMM_LEN + 1];
	/* events.c checked both counts against the maximum and the size. */
	uint32_t n_user = rec->n_user, n_kernel = rec->n_kernel;

	/* Interpreter frames follow the user frames (bpf/interp.h); events.c
	 * checked that they fit. */
	uint32_t kind = rec->interp_kind < SONDE_INTERP_KINDS ? rec->interp_kind : 0;

	S.interp_samples[kind] += (rec->flags & SONDE_SAMPLE_INTERP) != 0;
	S.interp_frame_samples[kind] += rec->n_interp > 0;
	S.interp_frames[kind] += rec->n_interp;
	const __u64 *rec_user = rec->frames + n_kernel;
	bool rescanned = false;
	const struct proc *pr = procs_find(S.procs, rec->pid);

	S.samples_taken++;
	/* Unknown, or exec'd since its last scan (the exec is ahead of this
	 * sample in the ring): its mappings are to be read now. */
	if (n_user > 0 && rec->pid != 0 && (!pr || pr->exec_pending)) {
		procs_scan(S.procs, rec->pid);
		rescanned = true;
	}
	for (uint32_t i = 0; i < n_user; i++) {
		memset(&user[i], 0, sizeof(user[i]));
		if (procs_resolve(S.procs, rec->pid, rec_user[i], &user[i]) == 0)
			continue;
		/* In no known mapping: maybe a new dlopen'ed library. */
		if (!rescanned) {
			rescanned = true;
			if (procs_rescan_limited(S.procs, rec->pid, RESCAN_INTERVAL_NS) == 1 &&
			    procs_resolve(S.procs, rec->pid, rec_user[i], &user[i]) == 0)
				continue;
		}
		user[i].has_file_id = 0;
		user[i].addr = rec_user[i];
	}
	memcpy(comm, rec->comm, SONDE_COMM_LEN);
	comm[SONDE_COMM_LEN] = '\0';
	/* __u64 is unsigned long long, uint64_t unsigned long: same bits. */
	_Static_assert(sizeof(rec->frames[0]) == sizeof(uint64_t), "frame size");
	in.kernel = (const uint64_t *)rec->frames;
	in.n_kernel = n_kernel;
	in.user = user;
	in.n_user = n_user;
	in.interp = (const uint64_t *)rec->frames + n_kernel + rec->n_user;
	in.n_interp = rec->n_interp;
	in.interp_kind = rec->interp_kind;
	in.outcome = rec->outcome;
	in.pid = rec->pid;
	in.tid = rec->tid;
	in.comm = comm;
	in.unix_ns = rec->ktime_ns + S.mono_to_real_ns;
	_Static_assert(sizeof(in.span) == sizeof(rec->trace_id) + sizeof(rec->span_id), "span");
	memcpy(in.span, rec->trace_id, sizeof(rec->trace_id));
	memcpy(in.span + sizeof(rec->trace_id), rec->span_id, sizeof(rec->span_id));
	stacks_add(S.stacks, &in); /* failures are counted inside */
}

/* The walkers' records wait for the next flush; a full buffer drops
 * (counted): the frames they would name stay unknown. */
#define INTERP_QUEUE_RECORDS 2048
#define INTERP_QUEUE_BYTES (INTERP_QUEUE_RECORDS * 1440u)

static void on_interp(const struct sonde_interp_rec *r, void *ctx)
{
	(void)ctx;
	S.interp_records[r->kind]++; /* events.c checked the kind's range */
	flush_records_add(S.interp_queue, r->pid, r->kind, r + 1, r->len);
}

static void young_add(uint32_t pid, enum young_kind kind)
{
	uint32_t ms = kind == YOUNG_FORK ? YOUNG_FORK_SCAN_MS : young_rescan_ms[0];
	struct young y = {
		.pid = pid,
		.kind = kind,
		.due_ns = clock_ns(CLOCK_MONOTONIC) + ms * 1000000ull,
	};

	/* A fork's child that execs: the exec's schedule replaces the fork
	 * step (one entry per pid). */
	for (size_t i = 0; i < S.n_young; i++) {
		if (S.young[i].pid == pid) {
			S.young[i] = y;
			return;
		}
	}
	/* Full: a sample of an exec'd process scans it (on_sample), and a
	 * fork's child keeps its parent's unwind entries. */
	if (S.n_young == YOUNG_MAX)
		return;
	S.young[S.n_young++] = y;
}

/* Rescans the young processes that are due. Returns the milliseconds to
 * the next due rescan, or -1 if none is scheduled. */
static int rescan_young(void)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC), next = UINT64_MAX;
	size_t kept = 0;

	for (size_t i = 0; i < S.n_young; i++) {
		struct young y = S.young[i];

		if (y.due_ns <= now) {
			const struct proc *pr = procs_find(S.procs, y.pid);
			uint32_t gen = pr ? pr->maps_gen : 0;
			/* After an exec's first scan only the mappings change
			 * (ld.so, then dlopen); comm, exe, cgroup and the
			 * environment were read by it. */
			int r = y.kind == YOUNG_EXEC && y.step == 0 ? procs_scan(S.procs, y.pid)
								   : procs_rescan_maps(S.procs, y.pid);
			bool same = y.step > 0 && r == 0 && pr &&
				    (pr = procs_find(S.procs, y.pid)) && pr->maps_gen == gen;

			if (r == -ESRCH || y.kind == YOUNG_FORK || same ||
			    ++y.step == sizeof(young_rescan_ms) / sizeof(young_rescan_ms[0]))
				continue;
			y.due_ns += (young_rescan_ms[y.step] - young_rescan_ms[y.step - 1]) * 1000000ull;
		}
		if (y.due_ns < next)
			next = y.due_ns;
		S.young[kept++] = y;
	}
	S.n_young = kept;
	return next == UINT64_MAX ? -1 : (int)((next > now ? next - now : 0) / 1000000) + 1;
}

static void on_proc(const struct sonde_proc_event *ev, void *ctx)
{
	int r;

	S.last_proc_event_ns = clock_ns(CLOCK_MONOTONIC);
	switch (ev->type) {
	case SONDE_REC_FORK:
		/* A copy of the parent, nothing read: most children exec or
		 * exit before the next flush. One that lives on is scanned
		 * when its fork step comes due (young_add). */
		r = procs_fork(S.procs, ev->pid, ev->ppid, ev->start_ticks);
		if (r == -ESRCH)
			r = procs_scan(S.procs, ev->pid);
		if (r == 0)
			young_add(ev->pid, YOUNG_FORK);
		else if (r != -ESRCH && r != -ENOEXEC && r != -EEXIST)
			log_debug("pid %" PRIu32 ": fork not followed: %d", ev->pid, r);
		break;
	case SONDE_REC_EXEC:
		/* The new image's libraries are mapped by ld.so in its first
		 * milliseconds: the first scan is the first young step, and
		 * a sample before it rescans (on_sample). */
		procs_exec(S.procs, ev->pid);
		young_add(ev->pid, YOUNG_EXEC);
		break;
	case SONDE_REC_EXIT:
		procs_exit(S.procs, ev->pid);
		break;
	}
}

/* ---- unwind tables: keep the BPF entries in step with the process table ---- */

static void interp_report(const struct proc *pr)
{
	struct interp_mapping *m;
	size_t n = 0;

	if (!S.interp)
		return;
	m = calloc(pr->n_maps ? pr->n_maps : 1, sizeof(*m));
	if (!m)
		return;
	for (size_t i = 0; i < pr->n_maps; i++) {
		if (!pr->maps[i].file)
			continue;
		m[n].start = pr->maps[i].start;
		m[n].offset = pr->maps[i].offset;
		memcpy(m[n].file_id, pr->maps[i].info.id.bytes, sizeof(m[n].file_id));
		n++;
	}
	interp_maps_set_process(S.interp, pr->pid, m, n);
	free(m);
}

static int interp_report_one(const struct proc *pr, void *ctx)
{
	(void)ctx;
	interp_report(pr);
	return 0;
}

static void on_maps_changed(const struct proc *pr, void *ctx)
{
	struct unwind_mapping *m = calloc(pr->n_maps ? pr->n_maps : 1, sizeof(*m));
	size_t n = 0;

	if (!m) {
		log_warn("out of memory for the unwind entries of pid %" PRIu32 ", ignoring", pr->pid);
		return;
	}
	for (size_t i = 0; i < pr->n_maps; i++) {
		if (!pr->maps[i].file)
			continue;
		m[n].start = pr->maps[i].start;
		m[n].end = pr->maps[i].end;
		m[n].offset = pr->maps[i].offset;
		memcpy(m[n].file_id, pr->maps[i].info.id.bytes, sizeof(m[n].file_id));
		n++;
	}
	if (unwind_maps_set_process(S.unwind, pr->pid, m, n) < 0)
		log_warn("out of memory for the unwind entries of pid %" PRIu32 ", ignoring", pr->pid);
	free(m);
	/* Its own entries now, not its parent's or its old image's. */
	uint32_t pid = pr->pid;
	if (bpf_map_delete_elem(S.redirect_fd, &pid) < 0 && errno != ENOENT)
		log_debug("pid %" PRIu32 ": lpm_redirect not cleared: %d", pid, -errno);
	goprobes_process(S.goprobes, pr);
	interp_report(pr);
}

static void on_proc_gone(uint32_t pid, void *ctx)
{
	unwind_maps_remove_process(S.unwind, pid);
	goprobes_process_gone(S.goprobes, pid);
	if (S.interp)
		interp_maps_remove_process(S.interp, pid);
}

/* ---- interpreter configs (sensor/interp_maps.c) ---- */

static int interp_update(void *ctx, uint32_t pid, const struct sonde_interp_proc *v)
{
	(void)ctx;
	return bpf_map_update_elem(S.interp_fd, &pid, v, BPF_ANY) ? -errno : 0;
}

static int interp_remove(void *ctx, uint32_t pid)
{
	(void)ctx;
	return bpf_map_delete_elem(S.interp_fd, &pid) ? -errno : 0;
}

static const struct interp_map_ops interp_map_ops = {
	.update = interp_update,
	.remove = interp_remove,
};

/* On the uplink's thread, with a config validate_interp_config()
 * accepted. */
static void on_interpreter_config(void *ctx, const Sonde__V1__InterpreterConfig *c)
{
	(void)ctx;
	if (interp_maps_add_config(S.interp, c->file_id.data, c->kind, c->format_version,
				   c->runtime_offset, c->layout.data, c->layout.len) < 0)
		log_debug("InterpreterConfig not kept (%u configs held at most)",
			  INTERP_MAPS_MAX_CONFIGS);
}

static const struct procs_observer unwind_observer = {
	.maps_changed = on_maps_changed,
	.gone = on_proc_gone,
};

/* Kernel memory charged for all of the sensor's BPF maps. */
static uint64_t bpf_map_bytes(struct sample_bpf *skel)
{
	struct bpf_map *map;
	uint64_t total = 0;

	bpf_object__for_each_map(map, skel->obj)
		total += unwind_bpf_map_memlock(bpf_map__fd(map));
	return total;
}

/* ---- setup ---- */

/* The ring buffer holds about one second of samples of every CPU: ten
 * drain intervals of slack, and no more, since the sensor maps all of it
 * (its pages count in the sensor's RSS). */
static uint32_t ringbuf_size(void)
{
	uint64_t want, size = 256u << 10;
	int ncpus = libbpf_num_possible_cpus();

	if (env.ringbuf_mb)
		return env.ringbuf_mb << 20;
	want = (uint64_t)(ncpus > 0 ? ncpus : 1) * env.frequency * sizeof(struct sonde_sample);
	while (size < want && size < (64u << 20))
		size <<= 1;
	return (uint32_t)size;
}

/* cgroup v2 id (the directory's inode) and depth below the cgroup2 root. */
static int cgroup_resolve(const char *path, uint64_t *ret_id, uint32_t *ret_level,
			  char **ret_rel)
{
	char mnt[4096] = "", line[8192], *real = NULL;
	struct stat st;
	uint32_t level = 0;
	FILE *f;
	int r = 0;

	f = fopen("/proc/self/mounts", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char dev[256], dir[4096], type[64];

		if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 &&
		    strcmp(type, "cgroup2") == 0) {
			snprintf(mnt, sizeof(mnt), "%s", dir);
			break;
		}
	}
	fclose(f);
	if (!mnt[0])
		return -ENOENT;
	real = realpath(path, NULL);
	if (!real)
		return -errno;
	if (strncmp(real, mnt, strlen(mnt)) != 0 ||
	    (real[strlen(mnt)] != '/' && real[strlen(mnt)] != '\0')) {
		r = -EXDEV;
		goto out;
	}
	if (stat(real, &st) < 0) {
		r = -errno;
		goto out;
	}
	for (const char *p = real + strlen(mnt); *p; p++)
		if (*p == '/' && p[1] != '\0')
			level++;
	*ret_rel = strdup(real[strlen(mnt)] ? real + strlen(mnt) : "/");
	if (!*ret_rel) {
		r = -ENOMEM;
		goto out;
	}
	*ret_id = st.st_ino;
	*ret_level = level;
out:
	free(real);
	return r;
}

static uint64_t bpf_lost(struct sample_bpf *skel, uint64_t *ret_errs)
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

/* Is pid in cgroup v2 path rel (as /proc/PID/cgroup shows it) or below? */
static bool pid_in_cgroup(uint32_t pid, const char *rel)
{
	char path[64], line[4096];
	size_t n = strlen(rel);
	bool in = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		in = strcmp(rel, "/") == 0 ||
		     (strncmp(line + 3, rel, n) == 0 && (line[3 + n] == '/' || line[3 + n] == '\0'));
		break;
	}
	fclose(f);
	return in;
}

/* The --pid processes in the BPF allow-list, before sampling starts: BPF
 * follows their forks from then on. Nothing of them is read. */
static int allow_pids(struct sample_bpf *skel)
{
	int fd = bpf_map__fd(skel->maps.allowed_tgids);
	uint8_t one = 1;

	for (int i = 0; i < env.n_pids; i++)
		if (bpf_map_update_elem(fd, &env.pids[i], &one, BPF_ANY) < 0)
			return -errno;
	return 0;
}

/* Adds the existing descendants of the --pid processes to the BPF
 * allow-list and scans them all. Runs after the
 * privilege drop, with the perf events already sampling: the ring buffer
 * is drained every INITIAL_DRAIN_EVERY scans, so that a long first scan
 * does not fill it. */
static int track_initial(struct sample_bpf *skel, struct events *ev, const char *cgroup_rel)
{
	int fd = bpf_map__fd(skel->maps.allowed_tgids);
	uint8_t one = 1;
	bool changed = true;
	int n = 0;

	/* Every process once; for --pid, repeat until no new descendant. */
	while (changed) {
		DIR *d = opendir("/proc");
		struct dirent *de;

		if (!d)
			return -errno;
		changed = false;
		while ((de = readdir(d))) {
			uint32_t pid;
			uint8_t v;

			if (parse_u32(de->d_name, 10, &pid) < 0 || procs_find(S.procs, pid))
				continue;
			if (env.n_pids) {
				if (bpf_map_lookup_elem(fd, &pid, &v) < 0) {
					/* A child of an allowed process? Scan to learn the ppid. */
					char path[64], buf[1024];
					FILE *f;
					uint32_t ppid;
					uint64_t start;
					size_t len;

					snprintf(path, sizeof(path), "/proc/%u/stat", pid);
					f = fopen(path, "re");
					if (!f)
						continue;
					len = fread(buf, 1, sizeof(buf) - 1, f);
					fclose(f);
					buf[len] = '\0';
					if (proc_parse_stat(buf, len, &ppid, &start) < 0 ||
					    bpf_map_lookup_elem(fd, &ppid, &v) < 0)
						continue;
					bpf_map_update_elem(fd, &pid, &one, BPF_ANY);
					changed = true;
				}
			}
			/* Check the cgroup before scanning, so that no file of a
			 * process we do not profile gets registered. */
			if (cgroup_rel && !pid_in_cgroup(pid, cgroup_rel))
				continue;
			if (procs_scan(S.procs, pid) < 0)
				continue;
			if (++n % INITIAL_DRAIN_EVERY == 0)
				events_consume(ev);
		}
		closedir(d);
	}
	return n;
}

/* ---- flushing ---- */

static void counters(struct sample_bpf *skel, struct sensor_counters *c)
{
	uint64_t errs[SONDE_ERR__COUNT];
	struct unwind_maps_stats us;
	struct stacks_stats ss;
	struct goprobes_stats gs;

	goprobes_get_stats(S.goprobes, &gs);
	stacks_get_stats(S.stacks, &ss);
	unwind_maps_get_stats(S.unwind, &us);
	c->samples_taken = S.samples_taken;
	c->samples_lost = bpf_lost(skel, errs);
	c->samples_dropped = ss.dropped;
	c->processes = procs_count(S.procs);
	c->files = fileids_count(S.fileids);
	c->unwind_tables_loaded = us.tables_loaded;
	c->unwind_rows_loaded = us.rows_loaded;
	c->unwind_tables_rejected = us.tables_rejected;
	c->bpf_map_bytes = S.bpf_map_bytes;
	c->connection_samples_dropped = ss.dropped - S.dropped_base;
	c->connection_samples_taken = S.conn_sent + c->connection_samples_dropped;
	c->samples_unconfirmed = S.prev_taken;
	c->go_probe_files = gs.files;
	c->go_probe_links = gs.links;
	c->go_probe_attach_failures = gs.attach_failures;
	c->go_probe_records = gs.records;
	c->go_probe_records_lost = gs.lost;
	c->probe_plans_refused = uplink_plans_refused(S.uplink) + gs.plans_refused;
	c->interpreter_configs_refused = uplink_configs_refused(S.uplink);
}

/* A new session knows none of the walkers' records: BPF must send each
 * again, so each kind's map of records sent is emptied. */
static void interp_reset_connection(struct sample_bpf *skel)
{
	uint8_t key[64], next[64];

	flush_records_clear(S.interp_queue);
	for (uint32_t kind = 1; kind < SONDE_INTERP_KINDS; kind++) {
		const struct sonde_interp_kind_info *k = sonde_interp_kind_info(kind);
		struct bpf_map *m = k && k->seen_map
					    ? bpf_object__find_map_by_name(skel->obj, k->seen_map)
					    : NULL;
		unsigned n = 0, max;
		int fd;

		if (!m || bpf_map__key_size(m) > sizeof(key))
			continue;
		fd = bpf_map__fd(m);
		max = bpf_map__max_entries(m);
		/* Deleting the first key each time: bounded by the map's size. */
		while (n++ < max && !bpf_map_get_next_key(fd, NULL, next)) {
			memcpy(key, next, sizeof(key));
			if (bpf_map_delete_elem(fd, key))
				break;
		}
	}
}

/* Sends what is pending on the current connection. Returns 0, -ENOTCONN
 * while there is none, or the uplink's error (retried at the next flush). */
static int sensor_flush(struct sample_bpf *skel, uint64_t *ret_gen)
{
	struct sensor_counters c;
	uint64_t gen = uplink_generation(S.uplink), sent = 0;
	int r;

	if (!gen)
		return -ENOTCONN;
	if (gen != S.sent_gen) {
		/* Ids and everything the symbolizer knew are void. */
		stacks_reset_connection(S.stacks);
		procs_reset_connection(S.procs);
		interp_reset_connection(skel);
		S.kallsyms_pending = true;
		/* The old connection broke: what it got may be lost with it.
		 * Drops not reported on it are this one's to report. */
		S.prev_taken = S.conn_sent + (S.dropped_reported - S.dropped_base);
		S.unconfirmed += S.prev_taken;
		S.conn_sent = 0;
		S.dropped_base = S.dropped_reported;
		S.sent_gen = gen;
	}
	r = flush_processes(S.uplink, gen, S.procs, PROCS_DIRTY);
	if (r < 0)
		return r;
	if (S.kallsyms_pending) {
		r = kallsyms_send(S.uplink, gen, uplink_max_message_bytes(S.uplink));
		if (r < 0)
			return r;
		log_debug("sent %d kernel symbols", r);
		S.kallsyms_pending = false;
	}
	r = flush_exits(S.uplink, gen, S.procs);
	if (r < 0)
		return r;
	r = flush_interp_records(S.uplink, gen, S.interp_queue);
	if (r < 0)
		return r;
	r = flush_stacks(S.uplink, gen, S.stacks, uplink_max_message_bytes(S.uplink), &sent);
	S.conn_sent += sent;
	if (r < 0)
		return r;
	goprobes_consume(S.goprobes);
	r = goprobes_flush(S.goprobes, S.uplink, gen, uplink_max_message_bytes(S.uplink),
			   S.mono_to_real_ns);
	if (r < 0)
		return r;
	procs_reap(S.procs); /* their samples are out */
	counters(skel, &c);
	r = flush_stats(S.uplink, gen, &c, false);
	if (r < 0)
		return r;
	S.dropped_reported = S.dropped_base + c.connection_samples_dropped;
	if (ret_gen)
		*ret_gen = gen;
	return 0;
}

/* Buffers that fill up between two flushes (a burst of new stacks, a busy
 * Go service, many new interpreter records) are sent at half, before the
 * timer: full, they would drop. */
static bool buffers_half_full(void)
{
	struct stacks_stats ss;

	stacks_get_stats(S.stacks, &ss);
	return (ss.counts && 2 * ss.counts >= env.buffer_stacks) || goprobes_half_full(S.goprobes) ||
	       flush_records_half_full(S.interp_queue);
}

/* New processes go out at once, not at the next flush: the symbolizer
 * sends their unwind tables when it sees them, and a process that lives
 * 200 ms needs them before it is gone. A new connection gets everything
 * at once for the same reason (a restarted sensor is fully effective in
 * well under a second). */
static void sensor_flush_new_processes(struct sample_bpf *skel)
{
	uint64_t gen = uplink_generation(S.uplink);

	if (gen && gen != S.sent_gen)
		sensor_flush(skel, NULL); /* retried at the flush */
	else if (gen)
		flush_processes(S.uplink, gen, S.procs, PROCS_DIRTY_URGENT); /* retried at the flush */
}

/* The counters alone, once the current connection had its full flush. */
static void sensor_flush_stats(struct sample_bpf *skel)
{
	struct sensor_counters c;
	uint64_t gen = uplink_generation(S.uplink);

	if (!gen || gen != S.sent_gen)
		return;
	counters(skel, &c);
	flush_stats(S.uplink, gen, &c, false); /* retried at the flush */
}

static void drain_and_final_flush(struct sample_bpf *skel, struct events *ev)
{
	uint64_t start = clock_ns(CLOCK_MONOTONIC), gen = 0;
	bool clean;
	int r;

	events_consume(ev);
	/* Wait for a connection if there is none, within the same budget. */
	for (;;) {
		r = sensor_flush(skel, &gen);
		if (r == 0)
			break;
		if (clock_ns(CLOCK_MONOTONIC) - start > SHUTDOWN_TIMEOUT_MS * 1000000ull) {
			log_warn("no symbolizer connection at shutdown, buffered samples are lost");
			return;
		}
		usleep(100 * 1000);
	}
	clean = uplink_finish(S.uplink, gen,
			      SHUTDOWN_TIMEOUT_MS -
				      (int)((clock_ns(CLOCK_MONOTONIC) - start) / 1000000));
	log_debug("stream ended %s", clean ? "cleanly" : "by us");
}

static int make_timer(uint32_t ms)
{
	struct itimerspec its = {
		.it_interval = {ms / 1000, (long)(ms % 1000) * 1000000},
		.it_value = {ms / 1000, (long)(ms % 1000) * 1000000},
	};
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (timerfd_settime(fd, 0, &its, NULL) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_warn_errno(-errno, "cannot raise RLIMIT_NOFILE, ignoring");
	}
}

/* open -> configure -> load (not attach): the sampler object, its maps
 * wired to the modules that write them. *ret_skel is set as soon as the
 * object exists (the caller destroys it, also on failure). */
static int bpf_setup(uint64_t cgroup_id, uint32_t cgroup_level, struct sample_bpf **ret_skel,
		     bool *ret_use_loop)
{
	struct sample_bpf *skel;
	uint32_t ringbuf_bytes;
	bool use_loop;
	int err, n;

	skel = sample_bpf__open();
	if (!skel) {
		err = -errno;
		log_error_errno(err, "cannot open the BPF object");
		return err;
	}
	*ret_skel = skel;
	skel->rodata->filter_enabled = env.n_pids > 0 || cgroup_id != 0;
	skel->rodata->filter_tgids = env.n_pids > 0;
	skel->rodata->filter_cgroup_id = cgroup_id;
	skel->rodata->filter_cgroup_level = cgroup_level;
	skel->rodata->keep_idle = env.idle;
	/* One of the two walkers is loaded: bpf_loop() where the kernel has
	 * it (5.17), tail calls elsewhere; a kernel without the helper would
	 * refuse the whole object otherwise. */
	*ret_use_loop = use_loop = env.bpf_walk == WALK_LOOP ||
		   (env.bpf_walk == WALK_AUTO &&
		    libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) == 1);
	bpf_program__set_autoload(skel->progs.sonde_sample, use_loop);
	bpf_program__set_autoload(skel->progs.sonde_sample_tail, !use_loop);
	bpf_program__set_autoload(skel->progs.sonde_walk_tail, !use_loop);
	/* Wake up for a quarter of the ring; the main loop drains it every
	 * EVENTS_DRAIN_MS anyway (see sample.bpf.c). */
	ringbuf_bytes = ringbuf_size();
	skel->rodata->wakeup_bytes = ringbuf_bytes / 4;
	err = bpf_map__set_max_entries(skel->maps.events, ringbuf_bytes);
	if (err < 0) {
		log_error_errno(err, "cannot size the ring buffer");
		return err;
	}
	/* Buckets of 8 rows (bpf/unwind.h). An array cannot be empty: with
	 * tables off it has one unused bucket. */
	env.unwind_rows -= env.unwind_rows % SONDE_UNWIND_ROWS_PER_BUCKET;
	err = bpf_map__set_max_entries(skel->maps.unwind_rows,
				       env.unwind_rows ? env.unwind_rows / SONDE_UNWIND_ROWS_PER_BUCKET
						       : 1);
	if (err < 0) {
		log_error_errno(err, "cannot size the unwind row array");
		return err;
	}
	n = UNWIND_INDEX_ENTRIES(env.unwind_rows) / SONDE_UNWIND_INDEX_PER_BUCKET;
	err = bpf_map__set_max_entries(skel->maps.unwind_index, n > 0 ? n : 1);
	if (err < 0) {
		log_error_errno(err, "cannot size the unwind index array");
		return err;
	}
	err = sample_bpf__load(skel);
	if (err < 0) {
		log_error_errno(err, "cannot load the BPF programs (run with --verbose for the "
				     "verifier log)");
		return err;
	}
	if (!use_loop) {
		uint32_t zero = 0;
		int prog_fd = bpf_program__fd(skel->progs.sonde_walk_tail);

		err = bpf_map_update_elem(bpf_map__fd(skel->maps.walk_progs), &zero, &prog_fd, BPF_ANY);
		if (err < 0) {
			err = -errno;
			log_error_errno(err, "cannot install the tail-call walker");
			return err;
		}
	}
	log_info("user stacks walked with %s", use_loop ? "bpf_loop()" : "tail calls (no bpf_loop())");
	S.unwind_bpf.rows_fd = bpf_map__fd(skel->maps.unwind_rows);
	S.bpf_map_bytes = bpf_map_bytes(skel);
	S.unwind_bpf.index_fd = bpf_map__fd(skel->maps.unwind_index);
	S.unwind_bpf.lpm_fd = bpf_map__fd(skel->maps.unwind_lpm);
	S.unwind_bpf.gen = &skel->bss->unwind_gen;
	S.unwind_bpf.fileids = S.fileids;
	if (env.go_probes) {
		S.goprobes = goprobes_new(bpf_map__fd(skel->maps.go_spans));
		if (!S.goprobes) {
			err = -ENOMEM;
			return err;
		}
	}
	S.unwind = unwind_maps_new(env.unwind_rows, &unwind_bpf_ops, &S.unwind_bpf);
	if (!S.unwind) {
		err = -ENOMEM;
		log_error("out of memory");
		return err;
	}
	S.interp_fd = bpf_map__fd(skel->maps.interp_procs);
	S.redirect_fd = bpf_map__fd(skel->maps.lpm_redirect);
	S.interp = interp_maps_new(&interp_map_ops, NULL);
	S.interp_queue = flush_records_new(INTERP_QUEUE_RECORDS, INTERP_QUEUE_BYTES);
	if (!S.interp || !S.interp_queue) {
		err = -ENOMEM;
		log_error("out of memory");
		return err;
	}
	procs_set_observer(S.procs, &unwind_observer, NULL);
	return 0;
}

/* The main loop, until a signal or --duration. Returns 0 or a negative
 * errno (poll failed). */
static int run(struct sample_bpf *skel, struct events *ev, int sfd, int tfd, int wfd)
{
	uint64_t end_ns = 0;
	int n, err = 0;

	if (env.duration_s)
		end_ns = clock_ns(CLOCK_MONOTONIC) + env.duration_s * 1000000000ull;
	int young_wait = -1; /* ms to the next young-process rescan */
	for (;;) {
		struct pollfd pfd[5] = {
			{.fd = events_fd(ev), .events = POLLIN},
			{.fd = sfd, .events = POLLIN},
			{.fd = tfd, .events = POLLIN},
			{.fd = wfd, .events = POLLIN},
			{.fd = S.goprobes ? goprobes_fd(S.goprobes) : -1, .events = POLLIN},
		};
		/* -1: until the flush timer, a signal or a full quarter ring. */
		uint64_t since_event = clock_ns(CLOCK_MONOTONIC) - S.last_proc_event_ns;
		int timeout = -1;

		if (S.n_young || uplink_generation(S.uplink) != S.sent_gen)
			timeout = EVENTS_DRAIN_MS;
		else if (since_event < EVENTS_BUSY_NS) {
			int since_ms = (int)(since_event / 1000000); /* < 2000 */

			timeout = since_ms > EVENTS_DRAIN_MS ? since_ms : EVENTS_DRAIN_MS;
		}

		if (young_wait >= 0 && (timeout < 0 || young_wait < timeout))
			timeout = young_wait;
		if (end_ns) {
			uint64_t now = clock_ns(CLOCK_MONOTONIC);

			if (now >= end_ns) {
				log_info("--duration elapsed, stopping");
				break;
			}
			if (timeout < 0 || (end_ns - now) / 1000000 < (uint64_t)timeout)
				timeout = (int)((end_ns - now) / 1000000) + 1;
		}
		if (poll(pfd, 5, timeout) < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			log_error_errno(err, "poll");
			break;
		}
		/* Samples do not wake us (wakeup_bytes): drain on every turn. */
		n = events_consume(ev);
		if (n < 0 && n != -EINTR)
			log_warn_errno(n, "ring buffer, ignoring");
		/* Plans the uplink thread queued; Go probe records. */
		goprobes_apply(S.goprobes, S.procs);
		goprobes_consume(S.goprobes);
		young_wait = rescan_young();
		sensor_flush_new_processes(skel);
		if (pfd[3].revents) {
			eventfd_t v;

			/* A connection was made (flushed just above) or a table
			 * loaded: Status shows it now, not at the next flush. */
			eventfd_read(wfd, &v);
			/* An interpreter config: entries for the processes
			 * that already map its file. */
			if (interp_maps_take_pending(S.interp))
				procs_visit(S.procs, interp_report_one, NULL);
			sensor_flush_stats(skel);
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				log_info("got signal %u, stopping", si.ssi_signo);
				break;
			}
		}
		bool due = false;

		if (pfd[2].revents) {
			uint64_t ticks;

			due = read(tfd, &ticks, sizeof(ticks)) == sizeof(ticks);
		}
		if (due || buffers_half_full()) {
			int r = sensor_flush(skel, NULL);

			if (r < 0 && r != -ENOTCONN)
				log_debug("flush failed: %d, retrying later", r);
		}
	}

	return err;
}

/* The totals, logged at exit. */
static void log_totals(struct sample_bpf *skel, struct events *ev)
{
	static const char *const err_names[] = SONDE_ERR_NAMES;
	uint64_t errs[SONDE_ERR__COUNT];
	struct sensor_counters c;
	struct unwind_maps_stats us;
	struct stacks_stats ss;

	_Static_assert(sizeof(err_names) / sizeof(err_names[0]) == SONDE_ERR__COUNT,
		       "SONDE_ERR_NAMES");
	counters(skel, &c);
	stacks_get_stats(S.stacks, &ss);
	bpf_lost(skel, errs);
	for (int k = 0; k < SONDE_ERR__COUNT; k++)
		if (errs[k])
			log_debug("bpf error %s: %" PRIu64, err_names[k], errs[k]);
	log_info("samples taken %" PRIu64 ", lost %" PRIu64 ", dropped %" PRIu64
		 "; %zu stacks; %" PRIu64 " processes; %" PRIu64 " files; %" PRIu64
		 " ranges served; %" PRIu64 " malformed records",
		 c.samples_taken, c.samples_lost, c.samples_dropped, ss.stacks, c.processes,
		 c.files, uplink_read_ranges(S.uplink), events_malformed(ev));
	for (uint32_t kind = 1; kind < SONDE_INTERP_KINDS; kind++) {
		const struct sonde_interp_kind_info *k = sonde_interp_kind_info(kind);

		if (!k)
			continue;
		log_info("%s: %" PRIu64 " samples of configured processes, %" PRIu64
			 " with %" PRIu64 " interpreter frames, %" PRIu64 " %s",
			 k->name, S.interp_samples[kind], S.interp_frame_samples[kind],
			 S.interp_frames[kind], S.interp_records[kind], k->records);
	}
	log_info("interpreter records: %" PRIu64 " received, %" PRIu64 " dropped",
		 events_interp(ev), flush_records_dropped(S.interp_queue));
	log_info("accounting: last connection took %" PRIu64 " (%" PRIu64 " sent, %" PRIu64
		 " dropped); %" PRIu64 " were accounted to connections that broke",
		 c.connection_samples_taken, S.conn_sent, c.connection_samples_dropped,
		 S.unconfirmed);
	unwind_maps_get_stats(S.unwind, &us);
	for (int k = 0; k < UNWIND_REJECT__COUNT; k++)
		if (us.rejected[k])
			log_info("unwind tables rejected (%s): %" PRIu64, unwind_reject_names[k],
				 us.rejected[k]);
	log_info("unwind tables loaded %" PRIu64 " (%" PRIu64 " rows of %" PRIu32
		 "; %" PRIu64 " without a page index), rejected %" PRIu64 ", unavailable %" PRIu64
		 ", evicted %" PRIu64 "; %" PRIu64 " LPM entries (%" PRIu64 " mappings without); BPF maps %" PRIu64
		 " KiB",
		 us.tables_loaded, us.rows_loaded, us.capacity_rows, us.tables_unindexed,
		 us.tables_rejected,
		 us.tables_unavailable, us.tables_evicted, us.lpm_entries, us.lpm_failures,
		 c.bpf_map_bytes >> 10);
}

/* Before any thread (gRPC's included) exists: SIGINT/SIGTERM through a
 * signalfd, no SIGPIPE. Returns the signalfd or a negative errno. */
static int signals_setup(void)
{
	sigset_t mask;
	int sfd, err;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0) {
		err = -errno;
		log_error_errno(err, "sigprocmask");
		return err;
	}
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		err = -errno;
		log_error_errno(err, "signalfd");
		return err;
	}
	signal(SIGPIPE, SIG_IGN);
	return sfd;
}

/* gRPC, and TLS for a tcp: symbolizer. */
static int rpc_setup(void)
{
	int err;

	/* gRPC's backup poller polls each channel from a timer in case no
	 * thread does; the uplink thread always does (it waits in the
	 * completion queue), and the poller's timer thread was a third of
	 * the sensor's idle CPU. The environment still wins. */
	setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "0", 0);
	rpc_global_init();
	if (strncmp(env.symbolizer, "tcp:", 4) != 0)
		return 0;
	/* TCP means mutual TLS unless the operator says otherwise. */
	if (env.tls.ca && env.tls.cert && env.tls.key) {
		err = rpc_client_set_tls(&env.tls);
		if (err < 0)
			log_error_errno(err, "cannot read --tls-ca/--tls-cert/--tls-key");
		return err;
	}
	if (!env.insecure) {
		log_error("--symbolizer %.200s needs --tls-ca, --tls-cert and --tls-key (or --insecure for testing)",
			  env.symbolizer);
		return -EINVAL;
	}
	return 0;
}

/* --cgroup resolved to its id, level and path below the cgroup2 root;
 * --pid checked to exist (a lookup in /proc, nothing of it read). */
static int filters_resolve(uint64_t *ret_cgroup_id, uint32_t *ret_cgroup_level,
			   char **ret_cgroup_rel)
{
	int err;

	if (env.cgroup) {
		err = cgroup_resolve(env.cgroup, ret_cgroup_id, ret_cgroup_level, ret_cgroup_rel);
		if (err < 0) {
			log_error_errno(err, "--cgroup %.200s: not a cgroup v2 directory", env.cgroup);
			return err;
		}
	}
	for (int i = 0; i < env.n_pids; i++) {
		char path[32];

		snprintf(path, sizeof(path), "/proc/%u", env.pids[i]);
		if (access(path, F_OK) < 0) {
			log_error("--pid %u: no such process", env.pids[i]);
			return -ESRCH;
		}
	}
	return 0;
}

/* The process table, the file registry (with the sensor's own vDSO) and
 * the stack buffer. */
static int tables_setup(void)
{
	struct fileid_entry *vdso;
	struct fileid_info info;
	int r;

	S.mono_to_real_ns = (int64_t)(clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC));
	S.fileids = fileids_new(MAX_FILES);
	S.procs = S.fileids ? procs_new(S.fileids, MAX_PROCS, "/proc") : NULL;
	S.stacks = stacks_new(env.buffer_stacks, 4 * (size_t)env.buffer_stacks, STACK_IDLE_NS);
	if (!S.fileids || !S.procs || !S.stacks) {
		log_error("out of memory");
		return -ENOMEM;
	}
	/* Held for the sensor's life; without it vDSO frames are unnamed
	 * and walked with frame pointers, as before. */
	r = vdso_register(S.fileids, &vdso, &info);
	if (r == 0)
		procs_set_vdso(S.procs, vdso, &info);
	else
		log_warn("the vDSO is not registered (%s): its frames stay unnamed", strerror(-r));
	return 0;
}

/* The uplink's thread, connecting to the symbolizer; *ret_wfd (owned by
 * the caller, also on failure) wakes the main loop. */
/* A unix: symbolizer must listen as root or --symbolizer-uid (uplink.h);
 * tcp: is authenticated by TLS. */
static int uplink_peer_setup(void)
{
	uint32_t uids[2];
	int n_uids;

	if (strncmp(env.symbolizer, "unix:", 5) != 0) {
		if (env.symbolizer_user)
			log_warn("--symbolizer-uid applies to unix: symbolizers only (tcp: is "
				 "authenticated by TLS), ignoring");
		return 0;
	}
	n_uids = symbolizer_uids(uids);
	if (n_uids < 0) {
		log_error("--symbolizer-uid %.64s: no such user", env.symbolizer_user);
		return n_uids;
	}
	if (n_uids > 1)
		log_debug("a unix: symbolizer must listen as uid 0 or %" PRIu32, uids[1]);
	else
		log_debug("a unix: symbolizer must listen as uid 0");
	return uplink_set_peer_uids(S.uplink, uids, (size_t)n_uids);
}

/* Everything of the uplink but its thread: nothing is connected or read
 * from the symbolizer until uplink_begin(), after the privilege drop. */
static int uplink_setup(int *ret_wfd)
{
	int wfd, err;

	S.uplink = uplink_new(env.symbolizer, S.fileids, env.frequency, clock_ns(CLOCK_REALTIME));
	if (!S.uplink)
		return -EINVAL;
	err = uplink_peer_setup();
	if (err < 0)
		return err;
	uplink_set_unwind_maps(S.uplink, S.unwind);
	uplink_set_goprobes(S.uplink, S.goprobes);
	uplink_set_interp_handler(S.uplink, on_interpreter_config, NULL);
	wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (wfd < 0) {
		err = -errno;
		log_error_errno(err, "eventfd");
		return err;
	}
	*ret_wfd = wfd;
	uplink_set_wakeup(S.uplink, wfd);
	return 0;
}

/* Starts the uplink's thread: it connects and parses the symbolizer's
 * messages, so only once the sensor holds no more than it keeps. */
static int uplink_begin(void)
{
	int err = uplink_start(S.uplink);

	if (err < 0)
		log_error_errno(err, "cannot start the uplink thread");
	return err;
}

/* What the running sensor still does (privileges.h). */
static unsigned privileges_mode(void)
{
	unsigned mode = 0;

#ifndef NDEBUG
	mode |= PRIVILEGES_DEBUG;
#endif
	if (env.go_probes)
		mode |= PRIVILEGES_GO_PROBES;
	if (strncmp(env.symbolizer, "tcp:", 4) == 0)
		mode |= PRIVILEGES_TCP;
	return mode;
}

/* The sensor's user and the symbolizer socket's group (privileges.h),
 * resolved before the drop: a sensor that cannot switch does not start
 * (unless --no-drop-privileges). */
static int user_resolve(struct privileges_user *ret)
{
	int err;

	if (env.no_drop_privileges && !env.sandbox_selftest)
		return 0;
	err = privileges_resolve(env.user, env.symbolizer_user, ret);
	if (err == -ENOENT)
		log_error("--user %.64s or --symbolizer-uid %.64s: no such user (create the sensor's "
			  "user with: useradd --system --no-create-home --shell /usr/sbin/nologin "
			  "sonde-sensor)", env.user,
			  env.symbolizer_user ? env.symbolizer_user : "sonde");
	else if (err < 0)
		log_error("--user %.64s: the sensor's user must not be root or in group root",
			  env.user);
	return err;
}

/* Set-up is over: BPF loaded and attached, perf events open, ring buffer
 * mapped. Keep only what the running sensor needs; then, and only then,
 * start the uplink (the symbolizer's messages) and read the targets'
 * /proc (ARCHITECTURE.md, rule 1). Returns the number of processes found
 * or a negative errno. */
static int drop_and_scan(struct sample_bpf *skel, struct events *ev, const char *cgroup_rel,
			 const struct privileges_user *user)
{
	int err, n;

	if (!env.no_drop_privileges) {
		err = privileges_drop(privileges_mode(), user);
		if (err < 0)
			return err;
	} else {
		log_warn("--no-drop-privileges: running as root with every capability and no seccomp filter");
	}
	err = uplink_begin();
	if (err < 0)
		return err;
	n = track_initial(skel, ev, cgroup_rel);
	if (n < 0)
		log_error_errno(n, "cannot scan /proc");
	else
		log_debug("initial scan after the privilege drop: %d processes", n);
	return n;
}

/* --sandbox-selftest: the real drop, with a filter that answers EPERM
 * where it would kill, then the attempts. 0 if all were denied. */
static int sandbox_selftest(const struct privileges_user *user)
{
	unsigned mode = privileges_mode() | PRIVILEGES_SELFTEST;
	int err = privileges_drop(mode, user), allowed;

	if (err < 0)
		return err;
	allowed = privileges_selftest(stdout, mode, env.selftest_socket);
	printf("selftest: %d allowed\n", allowed);
	fflush(stdout);
	return allowed ? -EPERM : 0;
}

int main(int argc, char **argv)
{
	struct events_handlers handlers = {.on_sample = on_sample, .on_proc = on_proc,
					   .on_interp = on_interp};
	uint64_t cgroup_id = 0;
	struct perf_sampler *sampler = NULL;
	struct sample_bpf *skel = NULL;
	struct events *ev = NULL;
	uint32_t cgroup_level = 0;
	char *cgroup_rel = NULL;
	int sfd = -1, tfd = -1, wfd = -1, err = 0, n;
	bool rpc_inited = false, use_loop = true;
	struct privileges_user user = { 0 };

	log_init("sonde-sensor", LOG_LEVEL_INFO);
	/* Keep the resident set flat (issue 3: under 32 MiB): large buffers
	 * (unwind tables being assembled, map batches) come from mmap and go
	 * back on free, instead of glibc raising its threshold to 32 MiB and
	 * keeping them in the heap; and gRPC's threads share two arenas
	 * rather than growing one each. */
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	mallopt(M_ARENA_MAX, 2);
	if (parse_args(argc, argv) < 0)
		return 2;
	if (env.verbose)
		log_init("sonde-sensor", LOG_LEVEL_DEBUG);

	err = user_resolve(&user);
	if (err < 0)
		goto cleanup;
	sfd = err = signals_setup();
	if (err < 0)
		goto cleanup;
	raise_nofile();
	libbpf_set_print(libbpf_print);
	rpc_inited = true;
	err = rpc_setup();
	if (err < 0)
		goto cleanup;
	err = filters_resolve(&cgroup_id, &cgroup_level, &cgroup_rel);
	if (err < 0)
		goto cleanup;
	err = tables_setup();
	if (err < 0)
		goto cleanup;
	err = bpf_setup(cgroup_id, cgroup_level, &skel, &use_loop);
	if (err < 0)
		goto cleanup;
	ev = events_new(bpf_map__fd(skel->maps.events), &handlers);
	if (!ev) {
		err = -errno;
		log_error_errno(err, "cannot set up the ring buffer");
		goto cleanup;
	}
	/* The allow-list and the tracepoints before the /proc scan, so that
	 * no fork or exec falls between the scan and sampling. */
	err = allow_pids(skel);
	if (err == 0)
		err = sample_bpf__attach(skel);
	if (err < 0) {
		log_error_errno(err, "cannot fill the --pid allow-list or attach the sched tracepoints");
		goto cleanup;
	}
	err = uplink_setup(&wfd);
	if (err < 0)
		goto cleanup;
	err = perf_sampler_attach(use_loop ? skel->progs.sonde_sample : skel->progs.sonde_sample_tail,
				  env.frequency, &sampler);
	if (err < 0) {
		log_error_errno(err, "cannot attach perf events");
		goto cleanup;
	}
	tfd = err = make_timer(env.flush_ms);
	if (err < 0) {
		log_error_errno(err, "timerfd");
		goto cleanup;
	}
	if (env.sandbox_selftest) {
		err = sandbox_selftest(&user);
		goto cleanup;
	}
	err = n = drop_and_scan(skel, ev, cgroup_rel, &user);
	if (err < 0)
		goto cleanup;
	log_info("sampling %d CPUs at %u Hz; filters: %s%s%s%s; %d processes; symbolizer %.200s",
		 perf_sampler_cpus(sampler), env.frequency,
		 env.n_pids ? "pid (and children)" : "",
		 env.n_pids && env.cgroup ? ", " : "", env.cgroup ? "cgroup " : "",
		 env.cgroup ? env.cgroup : (env.n_pids ? "" : "none (whole host)"), n,
		 env.symbolizer);

	err = run(skel, ev, sfd, tfd, wfd);

	/* Stop sampling first, then the tracepoints, then drain. */
	perf_sampler_free(sampler);
	sampler = NULL;
	sample_bpf__detach(skel);
	drain_and_final_flush(skel, ev);
	log_totals(skel, ev);

cleanup:
	perf_sampler_free(sampler);
	uplink_free(S.uplink);
	/* After the uplink thread (which adds tables) and before procs. */
	if (S.procs)
		procs_set_observer(S.procs, NULL, NULL);
	unwind_maps_free(S.unwind);
	goprobes_free(S.goprobes); /* detaches; before the sampler owning go_spans */
	interp_maps_free(S.interp);
	events_free(ev);
	sample_bpf__destroy(skel);
	stacks_free(S.stacks);
	flush_release();
	flush_records_free(S.interp_queue);
	procs_free(S.procs);
	fileids_free(S.fileids);
	free(cgroup_rel);
	if (tfd >= 0)
		close(tfd);
	if (wfd >= 0)
		close(wfd); /* after uplink_free: its thread writes to it */
	if (sfd >= 0)
		close(sfd);
	if (rpc_inited)
		rpc_global_shutdown();
	return err < 0 ? 1 : 0;
}
