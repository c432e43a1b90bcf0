/* test-parse.c - the strict parsers accept whole numbers only. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "parse.h"

static void test_u64(void **state)
{
	uint64_t v = 7;

	assert_int_equal(parse_u64("0", 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_u64("18446744073709551615", 10, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(parse_u64("ff", 16, &v), 0);
	assert_int_equal(v, 255);
	assert_int_equal(parse_u64("0x1F", 16, &v), 0);
	assert_int_equal(v, 31);
	assert_int_equal(parse_u64("0x10", 0, &v), 0);
	assert_int_equal(v, 16);
	assert_int_equal(parse_u64("010", 0, &v), 0);
	assert_int_equal(v, 8);
	assert_int_equal(parse_u64("010", 10, &v), 0);
	assert_int_equal(v, 10);

	v = 42;
	assert_int_equal(parse_u64("18446744073709551616", 10, &v), -ERANGE);
	assert_int_equal(parse_u64("99999999999999999999999", 10, &v), -ERANGE);
	assert_int_equal(parse_u64("", 10, &v), -EINVAL);
	assert_int_equal(parse_u64(NULL, 10, &v), -EINVAL);
	assert_int_equal(parse_u64("12abc", 10, &v), -EINVAL);
	assert_int_equal(parse_u64(" 12", 10, &v), -EINVAL);
	assert_int_equal(parse_u64("12 ", 10, &v), -EINVAL);
	assert_int_equal(parse_u64("\t1", 10, &v), -EINVAL);
	assert_int_equal(parse_u64("-1", 10, &v), -EINVAL);
	assert_int_equal(parse_u64("+1", 10, &v), -EINVAL);
	assert_int_equal(parse_u64("0x", 16, &v), -EINVAL);
	assert_int_equal(parse_u64("g", 16, &v), -EINVAL);
	assert_int_equal(parse_u64("12", 10 + 30, &v), -EINVAL);
	assert_int_equal(parse_u64("12", 1, &v), -EINVAL);
	assert_int_equal(parse_u64("8", 8, &v), -EINVAL);
	assert_int_equal(v, 42);
}

static void test_u32(void **state)
{
	uint32_t v = 3;

	assert_int_equal(parse_u32("4294967295", 10, &v), 0);
	assert_true(v == UINT32_MAX);
	assert_int_equal(parse_u32("ffffffff", 16, &v), 0);
	assert_true(v == UINT32_MAX);
	v = 3;
	assert_int_equal(parse_u32("4294967296", 10, &v), -ERANGE);
	assert_int_equal(parse_u32("100000000", 16, &v), -ERANGE);
	assert_int_equal(parse_u32("1.5", 10, &v), -EINVAL);
	assert_int_equal(parse_u32("-0", 10, &v), -EINVAL);
	assert_int_equal(v, 3);
}

static void test_int(void **state)
{
	int v = 5;

	assert_int_equal(parse_int("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_int("-17", &v), 0);
	assert_int_equal(v, -17);
	assert_int_equal(parse_int("2147483647", &v), 0);
	assert_int_equal(v, INT_MAX);
	assert_int_equal(parse_int("-2147483648", &v), 0);
	assert_int_equal(v, INT_MIN);
	assert_int_equal(parse_int("010", &v), 0);
	assert_int_equal(v, 10);

	v = 5;
	assert_int_equal(parse_int("2147483648", &v), -ERANGE);
	assert_int_equal(parse_int("-2147483649", &v), -ERANGE);
	assert_int_equal(parse_int("99999999999999999999", &v), -ERANGE);
	assert_int_equal(parse_int("", &v), -EINVAL);
	assert_int_equal(parse_int("-", &v), -EINVAL);
	assert_int_equal(parse_int("--1", &v), -EINVAL);
	assert_int_equal(parse_int("+1", &v), -EINVAL);
	assert_int_equal(parse_int(" 1", &v), -EINVAL);
	assert_int_equal(parse_int("- 1", &v), -EINVAL);
	assert_int_equal(parse_int("1x", &v), -EINVAL);
	assert_int_equal(parse_int("0x10", &v), -EINVAL);
	assert_int_equal(v, 5);
}

static void test_u64_n(void **state)
{
	uint64_t v = 9;

	assert_int_equal(parse_u64_n("1234abc", 4, 10, &v), 0);
	assert_int_equal(v, 1234);
	assert_int_equal(parse_u64_n("7f000000-7f001000 r-xp", 8, 16, &v), 0);
	assert_int_equal(v, 0x7f000000);
	assert_int_equal(parse_u64_n("12", 10, 10, &v), 0); /* NUL ends it early */
	assert_int_equal(v, 12);

	v = 9;
	assert_int_equal(parse_u64_n("1234abc", 5, 10, &v), -EINVAL);
	assert_int_equal(parse_u64_n("1234", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_u64_n(" 12", 3, 10, &v), -EINVAL);
	assert_int_equal(parse_u64_n("184467440737095516160", 21, 10, &v), -ERANGE);
	assert_int_equal(v, 9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_u64),
		cmocka_unit_test(test_u32),
		cmocka_unit_test(test_int),
		cmocka_unit_test(test_u64_n),
	};

	return cmocka_run_group_tests_name("parse", tests, NULL, NULL);
}
