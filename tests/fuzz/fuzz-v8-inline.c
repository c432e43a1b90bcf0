/* fuzz-v8-inline.c - fuzzes the inlined functions of optimised V8 frames
 * (symbolizer/interp/v8/v8_inline.c): the inlining record BPF copies from
 * an optimised Code's deoptimization data, the chain of functions a
 * position stands for, and an optimised frame split by V8's expand op
 * and named, through the interp ops table.
 * Input: byte 0 (bit 0: write a valid size and version into the record's
 * header; bits 4-7: the chain's room - 1), bytes 1-4 the position's
 * inlining id, bytes 5-8 its script offset (little-endian), the rest the
 * record, zero-padded or cut to its size. The chain has at most its room
 * of levels, the split frame at least one frame, each named.
 *
 * Without SONDE_LIBFUZZER, fuzz-main.c replays the files named on the
 * command line (the checked-in corpus, tests/fuzz/corpus/v8_inline).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interp_ops.h"
#include "v8.h"
#include "v8_inline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CODE 0x7f0000001231ull
#define PID 7

/* A Code record whose table maps every pc to (offset, inlined), and a
 * source of short lines for its script. */
static void put_code(struct interp_session *s, int32_t offset, int32_t inlined)
{
	static struct sonde_v8_code code;
	static struct sonde_v8_source src;
	uint64_t pos = (((uint64_t)((uint32_t)offset + 1u) << 1) & 0x7ffffffe) |
		       ((uint64_t)(uint16_t)((uint32_t)inlined + 1u) << 31);
	size_t n = 0;

	memset(&code, 0, sizeof(code));
	code.size = sizeof(code);
	code.version = SONDE_V8_CODE_VERSION;
	code.code = CODE;
	code.script = 0x6001;
	code.table[n++] = 1; /* code delta 0 (zigzag -1: not a statement) */
	pos <<= 1;           /* zigzag of a positive delta */
	do {
		code.table[n] = pos & 0x7f;
		pos >>= 7;
		code.table[n++] |= pos ? 0x80 : 0;
	} while (pos);
	code.table_len = (uint16_t)n;
	(void)interp_session_put_record(s, SONDE_INTERP_V8, PID, &code, sizeof(code));
	memset(&src, 0, sizeof(src));
	src.size = sizeof(src);
	src.version = SONDE_V8_SOURCE_VERSION;
	src.script = 0x6001;
	src.total = src.len = SONDE_V8_SOURCE_CHUNK;
	for (size_t i = 0; i < SONDE_V8_SOURCE_CHUNK; i++)
		src.bytes[i] = i % 16 == 15 ? '\n' : 'x';
	(void)interp_session_put_record(s, SONDE_INTERP_V8, PID, &src, sizeof(src));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t rec[V8_INLINE_SIZE] = { 0 };
	struct v8_inline_level lv[V8_INLINE_DEPTH];
	struct interp_frame f = { .kind = SONDE_INTERP_V8, .n_words = 2 }, *out = NULL;
	static struct interp_session *s; /* kept: a session's tables are big */
	struct v8_inline in;
	int32_t inlined, offset;
	size_t room, n;
	uint32_t n_out = 0;
	char name[256];
	int r;

	if (size < 9)
		return 0;
	memcpy(&inlined, data + 1, 4);
	memcpy(&offset, data + 5, 4);
	n = size - 9 < sizeof(rec) ? size - 9 : sizeof(rec);
	memcpy(rec, data + 9, n);
	if (data[0] & 1) {
		rec[0] = V8_INLINE_SIZE & 0xff;
		rec[1] = V8_INLINE_SIZE >> 8;
		rec[2] = V8_INLINE_VERSION;
	}
	room = (size_t)(data[0] >> 4) + 1;
	if (v8_inline_decode(rec, sizeof(rec), &in) == 0) {
		r = v8_inline_chain(&in, inlined, offset, lv, room);
		if (r > (int)room || r == 0)
			abort();
	}
	/* The same record through the ops table: its Code's frame split. */
	if (!s && !(s = interp_session_new()))
		abort();
	memcpy(rec + 8, &(uint64_t){ CODE }, 8);
	put_code(s, offset, inlined);
	(void)interp_session_put_record(s, SONDE_INTERP_V8, PID, rec, sizeof(rec));
	f.words[0] = SONDE_INTERP_JIT_WORD0(1, SONDE_V8_WORD0(0x4001, SONDE_V8_TIER_OPTIMIZED));
	f.words[1] = ((CODE >> 3) & 0xffffffffull) << 32;
	if (interp_session_expand(s, PID, &f, 1, &out, &n_out) < 0)
		abort();
	if (n_out < 1 || n_out > V8_INLINE_DEPTH)
		abort();
	for (uint32_t i = 0; i < n_out; i++) {
		if (SONDE_INTERP_JIT_POS(out[i].words[0]) != 1)
			abort();
		if (interp_session_frame_name(s, PID, &out[i], name, sizeof(name)) >= sizeof(name))
			abort();
	}
	free(out);
	return 0;
}
