/* workload.c - the profiling test subject: known hot functions on known
 * call chains, built with frame pointers and without inlining so that both
 * sonde and perf see the same stacks.
 *
 *   main thread:  main;run_main_thread;chain_a;a_middle;leaf_a_compute
 *                 main;run_main_thread;chain_c;work_lib_entry;work_lib_leaf  (libsonde_work.so)
 *   second thread: thread_b;b_middle;leaf_b_hash
 *
 * The main thread alternates between chains a and c by a fixed amount of
 * work, so the shares do not depend on the sampling tool.
 *
 * usage: sonde-workload SECONDS [EXIT_STATUS]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "work_lib.h"

#define NOINLINE __attribute__((noinline))

static atomic_int stop;
static volatile uint64_t sink;

NOINLINE static uint64_t leaf_a_compute(uint64_t n)
{
	uint64_t x = n;
	for (uint64_t i = 0; i < 2000000; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

NOINLINE static uint64_t a_middle(uint64_t n)
{
	return leaf_a_compute(n) + 1;
}

NOINLINE static uint64_t chain_a(uint64_t n)
{
	return a_middle(n) ^ 3;
}

NOINLINE static uint64_t chain_c(uint64_t n)
{
	return work_lib_entry(n) + 7;
}

NOINLINE static uint64_t leaf_b_hash(uint64_t n)
{
	uint64_t h = 1469598103934665603ULL ^ n;
	for (uint64_t i = 0; i < 2000000; i++) {
		h ^= i & 0xff;
		h *= 1099511628211ULL;
	}
	return h;
}

NOINLINE static uint64_t b_middle(uint64_t n)
{
	return leaf_b_hash(n) - 1;
}

NOINLINE static void *thread_b(void *arg)
{
	uint64_t n = 0;
	while (!atomic_load(&stop))
		sink = b_middle(n++);
	return arg;
}

NOINLINE static void run_main_thread(void)
{
	uint64_t n = 0;
	while (!atomic_load(&stop)) {
		/* 2 units of chain a for every unit of chain c */
		sink = chain_a(n++);
		sink = chain_a(n++);
		sink = chain_c(n++);
	}
}

static void *timer_thread(void *arg)
{
	struct timespec ts = { .tv_sec = *(int *)arg };
	nanosleep(&ts, NULL);
	atomic_store(&stop, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t tb, tt;
	int seconds, status = 0;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s SECONDS [EXIT_STATUS]\n", argv[0]);
		return 2;
	}
	seconds = atoi(argv[1]);
	if (argc == 3)
		status = atoi(argv[2]);
	if (pthread_create(&tb, NULL, thread_b, NULL) != 0 ||
	    pthread_create(&tt, NULL, timer_thread, &seconds) != 0) {
		perror("pthread_create");
		return 1;
	}
	pthread_setname_np(tb, "workload-b");
	run_main_thread();
	pthread_join(tb, NULL);
	pthread_join(tt, NULL);
	return status;
}
