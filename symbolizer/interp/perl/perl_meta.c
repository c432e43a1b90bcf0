/* perl_meta.c - Perl sub and COP records from BPF (perl_meta.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "perl5.h"
#include "perl_meta.h"

_Static_assert(PERL_META_SIZE == sizeof(struct sonde_perl_meta), "perl_meta size");

int perl_meta_decode(const void *rec, size_t len, struct perl_meta *ret)
{
	const uint8_t *p = rec;
	uint16_t nlen, plen, flen;
	uint8_t type, flags;

	if (!rec || len != PERL_META_SIZE || interp_records_le16(p) != PERL_META_SIZE ||
	    p[2] != PERL_META_VERSION)
		return -EBADMSG;
	type = p[3];
	nlen = interp_records_le16(p + 24);
	plen = interp_records_le16(p + 26);
	flen = interp_records_le16(p + 28);
	flags = p[30];
	if ((type != PERL_META_SUB && type != PERL_META_COP) || nlen > PERL_META_NAME ||
	    plen > PERL_META_PACKAGE || flen > PERL_META_FILE)
		return -EBADMSG;
	if (type == PERL_META_SUB ? !nlen : (nlen || plen))
		return -EBADMSG; /* a sub has a name, a COP none */
	memset(ret, 0, sizeof(*ret));
	ret->type = type;
	ret->flags = flags;
	ret->addr = interp_records_le64(p + 8);
	ret->checksum = interp_records_le64(p + 16);
	p += PERL_META_HEADER;
	interp_records_copy_text(ret->name, p, nlen, flags & PERL_META_NAME_CUT, 0);
	interp_records_copy_text(ret->package, p + PERL_META_NAME, plen,
				 flags & PERL_META_PACKAGE_CUT, 0);
	interp_records_copy_text(ret->file, p + PERL_META_NAME + PERL_META_PACKAGE, flen,
				 flags & PERL_META_FILE_CUT, 0);
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

static int metas_decode(const void *rec, size_t len, void *value, struct interp_records_key *key)
{
	struct perl_meta *m = value;

	if (perl_meta_decode(rec, len, m) < 0)
		return -EBADMSG;
	key->addr = m->addr;
	key->checksum = m->checksum;
	key->type = m->type;
	return 0;
}

struct interp_records *perl_metas_new(void)
{
	return interp_records_new(PERL_METAS_MAX, sizeof(struct perl_meta), metas_decode);
}

const struct perl_meta *perl_metas_get(const struct interp_records *t, uint32_t pid, uint64_t word,
				       uint64_t checksum)
{
	return interp_records_get(t, pid, SONDE_PERL_FRAME_ADDR(word), meta_type_of(word),
				  checksum);
}
