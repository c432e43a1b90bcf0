/* v8_baseline.h - line numbers of V8's baseline (Sparkplug) frames
 * (docs/interpreters.md, "V8"): the decoders of the two records BPF copies
 * for them (bpf/v8.h struct sonde_v8_baseline: a baseline Code's bytecode
 * offset table with its BytecodeArray's bytecodes; struct sonde_v8_sizes:
 * the process's bytecode lengths, V8's kBytecodeSizes), the walk from a pc
 * offset to the bytecode it is in, and a session's tables of them.
 *
 * The offset table is one unsigned VLQ (7 bits a byte, low first, the top
 * bit set on all but the last) of machine code per bytecode, after one for
 * the prologue; a bytecode's length is its table entry at the operand
 * scale its prefix sets (Wide, ExtraWide and their debug-break forms,
 * bytecodes 0-3, since V8 5.x). The line of that bytecode is then the
 * BytecodeArray's own position table's (v8_lines.h), as for an
 * interpreted frame.
 *
 * Records come from sampled processes through the sensor: untrusted. The
 * decoders check size, version and every length against its slot; the
 * walk stops at the end of what was copied, at a length of 0 or a
 * bytecode past the table (-EBADMSG), never reads past a buffer.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The records' layouts, little-endian, fixed sizes. */
#define V8_BASELINE_VERSION 1
#define V8_BASELINE_TABLE 512
#define V8_BASELINE_BYTECODES 1504
#define V8_BASELINE_HEADER 32
#define V8_BASELINE_SIZE (V8_BASELINE_HEADER + V8_BASELINE_TABLE + V8_BASELINE_BYTECODES)
#define V8_SIZES_VERSION 1
#define V8_SIZES_MAX 768
#define V8_SIZES_HEADER 8
#define V8_SIZES_SIZE (V8_SIZES_HEADER + V8_SIZES_MAX)

/* A process's bytecode lengths: len[scale * n + bytecode], the scale 0, 1
 * or 2 (operands of 1, 2 or 4 bytes), each length counting the bytecode's
 * own byte. */
struct v8_sizes {
	uint16_t n; /* bytecodes: 4 .. 255 */
	uint8_t len[V8_SIZES_MAX];
};

/* One baseline Code's record, decoded. */
struct v8_baseline {
	uint32_t key;    /* the Code's address >> 3, low 32 bits (a frame's word 1) */
	uint32_t ba_key; /* its BytecodeArray's, as the position table's record has it */
	uint16_t table_len, bytecodes_len;
	uint8_t table[V8_BASELINE_TABLE];
	uint8_t bytecodes[V8_BASELINE_BYTECODES];
};

/* 0, or -EBADMSG (wrong size or version, a count or length beyond its
 * slot, fewer than 4 bytecodes, a length not 3 per bytecode). */
int v8_sizes_decode(const void *rec, size_t len, struct v8_sizes *ret);
/* 0, or -EBADMSG (wrong size or version, a length beyond its slot). */
int v8_baseline_decode(const void *rec, size_t len, struct v8_baseline *ret);

/* The offset in the BytecodeArray bc (blen bytes) of the bytecode whose
 * machine code holds pc_off, by the offset table (tlen bytes) and the
 * lengths sz; exact: pc_off is a sampled pc, else a return address (the
 * call before it). A pc in the prologue gives the first bytecode. 0 with
 * *ret_offset; -ENOENT: past what was copied; -EBADMSG: a bytecode or
 * length the lengths do not know, a VLQ over 32 bits. Bounded by blen
 * and tlen. */
int v8_baseline_bytecode_offset(const struct v8_sizes *sz, const uint8_t *table, size_t tlen,
				const uint8_t *bc, size_t blen, uint32_t pc_off, int exact,
				int32_t *ret_offset);

/* A session's records (interp_records.h): baseline Codes by (pid, Code
 * key), at most V8_BASELINES_MAX; lengths by pid, at most
 * V8_SIZES_PIDS_MAX. Put, count and free through interp_records_*(). */
#define V8_BASELINES_MAX 8192
#define V8_SIZES_PIDS_MAX 4096

struct interp_records;
struct v8_lines;

/* NULL on out of memory. */
struct interp_records *v8_baselines_new(void);
struct interp_records *v8_sizes_new(void);

/* The line of a baseline frame whose word 1 is word1 (the Code key and
 * the pc offset; exact as above), from pid's records: its Code's, its
 * lengths, and its BytecodeArray's position table and script in lines.
 * 0 with *ret_line, or -ENOENT (a record missing, or the pc past what
 * was copied or damaged). */
int v8_baseline_line(const struct interp_records *baselines, const struct interp_records *sizes,
		     const struct v8_lines *lines, uint32_t pid, uint64_t word1, int exact,
		     int32_t *ret_line);
