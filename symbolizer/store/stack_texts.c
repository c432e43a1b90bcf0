/* stack_texts.c - content-addressed, reference-counted stack texts (see
 * stack_texts.h). */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "stack_texts.h"

struct entry {
	struct stack_text pub; /* first */
	struct stack_texts *table; /* NULL: not in the table (a hash collision, or freed table) */
	uint32_t refs;
	char data[]; /* text, NUL, raw */
};

struct stack_texts {
	pthread_mutex_t lock;
	struct hmap *by_hash; /* hash -> struct entry */
	size_t bytes;
};

/* Guards entry->table: an entry can outlive its table (a profile batch
 * freed after the sessions' table at shutdown). Taken before a table's
 * lock. */
static pthread_mutex_t orphan_lock = PTHREAD_MUTEX_INITIALIZER;

struct stack_texts *stack_texts_new(void)
{
	struct stack_texts *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->by_hash = hmap_new();
	if (!t->by_hash) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

static void entry_unlink_all(void *val)
{
	struct entry *e = val;

	e->table = NULL;
}

void stack_texts_free(struct stack_texts *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&orphan_lock);
	pthread_mutex_lock(&t->lock);
	hmap_free(t->by_hash, entry_unlink_all);
	t->by_hash = NULL;
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_unlock(&orphan_lock);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static struct entry *entry_new(const char *text, size_t text_len, const void *raw, size_t raw_len,
			       uint64_t hash)
{
	struct entry *e = malloc(sizeof(*e) + text_len + 1 + raw_len);

	if (!e)
		return NULL;
	memcpy(e->data, text, text_len);
	e->data[text_len] = '\0';
	if (raw_len)
		memcpy(e->data + text_len + 1, raw, raw_len);
	e->pub = (struct stack_text){ .hash = hash, .text = e->data,
				      .raw = raw_len ? (uint8_t *)e->data + text_len + 1 : NULL,
				      .text_len = text_len, .raw_len = raw_len };
	e->table = NULL;
	e->refs = 1;
	return e;
}

static bool entry_equal(const struct entry *e, const char *text, size_t text_len, const void *raw,
			size_t raw_len)
{
	return e->pub.text_len == text_len && e->pub.raw_len == raw_len &&
	       memcmp(e->pub.text, text, text_len) == 0 &&
	       (!raw_len || memcmp(e->pub.raw, raw, raw_len) == 0);
}

const struct stack_text *stack_texts_get(struct stack_texts *t, const char *text, size_t text_len,
					 const void *raw, size_t raw_len, uint64_t hash)
{
	struct entry *e;

	pthread_mutex_lock(&t->lock);
	e = hmap_get_u64(t->by_hash, hash);
	if (e && entry_equal(e, text, text_len, raw, raw_len)) {
		e->refs++;
		pthread_mutex_unlock(&t->lock);
		return &e->pub;
	}
	/* New, or another stack with the same hash: that one stays private. */
	e = entry_new(text, text_len, raw, raw_len, hash);
	if (e && !hmap_get_u64(t->by_hash, hash) && hmap_put_u64(t->by_hash, hash, e, NULL) == 0) {
		e->table = t;
		t->bytes += text_len + raw_len;
	}
	pthread_mutex_unlock(&t->lock);
	return e ? &e->pub : NULL;
}

void stack_text_ref(const struct stack_text *pub)
{
	struct entry *e = (struct entry *)pub;
	struct stack_texts *t;

	pthread_mutex_lock(&orphan_lock);
	t = e->table;
	if (t)
		pthread_mutex_lock(&t->lock);
	e->refs++;
	if (t)
		pthread_mutex_unlock(&t->lock);
	pthread_mutex_unlock(&orphan_lock);
}

void stack_text_unref(const struct stack_text *pub)
{
	struct entry *e = (struct entry *)pub;
	struct stack_texts *t;
	bool last;

	if (!e)
		return;
	pthread_mutex_lock(&orphan_lock);
	t = e->table;
	if (t)
		pthread_mutex_lock(&t->lock);
	last = --e->refs == 0;
	if (last && t) {
		hmap_remove(t->by_hash, &e->pub.hash, sizeof(e->pub.hash));
		t->bytes -= e->pub.text_len + e->pub.raw_len;
	}
	if (t)
		pthread_mutex_unlock(&t->lock);
	pthread_mutex_unlock(&orphan_lock);
	if (last)
		free(e);
}

void stack_texts_stats(struct stack_texts *t, size_t *ret_entries, size_t *ret_bytes)
{
	pthread_mutex_lock(&t->lock);
	*ret_entries = hmap_count(t->by_hash);
	*ret_bytes = t->bytes;
	pthread_mutex_unlock(&t->lock);
}
