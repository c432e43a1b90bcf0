/* fuzz-v8-baseline.c - fuzzes the lines of V8 baseline frames
 * (symbolizer/interp/v8/v8_baseline.c): the baseline Code records and the
 * bytecode lengths records BPF copies, the walk of an offset table with
 * the bytecodes, and a frame's line from the session's records.
 * Input: byte 0 (bit 0: a baseline record, else a lengths record; bit 1:
 * write a valid size and version, and for lengths a valid count, into the
 * header; bit 2: the pc is a sampled one, not a return address; bits 4-7:
 * the pid), bytes 1-8 the frame's word 1 (Code key and pc offset), byte 9
 * the bytecode count of the direct walk (4 + byte % 252), the rest the
 * record, zero-padded or cut to its size. The rest is also walked
 * directly: its first half the offset table, its second the bytecodes,
 * with lengths from the last lengths record kept (else all 1..5). A
 * bytecode offset found lies inside the bytecodes.
 *
 * Without SONDE_LIBFUZZER, fuzz-main.c replays the files named on the
 * command line (the checked-in corpus, tests/fuzz/corpus/v8_baseline).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "v8_baseline.h"
#include "v8_lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct interp_records *baselines, *sizes;
static struct v8_lines *lines;
static struct v8_sizes walk_sizes;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t rec[V8_BASELINE_SIZE] = { 0 };
	size_t rsize, n, half;
	uint64_t word1;
	uint32_t pid;
	int32_t line, bo;

	if (size < 10)
		return 0;
	if (!baselines && !(baselines = v8_baselines_new()))
		abort();
	if (!sizes && !(sizes = v8_sizes_new()))
		abort();
	if (!lines && !(lines = v8_lines_new()))
		abort();
	if (!walk_sizes.n) {
		walk_sizes.n = 255;
		for (size_t i = 0; i < V8_SIZES_MAX; i++)
			walk_sizes.len[i] = (uint8_t)(1 + i % 5);
	}
	pid = data[0] >> 4;
	memcpy(&word1, data + 1, 8);
	rsize = data[0] & 1 ? V8_BASELINE_SIZE : V8_SIZES_SIZE;
	n = size - 10 < rsize ? size - 10 : rsize;
	memcpy(rec, data + 10, n);
	if (data[0] & 2) {
		rec[0] = rsize & 0xff;
		rec[1] = rsize >> 8;
		rec[2] = data[0] & 1 ? V8_BASELINE_VERSION : V8_SIZES_VERSION;
		if (!(data[0] & 1)) {
			uint16_t count = (uint16_t)(4 + data[9] % 252);

			rec[4] = count & 0xff;
			rec[5] = count >> 8;
			rec[6] = (3 * count) & 0xff;
			rec[7] = (3 * count) >> 8;
		}
	}
	(void)interp_records_put(data[0] & 1 ? baselines : sizes, pid, rec, rsize);
	if (!(data[0] & 1)) {
		const struct v8_sizes *sz = interp_records_get(sizes, pid, 0, 0, 0);

		if (sz)
			walk_sizes = *sz;
	}
	if (v8_baseline_line(baselines, sizes, lines, pid, word1, data[0] & 4, &line) == 0 &&
	    line < 1)
		abort();
	half = (size - 10) / 2;
	if (v8_baseline_bytecode_offset(&walk_sizes, data + 10, half, data + 10 + half,
					size - 10 - half, (uint32_t)word1, data[0] & 4, &bo) == 0 &&
	    (bo < 0 || (size_t)bo >= size - 10 - half))
		abort();
	return 0;
}
