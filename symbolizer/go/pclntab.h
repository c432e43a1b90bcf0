/* pclntab.h - a bounded reader of Go's .gopclntab (Go 1.18 and later,
 * magic 0xfffffff0/0xfffffff1): function names, ranges, line tables and
 * frame sizes, which Go keeps in every binary, stripped or not (the
 * runtime needs them for tracebacks).
 *
 * Every offset in the table is checked against the section; a damaged
 * table gives -EBADMSG, and what was reported before stays reported (the
 * caller decides). Inlined calls come from each function's inline tree
 * (FUNCDATA_InlTree, indexed by PCDATA_InlTreeIndex) for Go 1.19 and
 * later, when the caller finds where the trees are (moduledata.gofunc,
 * pclntab_find_gofunc); without that, an address in inlined code gets the
 * line of the inlined code and the name of the function it was inlined
 * into. Go 1.18 and 1.19 share a table magic (0xfffffff0) but not their
 * funcdata (1.18: pointers), so only the caller can tell them apart (by
 * .go.buildinfo's version).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The table's section: PIE builds put it among the data that relocations
 * fill. */
#define PCLNTAB_SECTION ".gopclntab"
#define PCLNTAB_SECTION_PIE ".data.rel.ro.gopclntab"

#define PCLNTAB_MAX_FUNCS (4u << 20)
#define PCLNTAB_MAX_STEPS (64u << 20) /* pc/value pairs decoded, in all */

struct pclntab_sink {
	/* A function [lo, hi) named name (name_len bytes, not NUL-terminated
	 * necessarily). Return 0 or a negative errno to stop. */
	int (*func)(void *ctx, uint64_t lo, uint64_t hi, const char *name, size_t name_len);
	/* From addr on (inside the last function), file:line; file NULL when
	 * unknown. Rows of one function come in address order. NULL: only
	 * functions are read (no rows, end or inlined calls). */
	int (*row)(void *ctx, uint64_t addr, const char *file, size_t file_len, uint32_t line);
	/* The last function's rows end at addr. */
	int (*end)(void *ctx, uint64_t addr);
	/* Optional (NULL: not asked for). An inlined call in the last
	 * function: node (its index in the function's inline tree) calls
	 * name, from parent (a node reported before, or -1: the function
	 * itself) at call_file:call_line (call_file NULL when unknown).
	 * Reported after the function's rows, before the ranges that use it. */
	int (*inline_call)(void *ctx, int32_t node, int32_t parent, const char *name,
			   size_t name_len, const char *call_file, size_t call_file_len,
			   uint32_t call_line);
	/* [lo, hi), inside the last function, is code of node's callee. */
	int (*inline_range)(void *ctx, uint64_t lo, uint64_t hi, int32_t node);
	void *ctx;
};

/* Where the inline trees are: the bytes of the section that holds Go's
 * go:func.* symbols (.rodata), its address, and moduledata.gofunc. */
struct pclntab_funcdata {
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	uint64_t gofunc;
	/* A 0xfffffff0 table is Go 1.19's (else 1.18's, whose trees are not
	 * read). */
	bool go119;
};

#define PCLNTAB_MAX_INLINE_NODES 65536u  /* per function */
#define PCLNTAB_MAX_INLINE_DEPTH 64u
#define PCLNTAB_MAX_INLINE_STEPS (64u << 20) /* pc/value pairs, in all */

/* Reads the table (data, size: the section's bytes). text_addr is the
 * .text section's address, used when the header's textStart is 0 (PIE:
 * the field is relocated at run time). Returns 0, -EBADMSG (not a table
 * we read, or damaged), -E2BIG over a cap, or what a sink returned. */
int pclntab_read(const uint8_t *data, size_t size, uint64_t text_addr,
		 const struct pclntab_sink *sink);
/* Like pclntab_read, and reports inlined calls through the sink when fd
 * (may be NULL) says where the inline trees are. A damaged inline tree
 * loses the rest of that function's inlined calls (past the step cap, all
 * later functions' too), never rows. */
int pclntab_read_inlined(const uint8_t *data, size_t size, uint64_t text_addr,
			 const struct pclntab_funcdata *fd, const struct pclntab_sink *sink);

/* Go functions' frames, for unwinding (Go binaries have no .eh_frame,
 * and small leaf functions no frame pointer). */
#define PCLNTAB_FUNC_TOPFRAME 1u /* the outermost frame of its stack */
#define PCLNTAB_FUNC_SPWRITE 2u  /* writes SP: its SP offsets are unreliable */
/* runtime.systemstack, which runs a function on the thread's g0 stack
 * after saving the goroutine's SP, PC and BP in g.sched (also SPWRITE). */
#define PCLNTAB_FUNC_SYSTEMSTACK 4u
/* runtime.asmcgocall, which calls C on the g0 stack, keeping the
 * goroutine's g there (also SPWRITE). */
#define PCLNTAB_FUNC_ASMCGOCALL 8u

struct pclntab_frame_sink {
	/* In [lo, hi), inside a function with flags (PCLNTAB_FUNC_*), SP is
	 * sp_delta bytes below its value at the function's entry (where the
	 * return address is at SP). Return 0 or a negative errno to stop. */
	int (*frame)(void *ctx, uint64_t lo, uint64_t hi, int32_t sp_delta, unsigned flags);
	void *ctx;
};

/* Reads every function's SP table (pcsp), in function order. A function
 * without one, or whose table is damaged, reports nothing (from the
 * damage on). Returns 0, -EBADMSG, -E2BIG over a cap, or what the sink
 * returned. */
int pclntab_read_frames(const uint8_t *data, size_t size, uint64_t text_addr,
			const struct pclntab_frame_sink *sink);

/* Finds a table inside other data (a cgo PIE linked by the system linker
 * has no section of its own for it: it lies in .data.rel.ro): the first
 * 8-aligned offset of data that holds a header whose offsets fit and whose
 * first function is consistent. Its header's text start is then 0 in the
 * file (a relocation fills it). Returns 0 with *ret_off, or -ENOENT. */
int pclntab_locate(const uint8_t *data, size_t size, size_t *ret_off);

/* Finds moduledata.gofunc in data (size bytes of the section that holds
 * runtime.firstmoduledata, .noptrdata), given the table (tab, tab_size)
 * and its address: moduledata starts with a pointer to the table and then
 * its funcnametab slice, which must agree with the table's header. go119:
 * as in struct pclntab_funcdata. Returns 0 with *ret, or -ENOENT (Go
 * 1.18, or not found). */
int pclntab_find_gofunc(const uint8_t *tab, size_t tab_size, uint64_t tab_addr,
			const uint8_t *data, size_t size, bool go119, uint64_t *ret);
