/* test-utf8.c - target text becomes valid UTF-8: invalid bytes escaped as
 * "\xNN" (and C0 controls, DEL), valid multibyte characters kept, output bounded and cut only
 * between characters, escaping idempotent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "utf8.h"

/* utf8_escape() of the n bytes of in with a large buffer. */
static const char *esc(const char *in, size_t n)
{
	static char out[256];

	utf8_escape(out, sizeof(out), in, n);
	return out;
}

#define ESC(lit) esc(lit, sizeof(lit) - 1)

static void test_valid_kept(void **state)
{
	(void)state;
	assert_string_equal(ESC("python3"), "python3");
	assert_string_equal(ESC("caf\xc3\xa9"), "caf\xc3\xa9");              /* U+00E9 */
	assert_string_equal(ESC("\xe2\x82\xac"), "\xe2\x82\xac");            /* U+20AC */
	assert_string_equal(ESC("\xf0\x9f\x94\xa5"), "\xf0\x9f\x94\xa5");    /* U+1F525 */
	assert_string_equal(ESC("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf");    /* U+10FFFF */
	assert_string_equal(ESC("\xed\x9f\xbf"), "\xed\x9f\xbf");            /* U+D7FF */
	assert_string_equal(ESC("a\\xffb"), "a\\xffb");                      /* text kept */
	assert_true(utf8_valid("caf\xc3\xa9", 5));
	assert_true(utf8_valid("", 0));
}

static void test_invalid_escaped(void **state)
{
	(void)state;
	assert_false(utf8_valid("\xff", 1));
	assert_string_equal(ESC("\xff\xfe" "ab"), "\\xff\\xfeab");
	/* A stray continuation byte. */
	assert_string_equal(ESC("a\x80z"), "a\\x80z");
	/* Overlong forms: '/' in two bytes, U+0000 in three, U+FFFF in four. */
	assert_string_equal(ESC("\xc0\xaf"), "\\xc0\\xaf");
	assert_string_equal(ESC("\xe0\x80\x80"), "\\xe0\\x80\\x80");
	assert_string_equal(ESC("\xf0\x8f\xbf\xbf"), "\\xf0\\x8f\\xbf\\xbf");
	assert_false(utf8_valid("\xc1\xbf", 2));
	/* UTF-16 surrogates encoded as UTF-8 (CESU). */
	assert_string_equal(ESC("\xed\xa0\x80"), "\\xed\\xa0\\x80");
	assert_string_equal(ESC("\xed\xbf\xbf"), "\\xed\\xbf\\xbf");
	/* Above U+10FFFF. */
	assert_string_equal(ESC("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
	assert_string_equal(ESC("\xf5\x80\x80\x80"), "\\xf5\\x80\\x80\\x80");
	/* Cut short, at the end and before an ASCII byte. */
	assert_string_equal(ESC("ok\xe2\x82"), "ok\\xe2\\x82");
	assert_string_equal(ESC("\xf0\x9f\x94" "x"), "\\xf0\\x9f\\x94x");
	assert_string_equal(ESC("\xc3"), "\\xc3");
	/* An embedded NUL would end a C string. */
	assert_string_equal(esc("a\0b", 3), "a\\x00b");
	assert_false(utf8_valid("a\0b", 3));
	/* Controls would drive a terminal (`sonde status` prints comms). */
	assert_string_equal(ESC("\x1b]0;pwn\x07x"), "\\x1b]0;pwn\\x07x");
	assert_string_equal(ESC("a\tb\nc\x7f"), "a\\x09b\\x0ac\\x7f");
	assert_false(utf8_valid("a\x1b", 2));
}

static void test_idempotent(void **state)
{
	char once[256], twice[256];
	const char in[] = "\xff\xfe" "caf\xc3\xa9\xed\xa0\x80\\x41\xc3";

	(void)state;
	utf8_escape(once, sizeof(once), in, sizeof(in) - 1);
	assert_true(utf8_valid(once, strlen(once)));
	utf8_escape(twice, sizeof(twice), once, strlen(once));
	assert_string_equal(once, twice);
	assert_int_equal(utf8_escaped_len(in, sizeof(in) - 1), strlen(once));
}

static void test_bounded(void **state)
{
	char out[8];
	char *dup;

	(void)state;
	/* "\xff" needs 4 bytes + NUL: two escapes do not fit in 8. */
	assert_int_equal(utf8_escape(out, sizeof(out), "\xff\xff", 2), 4);
	assert_string_equal(out, "\\xff");
	/* A multibyte character is not cut. */
	assert_int_equal(utf8_escape(out, sizeof(out), "abcde\xe2\x82\xac", 8), 5);
	assert_string_equal(out, "abcde");
	assert_int_equal(utf8_escape(out, 1, "abc", 3), 0);
	assert_string_equal(out, "");
	dup = utf8_escape_dup("\xff\xfe\xfd", 9);
	assert_non_null(dup);
	assert_string_equal(dup, "\\xff\\xfe");
	free(dup);
	dup = utf8_escape_dup(NULL, 10);
	assert_non_null(dup);
	assert_string_equal(dup, "");
	free(dup);
}

/* Random bytes, weighted towards UTF-8 lead and continuation bytes: the
 * escape is always valid UTF-8, within its buffer, a prefix of the
 * unbounded escape, and unchanged by a second pass. */
static void test_random(void **state)
{
	static const uint8_t pick[] = { 0x00, 0x41, 0x5c, 0x78, 0x7f, 0x80, 0xbf, 0xc0, 0xc2,
					0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff };
	char in[24], out[64], full[24 * 4 + 1], again[64];
	unsigned seed = 27;

	(void)state;
	for (int round = 0; round < 200000; round++) {
		size_t n = (size_t)(rand_r(&seed) % sizeof(in)), cap = 1 + (size_t)(rand_r(&seed) % sizeof(out));
		size_t len, full_len;

		for (size_t i = 0; i < n; i++)
			in[i] = (char)(rand_r(&seed) % 3 ? pick[rand_r(&seed) % sizeof(pick)]
							  : rand_r(&seed) % 256);
		len = utf8_escape(out, cap, in, n);
		assert_true(len < cap);
		assert_int_equal(strlen(out), len);
		assert_true(utf8_valid(out, len));
		full_len = utf8_escape(full, sizeof(full), in, n);
		assert_int_equal(full_len, utf8_escaped_len(in, n));
		assert_memory_equal(out, full, len);
		assert_int_equal(utf8_escape(again, sizeof(again), out, len), len);
		assert_string_equal(again, out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_kept),
		cmocka_unit_test(test_invalid_escaped),
		cmocka_unit_test(test_idempotent),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_random),
	};

	return cmocka_run_group_tests_name("utf8", tests, NULL, NULL);
}
