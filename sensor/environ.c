/* environ.c - see environ.h. */
#include <string.h>

#include "environ.h"

int environ_find(const char *buf, size_t len, const char *name, char *out, size_t out_size)
{
	size_t nlen = strlen(name), i = 0;

	if (out_size)
		out[0] = '\0';
	while (i < len) {
		const char *e = buf + i, *nul = memchr(e, '\0', len - i);
		size_t elen = nul ? (size_t)(nul - e) : len - i;

		if (elen > nlen && !memcmp(e, name, nlen) && e[nlen] == '=') {
			size_t vlen = elen - nlen - 1;

			if (out_size == 0)
				return 0;
			if (vlen > out_size - 1)
				vlen = out_size - 1;
			memcpy(out, e + nlen + 1, vlen);
			out[vlen] = '\0';
			return (int)vlen;
		}
		i += elen + 1;
	}
	return -1;
}
