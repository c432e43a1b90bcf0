/* interp_records.c - per-session interpreter records (interp_records.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "utf8.h"

/* One record: its key, then the runtime's decoded value. */
struct entry {
	struct interp_records_key key;
	max_align_t value[]; /* value_size bytes */
};

struct slot {
	uint32_t pid;
	struct entry *e; /* NULL: empty */
};

/* Open addressing, linear probing, no deletion markers (forget_pid
 * rebuilds); at most half the slots are used, so an empty one ends every
 * probe. */
struct interp_records {
	struct slot *slots;
	size_t mask; /* slots - 1 */
	size_t max, count, value_size;
	uint64_t refused;
	interp_records_decode_fn decode;
};

static size_t slot_of(const struct interp_records *t, uint32_t pid, uint64_t addr, uint8_t type)
{
	uint64_t h = (addr ^ type ^ (uint64_t)pid << 40) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & t->mask;
}

struct interp_records *interp_records_new(size_t max, size_t value_size,
					  interp_records_decode_fn decode)
{
	struct interp_records *t;
	size_t slots = 2;

	if (!max || max > (size_t)1 << 30 || !decode)
		return NULL;
	while (slots < 2 * max)
		slots <<= 1;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->slots = calloc(slots, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	t->mask = slots - 1;
	t->max = max;
	t->value_size = value_size;
	t->decode = decode;
	return t;
}

static void clear(struct interp_records *t)
{
	for (size_t i = 0; i <= t->mask; i++) {
		free(t->slots[i].e);
		t->slots[i].e = NULL;
	}
	t->count = 0;
}

void interp_records_free(struct interp_records *t)
{
	if (!t)
		return;
	clear(t);
	free(t->slots);
	free(t);
}

static struct slot *find(const struct interp_records *t, uint32_t pid, uint64_t addr,
			 uint8_t type)
{
	for (size_t i = slot_of(t, pid, addr, type);; i = (i + 1) & t->mask) {
		struct slot *s = &t->slots[i];

		if (!s->e || (s->pid == pid && s->e->key.addr == addr && s->e->key.type == type))
			return s;
	}
}

int interp_records_put(struct interp_records *t, uint32_t pid, const void *rec, size_t len)
{
	struct entry *e = malloc(sizeof(*e) + t->value_size);
	struct slot *s;

	if (!e)
		return -ENOMEM;
	memset(&e->key, 0, sizeof(e->key));
	if (t->decode(rec, len, e->value, &e->key) < 0) {
		free(e);
		t->refused++;
		return -EBADMSG;
	}
	s = find(t, pid, e->key.addr, e->key.type);
	if (s->e) {
		free(s->e); /* the address was reused */
	} else {
		if (t->count == t->max) {
			/* Full: start over rather than track age. */
			clear(t);
			s = find(t, pid, e->key.addr, e->key.type);
		}
		t->count++;
	}
	s->pid = pid;
	s->e = e;
	return 0;
}

const void *interp_records_get(const struct interp_records *t, uint32_t pid, uint64_t addr,
			       uint8_t type, uint64_t checksum)
{
	const struct slot *s = find(t, pid, addr, type);

	if (!s->e || (checksum && s->e->key.checksum != checksum))
		return NULL;
	return s->e->value;
}

void interp_records_forget_pid(struct interp_records *t, uint32_t pid)
{
	struct slot *old = t->slots;
	struct slot *fresh = calloc(t->mask + 1, sizeof(*fresh));

	if (!fresh)
		return;
	t->slots = fresh;
	t->count = 0;
	for (size_t i = 0; i <= t->mask; i++) {
		if (!old[i].e)
			continue;
		if (old[i].pid == pid) {
			free(old[i].e);
			continue;
		}
		*find(t, old[i].pid, old[i].e->key.addr, old[i].e->key.type) = old[i];
		t->count++;
	}
	free(old);
}

size_t interp_records_count(const struct interp_records *t)
{
	return t->count;
}

uint64_t interp_records_refused(const struct interp_records *t)
{
	return t->refused;
}

uint16_t interp_records_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

uint32_t interp_records_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t interp_records_le64(const uint8_t *p)
{
	return (uint64_t)interp_records_le32(p) | (uint64_t)interp_records_le32(p + 4) << 32;
}

void interp_records_copy_text(char *dst, const uint8_t *src, size_t n, bool cut, unsigned opts)
{
	size_t o = 0;

	for (size_t i = 0; i < n && src[i];) {
		size_t l = utf8_char_len(src + i, n - i);

		if (l == 1 && (src[i] < 0x20 || src[i] == 0x7f ||
			       (src[i] == ';' && !(opts & INTERP_RECORDS_TEXT_SEMIS))))
			l = 0;
		if (!l) {
			dst[o++] = '?';
			i++;
			continue;
		}
		memcpy(dst + o, src + i, l);
		if ((opts & INTERP_RECORDS_TEXT_DOTS) && l == 1 && src[i] == '/')
			dst[o] = '.';
		o += l;
		i += l;
	}
	if (cut) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o] = '\0';
}
