/* profile.h - recent profiles: symbolized stacks as folded text
 * ("comm;root;...;leaf", kernel frames suffixed "_[k]") with the raw
 * stack they came from, counted per minute, process, thread and stack. Lives in the cache database (tables stacks
 * and samples, see cache.c), so one file holds all symbolizer state.
 *
 * Samples are aggregated in memory and written in one transaction per
 * profile_flush() (the symbolizer calls it every 5 seconds and before each
 * query). Rows older than the retention are deleted by profile_expire().
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "cache.h"

#define PROFILE_MAX_NAME 1024       /* a frame name is cut here */
#define PROFILE_MAX_STACK (256u << 10) /* a folded stack is cut here */
/* Pending rows that make the batch the one being written. The store
 * holds at most two batches (one filling, one being written), ~240 bytes
 * a row: 100,000 was ~45 MiB at 500 sensors (docs/benchmarks.md, Scale),
 * and sorting a batch for writing costs the loop ~0.3 us a row. */
#define PROFILE_MAX_BATCH 50000
#define PROFILE_MAX_NODES 65536     /* distinct node names kept */
#define PROFILE_MAX_NODE_NAME 100   /* bytes of a node name */

struct profile_store;
struct stack_text;

/* Builds a folded stack, frame by frame. */
struct folded {
	char *buf; /* NUL-terminated; owned */
	size_t len, cap;
	size_t n_frames;
};

/* Appends a frame (root first): ';' in name becomes ':', newlines and
 * other control characters are dropped, bytes that are not UTF-8 become
 * "\xNN" (common/utf8.h), kernel frames get "_[k]". An
 * empty name becomes "[unknown]". Returns 0, -E2BIG when the stack is full
 * (the frame is dropped), -ENOMEM. */
int folded_push(struct folded *f, const char *name, bool kernel);
/* Frees the buffer and resets f. */
void folded_done(struct folded *f);

/* c is borrowed and must outlive the store. NULL on out of memory. */
struct profile_store *profile_new(struct cache *c, unsigned retention_minutes);
/* Flushes, then frees. Accepts NULL. */
void profile_free(struct profile_store *p);

/* The id of node name (valid UTF-8, at most PROFILE_MAX_NODE_NAME bytes:
 * longer names are cut), added to the nodes table if new; ids stay valid
 * for the store's life. Returns 0, -E2BIG (PROFILE_MAX_NODES names
 * already), -EIO or -ENOMEM; *ret_id untouched on failure. */
int profile_node(struct profile_store *p, const char *name, uint32_t *ret_id);
/* The name of node id, or "" for an id profile_node() never gave.
 * Borrowed for the store's life. */
const char *profile_node_name(const struct profile_store *p, uint32_t id);

/* Trace ID (16 bytes) then span ID (8): the span a sample was taken in. */
#define PROFILE_SPAN_LEN 24

/* What samples measure: the numbers of bpf/sample.h's enum sonde_profile
 * and of the wire's SampleCount.profile. */
enum profile_type {
	PROFILE_CPU = 0,     /* value: samples (count) */
	PROFILE_OFF_CPU = 1, /* value: ns off the CPU (weight) */
	PROFILE_MEMORY = 2,  /* value: bytes of growth (weight) */
};
#define PROFILE_TYPES 3

/* count samples of one stack by thread tid of pid at time unix_s. */
struct profile_sample {
	uint64_t unix_s;
	uint32_t node;       /* profile_node()'s id of the sensor's node */
	uint32_t pid, tid;
	uint64_t start;      /* the process's start time (clock ticks since boot) */
	uint32_t uid;        /* the process's owner (0: root's, admins only) */
	const uint8_t *span; /* PROFILE_SPAN_LEN bytes, or NULL: in no span */
	const char *comm;   /* thread name; sanitised here */
	const char *frames; /* folded text without the comm (folded_push); may be "" */
	const void *raw;    /* the raw stack (core/rawstack.h); may be NULL */
	size_t raw_len;
	uint64_t count;
	uint32_t profile;   /* enum profile_type; counted apart */
	uint64_t weight;    /* sum of the samples' weights (0 for CPU) */
	/* Optional, to save work per sample: strlen(frames) (0: computed)
	 * and profile_stack_hash(frames, raw, raw_len) (0: computed). */
	size_t frames_len;
	uint64_t stack_hash;
	/* Optional: frames and raw as one shared entry (stack_texts.h), which
	 * the store references instead of copying them per row. */
	const struct stack_text *shared;
};

/* A digest of a stack, for profile_sample.stack_hash: compute it once per
 * stack, not per sample. Never 0 in practice; 0 means "not given". */
uint64_t profile_stack_hash(const char *frames, const void *raw, size_t raw_len);

/* Adds smp (borrowed). Returns 0 or -ENOMEM. */
int profile_add(struct profile_store *p, const struct profile_sample *smp);
/* Writes the pending rows in one transaction. Returns 0 or a negative
 * errno (the rows are then dropped, logged at debug level). */
int profile_flush(struct profile_store *p);
/* Incremental flush, for the loop thread's tick: with start, makes the
 * pending rows a batch being written (unless one is); then writes the
 * next rows of that batch in one transaction, until max_rows rows are
 * written (0: no bound) or budget_us microseconds have passed (checked
 * every few rows; 0: no bound), at least one row. Rows added meanwhile
 * go to the next batch; when that one reaches PROFILE_MAX_BATCH rows
 * before this one is written, profile_add() writes the rest of this one
 * first. Returns 0 or a negative errno (the rest of the batch is then
 * dropped and counted). */
int profile_flush_step(struct profile_store *p, size_t max_rows, int64_t budget_us, bool start);
/* Whether a batch is being written by profile_flush_step(). */
bool profile_writing(const struct profile_store *p);
/* Rows in the batch being filled (profile_add() makes it the one being
 * written at PROFILE_MAX_BATCH). */
size_t profile_pending_rows(const struct profile_store *p);
/* Samples (sums of counts) profile_add() accepted, and of those the ones
 * a failed flush dropped, since profile_new(). Stored = added - dropped. */
void profile_counts(const struct profile_store *p, uint64_t *ret_added, uint64_t *ret_dropped);
/* Whether the store moved to an in-memory database: when a write fails
 * with SQLITE_FULL it moves there once, says so in the log, and writes
 * (and answers queries) there from then on. */
bool profile_in_memory(const struct profile_store *p);
/* Deletes rows older than the retention, measured back from now_s, and
 * stacks no row uses. Returns 0 or a negative errno. */
int profile_expire(struct profile_store *p, uint64_t now_s);

/* A window in unix seconds: a minute is included when it overlaps
 * [since_s, until_s). until_s 0: no upper bound. pid 0: all. node NULL
 * or "": every node's (results stay apart per node). scoped:
 * only samples of processes owned by uid (false, as zero-initialised:
 * every uid's). */
struct profile_query {
	uint64_t since_s;
	uint64_t until_s;
	uint32_t pid;
	const char *node; /* borrowed */
	bool scoped;
	uint32_t uid;
	uint32_t limit; /* 0: no limit */
	/* enum profile_type: only its samples. Top and Folded count samples
	 * for PROFILE_CPU and sum weights (ns, bytes) for the others. */
	uint32_t profile;
};

struct profile_top_entry {
	const char *node; /* counted per node */
	const char *function;
	uint64_t self, total;
};

struct profile_stack {
	const char *node;
	const char *text; /* "comm;root;...;leaf" */
	uint64_t count;
	uint32_t pid;     /* the pid if one process has this stack, else 0 */
};

/* Functions of each node by self count (then total, then name, then
 * node); the comm frame is not
 * a function. Results are allocated in a (borrowed). Returns 0 or a
 * negative errno; outputs untouched on failure. */
int profile_top(struct profile_store *p, const struct profile_query *q, struct arena *a,
		struct profile_top_entry **ret_entries, size_t *ret_n, uint64_t *ret_total);
/* Distinct stacks by count, one per node and distinct text. */
int profile_folded(struct profile_store *p, const struct profile_query *q, struct arena *a,
		   struct profile_stack **ret_stacks, size_t *ret_n, uint64_t *ret_total);

/* A stored row: count samples of one raw stack (core/rawstack.h) of
 * thread tid (named comm) of pid, in one minute. Borrowed for the call. */
struct profile_row {
	uint64_t minute; /* unix seconds / 60 */
	const char *node;
	uint32_t pid, tid;
	uint64_t start;  /* the process's start time (clock ticks since boot) */
	const uint8_t *span; /* PROFILE_SPAN_LEN bytes, or NULL */
	const char *comm;
	const void *raw;
	size_t raw_len;
	uint64_t count;
	uint32_t profile; /* enum profile_type (the query's) */
	uint64_t weight;
};

/* Calls fn for every row in the window (q->limit is ignored); stops at
 * and returns fn's first non-zero return. Returns 0 or a negative errno. */
int profile_rows(struct profile_store *p, const struct profile_query *q,
		 int (*fn)(const struct profile_row *row, void *ctx), void *ctx);
