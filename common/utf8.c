/* utf8.c - see utf8.h. */
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

size_t utf8_char_len(const uint8_t *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (n == 0)
		return 0;
	if (s[0] < 0x80)
		return s[0] ? 1 : 0; /* NUL would end a C string: escaped */
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0; /* continuation byte, 0xc0/0xc1 (overlong), 0xf5.. */
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates, beyond U+10FFFF. */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* The bytes kept as they are at s: a valid UTF-8 character that is not a
 * C0 control or DEL (an ESC in a thread name would otherwise reach a
 * terminal through `sonde status`); 0: escape the byte. */
static size_t kept_len(const uint8_t *s, size_t n)
{
	if (s[0] < 0x20 || s[0] == 0x7f)
		return 0;
	return s[0] < 0x80 ? 1 : utf8_char_len(s, n);
}

bool utf8_valid(const char *s, size_t n)
{
	const uint8_t *u = (const uint8_t *)s;

	for (size_t i = 0; i < n;) {
		size_t k = kept_len(u + i, n - i);

		if (k == 0)
			return false;
		i += k;
	}
	return true;
}

static const char hex[] = "0123456789abcdef";

size_t utf8_escape(char *dst, size_t cap, const char *src, size_t n)
{
	const uint8_t *u = (const uint8_t *)src;
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		size_t k = kept_len(u + i, n - i);

		if (k == 0) {
			if (o + 4 >= cap)
				break;
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[u[i] >> 4];
			dst[o++] = hex[u[i] & 0xf];
			i++;
			continue;
		}
		if (o + k >= cap)
			break;
		memcpy(dst + o, u + i, k);
		o += k;
		i += k;
	}
	if (cap)
		dst[o] = '\0';
	return o;
}

size_t utf8_escaped_len(const char *src, size_t n)
{
	const uint8_t *u = (const uint8_t *)src;
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		size_t k = kept_len(u + i, n - i);

		o += k ? k : 4;
		i += k ? k : 1;
	}
	return o;
}

char *utf8_escape_dup(const char *src, size_t max_len)
{
	size_t n = src ? strlen(src) : 0;
	size_t len = utf8_escaped_len(src, n);
	char *dst;

	if (len > max_len)
		len = max_len;
	dst = malloc(len + 1);
	if (!dst)
		return NULL;
	utf8_escape(dst, len + 1, src ? src : "", n);
	return dst;
}
