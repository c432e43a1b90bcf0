/* arena.c - a list of blocks; big allocations get a block of their own. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"

#define ARENA_BLOCK (64u << 10)

struct block {
	struct block *next;
	size_t used, size;
	max_align_t data[];
};

struct arena {
	struct block *head;
};

struct arena *arena_new(void)
{
	return calloc(1, sizeof(struct arena));
}

void arena_free(struct arena *a)
{
	if (!a)
		return;
	for (struct block *b = a->head, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	free(a);
}

void *arena_alloc(struct arena *a, size_t size)
{
	struct block *b = a->head;
	size_t need = (size + 15) & ~(size_t)15;
	void *p;

	if (need < size)
		return NULL;
	if (!b || b->size - b->used < need) {
		size_t bs = need > ARENA_BLOCK / 4 ? need : ARENA_BLOCK;

		b = malloc(sizeof(*b) + bs);
		if (!b)
			return NULL;
		b->used = 0;
		b->size = bs;
		if (bs == need && a->head) {
			/* A dedicated block goes behind the current one so the
			 * current one's free space stays usable. */
			b->next = a->head->next;
			a->head->next = b;
		} else {
			b->next = a->head;
			a->head = b;
		}
	}
	p = (char *)b->data + b->used;
	b->used += need;
	memset(p, 0, size);
	return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = arena_alloc(a, len + 1);

	if (!p)
		return NULL;
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return arena_strndup(a, s, SIZE_MAX);
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	p = arena_alloc(a, (size_t)n + 1);
	if (!p)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}
