/* symbolize.h - the one step from a frame of a file to names: file offset
 * -> virtual address -> symbol table entry and source frames (function,
 * file, line, the inline chain), and the name a frame is shown by when
 * that finds nothing. Folded stacks at ingest, every export and the
 * Symbols API name frames through here, so they agree.
 *
 * Runs on the rpc loop thread (the cache is used from it only).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "cache.h"
#include "fileid.h"
#include "line_index.h"
#include "registry.h"
#include "symtab.h"

/* symbolize_addr flags. */
#define SYMBOLIZE_FILE_OFFSET 1u /* addr is an offset in the file, not a vaddr */
/* addr is a return address: it points after the call, which may be the
 * last instruction of its function, so the byte before is looked up. */
#define SYMBOLIZE_RETURN 2u
#define SYMBOLIZE_LINES 4u /* source frames too, from the file's index */

/* What symbolizing needs of the core; all borrowed. */
struct symbolize_ctx {
	struct registry *reg;
	struct analysis *analysis;
	struct cache *cache;
};

/* One file's products, for a series of symbolize_addr calls. */
struct symbolize_file {
	const struct symtab *symtab;    /* borrowed; NULL: not analysed */
	const struct line_index *index; /* borrowed; NULL: looked up in cache */
	struct cache *cache;            /* borrowed; NULL: index alone is used */
	struct fileid id;               /* the file, for the cache lookup */
	bool index_looked_up;
};

struct symbolized {
	bool has_vaddr;
	uint64_t vaddr;      /* after the SYMBOLIZE_RETURN step back */
	bool has_symbol;     /* symtab_lookup() found one (symbol.name may be NULL) */
	struct symtab_lookup symbol;
	size_t n_frames;     /* SYMBOLIZE_LINES: source frames, innermost first */
	struct line_frame frames[LINE_INDEX_MAX_FRAMES];
};

/* Fills *ret for id as it stands now: its symtab if the file is analysed
 * (analysis_file_state, starting nothing), its index looked up from the
 * cache on the first symbolize_addr that needs it. What it borrows stays
 * valid until the next cache lookup or store by anyone else. */
void symbolize_file_init(struct symbolize_file *ret, const struct symbolize_ctx *ctx,
			 const struct fileid *id);
/* Symbolizes addr of f's file (flags above) into *ret; what it points to
 * is borrowed from f's symtab and index. Nothing is found without a
 * symtab, and no frames without an index. */
void symbolize_addr(struct symbolize_file *f, uint64_t addr, unsigned flags,
		    struct symbolized *ret);
/* The virtual address of addr alone (flags as symbolize_addr, without
 * LINES). Returns 0, or -ENOENT (no symtab, or no segment covers the
 * offset). */
int symbolize_vaddr(const struct symtab *t, uint64_t addr, unsigned flags, uint64_t *ret);

/* How a user frame of id at file offset `offset` is shown when only its
 * symbol, or nothing, is known: symbol demangled, or as is, or
 * basename+0xOFFSET (the registry's name of id; "[unknown]" without one)
 * when symbol is NULL or empty. Returns buf. */
const char *symbolize_frame_name(const struct registry *reg, const struct fileid *id,
				 const char *symbol, uint64_t offset, char *buf, size_t len);
