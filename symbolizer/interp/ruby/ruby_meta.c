/* ruby_meta.c - Ruby iseq and cfunc records from BPF (ruby_meta.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "ruby_meta.h"

#define OFF(f) __builtin_offsetof(struct sonde_ruby_meta, f)

int ruby_meta_decode(const void *rec, size_t len, struct ruby_meta *ret)
{
	const uint8_t *p = rec;
	uint16_t llen, blen, clen, plen, slen, nlen;
	uint8_t type, isz;

	if (!rec || len != sizeof(struct sonde_ruby_meta) ||
	    interp_records_le16(p) != sizeof(struct sonde_ruby_meta) ||
	    p[OFF(version)] != SONDE_RUBY_META_VERSION)
		return -EBADMSG;
	type = p[OFF(type)];
	isz = p[OFF(insn_info_size)];
	llen = interp_records_le16(p + OFF(label_len));
	blen = interp_records_le16(p + OFF(base_len));
	clen = interp_records_le16(p + OFF(class_len));
	plen = interp_records_le16(p + OFF(path_len));
	slen = interp_records_le16(p + OFF(succ_len));
	nlen = interp_records_le16(p + OFF(lines_len));
	if ((type != SONDE_RUBY_META_ISEQ && type != SONDE_RUBY_META_CFUNC) ||
	    llen > SONDE_RUBY_META_LABEL || blen > SONDE_RUBY_META_BASE ||
	    clen > SONDE_RUBY_META_CLASS || plen > SONDE_RUBY_META_PATH ||
	    slen > SONDE_RUBY_META_SUCC || nlen > SONDE_RUBY_META_LINES ||
	    interp_records_le32(p + OFF(first_lineno)) > INT32_MAX ||
	    (nlen && (isz < 4 || nlen % isz)))
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->type = type;
	ret->flags = p[OFF(flags)];
	ret->insn_info_size = isz;
	ret->first_lineno = (int32_t)interp_records_le32(p + OFF(first_lineno));
	ret->addr = interp_records_le64(p + OFF(addr));
	ret->checksum = interp_records_le64(p + OFF(checksum));
	ret->iseq_size = interp_records_le32(p + OFF(iseq_size));
	ret->insns_size = interp_records_le32(p + OFF(insns_size));
	interp_records_copy_text(ret->label, p + OFF(label), llen,
				 ret->flags & SONDE_RUBY_META_LABEL_CUT, 0);
	interp_records_copy_text(ret->base, p + OFF(base), blen, false, 0);
	ret->base_len = (uint16_t)strlen(ret->base);
	interp_records_copy_text(ret->klass, p + OFF(klass), clen,
				 ret->flags & SONDE_RUBY_META_CLASS_CUT, 0);
	interp_records_copy_text(ret->path, p + OFF(path), plen,
				 ret->flags & SONDE_RUBY_META_PATH_CUT, 0);
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
		return (int64_t)((interp_records_le64(t + (x / 9) * 8) >> ((x % 9) * 7)) & 0x7f);
	}
	bi = (x - 54) / 512;
	bit = (x - 54) % 512;
	sub = bit / 64;
	off = 48 + 80 * bi;
	if (bi > 2 || off + 80 > n)
		return -1;
	ranks = interp_records_le64(t + off + 8);
	small = sub ? (ranks >> ((sub - 1) * 9)) & 0x1ff : 0;
	bits = interp_records_le64(t + off + 16 + sub * 8) << (63 - bit % 64);
	return (int64_t)interp_records_le32(t + off) + (int64_t)small + __builtin_popcountll(bits);
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
	line = (int32_t)interp_records_le32(m->lines + (size_t)entry * m->insn_info_size);
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

static int metas_decode(const void *rec, size_t len, void *value, struct interp_records_key *key)
{
	struct ruby_meta *m = value;

	if (ruby_meta_decode(rec, len, m) < 0)
		return -EBADMSG;
	key->addr = m->addr;
	key->checksum = m->checksum;
	return 0;
}

struct interp_records *ruby_metas_new(void)
{
	return interp_records_new(RUBY_METAS_MAX, sizeof(struct ruby_meta), metas_decode);
}

const struct ruby_meta *ruby_metas_get(const struct interp_records *t, uint32_t pid, uint64_t addr,
				       uint64_t checksum)
{
	return interp_records_get(t, pid, addr, 0, checksum);
}
