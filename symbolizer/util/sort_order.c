/* sort_order.c - the order of keys, by an LSD radix sort (sort_order.h).
 *
 * Keys are addresses of one file, so their spread is small: (key - min)
 * fits in a few 11-bit digits, and three passes usually do. Stable, so
 * equal keys keep their input order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sort_order.h"

#define DIGIT_BITS 11
#define BUCKETS (1u << DIGIT_BITS)

struct item {
	uint64_t key; /* key - min */
	uint32_t idx;
};

int sort_order(const uint64_t *keys, size_t n, uint32_t *ret)
{
	struct item *a = NULL, *b = NULL;
	uint32_t *count = NULL;
	uint64_t min = UINT64_MAX, max = 0;
	unsigned passes = 0;
	bool sorted = true;
	int err = 0;

	if (n > UINT32_MAX)
		return -E2BIG;
	for (size_t i = 0; i < n; i++) {
		if (keys[i] < min)
			min = keys[i];
		if (keys[i] > max)
			max = keys[i];
		if (i && keys[i] < keys[i - 1])
			sorted = false;
		ret[i] = (uint32_t)i;
	}
	if (sorted)
		return 0;
	for (uint64_t spread = max - min; spread; spread >>= DIGIT_BITS)
		passes++;
	a = malloc(n * sizeof(*a));
	b = malloc(n * sizeof(*b));
	count = malloc(BUCKETS * sizeof(*count));
	if (!a || !b || !count) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < n; i++)
		a[i] = (struct item){ .key = keys[i] - min, .idx = (uint32_t)i };
	for (unsigned p = 0; p < passes; p++) {
		unsigned shift = p * DIGIT_BITS;
		uint32_t sum = 0;
		struct item *t;

		memset(count, 0, BUCKETS * sizeof(*count));
		for (size_t i = 0; i < n; i++)
			count[(a[i].key >> shift) & (BUCKETS - 1)]++;
		for (uint32_t d = 0; d < BUCKETS; d++) {
			uint32_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			b[count[(a[i].key >> shift) & (BUCKETS - 1)]++] = a[i];
		t = a;
		a = b;
		b = t;
	}
	for (size_t i = 0; i < n; i++)
		ret[i] = a[i].idx;
cleanup:
	free(a);
	free(b);
	free(count);
	return err;
}
