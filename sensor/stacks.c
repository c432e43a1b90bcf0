/* stacks.c - a dictionary of distinct stacks (chained hash, one allocation
 * per stack) and a fixed-size table of counts keyed by (stack, pid, tid),
 * both sized at creation so memory stays bounded. Stacks not sampled for a
 * while are forgotten and their ids reused, so that neither this side nor
 * the symbolizer's copy of the definitions grows with the number of stacks
 * ever seen (short-lived processes make new ones all the time). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "stacks.h"

#define STACKS_MAX_FRAMES 1024

struct stack {
	struct stack *next;            /* bucket chain */
	struct stack *older, *newer;   /* the LRU list, by latest sample */
	uint64_t hash;
	uint32_t id; /* 0: none on this connection */
	uint64_t last_ns; /* latest sample of this stack */
	uint32_t n_kernel;
	uint32_t n_user;
	uint32_t n_interp, interp_kind, interp_pid;
	uint8_t outcome;
	uint64_t *kernel;         /* points into the same allocation */
	struct stack_frame *user; /* likewise */
	uint64_t *interp;         /* likewise */
};

struct count {
	struct stack *stack;
	uint32_t pid, tid;
	uint8_t span[STACKS_SPAN_LEN];
	bool has_span;
	uint8_t profile;
	uint32_t count;
	uint64_t weight;
	int32_t next; /* bucket chain, index into counts; -1 ends */
	uint64_t first_ns, last_ns;
	char comm[STACKS_COMM_LEN];
};

struct stacks {
	size_t max_counts, max_stacks;
	uint64_t idle_ns;
	uint64_t now_ns;        /* latest sample time seen */
	struct stack *oldest, *newest; /* the LRU list */
	struct stack **stack_buckets;
	size_t n_stack_buckets;   /* power of two; grows with n_stacks */
	size_t max_stack_buckets; /* what max_stacks + one interval needs */
	size_t n_stacks;
	uint32_t next_id;
	uint32_t *free_ids; /* ids of forgotten stacks, reused first */
	size_t n_free_ids, cap_free_ids;
	struct count *counts; /* max_counts entries */
	size_t n_counts;
	int32_t *count_buckets;
	size_t n_count_buckets; /* power of two */
	uint64_t samples, dropped;
};

static size_t pow2_at_least(size_t n)
{
	size_t p = 16;

	while (p < n)
		p <<= 1;
	return p;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

struct stacks *stacks_new(size_t max_counts, size_t max_stacks, uint64_t idle_ns)
{
	struct stacks *s;

	if (max_counts == 0 || max_counts > (1u << 24) || max_stacks > (1u << 26))
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->max_counts = max_counts;
	s->max_stacks = max_stacks;
	s->idle_ns = idle_ns;
	s->next_id = 1;
	/* The dictionary holds at most max_stacks plus one interval's new
	 * stacks. Its buckets start small and grow: a table sized for the
	 * bound (4 MiB by default) made every lookup a cache and TLB miss. */
	s->max_stack_buckets = pow2_at_least(max_stacks + max_counts);
	s->n_stack_buckets = s->max_stack_buckets < 1024 ? s->max_stack_buckets : 1024;
	s->n_count_buckets = pow2_at_least(2 * max_counts);
	s->stack_buckets = calloc(s->n_stack_buckets, sizeof(*s->stack_buckets));
	s->counts = calloc(max_counts, sizeof(*s->counts));
	s->count_buckets = malloc(s->n_count_buckets * sizeof(*s->count_buckets));
	if (!s->stack_buckets || !s->counts || !s->count_buckets) {
		stacks_free(s);
		return NULL;
	}
	memset(s->count_buckets, 0xff, s->n_count_buckets * sizeof(*s->count_buckets));
	return s;
}

/* Keeps id for reuse. If the list cannot grow, the id is simply not reused:
 * ids then go on increasing, as they would without reuse. */
static void release_id(struct stacks *s, uint32_t id)
{
	if (id == 0)
		return;
	if (s->n_free_ids == s->cap_free_ids) {
		size_t cap = s->cap_free_ids ? 2 * s->cap_free_ids : 1024;
		uint32_t *n = realloc(s->free_ids, cap * sizeof(*n));

		if (!n)
			return;
		s->free_ids = n;
		s->cap_free_ids = cap;
	}
	s->free_ids[s->n_free_ids++] = id;
}

static uint32_t take_id(struct stacks *s)
{
	uint32_t id;

	if (s->n_free_ids)
		return s->free_ids[--s->n_free_ids];
	id = s->next_id++;
	if (s->next_id == 0) /* 2^32 definitions on one connection */
		s->next_id = 1;
	return id;
}

static void lru_unlink(struct stacks *s, struct stack *st)
{
	if (st->older)
		st->older->newer = st->newer;
	else
		s->oldest = st->newer;
	if (st->newer)
		st->newer->older = st->older;
	else
		s->newest = st->older;
	st->older = st->newer = NULL;
}

static void lru_push_newest(struct stacks *s, struct stack *st)
{
	st->older = s->newest;
	st->newer = NULL;
	if (s->newest)
		s->newest->newer = st;
	else
		s->oldest = st;
	s->newest = st;
}

static void forget_stack(struct stacks *s, struct stack *st)
{
	struct stack **link = &s->stack_buckets[st->hash & (s->n_stack_buckets - 1)];

	while (*link != st)
		link = &(*link)->next;
	*link = st->next;
	lru_unlink(s, st);
	release_id(s, st->id);
	free(st);
	s->n_stacks--;
}

/* Forgets the least recently sampled stacks: all those last sampled before
 * cutoff_ns, then more until at most keep remain. Only between flushes: no
 * count refers to a stack then. The LRU list makes it cost what it frees. */
static void forget_stacks(struct stacks *s, uint64_t cutoff_ns, size_t keep)
{
	while (s->oldest && (s->oldest->last_ns < cutoff_ns || s->n_stacks > keep))
		forget_stack(s, s->oldest);
}

void stacks_free(struct stacks *s)
{
	if (!s)
		return;
	if (s->stack_buckets)
		forget_stacks(s, 0, 0);
	free(s->stack_buckets);
	free(s->free_ids);
	free(s->counts);
	free(s->count_buckets);
	free(s);
}

static uint64_t hash_input(const struct stack_input *in)
{
	uint64_t h = mix(0x5bd1e995ull, ((uint64_t)in->n_kernel << 32) | in->n_user);

	h = mix(h, in->outcome);
	if (in->n_interp) {
		h = mix(mix(mix(h, in->n_interp), in->interp_kind), in->pid);
		for (uint32_t i = 0; i < in->n_interp; i++)
			h = mix(h, in->interp[i]);
	}
	for (uint32_t i = 0; i < in->n_kernel; i++)
		h = mix(h, in->kernel[i]);
	for (uint32_t i = 0; i < in->n_user; i++) {
		const struct stack_frame *f = &in->user[i];
		uint64_t a, b;

		memcpy(&a, f->file_id, 8);
		memcpy(&b, f->file_id + 8, 8);
		h = mix(mix(mix(h, a), b), f->addr ^ ((uint64_t)f->has_file_id << 63));
	}
	return h;
}

static bool frames_equal(const struct stack_frame *a, const struct stack_frame *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i].addr != b[i].addr || a[i].has_file_id != b[i].has_file_id ||
		    memcmp(a[i].file_id, b[i].file_id, 16) != 0)
			return false;
	return true;
}

static struct stack *find_stack(struct stacks *s, const struct stack_input *in, uint64_t h)
{
	struct stack *st = s->stack_buckets[h & (s->n_stack_buckets - 1)];

	for (; st; st = st->next)
		if (st->hash == h && st->n_kernel == in->n_kernel && st->n_user == in->n_user &&
		    st->outcome == in->outcome && st->n_interp == in->n_interp &&
		    (in->n_interp == 0 ||
		     (st->interp_pid == in->pid && st->interp_kind == in->interp_kind &&
		      memcmp(st->interp, in->interp, in->n_interp * sizeof(uint64_t)) == 0)) &&
		    (in->n_kernel == 0 ||
		     memcmp(st->kernel, in->kernel, in->n_kernel * sizeof(uint64_t)) == 0) &&
		    frames_equal(st->user, in->user, in->n_user))
			return st;
	return NULL;
}

/* Doubles the bucket array when the chains average over one stack. Failing
 * to grow only makes chains longer. */
static void maybe_grow(struct stacks *s)
{
	size_t n = s->n_stack_buckets * 2;
	struct stack **nb;

	if (s->n_stacks < s->n_stack_buckets || n > s->max_stack_buckets)
		return;
	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (struct stack *st = s->oldest; st; st = st->newer) {
		size_t b = st->hash & (n - 1);

		st->next = nb[b];
		nb[b] = st;
	}
	free(s->stack_buckets);
	s->stack_buckets = nb;
	s->n_stack_buckets = n;
}

static struct stack *new_stack(struct stacks *s, const struct stack_input *in, uint64_t h)
{
	size_t size = sizeof(struct stack) + in->n_user * sizeof(struct stack_frame) +
		      (in->n_kernel + in->n_interp) * sizeof(uint64_t);
	struct stack *st;
	size_t b;

	maybe_grow(s);
	b = h & (s->n_stack_buckets - 1);
	st = malloc(size);
	if (!st)
		return NULL;
	st->hash = h;
	st->id = 0;
	st->last_ns = 0;
	st->n_kernel = in->n_kernel;
	st->n_user = in->n_user;
	st->outcome = in->outcome;
	/* User frames first: they need 8-byte alignment, as do the u64s. */
	st->user = (struct stack_frame *)(st + 1);
	st->kernel = (uint64_t *)(st->user + in->n_user);
	if (in->n_user)
		memcpy(st->user, in->user, in->n_user * sizeof(struct stack_frame));
	if (in->n_kernel)
		memcpy(st->kernel, in->kernel, in->n_kernel * sizeof(uint64_t));
	st->n_interp = in->n_interp;
	st->interp_kind = in->n_interp ? in->interp_kind : 0;
	st->interp_pid = in->n_interp ? in->pid : 0;
	st->interp = st->kernel + in->n_kernel;
	if (in->n_interp)
		memcpy(st->interp, in->interp, in->n_interp * sizeof(uint64_t));
	st->next = s->stack_buckets[b];
	s->stack_buckets[b] = st;
	lru_push_newest(s, st);
	s->n_stacks++;
	return st;
}

static size_t count_bucket(const struct stacks *s, const struct stack *st, uint32_t pid,
			   uint32_t tid)
{
	uint64_t h = mix(mix(st->hash, pid), tid);

	return h & (s->n_count_buckets - 1);
}

int stacks_add(struct stacks *s, const struct stack_input *in)
{
	struct stack *st;
	struct count *c;
	uint64_t h;
	size_t b;

	if (in->n_kernel > STACKS_MAX_FRAMES || in->n_user > STACKS_MAX_FRAMES ||
	    in->n_interp > STACKS_MAX_FRAMES) {
		s->dropped++; /* every sample is accounted for, even a malformed one */
		return -EINVAL;
	}
	if (in->unix_ns > s->now_ns)
		s->now_ns = in->unix_ns;
	h = hash_input(in);
	st = find_stack(s, in, h);
	if (st) {
		if (in->unix_ns > st->last_ns)
			st->last_ns = in->unix_ns;
		if (st != s->newest) {
			lru_unlink(s, st);
			lru_push_newest(s, st);
		}
		b = count_bucket(s, st, in->pid, in->tid);
		for (int32_t i = s->count_buckets[b]; i >= 0; i = s->counts[i].next) {
			c = &s->counts[i];
			if (c->stack == st && c->pid == in->pid && c->tid == in->tid &&
			    c->profile == in->profile &&
			    !memcmp(c->span, in->span, sizeof(c->span))) {
				c->count++;
				c->weight = c->weight + in->weight < c->weight ? UINT64_MAX
									 : c->weight + in->weight;
				if (in->unix_ns < c->first_ns)
					c->first_ns = in->unix_ns;
				if (in->unix_ns > c->last_ns)
					c->last_ns = in->unix_ns;
				s->samples++;
				return 0;
			}
		}
	}
	if (s->n_counts >= s->max_counts) {
		s->dropped++;
		return -ENOSPC;
	}
	if (!st) {
		st = new_stack(s, in, h);
		if (!st) {
			s->dropped++;
			return -ENOMEM;
		}
		st->last_ns = in->unix_ns;
	}
	b = count_bucket(s, st, in->pid, in->tid);
	c = &s->counts[s->n_counts];
	c->stack = st;
	c->pid = in->pid;
	c->tid = in->tid;
	memcpy(c->span, in->span, sizeof(c->span));
	c->has_span = false;
	for (size_t k = 0; k < sizeof(c->span); k++)
		c->has_span |= c->span[k] != 0;
	c->profile = in->profile;
	c->count = 1;
	c->weight = in->weight;
	c->first_ns = c->last_ns = in->unix_ns;
	memset(c->comm, 0, sizeof(c->comm));
	if (in->comm)
		strncpy(c->comm, in->comm, sizeof(c->comm) - 1);
	c->next = s->count_buckets[b];
	s->count_buckets[b] = (int32_t)s->n_counts;
	s->n_counts++;
	s->samples++;
	return 0;
}

int stacks_foreach_new_def(struct stacks *s, int (*fn)(const struct stack_def *def, void *ctx),
			   void *ctx)
{
	for (size_t i = 0; i < s->n_counts; i++) {
		struct stack *st = s->counts[i].stack;
		struct stack_def d;
		int r;

		if (st->id != 0)
			continue;
		st->id = take_id(s);
		d = (struct stack_def){
			.id = st->id,
			.kernel = st->kernel,
			.n_kernel = st->n_kernel,
			.user = st->user,
			.n_user = st->n_user,
			.outcome = st->outcome,
			.interp = st->interp,
			.n_interp = st->n_interp,
			.interp_kind = st->interp_kind,
			.interp_pid = st->interp_pid,
		};
		r = fn(&d, ctx);
		if (r)
			return r;
	}
	return 0;
}

int stacks_foreach_count(struct stacks *s, int (*fn)(const struct stack_count *c, void *ctx),
			 void *ctx)
{
	for (size_t i = 0; i < s->n_counts; i++) {
		const struct count *c = &s->counts[i];
		struct stack_count out = {
			.stack_id = c->stack->id,
			.pid = c->pid,
			.tid = c->tid,
			.count = c->count,
			.first_unix_ns = c->first_ns,
			.last_unix_ns = c->last_ns,
			.comm = c->comm,
			.span = c->has_span ? c->span : NULL,
			.profile = c->profile,
			.weight = c->weight,
		};
		int r = fn(&out, ctx);

		if (r)
			return r;
	}
	return 0;
}

void stacks_flush_done(struct stacks *s)
{
	/* Only the buckets in use: the table is far larger than a second's
	 * counts, and clearing it whole was a tenth of the sensor's CPU. */
	for (size_t i = 0; i < s->n_counts; i++) {
		const struct count *c = &s->counts[i];

		s->count_buckets[count_bucket(s, c->stack, c->pid, c->tid)] = -1;
	}
	s->n_counts = 0;
	/* Nothing refers to a stack now: forget those idle for idle_ns, and
	 * the least recent over max_stacks. A forgotten stack that recurs is
	 * defined again, under a reused id. */
	forget_stacks(s, s->idle_ns && s->now_ns > s->idle_ns ? s->now_ns - s->idle_ns : 0,
		      s->max_stacks);
}

void stacks_reset_connection(struct stacks *s)
{
	for (struct stack *st = s->oldest; st; st = st->newer)
		st->id = 0;
	s->next_id = 1;
	s->n_free_ids = 0;
}

void stacks_get_stats(const struct stacks *s, struct stacks_stats *ret)
{
	ret->samples = s->samples;
	ret->dropped = s->dropped;
	ret->counts = s->n_counts;
	ret->stacks = s->n_stacks;
}
