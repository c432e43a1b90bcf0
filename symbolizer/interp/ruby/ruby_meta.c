/* ruby_meta.c - Ruby iseq and cfunc records from BPF (ruby_meta.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ruby_meta.h"
#include "utf8.h"

#define OFF(f) __builtin_offsetof(struct sonde_ruby_meta, f)

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

/* n bytes of src as printable UTF-8 into dst (room for n + 4): control
 * bytes, ';' (the folded format's separator) and invalid sequences become
 * '?'; stops at a NUL; "..." when cut. */
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

int ruby_meta_decode(const void *rec, size_t len, struct ruby_meta *ret)
{
	const uint8_t *p = rec;
	uint16_t llen, blen, clen, plen, slen, nlen;
	uint8_t type, isz;

	if (!rec || len != sizeof(struct sonde_ruby_meta) ||
	    get16(p) != sizeof(struct sonde_ruby_meta) || p[OFF(version)] != SONDE_RUBY_META_VERSION)
		return -EBADMSG;
	type = p[OFF(type)];
	isz = p[OFF(insn_info_size)];
	llen = get16(p + OFF(label_len));
	blen = get16(p + OFF(base_len));
	clen = get16(p + OFF(class_len));
	plen = get16(p + OFF(path_len));
	slen = get16(p + OFF(succ_len));
	nlen = get16(p + OFF(lines_len));
	if ((type != SONDE_RUBY_META_ISEQ && type != SONDE_RUBY_META_CFUNC) ||
	    llen > SONDE_RUBY_META_LABEL || blen > SONDE_RUBY_META_BASE ||
	    clen > SONDE_RUBY_META_CLASS || plen > SONDE_RUBY_META_PATH ||
	    slen > SONDE_RUBY_META_SUCC || nlen > SONDE_RUBY_META_LINES ||
	    get32(p + OFF(first_lineno)) > INT32_MAX || (nlen && (isz < 4 || nlen % isz)))
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->type = type;
	ret->flags = p[OFF(flags)];
	ret->insn_info_size = isz;
	ret->first_lineno = (int32_t)get32(p + OFF(first_lineno));
	ret->addr = get64(p + OFF(addr));
	ret->checksum = get64(p + OFF(checksum));
	ret->iseq_size = get32(p + OFF(iseq_size));
	ret->insns_size = get32(p + OFF(insns_size));
	copy_printable(ret->label, p + OFF(label), llen, ret->flags & SONDE_RUBY_META_LABEL_CUT);
	copy_printable(ret->base, p + OFF(base), blen, false);
	ret->base_len = (uint16_t)strlen(ret->base);
	copy_printable(ret->klass, p + OFF(klass), clen, ret->flags & SONDE_RUBY_META_CLASS_CUT);
	copy_printable(ret->path, p + OFF(path), plen, ret->flags & SONDE_RUBY_META_PATH_CUT);
	memcpy(ret->succ, p + OFF(succ), slen);
	ret->succ_len = slen;
	memcpy(ret->lines, p + OFF(lines), nlen);
	ret->lines_len = nlen;
	if (!ret->label[0])
		return -EBADMSG; /* every iseq and method has a name */
	return 0;
}

/* Ruby's succinct index table (iseq.c): the number of insns_info entries
 * starting at or before position x: the first 54 positions as 7-bit
 * counts, nine to a word; then blocks of 512 positions {rank (4 bytes,
 * padded to 8), seven 9-bit ranks of 64-bit sub-blocks, 8 words of
 * bits}. -1 when the copied bytes do not reach x. */
static int64_t succ_rank(const uint8_t *t, uint32_t n, uint32_t x)
{
	uint32_t bi, bit, sub, off;
	uint64_t bits, ranks, small;

	if (x < 54) {
		if (n < 48)
			return -1;
		return (int64_t)((get64(t + (x / 9) * 8) >> ((x % 9) * 7)) & 0x7f);
	}
	bi = (x - 54) / 512;
	bit = (x - 54) % 512;
	sub = bit / 64;
	off = 48 + 80 * bi;
	if (bi > 2 || off + 80 > n)
		return -1;
	ranks = get64(t + off + 8);
	small = sub ? (ranks >> ((sub - 1) * 9)) & 0x1ff : 0;
	bits = get64(t + off + 16 + sub * 8) << (63 - bit % 64);
	return (int64_t)get32(t + off) + (int64_t)small + __builtin_popcountll(bits);
}

int32_t ruby_meta_line(const struct ruby_meta *m, uint32_t pc)
{
	uint32_t pos = pc ? pc - 1 : 0, entry;
	int64_t rank;
	int32_t line;

	if (!m || m->type != SONDE_RUBY_META_ISEQ || !m->insn_info_size || !m->lines_len)
		return -1;
	if (m->insns_size == 1) {
		entry = 0;
	} else {
		if (pos >= m->iseq_size)
			return -1;
		rank = succ_rank(m->succ, m->succ_len, pos);
		if (rank <= 0)
			return -1;
		entry = (uint32_t)rank - 1;
	}
	if (entry >= m->insns_size || (uint64_t)(entry + 1) * m->insn_info_size > m->lines_len)
		return -1;
	line = (int32_t)get32(m->lines + (size_t)entry * m->insn_info_size);
	return line < 0 ? -1 : line;
}

/* m's label qualified by its owner's class, as Ruby's
 * rb_profile_frame_full_label does: "Foo#bar", "block in Foo#bar". */
static int qualified(const struct ruby_meta *m, char *buf, size_t len)
{
	const char *sep = (m->flags & SONDE_RUBY_META_SINGLETON) ? "." : "#";
	size_t l = strlen(m->label);

	if (!m->klass[0])
		return snprintf(buf, len, "%s", m->label);
	if (m->type == SONDE_RUBY_META_CFUNC || !strcmp(m->label, m->base))
		return snprintf(buf, len, "%s%s%s", m->klass, sep,
				m->type == SONDE_RUBY_META_CFUNC ? m->label : m->base);
	if (m->base_len && l > m->base_len && !strcmp(m->label + l - m->base_len, m->base))
		return snprintf(buf, len, "%.*s%s%s%s", (int)(l - m->base_len), m->label, m->klass,
				sep, m->base);
	return snprintf(buf, len, "%s", m->label);
}

size_t ruby_meta_frame_name(const struct ruby_meta *m, uint32_t pc, char *buf, size_t len)
{
	int n, k;

	if (!len)
		return 0;
	if (!m) {
		n = snprintf(buf, len, "%s", RUBY_UNKNOWN_FRAME);
	} else {
		n = qualified(m, buf, len);
		if (n >= 0 && (size_t)n < len && m->type == SONDE_RUBY_META_ISEQ) {
			int32_t line = ruby_meta_line(m, pc);

			k = line >= 0 ? snprintf(buf + n, len - (size_t)n, " (%s:%d)", m->path,
						 (int)line)
				      : snprintf(buf + n, len - (size_t)n, " (%s)", m->path);
			n = k < 0 ? -1 : n + k;
		}
	}
	if (n < 0) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n < len ? (size_t)n : len - 1;
}

/* ---- the table: open addressing, linear probing, no deletion ---- */

#define SLOTS (RUBY_METAS_MAX * 2) /* load factor <= 1/2 */

struct slot {
	uint32_t pid;
	struct ruby_meta *meta; /* NULL: empty */
};

struct ruby_metas {
	struct slot *slots;
	size_t count;
	uint64_t refused;
};

static size_t slot_of(uint32_t pid, uint64_t addr)
{
	uint64_t h = (addr ^ (uint64_t)pid << 40) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (SLOTS - 1);
}

struct ruby_metas *ruby_metas_new(void)
{
	struct ruby_metas *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->slots = calloc(SLOTS, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	return t;
}

static void clear(struct ruby_metas *t)
{
	for (size_t i = 0; i < SLOTS; i++) {
		free(t->slots[i].meta);
		t->slots[i].meta = NULL;
	}
	t->count = 0;
}

void ruby_metas_free(struct ruby_metas *t)
{
	if (!t)
		return;
	clear(t);
	free(t->slots);
	free(t);
}

static struct slot *find(const struct ruby_metas *t, uint32_t pid, uint64_t addr)
{
	size_t i = slot_of(pid, addr);

	for (;; i = (i + 1) & (SLOTS - 1)) {
		struct slot *s = &t->slots[i];

		if (!s->meta || (s->pid == pid && s->meta->addr == addr))
			return s;
	}
}

int ruby_metas_put(struct ruby_metas *t, uint32_t pid, const void *rec, size_t len)
{
	struct ruby_meta *m = malloc(sizeof(*m));
	struct slot *s;

	if (!m)
		return -ENOMEM;
	if (ruby_meta_decode(rec, len, m) < 0) {
		free(m);
		t->refused++;
		return -EBADMSG;
	}
	s = find(t, pid, m->addr);
	if (s->meta) {
		free(s->meta); /* the address was reused */
	} else {
		if (t->count == RUBY_METAS_MAX) {
			clear(t);
			s = find(t, pid, m->addr);
		}
		t->count++;
	}
	s->pid = pid;
	s->meta = m;
	return 0;
}

const struct ruby_meta *ruby_metas_get(const struct ruby_metas *t, uint32_t pid, uint64_t addr,
				       uint64_t checksum)
{
	const struct slot *s = find(t, pid, addr);

	if (!s->meta || (checksum && s->meta->checksum != checksum))
		return NULL;
	return s->meta;
}

size_t ruby_metas_count(const struct ruby_metas *t)
{
	return t->count;
}

uint64_t ruby_metas_refused(const struct ruby_metas *t)
{
	return t->refused;
}
