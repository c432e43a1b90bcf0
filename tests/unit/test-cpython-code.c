/* test-cpython-code.c - symbolizer/interp/cpython/cpython_code.c: records built
 * from real code objects of Debian's python3.11 (a method, a generator, a
 * nested function and a module-level loop; name, file, first line and
 * co_linetable as the interpreter holds them) name every instruction with
 * the line co_lines() gives; damaged and hostile records are refused or
 * made harmless; the per-(pid, address) table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpython_code.h"
#include "interp_records.h"

#define PYTHON "/usr/bin/python3.11"

/* Prints, per code object: qualname, filename, firstlineno, linetable hex,
 * then "offset line" pairs (every instruction's byte offset and its line,
 * -1 for none) and a blank line. */
static const char dump_py[] =
	"import sys\n"
	"src = '''\n"
	"class K:\n"
	"    def method(self, n):\n"
	"        t = 0\n"
	"        for i in range(n):\n"
	"            t += i * i\n"
	"        return t\n"
	"def gen(n):\n"
	"    for i in range(n):\n"
	"        yield i\n"
	"def outer():\n"
	"    def inner(x):\n"
	"        return [y for y in\n"
	"                range(x)]\n"
	"    return inner\n"
	"'''\n"
	"mod = compile(src, '/srv/app/work.py', 'exec')\n"
	"def walk(c):\n"
	"    yield c\n"
	"    for k in c.co_consts:\n"
	"        if hasattr(k, 'co_code'):\n"
	"            yield from walk(k)\n"
	"for c in walk(mod):\n"
	"    print(c.co_qualname); print(c.co_filename); print(c.co_firstlineno)\n"
	"    print(c.co_linetable.hex())\n"
	"    for s, e, l in c.co_lines():\n"
	"        for o in range(s, e, 2):\n"
	"            print(o, -1 if l is None else l)\n"
	"    print()\n";

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* A record as BPF would make it (cpython_code.h's layout). */
static void make_record(uint8_t *r, uint64_t addr, uint32_t first, const char *q, size_t qlen,
			const char *f, size_t flen, const uint8_t *t, size_t tlen, uint8_t flags)
{
	memset(r, 0, CPYTHON_META_SIZE);
	put16(r, CPYTHON_META_SIZE);
	r[2] = CPYTHON_META_VERSION;
	r[3] = 11;
	put32(r + 4, first);
	put64(r + 8, addr);
	put64(r + 16, addr ^ 0x5a5a);
	put16(r + 24, (uint16_t)qlen);
	put16(r + 26, (uint16_t)flen);
	put16(r + 28, (uint16_t)tlen);
	r[30] = flags;
	memcpy(r + CPYTHON_META_HEADER, q, qlen);
	memcpy(r + CPYTHON_META_HEADER + CPYTHON_META_QUALNAME, f, flen);
	if (tlen)
		memcpy(r + CPYTHON_META_HEADER + CPYTHON_META_QUALNAME + CPYTHON_META_FILENAME, t,
		       tlen);
}

static void chomp(char *s)
{
	s[strcspn(s, "\n")] = '\0';
}

static void test_real_code_objects(void **state)
{
	FILE *p;
	char q[256], f[512], first[32], hex[4096], line[128], name[1024], want[1024];
	uint8_t table[CPYTHON_META_LINETABLE], rec[CPYTHON_META_SIZE];
	struct cpython_code c;
	int objects = 0, offsets = 0, lined = 0;
	bool seen_method = false, seen_gen = false, seen_inner = false;

	(void)state;
	{
		FILE *s = fopen("/tmp/test-cpython-code.py", "w");

		assert_non_null(s);
		fputs(dump_py, s);
		fclose(s);
	}
	p = popen(PYTHON " /tmp/test-cpython-code.py", "r");
	assert_non_null(p);
	while (fgets(q, sizeof(q), p)) {
		size_t tlen = 0;

		assert_non_null(fgets(f, sizeof(f), p));
		assert_non_null(fgets(first, sizeof(first), p));
		assert_non_null(fgets(hex, sizeof(hex), p));
		chomp(q), chomp(f), chomp(hex);
		for (const char *h = hex; h[0] && h[1] && tlen < sizeof(table); h += 2) {
			unsigned v;

			assert_int_equal(sscanf(h, "%2x", &v), 1);
			table[tlen++] = (uint8_t)v;
		}
		assert_true(tlen < sizeof(table)); /* fits: these are small */
		make_record(rec, 0x7f0000001000 + objects * 0x100, (uint32_t)atoi(first), q, strlen(q), f,
			    strlen(f), table, tlen, 0);
		assert_int_equal(cpython_code_decode(rec, sizeof(rec), &c), 0);
		assert_string_equal(c.qualname, q);
		assert_string_equal(c.filename, "/srv/app/work.py");
		seen_method |= !strcmp(q, "K.method");
		seen_gen |= !strcmp(q, "gen");
		seen_inner |= !strcmp(q, "outer.<locals>.inner");
		while (fgets(line, sizeof(line), p) && line[0] != '\n') {
			unsigned off;
			int l;

			assert_int_equal(sscanf(line, "%u %d", &off, &l), 2);
			if (l >= 0) {
				snprintf(want, sizeof(want), "%s (/srv/app/work.py:%d)", q, l);
				lined++;
			} else {
				snprintf(want, sizeof(want), "%s (/srv/app/work.py)", q);
			}
			cpython_code_frame_name(&c, off, name, sizeof(name));
			assert_string_equal(name, want);
			offsets++;
		}
		objects++;
	}
	assert_int_equal(pclose(p), 0);
	assert_true(seen_method && seen_gen && seen_inner);
	assert_true(objects >= 6); /* module, K, method, gen, outer, inner, listcomp */
	assert_true(lined > 50);
	print_message("%d code objects, %d instructions named (%d with a line)\n", objects,
		      offsets, lined);
	remove("/tmp/test-cpython-code.py");
}

static void test_refused(void **state)
{
	uint8_t rec[CPYTHON_META_SIZE], bad[CPYTHON_META_SIZE + 1];
	struct cpython_code c;

	(void)state;
	make_record(rec, 0x1000, 1, "f", 1, "a.py", 4, (const uint8_t *)"\x80", 1, 0);
	assert_int_equal(cpython_code_decode(rec, sizeof(rec), &c), 0);
	assert_int_equal(cpython_code_decode(rec, sizeof(rec) - 1, &c), -EBADMSG);
	memcpy(bad, rec, sizeof(rec));
	assert_int_equal(cpython_code_decode(bad, sizeof(bad), &c), -EBADMSG);
	assert_int_equal(cpython_code_decode(NULL, 0, &c), -EBADMSG);
#define MUTATE(stmt)                                                             \
	do {                                                                     \
		memcpy(bad, rec, sizeof(rec));                                   \
		stmt;                                                            \
		assert_int_equal(cpython_code_decode(bad, sizeof(rec), &c), -EBADMSG); \
	} while (0)
	MUTATE(put16(bad, CPYTHON_META_SIZE - 1));
	MUTATE(bad[2] = CPYTHON_META_VERSION + 1);
	MUTATE(bad[3] = 9);
	MUTATE(bad[3] = 14);
	MUTATE(put32(bad + 4, 0x80000000u));
	MUTATE(put16(bad + 24, CPYTHON_META_QUALNAME + 1));
	MUTATE(put16(bad + 26, CPYTHON_META_FILENAME + 1));
	MUTATE(put16(bad + 28, CPYTHON_META_LINETABLE + 1));
	MUTATE(put16(bad + 24, 0)); /* no name */
#undef MUTATE
}

static void test_hostile_names(void **state)
{
	uint8_t rec[CPYTHON_META_SIZE], t[4] = { 0xd8, 0x00, 0x00, 0x00 };
	char q[CPYTHON_META_QUALNAME], name[1024];
	struct cpython_code c;

	(void)state;
	/* Separators, control bytes, invalid UTF-8 and a NUL: printable, cut
	 * at the NUL. Valid UTF-8 stays. */
	make_record(rec, 0x1000, 7, "a;b\n\xff\xc3\xa9\0zz", 11, "x\x1b.py", 6, t, 0, 0);
	assert_int_equal(cpython_code_decode(rec, sizeof(rec), &c), 0);
	assert_string_equal(c.qualname, "a?b??\xc3\xa9");
	assert_string_equal(c.filename, "x?.py");
	/* An empty line table: no line, still named. */
	cpython_code_frame_name(&c, 0, name, sizeof(name));
	assert_string_equal(name, "a?b??\xc3\xa9 (x?.py)");
	/* Cut names say so; a full slot without a NUL is bounded. */
	memset(q, 'n', sizeof(q));
	make_record(rec, 0x1000, 7, q, sizeof(q), "f.py", 4, t, 0, CPYTHON_META_QUALNAME_CUT);
	assert_int_equal(cpython_code_decode(rec, sizeof(rec), &c), 0);
	assert_int_equal(strlen(c.qualname), CPYTHON_META_QUALNAME + 3);
	assert_memory_equal(c.qualname + CPYTHON_META_QUALNAME, "...", 3);
	/* A damaged line table (a truncated entry): no line, not a guess. */
	make_record(rec, 0x1000, 7, "g", 1, "f.py", 4, (const uint8_t *)"\xf0", 1, 0);
	assert_int_equal(cpython_code_decode(rec, sizeof(rec), &c), 0);
	cpython_code_frame_name(&c, 0, name, sizeof(name));
	assert_string_equal(name, "g (f.py)");
	/* Unknown code object; a tiny buffer. */
	cpython_code_frame_name(NULL, 0, name, sizeof(name));
	assert_string_equal(name, CPYTHON_UNKNOWN_FRAME);
	assert_int_equal(cpython_code_frame_name(NULL, 0, name, 4), 3);
	assert_string_equal(name, "<un");
}

static void test_table(void **state)
{
	struct interp_records *t = cpython_codes_new();
	uint8_t rec[CPYTHON_META_SIZE];
	const struct cpython_code *c;

	(void)state;
	assert_non_null(t);
	for (uint32_t pid = 1; pid <= 3; pid++)
		for (uint64_t a = 0; a < 1000; a++) {
			char q[32];

			snprintf(q, sizeof(q), "f%u_%u", pid, (unsigned)a);
			make_record(rec, 0x1000 + a * 0x40, 1, q, strlen(q), "a.py", 4, NULL, 0, 0);
			assert_int_equal(interp_records_put(t, pid, rec, sizeof(rec)), 0);
		}
	assert_int_equal(interp_records_count(t), 3000);
	c = cpython_codes_get(t, 2, 0x1000 + 7 * 0x40, 0);
	assert_non_null(c);
	assert_string_equal(c->qualname, "f2_7");
	assert_non_null(cpython_codes_get(t, 2, 0x1000 + 7 * 0x40, (0x1000 + 7 * 0x40) ^ 0x5a5a));
	assert_null(cpython_codes_get(t, 2, 0x1000 + 7 * 0x40, 1)); /* reused address */
	assert_null(cpython_codes_get(t, 4, 0x1000, 0));
	/* The same address again replaces. */
	make_record(rec, 0x1000, 1, "again", 5, "a.py", 4, NULL, 0, 0);
	assert_int_equal(interp_records_put(t, 1, rec, sizeof(rec)), 0);
	assert_string_equal(cpython_codes_get(t, 1, 0x1000, 0)->qualname, "again");
	assert_int_equal(interp_records_count(t), 3000);
	interp_records_forget_pid(t, 2);
	assert_int_equal(interp_records_count(t), 2000);
	assert_null(cpython_codes_get(t, 2, 0x1000 + 7 * 0x40, 0));
	assert_string_equal(cpython_codes_get(t, 3, 0x1000 + 999 * 0x40, 0)->qualname, "f3_999");
	assert_int_equal(interp_records_put(t, 1, rec, 10), -EBADMSG);
	assert_int_equal(interp_records_refused(t), 1);
	interp_records_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_code_objects),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_hostile_names),
		cmocka_unit_test(test_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
