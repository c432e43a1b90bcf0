/* fuzz-go-http.c - fuzzes the decoder of the Go probes' ring records
 * (symbolizer/probes/go_http_decode.c): bytes a target process controlled.
 * Any input must decode or be rejected, and what decodes must be
 * terminated, valid UTF-8 without control characters. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "go_http_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	if (n == cap)
		abort(); /* not terminated */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct go_http_fields f;
	const char *why;
	char buf[64];

	/* Inputs of any size; also padded to a record's size, so that the
	 * field checks are reached. */
	if (go_http_decode(data, size, &f, &why) == 0) {
		check_text(f.method, sizeof(f.method));
		check_text(f.path, sizeof(f.path));
	}
	if (size <= sizeof(struct sonde_go_http_event)) {
		uint8_t rec[sizeof(struct sonde_go_http_event)] = { 0 };

		memcpy(rec, data, size);
		if (go_http_decode(rec, sizeof(rec), &f, &why) == 0) {
			check_text(f.method, sizeof(f.method));
			check_text(f.path, sizeof(f.path));
			check_text(f.host, sizeof(f.host));
			check_text(f.scheme, sizeof(f.scheme));
			if (f.end_ns < f.start_ns)
				abort();
		} else if (!why) {
			abort();
		}
	}
	go_http_text(buf, sizeof(buf), data, size);
	check_text(buf, sizeof(buf));
	return 0;
}
