/* hmap.h - a small hash map from byte-string keys to pointers, used for
 * every table of the symbolizer (processes, files, stacks, requests, jobs).
 *
 * Keys are copied into the map; values are borrowed pointers the map never
 * dereferences. The hash is seeded per map from a random value, so a
 * sensor cannot pick keys that all collide. Not thread-safe (everything
 * runs on the rpc loop thread).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap;

struct hmap_iter {
	size_t bucket;
	void *node; /* next node to visit */
};

/* NULL on out of memory. */
struct hmap *hmap_new(void);
/* Frees the map; free_val (may be NULL) is called for each value. Accepts NULL. */
void hmap_free(struct hmap *m, void (*free_val)(void *val));

/* The value for key, or NULL. */
void *hmap_get(const struct hmap *m, const void *key, size_t klen);
/* Inserts or replaces. If the key existed, its old value goes to
 * *ret_old (if not NULL; else it is dropped). Returns 0 or -ENOMEM. */
int hmap_put(struct hmap *m, const void *key, size_t klen, void *val, void **ret_old);
/* Removes key; returns its value or NULL. Safe during iteration for the
 * entry just returned by hmap_next. */
void *hmap_remove(struct hmap *m, const void *key, size_t klen);
size_t hmap_count(const struct hmap *m);

/* Iteration: hmap_iter_init, then hmap_next until it returns false. Key
 * and value pointers are borrowed (the key lives as long as the entry). */
void hmap_iter_init(const struct hmap *m, struct hmap_iter *it);
bool hmap_next(const struct hmap *m, struct hmap_iter *it, const void **ret_key, size_t *ret_klen,
	       void **ret_val);

/* Convenience for integer keys. */
static inline void *hmap_get_u64(const struct hmap *m, uint64_t k)
{
	return hmap_get(m, &k, sizeof(k));
}
static inline int hmap_put_u64(struct hmap *m, uint64_t k, void *val, void **ret_old)
{
	return hmap_put(m, &k, sizeof(k), val, ret_old);
}
static inline void *hmap_remove_u64(struct hmap *m, uint64_t k)
{
	return hmap_remove(m, &k, sizeof(k));
}
