/* unwind_lib.c - a chain inside a shared library built without frame
 * pointers, so the unwinder must use this file's own .eh_frame. */
#include "unwind_lib.h"

#define KEEP __attribute__((noinline, noclone))

KEEP uint64_t unwind_lib_leaf(uint64_t n)
{
	uint64_t x = n | 1;
	for (unsigned i = 0; i < 400000; i++)
		x ^= (x << 13) ^ (x >> 7) ^ i;
	return x;
}

KEEP uint64_t unwind_lib_middle(uint64_t n)
{
	return unwind_lib_leaf(n) + 11;
}

KEEP uint64_t unwind_lib_entry(uint64_t n)
{
	return unwind_lib_middle(n) * 5;
}
