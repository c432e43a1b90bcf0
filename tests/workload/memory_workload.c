/* memory_workload.c - the memory profile's test subject
 * (tests/integration/test_memory.py): after a pause (time for the sensor
 * to read its mappings), grows its heap with sbrk() in grow_heap() and
 * maps anonymous memory in map_and_touch(), a chunk of each in turn,
 * writes one byte into every page of both (first touches), and prints
 * how many bytes each grew by:
 *
 *   heap_bytes=N
 *   map_bytes=N
 *
 * Usage: sonde-memory-workload [MIB_EACH [PAUSE_MS]] (default 128 MiB,
 * 1000 ms). Nothing is freed: the process grows by 2 x MIB_EACH MiB. */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (4u << 20)

/* Writes a byte into each page of [p, p + len). */
static void touch_pages(volatile char *p, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);

	for (size_t off = 0; off < len; off += (size_t)page)
		p[off] = 1;
}

/* Grows the heap by len bytes and touches them. Returns len or 0. */
static size_t grow_heap(size_t len)
{
	char *p = sbrk((intptr_t)len);

	if (p == (void *)-1)
		return 0;
	touch_pages(p, len);
	return len;
}

/* Maps len private anonymous bytes, without transparent huge pages (one
 * fault must be one page, as in docs/memory.md), and touches them.
 * Returns len or 0. */
static size_t map_and_touch(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return 0;
	madvise(p, len, MADV_NOHUGEPAGE);
	touch_pages(p, len);
	return len;
}

int main(int argc, char **argv)
{
	unsigned long mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 128;
	unsigned long pause_ms = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000;
	struct timespec pause = { pause_ms / 1000, (long)(pause_ms % 1000) * 1000000 };
	size_t heap = 0, map = 0;

	nanosleep(&pause, NULL);
	for (size_t done = 0; done < (size_t)mib << 20; done += CHUNK) {
		heap += grow_heap(CHUNK);
		map += map_and_touch(CHUNK);
	}
	printf("heap_bytes=%zu\nmap_bytes=%zu\n", heap, map);
	return heap && map ? 0 : 1;
}
