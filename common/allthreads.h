/* allthreads.h - run a small function on every thread of this process.
 *
 * Capabilities, the capability bounding set, no_new_privs and Landlock
 * domains are per thread, and gRPC starts its threads in grpc_init(), long
 * before a program knows its sandbox. seccomp has SECCOMP_FILTER_FLAG_TSYNC
 * (and it sets no_new_privs on every thread it syncs); the others do not
 * (Landlock's LANDLOCK_RESTRICT_SELF_TSYNC is newer than kernel 6.18).
 * So this module signals each thread, like glibc does for setuid(), and
 * has it run the function itself.
 */
#pragma once

/* Runs fn(arg) on the calling thread and on every other thread of the
 * process, including threads started while this runs (it rescans
 * /proc/self/task until a scan finds none it has not done). fn runs in a
 * signal handler on the other threads: it may only make raw system calls
 * and write to its own stack, and it returns 0 or a negative errno.
 * Returns 0 if fn returned 0 everywhere, else the first failure, or
 * -ETIMEDOUT if a thread did not answer within 2 s (a thread that blocks
 * every signal); the caller must then treat the process as unconfined.
 * Not reentrant; the caller must be the only thread that calls it. */
int allthreads_run(int (*fn)(void *arg), void *arg);
