/* test-scanbudget.c - the per-process token bucket of maps bytes
 * (sensor/scanbudget.c), on replayed times: a full bucket allows, a scan
 * that overdraws it refuses until the refill covers the debt, the refill
 * stops at the burst, and long gaps neither overflow nor overfill. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "scanbudget.h"

#define MS 1000000ull
#define SEC 1000000000ull

static void test_full_bucket_allows_until_overdrawn(void **state)
{
	struct scan_budget b;
	uint64_t t = 5 * SEC;

	(void)state;
	scan_budget_init(&b, t);
	assert_true(scan_budget_allows(&b, t));
	/* Scans that fit leave it allowing. */
	scan_budget_spend(&b, SCAN_BUDGET_BURST / 2, t);
	assert_true(scan_budget_allows(&b, t));
	/* The scan that empties it (and more) is the last one. */
	scan_budget_spend(&b, SCAN_BUDGET_BURST, t);
	assert_false(scan_budget_allows(&b, t));
	assert_int_equal(b.bytes, -(int64_t)(SCAN_BUDGET_BURST / 2));
}

static void test_debt_is_paid_at_the_rate(void **state)
{
	struct scan_budget b;
	uint64_t t = 0;

	(void)state;
	/* A debt of one second's refill. */
	scan_budget_init(&b, t);
	scan_budget_spend(&b, SCAN_BUDGET_BURST + SCAN_BUDGET_BYTES_PER_SEC, t);
	assert_false(scan_budget_allows(&b, t + 500 * MS));
	/* Exactly paid back is 0 bytes: still refused. */
	assert_false(scan_budget_allows(&b, t + SEC));
	assert_true(scan_budget_allows(&b, t + SEC + 10 * MS));
}

static void test_refill_stops_at_the_burst(void **state)
{
	struct scan_budget b;

	(void)state;
	scan_budget_init(&b, 0);
	scan_budget_spend(&b, SCAN_BUDGET_BURST, 0);
	assert_true(scan_budget_allows(&b, 1000 * SEC));
	assert_int_equal(b.bytes, SCAN_BUDGET_BURST);
	/* Days later, and with now going back: full, no overflow. */
	assert_true(scan_budget_allows(&b, 400000 * SEC));
	assert_int_equal(b.bytes, SCAN_BUDGET_BURST);
	assert_true(scan_budget_allows(&b, 10 * SEC));
	assert_int_equal(b.bytes, SCAN_BUDGET_BURST);
}

/* A process that rescans as fast as it is allowed, each scan reading 6 MB
 * (what 65,000 mappings' maps text is), reads over a minute no more than
 * the burst, the refill and one scan's overdraft. */
static void test_a_large_process_is_held_to_the_rate(void **state)
{
	const uint64_t scan = 6000000;
	struct scan_budget b;
	uint64_t read = 0;

	(void)state;
	scan_budget_init(&b, 0);
	for (uint64_t t = 0; t < 60 * SEC; t += MS)
		if (scan_budget_allows(&b, t)) {
			scan_budget_spend(&b, scan, t);
			read += scan;
		}
	assert_true(read <= SCAN_BUDGET_BURST + 60ull * SCAN_BUDGET_BYTES_PER_SEC + scan);
	assert_true(read >= 60ull * SCAN_BUDGET_BYTES_PER_SEC - scan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_bucket_allows_until_overdrawn),
		cmocka_unit_test(test_debt_is_paid_at_the_rate),
		cmocka_unit_test(test_refill_stops_at_the_burst),
		cmocka_unit_test(test_a_large_process_is_held_to_the_rate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
