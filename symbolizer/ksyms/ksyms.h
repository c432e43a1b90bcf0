/* ksyms.h - one sensor's kernel symbol table, built from the KernelSymbols
 * chunks of its stream (a /proc/kallsyms snapshot).
 *
 * A snapshot is staged (ksyms_begin, ksyms_add..., ksyms_commit) and
 * replaces the table only when complete, so lookups keep using the old
 * table meanwhile. Input need not be sorted. Bounded per table: at most
 * KSYMS_MAX_SYMBOLS symbols and KSYMS_MAX_NAME_BYTES of names (including
 * module names).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KSYMS_MAX_SYMBOLS 1000000u
#define KSYMS_MAX_NAME_BYTES (64u << 20)
#define KSYMS_MAX_NAME_LEN 512u
/* No kernel function is this long: an address further than this past the
 * nearest symbol start is reported as unknown rather than attributed to
 * the last symbol of the table. */
#define KSYMS_MAX_OFFSET (1u << 20)

struct ksyms;

struct ksyms_lookup {
	const char *name;   /* borrowed: valid until the next commit or free */
	const char *module; /* "" for vmlinux; borrowed likewise */
	uint64_t start;
	uint64_t offset;
};

/* NULL on out of memory. */
struct ksyms *ksyms_new(void);
/* Accepts NULL. */
void ksyms_free(struct ksyms *k);

/* Starts a new staged snapshot, dropping any unfinished one. */
void ksyms_begin(struct ksyms *k);
/* Adds to the staged snapshot. name and module are copied. Returns 0,
 * -EPROTO without ksyms_begin, -EINVAL for an empty or over-long name,
 * -E2BIG over the bounds, -ENOMEM. */
int ksyms_add(struct ksyms *k, uint64_t address, const char *name, const char *module);
/* Sorts the staged snapshot and makes it the table. Returns 0 or -EPROTO
 * without ksyms_begin. */
int ksyms_commit(struct ksyms *k);
/* Whether a snapshot is being staged. */
int ksyms_staging(const struct ksyms *k);

/* The symbol containing address. Returns 0 or -ENOENT. */
int ksyms_lookup(const struct ksyms *k, uint64_t address, struct ksyms_lookup *ret);
size_t ksyms_count(const struct ksyms *k);
/* A digest of the table (addresses, names, modules, in sorted order): equal
 * tables have equal digests; ksyms_same() tells whether two are equal. */
uint64_t ksyms_digest(const struct ksyms *k);
bool ksyms_same(const struct ksyms *a, const struct ksyms *b);
/* Bytes the table holds. */
size_t ksyms_bytes(const struct ksyms *k);
