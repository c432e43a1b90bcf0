/* pclntab.h - a bounded reader of Go's .gopclntab (Go 1.18 and later,
 * magic 0xfffffff0/0xfffffff1): function names, ranges and line tables,
 * which Go keeps in every binary, stripped or not (the runtime needs them
 * for tracebacks).
 *
 * Every offset in the table is checked against the section; a damaged
 * table gives -EBADMSG, and what was reported before stays reported (the
 * caller decides). Inlined frames (the FUNCDATA inline tree) are not read
 * yet: an address in inlined code gets the line of the inlined code and
 * the name of the function it was inlined into.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PCLNTAB_MAX_FUNCS (4u << 20)
#define PCLNTAB_MAX_STEPS (64u << 20) /* pc/value pairs decoded, in all */

struct pclntab_sink {
	/* A function [lo, hi) named name (name_len bytes, not NUL-terminated
	 * necessarily). Return 0 or a negative errno to stop. */
	int (*func)(void *ctx, uint64_t lo, uint64_t hi, const char *name, size_t name_len);
	/* From addr on (inside the last function), file:line; file NULL when
	 * unknown. Rows of one function come in address order. */
	int (*row)(void *ctx, uint64_t addr, const char *file, size_t file_len, uint32_t line);
	/* The last function's rows end at addr. */
	int (*end)(void *ctx, uint64_t addr);
	void *ctx;
};

/* Reads the table (data, size: the section's bytes). text_addr is the
 * .text section's address, used when the header's textStart is 0 (PIE:
 * the field is relocated at run time). Returns 0, -EBADMSG (not a table
 * we read, or damaged), -E2BIG over a cap, or what a sink returned. */
int pclntab_read(const uint8_t *data, size_t size, uint64_t text_addr,
		 const struct pclntab_sink *sink);
