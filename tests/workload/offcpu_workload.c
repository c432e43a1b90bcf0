/* offcpu_workload.c - the off-CPU test subject (tests/integration/test_offcpu.py).
 *
 * Its main thread runs SECONDS of rounds of three phases, each in a
 * function of its own: offcpu_sleep() sleeps in nanosleep(),
 * offcpu_pipe_wait() blocks in read() on a pipe until a helper process
 * answers (it writes PIPE_MS after each request), offcpu_compute() spins.
 * It measures the wall time of each phase with clock_gettime() and prints
 * "sleep_ns pipe_ns compute_ns" on standard output at the end, so the test
 * can compare sonde's off-CPU shares with the program's own.
 *
 * usage: sonde-offcpu-workload [SECONDS] (after WARMUP_MS of computing)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLEEP_MS 20
#define PIPE_MS 45
#define COMPUTE_MS 10
/* Computing only, first: sonde has the unwind tables of libc before the
 * first block (until then stacks are walked by frame pointers, which
 * skip the caller of a libc function without a frame). Not measured. */
#define WARMUP_MS 2000

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The helper: answers each request byte after PIPE_MS. */
static void helper(int req_fd, int ans_fd)
{
	struct timespec d = { 0, PIPE_MS * 1000000L };
	char c;

	prctl(PR_SET_NAME, "offcpu-helper");
	while (read(req_fd, &c, 1) == 1) {
		nanosleep(&d, NULL);
		if (write(ans_fd, &c, 1) != 1)
			break;
	}
	_exit(0);
}

void offcpu_sleep(void)
{
	struct timespec d = { 0, SLEEP_MS * 1000000L };

	nanosleep(&d, NULL);
}

void offcpu_pipe_wait(int req_fd, int ans_fd)
{
	char c = 'x';

	if (write(req_fd, &c, 1) != 1 || read(ans_fd, &c, 1) != 1) {
		perror("offcpu-workload: pipe");
		exit(1);
	}
}

volatile uint64_t offcpu_sink;

void offcpu_compute(void)
{
	uint64_t end = now_ns() + COMPUTE_MS * 1000000ull, x = offcpu_sink;

	while (now_ns() < end)
		for (int i = 0; i < 1000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	offcpu_sink = x;
}

int main(int argc, char **argv)
{
	int seconds = argc > 1 ? atoi(argv[1]) : 5;
	int req[2], ans[2];
	uint64_t t, end, spent[3] = { 0 };
	pid_t pid;

	if (pipe(req) < 0 || pipe(ans) < 0) {
		perror("offcpu-workload: pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("offcpu-workload: fork");
		return 1;
	}
	if (pid == 0) {
		close(req[1]);
		close(ans[0]);
		helper(req[0], ans[1]);
	}
	close(req[0]);
	close(ans[1]);
	for (end = now_ns() + WARMUP_MS * 1000000ull; now_ns() < end;)
		offcpu_compute();
	end = now_ns() + (uint64_t)seconds * 1000000000ull;
	while (now_ns() < end) {
		t = now_ns();
		offcpu_sleep();
		spent[0] += now_ns() - t;
		t = now_ns();
		offcpu_pipe_wait(req[1], ans[0]);
		spent[1] += now_ns() - t;
		t = now_ns();
		offcpu_compute();
		spent[2] += now_ns() - t;
	}
	close(req[1]);
	waitpid(pid, NULL, 0);
	printf("%llu %llu %llu\n", (unsigned long long)spent[0], (unsigned long long)spent[1],
	       (unsigned long long)spent[2]);
	return 0;
}
