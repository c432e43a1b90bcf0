/* arena.h - per-call bump allocator: everything a request builds (reply
 * messages, copied strings) is allocated here and freed at once when the
 * call ends. */
#pragma once

#include <stddef.h>

struct arena;

/* NULL on out of memory. */
struct arena *arena_new(void);
/* Accepts NULL. Frees every allocation of the arena. */
void arena_free(struct arena *a);
/* Zeroed memory, aligned for any type; NULL on out of memory. */
void *arena_alloc(struct arena *a, size_t size);
/* Copies s (or its first n bytes); NULL on out of memory. */
char *arena_strdup(struct arena *a, const char *s);
char *arena_strndup(struct arena *a, const char *s, size_t n);
/* printf into the arena; NULL on failure. */
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
