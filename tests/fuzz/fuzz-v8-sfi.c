/* fuzz-v8-sfi.c - fuzzes the decoder of the SharedFunctionInfo records
 * BPF copies (symbolizer/interp/v8/v8_sfi.c), frame naming from them and
 * the per-session table.
 * Input: byte 0 (bit 0 set: write a valid size and version into the
 * header, so the fuzzer reaches the fields behind them; bits 4-7: the
 * pid), the rest the record, zero-padded or cut to the record's size. A
 * decoded record must give a printable name holding no ';' or newline
 * that fits its buffer; the table must find what it kept.
 *
 * Build with libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSONDE_LIBFUZZER \
 *     -D_GNU_SOURCE -Isymbolizer/interp/v8 tests/fuzz/fuzz-v8-sfi.c \
 *     symbolizer/interp/v8/v8_sfi.c
 * Without SONDE_LIBFUZZER, fuzz-main.c replays the files named on the
 * command line (the checked-in corpus, tests/fuzz/corpus/v8_sfi).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "v8_sfi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct interp_records *table;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t rec[V8_META_SIZE] = { 0 };
	struct v8_sfi s;
	char name[2048];
	size_t n;

	if (size < 1)
		return 0;
	if (!table && !(table = v8_sfis_new()))
		abort();
	n = size - 1 < V8_META_SIZE ? size - 1 : V8_META_SIZE;
	memcpy(rec, data + 1, n);
	if (data[0] & 1) {
		rec[0] = V8_META_SIZE & 0xff;
		rec[1] = V8_META_SIZE >> 8;
		rec[2] = V8_META_VERSION;
	}
	if (v8_sfi_decode(rec, sizeof(rec), &s) == 0) {
		n = v8_sfi_frame_name(&s, (int32_t)data[0], name, sizeof(name));
		if (n != strlen(name) || strchr(name, ';') || strchr(name, '\n') ||
		    strlen(s.name) >= sizeof(s.name) || strlen(s.script) >= sizeof(s.script))
			abort();
		if (interp_records_put(table, data[0] >> 4, rec, sizeof(rec)) != 0 ||
		    !v8_sfis_get(table, data[0] >> 4, s.addr))
			abort();
	} else if (interp_records_put(table, 0, rec, sizeof(rec)) == 0) {
		abort(); /* the table must refuse what the decoder refused */
	}
	v8_sfi_frame_name(NULL, 0, name, sizeof(name));
	return 0;
}
