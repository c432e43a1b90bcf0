/* test-kallsyms.c - lines of /proc/kallsyms as the sensor reads them:
 * text symbols kept, everything else (data, malformed) dropped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kallsyms.h"

static bool parse(const char *s, struct kallsyms_line *l)
{
	return kallsyms_parse_line(s, strlen(s), l);
}

static void test_lines(void **state)
{
	struct kallsyms_line l;

	assert_true(parse("ffffffff81000000 T _stext", &l));
	assert_int_equal(l.addr, 0xffffffff81000000ull);
	assert_int_equal(l.name_len, 6);
	assert_memory_equal(l.name, "_stext", 6);
	assert_int_equal(l.module_len, 0);

	assert_true(parse("ffffffffc0a01000 t nf_hook_run\t[nf_tables]", &l));
	assert_int_equal(l.name_len, 11);
	assert_int_equal(l.module_len, 9);
	assert_memory_equal(l.module, "nf_tables", 9);
	assert_true(parse("0000000000000000 W weak_fn", &l)); /* kptr_restrict */
	assert_int_equal(l.addr, 0);
	assert_true(parse("ffffffffc0000000 t x\t[unterminated", &l));
	assert_int_equal(l.module_len, 12);

	assert_false(parse("ffffffff82000000 D some_data", &l));
	assert_false(parse("ffffffff82000000 b bss", &l));
	assert_false(parse("ffffffff81000000 T ", &l));
	assert_false(parse("ffffffff81000000 T", &l));
	assert_false(parse("ffffffff81000000  T x", &l));
	assert_false(parse("zzzz T x", &l));
	assert_false(parse("T x", &l));
	assert_false(parse("", &l));
	assert_false(parse("ffffffff81000000TT x", &l));
}

static void test_garbage(void **state)
{
	char buf[128];
	struct kallsyms_line l;

	srand(11);
	for (int i = 0; i < 100000; i++) {
		size_t len = (size_t)rand() % sizeof(buf);

		for (size_t k = 0; k < len; k++)
			buf[k] = " Tt\t[]0f1x\n"[rand() % 11];
		if (kallsyms_parse_line(buf, len, &l)) {
			assert_true(l.name >= buf && l.name + l.name_len <= buf + len);
			assert_true(l.module_len == 0 ||
				    (l.module >= buf && l.module + l.module_len <= buf + len));
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
