/* stack_texts.h - symbolized stacks (folded text and raw frames), held
 * once however many sessions and profile batches use them.
 *
 * Content-addressed: an entry is found by its profile_stack_hash() and
 * its bytes compared, so two equal stacks of any sensors share one
 * entry, and a stack that only collides in its hash gets its own. Entries
 * are reference counted and freed at the last stack_text_unref().
 * Thread-safe (one lock per table).
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

struct stack_texts;

struct stack_text {
	uint64_t hash;     /* profile_stack_hash(text, raw, raw_len) */
	const char *text;  /* folded frames, NUL-terminated */
	const uint8_t *raw; /* the raw stack (core/rawstack.h); NULL if none */
	size_t text_len, raw_len;
};

/* NULL on out of memory. */
struct stack_texts *stack_texts_new(void);
/* Frees the table. Entries still referenced stay valid and are freed at
 * their last unref. Accepts NULL. */
void stack_texts_free(struct stack_texts *t);
/* An entry equal to (text, raw): an existing one with one more reference,
 * or a new copy with one. NULL on out of memory. */
const struct stack_text *stack_texts_get(struct stack_texts *t, const char *text, size_t text_len,
					 const void *raw, size_t raw_len, uint64_t hash);
/* One more reference to e. */
void stack_text_ref(const struct stack_text *e);
/* Drops a reference; the entry goes with its last. Accepts NULL. */
void stack_text_unref(const struct stack_text *e);
/* Entries held and their bytes (for Status and the benchmarks). */
void stack_texts_stats(struct stack_texts *t, size_t *ret_entries, size_t *ret_bytes);
