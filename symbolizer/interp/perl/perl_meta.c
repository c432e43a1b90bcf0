/* perl_meta.c - Perl sub and COP records from BPF (perl_meta.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perl5.h"
#include "perl_meta.h"
#include "utf8.h"

_Static_assert(PERL_META_SIZE == sizeof(struct sonde_perl_meta), "perl_meta size");

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* n bytes of src (stopping at a NUL) into dst as printable UTF-8: control
 * bytes, ';' (the folded format's frame separator) and invalid sequences
 * become '?'; "..." after a cut. dst has room for n + 4. */
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

int perl_meta_decode(const void *rec, size_t len, struct perl_meta *ret)
{
	const uint8_t *p = rec;
	uint16_t nlen, plen, flen;
	uint8_t type, flags;

	if (!rec || len != PERL_META_SIZE || get16(p) != PERL_META_SIZE ||
	    p[2] != PERL_META_VERSION)
		return -EBADMSG;
	type = p[3];
	nlen = get16(p + 24);
	plen = get16(p + 26);
	flen = get16(p + 28);
	flags = p[30];
	if ((type != PERL_META_SUB && type != PERL_META_COP) || nlen > PERL_META_NAME ||
	    plen > PERL_META_PACKAGE || flen > PERL_META_FILE)
		return -EBADMSG;
	if (type == PERL_META_SUB ? !nlen : (nlen || plen))
		return -EBADMSG; /* a sub has a name, a COP none */
	memset(ret, 0, sizeof(*ret));
	ret->type = type;
	ret->flags = flags;
	ret->addr = get64(p + 8);
	ret->checksum = get64(p + 16);
	p += PERL_META_HEADER;
	copy_printable(ret->name, p, nlen, flags & PERL_META_NAME_CUT);
	copy_printable(ret->package, p + PERL_META_NAME, plen, flags & PERL_META_PACKAGE_CUT);
	copy_printable(ret->file, p + PERL_META_NAME + PERL_META_PACKAGE, flen,
		       flags & PERL_META_FILE_CUT);
	if (type == PERL_META_SUB && !ret->name[0])
		return -EBADMSG; /* a name that was only a NUL */
	return 0;
}

static uint8_t meta_type_of(uint64_t word)
{
	return SONDE_PERL_FRAME_TYPE(word) == SONDE_PERL_FRAME_SUB ? PERL_META_SUB : PERL_META_COP;
}

size_t perl_meta_frame_name(const struct perl_meta *m, uint64_t word, char *buf, size_t len)
{
	uint32_t type = SONDE_PERL_FRAME_TYPE(word), line = SONDE_PERL_FRAME_LINE(word);
	char what[PERL_META_NAME + PERL_META_PACKAGE + 16];
	int n;

	if (!len)
		return 0;
	if (!m || m->type != meta_type_of(word) || type > SONDE_PERL_FRAME_EVAL) {
		n = snprintf(buf, len, "%s", PERL_UNKNOWN_FRAME);
	} else {
		if (type == SONDE_PERL_FRAME_MAIN)
			snprintf(what, sizeof(what), "main");
		else if (type == SONDE_PERL_FRAME_EVAL)
			snprintf(what, sizeof(what), "(eval)");
		else if (m->package[0])
			snprintf(what, sizeof(what), "%s::%s", m->package, m->name);
		else
			snprintf(what, sizeof(what), "%s", m->name);
		if (!m->file[0])
			n = snprintf(buf, len, "%s", what);
		else if (line)
			n = snprintf(buf, len, "%s (%s:%u)", what, m->file, line);
		else
			n = snprintf(buf, len, "%s (%s)", what, m->file);
	}
	if (n < 0) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n < len ? (size_t)n : len - 1;
}

/* ---- the table: open addressing, linear probing, no deletion ---- */

#define SLOTS (PERL_METAS_MAX * 2) /* load factor <= 1/2 */

struct slot {
	uint32_t pid;
	struct perl_meta *meta; /* NULL: empty */
};

struct perl_metas {
	struct slot *slots;
	size_t count;
	uint64_t refused;
};

static size_t slot_of(uint32_t pid, uint64_t addr, uint8_t type)
{
	uint64_t h = (addr ^ type ^ (uint64_t)pid << 40) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (SLOTS - 1);
}

struct perl_metas *perl_metas_new(void)
{
	struct perl_metas *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->slots = calloc(SLOTS, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	return t;
}

static void clear(struct perl_metas *t)
{
	for (size_t i = 0; i < SLOTS; i++) {
		free(t->slots[i].meta);
		t->slots[i].meta = NULL;
	}
	t->count = 0;
}

void perl_metas_free(struct perl_metas *t)
{
	if (!t)
		return;
	clear(t);
	free(t->slots);
	free(t);
}

static struct slot *find(const struct perl_metas *t, uint32_t pid, uint64_t addr, uint8_t type)
{
	size_t i = slot_of(pid, addr, type);

	for (;; i = (i + 1) & (SLOTS - 1)) {
		struct slot *s = &t->slots[i];

		if (!s->meta || (s->pid == pid && s->meta->addr == addr && s->meta->type == type))
			return s;
	}
}

int perl_metas_put(struct perl_metas *t, uint32_t pid, const void *rec, size_t len)
{
	struct perl_meta *m = malloc(sizeof(*m));
	struct slot *s;

	if (!m)
		return -ENOMEM;
	if (perl_meta_decode(rec, len, m) < 0) {
		free(m);
		t->refused++;
		return -EBADMSG;
	}
	s = find(t, pid, m->addr, m->type);
	if (s->meta) {
		free(s->meta); /* the address was reused */
	} else {
		if (t->count == PERL_METAS_MAX) {
			clear(t);
			s = find(t, pid, m->addr, m->type);
		}
		t->count++;
	}
	s->pid = pid;
	s->meta = m;
	return 0;
}

const struct perl_meta *perl_metas_get(const struct perl_metas *t, uint32_t pid, uint64_t word,
				       uint64_t checksum)
{
	const struct slot *s = find(t, pid, SONDE_PERL_FRAME_ADDR(word), meta_type_of(word));

	if (!s->meta || (checksum && s->meta->checksum != checksum))
		return NULL;
	return s->meta;
}

size_t perl_metas_count(const struct perl_metas *t)
{
	return t->count;
}

uint64_t perl_metas_refused(const struct perl_metas *t)
{
	return t->refused;
}
