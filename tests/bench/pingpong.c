/* pingpong.c - two processes pass a byte back and forth over two pipes
 * for SECONDS and print the round trips per second: every round trip is
 * two blocking reads, two wakeups and two context switches per side.
 * Built by tests/bench/offcpu_overhead.py. usage: pingpong SECONDS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5, start, end;
	int a[2], b[2];
	uint64_t n = 0;
	char c = 'x';
	pid_t pid;

	if (pipe(a) < 0 || pipe(b) < 0)
		return 1;
	pid = fork();
	if (pid == 0) {
		while (read(a[0], &c, 1) == 1)
			if (write(b[1], &c, 1) != 1)
				break;
		_exit(0);
	}
	close(a[0]);
	close(b[1]);
	start = now();
	end = start + seconds;
	while (now() < end) {
		for (int i = 0; i < 100; i++, n++)
			if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
				return 1;
	}
	printf("%.0f\n", (double)n / (now() - start));
	close(a[1]);
	waitpid(pid, NULL, 0);
	return 0;
}
