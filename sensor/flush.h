/* flush.h - turns the sensor's state into SensorMessages on one
 * connection: ProcessUpdate, ProcessExit, StackBatch, SensorStats.
 * Every function returns 0 or the uplink's negative errno. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "procs.h"
#include "stacks.h"

struct uplink;

struct sensor_counters {
	uint64_t samples_taken; /* sample records read */
	uint64_t samples_lost;  /* ring buffer full, from BPF */
	uint64_t samples_dropped;
	uint64_t processes;
	uint64_t files;
	uint64_t unwind_tables_loaded;
	uint64_t unwind_rows_loaded;
	uint64_t unwind_tables_rejected;
	uint64_t bpf_map_bytes;
	/* Accounting of the current connection (ingest.proto SensorStats). */
	uint64_t connection_samples_taken;
	uint64_t connection_samples_dropped;
	uint64_t samples_unconfirmed;
	uint64_t go_probe_files, go_probe_links, go_probe_attach_failures;
	uint64_t go_probe_records, go_probe_records_lost;
	/* Refused by validate.c (uplink.c on receipt, goprobes.c at use). */
	uint64_t probe_plans_refused, interpreter_configs_refused;
};

/* all: every process (after a (re)connect), else only the dirty ones. */
int flush_processes(struct uplink *u, uint64_t gen, struct procs *p, enum procs_select sel);
int flush_exits(struct uplink *u, uint64_t gen, struct procs *p);
/* Stack defs (those new on this connection) first, then the counts; at
 * most ~2,000 entries or max_bytes per StackBatch. On success the counts
 * are forgotten (stacks_flush_done()); on failure they are kept.
 * *ret_samples (also on failure) gets the samples in the counts of the
 * batches that were written. */
int flush_stacks(struct uplink *u, uint64_t gen, struct stacks *s, size_t max_bytes,
		 uint64_t *ret_samples);
/* Frees the buffer flush_stacks() keeps between calls. */
void flush_release(void);

/* ---- opaque records ----
 * One bounded buffer and one batch sender for every kind of record the
 * sensor forwards without reading: the interpreter walkers' records
 * (bpf/interp.h), the Go probes' events, the kernel symbol snapshot. Each
 * path gives a send function that packs a batch into its message. Not
 * thread-safe. */
struct flush_records;

/* One record as the batch sender sees it (data borrowed from the buffer,
 * valid during the call). */
struct flush_rec {
	uint32_t pid, kind; /* as added; 0 where a path has none */
	const uint8_t *data;
	uint32_t len;
};

struct flush_batch {
	size_t per_message; /* records at most in one message (> 0) */
	size_t max_bytes;   /* a message's bytes at most (estimated) ... */
	size_t overhead;    /* ... counting this many per record on top */
	bool keep_on_failure; /* a failed send keeps every record, else drops them */
	/* Packs and sends recs[0..n) as one message; last: no more follow
	 * in this call of flush_records_send() with last set. Returns 0 or
	 * the uplink's error (which ends the call). */
	int (*send)(void *ctx, struct uplink *u, uint64_t gen, const struct flush_rec *recs,
		    size_t n, bool last);
	void *ctx;
};

/* At most max_records records and max_bytes bytes of them; the buffer is
 * allocated at the first record. NULL on ENOMEM. */
struct flush_records *flush_records_new(size_t max_records, size_t max_bytes);
void flush_records_free(struct flush_records *q);
/* Copies len bytes of data (borrowed), tagged pid and kind. 0, or
 * -ENOBUFS when full (dropped, counted). */
int flush_records_add(struct flush_records *q, uint32_t pid, uint32_t kind, const void *data,
		      size_t len);
size_t flush_records_count(const struct flush_records *q);
/* Half of the records or bytes in use: time to flush before the timer. */
bool flush_records_half_full(const struct flush_records *q);
/* Records dropped because the buffer was full, since it was made. */
uint64_t flush_records_dropped(const struct flush_records *q);
/* Forgets the waiting records (a new connection). */
void flush_records_clear(struct flush_records *q);
/* Sends every waiting record in batches of b's bounds through b->send,
 * in the order added, then forgets them (on failure too, unless
 * b->keep_on_failure). last: send one final message with last set even
 * with no records; else nothing is sent when none wait. *ret_unsent gets
 * the records not sent. Returns 0, -ENOMEM, or the uplink's error. */
int flush_records_send(struct flush_records *q, struct uplink *u, uint64_t gen,
		       const struct flush_batch *b, bool last, size_t *ret_unsent);

/* Sends q's interpreter records as InterpreterRecords (before the stacks
 * whose frames need them). */
#define FLUSH_INTERP_PER_MESSAGE 512
int flush_interp_records(struct uplink *u, uint64_t gen, struct flush_records *q);
/* more: another message follows in this burst. */
int flush_stats(struct uplink *u, uint64_t gen, const struct sensor_counters *c, bool more);
