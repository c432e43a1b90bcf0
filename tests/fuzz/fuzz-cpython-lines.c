/* fuzz-cpython-lines.c - fuzzes the CPython line table decoder
 * (symbolizer/interp/cpython/cpython_lines.c): input byte 0 picks the format
 * (even: 3.10, odd: 3.11), bytes 1-4 are co_firstlineno, the rest is the
 * table. Checks that ranges are contiguous from 0 and that addr2line
 * agrees with the iteration.
 *
 * Build with libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSONDE_LIBFUZZER \
 *     -D_GNU_SOURCE -Isymbolizer/interp/cpython tests/fuzz/fuzz-cpython-lines.c \
 *     symbolizer/interp/cpython/cpython_lines.c
 * Without SONDE_LIBFUZZER, fuzz-main.c's main() replays the files named on
 * the command line (the checked-in corpus under meson, or a crash to
 * reproduce).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cpython_lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum cpython_lines_format fmt;
	struct cpython_lines_iter it;
	struct cpython_line_range r;
	uint32_t addr = 0, probe = 0;
	int32_t first, line, probe_line = CPYTHON_NO_LINE;
	uint8_t *table;
	size_t len;
	int rc, n = 0, found = 0;

	if (size < 5)
		return 0;
	fmt = (data[0] & 1) ? CPYTHON_LINES_311 : CPYTHON_LINES_310;
	memcpy(&first, data + 1, 4);
	len = size - 5;
	/* A copy of exactly len bytes, so reads past the end are caught. */
	table = malloc(len ? len : 1);
	if (!table)
		return 0;
	memcpy(table, data + 5, len);
	probe = data[0] & 0xfe;
	if (cpython_lines_begin(&it, fmt, table, len, first) < 0)
		abort(); /* every input here is a valid format and size */
	while ((rc = cpython_lines_next(&it, &r)) > 0) {
		if (r.start != addr || r.end < r.start || ++n > (int)len)
			abort();
		if (!found && probe >= r.start && probe < r.end) {
			found = 1;
			probe_line = r.line;
		}
		addr = r.end;
	}
	if (rc != 0 && rc != -EBADMSG)
		abort();
	rc = cpython_addr2line(fmt, table, len, first, probe, &line);
	if (found && rc == 0 && line != probe_line)
		abort();
	if (rc != 0 && rc != -ENOENT && rc != -EBADMSG)
		abort();
	free(table);
	return 0;
}
