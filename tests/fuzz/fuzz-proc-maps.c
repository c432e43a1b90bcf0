/* fuzz-proc-maps.c - fuzzes the sensor's /proc/PID/maps line parser
 * (maps_parse_line in sensor/maps.c) on maps-like text. The text is kernel
 * output, but its path part is a file name the target chose (spaces, a
 * trailing " (deleted)", 4095 bytes), so the parser is held to: a parsed
 * line's path is terminated and short, start <= end, and printing the
 * fields back the way the kernel does gives a line that parses to the same
 * fields. Lines are split as sensor/procs.c's read_maps() splits them:
 * at '\n', lines that overflow its buffer skipped whole.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maps.h"

#define FUZZ_MAX_INPUT (1u << 20)
/* read_maps()'s fgets buffer: longer lines are skipped, not parsed. */
#define FUZZ_LINE_MAX (MAPS_PATH_MAX + 256)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_line(const char *line, size_t len)
{
	static struct maps_line l, again;
	static char out[FUZZ_LINE_MAX + 64];
	size_t plen;
	int r, n;

	memset(&l, 0xa5, sizeof(l));
	r = maps_parse_line(line, len, &l);
	if (r != 0) {
		if (r != -EINVAL && r != -ENAMETOOLONG)
			abort();
		if (l.start != 0xa5a5a5a5a5a5a5a5ull)
			abort(); /* *ret must stay untouched on failure */
		return;
	}
	plen = strnlen(l.path, sizeof(l.path));
	if (plen >= MAPS_PATH_MAX || l.end < l.start || l.path[0] == ' ')
		abort();
	(void)maps_line_is_exec_file(&l);
	/* Printed back as the kernel's show_map_vma() prints it. */
	n = snprintf(out, sizeof(out), "%" PRIx64 "-%" PRIx64 " %c%c%c%c %08" PRIx64 " %02x:%02x %" PRIu64 " %s%s",
		     l.start, l.end, l.readable ? 'r' : '-', l.writable ? 'w' : '-',
		     l.executable ? 'x' : '-', l.shared ? 's' : 'p', l.offset, l.dev_major,
		     l.dev_minor, l.inode, l.path, l.deleted ? " (deleted)" : "");
	if (n < 0 || (size_t)n >= sizeof(out))
		abort();
	if (maps_parse_line(out, (size_t)n, &again) != 0 || again.start != l.start ||
	    again.end != l.end || again.offset != l.offset || again.dev_major != l.dev_major ||
	    again.dev_minor != l.dev_minor || again.inode != l.inode ||
	    again.readable != l.readable || again.writable != l.writable ||
	    again.executable != l.executable || again.shared != l.shared ||
	    again.deleted != l.deleted || strcmp(again.path, l.path) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *end = text + size, *line = text;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t len = (size_t)((nl ? nl + 1 : end) - line); /* with its '\n', as fgets */

		if (len <= FUZZ_LINE_MAX - 1)
			check_line(line, len);
		line = nl ? nl + 1 : end;
	}
	return 0;
}
