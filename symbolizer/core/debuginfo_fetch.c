/* debuginfo_fetch.c - fetches separate debug files by GNU build ID from
 * debuginfod servers on one worker thread (see debuginfo_fetch.h).
 *
 * libdebuginfod (elfutils, the client gdb and perf use) does the HTTP, the
 * server list, the cache by build ID (DIR/<build-id>/debuginfo) and its
 * negative entries for "no such file". It is blocking, so it runs here,
 * off the rpc loop: an analysis job that wants a debug file no local
 * directory has waits (analysis.c) while this thread asks the servers,
 * and the loop collects the answers on its timer. A request is bounded
 * twice: curl's own limits (DEBUGINFOD_TIMEOUT, _MAXTIME, _MAXSIZE, set
 * before any thread exists, as setenv is not thread-safe) and a progress
 * callback that cancels the transfer at the deadline or past the size cap.
 *
 * The client is made in debuginfo_fetch_init, before the sandbox (curl's
 * set-up opens descriptors the sandbox would refuse); the thread is started
 * on the first request, inside the sandbox, so it has the same Landlock
 * domain and seccomp filter as the rest (TCP connect to the servers' ports
 * only: sandbox.c). Host names in URLs are resolved inside the sandbox;
 * main.c only accepts URLs whose host is an address (docs/security.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <elfutils/debuginfod.h>

#include "clock.h"
#include "hmap.h"
#include "log.h"
#include "debuginfo_fetch.h"

#define MAX_BUILD_ID 64

struct fetch_task {
	struct fetch_task *next;
	struct fileid id;
	uint8_t build_id[MAX_BUILD_ID];
	size_t build_id_len;
	char *path; /* result: malloc'd, or NULL */
	int err;    /* result: 0 or a negative errno */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct fetch_task *todo, *todo_tail, *done, *running;
static size_t n_todo;
static bool enabled, started, stopping;
static pthread_t thread;
static debuginfod_client *client;
static bool configured, verbose;
/* Under mu: after a request that failed for a reason not the file's
 * (refused, timed out), requests fail at once until then, so a server that
 * is down costs one timeout, not one per file queued behind it. */
static int64_t down_until_ms;
static char cache_dir[4096];
static unsigned timeout_s;
static uint64_t max_size;
/* Loop thread only: build ID -> int64_t * (clock_now_ms when to try again). */
static struct hmap *failed;

/* Worker thread, within debuginfod_find_debuginfo: a non-zero return
 * cancels the transfer. a: bytes so far; b: the size, when the server
 * said it. */
static int progress(debuginfod_client *c, long a, long b)
{
	const int64_t *deadline = debuginfod_get_user_data(c);

	if (deadline && clock_now_ms() > *deadline)
		return 1;
	return (a > 0 && (uint64_t)a > max_size) || (b > 0 && (uint64_t)b > max_size);
}

/* Worker thread: one request, bounded by timeout_s and max_size. */
static void fetch_one(struct fetch_task *t)
{
	int64_t deadline = clock_now_ms() + (int64_t)timeout_s * 1000;
	char *path = NULL;
	struct stat st;
	int fd;

	debuginfod_set_user_data(client, &deadline);
	fd = debuginfod_find_debuginfo(client, t->build_id, (int)t->build_id_len, &path);
	debuginfod_set_user_data(client, NULL);
	if (fd < 0) {
		t->err = clock_now_ms() > deadline ? -ETIMEDOUT : fd;
		free(path);
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max_size) {
		t->err = -EFBIG;
		free(path);
	} else {
		t->path = path;
	}
	close(fd);
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		struct fetch_task *t;

		while (!todo && !stopping)
			pthread_cond_wait(&cv, &mu);
		if (stopping)
			break;
		t = todo;
		todo = t->next;
		if (!todo)
			todo_tail = NULL;
		n_todo--;
		running = t;
		if (clock_now_ms() < down_until_ms) {
			t->err = -EHOSTDOWN;
		} else {
			pthread_mutex_unlock(&mu);
			fetch_one(t);
			pthread_mutex_lock(&mu);
			/* "No such file" and "too large" are the file's. */
			if (t->err < 0 && t->err != -ENOENT && t->err != -EFBIG)
				down_until_ms = clock_now_ms() + DEBUGINFO_FETCH_DOWN_S * 1000LL;
		}
		running = NULL;
		t->next = done;
		done = t;
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* libdebuginfod reads these on each request (its cache, the servers) and
 * curl's limits from them; set once, before any thread exists. */
static int set_environment(const struct debuginfo_fetch_opts *o)
{
	char urls[DEBUGINFO_FETCH_MAX_URLS * 512], num[32];
	size_t len = 0;

	urls[0] = '\0';
	for (size_t i = 0; i < o->n_urls; i++) {
		int n = snprintf(urls + len, sizeof(urls) - len, "%s%s", i ? " " : "", o->urls[i]);

		if (n < 0 || (size_t)n >= sizeof(urls) - len)
			return -ENAMETOOLONG;
		len += (size_t)n;
	}
	if (setenv(DEBUGINFOD_URLS_ENV_VAR, urls, 1) < 0 ||
	    setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, o->cache_dir, 1) < 0)
		return -errno;
	snprintf(num, sizeof(num), "%u", o->timeout_s);
	if (setenv(DEBUGINFOD_TIMEOUT_ENV_VAR, num, 1) < 0 ||
	    setenv(DEBUGINFOD_MAXTIME_ENV_VAR, num, 1) < 0)
		return -errno;
	snprintf(num, sizeof(num), "%llu", (unsigned long long)o->max_size);
	if (setenv(DEBUGINFOD_MAXSIZE_ENV_VAR, num, 1) < 0 ||
	    setenv(DEBUGINFOD_RETRY_LIMIT_ENV_VAR, "1", 1) < 0)
		return -errno;
	/* Nothing of the caller's: no progress bar, no header file. */
	unsetenv(DEBUGINFOD_PROGRESS_ENV_VAR);
	unsetenv(DEBUGINFOD_HEADERS_FILE_ENV_VAR);
	if (!o->verbose)
		unsetenv(DEBUGINFOD_VERBOSE_ENV_VAR);
	return 0;
}

/* The cache directory, and how long libdebuginfod keeps a "no such file"
 * (its cache_miss_s file, read on each request). */
static int prepare_cache(const char *dir)
{
	char path[4096];
	FILE *f;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (snprintf(path, sizeof(path), "%s/cache_miss_s", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "we");
	if (!f)
		return -errno;
	fprintf(f, "%d\n", DEBUGINFO_FETCH_MISS_S);
	return fclose(f) == 0 ? 0 : -errno;
}

int debuginfo_fetch_configure(const struct debuginfo_fetch_opts *o)
{
	int r;

	if (!o->n_urls)
		return 0;
	if (o->n_urls > DEBUGINFO_FETCH_MAX_URLS || !o->cache_dir || !o->timeout_s || !o->max_size)
		return -EINVAL;
	if (strlen(o->cache_dir) >= sizeof(cache_dir))
		return -ENAMETOOLONG;
	r = set_environment(o);
	if (r < 0)
		return r;
	strcpy(cache_dir, o->cache_dir);
	timeout_s = o->timeout_s;
	max_size = o->max_size;
	verbose = o->verbose;
	configured = true;
	return 0;
}

int debuginfo_fetch_init(void)
{
	int r;

	if (!configured)
		return 0;
	r = prepare_cache(cache_dir);
	if (r < 0)
		return r;
	failed = hmap_new();
	if (!failed)
		return -ENOMEM;
	client = debuginfod_begin();
	if (!client) {
		hmap_free(failed, NULL);
		failed = NULL;
		return -ENOMEM;
	}
	debuginfod_set_progressfn(client, progress);
	if (verbose)
		debuginfod_set_verbose_fd(client, STDERR_FILENO);
	enabled = true;
	return 0;
}

bool debuginfo_fetch_enabled(void)
{
	return enabled;
}

int debuginfo_fetch_submit(const struct fileid *id, const uint8_t *build_id,
			   size_t build_id_len)
{
	struct fetch_task *t;
	int64_t *retry_at;
	int r = 0;

	if (!enabled)
		return -ENODEV;
	if (!build_id_len || build_id_len > MAX_BUILD_ID)
		return -EINVAL;
	pthread_mutex_lock(&mu);
	r = clock_now_ms() < down_until_ms ? -EAGAIN : 0;
	pthread_mutex_unlock(&mu);
	if (r < 0)
		return r;
	retry_at = hmap_get(failed, build_id, build_id_len);
	if (retry_at) {
		if (clock_now_ms() < *retry_at)
			return -EAGAIN;
		free(hmap_remove(failed, build_id, build_id_len));
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->id = *id;
	memcpy(t->build_id, build_id, build_id_len);
	t->build_id_len = build_id_len;
	pthread_mutex_lock(&mu);
	if (n_todo >= DEBUGINFO_FETCH_MAX_QUEUED) {
		r = -E2BIG;
	} else if (!started) {
		r = -pthread_create(&thread, NULL, worker, NULL);
		started = r == 0;
	}
	if (r == 0) {
		if (todo_tail)
			todo_tail->next = t;
		else
			todo = t;
		todo_tail = t;
		n_todo++;
		pthread_cond_signal(&cv);
	}
	pthread_mutex_unlock(&mu);
	if (r < 0)
		free(t);
	return r;
}

bool debuginfo_fetch_busy(void)
{
	bool busy;

	if (!started)
		return false;
	pthread_mutex_lock(&mu);
	busy = todo || running || done;
	pthread_mutex_unlock(&mu);
	return busy;
}

static void remember_failure(const struct fetch_task *t)
{
	int64_t *at = malloc(sizeof(*at)), *old = NULL;

	if (!at)
		return;
	*at = clock_now_ms() + DEBUGINFO_FETCH_RETRY_S * 1000LL;
	if (hmap_put(failed, t->build_id, t->build_id_len, at, (void **)&old) < 0)
		free(at);
	free(old);
}

size_t debuginfo_fetch_collect(void (*fn)(void *ctx, const struct fileid *id, const char *path),
			       void *ctx)
{
	struct fetch_task *list;
	size_t n = 0;

	if (!started)
		return 0;
	pthread_mutex_lock(&mu);
	list = done;
	done = NULL;
	pthread_mutex_unlock(&mu);
	while (list) {
		struct fetch_task *t = list;

		list = t->next;
		if (t->err < 0) {
			log_debug("no debug file from debuginfod for a file: %s", strerror(-t->err));
			if (t->err != -EHOSTDOWN)
				remember_failure(t);
		}
		fn(ctx, &t->id, t->path);
		free(t->path);
		free(t);
		n++;
	}
	return n;
}

static void free_list(struct fetch_task *t)
{
	while (t) {
		struct fetch_task *next = t->next;

		free(t->path);
		free(t);
		t = next;
	}
}

void debuginfo_fetch_stop(void)
{
	if (started) {
		pthread_mutex_lock(&mu);
		stopping = true;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
		pthread_join(thread, NULL);
		started = false;
	}
	free_list(todo);
	free_list(done);
	todo = todo_tail = done = NULL;
	n_todo = 0;
	if (client)
		debuginfod_end(client);
	client = NULL;
	hmap_free(failed, free);
	failed = NULL;
	enabled = false;
}
