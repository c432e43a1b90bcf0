/* line_index.h - the per-file source index: for any virtual address, the
 * chain of (function, file, line) frames, innermost inlined call first,
 * as llvm-symbolizer reports it.
 *
 * Built once per file ID (from DWARF, or from a Go .gopclntab) by
 * index_build.c, stored in the cache as one blob, and used read-only: a
 * lookup is a few binary searches over flat arrays, with no DWARF left to
 * walk. The index is immutable and owns one buffer; deserialising copies
 * the blob and checks every offset, index and order once, since the cache
 * file is outside input.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bump when the builder would produce a different index from the same
 * file: cached blobs of another version are dropped and rebuilt. */
#define LINE_INDEX_VERSION 3 /* 2: LLVM-style demangling, first unit wins; 3: DWZ alternates */
#define LINE_INDEX_MAX_FRAMES 64 /* inline depth reported per address */

struct line_index;

struct line_frame {
	const char *function; /* demangled if it was mangled; NULL: unknown */
	const char *raw;      /* the name as the file has it; NULL: unknown */
	const char *file;     /* NULL: unknown */
	uint32_t line;        /* 0: unknown */
};

/* Frames for vaddr, innermost first, into frames[0..max). The outermost
 * frame takes the name of the covering symbol-table entry when there is
 * one (as llvm-symbolizer does: the symbol table names the real function,
 * e.g. foo.cold, where DWARF names its source). Returns how many frames
 * (0: nothing known about vaddr); at most max. Strings are borrowed from
 * the index. */
size_t line_index_lookup(const struct line_index *ix, uint64_t vaddr, struct line_frame *frames,
			 size_t max);

/* Whether the index has any source information (DWARF or pclntab), as
 * opposed to symbol names only. */
bool line_index_has_lines(const struct line_index *ix);
/* Bytes the index holds (for the memory cache's accounting). */
size_t line_index_bytes(const struct line_index *ix);

/* The blob: a malloc'd copy (caller frees) or NULL. */
void *line_index_serialize(const struct line_index *ix, size_t *ret_size);
/* NULL on any inconsistency or another LINE_INDEX_VERSION. */
struct line_index *line_index_deserialize(const void *blob, size_t size);
void line_index_free(struct line_index *ix);

/* ---- building (index_build.c) ---- */

/* Caps on what one file may make us hold (a hostile file hits them and
 * gets -E2BIG, never unbounded memory or time). */
#define LINE_INDEX_MAX_ROWS (64u << 20)
#define LINE_INDEX_MAX_SCOPES (16u << 20)
#define LINE_INDEX_MAX_DIES (256u << 20) /* DIEs visited */
#define LINE_INDEX_MAX_DEPTH 512         /* DIE nesting */
#define LINE_INDEX_MAX_POOL (1u << 30)

/* Builds the index of an ELF file of file_size bytes at file (borrowed;
 * libelf may rewrite section headers of compressed sections in place, so
 * both buffers must be private and writable, e.g. a MAP_PRIVATE mapping). Symbol names come from file's .symtab (else .dynsym); source
 * information from debug (a separate debug file, may be NULL) or else from
 * file itself (DWARF, or .gopclntab for Go), unless flags has
 * LINE_INDEX_SYMBOLS_ONLY (file is a sparse image without them); alt (may be NULL) is
 * the DWZ alternate file that the DWARF's .gnu_debugaltlink names, used only
 * when its build ID matches the link. A file with neither gets an
 * index of symbol names only. Returns 0 and *ret (owned), -EBADMSG (not
 * ELF; *reason says why), -E2BIG over a cap, or -ENOMEM. Malformed
 * DWARF units are skipped, never trusted. */
#define LINE_INDEX_SYMBOLS_ONLY 1u /* file's debug sections are not there */
int line_index_build(void *file, size_t file_size, void *debug, size_t debug_size, void *alt,
		     size_t alt_size, unsigned flags, struct line_index **ret, const char **reason);
/* As line_index_build, but reads only the DWARF units whose address
 * ranges hold one of the n_addrs addrs (any order), and at most max_dies
 * DIEs (-E2BIG past that): an index that answers those addresses as the
 * whole one does, built in a fraction of its time, for a first answer
 * while the whole index is being built. *ret_units (may be NULL): the
 * units read. A Go file without DWARF is read whole (its table is cheap). */
int line_index_build_for(void *file, size_t file_size, void *debug, size_t debug_size, void *alt,
			 size_t alt_size, unsigned flags, const uint64_t *addrs, size_t n_addrs,
			 size_t max_dies, size_t *ret_units, struct line_index **ret,
			 const char **reason);
