/* test-ksyms.c - the per-sensor kernel symbol table: lookups at symbol
 * boundaries, unsorted input, staging, and the bounds. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ksyms.h"

static void test_boundaries_unsorted(void **state)
{
	struct ksyms *k = ksyms_new();
	struct ksyms_lookup l;

	assert_non_null(k);
	/* Nothing committed yet. */
	assert_int_equal(ksyms_lookup(k, 0x1000, &l), -ENOENT);
	ksyms_begin(k);
	assert_int_equal(ksyms_add(k, 0x3000, "c_fn", NULL), 0);
	assert_int_equal(ksyms_add(k, 0x1000, "a_fn", ""), 0);
	assert_int_equal(ksyms_add(k, 0x2000, "b_fn", "mod"), 0);
	assert_int_equal(ksyms_add(k, 0x2000, "b_alias", "mod"), 0);
	/* Staged, not live. */
	assert_int_equal(ksyms_lookup(k, 0x1000, &l), -ENOENT);
	assert_int_equal(ksyms_commit(k), 0);
	assert_int_equal(ksyms_count(k), 4);

	assert_int_equal(ksyms_lookup(k, 0xfff, &l), -ENOENT);
	assert_int_equal(ksyms_lookup(k, 0x1000, &l), 0);
	assert_string_equal(l.name, "a_fn");
	assert_int_equal(l.offset, 0);
	assert_string_equal(l.module, "");
	assert_int_equal(ksyms_lookup(k, 0x1fff, &l), 0);
	assert_string_equal(l.name, "a_fn");
	assert_int_equal(l.offset, 0xfff);
	assert_int_equal(ksyms_lookup(k, 0x2000, &l), 0);
	assert_string_equal(l.name, "b_fn"); /* first given of equal addresses */
	assert_string_equal(l.module, "mod");
	assert_int_equal(ksyms_lookup(k, 0x3010, &l), 0);
	assert_string_equal(l.name, "c_fn");
	assert_int_equal(l.offset, 0x10);
	/* Far past the last symbol: unknown, not c_fn+huge. */
	assert_int_equal(ksyms_lookup(k, 0x3000 + KSYMS_MAX_OFFSET, &l), -ENOENT);
	ksyms_free(k);
}

static void test_staging_replaces(void **state)
{
	struct ksyms *k = ksyms_new();
	struct ksyms_lookup l;

	assert_int_equal(ksyms_add(k, 1, "x", NULL), -EPROTO);
	assert_int_equal(ksyms_commit(k), -EPROTO);
	ksyms_begin(k);
	assert_int_equal(ksyms_add(k, 0x100, "old", NULL), 0);
	ksyms_commit(k);
	ksyms_begin(k);
	assert_int_equal(ksyms_add(k, 0x200, "new", NULL), 0);
	/* The old table serves until the new one is complete. */
	assert_int_equal(ksyms_lookup(k, 0x150, &l), 0);
	assert_string_equal(l.name, "old");
	ksyms_commit(k);
	assert_int_equal(ksyms_lookup(k, 0x150, &l), -ENOENT);
	assert_int_equal(ksyms_lookup(k, 0x250, &l), 0);
	assert_string_equal(l.name, "new");
	ksyms_free(k);
	ksyms_free(NULL);
}

static void test_bounds(void **state)
{
	struct ksyms *k = ksyms_new();
	char longname[KSYMS_MAX_NAME_LEN + 2];
	struct ksyms_lookup l;
	int r = 0;

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ksyms_begin(k);
	assert_int_equal(ksyms_add(k, 1, "", NULL), -EINVAL);
	assert_int_equal(ksyms_add(k, 1, longname, NULL), -EINVAL);
	for (uint32_t i = 0; i < KSYMS_MAX_SYMBOLS && r == 0; i++)
		r = ksyms_add(k, 0xffffffff81000000ull + 16ull * i, "sym", "m");
	assert_int_equal(r, 0);
	assert_int_equal(ksyms_add(k, 1, "one_too_many", NULL), -E2BIG);
	ksyms_commit(k);
	assert_int_equal(ksyms_count(k), KSYMS_MAX_SYMBOLS);
	assert_int_equal(ksyms_lookup(k, 0xffffffff81000000ull + 16ull * 5 + 3, &l), 0);
	assert_int_equal(l.offset, 3);

	/* Name bytes: 512-byte names run into 64 MiB before 1M symbols. */
	memset(longname, 'b', KSYMS_MAX_NAME_LEN);
	longname[KSYMS_MAX_NAME_LEN] = '\0';
	ksyms_begin(k);
	r = 0;
	for (uint32_t i = 0; i < KSYMS_MAX_SYMBOLS && r == 0; i++)
		r = ksyms_add(k, i, longname, NULL);
	assert_int_equal(r, -E2BIG);
	ksyms_free(k);
}

static struct ksyms *three(const char *module_of_b, uint64_t c_addr)
{
	struct ksyms *k = ksyms_new();

	assert_non_null(k);
	ksyms_begin(k);
	assert_int_equal(ksyms_add(k, c_addr, "c_fn", NULL), 0);
	assert_int_equal(ksyms_add(k, 0x1000, "a_fn", NULL), 0);
	assert_int_equal(ksyms_add(k, 0x2000, "b_fn", module_of_b), 0);
	assert_int_equal(ksyms_commit(k), 0);
	return k;
}

/* What sessions share a table on (api/ingest.c): equal input in any
 * order is the same; an address, name or module apart is not. */
static void test_digest_and_same(void **state)
{
	struct ksyms *a = three("mod", 0x3000), *b = ksyms_new(), *c = three("other", 0x3000),
		     *d = three("mod", 0x3008);

	assert_non_null(b);
	ksyms_begin(b);
	assert_int_equal(ksyms_add(b, 0x2000, "b_fn", "mod"), 0);
	assert_int_equal(ksyms_add(b, 0x1000, "a_fn", NULL), 0);
	assert_int_equal(ksyms_add(b, 0x3000, "c_fn", NULL), 0);
	assert_int_equal(ksyms_commit(b), 0);
	assert_true(ksyms_same(a, b));
	assert_true(ksyms_digest(a) == ksyms_digest(b));
	assert_false(ksyms_same(a, c));
	assert_false(ksyms_digest(a) == ksyms_digest(c));
	assert_false(ksyms_same(a, d));
	assert_false(ksyms_digest(a) == ksyms_digest(d));
	assert_true(ksyms_bytes(a) > 0);
	ksyms_free(a);
	ksyms_free(b);
	ksyms_free(c);
	ksyms_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_boundaries_unsorted),
		cmocka_unit_test(test_staging_replaces),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_digest_and_same),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
