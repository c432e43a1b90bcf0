/* malloc_tuning.c - the symbolizer's malloc settings, through glibc's
 * tunables (read at exec; hence the exec).
 *
 * One arena: the symbolizer's threads are few (loop, index worker, gRPC's
 * pollers), so one arena's lock costs little, and every other arena would
 * be a heap of its own with its own free memory (RSS that a fleet
 * symbolizer with hundreds of sensors pays for nothing). Large buffers
 * stay on the heap (up to 64 MiB), where they are reused, rather than
 * being mmap'd and faulted in a page at a time on every first answer.
 *
 * The heap is not advised for transparent huge pages
 * (glibc.malloc.hugetlb): on huge pages a first answer's fresh memory
 * would fault in 2 MiB at a time, faster on VMs, but every 2 MiB range
 * the heap touches would be resident whole, including the parts never
 * written of gRPC's per-connection read buffers (8 or 64 KiB slices
 * sized by past reads): about 50 MiB at 500 sensors, which issue 33's
 * RSS bound cannot spare (docs/benchmarks.md, "Scale").
 */
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "malloc_tuning.h"

#define MALLOC_TUNABLES "glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=67108864"

void malloc_tuning_apply(char **argv)
{
	char self[PATH_MAX];
	ssize_t n;

	if (getenv("GLIBC_TUNABLES"))
		return;
	/* The file's own path, not /proc/self/exe: the process is named
	 * after what was executed ("exe" otherwise, in ps and top). A
	 * binary deleted since (an upgrade) reads "... (deleted)" and the
	 * exec fails. */
	n = readlink("/proc/self/exe", self, sizeof(self));
	if (n <= 0 || (size_t)n >= sizeof(self))
		return;
	self[n] = '\0';
	if (setenv("GLIBC_TUNABLES", MALLOC_TUNABLES, 1) < 0)
		return;
	execv(self, argv);
	/* No exec: run as we are. */
	unsetenv("GLIBC_TUNABLES");
}

bool malloc_tuning_active(void)
{
	const char *t = getenv("GLIBC_TUNABLES");

	/* As a prefix: glibc's parser may end the string after the first
	 * tunable in place (/proc/PID/environ shows it so here). */
	return t && strncmp(t, MALLOC_TUNABLES, strlen(t)) == 0 && *t;
}
