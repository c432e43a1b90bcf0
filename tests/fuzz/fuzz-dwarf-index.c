/* fuzz-dwarf-index.c - fuzzes the source index builder (symbolizer/dwarf)
 * on whole files: libdw reading units and DIEs, our .debug_line reader,
 * the symbol table, the sweep that flattens scopes; then lookups, and the
 * blob's round trip. The input is also read as a line program on its own
 * (debug_line_read at offset 0) and as a cache blob
 * (line_index_deserialize), since both are outside input too, and its
 * .gnu_debugaltlink is parsed (elf_find_alt_file); a partial build
 * (line_index_build_for) must leave the buffer unchanged.
 *
 * Build with libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSONDE_LIBFUZZER \
 *     -D_GNU_SOURCE -Isymbolizer/dwarf tests/fuzz/fuzz-dwarf-index.c \
 *     symbolizer/dwarf/{line_index,debug_line,index_build,demangle}.c \
 *     -ldw -lelf -liberty
 * Without SONDE_LIBFUZZER, fuzz-main.c's main() replays the files named on
 * the command line (the checked-in corpus under meson, or a crash to
 * reproduce).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "debug_line.h"
#include "elf_analysis.h"
#include "line_index.h"

#define FUZZ_MAX_INPUT (4u << 20)

static void exercise(const struct line_index *ix, size_t size)
{
	struct line_frame fr[LINE_INDEX_MAX_FRAMES];
	struct line_index *copy;
	size_t blob_size;
	void *blob;

	for (uint64_t a = 0; a < 4 * (uint64_t)size + 4096; a += 7) {
		size_t n = line_index_lookup(ix, a, fr, LINE_INDEX_MAX_FRAMES);

		if (n > LINE_INDEX_MAX_FRAMES)
			abort();
		for (size_t i = 0; i < n; i++)
			if ((fr[i].function && strlen(fr[i].function) > (1u << 20)) ||
			    (fr[i].file && strlen(fr[i].file) > (1u << 20)))
				abort();
	}
	blob = line_index_serialize(ix, &blob_size);
	if (!blob)
		return;
	copy = line_index_deserialize(blob, blob_size);
	if (!copy)
		abort(); /* our own blob must always load */
	line_index_free(copy);
	free(blob);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct debug_line_sections secs = { .line = data, .line_size = size, .str = data,
					    .str_size = size, .line_str = data,
					    .line_str_size = size };
	struct debug_line_table t;
	struct line_index *ix = NULL;
	const char *reason = NULL;
	uint8_t *buf;
	int r;

	if (size == 0 || size > FUZZ_MAX_INPUT)
		return 0;
	/* As a line program. */
	debug_line_read(&secs, 0, "/comp", 1u << 20, &t);
	for (size_t i = 0; i < t.n_rows; i++)
		if (t.rows[i].file != UINT32_MAX && t.rows[i].file >= t.n_files)
			abort();
	debug_line_table_done(&t);
	/* As a cache blob. */
	ix = line_index_deserialize(data, size);
	if (ix) {
		exercise(ix, size);
		line_index_free(ix);
		ix = NULL;
	}
	/* As a file: the builder wants a private writable copy. */
	buf = malloc(size);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	/* Its .gnu_debugaltlink (a directory that does not exist: the parse
	 * runs, no file is found). */
	{
		static const char *const dirs[] = { "/nonexistent-sonde-fuzz", NULL };

		free(elf_find_alt_file(dirs, buf, size));
	}
	r = line_index_build(buf, size, NULL, 0, NULL, 0, 0, &ix, &reason);
	if (r == 0) {
		exercise(ix, size);
		line_index_free(ix);
		ix = NULL;
	} else if (r != -EBADMSG && r != -E2BIG && r != -ENOMEM) {
		abort();
	} else if (r == -EBADMSG && !reason) {
		abort();
	}
	/* A first answer's partial build over the same buffer, for addresses
	 * taken from the input's last bytes; builds leave the buffer as they
	 * found it (the section headers libelf rewrites are put back), or the
	 * whole index built after a first answer would misread it. */
	{
		uint64_t addrs[4] = { 0 };

		memcpy(addrs, data + size - (size < sizeof(addrs) ? size : sizeof(addrs)),
		       size < sizeof(addrs) ? size : sizeof(addrs));
		r = line_index_build_for(buf, size, NULL, 0, NULL, 0, 0, addrs, 4, 100000, NULL, &ix,
					 &reason);
		if (r == 0) {
			exercise(ix, size);
			line_index_free(ix);
		} else if (r != -EBADMSG && r != -E2BIG && r != -ENOMEM) {
			abort();
		}
		if (memcmp(buf, data, size) != 0)
			abort();
	}
	free(buf);
	return 0;
}
