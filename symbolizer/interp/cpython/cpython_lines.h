/* cpython_lines.h - CPython's line tables: which source line an
 * instruction of a code object is on. The table bytes come from a
 * sampled process (copied by BPF, see docs/), so they are untrusted:
 * every read is bounded, and a damaged table gives an error, not a guess.
 *
 * Two formats:
 *   3.10:        co_linetable, pairs (u8 byte-offset delta, s8 line delta;
 *                -128: no line)
 *   3.11 - 3.13: co_linetable, the location table: entries of a first
 *                byte 1CCCCLLL (code C, length L+1 code units) and
 *                continuation bytes 0xxxxxxx (line delta as a signed
 *                varint for codes 13 and 14; 0, 1, 2 for codes 10-12;
 *                0 for short forms 0-9; code 15 has no line)
 * Offsets are in bytes of bytecode (a code unit is 2 bytes).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define CPYTHON_LINES_MAX_TABLE (1u << 20) /* longer tables are refused */
#define CPYTHON_NO_LINE (-1)

enum cpython_lines_format {
	CPYTHON_LINES_310 = 1,
	CPYTHON_LINES_311 = 2, /* also 3.12 and 3.13 */
};

/* One range of bytecode and its line, as code.co_lines() yields it. */
struct cpython_line_range {
	uint32_t start, end; /* byte offsets, [start, end) */
	int32_t line;        /* CPYTHON_NO_LINE: none */
};

struct cpython_lines_iter {
	const uint8_t *p, *end;
	enum cpython_lines_format format;
	int64_t line;        /* running line */
	uint32_t addr;       /* end of the last range */
};

/* Returns 0, or -EINVAL for an unknown format or an oversized table. */
int cpython_lines_begin(struct cpython_lines_iter *it, enum cpython_lines_format format,
			const uint8_t *table, size_t len, int32_t firstlineno);
/* 1 with the next range in *r, 0 at the end, -EBADMSG for a damaged table
 * (a truncated varint or entry, a line or offset out of range). */
int cpython_lines_next(struct cpython_lines_iter *it, struct cpython_line_range *r);

/* The line of the instruction at byte offset `offset`: 0 with *ret_line
 * (CPYTHON_NO_LINE when the table says none), -ENOENT when no range
 * covers it, or the errors above. */
int cpython_addr2line(enum cpython_lines_format format, const uint8_t *table, size_t len,
		      int32_t firstlineno, uint32_t offset, int32_t *ret_line);
