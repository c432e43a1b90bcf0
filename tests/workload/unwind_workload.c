/* unwind_workload.c - the test subject for unwinding without frame
 * pointers: built -O2 -fomit-frame-pointer, with a call chain through a
 * shared library, a recursion 50 deep and a second thread.
 *
 *   main;run_main;chain_lib;unwind_lib_entry;unwind_lib_middle;unwind_lib_leaf
 *   main;run_main;recurse x50;recurse_leaf
 *   thread_y;y_middle;y_leaf
 *
 * noclone keeps gcc from renaming functions (foo.constprop.0); the build
 * adds -fno-optimize-sibling-calls so the recursion stays a recursion.
 *
 * usage: sonde-unwind-workload MILLISECONDS
 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "unwind_lib.h"

#define KEEP __attribute__((noinline, noclone))
#define DEPTH 50

static atomic_int stop;
static volatile uint64_t sink;

KEEP static uint64_t spin(uint64_t x, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		x = x * 2862933555777941757ULL + 3037000493ULL;
	return x;
}

KEEP static uint64_t recurse_leaf(uint64_t n)
{
	return spin(n, 400000) ^ n;
}

KEEP static uint64_t recurse(unsigned depth, uint64_t n)
{
	if (depth == 0)
		return recurse_leaf(n);
	return recurse(depth - 1, n + depth) * 3 + 1;
}

KEEP static uint64_t chain_lib(uint64_t n)
{
	return unwind_lib_entry(n) + 5;
}

KEEP static uint64_t y_leaf(uint64_t n)
{
	return spin(n, 400000) + 1;
}

KEEP static uint64_t y_middle(uint64_t n)
{
	return y_leaf(n) * 7;
}

KEEP static void *thread_y(void *arg)
{
	uint64_t n = 0;
	while (!atomic_load(&stop))
		sink = y_middle(n++);
	return arg;
}

/* The two chains in a pseudo-random order, half each: strictly
 * alternating, their period could lock in phase with a sampling timer and
 * bias one tool's shares by several points. */
KEEP static void run_main(void)
{
	uint64_t n = 0, r = 88172645463325252ULL;

	while (!atomic_load(&stop)) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		if (r & 1)
			sink = chain_lib(n++);
		else
			sink = recurse(DEPTH, n++);
	}
}

static void *timer_thread(void *arg)
{
	long ms = *(long *)arg;
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	atomic_store(&stop, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t ty, tt;
	long ms;

	if (argc != 2) {
		fprintf(stderr, "usage: %s MILLISECONDS\n", argv[0]);
		return 2;
	}
	ms = atol(argv[1]);
	if (pthread_create(&ty, NULL, thread_y, NULL) != 0 ||
	    pthread_create(&tt, NULL, timer_thread, &ms) != 0) {
		perror("pthread_create");
		return 1;
	}
	run_main();
	pthread_join(ty, NULL);
	pthread_join(tt, NULL);
	return 0;
}
