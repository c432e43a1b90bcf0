/* v8_sfi.c - V8 SharedFunctionInfo records from BPF (v8_sfi.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "v8_sfi.h"

/* Appends code point c as printable UTF-8 at dst + *o: controls, DEL,
 * ';' and surrogates become '?'. dst has room for 4 more bytes. */
static void put_char(char *dst, size_t *o, uint32_t c)
{
	if (c < 0x20 || c == 0x7f || c == ';' || (c >= 0x80 && c < 0xa0) ||
	    (c >= 0xd800 && c < 0xe000) || c > 0x10ffff) {
		dst[(*o)++] = '?';
	} else if (c < 0x80) {
		dst[(*o)++] = (char)c;
	} else if (c < 0x800) {
		dst[(*o)++] = (char)(0xc0 | c >> 6);
		dst[(*o)++] = (char)(0x80 | (c & 0x3f));
	} else if (c < 0x10000) {
		dst[(*o)++] = (char)(0xe0 | c >> 12);
		dst[(*o)++] = (char)(0x80 | ((c >> 6) & 0x3f));
		dst[(*o)++] = (char)(0x80 | (c & 0x3f));
	} else {
		dst[(*o)++] = (char)(0xf0 | c >> 18);
		dst[(*o)++] = (char)(0x80 | ((c >> 12) & 0x3f));
		dst[(*o)++] = (char)(0x80 | ((c >> 6) & 0x3f));
		dst[(*o)++] = (char)(0x80 | (c & 0x3f));
	}
}

/* n bytes of a V8 string (Latin-1, or UTF-16LE when two_byte) as
 * printable UTF-8 into dst, which has room for 2 * n + 4 bytes (a Latin-1
 * byte takes at most 2, a UTF-16 unit 3, a pair 4). */
static void copy_string(char *dst, const uint8_t *src, size_t n, bool two_byte, bool cut)
{
	size_t o = 0;

	if (!two_byte) {
		for (size_t i = 0; i < n; i++)
			put_char(dst, &o, src[i]);
	} else {
		for (size_t i = 0; i + 1 < n; i += 2) {
			uint32_t c = interp_records_le16(src + i);

			if (c >= 0xd800 && c < 0xdc00 && i + 3 < n) {
				uint32_t lo = interp_records_le16(src + i + 2);

				if (lo >= 0xdc00 && lo < 0xe000) {
					c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
					i += 2;
				}
			}
			put_char(dst, &o, c);
		}
	}
	if (cut) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o] = '\0';
}

int v8_sfi_decode(const void *rec, size_t len, struct v8_sfi *ret)
{
	const uint8_t *p = rec;
	uint16_t nlen, slen;
	uint8_t flags;

	if (!rec || len != V8_META_SIZE || interp_records_le16(p) != V8_META_SIZE ||
	    p[2] != V8_META_VERSION)
		return -EBADMSG;
	flags = p[3];
	nlen = interp_records_le16(p + 4);
	slen = interp_records_le16(p + 6);
	if (nlen > V8_META_NAME || slen > V8_META_SCRIPT ||
	    ((flags & V8_META_NAME_TWO_BYTE) && (nlen & 1)) ||
	    ((flags & V8_META_SCRIPT_TWO_BYTE) && (slen & 1)))
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->flags = flags;
	ret->addr = interp_records_le64(p + 8);
	ret->checksum = interp_records_le64(p + 16);
	p += V8_META_HEADER;
	copy_string(ret->name, p, nlen, flags & V8_META_NAME_TWO_BYTE, flags & V8_META_NAME_CUT);
	p += V8_META_NAME;
	copy_string(ret->script, p, slen, flags & V8_META_SCRIPT_TWO_BYTE,
		    flags & V8_META_SCRIPT_CUT);
	return 0;
}

size_t v8_sfi_frame_name(const struct v8_sfi *s, int32_t line, char *buf, size_t len)
{
	const char *name;
	int n;

	if (!len)
		return 0;
	if (!s) {
		n = snprintf(buf, len, "%s", V8_UNKNOWN_FRAME);
	} else {
		name = s->name[0] ? s->name : V8_ANONYMOUS;
		if (s->script[0] && line > 0)
			n = snprintf(buf, len, "%s (%s:%d)", name, s->script, (int)line);
		else if (s->script[0])
			n = snprintf(buf, len, "%s (%s)", name, s->script);
		else
			n = snprintf(buf, len, "%s", name);
	}
	if (n < 0) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n < len ? (size_t)n : len - 1;
}

static int sfis_decode(const void *rec, size_t len, void *value, struct interp_records_key *key)
{
	struct v8_sfi *s = value;

	if (v8_sfi_decode(rec, len, s) < 0)
		return -EBADMSG;
	key->addr = s->addr;
	key->checksum = s->checksum;
	return 0;
}

struct interp_records *v8_sfis_new(void)
{
	return interp_records_new(V8_SFIS_MAX, sizeof(struct v8_sfi), sfis_decode);
}

const struct v8_sfi *v8_sfis_get(const struct interp_records *t, uint32_t pid, uint64_t addr)
{
	return interp_records_get(t, pid, addr, 0, 0);
}
