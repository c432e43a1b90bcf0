/* vdso.h - the kernel's vDSO as a file of the registry (fileids.h), so
 * that the symbolizer names its functions (__vdso_clock_gettime, ...) and
 * compiles its .eh_frame like any mapped file's: without it, every sample
 * taken in clock_gettime or gettimeofday had an unnamed leaf and a
 * frame-pointer guess for its caller.
 *
 * The bytes are the sensor's own vDSO, copied at start-up into a sealed
 * memfd: the kernel maps the same image into every 64-bit process, and
 * nothing is read from a target (ARCHITECTURE.md, rule 1).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fileids.h"

/* Registers the sensor's vDSO: 0 with a reference in *ret_entry (held for
 * the sensor's life) and its registration, or a negative errno (no vDSO,
 * or memfd/seal refused). */
int vdso_register(struct fileids *f, struct fileid_entry **ret_entry, struct fileid_info *ret_info);

/* True if a target's mapping at [start, end) named path is the same vDSO:
 * "[vdso]", as big as ours, and above 4 GiB (a 32-bit process's vDSO is
 * another image, and lies below). */
bool vdso_matches(const struct fileid_info *vdso, uint64_t start, uint64_t end, uint64_t offset,
		  const char *path);
