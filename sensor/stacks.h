/* stacks.h - stack dedup and sample aggregation, the pure core of the
 * sensor (no BPF, no gRPC, no I/O: unit-tested in tests/unit/test-stacks.c).
 *
 * Each distinct stack (kernel frames, user frames, outcome) gets a
 * connection-local id the first time it is flushed on a connection; its
 * definition is flushed once per connection while it is remembered. Samples are aggregated by
 * (stack, pid, tid, span, profile) into counts (and sums of weights) with first/last timestamps until the next
 * flush. At most max_counts such entries are buffered: a sample that needs
 * a new entry beyond that is dropped and counted.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define STACKS_COMM_LEN 16

/* A user frame as the sensor resolved it. has_file_id == 0: addr is a raw
 * virtual address in no file mapping; else addr is the file offset. */
struct stack_frame {
	uint8_t file_id[16];
	uint64_t addr;
	uint8_t has_file_id;
	uint8_t pad[7];
};

/* Everything borrowed; only needs to live through stacks_add(). */
#define STACKS_SPAN_LEN 24

struct stack_input {
	const uint64_t *kernel; /* leaf first */
	uint32_t n_kernel;
	const struct stack_frame *user; /* leaf first */
	uint32_t n_user;
	uint8_t outcome; /* sonde.v1.StackOutcome number */
	/* Interpreter frames as the walker of interp_kind encodes them
	 * (bpf/interp.h: one word each), leaf first; they name the process's
	 * own memory, so a stack with any is a stack of pid only. */
	const uint64_t *interp;
	uint32_t n_interp;
	uint32_t interp_kind;
	uint32_t pid;
	uint32_t tid;
	const char *comm; /* thread name, NUL-terminated; truncated to 15 */
	uint64_t unix_ns;
	/* The Go span being served (trace ID, span ID), all zeros for none:
	 * samples of different spans are counted apart. */
	uint8_t span[STACKS_SPAN_LEN];
	uint8_t profile; /* enum sonde_profile (bpf/sample.h) */
	uint64_t weight; /* in the profile's unit; 0 for CPU */
};

/* Passed to the foreach callbacks; pointers valid during the callback and
 * until the next stacks_add()/stacks_flush_done()/stacks_free(). */
struct stack_def {
	uint32_t id;
	const uint64_t *kernel;
	uint32_t n_kernel;
	const struct stack_frame *user;
	uint32_t n_user;
	uint8_t outcome;
	const uint64_t *interp; /* one word each, as the walker encodes them */
	uint32_t n_interp;
	uint32_t interp_kind;   /* enum sonde_interp_kind, when n_interp */
	uint32_t interp_pid;    /* the process, when n_interp */
};

struct stack_count {
	uint32_t stack_id;
	uint32_t pid;
	uint32_t tid;
	uint32_t count;
	uint64_t first_unix_ns;
	uint64_t last_unix_ns;
	const char *comm;
	const uint8_t *span; /* STACKS_SPAN_LEN bytes; NULL: none */
	uint32_t profile;    /* enum sonde_profile */
	uint64_t weight;     /* sum of the samples' weights (saturating) */
};

struct stacks_stats {
	uint64_t samples; /* accepted by stacks_add() */
	uint64_t dropped; /* refused for lack of room */
	size_t counts;    /* (stack, pid, tid) entries buffered now */
	size_t stacks;    /* distinct stacks remembered */
};

struct stacks;

/* max_counts: bound on buffered (stack, pid, tid) entries (> 0).
 * max_stacks: distinct stacks remembered across flushes; above it the
 * memory is trimmed at stacks_flush_done().
 * idle_ns: a stack with no sample for longer (by the samples' own clock)
 * is forgotten at a stacks_flush_done(); 0: never.
 * A forgotten stack's id is reused for the next new definition, so a
 * connection's ids stay below max_stacks + max_counts + 1 and the receiver
 * must accept a definition that replaces an id's earlier one; a forgotten
 * stack that recurs is defined again. NULL on bad arguments or ENOMEM. */
struct stacks *stacks_new(size_t max_counts, size_t max_stacks, uint64_t idle_ns);
/* Accepts NULL. */
void stacks_free(struct stacks *s);

/* Counts one sample. Returns 0; -ENOSPC when it needed a new entry and the
 * buffer is full (counted as dropped); -EINVAL for frame counts over
 * 1024 and -ENOMEM (both also counted as dropped). */
int stacks_add(struct stacks *s, const struct stack_input *in);

/* For every buffered count whose stack has no id on this connection yet:
 * assigns the next id and calls fn once per such stack. Stops at the first
 * non-zero return of fn and returns it; else 0. */
int stacks_foreach_new_def(struct stacks *s, int (*fn)(const struct stack_def *def, void *ctx),
			   void *ctx);
/* Calls fn for every buffered count (in insertion order). Call after
 * stacks_foreach_new_def(), so every stack_id is set. Same return rule. */
int stacks_foreach_count(struct stacks *s, int (*fn)(const struct stack_count *c, void *ctx),
			 void *ctx);
/* The counts were delivered: forgets them (and trims remembered stacks
 * over max_stacks). Not calling it keeps them for the next flush. */
void stacks_flush_done(struct stacks *s);
/* A new connection: every id is void; ids restart at 1, and each stack is
 * defined again when next flushed. Buffered counts are kept. */
void stacks_reset_connection(struct stacks *s);

void stacks_get_stats(const struct stacks *s, struct stacks_stats *ret);
