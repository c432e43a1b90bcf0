/* fuzz-minidebuginfo.c - fuzzes MiniDebugInfo: the xz decompression of a
 * .gnu_debugdata section (minidebug_decompress in symbolizer/elf/
 * minidebug.c), whose bytes come from the analysed file, then what
 * analysis.c's merge_minidebug() does with the output: an ELF analysis of
 * it as a whole image (at most 4 steps) and a merge of its symbols.
 * The input is the section's bytes. Whatever they are, the output stays
 * under MINIDEBUG_MAX_OUT (a small stream that inflates past it, a
 * decompression bomb, is refused), and a failure leaves the outputs
 * untouched.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf_analysis.h"
#include "file_image.h"
#include "minidebug.h"
#include "symtab.h"

/* A real .gnu_debugdata is tens of KiB; a bomb needs far less than this. */
#define FUZZ_MAX_INPUT (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* As merge_minidebug() in symbolizer/core/analysis.c. */
static void analyse(const uint8_t *buf, size_t len)
{
	struct file_image *img = NULL;
	struct symtab *dt = NULL, *merged = NULL;
	struct symtab_lookup lk;
	struct elf_need need = { 0 };
	int r = -EAGAIN;

	img = file_image_new(len);
	if (!img || file_image_put(img, 0, buf, len) < 0)
		goto cleanup;
	for (int i = 0; i < 4 && r == -EAGAIN; i++)
		r = elf_analysis_step(img, &need, &dt, NULL);
	if (r != 0 && r != -EAGAIN && r != -EBADMSG && r != -ENOMEM)
		abort();
	if (r != 0)
		goto cleanup;
	merged = symtab_merge_debug(dt, dt);
	if (merged && symtab_count(merged) < symtab_count(dt))
		abort(); /* a merge loses no function */
	for (uint64_t a = 0; merged && a < 2 * (uint64_t)len; a += 97)
		if (symtab_lookup(merged, a, &lk) == 0 && (!lk.name || lk.offset != a - lk.start))
			abort();
cleanup:
	symtab_free(merged);
	symtab_free(dt);
	file_image_free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *out = (uint8_t *)&size; /* a sentinel: untouched on failure */
	size_t len = 12345;
	int r;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	r = minidebug_decompress(data, size, &out, &len);
	if (r != 0) {
		if ((r != -EBADMSG && r != -ENOMEM) || out != (uint8_t *)&size || len != 12345)
			abort();
		return 0;
	}
	if (!out || len > MINIDEBUG_MAX_OUT)
		abort();
	if (len > 0)
		analyse(out, len);
	free(out);
	return 0;
}
