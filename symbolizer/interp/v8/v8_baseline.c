/* v8_baseline.c - lines of V8 baseline frames (v8_baseline.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "interp_records.h"
#include "v8_baseline.h"
#include "v8_lines.h"

int v8_sizes_decode(const void *rec, size_t len, struct v8_sizes *ret)
{
	const uint8_t *p = rec;
	uint16_t n, bytes;

	if (!rec || len != V8_SIZES_SIZE || interp_records_le16(p) != V8_SIZES_SIZE ||
	    p[2] != V8_SIZES_VERSION)
		return -EBADMSG;
	n = interp_records_le16(p + 4);
	bytes = interp_records_le16(p + 6);
	if (n < 4 || n > 255 || bytes != 3 * n)
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->n = n;
	memcpy(ret->len, p + V8_SIZES_HEADER, bytes);
	return 0;
}

int v8_baseline_decode(const void *rec, size_t len, struct v8_baseline *ret)
{
	const uint8_t *p = rec;
	uint16_t tlen, blen;

	if (!rec || len != V8_BASELINE_SIZE || interp_records_le16(p) != V8_BASELINE_SIZE ||
	    p[2] != V8_BASELINE_VERSION)
		return -EBADMSG;
	tlen = interp_records_le16(p + 4);
	blen = interp_records_le16(p + 6);
	if (tlen > V8_BASELINE_TABLE || blen > V8_BASELINE_BYTECODES)
		return -EBADMSG;
	ret->key = (uint32_t)(interp_records_le64(p + 8) >> 3);
	ret->ba_key = (uint32_t)(interp_records_le64(p + 16) >> 3);
	ret->table_len = tlen;
	ret->bytecodes_len = blen;
	memcpy(ret->table, p + V8_BASELINE_HEADER, tlen);
	memcpy(ret->bytecodes, p + V8_BASELINE_HEADER + V8_BASELINE_TABLE, blen);
	return 0;
}

/* One unsigned VLQ of at most 32 bits at table[*i]: 0, -ENOENT at the
 * end of the table (cut), -EBADMSG past 32 bits. */
static int uvlq(const uint8_t *table, size_t len, size_t *i, uint32_t *ret)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 35; shift += 7) {
		uint8_t b;

		if (*i >= len)
			return -ENOENT;
		b = table[(*i)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			if (v > UINT32_MAX)
				return -EBADMSG;
			*ret = (uint32_t)v;
			return 0;
		}
	}
	return -EBADMSG;
}

/* The scale a prefix bytecode sets (Wide, ExtraWide, DebugBreakWide,
 * DebugBreakExtraWide: 1, 2, 1, 2), or 0 for any other bytecode. */
static unsigned prefix_scale(uint8_t b)
{
	return b < 4 ? 1 + (b & 1) : 0;
}

int v8_baseline_bytecode_offset(const struct v8_sizes *sz, const uint8_t *table, size_t tlen,
				const uint8_t *bc, size_t blen, uint32_t pc_off, int exact,
				int32_t *ret_offset)
{
	uint64_t end, p = pc_off;
	size_t ti = 0, o = 0;
	uint32_t d;
	int r;

	if (blen == 0)
		return -ENOENT;
	/* A return address is just past its call: the call's bytecode is
	 * the one whose code ends at or after it. */
	if (!exact) {
		if (p == 0)
			return -ENOENT;
		p--;
	}
	r = uvlq(table, tlen, &ti, &d);
	if (r < 0)
		return r;
	end = d;
	if (p < end) {
		*ret_offset = 0;
		return 0;
	}
	while (o < blen) {
		size_t start = o, size;
		unsigned scale = prefix_scale(bc[o]);

		if (scale && ++o >= blen)
			return -ENOENT;
		if (bc[o] >= sz->n)
			return -EBADMSG;
		size = sz->len[scale * sz->n + bc[o]];
		if (size == 0)
			return -EBADMSG;
		o += size;
		r = uvlq(table, tlen, &ti, &d);
		if (r < 0)
			return r;
		end += d;
		if (p < end) {
			*ret_offset = (int32_t)start;
			return 0;
		}
	}
	return -ENOENT;
}

/* ---- the tables ---- */

static int baselines_decode(const void *rec, size_t len, void *value,
			    struct interp_records_key *key)
{
	struct v8_baseline *b = value;
	int r = v8_baseline_decode(rec, len, b);

	if (r == 0)
		key->addr = b->key;
	return r;
}

static int sizes_decode(const void *rec, size_t len, void *value, struct interp_records_key *key)
{
	(void)key; /* one a process: address 0 */
	return v8_sizes_decode(rec, len, value);
}

struct interp_records *v8_baselines_new(void)
{
	return interp_records_new(V8_BASELINES_MAX, sizeof(struct v8_baseline), baselines_decode);
}

struct interp_records *v8_sizes_new(void)
{
	return interp_records_new(V8_SIZES_PIDS_MAX, sizeof(struct v8_sizes), sizes_decode);
}

int v8_baseline_line(const struct interp_records *baselines, const struct interp_records *sizes,
		     const struct v8_lines *lines, uint32_t pid, uint64_t word1, int exact,
		     int32_t *ret_line)
{
	uint32_t pc = (uint32_t)word1, key = (uint32_t)(word1 >> 32);
	const struct v8_baseline *b;
	const struct v8_sizes *sz;
	int32_t bo;

	if (!baselines || !sizes || pc == 0xffffffffu)
		return -ENOENT;
	b = interp_records_get(baselines, pid, key, 0, 0);
	sz = interp_records_get(sizes, pid, 0, 0, 0);
	if (!b || !sz ||
	    v8_baseline_bytecode_offset(sz, b->table, b->table_len, b->bytecodes, b->bytecodes_len,
					pc, exact, &bo) < 0)
		return -ENOENT;
	return v8_lines_line(lines, pid, (uint64_t)b->ba_key << 32 | (uint32_t)bo, 1, ret_line);
}
