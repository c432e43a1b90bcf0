/* fuzz-ruby-meta.c - fuzzes the decoder of the iseq and cfunc records BPF
 * copies (symbolizer/interp/ruby/ruby_meta.c), the line lookup through the
 * copied succinct index table and frame naming.
 * Input: byte 0 (bit 0 set: write a valid size and version into the
 * header, so the fuzzer reaches the fields behind them), bytes 1-4 the pc
 * index to name, the rest the record, zero-padded or cut to the record's
 * size. A decoded record must name the pc with a printable string holding
 * no ';' or newline; the table must find what it kept.
 *
 * Build with libFuzzer: tests/fuzz/run (meson -Dfuzzing=true). Without
 * SONDE_LIBFUZZER, fuzz-main.c replays the files named on the command
 * line (the checked-in corpus, tests/fuzz/corpus/ruby_meta, written by
 * make-ruby-meta-corpus.py).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "ruby_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct interp_records *table;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const size_t rsize = sizeof(struct sonde_ruby_meta);
	struct ruby_meta *m;
	uint8_t *rec;
	uint32_t pc;
	char name[2048];
	size_t n;

	if (size < 5)
		return 0;
	if (!table)
		table = ruby_metas_new();
	rec = calloc(1, rsize);
	m = malloc(sizeof(*m));
	if (!rec || !m || !table)
		abort();
	memcpy(&pc, data + 1, 4);
	n = size - 5 < rsize ? size - 5 : rsize;
	memcpy(rec, data + 5, n);
	if (data[0] & 1) {
		rec[0] = rsize & 0xff;
		rec[1] = (uint8_t)(rsize >> 8);
		rec[2] = SONDE_RUBY_META_VERSION;
	}
	if (ruby_meta_decode(rec, rsize, m) == 0) {
		n = ruby_meta_frame_name(m, pc, name, sizeof(name));
		if (n != strlen(name) || strchr(name, ';') || strchr(name, '\n'))
			abort();
		(void)ruby_meta_line(m, pc & 0xffff);
		if (interp_records_put(table, data[0] >> 4, rec, rsize) != 0 ||
		    !ruby_metas_get(table, data[0] >> 4, m->addr, m->checksum))
			abort();
	} else if (interp_records_put(table, 0, rec, rsize) == 0) {
		abort(); /* the table must refuse what the decoder refused */
	}
	free(m);
	free(rec);
	return 0;
}
