/* cpython_code.c - CPython code object records from BPF (cpython_code.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython_code.h"
#include "cpython_lines.h"
#include "utf8.h"

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

/* Copies n bytes of src as printable UTF-8: control bytes, ';' (the
 * folded format's frame separator) and invalid sequences become '?'.
 * Stops at a NUL. dst has room for n + 4. */
static void copy_printable(char *dst, const uint8_t *src, size_t n, bool cut)
{
	size_t o = 0;

	for (size_t i = 0; i < n && src[i];) {
		size_t l = utf8_char_len(src + i, n - i);

		if (l == 1 && (src[i] < 0x20 || src[i] == 0x7f || src[i] == ';'))
			l = 0;
		if (!l) {
			dst[o++] = '?';
			i++;
			continue;
		}
		memcpy(dst + o, src + i, l);
		o += l;
		i += l;
	}
	if (cut) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o] = '\0';
}

int cpython_code_decode(const void *rec, size_t len, struct cpython_code *ret)
{
	const uint8_t *p = rec;
	uint16_t qlen, flen, tlen;
	uint8_t minor;

	if (!rec || len != CPYTHON_META_SIZE || get16(p) != CPYTHON_META_SIZE ||
	    p[2] != CPYTHON_META_VERSION)
		return -EBADMSG;
	minor = p[3];
	qlen = get16(p + 24);
	flen = get16(p + 26);
	tlen = get16(p + 28);
	if (minor < 10 || minor > 13 || qlen > CPYTHON_META_QUALNAME ||
	    flen > CPYTHON_META_FILENAME || tlen > CPYTHON_META_LINETABLE || get32(p + 4) > INT32_MAX)
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->minor = minor;
	ret->firstlineno = (int32_t)get32(p + 4);
	ret->addr = get64(p + 8);
	ret->checksum = get64(p + 16);
	ret->flags = p[30];
	p += CPYTHON_META_HEADER;
	copy_printable(ret->qualname, p, qlen, ret->flags & CPYTHON_META_QUALNAME_CUT);
	p += CPYTHON_META_QUALNAME;
	copy_printable(ret->filename, p, flen, ret->flags & CPYTHON_META_FILENAME_CUT);
	p += CPYTHON_META_FILENAME;
	memcpy(ret->linetable, p, tlen);
	ret->linetable_len = tlen;
	if (!ret->qualname[0])
		return -EBADMSG; /* every code object has a name */
	return 0;
}

size_t cpython_code_frame_name(const struct cpython_code *c, uint32_t offset, char *buf,
			       size_t len)
{
	int32_t line = CPYTHON_NO_LINE;
	int n;

	if (!len)
		return 0;
	if (!c) {
		n = snprintf(buf, len, "%s", CPYTHON_UNKNOWN_FRAME);
	} else {
		/* A cut table may stop before offset: no line then (-ENOENT),
		 * rather than a wrong one. */
		if (cpython_addr2line(c->minor == 10 ? CPYTHON_LINES_310 : CPYTHON_LINES_311,
				      c->linetable, c->linetable_len, c->firstlineno, offset,
				      &line) < 0)
			line = CPYTHON_NO_LINE;
		if (line != CPYTHON_NO_LINE)
			n = snprintf(buf, len, "%s (%s:%d)", c->qualname, c->filename, (int)line);
		else
			n = snprintf(buf, len, "%s (%s)", c->qualname, c->filename);
	}
	if (n < 0) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n < len ? (size_t)n : len - 1;
}

/* ---- the table: open addressing, linear probing, no deletion markers
 * (forget_pid rebuilds) ---- */

#define SLOTS (CPYTHON_CODES_MAX * 2) /* load factor <= 1/2 */

struct slot {
	uint32_t pid;
	struct cpython_code *code; /* NULL: empty */
};

struct cpython_codes {
	struct slot *slots;
	size_t count;
	uint64_t refused;
};

static size_t slot_of(uint32_t pid, uint64_t addr)
{
	uint64_t h = (addr ^ (uint64_t)pid << 40) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (SLOTS - 1);
}

struct cpython_codes *cpython_codes_new(void)
{
	struct cpython_codes *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->slots = calloc(SLOTS, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	return t;
}

static void clear(struct cpython_codes *t)
{
	for (size_t i = 0; i < SLOTS; i++) {
		free(t->slots[i].code);
		t->slots[i].code = NULL;
	}
	t->count = 0;
}

void cpython_codes_free(struct cpython_codes *t)
{
	if (!t)
		return;
	clear(t);
	free(t->slots);
	free(t);
}

static struct slot *find(const struct cpython_codes *t, uint32_t pid, uint64_t addr)
{
	size_t i = slot_of(pid, addr);

	for (;; i = (i + 1) & (SLOTS - 1)) {
		struct slot *s = &t->slots[i];

		if (!s->code || (s->pid == pid && s->code->addr == addr))
			return s;
	}
}

int cpython_codes_put(struct cpython_codes *t, uint32_t pid, const void *rec, size_t len)
{
	struct cpython_code *c = malloc(sizeof(*c));
	struct slot *s;

	if (!c)
		return -ENOMEM;
	if (cpython_code_decode(rec, len, c) < 0) {
		free(c);
		t->refused++;
		return -EBADMSG;
	}
	s = find(t, pid, c->addr);
	if (s->code) {
		free(s->code); /* the address was reused by another code object */
	} else {
		if (t->count == CPYTHON_CODES_MAX) {
			/* Full: start over rather than track age; BPF sends
			 * a code object again once its dedup entry ages out. */
			clear(t);
			s = find(t, pid, c->addr);
		}
		t->count++;
	}
	s->pid = pid;
	s->code = c;
	return 0;
}

const struct cpython_code *cpython_codes_get(const struct cpython_codes *t, uint32_t pid,
					     uint64_t addr, uint64_t checksum)
{
	const struct slot *s = find(t, pid, addr);

	if (!s->code || (checksum && s->code->checksum != checksum))
		return NULL;
	return s->code;
}

void cpython_codes_forget_pid(struct cpython_codes *t, uint32_t pid)
{
	struct slot *old = t->slots;
	struct slot *fresh = calloc(SLOTS, sizeof(*fresh));

	if (!fresh)
		return; /* keep them: stale entries only cost memory */
	t->slots = fresh;
	t->count = 0;
	for (size_t i = 0; i < SLOTS; i++) {
		if (!old[i].code)
			continue;
		if (old[i].pid == pid) {
			free(old[i].code);
			continue;
		}
		*find(t, old[i].pid, old[i].code->addr) = old[i];
		t->count++;
	}
	free(old);
}

size_t cpython_codes_count(const struct cpython_codes *t)
{
	return t->count;
}

uint64_t cpython_codes_refused(const struct cpython_codes *t)
{
	return t->refused;
}
