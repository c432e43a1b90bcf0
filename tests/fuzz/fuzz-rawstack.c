/* fuzz-rawstack.c - fuzzes the raw stack string reader
 * (symbolizer/core/rawstack.c): the profile store hands it blobs read
 * back from SQLite, which a damaged or foreign database controls.
 * rawstack_count() and the iterator must agree, stay inside the bytes and
 * reject a damaged string whole; a string that reads back must rebuild
 * into the same bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rawstack.h"

#define FUZZ_MAX_INPUT (64u << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rawstack_builder b;
	struct rawstack_iter it;
	struct rawframe f;
	uint8_t *again = NULL;
	size_t again_len = 0;
	int n, seen = 0, r;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	n = rawstack_count(data, size);
	if (rawstack_iter_init(&it, data, size) < 0) {
		if (n != -EBADMSG)
			abort(); /* the two readers disagree on the header */
		return 0;
	}
	rawstack_begin(&b);
	while ((r = rawstack_next(&it, &f)) == 1) {
		if (f.kind == RAW_KERNEL && f.name_len &&
		    (f.name < (const char *)data || f.name + f.name_len > (const char *)data + size))
			abort(); /* a name pointing outside the string */
		if (f.system_name_len &&
		    (f.system_name < (const char *)data ||
		     f.system_name + f.system_name_len > (const char *)data + size))
			abort();
		rawstack_push(&b, &f);
		seen++;
	}
	if (r == 0 && n != seen)
		abort();
	if (r < 0 && n != -EBADMSG)
		abort();
	if (rawstack_end(&b, &again, &again_len) == 0 && r == 0) {
		/* A valid string is canonical: rebuilding gives the same bytes. */
		if (again_len != size || memcmp(again, data, size) != 0)
			abort();
	}
	free(again);
	return 0;
}
