/* fuzz-perl-meta.c - fuzzes the decoder of the sub and COP records the
 * Perl walker copies (symbolizer/interp/perl/perl_meta.c) and frame
 * naming from them. Input: byte 0 (bit 0 set: write a valid size and
 * version into the header, so the fuzzer reaches the fields behind them;
 * bits 4-7 the pid), bytes 1-8 a frame word to name, the rest the record,
 * zero-padded or cut to the record's size. Every name must be printable
 * with no ';' or newline; a decoded record must be found again by the
 * word that names it; the table must refuse what the decoder refused.
 * Without SONDE_LIBFUZZER, fuzz-main.c replays the files named on the
 * command line (the checked-in corpus, tests/fuzz/corpus/perl_meta, made by
 * make-perl-meta-corpus.py).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "perl5.h"
#include "perl_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct interp_records *table;

static void check_name(const struct perl_meta *m, uint64_t word)
{
	char name[1024];
	size_t n = perl_meta_frame_name(m, word, name, sizeof(name));

	if (n != strlen(name) || strchr(name, ';') || strchr(name, '\n'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *rec;
	struct perl_meta m;
	uint64_t word;
	uint32_t pid;
	size_t n;

	if (size < 9)
		return 0;
	if (!table)
		table = perl_metas_new();
	rec = calloc(1, PERL_META_SIZE);
	if (!rec || !table)
		abort();
	memcpy(&word, data + 1, 8);
	pid = data[0] >> 4;
	n = size - 9 < PERL_META_SIZE ? size - 9 : PERL_META_SIZE;
	memcpy(rec, data + 9, n);
	if (data[0] & 1) {
		rec[0] = PERL_META_SIZE & 0xff;
		rec[1] = PERL_META_SIZE >> 8;
		rec[2] = PERL_META_VERSION;
	}
	if (perl_meta_decode(rec, PERL_META_SIZE, &m) == 0) {
		uint64_t own = SONDE_PERL_FRAME(m.addr, m.type == PERL_META_SUB ? SONDE_PERL_FRAME_SUB
									     : SONDE_PERL_FRAME_MAIN,
						word >> 48, word & SONDE_PERL_FRAME_ENTRY);

		check_name(&m, word);
		check_name(&m, own);
		if (interp_records_put(table, pid, rec, PERL_META_SIZE) != 0)
			abort();
		if (m.addr == SONDE_PERL_FRAME_ADDR(m.addr) &&
		    !perl_metas_get(table, pid, own, m.checksum))
			abort();
	} else if (interp_records_put(table, pid, rec, PERL_META_SIZE) == 0) {
		abort();
	}
	check_name(perl_metas_get(table, pid, word, 0), word);
	check_name(NULL, word);
	free(rec);
	return 0;
}
