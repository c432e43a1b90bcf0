/* parse.h - strict number parsing for command lines and /proc text.
 * The whole string must be the number: "12abc", "", " 12" and overflow
 * are errors (-EINVAL or -ERANGE); *ret untouched on failure. */
#pragma once

#include <stddef.h>
#include <stdint.h>

int parse_u64(const char *s, int base, uint64_t *ret);
int parse_u32(const char *s, int base, uint32_t *ret);
int parse_int(const char *s, int *ret);
/* Like parse_u64 but takes at most the first len bytes of s. */
int parse_u64_n(const char *s, size_t len, int base, uint64_t *ret);
