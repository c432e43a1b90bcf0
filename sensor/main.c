/* main.c - sonde-sensor: loads the sampler, tracks processes, aggregates
 * stacks and streams them to the symbolizer.
 *
 * main() runs the steps in this order, which docs/security.md relies on:
 * open (options, users, signals, gRPC, target selection, tables), load
 * (BPF), attach (allow-list and tracepoints, perf events), drop
 * privileges, start the uplink thread, the first /proc scan, the loop,
 * stop, close. Nothing of a target's /proc is read and nothing from the
 * symbolizer parsed before the drop.
 *
 * Threads: this one (signals, ring buffer, process table, flushes) and the
 * uplink's connection thread (connect, Welcome, ReadRange answers).
 * SIGINT/SIGTERM are blocked before any thread starts and read through a
 * signalfd here.
 */
#include <errno.h>
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
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "env.h"
#include "events.h"
#include "fileids.h"
#include "flush.h"
#include "goprobes.h"
#include "kallsyms.h"
#include "loader.h"
#include "log.h"
#include "parse.h"
#include "perf.h"
#include "privileges.h"
#include "procs.h"
#include "rpc_client.h"
#include "sample.h"
#include "sample.skel.h"
#include "stacks.h"
#include "targets.h"
#include "unwind_bpf.h"
#include "vdso.h"
#include "young.h"
#include "interp_kinds.h"
#include "interp_maps.h"
#include "unwind_maps.h"
#include "uplink.h"

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
 * rescan) is drained alive; otherwise at the flush timer. Backing off
 * keeps a burst of execs to a few wakeups, each costly on a VM. */
#define EVENTS_DRAIN_MS 100
#define EVENTS_BUSY_NS 2000000000ull
/* A stack not sampled for this long is forgotten (stacks.h): short-lived
 * processes bring new stacks all the time, and remembering them all grew
 * both services by a few hundred KiB a minute. Recurring later costs one
 * more definition on the wire. */
#define STACK_IDLE_NS 30000000000ull
/* Processes scanned between two drains of the ring during the first scan. */
#define INITIAL_DRAIN_EVERY 64

static struct env env;

/* Everything the sensor owns, from set-up to clean-up. */
static struct sensor {
	struct targets *targets;
	struct sample_bpf *skel;
	bool use_loop; /* user stacks walked with bpf_loop() (loader.h) */
	struct events *ev;
	struct perf_sampler *sampler;
	int sfd, tfd, wfd; /* signalfd, flush timer, uplink wakeups */
	bool rpc_inited;
	struct privileges_user user;
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
	/* Samples whose process was gone when the sensor came to scan its
	 * new or exec'd image: stored with unresolved user frames. */
	uint64_t samples_unscanned;
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
	struct young *young; /* processes that exec'd or forked recently */
	uint64_t last_proc_event_ns; /* CLOCK_MONOTONIC */
} S = { .sfd = -1, .tfd = -1, .wfd = -1 };

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

/* A sample's user addresses of pid into frames (file ID and offset where
 * a known mapping holds them). A process BPF sampled is profiled
 * (targets.h): an unknown or exec'd one is scanned first. */
static void resolve_user(uint32_t pid, const __u64 *addrs, uint32_t n, struct stack_frame *ret)
{
	const struct proc *pr = procs_find(S.procs, pid);
	bool rescanned = false;

	/* Unknown, or exec'd since its last scan (the exec is ahead of this
	 * sample in the ring): its mappings are to be read now. */
	if (n > 0 && pid != 0 && (!pr || pr->exec_pending)) {
		if (procs_scan(S.procs, pid) == -ESRCH)
			S.samples_unscanned++;
		rescanned = true;
	}
	for (uint32_t i = 0; i < n; i++) {
		memset(&ret[i], 0, sizeof(ret[i]));
		if (procs_resolve(S.procs, pid, addrs[i], &ret[i]) == 0)
			continue;
		/* In no known mapping: maybe a new dlopen'ed library. */
		if (!rescanned) {
			rescanned = true;
			if (procs_rescan_limited(S.procs, pid, RESCAN_INTERVAL_NS) == 1 &&
			    procs_resolve(S.procs, pid, addrs[i], &ret[i]) == 0)
				continue;
		}
		ret[i].has_file_id = 0;
		ret[i].addr = addrs[i];
	}
}

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
	S.interp_frames[kind] += rec->n_interp / sonde_interp_frame_words(kind);
	S.samples_taken++;
	resolve_user(rec->pid, rec->frames + n_kernel, n_user, user);
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
	in.profile = rec->profile;
	in.weight = rec->weight;
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
			young_add(S.young, ev->pid, YOUNG_FORK, S.last_proc_event_ns);
		else if (r != -ESRCH && r != -ENOEXEC && r != -EEXIST)
			log_debug("pid %" PRIu32 ": fork not followed: %d", ev->pid, r);
		break;
	case SONDE_REC_EXEC:
		/* The kernel mapped the executable and ld.so before the
		 * event: scanned now, their unwind entries are in BPF before
		 * ld.so has done much (it runs without frame pointers, so its
		 * samples until then have no table). The libraries ld.so maps
		 * in the next milliseconds are found at BPF's mmap wakeups
		 * (SONDE_REC_MMAP) or else the young steps, and a sample
		 * before them rescans (on_sample). */
		procs_exec(S.procs, ev->pid);
		r = procs_scan(S.procs, ev->pid);
		if (r != -ESRCH)
			young_add(S.young, ev->pid, YOUNG_EXEC, S.last_proc_event_ns);
		break;
	case SONDE_REC_EXIT:
		procs_exit(S.procs, ev->pid);
		break;
	case SONDE_REC_MMAP:
		/* A file mapped executable (ld.so's libraries, dlopen): its
		 * entries go into BPF now, before most of its code has run.
		 * An unknown process, or one whose exec is still ahead in the
		 * ring, is scanned whole; one whose scan budget is spent is
		 * not rescanned (procs.h). */
		r = procs_rescan_maps(S.procs, ev->pid);
		if (r < 0 && r != -ESRCH && r != -ENOEXEC && r != -EAGAIN)
			log_debug("pid %" PRIu32 ": rescan after mmap: %d", ev->pid, r);
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
	c->samples_lost = loader_errors(skel, errs);
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
	/* The walkers' own caches of what they sent (bpf/hotspot_walk.h,
	 * bpf/interp_span.h) stored before this no longer count. After the
	 * maps are empty: a walk that reads the new generation finds no
	 * entry of the old session to copy into its cache. */
	__atomic_add_fetch(&skel->bss->interp_conn_gen, 1, __ATOMIC_RELEASE);
}

/* Sends what is pending on the current connection. Returns 0, -ENOTCONN
 * while there is none, or the uplink's error (retried at the next flush). */
/* Connection gen is new: ids and everything the symbolizer knew are
 * void, and the accounting moves to it. */
static void sensor_new_connection(struct sample_bpf *skel, uint64_t gen)
{
	stacks_reset_connection(S.stacks);
	procs_reset_connection(S.procs);
	interp_reset_connection(skel);
	S.kallsyms_pending = true;
	/* The old connection broke: what it got may be lost with it. Drops
	 * not reported on it are this one's to report. */
	S.prev_taken = S.conn_sent + (S.dropped_reported - S.dropped_base);
	S.unconfirmed += S.prev_taken;
	S.conn_sent = 0;
	S.dropped_base = S.dropped_reported;
	S.sent_gen = gen;
}

static int sensor_flush(struct sample_bpf *skel, uint64_t *ret_gen)
{
	struct sensor_counters c;
	uint64_t gen = uplink_generation(S.uplink), sent = 0;
	int r;

	if (!gen)
		return -ENOTCONN;
	if (gen != S.sent_gen)
		sensor_new_connection(skel, gen);
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

/* The loaded object's maps, wired to the modules that write them. */
static int sensor_wire_maps(void)
{
	struct sample_bpf *skel = S.skel;

	S.unwind_bpf.rows_fd = bpf_map__fd(skel->maps.unwind_rows);
	S.bpf_map_bytes = loader_map_bytes(skel);
	S.unwind_bpf.index_fd = bpf_map__fd(skel->maps.unwind_index);
	S.unwind_bpf.lpm_fd = bpf_map__fd(skel->maps.unwind_lpm);
	S.unwind_bpf.gen = &skel->bss->unwind_gen;
	S.unwind_bpf.fileids = S.fileids;
	if (env.go_probes) {
		S.goprobes = goprobes_new(bpf_map__fd(skel->maps.go_spans));
		if (!S.goprobes)
			return -ENOMEM;
	}
	S.unwind = unwind_maps_new(loader_unwind_rows(env.unwind_rows), &unwind_bpf_ops,
				   &S.unwind_bpf);
	if (!S.unwind) {
		log_error("out of memory");
		return -ENOMEM;
	}
	S.interp_fd = bpf_map__fd(skel->maps.interp_procs);
	S.redirect_fd = bpf_map__fd(skel->maps.lpm_redirect);
	S.interp = interp_maps_new(&interp_map_ops, NULL);
	S.interp_queue = flush_records_new(INTERP_QUEUE_RECORDS, INTERP_QUEUE_BYTES);
	if (!S.interp || !S.interp_queue) {
		log_error("out of memory");
		return -ENOMEM;
	}
	targets_set_allow_list(S.targets, &loader_allow_ops, skel);
	procs_set_observer(S.procs, &unwind_observer, NULL);
	return 0;
}

/* How long the main loop may wait in poll(), in ms (-1: until the flush
 * timer, a signal or a full quarter ring): EVENTS_DRAIN_MS while young
 * processes or a new connection wait, longer as process events age, and
 * never past the next young rescan (young_wait, -1: none) or end_ns (0:
 * none). */
static int loop_timeout(uint64_t end_ns, int young_wait)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC), since_event = now - S.last_proc_event_ns;
	int timeout = -1;

	if (young_count(S.young) || uplink_generation(S.uplink) != S.sent_gen)
		timeout = EVENTS_DRAIN_MS;
	else if (since_event < EVENTS_BUSY_NS) {
		int since_ms = (int)(since_event / 1000000); /* < 2000 */

		timeout = since_ms > EVENTS_DRAIN_MS ? since_ms : EVENTS_DRAIN_MS;
	}
	if (young_wait >= 0 && (timeout < 0 || young_wait < timeout))
		timeout = young_wait;
	if (end_ns && now >= end_ns)
		return 0; /* the caller stops at its next look at the clock */
	if (end_ns && (timeout < 0 || (end_ns - now) / 1000000 < (uint64_t)timeout))
		timeout = (int)((end_ns - now) / 1000000) + 1;
	return timeout;
}

/* A connection was made (flushed just before) or a table loaded: Status
 * shows it now, not at the next flush. An interpreter config: entries for
 * the processes that already map its file. */
static void loop_on_wakeup(struct sample_bpf *skel)
{
	eventfd_t v;

	eventfd_read(S.wfd, &v);
	if (interp_maps_take_pending(S.interp))
		procs_visit(S.procs, interp_report_one, NULL);
	sensor_flush_stats(skel);
}

/* One turn's work after poll(): drain the ring, apply what the uplink
 * queued, rescan, send new processes. Returns the ms to the next young
 * rescan (-1: none). */
static int loop_turn(struct sample_bpf *skel, const struct pollfd *wakeup)
{
	int n, young_wait;

	/* Samples do not wake us (wakeup_bytes): drain on every turn. */
	n = events_consume(S.ev);
	if (n < 0 && n != -EINTR)
		log_warn_errno(n, "ring buffer, ignoring");
	/* Plans the uplink thread queued; Go probe records. */
	goprobes_apply(S.goprobes, S.procs);
	goprobes_consume(S.goprobes);
	young_wait = young_rescan(S.young, clock_ns(CLOCK_MONOTONIC));
	sensor_flush_new_processes(skel);
	if (wakeup->revents)
		loop_on_wakeup(skel);
	return young_wait;
}

/* The flush timer fired, or buffers are half full: flush. */
static void loop_flush(struct sample_bpf *skel, const struct pollfd *timer)
{
	uint64_t ticks;
	bool due = timer->revents && read(S.tfd, &ticks, sizeof(ticks)) == sizeof(ticks);

	if (due || buffers_half_full()) {
		int r = sensor_flush(skel, NULL);

		if (r < 0 && r != -ENOTCONN)
			log_debug("flush failed: %d, retrying later", r);
	}
}

/* SIGINT or SIGTERM read from the signalfd. */
static bool loop_signalled(const struct pollfd *sig)
{
	struct signalfd_siginfo si;

	if (!sig->revents || read(S.sfd, &si, sizeof(si)) != sizeof(si))
		return false;
	log_info("got signal %u, stopping", si.ssi_signo);
	return true;
}

/* The main loop, until a signal or --duration. Returns 0 or a negative
 * errno (poll failed). */
static int run(struct sample_bpf *skel)
{
	uint64_t end_ns = 0;
	int young_wait = -1; /* ms to the next young-process rescan */
	int err;

	if (env.duration_s)
		end_ns = clock_ns(CLOCK_MONOTONIC) + env.duration_s * 1000000000ull;
	for (;;) {
		struct pollfd pfd[5] = {
			{.fd = events_fd(S.ev), .events = POLLIN},
			{.fd = S.sfd, .events = POLLIN},
			{.fd = S.tfd, .events = POLLIN},
			{.fd = S.wfd, .events = POLLIN},
			{.fd = S.goprobes ? goprobes_fd(S.goprobes) : -1, .events = POLLIN},
		};

		if (end_ns && clock_ns(CLOCK_MONOTONIC) >= end_ns) {
			log_info("--duration elapsed, stopping");
			return 0;
		}
		if (poll(pfd, 5, loop_timeout(end_ns, young_wait)) < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			log_error_errno(err, "poll");
			return err;
		}
		young_wait = loop_turn(skel, &pfd[3]);
		if (loop_signalled(&pfd[1]))
			return 0;
		loop_flush(skel, &pfd[2]);
	}
}

/* The unwind tables' totals, logged at exit. */
static void log_unwind_totals(uint64_t bpf_map_bytes)
{
	struct unwind_maps_stats us;

	unwind_maps_get_stats(S.unwind, &us);
	for (int k = 0; k < UNWIND_REJECT__COUNT; k++)
		if (us.rejected[k])
			log_info("unwind tables rejected (%s): %" PRIu64, unwind_reject_names[k],
				 us.rejected[k]);
	log_info("unwind tables loaded %" PRIu64 " (%" PRIu64 " rows of %" PRIu32
		 "; %" PRIu64 " without a page index), rejected %" PRIu64 ", unavailable %" PRIu64
		 ", evicted %" PRIu64 "; %" PRIu64 " LPM entries (%" PRIu64 " mappings without: trie full; %" PRIu64
		 " over their process's share); BPF maps %" PRIu64 " KiB",
		 us.tables_loaded, us.rows_loaded, us.capacity_rows, us.tables_unindexed,
		 us.tables_rejected,
		 us.tables_unavailable, us.tables_evicted, us.lpm_entries, us.lpm_failures,
		 us.lpm_capped, bpf_map_bytes >> 10);
}

/* The totals, logged at exit. */
static void log_totals(struct sample_bpf *skel, struct events *ev)
{
	static const char *const err_names[] = SONDE_ERR_NAMES;
	uint64_t errs[SONDE_ERR__COUNT];
	struct sensor_counters c;
	struct stacks_stats ss;

	_Static_assert(sizeof(err_names) / sizeof(err_names[0]) == SONDE_ERR__COUNT,
		       "SONDE_ERR_NAMES");
	counters(skel, &c);
	stacks_get_stats(S.stacks, &ss);
	loader_errors(skel, errs);
	for (int k = 0; k < SONDE_ERR__COUNT; k++)
		if (errs[k])
			log_debug("bpf error %s: %" PRIu64, err_names[k], errs[k]);
	log_info("samples taken %" PRIu64 ", lost %" PRIu64 ", dropped %" PRIu64
		 ", of processes gone before their scan %" PRIu64
		 "; %zu stacks; %" PRIu64 " processes; %" PRIu64 " files; %" PRIu64
		 " ranges served; %" PRIu64 " malformed records",
		 c.samples_taken, c.samples_lost, c.samples_dropped, S.samples_unscanned, ss.stacks,
		 c.processes, c.files, uplink_read_ranges(S.uplink), events_malformed(ev));
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
	log_unwind_totals(c.bpf_map_bytes);
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
	 * completion queue), so the poller's timer thread would only wake
	 * the idle sensor for nothing. The environment still wins. */
	setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "0", 0);
	rpc_global_init();
	if (!env_symbolizer_is_tcp(&env))
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
	if (S.procs)
		procs_set_command_line(S.procs, env.command_line);
	S.stacks = stacks_new(env.buffer_stacks, 4 * (size_t)env.buffer_stacks, STACK_IDLE_NS);
	S.young = S.procs ? young_new(S.procs) : NULL;
	if (!S.fileids || !S.procs || !S.stacks || !S.young) {
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
static int uplink_setup(void)
{
	int wfd, err;

	S.uplink = uplink_new(env.symbolizer, S.fileids, env.frequency, clock_ns(CLOCK_REALTIME),
			       env.node_name);
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
	S.wfd = wfd;
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
	if (env_symbolizer_is_tcp(&env))
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

static void drain_events(void *ctx)
{
	(void)ctx;
	events_consume(S.ev);
}

/* Set-up is over: BPF loaded and attached, perf events open, ring buffer
 * mapped. Keep only what the running sensor needs; then, and only then,
 * start the uplink (the symbolizer's messages) and read the targets'
 * /proc (ARCHITECTURE.md, rule 1). Returns the number of processes found
 * or a negative errno. */
static int drop_and_scan(void)
{
	int err, n;

	if (!env.no_drop_privileges) {
		err = privileges_drop(privileges_mode(), &S.user);
		if (err < 0)
			return err;
	} else {
		log_warn("--no-drop-privileges: running as root with every capability and no seccomp filter");
	}
	err = uplink_begin();
	if (err < 0)
		return err;
	n = targets_scan(S.targets, S.procs, INITIAL_DRAIN_EVERY, drain_events, NULL);
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

/* Open: what is resolved and built before any BPF (users, signals,
 * gRPC, the target selection, the tables). Returns 0 or a negative errno
 * (logged). */
static int sensor_open(void)
{
	int err;

	err = user_resolve(&S.user);
	if (err < 0)
		return err;
	S.sfd = err = signals_setup();
	if (err < 0)
		return err;
	raise_nofile();
	libbpf_set_print(libbpf_print);
	S.rpc_inited = true;
	err = rpc_setup();
	if (err < 0)
		return err;
	err = targets_new(env.pids, (size_t)env.n_pids, env.cgroup, &S.targets);
	if (err < 0)
		return err;
	return tables_setup();
}

/* Configure and load: the sampler object with the selection and tunables
 * in rodata, its maps wired to their writers, the ring buffer reader. */
static int sensor_load(void)
{
	static const struct events_handlers handlers = {
		.on_sample = on_sample, .on_proc = on_proc, .on_interp = on_interp,
	};
	struct targets_filter filter;
	struct loader_config config = {
		.filter = &filter,
		.idle = env.idle,
		.walk = env.bpf_walk,
		.ringbuf_bytes = loader_ringbuf_size(env.ringbuf_mb, env.frequency),
		.unwind_rows = loader_unwind_rows(env.unwind_rows),
		.memory_every = env.memory && !env.memory_reserved ? env.memory_every : 0,
		.memory_reserved = env.memory_reserved,
		.off_cpu = env.off_cpu,
		.off_cpu_min_ns = (uint64_t)env.off_cpu_min_us * 1000,
	};
	int err;

	targets_bpf_filter(S.targets, &filter);
	err = loader_load(&config, &S.skel, &S.use_loop);
	if (err < 0)
		return err;
	err = sensor_wire_maps();
	if (err < 0)
		return err;
	S.ev = events_new(bpf_map__fd(S.skel->maps.events), &handlers);
	if (!S.ev) {
		err = -errno;
		log_error_errno(err, "cannot set up the ring buffer");
	}
	return err;
}

/* Attach: the allow-list and the tracepoints before the /proc scan, so
 * that no fork or exec falls between the scan and sampling; the uplink
 * (not started); the perf events; the flush timer. */
static int sensor_attach(void)
{
	int err;

	err = targets_allow_pids(S.targets);
	if (err == 0)
		err = sample_bpf__attach(S.skel);
	if (err < 0) {
		log_error_errno(err, "cannot fill the --pid allow-list or attach the sched tracepoints");
		return err;
	}
	young_set_mmap_wakeups(S.young, loader_attach_mmap(S.skel));
	err = uplink_setup();
	if (err < 0)
		return err;
	if (!env.no_cpu) {
		err = perf_sampler_attach(S.use_loop ? S.skel->progs.sonde_sample
						     : S.skel->progs.sonde_sample_tail,
					  env.frequency, &S.sampler);
		if (err < 0) {
			log_error_errno(err, "cannot attach perf events");
			return err;
		}
	}
	S.tfd = err = make_timer(env.flush_ms);
	if (err < 0)
		log_error_errno(err, "timerfd");
	return err < 0 ? err : 0;
}

/* Drop privileges, start the uplink, scan: the sensor is running. */
static int sensor_start(void)
{
	int n = drop_and_scan();

	if (n < 0)
		return n;
	log_info("sampling %d CPUs at %u Hz%s; filters: %s; %d processes; symbolizer %.200s",
		 S.sampler ? perf_sampler_cpus(S.sampler) : 0, env.frequency,
		 env.off_cpu ? ", off-CPU" : "", targets_describe(S.targets), n,
		 env.symbolizer);
	return 0;
}

/* Stop sampling first, then the tracepoints, then drain and send the
 * rest. */
static void sensor_stop(void)
{
	perf_sampler_free(S.sampler);
	S.sampler = NULL;
	sample_bpf__detach(S.skel);
	drain_and_final_flush(S.skel, S.ev);
	log_totals(S.skel, S.ev);
}

/* Releases everything, in the reverse order of set-up; also after a set-up
 * that failed part way. */
static void sensor_close(void)
{
	perf_sampler_free(S.sampler);
	uplink_free(S.uplink);
	/* After the uplink thread (which adds tables) and before procs. */
	if (S.procs)
		procs_set_observer(S.procs, NULL, NULL);
	unwind_maps_free(S.unwind);
	goprobes_free(S.goprobes); /* detaches; before the sampler owning go_spans */
	interp_maps_free(S.interp);
	events_free(S.ev);
	sample_bpf__destroy(S.skel);
	stacks_free(S.stacks);
	flush_release();
	flush_records_free(S.interp_queue);
	young_free(S.young);
	procs_free(S.procs);
	fileids_free(S.fileids);
	targets_free(S.targets);
	if (S.tfd >= 0)
		close(S.tfd);
	if (S.wfd >= 0)
		close(S.wfd); /* after uplink_free: its thread writes to it */
	if (S.sfd >= 0)
		close(S.sfd);
	if (S.rpc_inited)
		rpc_global_shutdown();
}

/* Keep the resident set flat (target: under 32 MiB): large buffers
 * (unwind tables being assembled, map batches) come from mmap and go back
 * on free, instead of glibc raising its threshold to 32 MiB and keeping
 * them in the heap; and gRPC's threads share two arenas rather than
 * growing one each. */
static void malloc_setup(void)
{
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	mallopt(M_ARENA_MAX, 2);
}

int main(int argc, char **argv)
{
	int err;

	log_init("sonde-sensor", LOG_LEVEL_INFO);
	malloc_setup();
	if (env_parse(argc, argv, &env) < 0)
		return 2;
	if (env.verbose)
		log_init("sonde-sensor", LOG_LEVEL_DEBUG);
	err = sensor_open();
	if (err < 0)
		goto cleanup;
	err = sensor_load();
	if (err < 0)
		goto cleanup;
	err = sensor_attach();
	if (err < 0)
		goto cleanup;
	if (env.sandbox_selftest) {
		err = sandbox_selftest(&S.user);
		goto cleanup;
	}
	err = sensor_start(); /* drops privileges, starts the uplink, scans */
	if (err < 0)
		goto cleanup;
	err = run(S.skel);
	sensor_stop();
cleanup:
	sensor_close();
	return err < 0 ? 1 : 0;
}
