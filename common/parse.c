/* parse.c - strict number parsers (see parse.h).
 *
 * strtoull() alone accepts leading blanks, a sign (and negates "-1" into
 * UINT64_MAX) and trailing garbage; these wrappers reject all of that, so
 * a number is accepted only if the whole string is digits of the base.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

static int digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'Z')
		return c - 'A' + 10;
	return 99;
}

/* The first character must be a digit of the base (so no blank, no sign);
 * strtoull then handles "0x" (base 16 or 0) and octal (base 0). */
static int parse_u64_checked(const char *s, int base, uint64_t *ret)
{
	unsigned long long v;
	char *end = NULL;

	if (!s || !*s || !ret)
		return -EINVAL;
	if (base != 0 && (base < 2 || base > 36))
		return -EINVAL;
	if (digit_value(s[0]) >= (base == 0 ? 10 : base))
		return -EINVAL;

	errno = 0;
	v = strtoull(s, &end, base);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno != 0 || end == s || *end != '\0')
		return -EINVAL;
	*ret = (uint64_t)v;
	return 0;
}

int parse_u64(const char *s, int base, uint64_t *ret)
{
	return parse_u64_checked(s, base, ret);
}

int parse_u32(const char *s, int base, uint32_t *ret)
{
	uint64_t v;
	int r;

	if (!ret)
		return -EINVAL;
	r = parse_u64_checked(s, base, &v);
	if (r < 0)
		return r;
	if (v > UINT32_MAX)
		return -ERANGE;
	*ret = (uint32_t)v;
	return 0;
}

int parse_int(const char *s, int *ret)
{
	const char *digits = s;
	long long v;
	char *end = NULL;

	if (!s || !*s || !ret)
		return -EINVAL;
	if (*digits == '-')
		digits++;
	/* Base 10 only: "010" is ten, not eight. */
	if (*digits < '0' || *digits > '9')
		return -EINVAL;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno != 0 || *end != '\0')
		return -EINVAL;
	if (v < INT_MIN || v > INT_MAX)
		return -ERANGE;
	*ret = (int)v;
	return 0;
}

int parse_u64_n(const char *s, size_t len, int base, uint64_t *ret)
{
	/* The longest valid text is 64 binary digits, or a "0x" prefix with
	 * leading zeros; anything longer than this buffer is refused as
	 * out of range rather than parsed. */
	char buf[128];
	size_t n;

	if (!s || !ret)
		return -EINVAL;
	n = strnlen(s, len);
	if (n == 0)
		return -EINVAL;
	if (n >= sizeof(buf))
		return -ERANGE;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return parse_u64_checked(buf, base, ret);
}
