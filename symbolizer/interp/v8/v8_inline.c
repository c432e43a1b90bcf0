/* v8_inline.c - inlined functions of optimised V8 frames (v8_inline.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "v8_inline.h"

int v8_inline_decode(const void *rec, size_t len, struct v8_inline *ret)
{
	const uint8_t *p = rec, *fns, *scripts, *pos;
	uint16_t n_fns, pos_len;

	if (!rec || len != V8_INLINE_SIZE || interp_records_le16(p) != V8_INLINE_SIZE ||
	    p[2] != V8_INLINE_VERSION)
		return -EBADMSG;
	n_fns = interp_records_le16(p + 4);
	pos_len = interp_records_le16(p + 6);
	if (n_fns > V8_INLINE_FNS || pos_len > V8_INLINE_POS_BYTES ||
	    pos_len % V8_INLINE_POS_SIZE)
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->key = (uint32_t)(interp_records_le64(p + 8) >> 3);
	ret->n_fns = n_fns;
	ret->n_pos = pos_len / V8_INLINE_POS_SIZE;
	fns = p + V8_INLINE_HEADER;
	scripts = fns + 8 * V8_INLINE_FNS;
	pos = scripts + 8 * V8_INLINE_FNS;
	for (uint16_t i = 0; i < n_fns; i++) {
		ret->fns[i] = interp_records_le64(fns + 8 * i);
		ret->scripts[i] = interp_records_le64(scripts + 8 * i);
	}
	for (uint16_t i = 0; i < ret->n_pos; i++) {
		ret->position[i] = interp_records_le64(pos + V8_INLINE_POS_SIZE * i);
		ret->fn[i] = (int32_t)interp_records_le32(pos + V8_INLINE_POS_SIZE * i + 8);
	}
	return 0;
}

void v8_position_split(uint64_t raw, int32_t *ret_offset, int32_t *ret_inlined)
{
	/* SourcePosition: bit 0 external (no script offset), bits 1-30 the
	 * script offset + 1, bits 31-46 the inlining id + 1. */
	*ret_offset = raw & 1 ? -1 : (int32_t)((raw >> 1) & 0x3fffffff) - 1;
	*ret_inlined = (int32_t)((raw >> 31) & 0xffff) - 1;
}

int v8_inline_chain(const struct v8_inline *in, int32_t inlined, int32_t offset,
		    struct v8_inline_level *out, size_t max)
{
	size_t n = 0;

	if (max > V8_INLINE_DEPTH)
		max = V8_INLINE_DEPTH;
	while (inlined >= 0) {
		int32_t f;

		if (inlined >= in->n_pos || n + 1 >= max)
			return -EBADMSG;
		f = in->fn[inlined];
		if (f < 0 || f >= in->n_fns)
			return -EBADMSG;
		out[n++] = (struct v8_inline_level){ .sfi = in->fns[f],
						     .script = in->scripts[f],
						     .offset = offset };
		v8_position_split(in->position[inlined], &offset, &inlined);
	}
	if (n >= max)
		return -EBADMSG;
	out[n++] = (struct v8_inline_level){ .offset = offset };
	return (int)n;
}

/* ---- the table ---- */

static int inlines_decode(const void *rec, size_t len, void *value,
			  struct interp_records_key *key)
{
	struct v8_inline *in = value;
	int r = v8_inline_decode(rec, len, in);

	if (r == 0)
		key->addr = in->key;
	return r;
}

struct interp_records *v8_inlines_new(void)
{
	return interp_records_new(V8_INLINES_MAX, sizeof(struct v8_inline), inlines_decode);
}

const struct v8_inline *v8_inlines_get(const struct interp_records *t, uint32_t pid,
				       uint32_t key)
{
	return t ? interp_records_get(t, pid, key, 0, 0) : NULL;
}
