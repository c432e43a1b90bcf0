/* fuzz-hotspot-vmstructs.c - fuzzes the HotSpot Loader
 * (symbolizer/interp/hotspot/hotspot_vmstructs.c, hotspot_layout.c): the
 * vmStructs tables, relocations, static initializer code and ELF
 * structure of a libjvm.so, on a sparse image as the service holds one
 * (some ranges arrived, the rest reads as zeros and must not be trusted).
 *
 * Input: u8 n, n bytes of path (n == 0: "libjvm.so"), u32 LE file size
 * (capped), then records until the end: u32 LE offset, u16 LE length,
 * that many bytes, put into the image at offset. The seed is a small
 * synthetic libjvm with JDK 17's values (make-hotspot-corpus.py).
 *
 * A success must give a config the walker can use (a JDK release in the
 * accepted range, the format byte, the config's size); a failure must say
 * why.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "file_image.h"
#include "hotspot.h"
#include "hotspot_layout.h"
#include "interp_loader.h"
#include "interp_ops.h"

#define FUZZ_MAX_INPUT (1u << 20)
#define FUZZ_MAX_FILE (64u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[256] = "libjvm.so";
	struct file_image *img;
	struct hotspot_layout l;
	struct interp_data d;
	struct interp_config c;
	struct elf_need need = { 0 };
	const char *reason = NULL;
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
		(void)file_image_put(img, off, data + pos, len);
		pos += len;
	}

	r = hotspot_layout_need(img, &need, &reason);
	if (r < 0 && r != -EAGAIN && !reason)
		abort();
	if (need.n > ELF_ANALYSIS_MAX_RANGES)
		abort();
	r = hotspot_layout_read(img, &l, &reason);
	if (r == 0 && (l.major < SONDE_HOTSPOT_MAJOR_MIN || l.major > SONDE_HOTSPOT_MAJOR_MAX ||
		       l.off.major != l.major ||
		       l.off.nmethod_compile_id4 > SONDE_HOTSPOT_COMPILE_ID4_MAX))
		abort();
	if (r < 0 && !reason)
		abort();
	(void)interp_loader_need(img, path, &need);
	r = interp_loader_analyse(img, path, &d, &reason);
	if (r == 0 && d.kind == SONDE_INTERP_HOTSPOT) {
		if (interp_ops_of(d.kind)->config(&d, &c) != 0 ||
		    c.layout_len != sizeof(struct sonde_hotspot_offsets))
			abort();
	}
	file_image_free(img);
	return 0;
}
