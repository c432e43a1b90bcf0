/* sort_order.h - the order in which to visit keys so that they come
 * ascending: a batch of addresses looked up in address order walks the
 * index forward instead of jumping around it (cache and TLB misses were
 * most of a warm Symbolize call).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ret (n entries): indexes into keys, keys[ret[0]] <= keys[ret[1]] <= ...,
 * equal keys in input order. Returns 0, -E2BIG (n > 2^32 - 1; ret
 * untouched) or -ENOMEM (ret is the input order). */
int sort_order(const uint64_t *keys, size_t n, uint32_t *ret);
