/* work_lib.c - a hot call chain inside a shared library, so that the
 * profile test covers file IDs and offsets of a DSO, not only the main
 * executable. */
#include "work_lib.h"

#define NOINLINE __attribute__((noinline))

NOINLINE uint64_t work_lib_leaf(uint64_t n)
{
	uint64_t x = n | 1;
	for (uint64_t i = 0; i < 2000000; i++)
		x ^= (x << 7) ^ (x >> 9) ^ i;
	return x;
}

NOINLINE uint64_t work_lib_entry(uint64_t n)
{
	return work_lib_leaf(n) * 3;
}
