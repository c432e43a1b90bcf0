/* interp_loader.h - the interpreter Loader (docs/interpreters.md): looks
 * at a mapped file, by name and then by content, through the runtimes of
 * the ops table (interp.h), and returns its per-file Data: which
 * interpreter and version, and where in the file the interpreter's root
 * structure lives. The symbolizer caches the Data by file ID and sends it
 * to the sensors as an InterpreterConfig; the sensor only turns it into a
 * BPF map entry per process.
 */
#pragma once

#include <stdint.h>

#include "elf_analysis.h"
#include "file_image.h"
#include "interp.h" /* bpf/: enum sonde_interp_kind */

/* The kinds, as bpf/interp.h numbers them (named here for the cache and
 * tests). */
enum interp_kind {
	INTERP_NONE = SONDE_INTERP_NONE,
	INTERP_CPYTHON = SONDE_INTERP_CPYTHON,
	INTERP_HOTSPOT = SONDE_INTERP_HOTSPOT,
	INTERP_RUBY = SONDE_INTERP_RUBY,
};

#define INTERP_DATA_MAX 128
/* The format of every runtime's Data (struct interp_data and the bytes
 * each analyse() writes and config() reads): raise it with any change to
 * either, and a cache's rows of another format are forgotten at open and
 * analysed again (cache.c), instead of reaching a sensor as a config of
 * the wrong layout. */
#define INTERP_DATA_VERSION 4

struct interp_data {
	uint32_t kind; /* enum sonde_interp_kind */
	uint8_t major, minor;
	/* Where the runtime's root structure is, in the file-offset
	 * coordinates of the first executable load segment: its address in
	 * a process is the start of that segment's mapping - the mapping's
	 * file offset + this (the sensor knows only executable mappings; the
	 * data segment's vaddr - offset often differs from the text's by a
	 * page). */
	uint64_t runtime_offset;
	/* Bytes of the file the runtime's config() needs beyond the version
	 * (a JIT runtime's constants, read from the file by analyse()),
	 * opaque to the cache; data_len 0: none. */
	uint8_t data[INTERP_DATA_MAX];
	uint32_t data_len;
};

/* Whether path's basename looks like an interpreter some runtime of the
 * table knows (then the file is worth interp_loader_analyse()). */
int interp_loader_wants(const char *path);

/* Analyses img with the runtime that wants path. img's ELF headers and
 * .dynsym/.dynstr must be present (the symtab analysis fetched them).
 * Returns:
 *   0                *ret filled;
 *   -ENOENT          not an interpreter (name, or no root symbol);
 *   -EPROTONOSUPPORT an interpreter of a version without a layout;
 *   -EBADMSG         bad ELF or the symbol is not in the file's bytes.
 * *reason (static) says why on failure. Every read is bounded by the
 * section sizes and the image. */
int interp_loader_analyse(const struct file_image *img, const char *path, struct interp_data *ret,
			  const char **reason);

/* The ranges of img the Loader of the runtime that wants path still
 * needs before interp_loader_analyse() (a runtime reading constants from
 * the file's data, beyond the symbols the symtab analysis fetches).
 * Returns 0 (nothing more), -EAGAIN with *need filled (ranges not yet in
 * img), or -ENOENT (no runtime wants path). */
int interp_loader_need(const struct file_image *img, const char *path, struct elf_need *need);

/* For the runtimes' analyse(): the dynamic symbol `symbol` of img, as an
 * offset in the executable load segment's file coordinates (see
 * interp_data.runtime_offset). unsupported: NULL when the runtime has a
 * layout for the file's version, else the reason to fail with once the
 * symbol is found. Returns 0 with *ret_offset, -ENOENT (no such symbol,
 * no .dynsym), -EPROTONOSUPPORT (unsupported, or not x86-64 ELF) or
 * -EBADMSG (bad ELF, sections not fetched, symbol outside the load
 * segments); *reason (static) says why. */
int interp_loader_find_root(const struct file_image *img, const char *symbol,
			    const char *unsupported, uint64_t *ret_offset, const char **reason);
