/* cpython-lines-dump.c - a test tool: reads lines "FORMAT FIRSTLINENO HEX"
 * (FORMAT 310 or 311, HEX the co_linetable bytes) and prints, per line,
 * the ranges as "start:end:line" separated by spaces (line -1: none), or
 * "error N". tests/integration/test_cpython_lines.py compares them with
 * the interpreter's own co_lines(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython_lines.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int main(void)
{
	static char line[4 << 20];
	static uint8_t table[2 << 20];

	while (fgets(line, sizeof(line), stdin)) {
		struct cpython_lines_iter it;
		struct cpython_line_range r;
		int fmt, first, pos = 0, rc;
		size_t n = 0;
		char *hex;

		if (sscanf(line, "%d %d %n", &fmt, &first, &pos) != 2)
			return 2;
		hex = line + pos;
		while (hexval(hex[0]) >= 0 && hexval(hex[1]) >= 0 && n < sizeof(table)) {
			table[n++] = (uint8_t)(hexval(hex[0]) << 4 | hexval(hex[1]));
			hex += 2;
		}
		rc = cpython_lines_begin(&it, fmt == 310 ? CPYTHON_LINES_310 : fmt == 311 ? CPYTHON_LINES_311 : 0,
					 table, n, first);
		while (rc == 0 && (rc = cpython_lines_next(&it, &r)) > 0) {
			printf("%u:%u:%d ", r.start, r.end, r.line);
			rc = 0;
		}
		if (rc < 0)
			printf("error %d", rc);
		printf("\n");
	}
	return 0;
}
