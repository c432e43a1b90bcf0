/* local.c - a private symbolizer for one command (see local.h).
 *
 * `sonde symbolize --file` needs a symbolizer, as llvm-symbolizer and
 * addr2line need none: without one at the default address (or with
 * --local) the CLI starts its own, fork+exec'd like `sonde record`'s, so the
 * bytes of the file are still analysed only inside the symbolizer's sandbox,
 * never in the CLI. It runs as the caller (root: as the user sonde), on a
 * socket in a fresh 0700 directory only the caller can enter, with the
 * caller's cache, so a second run answers from what the first analysed
 * (its profile tables stay empty there: a new profile store each time
 * would cost a few hundred milliseconds of schema writes and fsyncs).
 * It shares the caller's process group, so a Ctrl-C at the terminal stops
 * it too, and as the caller it also gets SIGTERM if the CLI dies first.
 * At the end it is told to stop, and finishes storing what it analysed
 * after the CLI has exited.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "local.h"

#define START_TIMEOUT_MS 20000
/* How long the CLI waits for it to exit before leaving it to finish. */
#define STOP_WAIT_MS 100
#define SYSTEM_CACHE "/var/cache/sonde/symbolizer/cache.db"
#define SERVICE_USER "sonde"

int local_find_service(const char *name, const char *subdir, char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n < 0)
		return -errno;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	if (snprintf(buf, len, "%s/%s", self, name) < (int)len && access(buf, X_OK) == 0)
		return 0;
	if (snprintf(buf, len, "%s/../%s/%s", self, subdir, name) < (int)len && access(buf, X_OK) == 0)
		return 0;
	return -ENOENT;
}

bool local_reachable(const char *address)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	bool ok;
	int fd;

	if (strncmp(address, "unix:", 5) != 0)
		return true;
	if (strlen(address + 5) >= sizeof(sa.sun_path))
		return false;
	strcpy(sa.sun_path, address + 5);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* mkdir -p of path's parent directories (mode 0700 for new ones). */
static int make_parents(const char *path)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

/* The cache the private symbolizer uses, into buf. */
static int user_cache(char *buf, size_t len)
{
	const char *env = getenv("SONDE_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "%s", SYSTEM_CACHE);
	else if (xdg && *xdg == '/')
		n = snprintf(buf, len, "%s/sonde/cache.db", xdg);
	else if (home && *home == '/')
		n = snprintf(buf, len, "%s/.cache/sonde/cache.db", home);
	else
		return -ENOENT;
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	/* As root the symbolizer makes its directory for the user sonde. */
	return geteuid() == 0 ? 0 : make_parents(buf);
}

/* Child side of the fork: never returns. */
static void exec_symbolizer(const char *bin, const struct local_symbolizer *ls, const char *cache,
			    bool verbose)
{
	char log[sizeof(ls->dir) + 32];
	char *argv[12];
	int n = 0, fd;

	snprintf(log, sizeof(log), "%s/symbolizer.log", ls->dir);
	/* As the caller it stops with the CLI (the signal is cleared when
	 * a root symbolizer changes its uid: that one stops on Ctrl-C or at
	 * the CLI's stop). */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* Its malloc settings without its re-exec (malloc_tuning.c keeps a
	 * caller's): one exec less for a process that lives a second. */
	setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=1", 0);
	if (!verbose) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		setenv("SONDE_LOG_LEVEL", "warning", 1);
	}
	argv[n++] = (char *)bin;
	argv[n++] = "--listen";
	argv[n++] = (char *)ls->address;
	argv[n++] = "--cache";
	argv[n++] = (char *)cache;
	if (geteuid() == 0) {
		argv[n++] = "--user";
		argv[n++] = SERVICE_USER;
	}
	if (verbose)
		argv[n++] = "--verbose";
	argv[n] = NULL;
	execv(bin, argv);
	fprintf(stderr, "sonde: cannot run %s: %s\n", bin, strerror(errno));
	_exit(127);
}

/* Prints the end of the symbolizer's log (why it did not start). */
static void show_log(const struct local_symbolizer *ls)
{
	char path[sizeof(ls->dir) + 32], buf[4096];
	ssize_t n;
	off_t size;
	int fd;

	snprintf(path, sizeof(path), "%s/symbolizer.log", ls->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	lseek(fd, size > (off_t)sizeof(buf) ? size - (off_t)sizeof(buf) : 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf));
	if (n > 0)
		fwrite(buf, 1, (size_t)n, stderr);
	close(fd);
}

/* As root: the directory goes to the user sonde, who keeps the profile
 * store there after the symbolizer dropped to it. */
static int give_dir(const char *dir)
{
	struct passwd *pw = getpwnam(SERVICE_USER);
	int fd, r = 0;

	if (!pw) {
		fprintf(stderr, "sonde: no user '%s' for the symbolizer; create it with\n"
				"  useradd --system --no-create-home --shell /usr/sbin/nologin %s\n",
			SERVICE_USER, SERVICE_USER);
		return -ENOENT;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchown(fd, pw->pw_uid, pw->pw_gid) < 0) {
		r = -errno;
		fprintf(stderr, "sonde: cannot chown %s: %s\n", dir, strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	return r;
}

int local_symbolizer_start(struct local_symbolizer *ret, bool verbose)
{
	struct local_symbolizer ls = { 0 };
	char bin[PATH_MAX], cache[PATH_MAX];
	int64_t deadline;
	int status, r;

	if (local_find_service("sonde-symbolizer", "symbolizer", bin, sizeof(bin)) < 0) {
		fprintf(stderr, "sonde: no symbolizer answers, and sonde-symbolizer is not installed next to sonde\n");
		return -ENOENT;
	}
	r = user_cache(cache, sizeof(cache));
	if (r < 0) {
		fprintf(stderr, "sonde: no cache for a private symbolizer (set SONDE_CACHE or HOME): %s\n",
			strerror(-r));
		return r;
	}
	snprintf(ls.dir, sizeof(ls.dir), "/tmp/sonde-symbolize.XXXXXX");
	if (!mkdtemp(ls.dir)) {
		r = -errno;
		fprintf(stderr, "sonde: cannot create a directory in /tmp: %s\n", strerror(errno));
		return r;
	}
	snprintf(ls.address, sizeof(ls.address), "unix:%s/symbolizer.sock", ls.dir);
	if (geteuid() == 0 && (r = give_dir(ls.dir)) < 0)
		goto fail;
	fflush(stdout);
	fflush(stderr);
	ls.pid = fork();
	if (ls.pid < 0) {
		r = -errno;
		ls.pid = 0;
		fprintf(stderr, "sonde: fork: %s\n", strerror(-r));
		goto fail;
	}
	if (ls.pid == 0)
		exec_symbolizer(bin, &ls, cache, verbose);
	deadline = now_ms() + START_TIMEOUT_MS;
	while (!local_reachable(ls.address)) {
		if (waitpid(ls.pid, &status, WNOHANG) == ls.pid) {
			ls.pid = 0;
			fprintf(stderr, "sonde: the private symbolizer exited during start-up (status %d):\n",
				status);
			show_log(&ls);
			r = -ECHILD;
			goto fail;
		}
		if (now_ms() > deadline) {
			fprintf(stderr, "sonde: the private symbolizer did not start within %d s\n",
				START_TIMEOUT_MS / 1000);
			r = -ETIMEDOUT;
			goto fail;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
	}
	*ret = ls;
	return 0;
fail:
	local_symbolizer_stop(&ls);
	return r;
}

void local_symbolizer_explain(struct local_symbolizer *ls)
{
	int64_t deadline = now_ms() + 1000;
	int status;
	pid_t r;

	if (ls->pid <= 0)
		return;
	/* A failed start-up ends within moments of the call's failure. */
	while ((r = waitpid(ls->pid, &status, WNOHANG)) == 0 && now_ms() < deadline)
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	if (r != ls->pid)
		return;
	ls->pid = 0;
	fprintf(stderr, "sonde: the private symbolizer exited (status %d):\n", status);
	show_log(ls);
}

/* Removes dir's entries (no subdirectories are made there) and dir. */
static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d) {
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
}

void local_symbolizer_stop(struct local_symbolizer *ls)
{
	int64_t deadline = now_ms() + STOP_WAIT_MS;
	int status;

	if (ls->pid > 0) {
		/* It stores what it finished (a new file's source index and
		 * unwind table, built after the answers) before it exits: that
		 * can take a second, which the caller need not wait for. */
		kill(ls->pid, SIGTERM);
		while (waitpid(ls->pid, &status, WNOHANG) == 0 && now_ms() < deadline)
			nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
		ls->pid = 0;
	}
	/* Its listeners work on unlinked, and it writes nothing else here. */
	if (ls->dir[0])
		remove_dir(ls->dir);
	ls->dir[0] = '\0';
}
