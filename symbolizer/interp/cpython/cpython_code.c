/* cpython_code.c - CPython code object records from BPF (cpython_code.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython_code.h"
#include "cpython_lines.h"
#include "interp_records.h"

int cpython_code_decode(const void *rec, size_t len, struct cpython_code *ret)
{
	const uint8_t *p = rec;
	uint16_t qlen, flen, tlen;
	uint8_t minor;

	if (!rec || len != CPYTHON_META_SIZE || interp_records_le16(p) != CPYTHON_META_SIZE ||
	    p[2] != CPYTHON_META_VERSION)
		return -EBADMSG;
	minor = p[3];
	qlen = interp_records_le16(p + 24);
	flen = interp_records_le16(p + 26);
	tlen = interp_records_le16(p + 28);
	if (minor < 10 || minor > 13 || qlen > CPYTHON_META_QUALNAME ||
	    flen > CPYTHON_META_FILENAME || tlen > CPYTHON_META_LINETABLE ||
	    interp_records_le32(p + 4) > INT32_MAX)
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->minor = minor;
	ret->firstlineno = (int32_t)interp_records_le32(p + 4);
	ret->addr = interp_records_le64(p + 8);
	ret->checksum = interp_records_le64(p + 16);
	ret->flags = p[30];
	p += CPYTHON_META_HEADER;
	interp_records_copy_text(ret->qualname, p, qlen, ret->flags & CPYTHON_META_QUALNAME_CUT, 0);
	p += CPYTHON_META_QUALNAME;
	interp_records_copy_text(ret->filename, p, flen, ret->flags & CPYTHON_META_FILENAME_CUT, 0);
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

static int codes_decode(const void *rec, size_t len, void *value, struct interp_records_key *key)
{
	struct cpython_code *c = value;

	if (cpython_code_decode(rec, len, c) < 0)
		return -EBADMSG;
	key->addr = c->addr;
	key->checksum = c->checksum;
	return 0;
}

struct interp_records *cpython_codes_new(void)
{
	return interp_records_new(CPYTHON_CODES_MAX, sizeof(struct cpython_code), codes_decode);
}

const struct cpython_code *cpython_codes_get(const struct interp_records *t, uint32_t pid,
					     uint64_t addr, uint64_t checksum)
{
	return interp_records_get(t, pid, addr, 0, checksum);
}
