/* fuzz-cpython-code.c - fuzzes the decoder of the code object records BPF
 * copies (symbolizer/interp/cpython/cpython_code.c) and frame naming from them.
 * Input: byte 0 (bit 0 set: write a valid size and version into the
 * header, so the fuzzer reaches the fields behind them), bytes 1-4 the
 * bytecode offset to name, the rest the record, zero-padded or cut to the
 * record's size. A decoded record must name the offset with a printable
 * string holding no ';' or newline; the table must find what it kept.
 *
 * Build with libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSONDE_LIBFUZZER \
 *     -D_GNU_SOURCE -Isymbolizer/interp/cpython tests/fuzz/fuzz-cpython-code.c \
 *     symbolizer/interp/cpython/cpython_code.c symbolizer/interp/cpython/cpython_lines.c
 * Without SONDE_LIBFUZZER, fuzz-main.c replays the files named on the
 * command line (the checked-in corpus, tests/fuzz/corpus/cpython_code).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpython_code.h"
#include "interp_records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct interp_records *table;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *rec;
	struct cpython_code c;
	uint32_t offset;
	char name[2048];
	size_t n;

	if (size < 5)
		return 0;
	if (!table)
		table = cpython_codes_new();
	rec = calloc(1, CPYTHON_META_SIZE);
	if (!rec || !table)
		abort();
	memcpy(&offset, data + 1, 4);
	n = size - 5 < CPYTHON_META_SIZE ? size - 5 : CPYTHON_META_SIZE;
	memcpy(rec, data + 5, n);
	if (data[0] & 1) {
		rec[0] = CPYTHON_META_SIZE & 0xff;
		rec[1] = CPYTHON_META_SIZE >> 8;
		rec[2] = CPYTHON_META_VERSION;
	}
	if (cpython_code_decode(rec, CPYTHON_META_SIZE, &c) == 0) {
		n = cpython_code_frame_name(&c, offset, name, sizeof(name));
		if (n != strlen(name) || strchr(name, ';') || strchr(name, '\n'))
			abort();
		if (interp_records_put(table, data[0] >> 4, rec, CPYTHON_META_SIZE) != 0 ||
		    !cpython_codes_get(table, data[0] >> 4, c.addr, c.checksum))
			abort();
		if (data[0] & 2)
			interp_records_forget_pid(table, data[0] >> 4);
	} else if (interp_records_put(table, 0, rec, CPYTHON_META_SIZE) == 0) {
		abort(); /* the table must refuse what the decoder refused */
	}
	cpython_code_frame_name(NULL, offset, name, sizeof(name));
	free(rec);
	return 0;
}
