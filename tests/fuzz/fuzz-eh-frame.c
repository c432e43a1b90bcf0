/* fuzz-eh-frame.c - fuzzes the CFI parser and interpreter
 * (symbolizer/unwind/eh_frame.c) and the table builder behind it: the
 * input is one section's bytes, parsed as .eh_frame and as .debug_frame;
 * the ranges go into a builder whose table is looked up, serialised and
 * deserialised.
 *
 * Build with libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSONDE_LIBFUZZER \
 *     -D_GNU_SOURCE -Isymbolizer/unwind -Isymbolizer/elf -Ibpf \
 *     tests/fuzz/fuzz-eh-frame.c tests/fuzz/check_unwind_table.c \
 *     symbolizer/unwind/{eh_frame,table}.c -lz
 * Without SONDE_LIBFUZZER, fuzz-main.c's main() replays the files named on
 * the command line (a corpus run, or to reproduce a crash). Corpus:
 * tests/fuzz/corpus/eh_frame/ (real sections extracted with objcopy).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_unwind_table.h"
#include "eh_frame.h"
#include "unwind_table.h"

#define FUZZ_MAX_INPUT (1u << 20)

struct ctx {
	struct unwind_builder *b;
	uint64_t n;
};

static int emit(void *p, uint64_t start, uint64_t end, const struct sonde_unwind_row *row)
{
	struct ctx *c = p;

	if (start >= end || row->cfa_kind < SONDE_CFA_SP || row->cfa_kind > SONDE_CFA_UNSUPPORTED)
		abort();
	c->n++;
	/* Like the service: vaddr ranges (here clipped to 32 bits). */
	if (end <= (1ull << 32))
		unwind_builder_add(c->b, start, end, row, UNWIND_SRC_EH_FRAME);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0 || size > FUZZ_MAX_INPUT)
		return 0;
	for (int kind = 0; kind < 2; kind++) {
		struct cfi_section sec = {
			.data = data, .size = size, .addr = 0x400000, .text_addr = 0x401000,
			.data_addr = 0x600000, .kind = kind ? CFI_DEBUG_FRAME : CFI_EH_FRAME,
			.addr_size = 8,
		};
		struct ctx c = { unwind_builder_new(), 0 };
		struct cfi_stats st;
		struct unwind_table *t = NULL;
		const char *reason = NULL;
		int r;

		if (!c.b)
			return 0;
		r = cfi_parse(&sec, emit, &c, &st, &reason);
		if (r != 0 && r != -EBADMSG && r != -ENOMEM && r != -E2BIG)
			abort();
		if (r == -EBADMSG && !reason)
			abort();
		if (unwind_builder_finish(c.b, &t) == 0) {
			check_unwind_table(t);
			unwind_table_free(t);
		}
		unwind_builder_free(c.b);
	}
	return 0;
}
