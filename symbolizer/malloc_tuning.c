/* malloc_tuning.c - the symbolizer's heap on transparent huge pages.
 *
 * A first answer for a file never seen is mostly fresh memory: libelf
 * inflating compressed debug sections (8.5 MB for libc's debug file),
 * libdw's per-unit tables, the index being built. On VMs a page fault can
 * cost ~12 us (8 MB touched a page at a time: 24 ms; on huge pages:
 * 0.5 ms), which makes page faults a large part of a first answer.
 * glibc's malloc can ask for huge pages for the heap it grows
 * (MADV_HUGEPAGE, honoured when the kernel's THP mode is "madvise" or
 * "always"), but only through a tunable read at exec; hence the exec.
 * One arena: the others are mmap'd heaps that do not get the advice, and
 * the loop thread, where first answers are built, would use one of them.
 * The symbolizer's threads are few (loop, index worker, gRPC's pollers),
 * so one arena's lock costs little. Large buffers stay on the heap (up to
 * 64 MiB) rather than being mmap'd a page fault at a time.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "malloc_tuning.h"

#define MALLOC_TUNABLES \
	"glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=67108864"

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
