/* test-sort-order.c - sort_order gives an ascending, stable order for keys
 * of any spread, including UINT64_MAX (what symbols.c gives addresses
 * that have no vaddr). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "sort_order.h"

static void check(const uint64_t *keys, size_t n)
{
	uint32_t *order = malloc((n + 1) * sizeof(*order));
	unsigned char *seen = calloc(n + 1, 1);

	assert_non_null(order);
	assert_non_null(seen);
	assert_int_equal(sort_order(keys, n, order), 0);
	for (size_t i = 0; i < n; i++) {
		assert_true(order[i] < n);
		assert_false(seen[order[i]]);
		seen[order[i]] = 1;
		if (i) {
			assert_true(keys[order[i - 1]] <= keys[order[i]]);
			if (keys[order[i - 1]] == keys[order[i]])
				assert_true(order[i - 1] < order[i]); /* stable */
		}
	}
	free(order);
	free(seen);
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_spreads(void **state)
{
	static const uint64_t spreads[] = { 1, 7, 1u << 11, 1u << 20, 1ull << 33, UINT64_MAX };
	uint64_t s = 88172645463325252ull;
	uint64_t *keys = malloc(20000 * sizeof(*keys));

	(void)state;
	assert_non_null(keys);
	for (size_t k = 0; k < sizeof(spreads) / sizeof(spreads[0]); k++) {
		for (size_t i = 0; i < 20000; i++)
			keys[i] = 0x400000 + (spreads[k] == UINT64_MAX ? next(&s) : next(&s) % spreads[k]);
		check(keys, 20000);
		/* A few without a vaddr among them. */
		keys[3] = keys[999] = keys[19999] = UINT64_MAX;
		check(keys, 20000);
	}
	free(keys);
}

static void test_small_and_sorted(void **state)
{
	uint64_t sorted[] = { 1, 2, 2, 9, UINT64_MAX };
	uint64_t reversed[] = { 9, 2, 2, 1, 0 };
	uint32_t order[5];

	(void)state;
	check(sorted, 0);
	check(sorted, 1);
	check(sorted, 5);
	check(reversed, 5);
	assert_int_equal(sort_order(reversed, 5, order), 0);
	assert_int_equal(order[0], 4);
	assert_int_equal(order[1], 3);
	assert_int_equal(order[2], 1); /* the first 2 first */
	assert_int_equal(order[3], 2);
	assert_int_equal(order[4], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spreads),
		cmocka_unit_test(test_small_and_sorted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
