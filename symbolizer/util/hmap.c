/* hmap.c - separate-chaining hash map with a seeded 64-bit hash (see hmap.h).
 * The table doubles when the load factor passes 1 and never shrinks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "hmap.h"

struct hnode {
	struct hnode *next;
	uint64_t hash;
	void *val;
	size_t klen;
	unsigned char key[];
};

struct hmap {
	struct hnode **buckets;
	size_t n_buckets; /* power of two */
	size_t count;
	uint64_t seed;
};

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t mix_lane(uint64_t h, uint64_t v)
{
	v *= 0x87c37b91114253d5ULL;
	v = rotl64(v, 31);
	v *= 0x4cf5ad432745937fULL;
	h ^= v;
	return rotl64(h, 27) * 5 + 0x52dce729;
}

static uint64_t hash_bytes(uint64_t seed, const void *key, size_t len)
{
	/* Eight bytes a step (MurmurHash3's 64-bit lane mix), then its
	 * finaliser so the seed spreads into every bit. Profile store keys
	 * are kilobytes (folded text and raw frames): FNV-1a a byte at a
	 * time was two thirds of the symbolizer's CPU under load. */
	const unsigned char *p = key;
	uint64_t h = seed ^ (len * 0x9e3779b97f4a7c15ULL);
	uint64_t v = 0;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&v, p, 8);
		h = mix_lane(h, v);
	}
	if (len) {
		v = 0;
		memcpy(&v, p, len);
		h = mix_lane(h, v ^ ((uint64_t)len << 56));
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

struct hmap *hmap_new(void)
{
	struct hmap *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->n_buckets = 16;
	m->buckets = calloc(m->n_buckets, sizeof(*m->buckets));
	if (!m->buckets) {
		free(m);
		return NULL;
	}
	if (getrandom(&m->seed, sizeof(m->seed), GRND_NONBLOCK) != sizeof(m->seed))
		m->seed = (uint64_t)(uintptr_t)m ^ 0x9e3779b97f4a7c15ULL;
	return m;
}

void hmap_free(struct hmap *m, void (*free_val)(void *val))
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct hnode *n = m->buckets[i];

		while (n) {
			struct hnode *next = n->next;

			if (free_val)
				free_val(n->val);
			free(n);
			n = next;
		}
	}
	free(m->buckets);
	free(m);
}

static struct hnode **find_slot(const struct hmap *m, const void *key, size_t klen, uint64_t h)
{
	struct hnode **pp = &m->buckets[h & (m->n_buckets - 1)];

	for (; *pp; pp = &(*pp)->next) {
		struct hnode *n = *pp;

		if (n->hash == h && n->klen == klen && memcmp(n->key, key, klen) == 0)
			return pp;
	}
	return pp;
}

void *hmap_get(const struct hmap *m, const void *key, size_t klen)
{
	uint64_t h = hash_bytes(m->seed, key, klen);
	struct hnode **pp = find_slot(m, key, klen, h);

	return *pp ? (*pp)->val : NULL;
}

static void grow(struct hmap *m)
{
	size_t nb = m->n_buckets * 2;
	struct hnode **b = calloc(nb, sizeof(*b));

	if (!b)
		return; /* keep the old table: slower, still correct */
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct hnode *n = m->buckets[i];

		while (n) {
			struct hnode *next = n->next;
			size_t j = n->hash & (nb - 1);

			n->next = b[j];
			b[j] = n;
			n = next;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->n_buckets = nb;
}

int hmap_put(struct hmap *m, const void *key, size_t klen, void *val, void **ret_old)
{
	uint64_t h = hash_bytes(m->seed, key, klen);
	struct hnode **pp = find_slot(m, key, klen, h);
	struct hnode *n;

	if (*pp) {
		if (ret_old)
			*ret_old = (*pp)->val;
		(*pp)->val = val;
		return 0;
	}
	n = malloc(sizeof(*n) + klen);
	if (!n)
		return -ENOMEM;
	n->next = NULL;
	n->hash = h;
	n->val = val;
	n->klen = klen;
	memcpy(n->key, key, klen);
	*pp = n;
	m->count++;
	if (ret_old)
		*ret_old = NULL;
	if (m->count > m->n_buckets)
		grow(m);
	return 0;
}

void *hmap_remove(struct hmap *m, const void *key, size_t klen)
{
	uint64_t h = hash_bytes(m->seed, key, klen);
	struct hnode **pp = find_slot(m, key, klen, h);
	struct hnode *n = *pp;
	void *val;

	if (!n)
		return NULL;
	*pp = n->next;
	val = n->val;
	free(n);
	m->count--;
	return val;
}

size_t hmap_count(const struct hmap *m)
{
	return m->count;
}

void hmap_iter_init(const struct hmap *m, struct hmap_iter *it)
{
	it->bucket = 0;
	it->node = NULL;
	while (it->bucket < m->n_buckets && !m->buckets[it->bucket])
		it->bucket++;
	if (it->bucket < m->n_buckets)
		it->node = m->buckets[it->bucket];
}

bool hmap_next(const struct hmap *m, struct hmap_iter *it, const void **ret_key, size_t *ret_klen,
	       void **ret_val)
{
	struct hnode *n = it->node;

	if (!n)
		return false;
	/* Advance before returning, so the caller may remove n. */
	if (n->next) {
		it->node = n->next;
	} else {
		it->node = NULL;
		for (it->bucket++; it->bucket < m->n_buckets; it->bucket++) {
			if (m->buckets[it->bucket]) {
				it->node = m->buckets[it->bucket];
				break;
			}
		}
	}
	if (ret_key)
		*ret_key = n->key;
	if (ret_klen)
		*ret_klen = n->klen;
	if (ret_val)
		*ret_val = n->val;
	return true;
}
