/* fuzz-php-func.c - fuzzes the decoder of the PHP function records BPF
 * copies (symbolizer/interp/php/php_func.c) and frame naming from them.
 * Input: byte 0 (bit 0 set: write a valid size and version into the
 * header, so the fuzzer reaches the fields behind them; bits 4-7 the
 * pid), bytes 1-4 the line to name, the rest the record, zero-padded or
 * cut to the record's size. A decoded record must name the line with a
 * printable string holding no ';' or newline; the table must find what
 * it kept.
 *
 * Build with libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSONDE_LIBFUZZER \
 *     -D_GNU_SOURCE -Isymbolizer/interp/php -Icommon tests/fuzz/fuzz-php-func.c \
 *     symbolizer/interp/php/php_func.c common/utf8.c
 * Without SONDE_LIBFUZZER, fuzz-main.c replays the files named on the
 * command line (the checked-in corpus, tests/fuzz/corpus/php_func, made by
 * make-php-func-corpus.py).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "php_func.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct interp_records *table;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *rec;
	struct php_func f;
	uint32_t line;
	char name[1024];
	size_t n;

	if (size < 5)
		return 0;
	if (!table)
		table = php_funcs_new();
	rec = calloc(1, PHP_META_SIZE);
	if (!rec || !table)
		abort();
	memcpy(&line, data + 1, 4);
	n = size - 5 < PHP_META_SIZE ? size - 5 : PHP_META_SIZE;
	memcpy(rec, data + 5, n);
	if (data[0] & 1) {
		rec[0] = PHP_META_SIZE & 0xff;
		rec[1] = PHP_META_SIZE >> 8;
		rec[2] = PHP_META_VERSION;
	}
	if (php_func_decode(rec, PHP_META_SIZE, &f) == 0) {
		n = php_func_frame_name(&f, line, name, sizeof(name));
		if (n != strlen(name) || strchr(name, ';') || strchr(name, '\n'))
			abort();
		if (interp_records_put(table, data[0] >> 4, rec, PHP_META_SIZE) != 0 ||
		    !php_funcs_get(table, data[0] >> 4, f.addr, f.checksum))
			abort();
	} else if (interp_records_put(table, 0, rec, PHP_META_SIZE) == 0) {
		abort(); /* the table must refuse what the decoder refused */
	}
	php_func_frame_name(NULL, line, name, sizeof(name));
	free(rec);
	return 0;
}
