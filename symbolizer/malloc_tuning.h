/* malloc_tuning.h - the symbolizer's malloc settings (one arena, large buffers on the heap). */
#pragma once

#include <stdbool.h>

/* Re-executes the program (the file /proc/self/exe names, same argv) with GLIBC_TUNABLES
 * set to MALLOC_TUNABLES, unless GLIBC_TUNABLES is set already (the
 * operator's own choice, or this exec done). Returns only if it did not
 * exec; call it first in main, before any thread, descriptor or output. */
void malloc_tuning_apply(char **argv);

/* Whether this process runs with MALLOC_TUNABLES. */
bool malloc_tuning_active(void);
