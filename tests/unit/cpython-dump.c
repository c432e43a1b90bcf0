/* cpython-dump.c - a test tool for symbolizer/interp/, driven by
 * tests/integration/test_cpython_lines.py:
 *   cpython-dump            reads lines "FORMAT FIRSTLINENO HEX" (FORMAT
 *                           310 or 311, HEX the co_linetable bytes) and
 *                           prints per line the ranges "start:end:line"
 *                           (line -1: none), or "error N"
 *   cpython-dump --layout MAJOR MINOR   prints "field offset" lines
 *   cpython-dump --name PATH            prints "MAJOR MINOR" or "none" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython_layout.h"
#include "cpython_lines.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int dump_layout(unsigned major, unsigned minor)
{
	const struct cpython_layout *l = cpython_layout_for(major, minor);

	if (!l) {
		printf("none\n");
		return 0;
	}
#define F(name) printf(#name " %u\n", (unsigned)l->name)
	F(flags);
	F(runtime_interpreters_head);
	F(interp_threads_head);
	F(tstate_next);
	F(tstate_native_thread_id);
	F(tstate_cframe);
	F(cframe_current_frame);
	F(frame_code);
	F(frame_previous);
	F(frame_prev_instr);
	F(frame_owner);
	F(frame_is_entry);
	F(code_qualname);
	F(code_filename);
	F(code_firstlineno);
	F(code_linetable);
	F(code_code_adaptive);
	F(ascii_data);
	F(bytes_data);
	F(var_size);
#undef F
	return 0;
}

int main(int argc, char **argv)
{
	static char line[4 << 20];
	static uint8_t table[2 << 20];

	if (argc == 4 && !strcmp(argv[1], "--layout"))
		return dump_layout((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "--name")) {
		unsigned ma, mi;

		if (cpython_version_from_name(argv[2], &ma, &mi) == 0)
			printf("%u %u\n", ma, mi);
		else
			printf("none\n");
		return 0;
	}

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
