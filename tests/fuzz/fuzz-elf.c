/* fuzz-elf.c - fuzzes the resumable ELF analysis (symbolizer/elf) and the
 * unwind table compiler (symbolizer/unwind: .eh_frame, .debug_frame,
 * .gopclntab) the way the service drives them: an empty image of the
 * input's size, then step both, satisfy the named ranges (both lists
 * folded) from the input, put, step again. A finished symtab is also
 * looked up, serialised and deserialised; a finished table must be
 * sorted and survive its own blob.
 *
 * Build: tests/fuzz/run (meson, -Dfuzzing=true).
 * Without SONDE_LIBFUZZER, fuzz-main.c's main() replays the files named on
 * the command line (for a corpus run under meson, or to reproduce a
 * crash).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_unwind_table.h"
#include "elf_analysis.h"
#include "file_image.h"
#include "symtab.h"
#include "unwind_analysis.h"
#include "unwind_table.h"

/* Inputs above this are not interesting and only slow the fuzzer. */
#define FUZZ_MAX_INPUT (1u << 20)
/* The analysis has 4 layers plus overflow of the range list; far more
 * steps than this would be a loop. */
#define FUZZ_MAX_STEPS 64

static void exercise(const struct symtab *t, size_t size)
{
	struct symtab_lookup lk;
	const char *names[4];
	struct symtab *u;
	uint32_t crc;
	uint64_t va;
	size_t blob_size, len;
	void *blob;

	for (uint64_t a = 0; a < 4 * (uint64_t)size; a += 61) {
		if (symtab_lookup(t, a, &lk) == 0) {
			if (lk.offset != a - lk.start || strlen(lk.name) == 0)
				abort();
			symtab_names(t, lk.start, names, 4);
		}
		symtab_offset_to_vaddr(t, a, &va);
	}
	symtab_build_id(t, &len);
	if (len > 64 || strlen(symtab_debuglink(t, &crc)) > 255)
		abort();
	blob = symtab_serialize(t, &blob_size);
	if (!blob)
		return;
	u = symtab_deserialize(blob, blob_size);
	if (!u || symtab_count(u) != symtab_count(t))
		abort(); /* our own blob must always load */
	symtab_free(u);
	free(blob);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct file_image *img;
	struct symtab *t = NULL;
	struct unwind_table *ut = NULL;
	struct elf_need need, uneed;
	const char *reason = NULL, *ureason = NULL;
	int rc = -EAGAIN, urc = -EAGAIN, steps;

	if (size == 0 || size > FUZZ_MAX_INPUT)
		return 0;
	img = file_image_new(size);
	if (!img)
		return 0;
	for (steps = 0; steps < FUZZ_MAX_STEPS; steps++) {
		need.n = 0;
		if (rc == -EAGAIN)
			rc = elf_analysis_step(img, &need, &t, &reason);
		if (urc == -EAGAIN) {
			urc = unwind_analysis_step(img, NULL, &uneed, &ut, NULL, &ureason);
			if (urc == -EAGAIN && (uneed.n == 0 || uneed.n > ELF_ANALYSIS_MAX_RANGES))
				abort(); /* no progress possible */
			for (size_t i = 0; urc == -EAGAIN && i < uneed.n; i++)
				elf_need_add(&need, uneed.ranges[i].offset, uneed.ranges[i].length);
		}
		if (rc != -EAGAIN && urc != -EAGAIN)
			break;
		if (need.n == 0 || need.n > ELF_ANALYSIS_MAX_RANGES)
			abort(); /* no progress possible */
		for (size_t i = 0; i < need.n; i++) {
			const struct elf_range *r = &need.ranges[i];

			if (r->length == 0 || r->offset > size || r->length > size - r->offset)
				abort(); /* asked for bytes outside the file */
			if (file_image_put(img, r->offset, data + r->offset, r->length) != 0)
				abort();
		}
	}
	if (steps == FUZZ_MAX_STEPS)
		abort(); /* did not finish */
	if ((rc == -EBADMSG && !reason) || (urc == -EBADMSG && !ureason))
		abort();
	if (rc == 0) {
		exercise(t, size);
		symtab_free(t);
	}
	if (urc == 0) {
		if (unwind_table_count(ut) == 0)
			abort(); /* a finished table has a row */
		check_unwind_table(ut);
		unwind_table_free(ut);
	}
	file_image_free(img);
	return 0;
}
