/* rawstack.c - the raw stack string (see rawstack.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rawstack.h"

#define HEADER 3 /* version, u16 count */

static void put(struct rawstack_builder *b, const void *p, size_t n)
{
	memcpy(b->buf + b->len, p, n);
	b->len += n;
}

static void put_u64(struct rawstack_builder *b, uint64_t v)
{
	uint8_t le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	put(b, le, 8);
}

void rawstack_begin(struct rawstack_builder *b)
{
	memset(b, 0, sizeof(*b));
}

void rawstack_push(struct rawstack_builder *b, const struct rawframe *f)
{
	size_t need = 1 + 8, name_len = 0, sys_len = 0;

	if (b->err)
		return;
	if (b->n >= RAWSTACK_MAX_FRAMES) {
		b->err = -E2BIG;
		return;
	}
	if (f->kind == RAW_USER_FILE) {
		need += 16;
	} else if (f->kind == RAW_KERNEL || rawframe_interp_of(f->kind)) {
		name_len = f->name ? f->name_len : 0;
		need += 1 + name_len;
		if (rawframe_interp_of(f->kind) && f->system_name && f->system_name_len) {
			sys_len = f->system_name_len;
			need += 1 + sys_len;
		}
	} else if (f->kind != RAW_USER_ANON) {
		b->err = -EINVAL;
		return;
	}
	if (b->len == 0)
		b->len = HEADER;
	if (b->len + need > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		uint8_t *nb;

		while (cap < b->len + need)
			cap *= 2;
		nb = realloc(b->buf, cap);
		if (!nb) {
			b->err = -ENOMEM;
			return;
		}
		b->buf = nb;
		b->cap = cap;
	}
	b->buf[b->len++] = (uint8_t)(f->kind | (sys_len ? RAW_SYSTEM_NAME : 0));
	if (f->kind == RAW_USER_FILE)
		put(b, f->file_id, 16);
	put_u64(b, f->address);
	if (f->kind == RAW_KERNEL || rawframe_interp_of(f->kind)) {
		b->buf[b->len++] = (uint8_t)name_len;
		if (name_len)
			put(b, f->name, name_len);
	}
	if (sys_len) {
		b->buf[b->len++] = (uint8_t)sys_len;
		put(b, f->system_name, sys_len);
	}
	b->n++;
}

int rawstack_end(struct rawstack_builder *b, uint8_t **ret, size_t *ret_len)
{
	int err = b->err;

	if (!err && !b->buf) {
		b->buf = malloc(HEADER);
		if (!b->buf)
			err = -ENOMEM;
		b->len = HEADER;
	}
	if (err) {
		free(b->buf);
	} else {
		b->buf[0] = RAWSTACK_VERSION;
		b->buf[1] = (uint8_t)b->n;
		b->buf[2] = (uint8_t)(b->n >> 8);
		*ret = b->buf;
		*ret_len = b->len;
	}
	memset(b, 0, sizeof(*b));
	return err;
}

int rawstack_iter_init(struct rawstack_iter *it, const void *raw, size_t len)
{
	const uint8_t *p = raw;

	if (!raw || len < HEADER || p[0] != RAWSTACK_VERSION)
		return -EBADMSG;
	it->left = (uint16_t)(p[1] | p[2] << 8);
	if (it->left > RAWSTACK_MAX_FRAMES)
		return -EBADMSG;
	it->p = p + HEADER;
	it->end = p + len;
	return 0;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int rawstack_next(struct rawstack_iter *it, struct rawframe *f)
{
	size_t avail = (size_t)(it->end - it->p);
	uint8_t sys;

	if (it->left == 0)
		return it->p == it->end ? 0 : -EBADMSG;
	if (avail < 9)
		return -EBADMSG;
	memset(f, 0, sizeof(*f));
	f->kind = *it->p++;
	avail--;
	sys = f->kind & RAW_SYSTEM_NAME;
	f->kind &= (uint8_t)~RAW_SYSTEM_NAME;
	if (sys && !rawframe_interp_of(f->kind))
		return -EBADMSG;
	switch (f->kind) {
	case RAW_USER_FILE:
		if (avail < 24)
			return -EBADMSG;
		memcpy(f->file_id, it->p, 16);
		f->address = get_u64(it->p + 16);
		it->p += 24;
		break;
	case RAW_USER_ANON:
		f->address = get_u64(it->p);
		it->p += 8;
		break;
	default:
		if (f->kind != RAW_KERNEL && !rawframe_interp_of(f->kind))
			return -EBADMSG;
		/* A kernel or interpreter frame: named. */
		if (avail < 9 || avail - 9 < it->p[8])
			return -EBADMSG;
		f->address = get_u64(it->p);
		f->name_len = it->p[8];
		f->name = f->name_len ? (const char *)it->p + 9 : NULL;
		it->p += 9 + f->name_len;
		avail -= 9 + (size_t)f->name_len;
		if (!sys)
			break;
		/* A system name: its length (not 0), then it. */
		if (avail < 1 || !it->p[0] || avail - 1 < it->p[0])
			return -EBADMSG;
		f->system_name_len = it->p[0];
		f->system_name = (const char *)it->p + 1;
		it->p += 1 + f->system_name_len;
		break;
	}
	it->left--;
	return 1;
}

int rawstack_count(const void *raw, size_t len)
{
	struct rawstack_iter it;
	struct rawframe f;
	int r, n = 0;

	r = rawstack_iter_init(&it, raw, len);
	if (r < 0)
		return r;
	while ((r = rawstack_next(&it, &f)) > 0)
		n++;
	return r < 0 ? r : n;
}
