/* fuzz-interp-loader.c - fuzzes the interpreter Loader
 * (interp_loader_analyse in symbolizer/interp/interp_loader.c): the
 * recognition of an interpreter by its mapped path (which the target
 * names) and by its ELF content (headers, .dynsym, .dynstr, load
 * segments), on a sparse image as the service holds one: some ranges of a
 * file have arrived, the rest reads as zeros and must not be trusted.
 *
 * Input: u8 n, n bytes of path (n == 0: "libpython3.11.so.1.0"), u32 LE
 * file size (capped), then records until the end: u32 LE offset, u16 LE
 * length, that many bytes, put into the image at offset (records outside
 * the file are dropped). The seeds are real interpreters' ranges
 * (make-interp-corpus.py), so the checked-in files stay small.
 *
 * A success must agree with the path's version and name a version with a
 * layout; a failure must say why and leave the Data untouched.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpython_layout.h"
#include "ruby_layout.h"
#include "file_image.h"
#include "interp_loader.h"

#define FUZZ_MAX_INPUT (1u << 20)
/* Address space only (file_image reserves, MAP_NORESERVE), but keep the
 * fuzzer's mappings modest. */
#define FUZZ_MAX_FILE (64u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[256] = "libpython3.11.so.1.0";
	struct file_image *img;
	struct interp_data d;
	const char *reason = NULL;
	unsigned major, minor;
	size_t pos = 0, n;
	uint32_t file_size;
	int r;

	if (size > FUZZ_MAX_INPUT || size < 1)
		return 0;
	n = data[pos++];
	if (n > size - pos)
		return 0;
	if (n > 0) {
		memcpy(path, data + pos, n);
		path[n] = '\0';
	}
	pos += n;
	if (size - pos < 4)
		return 0;
	file_size = get32(data + pos);
	pos += 4;
	if (file_size == 0 || file_size > FUZZ_MAX_FILE)
		return 0;
	img = file_image_new(file_size);
	if (!img)
		return 0;
	while (size - pos >= 6) {
		uint32_t off = get32(data + pos);
		size_t len = (size_t)data[pos + 4] | (size_t)data[pos + 5] << 8;

		pos += 6;
		if (len > size - pos)
			len = size - pos;
		(void)file_image_put(img, off, data + pos, len); /* -ERANGE: dropped */
		pos += len;
	}

	(void)interp_loader_wants(path);
	memset(&d, 0xa5, sizeof(d));
	r = interp_loader_analyse(img, path, &d, &reason);
	if (r != 0 && r != -ENOENT && r != -EPROTONOSUPPORT && r != -EBADMSG && r != -ENOMEM)
		abort();
	if ((r != 0) != (reason != NULL))
		abort(); /* a failure says why, a success does not */
	if (r == 0 && d.kind == INTERP_RUBY) {
		if (ruby_version_from_name(path, &major, &minor) != 0 || d.major != major ||
		    d.minor != minor || !ruby_layout_for(major, minor))
			abort();
	} else if (r == 0) {
		if (cpython_version_from_name(path, &major, &minor) != 0 || d.kind != INTERP_CPYTHON ||
		    d.major != major || d.minor != minor || !cpython_layout_for(major, minor))
			abort();
	} else if (d.kind != 0xa5a5a5a5u) {
		abort(); /* *ret untouched on failure */
	}
	file_image_free(img);
	return 0;
}
