/* test-environ.c - OTEL_SERVICE_NAME out of /proc/PID/environ bytes
 * (sensor/environ.c): first match, exact name, bounded copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "environ.h"

#define NAME "OTEL_SERVICE_NAME"

static int find(const char *buf, size_t len, char *out, size_t size)
{
	return environ_find(buf, len, NAME, out, size);
}

static void test_found(void **state)
{
	static const char env[] = "PATH=/bin\0OTEL_SERVICE_NAME=checkout\0HOME=/root";
	char out[64];

	assert_int_equal(find(env, sizeof(env), out, sizeof(out)), 8);
	assert_string_equal(out, "checkout");
}

static void test_exact_name_and_first_wins(void **state)
{
	static const char env[] = "OTEL_SERVICE_NAMES=no\0XOTEL_SERVICE_NAME=no\0"
				  "OTEL_SERVICE_NAME\0OTEL_SERVICE_NAME=one\0OTEL_SERVICE_NAME=two";
	char out[64];

	assert_int_equal(find(env, sizeof(env), out, sizeof(out)), 3);
	assert_string_equal(out, "one");
}

static void test_absent_empty_truncated(void **state)
{
	static const char env[] = "A=b\0C=d";
	static const char empty[] = "OTEL_SERVICE_NAME=";
	static const char cut[] = "OTEL_SERVICE_NAME=abcdefgh"; /* no NUL counted */
	char out[4] = "xyz";

	assert_int_equal(find(env, sizeof(env), out, sizeof(out)), -1);
	assert_string_equal(out, "");
	assert_int_equal(find(empty, sizeof(empty) - 1, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	assert_int_equal(find(cut, sizeof(cut) - 1, out, sizeof(out)), 3);
	assert_string_equal(out, "abc");
	assert_int_equal(find(cut, 10, out, sizeof(out)), -1); /* name cut off */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_found),
		cmocka_unit_test(test_exact_name_and_first_wins),
		cmocka_unit_test(test_absent_empty_truncated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
