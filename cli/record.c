/* record.c - `sonde record`: runs both services for one job, like perf
 * record. The symbolizer runs as the unprivileged user on a private
 * socket, the sensor as root; each is fork+exec'd (never a fork of this
 * process that keeps running our code) and put in its own process group so
 * a Ctrl-C at the terminal reaches the profiled command, not the services.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "command.h"
#include "fd_upload_wire.h"
#include "local.h"

#define RECORD_DEFAULT_SECONDS 30
#define RECORD_START_TIMEOUT_MS 20000
#define RECORD_STOP_TIMEOUT_MS 30000
#define RECORD_MAX_OUTPUTS 4

static struct env {
	const char *outputs[RECORD_MAX_OUTPUTS]; /* -o, each format by its suffix */
	unsigned n_outputs;
	const char *cache;
	const char *user;
	uint32_t seconds; /* 0: not given */
	uint32_t frequency;
	uint32_t pid;
	unsigned limit;
	bool all;
	bool verbose;
	/* Profile types (ProfileQuery.profile numbers): CPU unless --no-cpu. */
	bool no_cpu, off_cpu, memory;
	const char *off_cpu_min_us; /* passed on to the sensor; it checks it */
	char **cmd;
} env = {
	.frequency = 19,
	.limit = 20,
	.user = "sonde",
};

static volatile sig_atomic_t interrupted;
static time_t record_start; /* when the sensor was started */

static void on_signal(int sig)
{
	interrupted = sig;
}

static const char help[] =
	"usage: sonde record [--all | -p PID | -- CMD ARGS...] [-d SECONDS] [-F HZ] [-o FILE]\n"
	"Profiles CMD (until it exits), a process or the whole host (-d seconds, default 30),\n"
	"then prints the top functions. Needs root: it starts sonde-sensor, which loads BPF.\n"
	"  -o FILE.folded   write the stacks in folded format ('comm;root;...;leaf COUNT')\n"
	"  -o FILE.html     write a self-contained HTML flame graph\n"
	"  -o FILE.pb.gz    write a gzipped pprof profile (also FILE.pprof)\n"
	"                   (-o may be given up to 4 times, one file per format)\n"
	"  -F HZ            samples per second per CPU (default 19)\n"
	"  -n N             rows of the top table (default 20)\n"
	"  --off-cpu        also record off-CPU time: stacks where threads blocked, weighed\n"
	"                   by the ns they were off the CPU (--off-cpu-min-us US: shorter\n"
	"                   blocks are left out, default 1000)\n"
	"  --memory         also record memory growth (bytes by stack)\n"
	"  --no-cpu         no CPU samples (with --off-cpu or --memory)\n"
	"                   With several types, top is printed for each and -o FILE.EXT\n"
	"                   holds the first (cpu, off-cpu, memory); the others go to\n"
	"                   FILE.off-cpu.EXT and FILE.memory.EXT\n"
	"  --cache PATH     symbolizer cache (default $SONDE_CACHE or /var/cache/sonde/symbolizer/cache.db)\n"
	"  --user NAME      user the symbolizer runs as (default sonde)\n"
	"  -v, --verbose    show the services' logs\n"
	"With CMD, sonde record exits with CMD's exit status.\n";

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n > m && !strcmp(s + n - m, suffix);
}

/* -o FILE: one more output (at most RECORD_MAX_OUTPUTS). */
static int parse_output(const char *arg, void *target)
{
	if (env.n_outputs == RECORD_MAX_OUTPUTS) {
		fprintf(stderr, "sonde record: at most %d -o files\n", RECORD_MAX_OUTPUTS);
		return -EINVAL;
	}
	env.outputs[env.n_outputs++] = arg;
	return 0;
}

static int parse_args(int argc, char **argv)
{
	static const struct command_opt opts[] = {
		{ "all", 'a', COMMAND_OPT_FLAG, &env.all },
		{ "pid", 'p', COMMAND_OPT_U32, &env.pid, .min = 1,
		  .bad = "sonde record: -p wants a process ID, not '%.64s'\n" },
		{ "duration", 'd', COMMAND_OPT_U32, &env.seconds, .min = 1,
		  .bad = "sonde record: -d wants a positive number of seconds\n" },
		{ "frequency", 'F', COMMAND_OPT_U32, &env.frequency, .min = 1, .max = 10000,
		  .bad = "sonde record: -F wants 1..10000 samples per second\n" },
		{ "output", 'o', COMMAND_OPT_CUSTOM, NULL, .parse = parse_output },
		{ "limit", 'n', COMMAND_OPT_U32, &env.limit, .min = 1,
		  .bad = "sonde record: -n wants a positive number\n" },
		{ "cache", 'c', COMMAND_OPT_STRING, &env.cache },
		{ "user", 'u', COMMAND_OPT_STRING, &env.user },
		{ "verbose", 'v', COMMAND_OPT_FLAG, &env.verbose },
		{ "off-cpu", 0, COMMAND_OPT_FLAG, &env.off_cpu },
		{ "off-cpu-min-us", 0, COMMAND_OPT_STRING, &env.off_cpu_min_us },
		{ "memory", 0, COMMAND_OPT_FLAG, &env.memory },
		{ "no-cpu", 0, COMMAND_OPT_FLAG, &env.no_cpu },
	};
	/* Options stop at the first operand, so CMD's own options stay CMD's. */
	const struct command_line cl = { help, opts, sizeof(opts) / sizeof(opts[0]),
					 .stop_at_operand = true,
					 .operands = COMMAND_OPERANDS_TAKEN };
	int first;
	int r = command_parse(&cl, argc, argv, &first);

	if (r)
		return r;
	if (first < argc)
		env.cmd = argv + first;
	if ((env.all ? 1 : 0) + (env.pid ? 1 : 0) + (env.cmd ? 1 : 0) != 1) {
		fprintf(stderr, "sonde record: say what to profile: --all, -p PID or -- CMD ARGS...\n");
		return -EINVAL;
	}
	for (unsigned i = 0; i < env.n_outputs; i++) {
		const char *o = env.outputs[i];

		if (!ends_with(o, ".folded") && !ends_with(o, ".html") && !cli_is_pprof_path(o)) {
			fprintf(stderr, "sonde record: -o supports FILE.folded (folded stacks), FILE.html (flame graph)\n"
					"  and FILE.pb.gz or FILE.pprof (pprof), not '%.200s'\n", o);
			return -EINVAL;
		}
	}
	if (env.no_cpu && !env.off_cpu && !env.memory) {
		fprintf(stderr, "sonde record: --no-cpu leaves nothing to record: add --off-cpu or --memory\n");
		return -EINVAL;
	}
	if (!env.cache)
		env.cache = getenv("SONDE_CACHE");
	if (!env.cache || !*env.cache)
		env.cache = "/var/cache/sonde/symbolizer/cache.db";
	return 0;
}

/* fork+exec argv in its own process group. Returns the pid or -errno. */
static pid_t spawn(char *const argv[], bool quiet)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		setpgid(0, 0);
		if (quiet) {
			int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
			if (fd >= 0)
				dup2(fd, STDOUT_FILENO);
			/* Warnings and errors only: a recording is quiet unless
			 * something goes wrong (-v shows everything). */
			setenv("SONDE_LOG_LEVEL", "warning", 1);
		}
		execv(argv[0], argv);
		fprintf(stderr, "sonde record: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Whether pid (our child) has exited; reaps it and stores the status. A
 * child reaped before counts as exited. */
static bool child_exited(pid_t pid, int *status)
{
	pid_t r;

	if (pid <= 0)
		return true;
	r = waitpid(pid, status, WNOHANG);
	return r == pid || (r < 0 && errno == ECHILD);
}

/* SIGTERM, wait up to timeout_ms, then SIGKILL. Returns the wait status. */
static int stop_child(pid_t pid, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	int status = 0;

	if (child_exited(pid, &status))
		return status;
	kill(pid, SIGTERM);
	while (now_ms() < deadline) {
		if (child_exited(pid, &status))
			return status;
		sleep_ms(20);
	}
	fprintf(stderr, "sonde record: process %d did not stop in %d ms, killing it\n", (int)pid,
		timeout_ms);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return status;
}

/* Waits until the symbolizer answers and a sensor is connected to it;
 * with held (CMD waits for "go"), until the sensor's first flush
 * arrived too. That flush sends the kernel's symbols, which takes the
 * sensor's loop up to a second on a loaded host: a command started before
 * it ends runs that long with its exec unhandled, its new image neither
 * scanned nor given unwind tables, so its first samples' stacks stop at
 * the leaf. The flush ends with the sensor's stats, which count the
 * process the sensor found: CMD, waiting. */
static int wait_for_services(const char *address, pid_t symbolizer, pid_t sensor, bool held)
{
	uint64_t deadline = now_ms() + RECORD_START_TIMEOUT_MS;
	int status;

	while (now_ms() < deadline && !interrupted) {
		Sonde__V1__StatusResponse *st = NULL;
		if (child_exited(symbolizer, &status)) {
			fprintf(stderr, "sonde record: sonde-symbolizer exited during start-up (status %d)\n",
				status);
			return -ECHILD;
		}
		if (child_exited(sensor, &status)) {
			fprintf(stderr, "sonde record: sonde-sensor exited during start-up (status %d);\n"
					"  it needs root and a kernel with BPF (see the message above)\n",
				status);
			return -ECHILD;
		}
		if (command_status_quiet(address, 1000, true, &st) == 0) {
			bool ready = st->sensors_connected > 0 && (!held || st->sensor_processes > 0);
			rpc_message_free(&st->base);
			if (ready)
				return 0;
		}
		sleep_ms(50);
	}
	fprintf(stderr, "sonde record: the services did not start within %d s\n",
		RECORD_START_TIMEOUT_MS / 1000);
	return -ETIMEDOUT;
}

/* Forks CMD stopped before exec: it execs when a byte arrives on the pipe,
 * so the sensor can be told its pid before it runs. */
static pid_t fork_command(char **cmd, int *ret_go_fd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int err = -errno;
		close(p[0]);
		close(p[1]);
		return err;
	}
	if (pid == 0) {
		char go;
		close(p[1]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		if (read(p[0], &go, 1) != 1)
			_exit(127); /* the recorder gave up before start */
		execvp(cmd[0], cmd);
		fprintf(stderr, "sonde record: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	close(p[0]);
	*ret_go_fd = p[1];
	return pid;
}

/* Writes one -o file of profile type profile from the replies it needs
 * (fetched once each). */
static int write_output(const char *address, const char *path, uint32_t profile,
			Sonde__V1__FoldedResponse **folded, Sonde__V1__PprofResponse **pprof)
{
	Sonde__V1__ProfileQuery q = SONDE__V1__PROFILE_QUERY__INIT;
	int err;

	q.profile = profile;
	if (cli_is_pprof_path(path)) {
		/* The store does not keep the rate; the sensor ran at ours. The
		 * window (the store counts per minute, so the same rows as
		 * Folded) gives the profile this recording's duration. */
		q.frequency_hz = env.frequency;
		q.since_unix_s = (uint64_t)record_start;
		q.until_unix_s = (uint64_t)time(NULL) + 1;
		if (!*pprof && (err = cli_fetch_pprof(address, &q, pprof)) < 0)
			return err;
		err = cli_write_bytes_file(path, (*pprof)->profile.data, (*pprof)->profile.len);
		if (!err)
			fprintf(stderr, "sonde record: wrote %llu samples to %s\n",
				(unsigned long long)(*pprof)->total_samples, path);
	} else {
		if (!*folded && (err = command_call(address, "/sonde.v1.Symbols/Folded", &q.base,
						    &sonde__v1__folded_response__descriptor,
						    COMMAND_RPC_TIMEOUT_MS, false, (ProtobufCMessage **)folded)) < 0)
			return err;
		err = ends_with(path, ".html") ? cli_write_flamegraph_file(path, *folded,
									   cli_flamegraph_title(profile, "sonde record"))
					       : cli_write_folded_file(path, *folded);
		if (!err)
			fprintf(stderr, "sonde record: wrote %zu stacks to %s\n", (*folded)->n_stacks, path);
	}
	if (err)
		fprintf(stderr, "sonde record: writing %s: %s\n", path, strerror(-err));
	return err;
}

/* path for a profile type after the first: "FILE.TYPE.EXT", the type
 * put before the format's suffix (.pb.gz counts as one). Into buf. */
static const char *typed_path(const char *path, uint32_t profile, char *buf, size_t size)
{
	const char *base = strrchr(path, '/');
	const char *dot;
	size_t stem;

	base = base ? base + 1 : path;
	dot = ends_with(path, ".pb.gz") ? path + strlen(path) - 6 : strrchr(base, '.');
	stem = dot ? (size_t)(dot - path) : strlen(path);
	snprintf(buf, size, "%.*s.%s%s", (int)stem, path, cli_profile_type_name(profile),
		 dot ? dot : "");
	return buf;
}

/* Top and the -o files of one profile type; first: the first type
 * recorded, whose files are named as given. */
static int report_type(const char *address, uint32_t profile, bool first, bool several)
{
	Sonde__V1__ProfileQuery q = SONDE__V1__PROFILE_QUERY__INIT;
	Sonde__V1__TopResponse *top = NULL;
	Sonde__V1__FoldedResponse *folded = NULL;
	Sonde__V1__PprofResponse *pprof = NULL;
	char buf[PATH_MAX + 16];
	int err;

	q.limit = env.limit;
	q.profile = profile;
	err = command_call(address, "/sonde.v1.Symbols/Top", &q.base, &sonde__v1__top_response__descriptor,
			   COMMAND_RPC_TIMEOUT_MS, false, (ProtobufCMessage **)&top);
	if (err)
		goto cleanup;
	if (several)
		printf("%s== %s ==\n", first ? "" : "\n", cli_profile_type_name(profile));
	cli_print_top(stdout, top, env.limit, profile);
	fflush(stdout);
	for (unsigned i = 0; i < env.n_outputs && !err; i++) {
		const char *path = first ? env.outputs[i]
					 : typed_path(env.outputs[i], profile, buf, sizeof(buf));

		err = write_output(address, path, profile, &folded, &pprof);
	}
cleanup:
	rpc_message_free(top ? &top->base : NULL);
	rpc_message_free(folded ? &folded->base : NULL);
	rpc_message_free(pprof ? &pprof->base : NULL);
	return err;
}

static int report(const char *address)
{
	bool on[3] = { !env.no_cpu, env.off_cpu, env.memory };
	bool several = on[0] + on[1] + on[2] > 1, first = true;
	int err = 0;

	for (uint32_t t = 0; t < 3 && !err; t++) {
		if (!on[t])
			continue;
		err = report_type(address, t, first, several);
		first = false;
	}
	return err;
}

int cmd_record(int argc, char **argv)
{
	char sensor_bin[PATH_MAX], symbolizer_bin[PATH_MAX], dir[] = "/tmp/sonde-record.XXXXXX";
	char sock[sizeof(dir) + 32], address[sizeof(sock) + 8], profiles[sizeof(dir) + 32];
	char freq[16], pidbuf[16];
	pid_t symbolizer = -1, sensor = -1, child = -1;
	int go_fd = -1, child_status = 0, rc = 1, r;
	bool dir_made = false, child_done = false;
	struct sigaction sa = { .sa_handler = on_signal };
	uint64_t deadline;

	r = parse_args(argc, argv);
	if (r)
		return r > 0 ? 0 : 2;
	if (geteuid() != 0) {
		fprintf(stderr, "sonde record: needs root to load BPF programs: run it with sudo\n");
		return 1;
	}
	if (local_find_service("sonde-sensor", "sensor", sensor_bin, sizeof(sensor_bin)) < 0 ||
	    local_find_service("sonde-symbolizer", "symbolizer", symbolizer_bin, sizeof(symbolizer_bin)) < 0) {
		fprintf(stderr, "sonde record: sonde-sensor and sonde-symbolizer must be installed next to sonde\n");
		return 1;
	}
	if (!mkdtemp(dir)) {
		fprintf(stderr, "sonde record: cannot create a directory in /tmp: %s\n", strerror(errno));
		return 1;
	}
	dir_made = true;
	/* The symbolizer keeps the job's profile store here after it dropped
	 * to the user. */
	{
		struct passwd *pw = getpwnam(env.user);
		if (!pw) {
			fprintf(stderr, "sonde record: no user '%s' for the symbolizer; create it with\n"
					"  useradd --system --no-create-home --shell /usr/sbin/nologin %s\n",
				env.user, env.user);
			goto cleanup;
		}
		/* The sensor switches to this user after set-up and refuses
		 * to start without it. */
		if (!getpwnam("sonde-sensor")) {
			fprintf(stderr, "sonde record: no user 'sonde-sensor' for the sensor; create it with\n"
					"  useradd --system --no-create-home --shell /usr/sbin/nologin sonde-sensor\n");
			goto cleanup;
		}
		pw = getpwnam(env.user); /* getpwnam's buffer is shared */
		/* Through an fd opened without following a symlink. */
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (dfd < 0 || fchown(dfd, pw->pw_uid, pw->pw_gid) < 0) {
			fprintf(stderr, "sonde record: cannot chown %s: %s\n", dir, strerror(errno));
			if (dfd >= 0)
				close(dfd);
			goto cleanup;
		}
		close(dfd);
	}
	snprintf(sock, sizeof(sock), "%s/symbolizer.sock", dir);
	snprintf(address, sizeof(address), "unix:%s", sock);
	snprintf(profiles, sizeof(profiles), "%s/profiles.db", dir);
	snprintf(freq, sizeof(freq), "%u", env.frequency);

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	{
		/* The profile store is private to this job; the analysis cache is
		 * shared, so a file analysed once stays analysed. */
		char *argv_sym[] = { symbolizer_bin, "--listen", address, "--cache", (char *)env.cache,
				     "--profiles", profiles, "--user", (char *)env.user,
				     env.verbose ? "--verbose" : NULL, NULL };
		symbolizer = spawn(argv_sym, !env.verbose);
	}
	if (symbolizer < 0) {
		fprintf(stderr, "sonde record: cannot start %s: %s\n", symbolizer_bin, strerror(-symbolizer));
		goto cleanup;
	}
	if (env.cmd) {
		child = fork_command(env.cmd, &go_fd);
		if (child < 0) {
			fprintf(stderr, "sonde record: fork: %s\n", strerror(-child));
			goto cleanup;
		}
	}
	{
		char *argv_sen[20];
		int n = 0;
		argv_sen[n++] = sensor_bin;
		argv_sen[n++] = "--symbolizer";
		argv_sen[n++] = address;
		argv_sen[n++] = "--frequency";
		argv_sen[n++] = freq;
		/* The symbolizer's user: its group is the socket's, which
		 * the sensor keeps when it drops to its own user. */
		argv_sen[n++] = "--symbolizer-uid";
		argv_sen[n++] = (char *)env.user;
		/* The progress line counts what arrived: every second, not
		 * at the sensor's default 5 s. */
		argv_sen[n++] = "--flush-ms";
		argv_sen[n++] = "1000";
		if (env.cmd || env.pid) {
			snprintf(pidbuf, sizeof(pidbuf), "%d", env.cmd ? (int)child : (int)env.pid);
			argv_sen[n++] = "--pid";
			argv_sen[n++] = pidbuf;
		}
		if (env.verbose)
			argv_sen[n++] = "--verbose";
		if (env.no_cpu)
			argv_sen[n++] = "--no-cpu";
		if (env.off_cpu)
			argv_sen[n++] = "--off-cpu";
		if (env.off_cpu_min_us) {
			argv_sen[n++] = "--off-cpu-min-us";
			argv_sen[n++] = (char *)env.off_cpu_min_us;
		}
		if (env.memory)
			argv_sen[n++] = "--memory";
		argv_sen[n] = NULL;
		record_start = time(NULL);
		sensor = spawn(argv_sen, !env.verbose);
	}
	if (sensor < 0) {
		fprintf(stderr, "sonde record: cannot start %s: %s\n", sensor_bin, strerror(-sensor));
		goto cleanup;
	}
	if (wait_for_services(address, symbolizer, sensor, env.cmd != NULL) < 0)
		goto cleanup;

	deadline = now_ms() + 1000ULL * (env.seconds ? env.seconds : RECORD_DEFAULT_SECONDS);
	if (env.cmd) {
		if (write(go_fd, "g", 1) != 1) {
			fprintf(stderr, "sonde record: cannot start the command: %s\n", strerror(errno));
			goto cleanup;
		}
		close(go_fd);
		go_fd = -1;
		/* CMD runs until it exits; -d, if given, only limits profiling. */
		cli_progress_start();
		while (!(child_done = child_exited(child, &child_status)) &&
		       (!env.seconds || now_ms() < deadline)) {
			sleep_ms(20);
			cli_progress_tick(address);
		}
	} else {
		if (isatty(STDERR_FILENO))
			fprintf(stderr, "sonde record: profiling for %u s (Ctrl-C to stop early)\n",
				env.seconds ? env.seconds : RECORD_DEFAULT_SECONDS);
		cli_progress_start();
		while (!interrupted && now_ms() < deadline) {
			sleep_ms(50);
			cli_progress_tick(address);
		}
	}
	cli_progress_end();

	r = stop_child(sensor, RECORD_STOP_TIMEOUT_MS);
	sensor = -1;
	if (!WIFEXITED(r) || WEXITSTATUS(r) != 0)
		fprintf(stderr, "sonde record: sonde-sensor ended badly (status %d); the profile may be incomplete\n",
			r);
	rc = report(address) ? 1 : 0;

cleanup:
	if (go_fd >= 0)
		close(go_fd); /* a child still waiting for "go" exits */
	if (sensor > 0)
		stop_child(sensor, RECORD_STOP_TIMEOUT_MS);
	if (symbolizer > 0)
		stop_child(symbolizer, RECORD_STOP_TIMEOUT_MS);
	if (child > 0 && !child_done) {
		if (rc != 0 && env.seconds == 0)
			kill(child, SIGTERM);
		waitpid(child, &child_status, 0);
		child_done = true;
	}
	if (dir_made) {
		char fd_sock[sizeof(sock) + sizeof(FD_UPLOAD_SUFFIX)];

		unlink(sock);
		/* The symbolizer's descriptor socket beside it: left, it
		 * kept the directory from going. */
		if (fd_upload_socket_path(sock, fd_sock, sizeof(fd_sock)))
			unlink(fd_sock);
		unlink(profiles);
		/* the store's WAL side files */
		char side[sizeof(profiles) + 8];
		snprintf(side, sizeof(side), "%s-wal", profiles);
		unlink(side);
		snprintf(side, sizeof(side), "%s-shm", profiles);
		unlink(side);
		rmdir(dir);
	}
	if (env.cmd && child_done && rc == 0) {
		if (WIFEXITED(child_status))
			return WEXITSTATUS(child_status);
		if (WIFSIGNALED(child_status))
			return 128 + WTERMSIG(child_status);
	}
	return rc;
}
