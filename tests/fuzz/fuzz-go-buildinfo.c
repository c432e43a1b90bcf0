/* fuzz-go-buildinfo.c - fuzzes the reader of a Go executable's
 * .go.buildinfo section (go_buildinfo_version() in
 * symbolizer/go/buildinfo.c): bytes the target's build controls. Any
 * input must give a terminated, printable version that fits the buffer,
 * or be rejected; and the answer must not depend on the buffer's size
 * beyond the version fitting in it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buildinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t check(const uint8_t *data, size_t size, char *ver, size_t cap)
{
	int r;
	size_t n;

	memset(ver, 'x', cap);
	r = go_buildinfo_version(data, size, ver, cap);
	if (r == -EBADMSG)
		return 0;
	if (r != 0)
		abort();
	n = strnlen(ver, cap);
	if (n == 0 || n == cap)
		abort(); /* empty, or not terminated inside the buffer */
	for (size_t i = 0; i < n; i++)
		if (ver[i] < 0x21 || ver[i] > 0x7e)
			abort();
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char big[32], small[9];
	size_t nb, ns;

	nb = check(data, size, big, sizeof(big));
	ns = check(data, size, small, sizeof(small));
	/* A version the small buffer holds reads the same in the big one. */
	if (ns && (nb != ns || memcmp(big, small, ns)))
		abort();
	if (nb && nb < sizeof(small) && !ns)
		abort();
	/* cap 0 and 1 hold no version. */
	if (check(data, size, big, 1))
		abort();
	return 0;
}
