/* symtab.c - the immutable per-file symbol table (see symtab.h), its
 * builder (symtab_build.h), its cache blob format and the merge with a
 * separate debug file.
 *
 * In memory a symtab is one array of functions sorted by start address
 * (start, size, primary name, slice of the alias array), an array of alias
 * name offsets, one string pool, the PT_LOAD segments, the build ID and the
 * debuglink. Lookups are a binary search.
 *
 * Blob format (all integers little-endian), version 1:
 *   header (64 bytes): magic "SONDESYM", u32 version, u32 flags (0),
 *     u64 n_syms, u64 n_aliases, u64 n_segs, u64 pool_size,
 *     u32 build_id_len, u32 debuglink_len, u32 debuglink_crc, u32 zero
 *   n_syms * { u64 start, u64 size, u32 name, u32 alias_first,
 *              u32 alias_n, u32 zero }
 *   n_aliases * u32 name
 *   n_segs * { u64 offset, u64 vaddr, u64 filesz, u64 memsz }
 *   build ID bytes, debuglink bytes (no NUL), pool bytes (ends in NUL)
 *   u32 CRC-32 (zlib) of everything before it.
 * The CRC catches accidental damage; deserialisation still checks every
 * field, because the cache file is outside input.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "elf_analysis.h"
#include "symtab.h"
#include "symtab_build.h"

#define SYMTAB_MAGIC "SONDESYM"
/* Also the version of what the analysis produces: bump it whenever the
 * analysis would now build a different table from the same file, so that
 * cached blobs of the old analysis are dropped and rebuilt. 2: symbol
 * version suffixes stripped. */
#define SYMTAB_VERSION 2
#define SYMTAB_HEADER_SIZE 64
#define SYMTAB_SYM_SIZE 32
#define SYMTAB_SEG_SIZE 32

struct symtab_sym {
	uint64_t start;
	uint64_t size; /* 0: covers up to the next symbol */
	uint32_t name; /* primary name: offset into pool */
	uint32_t alias_first;
	uint32_t alias_n;
};

struct symtab_segment {
	uint64_t offset;
	uint64_t vaddr;
	uint64_t filesz;
	uint64_t memsz;
};

struct symtab {
	struct symtab_sym *syms;
	size_t n_syms;
	uint32_t *aliases;
	size_t n_aliases;
	struct symtab_segment *segs;
	size_t n_segs;
	char *pool;
	size_t pool_size;
	uint8_t build_id[SYMTAB_MAX_BUILD_ID];
	size_t build_id_len;
	char debuglink[SYMTAB_MAX_DEBUGLINK + 1];
	uint32_t debuglink_crc;
};

void symtab_free(struct symtab *t)
{
	if (!t)
		return;
	free(t->syms);
	free(t->aliases);
	free(t->segs);
	free(t->pool);
	free(t);
}

/* ---- queries ---- */

int symtab_offset_to_vaddr(const struct symtab *t, uint64_t file_offset, uint64_t *ret_vaddr)
{
	for (size_t i = 0; i < t->n_segs; i++) {
		const struct symtab_segment *s = &t->segs[i];

		if (file_offset >= s->offset && file_offset - s->offset < s->filesz) {
			*ret_vaddr = s->vaddr + (file_offset - s->offset);
			return 0;
		}
	}
	return -ENOENT;
}

/* Where an unsized symbol at start ends when no symbol follows it: the end
 * of the load segment holding it, else the end of the address space. */
static uint64_t symtab_tail_end(const struct symtab *t, uint64_t start)
{
	for (size_t i = 0; i < t->n_segs; i++) {
		const struct symtab_segment *s = &t->segs[i];

		if (start >= s->vaddr && start - s->vaddr < s->memsz)
			return s->vaddr + s->memsz;
	}
	return UINT64_MAX;
}

/* Index of the last symbol with start <= vaddr, or n_syms if none. */
static size_t symtab_floor(const struct symtab *t, uint64_t vaddr)
{
	size_t lo = 0, hi = t->n_syms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->syms[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? t->n_syms : lo - 1;
}

int symtab_lookup(const struct symtab *t, uint64_t vaddr, struct symtab_lookup *ret)
{
	size_t i = symtab_floor(t, vaddr);
	const struct symtab_sym *s;
	uint64_t end;

	if (i == t->n_syms)
		return -ENOENT;
	s = &t->syms[i];
	if (s->size)
		end = s->start + s->size; /* no overflow: checked on build/load */
	else if (i + 1 < t->n_syms)
		end = t->syms[i + 1].start;
	else
		end = symtab_tail_end(t, s->start);
	if (vaddr >= end && !(end == UINT64_MAX && vaddr == UINT64_MAX))
		return -ENOENT;
	ret->name = t->pool + s->name;
	ret->start = s->start;
	ret->offset = vaddr - s->start;
	return 0;
}

size_t symtab_names(const struct symtab *t, uint64_t start, const char **names, size_t max)
{
	size_t i = symtab_floor(t, start);
	const struct symtab_sym *s;

	if (i == t->n_syms || t->syms[i].start != start)
		return 0;
	s = &t->syms[i];
	if (max > 0)
		names[0] = t->pool + s->name;
	for (size_t k = 0; k < s->alias_n && k + 1 < max; k++)
		names[k + 1] = t->pool + t->aliases[s->alias_first + k];
	return (size_t)s->alias_n + 1;
}

const uint8_t *symtab_build_id(const struct symtab *t, size_t *ret_len)
{
	*ret_len = t->build_id_len;
	return t->build_id;
}

const char *symtab_debuglink(const struct symtab *t, uint32_t *ret_crc)
{
	if (ret_crc)
		*ret_crc = t->debuglink_crc;
	return t->debuglink;
}

size_t symtab_count(const struct symtab *t)
{
	return t->n_syms;
}

/* ---- builder ---- */

struct builder_entry {
	uint64_t start;
	uint64_t size;
	uint32_t name; /* offset into the builder's pool */
	uint32_t len;
	uint32_t underscores;
	unsigned rank;
};

struct symtab_builder {
	struct builder_entry *e;
	size_t n, cap;
	char *pool;
	size_t pool_size, pool_cap;
	struct symtab_segment *segs;
	size_t n_segs, cap_segs;
	uint8_t build_id[SYMTAB_MAX_BUILD_ID];
	size_t build_id_len;
	bool has_build_id;
	char debuglink[SYMTAB_MAX_DEBUGLINK + 1];
	uint32_t debuglink_crc;
	bool has_debuglink;
};

struct symtab_builder *symtab_builder_new(void)
{
	return calloc(1, sizeof(struct symtab_builder));
}

void symtab_builder_free(struct symtab_builder *b)
{
	if (!b)
		return;
	free(b->e);
	free(b->pool);
	free(b->segs);
	free(b);
}

/* Grows *p (elements of size el) so that it holds at least need elements. */
static int grow(void **p, size_t *cap, size_t need, size_t el)
{
	size_t c = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return -ENOMEM;
		c *= 2;
	}
	q = reallocarray(*p, c, el);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

int symtab_builder_add(struct symtab_builder *b, uint64_t start, uint64_t size, const char *name,
		       size_t name_len, unsigned rank)
{
	struct builder_entry *e;
	uint32_t u = 0;
	int err;

	/* .symtab names of versioned symbols carry their version
	 * ("malloc@@GLIBC_2.2.5"); the function is "malloc", as nm -D and
	 * perf print it. No mangling scheme uses '@'. */
	{
		const char *at = memchr(name, '@', name_len);
		if (at && at != name)
			name_len = (size_t)(at - name);
	}
	if (name_len == 0 || name_len > SYMTAB_MAX_NAME)
		return 0;
	if (size > UINT64_MAX - start)
		size = UINT64_MAX - start; /* keep start + size representable */
	if (b->n >= SYMTAB_MAX_ENTRIES || b->pool_size + name_len + 1 > SYMTAB_MAX_POOL)
		return -E2BIG;
	err = grow((void **)&b->e, &b->cap, b->n + 1, sizeof(*b->e));
	if (err)
		return err;
	err = grow((void **)&b->pool, &b->pool_cap, b->pool_size + name_len + 1, 1);
	if (err)
		return err;
	while (u < name_len && name[u] == '_')
		u++;
	e = &b->e[b->n++];
	*e = (struct builder_entry){ .start = start, .size = size, .name = (uint32_t)b->pool_size,
				     .len = (uint32_t)name_len, .underscores = u, .rank = rank };
	memcpy(b->pool + b->pool_size, name, name_len);
	b->pool[b->pool_size + name_len] = '\0';
	b->pool_size += name_len + 1;
	return 0;
}

int symtab_builder_add_segment(struct symtab_builder *b, uint64_t offset, uint64_t vaddr,
			       uint64_t filesz, uint64_t memsz)
{
	int err;

	if (filesz > UINT64_MAX - offset || memsz > UINT64_MAX - vaddr)
		return -EINVAL;
	if (b->n_segs >= SYMTAB_MAX_SEGMENTS)
		return -E2BIG;
	err = grow((void **)&b->segs, &b->cap_segs, b->n_segs + 1, sizeof(*b->segs));
	if (err)
		return err;
	b->segs[b->n_segs++] = (struct symtab_segment){ offset, vaddr, filesz, memsz };
	return 0;
}

int symtab_builder_set_build_id(struct symtab_builder *b, const uint8_t *id, size_t len)
{
	if (len > SYMTAB_MAX_BUILD_ID)
		return -EINVAL;
	if (b->has_build_id)
		return 0;
	memcpy(b->build_id, id, len);
	b->build_id_len = len;
	b->has_build_id = true;
	return 0;
}

int symtab_builder_set_debuglink(struct symtab_builder *b, const char *name, size_t len,
				 uint32_t crc)
{
	if (len > SYMTAB_MAX_DEBUGLINK || memchr(name, '\0', len))
		return -EINVAL;
	if (b->has_debuglink)
		return 0;
	memcpy(b->debuglink, name, len);
	b->debuglink[len] = '\0';
	b->debuglink_crc = crc;
	b->has_debuglink = true;
	return 0;
}

/* Sort order that puts equal (start, name) pairs next to each other, the
 * lowest rank first, so duplicates can be dropped in one pass. */
static int cmp_start_name(const void *pa, const void *pb, void *arg)
{
	const struct builder_entry *a = pa, *b = pb;
	const char *pool = arg;
	int c;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	c = strcmp(pool + a->name, pool + b->name);
	if (c)
		return c;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return 0;
}

/* Whether a is a better primary name than b (see symtab_build.h). */
static bool better_primary(const struct builder_entry *a, const struct builder_entry *b,
			   const char *pool)
{
	if (a->rank != b->rank)
		return a->rank < b->rank;
	if (a->underscores != b->underscores)
		return a->underscores < b->underscores;
	if (a->len != b->len)
		return a->len < b->len;
	return strcmp(pool + a->name, pool + b->name) < 0;
}

static void pool_append(struct symtab *t, const char *pool_in, const struct builder_entry *e,
			uint32_t *ret_off)
{
	*ret_off = (uint32_t)t->pool_size;
	memcpy(t->pool + t->pool_size, pool_in + e->name, (size_t)e->len + 1);
	t->pool_size += (size_t)e->len + 1;
}

int symtab_builder_finish(struct symtab_builder *b, struct symtab **ret)
{
	struct symtab *t = NULL;
	size_t kept = 0, groups = 0;
	int err;

	t = calloc(1, sizeof(*t));
	if (!t) {
		err = -ENOMEM;
		goto cleanup;
	}
	if (b->n)
		qsort_r(b->e, b->n, sizeof(*b->e), cmp_start_name, b->pool);
	/* Drop repeated (start, name) pairs, keeping the best-ranked one. */
	for (size_t i = 0; i < b->n; i++) {
		if (kept > 0 && b->e[kept - 1].start == b->e[i].start &&
		    strcmp(b->pool + b->e[kept - 1].name, b->pool + b->e[i].name) == 0)
			continue;
		if (kept == 0 || b->e[kept - 1].start != b->e[i].start)
			groups++;
		b->e[kept++] = b->e[i];
	}
	b->n = kept;

	if (groups) {
		t->syms = calloc(groups, sizeof(*t->syms));
		t->pool = malloc(b->pool_size); /* kept names fit in the builder's pool */
		if (!t->syms || !t->pool) {
			err = -ENOMEM;
			goto cleanup;
		}
		if (kept > groups) {
			t->aliases = calloc(kept - groups, sizeof(*t->aliases));
			if (!t->aliases) {
				err = -ENOMEM;
				goto cleanup;
			}
		}
	}
	for (size_t g0 = 0; g0 < kept;) {
		size_t g1 = g0 + 1, best = g0;
		struct symtab_sym *s = &t->syms[t->n_syms++];
		uint64_t size = b->e[g0].size;

		while (g1 < kept && b->e[g1].start == b->e[g0].start) {
			if (better_primary(&b->e[g1], &b->e[best], b->pool))
				best = g1;
			if (b->e[g1].size > size)
				size = b->e[g1].size;
			g1++;
		}
		s->start = b->e[g0].start;
		s->size = size;
		pool_append(t, b->pool, &b->e[best], &s->name);
		s->alias_first = (uint32_t)t->n_aliases;
		for (size_t i = g0; i < g1; i++) {
			if (i == best)
				continue;
			pool_append(t, b->pool, &b->e[i], &t->aliases[t->n_aliases++]);
		}
		s->alias_n = (uint32_t)(t->n_aliases - s->alias_first);
		g0 = g1;
	}
	if (b->n_segs) {
		t->segs = calloc(b->n_segs, sizeof(*t->segs));
		if (!t->segs) {
			err = -ENOMEM;
			goto cleanup;
		}
		memcpy(t->segs, b->segs, b->n_segs * sizeof(*t->segs));
		t->n_segs = b->n_segs;
	}
	memcpy(t->build_id, b->build_id, b->build_id_len);
	t->build_id_len = b->build_id_len;
	memcpy(t->debuglink, b->debuglink, sizeof(t->debuglink));
	t->debuglink_crc = b->debuglink_crc;
	*ret = t;
	t = NULL;
	err = 0;
cleanup:
	symtab_free(t);
	return err;
}

/* ---- merge with a separate debug file ---- */

/* Builder ranks for a merge: the debug file's primary names stay primary,
 * base names at an address the debug file also has become aliases. */
#define MERGE_RANK_PRIMARY 0
#define MERGE_RANK_ALIAS 16
#define MERGE_RANK_BASE_ALIAS 32

static int merge_add_sym(struct symtab_builder *b, const struct symtab *t,
			 const struct symtab_sym *s, unsigned primary_rank, unsigned alias_rank)
{
	const char *name = t->pool + s->name;
	int err;

	err = symtab_builder_add(b, s->start, s->size, name, strlen(name), primary_rank);
	for (uint32_t k = 0; !err && k < s->alias_n; k++) {
		name = t->pool + t->aliases[s->alias_first + k];
		err = symtab_builder_add(b, s->start, s->size, name, strlen(name), alias_rank);
	}
	return err;
}

struct symtab *symtab_merge_debug(const struct symtab *base, const struct symtab *debug)
{
	struct symtab_builder *b = NULL;
	struct symtab *t = NULL;
	int err;

	b = symtab_builder_new();
	if (!b)
		goto cleanup;
	for (size_t i = 0; i < debug->n_syms; i++) {
		err = merge_add_sym(b, debug, &debug->syms[i], MERGE_RANK_PRIMARY, MERGE_RANK_ALIAS);
		if (err)
			goto cleanup;
	}
	for (size_t i = 0; i < base->n_syms; i++) {
		const struct symtab_sym *s = &base->syms[i];
		size_t j = symtab_floor(debug, s->start);
		bool shared = j < debug->n_syms && debug->syms[j].start == s->start;

		err = merge_add_sym(b, base, s, shared ? MERGE_RANK_BASE_ALIAS : MERGE_RANK_PRIMARY,
				    shared ? MERGE_RANK_BASE_ALIAS : MERGE_RANK_ALIAS);
		if (err)
			goto cleanup;
	}
	for (size_t i = 0; i < base->n_segs; i++) {
		const struct symtab_segment *s = &base->segs[i];

		err = symtab_builder_add_segment(b, s->offset, s->vaddr, s->filesz, s->memsz);
		if (err)
			goto cleanup;
	}
	if (symtab_builder_set_build_id(b, base->build_id, base->build_id_len) ||
	    symtab_builder_set_debuglink(b, base->debuglink, strlen(base->debuglink),
					 base->debuglink_crc))
		goto cleanup;
	if (symtab_builder_finish(b, &t))
		t = NULL;
cleanup:
	symtab_builder_free(b);
	return t;
}

/* ---- serialisation ---- */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* a * b + *acc into *acc; false on overflow. */
static bool add_mul(uint64_t *acc, uint64_t a, uint64_t b)
{
	if (b && a > (UINT64_MAX - *acc) / b)
		return false;
	*acc += a * b;
	return true;
}

/* Total blob size for these counts, or 0 on overflow. */
static uint64_t blob_size(uint64_t n_syms, uint64_t n_aliases, uint64_t n_segs,
			  uint64_t pool_size, uint64_t build_id_len, uint64_t debuglink_len)
{
	uint64_t size = SYMTAB_HEADER_SIZE;

	if (!add_mul(&size, n_syms, SYMTAB_SYM_SIZE) || !add_mul(&size, n_aliases, 4) ||
	    !add_mul(&size, n_segs, SYMTAB_SEG_SIZE) || !add_mul(&size, pool_size, 1) ||
	    !add_mul(&size, build_id_len, 1) || !add_mul(&size, debuglink_len, 1) ||
	    !add_mul(&size, 4, 1))
		return 0;
	return size;
}

void *symtab_serialize(const struct symtab *t, size_t *ret_size)
{
	size_t dl_len = strlen(t->debuglink);
	uint64_t size = blob_size(t->n_syms, t->n_aliases, t->n_segs, t->pool_size,
				  t->build_id_len, dl_len);
	uint8_t *blob, *p;

	if (size == 0 || size > SIZE_MAX)
		return NULL;
	blob = calloc(1, (size_t)size);
	if (!blob)
		return NULL;
	p = blob;
	memcpy(p, SYMTAB_MAGIC, 8);
	put32(p + 8, SYMTAB_VERSION);
	put32(p + 12, 0);
	put64(p + 16, t->n_syms);
	put64(p + 24, t->n_aliases);
	put64(p + 32, t->n_segs);
	put64(p + 40, t->pool_size);
	put32(p + 48, (uint32_t)t->build_id_len);
	put32(p + 52, (uint32_t)dl_len);
	put32(p + 56, t->debuglink_crc);
	put32(p + 60, 0);
	p += SYMTAB_HEADER_SIZE;
	for (size_t i = 0; i < t->n_syms; i++, p += SYMTAB_SYM_SIZE) {
		put64(p, t->syms[i].start);
		put64(p + 8, t->syms[i].size);
		put32(p + 16, t->syms[i].name);
		put32(p + 20, t->syms[i].alias_first);
		put32(p + 24, t->syms[i].alias_n);
		put32(p + 28, 0);
	}
	for (size_t i = 0; i < t->n_aliases; i++, p += 4)
		put32(p, t->aliases[i]);
	for (size_t i = 0; i < t->n_segs; i++, p += SYMTAB_SEG_SIZE) {
		put64(p, t->segs[i].offset);
		put64(p + 8, t->segs[i].vaddr);
		put64(p + 16, t->segs[i].filesz);
		put64(p + 24, t->segs[i].memsz);
	}
	memcpy(p, t->build_id, t->build_id_len);
	p += t->build_id_len;
	memcpy(p, t->debuglink, dl_len);
	p += dl_len;
	if (t->pool_size)
		memcpy(p, t->pool, t->pool_size);
	p += t->pool_size;
	put32(p, (uint32_t)crc32(0L, blob, (uInt)(size - 4)));
	*ret_size = (size_t)size;
	return blob;
}

struct symtab *symtab_deserialize(const void *blob, size_t size)
{
	const uint8_t *p = blob;
	struct symtab *t = NULL;
	uint64_t n_syms, n_aliases, n_segs, pool_size;
	uint32_t build_id_len, dl_len;
	bool ok = false;

	if (!blob || size < SYMTAB_HEADER_SIZE + 4 || memcmp(p, SYMTAB_MAGIC, 8) != 0 ||
	    get32(p + 8) != SYMTAB_VERSION || get32(p + 12) != 0 || get32(p + 60) != 0)
		return NULL;
	n_syms = get64(p + 16);
	n_aliases = get64(p + 24);
	n_segs = get64(p + 32);
	pool_size = get64(p + 40);
	build_id_len = get32(p + 48);
	dl_len = get32(p + 52);
	if (n_syms > SYMTAB_MAX_ENTRIES || n_aliases > SYMTAB_MAX_ENTRIES ||
	    n_segs > SYMTAB_MAX_SEGMENTS || pool_size > SYMTAB_MAX_POOL ||
	    build_id_len > SYMTAB_MAX_BUILD_ID || dl_len > SYMTAB_MAX_DEBUGLINK ||
	    blob_size(n_syms, n_aliases, n_segs, pool_size, build_id_len, dl_len) != size)
		return NULL;
	if (get32(p + size - 4) != (uint32_t)crc32(0L, p, (uInt)(size - 4)))
		return NULL;
	/* Every name offset must land in the pool, and the pool must end in
	 * NUL so that every name terminates inside it. */
	if (n_syms && pool_size == 0)
		return NULL;
	if (pool_size && p[size - 4 - 1] != '\0')
		return NULL;

	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (n_syms && !(t->syms = calloc(n_syms, sizeof(*t->syms))))
		goto cleanup;
	if (n_aliases && !(t->aliases = calloc(n_aliases, sizeof(*t->aliases))))
		goto cleanup;
	if (n_segs && !(t->segs = calloc(n_segs, sizeof(*t->segs))))
		goto cleanup;
	if (pool_size && !(t->pool = malloc(pool_size)))
		goto cleanup;

	p += SYMTAB_HEADER_SIZE;
	for (uint64_t i = 0; i < n_syms; i++, p += SYMTAB_SYM_SIZE) {
		struct symtab_sym *s = &t->syms[i];

		s->start = get64(p);
		s->size = get64(p + 8);
		s->name = get32(p + 16);
		s->alias_first = get32(p + 20);
		s->alias_n = get32(p + 24);
		if (get32(p + 28) != 0 || s->name >= pool_size ||
		    s->size > UINT64_MAX - s->start ||
		    (uint64_t)s->alias_first + s->alias_n > n_aliases ||
		    (i > 0 && s->start <= t->syms[i - 1].start))
			goto cleanup;
	}
	t->n_syms = n_syms;
	for (uint64_t i = 0; i < n_aliases; i++, p += 4) {
		t->aliases[i] = get32(p);
		if (t->aliases[i] >= pool_size)
			goto cleanup;
	}
	t->n_aliases = n_aliases;
	for (uint64_t i = 0; i < n_segs; i++, p += SYMTAB_SEG_SIZE) {
		struct symtab_segment *s = &t->segs[i];

		s->offset = get64(p);
		s->vaddr = get64(p + 8);
		s->filesz = get64(p + 16);
		s->memsz = get64(p + 24);
		if (s->filesz > UINT64_MAX - s->offset || s->memsz > UINT64_MAX - s->vaddr)
			goto cleanup;
	}
	t->n_segs = n_segs;
	memcpy(t->build_id, p, build_id_len);
	t->build_id_len = build_id_len;
	p += build_id_len;
	if (memchr(p, '\0', dl_len))
		goto cleanup;
	memcpy(t->debuglink, p, dl_len);
	t->debuglink[dl_len] = '\0';
	p += dl_len;
	t->debuglink_crc = get32((const uint8_t *)blob + 56);
	if (pool_size)
		memcpy(t->pool, p, pool_size);
	t->pool_size = pool_size;
	ok = true;
cleanup:
	if (!ok) {
		symtab_free(t);
		return NULL;
	}
	return t;
}
