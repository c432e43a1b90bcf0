/* fuzz-v8-lines.c - fuzzes V8's line numbers (symbolizer/interp/v8/
 * v8_lines.c): the source position table decoder, the Code and script
 * source records BPF copies, and the line of a frame from them.
 * Input: byte 0 (bit 0: a Code record, else a source chunk; bit 1: write a
 * valid size and version into the header; bits 4-7: the pid), bytes 1-8
 * the frame's word 1 (code key and pc offset), the rest the record,
 * zero-padded or cut to its size; the whole input after byte 8 is also
 * decoded as a position table. A line, when found, is positive.
 *
 * Without SONDE_LIBFUZZER, fuzz-main.c replays the files named on the
 * command line (the checked-in corpus, tests/fuzz/corpus/v8_lines).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "v8_lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct v8_lines *table;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t rec[V8_SOURCE_SIZE > V8_CODE_SIZE ? V8_SOURCE_SIZE : V8_CODE_SIZE] = { 0 };
	size_t rsize, n;
	uint64_t word1;
	int32_t off, inl, line;

	if (size < 9)
		return 0;
	if (!table && !(table = v8_lines_new()))
		abort();
	memcpy(&word1, data + 1, 8);
	rsize = data[0] & 1 ? V8_CODE_SIZE : V8_SOURCE_SIZE;
	n = size - 9 < rsize ? size - 9 : rsize;
	memcpy(rec, data + 9, n);
	if (data[0] & 2) {
		rec[0] = rsize & 0xff;
		rec[1] = rsize >> 8;
		rec[2] = data[0] & 1 ? V8_CODE_VERSION : V8_SOURCE_VERSION;
	}
	(void)v8_lines_put(table, data[0] >> 4, rec, rsize);
	if (v8_lines_line(table, data[0] >> 4, word1, data[0] & 4, &line) == 0 && line < 1)
		abort();
	if (v8_table_lookup(data + 9, size - 9, (uint32_t)word1, &off, &inl) == 0 && off < 0)
		abort();
	if (v8_source_line(data + 9, size - 9, (uint32_t)word1 & 0xffff, &line) == 0 && line < 1)
		abort();
	return 0;
}
