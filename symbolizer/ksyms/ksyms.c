/* ksyms.c - sorted kernel symbol table with binary-search lookup.
 *
 * Names live in one growing pool (offsets, not pointers, so the pool can
 * be reallocated while staging). Consecutive symbols of one module share
 * the module string, which keeps a full kallsyms (~200k symbols) to a few
 * MiB.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ksyms.h"

struct ksym {
	uint64_t address;
	uint32_t name;   /* offset into the pool */
	uint32_t module; /* offset into the pool; 0 is "" */
	uint32_t seq;    /* input order, for a stable sort */
};

struct table {
	struct ksym *syms;
	size_t n, cap;
	char *pool;
	size_t pool_len, pool_cap;
	uint32_t last_module; /* pool offset of the last module string added */
};

struct ksyms {
	struct table live;
	struct table staged;
	bool staging;
};

static void table_done(struct table *t)
{
	free(t->syms);
	free(t->pool);
	memset(t, 0, sizeof(*t));
}

static int table_init(struct table *t)
{
	memset(t, 0, sizeof(*t));
	t->pool_cap = 4096;
	t->pool = malloc(t->pool_cap);
	if (!t->pool)
		return -ENOMEM;
	t->pool[0] = '\0'; /* offset 0: the empty string */
	t->pool_len = 1;
	return 0;
}

static int pool_add(struct table *t, const char *s, size_t len, uint32_t *ret_off)
{
	if (t->pool_len + len + 1 > KSYMS_MAX_NAME_BYTES)
		return -E2BIG;
	if (t->pool_len + len + 1 > t->pool_cap) {
		size_t cap = t->pool_cap * 2;
		char *p;

		while (cap < t->pool_len + len + 1)
			cap *= 2;
		p = realloc(t->pool, cap);
		if (!p)
			return -ENOMEM;
		t->pool = p;
		t->pool_cap = cap;
	}
	memcpy(t->pool + t->pool_len, s, len);
	t->pool[t->pool_len + len] = '\0';
	*ret_off = (uint32_t)t->pool_len;
	t->pool_len += len + 1;
	return 0;
}

struct ksyms *ksyms_new(void)
{
	struct ksyms *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	if (table_init(&k->live) < 0) {
		free(k);
		return NULL;
	}
	return k;
}

void ksyms_free(struct ksyms *k)
{
	if (!k)
		return;
	table_done(&k->live);
	table_done(&k->staged);
	free(k);
}

void ksyms_begin(struct ksyms *k)
{
	table_done(&k->staged);
	k->staging = table_init(&k->staged) == 0;
}

int ksyms_staging(const struct ksyms *k)
{
	return k->staging;
}

int ksyms_add(struct ksyms *k, uint64_t address, const char *name, const char *module)
{
	struct table *t = &k->staged;
	size_t nlen, mlen;
	uint32_t name_off, mod_off = 0;
	int r;

	if (!k->staging)
		return -EPROTO;
	nlen = strnlen(name, KSYMS_MAX_NAME_LEN + 1);
	mlen = module ? strnlen(module, KSYMS_MAX_NAME_LEN + 1) : 0;
	if (nlen == 0 || nlen > KSYMS_MAX_NAME_LEN || mlen > KSYMS_MAX_NAME_LEN)
		return -EINVAL;
	if (t->n >= KSYMS_MAX_SYMBOLS)
		return -E2BIG;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct ksym *s;

		if (cap > KSYMS_MAX_SYMBOLS)
			cap = KSYMS_MAX_SYMBOLS;
		s = realloc(t->syms, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		t->syms = s;
		t->cap = cap;
	}
	if (mlen > 0) {
		if (t->last_module && strcmp(t->pool + t->last_module, module) == 0) {
			mod_off = t->last_module;
		} else {
			r = pool_add(t, module, mlen, &mod_off);
			if (r < 0)
				return r;
			t->last_module = mod_off;
		}
	}
	r = pool_add(t, name, nlen, &name_off);
	if (r < 0)
		return r;
	t->syms[t->n] = (struct ksym){ .address = address, .name = name_off, .module = mod_off,
				       .seq = (uint32_t)t->n };
	t->n++;
	return 0;
}

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->address != y->address)
		return x->address < y->address ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int ksyms_commit(struct ksyms *k)
{
	if (!k->staging)
		return -EPROTO;
	if (k->staged.n > 1)
		qsort(k->staged.syms, k->staged.n, sizeof(struct ksym), cmp_ksym);
	table_done(&k->live);
	k->live = k->staged;
	memset(&k->staged, 0, sizeof(k->staged));
	k->staging = false;
	return 0;
}

int ksyms_lookup(const struct ksyms *k, uint64_t address, struct ksyms_lookup *ret)
{
	const struct table *t = &k->live;
	size_t lo = 0, hi = t->n;
	const struct ksym *s;

	/* Greatest i with syms[i].address <= address. Among equal addresses
	 * the first one given wins (aliases such as a function and its
	 * __pfx_ or __SCT__ twin come in kallsyms order). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->syms[mid].address <= address)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	s = &t->syms[lo - 1];
	while (s > t->syms && (s - 1)->address == s->address)
		s--;
	if (address - s->address >= KSYMS_MAX_OFFSET)
		return -ENOENT;
	ret->name = t->pool + s->name;
	ret->module = t->pool + s->module;
	ret->start = s->address;
	ret->offset = address - s->address;
	return 0;
}

size_t ksyms_count(const struct ksyms *k)
{
	return k->live.n;
}

uint64_t ksyms_digest(const struct ksyms *k)
{
	const struct table *t = &k->live;
	uint64_t h = 0xcbf29ce484222325ull ^ t->n;

	for (size_t i = 0; i < t->n; i++) {
		const char *n = t->pool + t->syms[i].name, *m = t->pool + t->syms[i].module;

		h = (h ^ t->syms[i].address) * 0x100000001b3ull;
		for (; *n; n++)
			h = (h ^ (unsigned char)*n) * 0x100000001b3ull;
		h = (h ^ 0x100) * 0x100000001b3ull;
		for (; *m; m++)
			h = (h ^ (unsigned char)*m) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

bool ksyms_same(const struct ksyms *a, const struct ksyms *b)
{
	const struct table *x = &a->live, *y = &b->live;

	if (x->n != y->n)
		return false;
	for (size_t i = 0; i < x->n; i++)
		if (x->syms[i].address != y->syms[i].address ||
		    strcmp(x->pool + x->syms[i].name, y->pool + y->syms[i].name) != 0 ||
		    strcmp(x->pool + x->syms[i].module, y->pool + y->syms[i].module) != 0)
			return false;
	return true;
}

size_t ksyms_bytes(const struct ksyms *k)
{
	return k->live.cap * sizeof(struct ksym) + k->live.pool_cap;
}
