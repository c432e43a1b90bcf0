/* v8_inline.h - the functions TurboFan inlined into an optimised V8 frame
 * (docs/interpreters.md, "V8"): the decoder of the inlining record BPF
 * copies from an optimised Code's deoptimization data (bpf/v8.h struct
 * sonde_v8_inline), the chain of functions a position stands for, and
 * the table of them a session keeps per (pid, Code).
 *
 * Records come from sampled processes through the sensor: untrusted. The
 * decoder checks size, version and every count against its slot; the
 * chain follows only ids inside what was copied, at most V8_INLINE_DEPTH
 * levels (a cycle ends it as damaged), never a guess.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The record's layout, little-endian, fixed size. */
#define V8_INLINE_VERSION 1
#define V8_INLINE_FNS 16
#define V8_INLINE_POS_BYTES 1024
#define V8_INLINE_POS_SIZE 16 /* V8's InliningPosition: SourcePosition, int, padding */
#define V8_INLINE_POS (V8_INLINE_POS_BYTES / V8_INLINE_POS_SIZE)
#define V8_INLINE_HEADER 16
#define V8_INLINE_SIZE (V8_INLINE_HEADER + 16 * V8_INLINE_FNS + V8_INLINE_POS_BYTES)
/* Frames one optimised frame splits into, at most. */
#define V8_INLINE_DEPTH 16

/* One decoded record; owns nothing outside itself. */
struct v8_inline {
	uint32_t key; /* the Code's address >> 3, low 32 bits (a frame's word 1) */
	uint16_t n_fns, n_pos;
	uint64_t fns[V8_INLINE_FNS];     /* SharedFunctionInfo addresses */
	uint64_t scripts[V8_INLINE_FNS]; /* their scripts */
	uint64_t position[V8_INLINE_POS]; /* the call's raw SourcePosition */
	int32_t fn[V8_INLINE_POS];        /* the inlined function: index in fns */
};

/* 0, or -EBADMSG (wrong size or version, a count beyond its slot, a
 * positions length not a whole number of entries). */
int v8_inline_decode(const void *rec, size_t len, struct v8_inline *ret);

/* One function of a frame's chain. */
struct v8_inline_level {
	uint64_t sfi;    /* 0: the Code's own function */
	uint64_t script; /* 0: the Code's own function's script */
	int32_t offset;  /* the script offset in it; -1: not known */
};

/* The functions the position (script offset `offset`, inlining id
 * `inlined` >= 0) of an optimised frame whose Code's record is `in`
 * stands for, leaf first: the function inlined there at offset, then each
 * caller at its inlining position, ending with the Code's own function
 * (sfi 0). Returns the number of levels written into out (room for max,
 * at most V8_INLINE_DEPTH used), or -EBADMSG: an id or function index
 * beyond what was copied, or a chain longer than max or V8_INLINE_DEPTH
 * (a cycle). */
int v8_inline_chain(const struct v8_inline *in, int32_t inlined, int32_t offset,
		    struct v8_inline_level *out, size_t max);

/* The script offset and inlining id (-1: none) of a raw SourcePosition;
 * the offset is -1 for an external (non-script) position. */
void v8_position_split(uint64_t raw, int32_t *ret_offset, int32_t *ret_inlined);

/* Records of one session (interp_records.h), by (pid, Code key): at most
 * V8_INLINES_MAX; put, count and free through interp_records_*(). */
#define V8_INLINES_MAX 16384

struct interp_records;

/* A table of inlining records; NULL on out of memory. */
struct interp_records *v8_inlines_new(void);
/* NULL when unknown. Borrowed until the next put. */
const struct v8_inline *v8_inlines_get(const struct interp_records *t, uint32_t pid,
				       uint32_t key);
