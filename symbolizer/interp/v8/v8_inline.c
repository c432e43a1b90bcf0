/* v8_inline.c - inlined functions of optimised V8 frames (v8_inline.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "v8_inline.h"

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

int v8_inline_decode(const void *rec, size_t len, struct v8_inline *ret)
{
	const uint8_t *p = rec, *fns, *scripts, *pos;
	uint16_t n_fns, pos_len;

	if (!rec || len != V8_INLINE_SIZE || get16(p) != V8_INLINE_SIZE ||
	    p[2] != V8_INLINE_VERSION)
		return -EBADMSG;
	n_fns = get16(p + 4);
	pos_len = get16(p + 6);
	if (n_fns > V8_INLINE_FNS || pos_len > V8_INLINE_POS_BYTES ||
	    pos_len % V8_INLINE_POS_SIZE)
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->key = (uint32_t)(get64(p + 8) >> 3);
	ret->n_fns = n_fns;
	ret->n_pos = pos_len / V8_INLINE_POS_SIZE;
	fns = p + V8_INLINE_HEADER;
	scripts = fns + 8 * V8_INLINE_FNS;
	pos = scripts + 8 * V8_INLINE_FNS;
	for (uint16_t i = 0; i < n_fns; i++) {
		ret->fns[i] = get64(fns + 8 * i);
		ret->scripts[i] = get64(scripts + 8 * i);
	}
	for (uint16_t i = 0; i < ret->n_pos; i++) {
		ret->position[i] = get64(pos + V8_INLINE_POS_SIZE * i);
		ret->fn[i] = (int32_t)get32(pos + V8_INLINE_POS_SIZE * i + 8);
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

/* ---- the table: open addressing, linear probing, no deletion ---- */

#define SLOTS (V8_INLINES_MAX * 2) /* load factor <= 1/2 */

struct slot {
	uint32_t pid;
	struct v8_inline *in; /* NULL: empty */
};

struct v8_inlines {
	struct slot *slots;
	size_t count;
};

static size_t slot_of(uint32_t pid, uint32_t key)
{
	uint64_t h = ((uint64_t)key ^ (uint64_t)pid << 40) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (SLOTS - 1);
}

struct v8_inlines *v8_inlines_new(void)
{
	struct v8_inlines *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->slots = calloc(SLOTS, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	return t;
}

static void clear(struct v8_inlines *t)
{
	for (size_t i = 0; i < SLOTS; i++) {
		free(t->slots[i].in);
		t->slots[i].in = NULL;
	}
	t->count = 0;
}

void v8_inlines_free(struct v8_inlines *t)
{
	if (!t)
		return;
	clear(t);
	free(t->slots);
	free(t);
}

static struct slot *find(const struct v8_inlines *t, uint32_t pid, uint32_t key)
{
	for (size_t i = slot_of(pid, key);; i = (i + 1) & (SLOTS - 1)) {
		struct slot *s = &t->slots[i];

		if (!s->in || (s->pid == pid && s->in->key == key))
			return s;
	}
}

int v8_inlines_put(struct v8_inlines *t, uint32_t pid, const void *rec, size_t len)
{
	struct v8_inline *in = malloc(sizeof(*in));
	struct slot *s;

	if (!in)
		return -ENOMEM;
	if (v8_inline_decode(rec, len, in) < 0) {
		free(in);
		return -EBADMSG;
	}
	s = find(t, pid, in->key);
	if (s->in) {
		free(s->in); /* the Code's address was reused */
	} else {
		if (t->count == V8_INLINES_MAX) {
			clear(t);
			s = find(t, pid, in->key);
		}
		t->count++;
	}
	s->pid = pid;
	s->in = in;
	return 0;
}

const struct v8_inline *v8_inlines_get(const struct v8_inlines *t, uint32_t pid, uint32_t key)
{
	return t ? find(t, pid, key)->in : NULL;
}
