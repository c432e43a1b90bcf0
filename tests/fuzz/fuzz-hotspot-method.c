/* fuzz-hotspot-method.c - fuzzes the decoder of the Java method records
 * BPF copies (symbolizer/interp/hotspot/hotspot_method.c), the line
 * number table and frame naming from them.
 * Input: byte 0 (bit 0 set: write a valid size and version into the
 * header, so the fuzzer reaches the fields behind them), bytes 1-2 the
 * bci to name, the rest the record, zero-padded or cut to the record's
 * size. A decoded record must name the bci with a printable string
 * holding no ';' or newline; the table must find what it kept; the line
 * table decoder also runs over the raw input (bit 1 of byte 0: as JDK
 * 20+'s numbers).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hotspot_method.h"
#include "interp_records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct interp_records *table;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *rec;
	struct hotspot_method m;
	uint32_t bci;
	int32_t line;
	char name[2048];
	size_t n;

	if (size < 3)
		return 0;
	if (!table)
		table = hotspot_methods_new();
	rec = calloc(1, HOTSPOT_METHOD_SIZE);
	if (!rec || !table)
		abort();
	bci = (uint32_t)data[1] | (uint32_t)data[2] << 8;
	n = size - 3 < HOTSPOT_METHOD_SIZE ? size - 3 : HOTSPOT_METHOD_SIZE;
	memcpy(rec, data + 3, n);
	if (data[0] & 1) {
		rec[0] = HOTSPOT_METHOD_SIZE & 0xff;
		rec[1] = HOTSPOT_METHOD_SIZE >> 8;
		rec[2] = SONDE_HOTSPOT_METHOD_VERSION;
	}
	(void)hotspot_line_for_bci(data + 3, size - 3, data[0] & 2, bci, &line);
	if (hotspot_method_decode(rec, HOTSPOT_METHOD_SIZE, &m) == 0) {
		n = hotspot_method_frame_name(&m, bci, name, sizeof(name));
		if (n != strlen(name) || strchr(name, ';') || strchr(name, '\n'))
			abort();
		n = hotspot_method_system_name(&m, name, sizeof(name));
		if (n != strlen(name) || strchr(name, '\n'))
			abort();
		if (interp_records_put(table, data[0] >> 4, rec, HOTSPOT_METHOD_SIZE) != 0 ||
		    !hotspot_methods_get(table, data[0] >> 4, m.method, 0))
			abort();
	} else if (interp_records_put(table, 0, rec, HOTSPOT_METHOD_SIZE) == 0) {
		abort(); /* the table must refuse what the decoder refused */
	}
	hotspot_method_frame_name(NULL, bci, name, sizeof(name));
	free(rec);
	return 0;
}
