/* line_index_format.h - private to symbolizer/dwarf: the blob layout of a
 * line index, shared by line_index.c (which checks and reads it) and
 * index_build.c (which writes it).
 *
 * Blob (host byte order: the cache is local to one machine; another
 * machine's blob fails the magic/version check and is rebuilt):
 *   header
 *   n_scopes * lix_scope  functions and inlined calls; parent < own index
 *   n_segs   * lix_seg    sorted, disjoint [lo, hi) -> innermost scope
 *   n_rows   * lix_row    sorted by addr, unique; file NONE ends a range
 *   n_syms   * lix_sym    symbol table as llvm-symbolizer picks it: sorted,
 *                         one per address
 *   n_files  * u32        pool offsets of source file paths
 *   pool                  NUL-terminated strings; the last byte is NUL
 * All arrays are 8-byte aligned (struct sizes are multiples of 8, the u32
 * file array is padded).
 */
#pragma once

#include <stdint.h>

#define LIX_MAGIC 0x58494c53u /* "SLIX" */
#define LIX_NONE UINT32_MAX
#define LIX_FLAG_LINES 1u     /* has source information */

struct lix_header {
	uint32_t magic;
	uint32_t version;
	uint32_t flags;
	uint32_t n_scopes;
	uint32_t n_segs;
	uint32_t n_rows;
	uint32_t n_syms;
	uint32_t n_files;
	uint32_t pool_size;
	uint32_t zero;
};
_Static_assert(sizeof(struct lix_header) == 40, "header layout");

struct lix_scope {
	uint32_t name;      /* raw name, pool offset; LIX_NONE: unknown */
	uint32_t dname;     /* demangled (== name when not mangled) */
	uint32_t parent;    /* enclosing function of an inlined call; LIX_NONE */
	uint32_t call_file; /* where this inlined call is (files index); LIX_NONE */
	uint32_t call_line;
	uint32_t zero;
};
_Static_assert(sizeof(struct lix_scope) == 24, "scope layout");

struct lix_seg {
	uint64_t lo, hi;
	uint32_t scope;
	uint32_t zero;
};
_Static_assert(sizeof(struct lix_seg) == 24, "seg layout");

struct lix_row {
	uint64_t addr;
	uint32_t file; /* LIX_NONE: no line information from addr on */
	uint32_t line;
};
_Static_assert(sizeof(struct lix_row) == 16, "row layout");

struct lix_sym {
	uint64_t addr, size; /* size 0: up to the next symbol */
	uint32_t name, dname;
	uint32_t file; /* local symbols: the STT_FILE before them; LIX_NONE */
	uint32_t zero;
};
_Static_assert(sizeof(struct lix_sym) == 32, "sym layout");

/* Packs the parts into an index (copies them). NULL on overflow or no
 * memory. The parts must already satisfy the rules above (the result is
 * checked like any blob). */
struct line_index *line_index_pack(uint32_t flags, const struct lix_scope *scopes, uint32_t n_scopes,
				   const struct lix_seg *segs, uint32_t n_segs,
				   const struct lix_row *rows, uint32_t n_rows,
				   const struct lix_sym *syms, uint32_t n_syms, const uint32_t *files,
				   uint32_t n_files, const char *pool, uint32_t pool_size);
