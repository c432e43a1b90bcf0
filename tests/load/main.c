/* main.c - sonde-load: plays N sensors into one symbolizer and measures
 * what it takes (docs/benchmarks.md, "Scale").
 *
 * Phases: connect every sensor (Hello, processes, kernel symbols); warm
 * up (each sensor defines all its stacks once; wait until every sample is
 * stored, i.e. the files are analysed); measure for --duration seconds
 * (batches at hz x cpus per sensor, or max-rate); wait until everything
 * sent is stored; half-close every stream.
 *
 * Time from send to stored: before each batch is written its send time
 * and the running total of samples sent (cum) are logged. A monitor polls
 * the symbolizer's Status every --poll-ms; when samples_stored (since the
 * start) reaches a batch's cum, that batch counts as stored at the time
 * the Status answer arrived. So the figure is an upper bound, with a
 * resolution of one poll (plus a Status round trip), and it treats the
 * store as first in, first out across streams.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "log.h"
#include "parse.h"
#include "symbols.pb-c.h"

#define STATUS_PATH "/sonde.v1.Symbols/Status"
#define MAX_WRITERS 16
#define MAX_LAT (10u << 20)

static struct env {
	struct lg_config cfg;
	const char *ca, *cert, *key, *server_name;
	const char *lib_dir;
	size_t files, ksyms, pool;
	unsigned duration_s, poll_ms, writers, warm_timeout_s, drain_timeout_s;
	int sym_pid;
	bool restart;
	const char *label;
} env = {
	.cfg = { .n_sensors = 10, .hz = 20, .cpus = 8, .flush_ms = 1000, .procs = 8,
		 .stacks_per_sensor = 300, .batch_entries = 20000, .count_per_entry = 1 },
	.lib_dir = "/usr/lib/x86_64-linux-gnu",
	.files = 48, .ksyms = 3000, .pool = 4000,
	.duration_s = 10, .poll_ms = 10, .writers = 2, .warm_timeout_s = 180, .drain_timeout_s = 60,
	.sym_pid = 0, .label = "",
};

struct status {
	uint64_t stored, waiting, failed, received, files_done;
	bool ok;
};

struct proc_sample {
	double cpu_s;
	double rss_mib, hwm_mib;
};

static struct rpc_channel *status_ch;
static uint32_t *lat_us;
static size_t n_lat;

static void usage(void)
{
	fprintf(stderr,
		"usage: sonde-load --target tcp:HOST:PORT [--ca F --cert F --key F --server-name N]\n"
		"  --sensors N (10) --hz N (20) --cpus N (8) --flush-ms N (1000) --procs N (8)\n"
		"  --stacks N per sensor (300) --pool N distinct stacks in all (4000)\n"
		"  --files N shared libraries (48) --ksyms N kernel symbols (3000) --lib-dir DIR\n"
		"  --max-rate [--batch-entries N (20000) --count N (1)]\n"
		"  --duration S (10) --poll-ms N (10) --writers N (2) --symbolizer-pid PID\n"
		"  --warm-timeout S (180) --drain-timeout S (60) --label TEXT\n"
		"  --restart: after the warm-up print RESTART, wait for every stream to end (the\n"
		"    symbolizer killed), read the new symbolizer's pid from stdin, reconnect all\n"
		"    sensors (Hello lists the tables they hold), warm up again, then measure\n");
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "target", required_argument, NULL, 't' }, { "ca", required_argument, NULL, 'A' },
		{ "cert", required_argument, NULL, 'C' }, { "key", required_argument, NULL, 'K' },
		{ "server-name", required_argument, NULL, 'N' },
		{ "sensors", required_argument, NULL, 'n' }, { "hz", required_argument, NULL, 'h' },
		{ "cpus", required_argument, NULL, 'c' }, { "flush-ms", required_argument, NULL, 'f' },
		{ "procs", required_argument, NULL, 'p' }, { "stacks", required_argument, NULL, 's' },
		{ "pool", required_argument, NULL, 'P' }, { "files", required_argument, NULL, 'F' },
		{ "ksyms", required_argument, NULL, 'k' }, { "lib-dir", required_argument, NULL, 'L' },
		{ "max-rate", no_argument, NULL, 'm' }, { "batch-entries", required_argument, NULL, 'b' },
		{ "count", required_argument, NULL, 'o' }, { "duration", required_argument, NULL, 'd' },
		{ "poll-ms", required_argument, NULL, 'l' }, { "writers", required_argument, NULL, 'w' },
		{ "symbolizer-pid", required_argument, NULL, 'S' },
		{ "warm-timeout", required_argument, NULL, 'W' },
		{ "drain-timeout", required_argument, NULL, 'D' },
		{ "label", required_argument, NULL, 'T' }, { "help", no_argument, NULL, '?' },
		{ "restart", no_argument, NULL, 'R' },
		{ 0 },
	};
	uint32_t v;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		const char *a = optarg;
		int r = 0;

		switch (c) {
		case 't': env.cfg.target = a; break;
		case 'A': env.ca = a; break;
		case 'C': env.cert = a; break;
		case 'K': env.key = a; break;
		case 'N': env.server_name = a; break;
		case 'L': env.lib_dir = a; break;
		case 'T': env.label = a; break;
		case 'm': env.cfg.max_rate = true; break;
		case 'R': env.restart = true; break;
		case '?': usage(); return -EINVAL;
		default:
			r = parse_u32(a, 10, &v);
			if (r < 0 || v == 0) {
				fprintf(stderr, "sonde-load: bad number '%s'\n", a);
				return -EINVAL;
			}
			switch (c) {
			case 'n': env.cfg.n_sensors = v; break;
			case 'h': env.cfg.hz = v; break;
			case 'c': env.cfg.cpus = v; break;
			case 'f': env.cfg.flush_ms = v; break;
			case 'p': env.cfg.procs = v; break;
			case 's': env.cfg.stacks_per_sensor = v; break;
			case 'P': env.pool = v; break;
			case 'F': env.files = v; break;
			case 'k': env.ksyms = v; break;
			case 'b': env.cfg.batch_entries = v; break;
			case 'o': env.cfg.count_per_entry = v; break;
			case 'd': env.duration_s = v; break;
			case 'l': env.poll_ms = v; break;
			case 'w': env.writers = v; break;
			case 'S': env.sym_pid = (int)v; break;
			case 'W': env.warm_timeout_s = v; break;
			case 'D': env.drain_timeout_s = v; break;
			}
		}
	}
	if (!env.cfg.target || optind != argc) {
		usage();
		return -EINVAL;
	}
	if (env.cfg.n_sensors > LG_MAX_SENSORS || env.writers > MAX_WRITERS ||
	    env.cfg.batch_entries > 1000000 || env.cfg.stacks_per_sensor > 1000000 ||
	    env.pool > 1000000 || env.cfg.flush_ms > 60000 || env.duration_s > 86400) {
		fprintf(stderr, "sonde-load: a number is over its bound (sensors <= %u, writers <= %u)\n",
			LG_MAX_SENSORS, MAX_WRITERS);
		return -EINVAL;
	}
	return 0;
}

static struct status get_status(void)
{
	Sonde__V1__StatusRequest req = SONDE__V1__STATUS_REQUEST__INIT;
	Sonde__V1__StatusResponse *r = NULL;
	struct status st = { 0 };
	struct rpc_error err;

	if (rpc_unary(status_ch, STATUS_PATH, &req.base, &sonde__v1__status_response__descriptor,
		      5000, false, (ProtobufCMessage **)&r, &err) < 0) {
		log_warn("Status: %s", err.message);
		return st;
	}
	st.stored = r->samples_stored;
	st.waiting = r->samples_waiting;
	st.failed = r->samples_store_failed;
	st.received = r->samples_received;
	st.files_done = r->files_analysed + r->files_failed;
	st.ok = true;
	rpc_message_free(&r->base);
	return st;
}

/* CPU (user + system, all threads) and memory of the symbolizer. */
static struct proc_sample sample_proc(int pid)
{
	struct proc_sample ps = { 0 };
	char path[64], buf[4096];
	FILE *f;

	if (pid <= 0)
		return ps;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((f = fopen(path, "re"))) {
		if (fgets(buf, sizeof(buf), f)) {
			char *p = strrchr(buf, ')');
			unsigned long ut = 0, st = 0;

			/* fields 14 and 15, counted after the comm */
			if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
					&ut, &st) == 2)
				ps.cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "re"))) {
		while (fgets(buf, sizeof(buf), f)) {
			unsigned long kb;

			if (sscanf(buf, "VmRSS: %lu", &kb) == 1)
				ps.rss_mib = kb / 1024.0;
			else if (sscanf(buf, "VmHWM: %lu", &kb) == 1)
				ps.hwm_mib = kb / 1024.0;
		}
		fclose(f);
	}
	return ps;
}

static double self_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

/* Marks every logged batch the store's count covers as stored now. */
static void match_log(struct lg_shared *sh, uint64_t stored, uint64_t now_ns)
{
	pthread_mutex_lock(&sh->lock);
	while (sh->log_len && sh->log[sh->log_head].cum <= stored) {
		const struct lg_sent *e = &sh->log[sh->log_head];
		uint64_t d = now_ns > e->t_ns ? (now_ns - e->t_ns) / 1000 : 0;

		if (n_lat < MAX_LAT)
			lat_us[n_lat++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
		sh->log_head = (sh->log_head + 1) % sh->log_cap;
		sh->log_len--;
	}
	pthread_mutex_unlock(&sh->lock);
}

struct writer {
	pthread_t th;
	struct lg_sensor **sensors;
	size_t n;
	struct lg_shared *sh;
	int errors;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	while (!atomic_load(&w->sh->stop)) {
		uint64_t now = lg_now_ns(), next = now + 50000000ull;

		for (size_t i = 0; i < w->n && !atomic_load(&w->sh->stop); i++) {
			uint64_t t;

			if (!w->sensors[i])
				continue;
			if (lg_sensor_pump(w->sensors[i], lg_now_ns(), &t) < 0) {
				w->errors++;
				continue;
			}
			if (t < next)
				next = t;
		}
		now = lg_now_ns();
		if (next > now) {
			struct timespec ts = { .tv_sec = (time_t)((next - now) / 1000000000ull),
					       .tv_nsec = (long)((next - now) % 1000000000ull) };

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double pct_ms(double p)
{
	size_t i;

	if (!n_lat)
		return NAN;
	i = (size_t)ceil(p * (double)n_lat) - 1;
	if (i >= n_lat)
		i = n_lat - 1;
	return lat_us[i] / 1000.0;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Every sensor defines its stacks (one sample each); returns once all is
 * stored and the analyses are over: no file finished and no unwind table
 * arrived for 2 s (files another client had analysed before are not
 * analysed again), so the measurement sees the steady state. want_tables:
 * some table must have come by then (a first warm-up). */
static int warm_up(struct lg_shared *sh, struct lg_sensor **sensors, size_t n_up, struct status s0,
		   bool want_tables)
{
	uint64_t t_start = lg_now_ns(), tables0 = atomic_load(&sh->table_bytes);
	struct status st;

	for (size_t i = 0; i < n_up; i++)
		if (lg_sensor_warm(sensors[i]) < 0)
			return -EIO;
	for (uint64_t tables = tables0, files_done = 0, stable_since = lg_now_ns();;) {
		uint64_t tb = atomic_load(&sh->table_bytes);

		st = get_status();
		if (tb != tables || st.files_done != files_done) {
			tables = tb;
			files_done = st.files_done;
			stable_since = lg_now_ns();
		}
		if (st.ok && st.stored - s0.stored >= sh->sent && st.waiting == 0 &&
		    (tables > 0 || !want_tables) && lg_now_ns() - stable_since > 2000000000ull)
			return 0;
		if (lg_now_ns() - t_start > (uint64_t)env.warm_timeout_s * 1000000000ull) {
			fprintf(stderr, "sonde-load: warm-up not stored after %u s (%" PRIu64
				" of %" PRIu64 ", %" PRIu64 " waiting)\n", env.warm_timeout_s,
				st.stored - s0.stored, sh->sent, st.waiting);
			return -ETIMEDOUT;
		}
		sleep_ms(50);
	}
}

/* --restart: the harness kills the symbolizer once it reads RESTART and
 * writes the new one's pid once it listens (same cache, same address).
 * Every sensor reconnects and warms up again; counters start again from
 * the new symbolizer's (*s0). */
static int restart(struct lg_shared *sh, struct lg_sensor **sensors, size_t n_up, struct status *s0)
{
	uint64_t deadline;
	char line[64];
	size_t over = 0;

	printf("RESTART\n");
	fflush(stdout);
	deadline = lg_now_ns() + 120000000000ull;
	while (over < n_up && lg_now_ns() < deadline) {
		over = 0;
		for (size_t i = 0; i < n_up; i++)
			over += lg_sensor_stream_over(sensors[i]);
		sleep_ms(50);
	}
	if (!fgets(line, sizeof(line), stdin)) {
		fprintf(stderr, "sonde-load: no pid of the restarted symbolizer on stdin\n");
		return -EIO;
	}
	env.sym_pid = atoi(line);
	deadline = lg_now_ns() + 60000000000ull;
	do {
		*s0 = get_status();
		if (!s0->ok)
			sleep_ms(100);
	} while (!s0->ok && lg_now_ns() < deadline);
	if (!s0->ok) {
		fprintf(stderr, "sonde-load: the restarted symbolizer does not answer Status\n");
		return -EIO;
	}
	pthread_mutex_lock(&sh->lock);
	sh->sent = 0;
	pthread_mutex_unlock(&sh->lock);
	for (size_t i = 0; i < n_up; i++)
		if (lg_sensor_reconnect(sensors[i]) < 0) {
			fprintf(stderr, "sonde-load: sensor %zu could not reconnect\n", i);
			return -EIO;
		}
	return warm_up(sh, sensors, n_up, *s0, false);
}

int main(int argc, char **argv)
{
	struct lg_files files = { 0 };
	struct lg_pool pool = { 0 };
	struct lg_shared sh = { 0 };
	struct lg_sensor **sensors = NULL;
	struct writer writers[MAX_WRITERS];
	struct status s0, s1, s2, st;
	struct proc_sample p0, p1, pmax = { 0 };
	uint64_t t_start, t0, t_sent_end, t1, sent_end, stored_end;
	size_t n_writers = 0, n_up = 0;
	double gen_cpu0, warm_s, connect_s, rate, cpu_per_m, restart_s = 0;
	uint64_t warm_table_bytes = 0, warm_tables = 0;
	int err = 1, unclean = 0;

	signal(SIGPIPE, SIG_IGN);
	log_init("sonde-load", LOG_LEVEL_WARN);
	if (parse_args(argc, argv) < 0)
		return 2;
	rpc_global_init();
	if (env.ca) {
		struct rpc_tls tls = { .ca = env.ca, .cert = env.cert, .key = env.key,
				       .server_name = env.server_name };

		if (rpc_client_set_tls(&tls) < 0) {
			fprintf(stderr, "sonde-load: cannot read the TLS files\n");
			goto cleanup;
		}
	}
	if (lg_files_load(&files, env.lib_dir, env.files, env.ksyms) < 0) {
		fprintf(stderr, "sonde-load: no usable files in %s or no kernel symbols (root?)\n",
			env.lib_dir);
		goto cleanup;
	}
	if (lg_pool_build(&pool, &files, env.pool, 42) < 0)
		goto cleanup;
	lat_us = malloc(MAX_LAT * sizeof(*lat_us));
	sensors = calloc(env.cfg.n_sensors, sizeof(*sensors));
	status_ch = rpc_channel_new(env.cfg.target, NULL);
	if (!lat_us || !sensors || !status_ch)
		goto cleanup;
	sh.cfg = &env.cfg;
	sh.files = &files;
	sh.pool = &pool;
	pthread_mutex_init(&sh.lock, NULL);
	sh.log_cap = 1u << 20;
	sh.log = calloc(sh.log_cap, sizeof(*sh.log));
	if (!sh.log)
		goto cleanup;

	s0 = get_status();
	if (!s0.ok) {
		fprintf(stderr, "sonde-load: the symbolizer does not answer Status\n");
		goto cleanup;
	}
	fprintf(stderr, "sonde-load: %zu files, %zu kernel symbols, %zu stacks in the pool\n",
		files.n, files.n_ksyms, pool.n);

	/* Connect. */
	t_start = lg_now_ns();
	for (size_t i = 0; i < env.cfg.n_sensors; i++) {
		sensors[i] = lg_sensor_start(&sh, i);
		if (!sensors[i]) {
			fprintf(stderr, "sonde-load: sensor %zu could not connect\n", i);
			goto cleanup;
		}
		n_up++;
	}
	connect_s = (double)(lg_now_ns() - t_start) / 1e9;

	/* Warm up: every stack defined once, all stored. */
	t_start = lg_now_ns();
	if (warm_up(&sh, sensors, n_up, s0, true) < 0)
		goto cleanup;
	warm_s = (double)(lg_now_ns() - t_start) / 1e9;
	warm_table_bytes = atomic_load(&sh.table_bytes);
	warm_tables = atomic_load(&sh.tables_received);
	if (env.restart) {
		t_start = lg_now_ns();
		if (restart(&sh, sensors, n_up, &s0) < 0)
			goto cleanup;
		restart_s = (double)(lg_now_ns() - t_start) / 1e9;
	}

	/* Measure. */
	p0 = sample_proc(env.sym_pid);
	gen_cpu0 = self_cpu_s();
	s1 = get_status();
	t0 = lg_now_ns();
	atomic_store(&sh.measuring, true);
	if (env.writers > n_up)
		env.writers = (unsigned)n_up;
	for (size_t w = 0; w < env.writers; w++) {
		struct writer *wr = &writers[w];

		memset(wr, 0, sizeof(*wr));
		wr->sh = &sh;
		wr->sensors = calloc(n_up / env.writers + 1, sizeof(*wr->sensors));
		if (!wr->sensors)
			break;
		for (size_t i = w; i < n_up; i += env.writers)
			wr->sensors[wr->n++] = sensors[i];
		if (pthread_create(&wr->th, NULL, writer_main, wr) != 0) {
			free(wr->sensors);
			break;
		}
		n_writers++;
	}
	while (lg_now_ns() - t0 < (uint64_t)env.duration_s * 1000000000ull) {
		struct proc_sample ps;

		st = get_status();
		if (st.ok)
			match_log(&sh, st.stored - s0.stored, lg_now_ns());
		ps = sample_proc(env.sym_pid);
		if (ps.rss_mib > pmax.rss_mib)
			pmax = ps;
		sleep_ms(env.poll_ms);
	}
	atomic_store(&sh.stop, true);
	for (size_t w = 0; w < n_writers; w++) {
		pthread_join(writers[w].th, NULL);
		unclean += writers[w].errors;
		free(writers[w].sensors);
	}
	n_writers = 0;
	t_sent_end = lg_now_ns();
	pthread_mutex_lock(&sh.lock);
	sent_end = sh.sent;
	pthread_mutex_unlock(&sh.lock);
	/* Drain: until everything sent is stored. */
	for (;;) {
		st = get_status();
		if (st.ok)
			match_log(&sh, st.stored - s0.stored, lg_now_ns());
		if (st.ok && st.stored - s0.stored >= sent_end)
			break;
		if (lg_now_ns() - t_sent_end > (uint64_t)env.drain_timeout_s * 1000000000ull)
			break;
		sleep_ms(env.poll_ms);
	}
	t1 = lg_now_ns();
	p1 = sample_proc(env.sym_pid);
	stored_end = st.stored - s0.stored;

	/* Half-close every stream: the symbolizer ends each once it stored
	 * what waited. */
	for (size_t i = 0; i < n_up; i++) {
		if (lg_sensor_finish(sensors[i], 15000) < 0)
			unclean++;
		sensors[i] = NULL;
	}
	s2 = get_status();

	qsort(lat_us, n_lat, sizeof(*lat_us), cmp_u32);
	rate = (double)(stored_end - (s1.stored - s0.stored)) / ((double)(t1 - t0) / 1e9);
	cpu_per_m = (p1.cpu_s - p0.cpu_s) / ((double)(stored_end - (s1.stored - s0.stored)) / 1e6);
	{
		uint64_t sent = sh.sent, stored = s2.stored - s0.stored;
		uint64_t lost = sent > stored ? sent - stored : 0;

		printf("| %s | %zu | %s | %.0f | %.0f | %.3f | %.1f | %.1f | %.1f | %.1f | %.1f | %" PRIu64
		       " | %" PRIu64 " | %" PRIu64 " |\n",
		       env.label[0] ? env.label : (env.cfg.max_rate ? "max-rate" : "steady"),
		       env.cfg.n_sensors, env.cfg.max_rate ? "max" : "hz*cpus",
		       env.cfg.max_rate ? 0.0 : (double)env.cfg.n_sensors * env.cfg.hz * env.cfg.cpus,
		       rate, cpu_per_m, pct_ms(0.5), pct_ms(0.99), pct_ms(1.0), p1.rss_mib,
		       p1.hwm_mib, sent, stored, lost);
		printf("RESULT sensors=%zu max_rate=%d offered=%.0f ingested_per_s=%.0f "
		       "sym_cpu_s=%.3f cpu_s_per_million=%.3f p50_ms=%.1f p99_ms=%.1f max_ms=%.1f "
		       "batches_timed=%zu untimed=%" PRIu64 " rss_mib=%.1f hwm_mib=%.1f "
		       "peak_rss_mib=%.1f sent=%" PRIu64 " stored=%" PRIu64 " received=%" PRIu64
		       " lost=%" PRIu64 " store_failed=%" PRIu64 " waiting=%" PRIu64
		       " connect_s=%.2f warm_s=%.2f measured_s=%.2f gen_cpu_s=%.2f "
		       "read_ranges=%" PRIu64 " range_mib=%.1f table_mib=%.1f stream_errors=%" PRIu64
		       " unclean=%d restart=%d restart_s=%.2f warm_tables=%" PRIu64
		       " restart_tables=%" PRIu64 " warm_table_bytes=%" PRIu64
		       " restart_table_bytes=%" PRIu64 "\n",
		       env.cfg.n_sensors, env.cfg.max_rate,
		       env.cfg.max_rate ? 0.0 : (double)env.cfg.n_sensors * env.cfg.hz * env.cfg.cpus,
		       rate, p1.cpu_s - p0.cpu_s, cpu_per_m, pct_ms(0.5), pct_ms(0.99), pct_ms(1.0),
		       n_lat, sh.log_dropped, p1.rss_mib, p1.hwm_mib,
		       pmax.rss_mib > p1.rss_mib ? pmax.rss_mib : p1.rss_mib, sent, stored,
		       s2.received - s0.received, lost, s2.failed - s0.failed, s2.waiting,
		       connect_s, warm_s, (double)(t1 - t0) / 1e9, self_cpu_s() - gen_cpu0,
		       (uint64_t)atomic_load(&sh.read_ranges),
		       atomic_load(&sh.range_bytes) / 1048576.0,
		       atomic_load(&sh.table_bytes) / 1048576.0,
		       (uint64_t)atomic_load(&sh.stream_errors), unclean, env.restart, restart_s,
		       warm_tables, (uint64_t)atomic_load(&sh.tables_received) - warm_tables,
		       warm_table_bytes, (uint64_t)atomic_load(&sh.table_bytes) - warm_table_bytes);
		err = lost || !s2.ok ? 3 : 0;
	}
cleanup:
	atomic_store(&sh.stop, true);
	for (size_t w = 0; w < n_writers; w++) {
		pthread_join(writers[w].th, NULL);
		free(writers[w].sensors);
	}
	for (size_t i = 0; sensors && i < env.cfg.n_sensors; i++)
		lg_sensor_finish(sensors[i], 0); /* an error path: do not wait */
	free(sensors);
	rpc_channel_free(status_ch);
	free(sh.log);
	free(lat_us);
	lg_pool_done(&pool);
	lg_files_done(&files);
	rpc_client_set_tls(NULL);
	rpc_global_shutdown();
	return err;
}
