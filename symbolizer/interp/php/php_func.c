/* php_func.c - PHP function records from BPF (php_func.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "php_func.h"
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

int php_func_decode(const void *rec, size_t len, struct php_func *ret)
{
	const uint8_t *p = rec;
	uint16_t nlen, clen, flen;
	uint8_t type;

	if (!rec || len != PHP_META_SIZE || get16(p) != PHP_META_SIZE || p[2] != PHP_META_VERSION)
		return -EBADMSG;
	type = p[3];
	nlen = get16(p + 28);
	clen = get16(p + 30);
	flen = get16(p + 32);
	if ((type != PHP_FUNC_INTERNAL && type != PHP_FUNC_USER && type != PHP_FUNC_EVAL) ||
	    nlen > PHP_META_NAME || clen > PHP_META_CLASS || flen > PHP_META_FILE)
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->type = type;
	ret->fn_flags = get32(p + 4);
	ret->addr = get64(p + 8);
	ret->checksum = get64(p + 16);
	ret->line_start = get32(p + 24);
	ret->flags = p[34];
	p += PHP_META_HEADER;
	copy_printable(ret->name, p, nlen, ret->flags & PHP_META_NAME_CUT);
	p += PHP_META_NAME;
	copy_printable(ret->class_name, p, clen, ret->flags & PHP_META_CLASS_CUT);
	p += PHP_META_CLASS;
	copy_printable(ret->file, p, flen, ret->flags & PHP_META_FILE_CUT);
	if (type == PHP_FUNC_INTERNAL && !ret->name[0])
		return -EBADMSG; /* every internal function has a name */
	return 0;
}

size_t php_func_frame_name(const struct php_func *f, uint32_t line, char *buf, size_t len)
{
	const char *name, *sep;
	int n;

	if (!len)
		return 0;
	if (!f) {
		n = snprintf(buf, len, "%s", PHP_UNKNOWN_FRAME);
		goto out;
	}
	name = f->name[0] ? f->name : f->type == PHP_FUNC_EVAL ? "{eval}" : "{main}";
	sep = f->class_name[0] ? "::" : "";
	if (f->type == PHP_FUNC_INTERNAL)
		n = snprintf(buf, len, "%s%s%s", f->class_name, sep, name);
	else if (line && f->file[0])
		n = snprintf(buf, len, "%s%s%s (%s:%u)", f->class_name, sep, name, f->file,
			     (unsigned)line);
	else if (f->file[0])
		n = snprintf(buf, len, "%s%s%s (%s)", f->class_name, sep, name, f->file);
	else
		n = snprintf(buf, len, "%s%s%s", f->class_name, sep, name);
out:
	if (n < 0) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n < len ? (size_t)n : len - 1;
}

/* ---- the table: open addressing, linear probing, no deletion ---- */

#define SLOTS (PHP_FUNCS_MAX * 2) /* load factor <= 1/2 */

struct slot {
	uint32_t pid;
	struct php_func *func; /* NULL: empty */
};

struct php_funcs {
	struct slot *slots;
	size_t count;
	uint64_t refused;
};

static size_t slot_of(uint32_t pid, uint64_t addr)
{
	uint64_t h = (addr ^ (uint64_t)pid << 40) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (SLOTS - 1);
}

struct php_funcs *php_funcs_new(void)
{
	struct php_funcs *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->slots = calloc(SLOTS, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	return t;
}

static void clear(struct php_funcs *t)
{
	for (size_t i = 0; i < SLOTS; i++) {
		free(t->slots[i].func);
		t->slots[i].func = NULL;
	}
	t->count = 0;
}

void php_funcs_free(struct php_funcs *t)
{
	if (!t)
		return;
	clear(t);
	free(t->slots);
	free(t);
}

static struct slot *find(const struct php_funcs *t, uint32_t pid, uint64_t addr)
{
	size_t i = slot_of(pid, addr);

	for (;; i = (i + 1) & (SLOTS - 1)) {
		struct slot *s = &t->slots[i];

		if (!s->func || (s->pid == pid && s->func->addr == addr))
			return s;
	}
}

int php_funcs_put(struct php_funcs *t, uint32_t pid, const void *rec, size_t len)
{
	struct php_func *f = malloc(sizeof(*f));
	struct slot *s;

	if (!f)
		return -ENOMEM;
	if (php_func_decode(rec, len, f) < 0) {
		free(f);
		t->refused++;
		return -EBADMSG;
	}
	s = find(t, pid, f->addr);
	if (s->func) {
		free(s->func); /* the address was reused by another function */
	} else {
		if (t->count == PHP_FUNCS_MAX) {
			/* Full: start over rather than track age; BPF sends
			 * a function again once its dedup entry ages out. */
			clear(t);
			s = find(t, pid, f->addr);
		}
		t->count++;
	}
	s->pid = pid;
	s->func = f;
	return 0;
}

const struct php_func *php_funcs_get(const struct php_funcs *t, uint32_t pid, uint64_t addr,
				     uint64_t checksum)
{
	const struct slot *s = find(t, pid, addr);

	if (!s->func || (checksum && s->func->checksum != checksum))
		return NULL;
	return s->func;
}

size_t php_funcs_count(const struct php_funcs *t)
{
	return t->count;
}

uint64_t php_funcs_refused(const struct php_funcs *t)
{
	return t->refused;
}
