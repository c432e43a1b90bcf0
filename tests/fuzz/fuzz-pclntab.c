/* fuzz-pclntab.c - fuzzes the Go function table reader
 * (symbolizer/go/pclntab.c) on the bytes of a .gopclntab section, and
 * checks what it reports: functions with lo < hi, rows inside the
 * function and in address order, file names of the stated length. A
 * second pass reads inline trees too, from the same bytes (moduledata.gofunc
 * at their start): inlined calls whose parents came first, ranges inside
 * the function naming reported calls. A third reads the SP tables
 * (frames for unwinding): non-empty ranges and known flags; and the table
 * is looked for as inside other data (pclntab_locate), and as a cgo PIE
 * holds it, with the same bytes read as its relocations (relative.h).
 *
 * Build with libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSONDE_LIBFUZZER \
 *     -D_GNU_SOURCE -Isymbolizer/go tests/fuzz/fuzz-pclntab.c symbolizer/go/{pclntab,relative}.c
 * Without SONDE_LIBFUZZER, fuzz-main.c's main() replays the files named on
 * the command line (the checked-in corpus under meson, or a crash to
 * reproduce).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pclntab.h"
#include "relative.h"

#define FUZZ_MAX_INPUT (4u << 20)

struct check {
	uint64_t lo, hi, last;
	size_t funcs, rows;
	int in_func;
	uint32_t gen, *seen; /* seen[node] == gen: reported in this function */
};

static int on_func(void *ctx, uint64_t lo, uint64_t hi, const char *name, size_t len)
{
	struct check *c = ctx;

	if (lo >= hi || len == 0 || memchr(name, 0, len))
		abort();
	c->lo = lo;
	c->hi = hi;
	c->last = lo;
	c->in_func = 1;
	c->funcs++;
	c->gen++;
	return 0;
}

static int on_row(void *ctx, uint64_t addr, const char *file, size_t len, uint32_t line)
{
	struct check *c = ctx;

	if (!c->in_func || addr < c->last || addr < c->lo || addr >= c->hi)
		abort();
	if (file && memchr(file, 0, len))
		abort();
	(void)line;
	c->last = addr;
	c->rows++;
	return 0;
}

static int on_end(void *ctx, uint64_t addr)
{
	struct check *c = ctx;

	if (addr != c->hi)
		abort();
	c->in_func = 0;
	return 0;
}

static int on_inline_call(void *ctx, int32_t node, int32_t parent, const char *name,
			  size_t name_len, const char *file, size_t file_len, uint32_t line)
{
	struct check *c = ctx;

	if (node < 0 || (uint32_t)node >= PCLNTAB_MAX_INLINE_NODES ||
	    c->seen[node] == c->gen)
		abort();
	if (parent != -1 && (parent < 0 || (uint32_t)parent >= PCLNTAB_MAX_INLINE_NODES ||
			     c->seen[parent] != c->gen))
		abort();
	if (name_len == 0 || memchr(name, 0, name_len) || (file && memchr(file, 0, file_len)))
		abort();
	(void)line;
	c->seen[node] = c->gen;
	return 0;
}

static int on_inline_range(void *ctx, uint64_t lo, uint64_t hi, int32_t node)
{
	struct check *c = ctx;

	if (lo >= hi || lo < c->lo || hi > c->hi || node < 0 ||
	    (uint32_t)node >= PCLNTAB_MAX_INLINE_NODES || c->seen[node] != c->gen)
		abort();
	return 0;
}

static int on_frame(void *ctx, uint64_t lo, uint64_t hi, int32_t sp_delta, unsigned flags)
{
	if (lo >= hi ||
	    (flags & ~(PCLNTAB_FUNC_TOPFRAME | PCLNTAB_FUNC_SPWRITE | PCLNTAB_FUNC_SYSTEMSTACK |
		       PCLNTAB_FUNC_ASMCGOCALL)))
		abort();
	/* one function has one name */
	if ((flags & PCLNTAB_FUNC_SYSTEMSTACK) && (flags & PCLNTAB_FUNC_ASMCGOCALL))
		abort();
	(void)ctx;
	(void)sp_delta;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct check c = { 0 };
	struct pclntab_sink sink = { .func = on_func, .row = on_row, .end = on_end, .ctx = &c };
	struct pclntab_funcdata fd;
	uint8_t *copy;
	int r;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	/* A copy of exactly size bytes, so reads past the end are caught. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	r = pclntab_read(copy, size, 0x401000, &sink);
	if (r != 0 && r != -EBADMSG && r != -E2BIG)
		abort();
	/* The trees in the same bytes: gofunc at their start. */
	fd = (struct pclntab_funcdata){ .data = copy, .size = size, .addr = 0x800000,
					.gofunc = 0x800000, .go119 = true };
	memset(&c, 0, sizeof(c));
	c.seen = calloc(PCLNTAB_MAX_INLINE_NODES, sizeof(*c.seen));
	if (c.seen) {
		sink.inline_call = on_inline_call;
		sink.inline_range = on_inline_range;
		r = pclntab_read_inlined(copy, size, 0x401000, &fd, &sink);
		if (r != 0 && r != -EBADMSG && r != -E2BIG && r != -ENOMEM)
			abort();
		free(c.seen);
	}
	{
		struct pclntab_frame_sink fs = { on_frame, NULL };

		size_t off;

		r = pclntab_read_frames(copy, size, 0x401000, &fs);
		if (r != 0 && r != -EBADMSG && r != -E2BIG)
			abort();
		/* Found inside other data, as in a cgo PIE's .data.rel.ro. */
		if (pclntab_locate(copy, size, &off) == 0) {
			if (off % 8 || off >= size)
				abort();
			r = pclntab_read_frames(copy + off, size - off, 0x401000, &fs);
			if (r != 0 && r != -EBADMSG && r != -E2BIG)
				abort();
		}
	}
	{
		uint64_t text;
		size_t off;
		uint8_t *moved = malloc(size ? size : 1);

		/* The input as data and as its own .rela.dyn. */
		if (pclntab_locate_relocated(copy, size, 0x2000, copy, size, &off, &text) == 0 &&
		    (off % 8 || off >= size))
			abort();
		if (moved) {
			memcpy(moved, copy, size);
			relative_apply(moved, size, 0x2000, copy, size);
			free(moved);
		}
	}
	free(copy);
	return 0;
}
