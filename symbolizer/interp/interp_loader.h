/* interp_loader.h - the interpreter Loader (issue 5, docs/interpreters.md):
 * looks at a mapped file, by name and then by content, and returns its
 * per-file Data: which interpreter and version, and where in the file the
 * interpreter's root structure lives. The symbolizer caches the Data by
 * file ID and sends it to the sensors as an InterpreterConfig; the sensor
 * only turns it into a BPF map entry per process.
 *
 * Only CPython today: a file named python3.X or libpython3.X*.so whose
 * dynamic symbols include _PyRuntime (Debian's stripped python3.11
 * exports it too).
 */
#pragma once

#include <stdint.h>

#include "file_image.h"

enum interp_kind {
	INTERP_NONE = 0,
	INTERP_CPYTHON = 1, /* same number as sonde.v1.InterpreterConfig.Kind */
};

struct interp_data {
	uint32_t kind; /* enum interp_kind */
	uint8_t major, minor;
	/* Where _PyRuntime is, in the file-offset coordinates of the first
	 * executable load segment: its address in a process is the start of
	 * that segment's mapping - the mapping's file offset + this (the
	 * sensor knows only executable mappings; the data segment's
	 * vaddr - offset often differs from the text's by a page). */
	uint64_t runtime_offset;
};

/* Whether path's basename looks like an interpreter this loader knows
 * (then the file is worth interp_loader_analyse()). */
int interp_loader_wants(const char *path);

/* Analyses img, whose ELF headers and .dynsym/.dynstr must be present (the
 * symtab analysis fetched them). Returns:
 *   0                *ret filled;
 *   -ENOENT          not an interpreter (name, or no _PyRuntime);
 *   -EPROTONOSUPPORT an interpreter of a version without a layout;
 *   -EBADMSG         bad ELF or the symbol is not in the file's bytes.
 * *reason (static) says why on failure. Every read is bounded by the
 * section sizes and the image. */
int interp_loader_analyse(const struct file_image *img, const char *path, struct interp_data *ret,
			  const char **reason);
