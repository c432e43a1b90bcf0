/* allthreads.c - runs a function on every thread: see allthreads.h.
 *
 * One real-time signal is borrowed while allthreads_run() runs; its handler
 * runs the function and stores the result where the caller waits for it.
 * The caller handles one thread at a time, so one slot is enough.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "allthreads.h"

#define MAX_THREADS 1024
#define ANSWER_TIMEOUT_MS 2000

static struct {
	int (*fn)(void *arg);
	void *arg;
	atomic_int target; /* tid the signal was sent to */
	atomic_int result;
	atomic_bool answered;
} job;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	int tid = (int)syscall(SYS_gettid);

	(void)sig;
	(void)uc;
	/* Only our own tgkill: a stray signal from elsewhere is ignored. */
	if (si->si_code == SI_TKILL && si->si_pid == getpid() &&
	    atomic_load(&job.target) == tid) {
		atomic_store(&job.result, job.fn(job.arg));
		atomic_store(&job.answered, true);
	}
	errno = saved;
}

static bool seen(const int *tids, size_t n, int tid)
{
	for (size_t i = 0; i < n; i++)
		if (tids[i] == tid)
			return true;
	return false;
}

static bool task_exists(int tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d", tid);
	return access(path, F_OK) == 0;
}

/* Signals tid and waits for its answer. */
static int run_on(int tid)
{
	struct timespec pause = { 0, 200000 };

	atomic_store(&job.answered, false);
	atomic_store(&job.target, tid);
	if (syscall(SYS_tgkill, getpid(), tid, SIGRTMIN + 5) < 0)
		return errno == ESRCH ? 0 : -errno; /* gone: nothing to restrict */
	for (int waited_us = 0; !atomic_load(&job.answered); waited_us += 200) {
		if (waited_us >= ANSWER_TIMEOUT_MS * 1000)
			return task_exists(tid) ? -ETIMEDOUT : 0;
		nanosleep(&pause, NULL);
	}
	return atomic_load(&job.result);
}

int allthreads_run(int (*fn)(void *arg), void *arg)
{
	struct sigaction sa, old;
	int *done = NULL;
	size_t n_done = 0;
	int self = (int)syscall(SYS_gettid);
	int r, sig = SIGRTMIN + 5;
	bool found;

	if (!fn)
		return -EINVAL;
	done = calloc(MAX_THREADS, sizeof(*done));
	if (!done)
		return -ENOMEM;
	job.fn = fn;
	job.arg = arg;
	atomic_store(&job.target, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	if (sigaction(sig, &sa, &old) < 0) {
		r = -errno;
		free(done);
		return r;
	}
	done[n_done++] = self;
	r = 0;
	/* New threads inherit from their creator: a thread started by a done
	 * thread is already restricted, one started by a thread not done yet
	 * shows up in the next scan. Stop when a scan adds nothing. */
	do {
		DIR *d = opendir("/proc/self/task");
		struct dirent *de;

		if (!d) {
			r = -errno;
			break;
		}
		found = false;
		while ((de = readdir(d))) {
			int tid = atoi(de->d_name);

			if (tid <= 0 || seen(done, n_done, tid))
				continue;
			if (n_done == MAX_THREADS) {
				r = -E2BIG;
				break;
			}
			found = true;
			r = run_on(tid);
			if (r < 0)
				break;
			done[n_done++] = tid;
		}
		closedir(d);
	} while (r >= 0 && found);
	/* The caller last: fn may take away its access to /proc/self/task
	 * (Landlock), which the scans need. */
	if (r >= 0)
		r = fn(arg);
	atomic_store(&job.target, 0);
	sigaction(sig, &old, NULL);
	free(done);
	return r < 0 ? r : 0;
}
