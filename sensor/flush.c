/* flush.c - protobuf-c message building. Messages point into the sensor's
 * own state (borrowed) and are written before that state changes. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "flush.h"
#include "interp.h"
#include "interp_kinds.h"
#include "uplink.h"
#include "utf8.h"

#define BATCH_MAX_ENTRIES 2000
/* A path or cgroup escaped for the wire is cut here: the symbolizer
 * refuses longer paths (SESSION_MAX_PATH). */
#define FLUSH_MAX_TEXT 4096
/* A comm (15 bytes) with every byte escaped as "\xNN", and its NUL. */
#define FLUSH_COMM_ESCAPED (4 * 15 + 1)

/* Text a target chose (names, paths) goes into protobuf string fields,
 * which clients' decoders reject unless valid UTF-8 (common/utf8.h):
 * s itself when it is valid, else an escaped copy of at most max bytes,
 * kept in owned[*n_owned] for the caller to free. NULL on out of memory. */
static char *flush_text(const char *s, size_t max, char **owned, size_t *n_owned)
{
	char *e;

	if (utf8_valid(s, strlen(s)))
		return (char *)s;
	e = utf8_escape_dup(s, max);
	if (e)
		owned[(*n_owned)++] = e;
	return e;
}

static int send_process(const struct proc *pr, void *ctx)
{
	struct {
		struct uplink *u;
		uint64_t gen;
	} *c = ctx;
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__ProcessUpdate up = SONDE__V1__PROCESS_UPDATE__INIT;
	Sonde__V1__Mapping *maps = NULL, **ptrs = NULL;
	char **owned = NULL; /* escaped copies: one per mapping, 4 more */
	size_t n_owned = 0;
	int r = -ENOMEM;

	owned = calloc(pr->n_maps + 4, sizeof(*owned));
	if (!owned)
		goto cleanup;
	if (pr->n_maps) {
		maps = calloc(pr->n_maps, sizeof(*maps));
		ptrs = calloc(pr->n_maps, sizeof(*ptrs));
		if (!maps || !ptrs)
			goto cleanup;
	}
	for (size_t i = 0; i < pr->n_maps; i++) {
		const struct proc_mapping *m = &pr->maps[i];

		sonde__v1__mapping__init(&maps[i]);
		maps[i].start = m->start;
		maps[i].end = m->end;
		maps[i].file_offset = m->offset;
		maps[i].path = m->path ? flush_text(m->path, FLUSH_MAX_TEXT, owned, &n_owned) : NULL;
		if (m->path && !maps[i].path)
			goto cleanup;
		maps[i].executable = 1;
		if (m->file) {
			maps[i].file_id.data = (uint8_t *)m->info.id.bytes;
			maps[i].file_id.len = FILEID_LEN;
			maps[i].file_size = m->info.size;
			maps[i].file_mode = m->info.mode;
			maps[i].file_uid = m->info.uid;
			maps[i].file_gid = m->info.gid;
		}
		ptrs[i] = &maps[i];
	}
	up.pid = pr->pid;
	up.comm = flush_text(pr->comm, FLUSH_COMM_ESCAPED - 1, owned, &n_owned);
	up.exe_path = flush_text(pr->exe ? pr->exe : "", FLUSH_MAX_TEXT, owned, &n_owned);
	up.start_time_ticks = pr->start_ticks;
	up.cgroup = flush_text(pr->cgroup ? pr->cgroup : "", FLUSH_MAX_TEXT, owned, &n_owned);
	up.otel_service_name = flush_text(pr->otel_service_name, sizeof(pr->otel_service_name) - 1,
					  owned, &n_owned);
	if (!up.comm || !up.exe_path || !up.cgroup || !up.otel_service_name)
		goto cleanup;
	if (pr->cmdline) {
		up.command_line = flush_text(pr->cmdline, PROCS_MAX_CMDLINE, owned, &n_owned);
		if (!up.command_line)
			goto cleanup;
	}
	up.uid = pr->uid;
	up.n_mappings = pr->n_maps;
	up.mappings = ptrs;
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_PROCESS;
	msg.process = &up;
	/* No buffer hint: a new process is sent on its own between flushes
	 * (sensor_flush_new_processes), and a hinted write would wait in
	 * gRPC until the next flush, delaying the process's unwind tables. */
	r = uplink_send(c->u, c->gen, &msg, false);
cleanup:
	for (size_t i = 0; i < n_owned; i++)
		free(owned[i]);
	free(owned);
	free(ptrs);
	free(maps);
	return r;
}

int flush_processes(struct uplink *u, uint64_t gen, struct procs *p, enum procs_select sel)
{
	struct {
		struct uplink *u;
		uint64_t gen;
	} c = {u, gen};

	return procs_foreach(p, sel, send_process, &c);
}

static int send_exit(uint32_t pid, void *ctx)
{
	struct {
		struct uplink *u;
		uint64_t gen;
	} *c = ctx;
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__ProcessExit ex = SONDE__V1__PROCESS_EXIT__INIT;

	ex.pid = pid;
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_EXIT;
	msg.exit = &ex;
	return uplink_send(c->u, c->gen, &msg, true);
}

int flush_exits(struct uplink *u, uint64_t gen, struct procs *p)
{
	struct {
		struct uplink *u;
		uint64_t gen;
	} c = {u, gen};

	return procs_foreach_exit(p, send_exit, &c);
}

/* One StackBatch being filled. */
struct batch {
	struct uplink *u;
	uint64_t gen;
	size_t max_bytes, bytes;
	Sonde__V1__StackDef defs[BATCH_MAX_ENTRIES];
	Sonde__V1__StackDef *def_ptrs[BATCH_MAX_ENTRIES];
	Sonde__V1__Frame *frames[BATCH_MAX_ENTRIES];       /* per def, owned */
	Sonde__V1__Frame **frame_ptrs[BATCH_MAX_ENTRIES];  /* per def, owned */
	Sonde__V1__InterpFrame *interp[BATCH_MAX_ENTRIES];       /* per def, owned */
	Sonde__V1__InterpFrame **interp_ptrs[BATCH_MAX_ENTRIES]; /* per def, owned */
	size_t n_defs;
	Sonde__V1__SampleCount counts[BATCH_MAX_ENTRIES];
	Sonde__V1__SampleCount *count_ptrs[BATCH_MAX_ENTRIES];
	char comms[BATCH_MAX_ENTRIES][FLUSH_COMM_ESCAPED]; /* escaped, where needed */
	size_t n_counts;
	uint64_t samples;      /* in the counts of this batch */
	uint64_t samples_sent; /* in the batches written so far */
};

static void batch_clear(struct batch *b)
{
	for (size_t i = 0; i < b->n_defs; i++) {
		free(b->frames[i]);
		free(b->frame_ptrs[i]);
		free(b->interp[i]);
		free(b->interp_ptrs[i]);
	}
	b->n_defs = b->n_counts = 0;
	b->samples = 0;
	b->bytes = 16;
}

static int batch_send(struct batch *b)
{
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__StackBatch sb = SONDE__V1__STACK_BATCH__INIT;
	int r;

	if (b->n_defs == 0 && b->n_counts == 0)
		return 0;
	sb.n_stacks = b->n_defs;
	sb.stacks = b->def_ptrs;
	sb.n_samples = b->n_counts;
	sb.samples = b->count_ptrs;
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_STACKS;
	msg.stacks = &sb;
	/* The stats message closes the burst. */
	r = uplink_send(b->u, b->gen, &msg, true);
	if (r == 0)
		b->samples_sent += b->samples;
	batch_clear(b);
	return r;
}

static int batch_make_room(struct batch *b, size_t est)
{
	if (b->n_defs + b->n_counts >= BATCH_MAX_ENTRIES ||
	    (b->bytes + est > b->max_bytes && b->n_defs + b->n_counts > 0))
		return batch_send(b);
	return 0;
}

static int add_def(const struct stack_def *d, void *ctx)
{
	struct batch *b = ctx;
	size_t est = 16 + 11 * (size_t)d->n_kernel + 34 * (size_t)d->n_user +
		     16 * (size_t)d->n_interp;
	Sonde__V1__StackDef *sd;
	uint32_t words = sonde_interp_frame_words(d->interp_kind);
	uint32_t n_frames = d->n_interp / words;
	size_t i;
	int r;

	r = batch_make_room(b, est);
	if (r < 0)
		return r;
	i = b->n_defs;
	sd = &b->defs[i];
	sonde__v1__stack_def__init(sd);
	b->frames[i] = NULL;
	b->frame_ptrs[i] = NULL;
	b->interp[i] = NULL;
	b->interp_ptrs[i] = NULL;
	if (n_frames) {
		/* Opaque words from BPF, tagged with their walker's kind. */
		b->interp[i] = calloc(d->n_interp, sizeof(Sonde__V1__InterpFrame));
		b->interp_ptrs[i] = calloc(d->n_interp, sizeof(Sonde__V1__InterpFrame *));
		if (!b->interp[i] || !b->interp_ptrs[i]) {
			free(b->interp[i]);
			free(b->interp_ptrs[i]);
			return -ENOMEM;
		}
		/* A kind's frames are frame_words words each (bpf/interp_kinds.h);
		 * a partial last frame is left out. */
		for (uint32_t k = 0; k < n_frames; k++) {
			Sonde__V1__InterpFrame *f = &b->interp[i][k];

			sonde__v1__interp_frame__init(f);
			f->kind = d->interp_kind;
			f->n_words = words;
			f->words = (uint64_t *)&d->interp[k * words];
			b->interp_ptrs[i][k] = f;
		}
	}
	if (d->n_user) {
		b->frames[i] = calloc(d->n_user, sizeof(Sonde__V1__Frame));
		b->frame_ptrs[i] = calloc(d->n_user, sizeof(Sonde__V1__Frame *));
		if (!b->frames[i] || !b->frame_ptrs[i]) {
			free(b->frames[i]);
			free(b->frame_ptrs[i]);
			free(b->interp[i]);
			free(b->interp_ptrs[i]);
			return -ENOMEM;
		}
	}
	for (uint32_t k = 0; k < d->n_user; k++) {
		Sonde__V1__Frame *f = &b->frames[i][k];

		sonde__v1__frame__init(f);
		if (d->user[k].has_file_id) {
			f->file_id.data = (uint8_t *)d->user[k].file_id;
			f->file_id.len = sizeof(d->user[k].file_id);
		}
		f->address = d->user[k].addr;
		b->frame_ptrs[i][k] = f;
	}
	sd->id = d->id;
	sd->n_kernel = d->n_kernel;
	sd->kernel = (uint64_t *)d->kernel;
	sd->n_user = d->n_user;
	sd->user = b->frame_ptrs[i];
	sd->outcome = (Sonde__V1__StackOutcome)d->outcome;
	sd->n_interp = n_frames;
	sd->interp = b->interp_ptrs[i];
	sd->pid = d->interp_pid;
	b->def_ptrs[i] = sd;
	b->n_defs++;
	b->bytes += est;
	return 0;
}

static int add_count(const struct stack_count *c, void *ctx)
{
	struct batch *b = ctx;
	Sonde__V1__SampleCount *sc;
	size_t comm_len = strlen(c->comm);
	bool valid = utf8_valid(c->comm, comm_len);
	size_t est = 48 + (valid ? comm_len : utf8_escaped_len(c->comm, comm_len)) + (c->span ? 28 : 0) + 13;
	int r;

	r = batch_make_room(b, est);
	if (r < 0)
		return r;
	sc = &b->counts[b->n_counts];
	sonde__v1__sample_count__init(sc);
	sc->stack_id = c->stack_id;
	sc->pid = c->pid;
	sc->tid = c->tid;
	sc->count = c->count;
	sc->first_unix_ns = c->first_unix_ns;
	sc->last_unix_ns = c->last_unix_ns;
	sc->comm = (char *)c->comm;
	if (!valid) {
		utf8_escape(b->comms[b->n_counts], sizeof(b->comms[0]), c->comm, comm_len);
		sc->comm = b->comms[b->n_counts];
	}
	if (c->span) {
		sc->trace_id.data = (uint8_t *)c->span;
		sc->trace_id.len = 16;
		sc->span_id.data = (uint8_t *)c->span + 16;
		sc->span_id.len = 8;
	}
	sc->profile = c->profile;
	sc->weight = c->weight;
	b->count_ptrs[b->n_counts++] = sc;
	b->samples += c->count;
	b->bytes += est;
	return 0;
}

/* Kept between flushes: at ~400 KiB a fresh one each flush came from mmap
 * (the sensor's malloc threshold is 128 KiB) and cost page faults and an
 * munmap every flush, a tenth of the sensor's CPU. */
static struct batch *batch_kept;

void flush_release(void)
{
	free(batch_kept);
	batch_kept = NULL;
}

int flush_stacks(struct uplink *u, uint64_t gen, struct stacks *s, size_t max_bytes,
		 uint64_t *ret_samples)
{
	struct batch *b = batch_kept ? batch_kept : malloc(sizeof(*b));
	int r;

	if (!b)
		return -ENOMEM;
	batch_kept = b;
	b->n_defs = 0; /* nothing owned yet: batch_clear() below frees nothing */
	b->samples_sent = 0;
	b->u = u;
	b->gen = gen;
	b->max_bytes = max_bytes > (1u << 20) ? (1u << 20) : max_bytes;
	batch_clear(b);
	r = stacks_foreach_new_def(s, add_def, b);
	if (r == 0)
		r = stacks_foreach_count(s, add_count, b);
	if (r == 0)
		r = batch_send(b);
	batch_clear(b);
	*ret_samples = b->samples_sent;
	if (r == 0)
		stacks_flush_done(s);
	return r;
}

/* ---- opaque records: one buffer and one batch sender for all ---- */

/* Each record: its header, then len bytes. */
struct rec_head {
	uint32_t pid, kind, len;
};

struct flush_records {
	uint8_t *buf; /* allocated on the first record */
	size_t cap, used, n, max_records;
	uint64_t dropped;
};

struct flush_records *flush_records_new(size_t max_records, size_t max_bytes)
{
	struct flush_records *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->max_records = max_records;
	/* Room for every record's header on top of its bytes. */
	q->cap = max_bytes + max_records * sizeof(struct rec_head);
	return q;
}

void flush_records_free(struct flush_records *q)
{
	if (!q)
		return;
	free(q->buf);
	free(q);
}

int flush_records_add(struct flush_records *q, uint32_t pid, uint32_t kind, const void *data,
		      size_t len)
{
	struct rec_head h = { .pid = pid, .kind = kind, .len = (uint32_t)len };

	if (!q->buf)
		q->buf = malloc(q->cap);
	if (!q->buf || len > UINT32_MAX || q->n == q->max_records ||
	    q->cap - q->used < sizeof(h) + len) {
		q->dropped++;
		return -ENOBUFS;
	}
	memcpy(q->buf + q->used, &h, sizeof(h));
	if (len)
		memcpy(q->buf + q->used + sizeof(h), data, len);
	q->used += sizeof(h) + len;
	q->n++;
	return 0;
}

size_t flush_records_count(const struct flush_records *q)
{
	return q->n;
}

bool flush_records_half_full(const struct flush_records *q)
{
	return 2 * q->n >= q->max_records || 2 * q->used >= q->cap;
}

uint64_t flush_records_dropped(const struct flush_records *q)
{
	return q->dropped;
}

void flush_records_clear(struct flush_records *q)
{
	q->used = q->n = 0;
}

int flush_records_send(struct flush_records *q, struct uplink *u, uint64_t gen,
		       const struct flush_batch *b, bool last, size_t *ret_unsent)
{
	struct flush_rec *recs = NULL;
	size_t at = 0, done = 0;
	int r = 0;

	*ret_unsent = 0;
	if (!q->n && !last)
		return 0;
	recs = calloc(b->per_message ? b->per_message : 1, sizeof(*recs));
	if (!recs) {
		r = -ENOMEM;
		goto out;
	}
	do {
		size_t n = 0, bytes = 64;

		/* At least one record per message, so each message moves on. */
		while (at < q->used && n < b->per_message) {
			struct rec_head h;

			memcpy(&h, q->buf + at, sizeof(h));
			if (n > 0 && bytes + h.len + b->overhead > b->max_bytes)
				break;
			recs[n++] = (struct flush_rec){ .pid = h.pid, .kind = h.kind,
							.data = q->buf + at + sizeof(h),
							.len = h.len };
			bytes += h.len + b->overhead;
			at += sizeof(h) + h.len;
		}
		r = b->send(b->ctx, u, gen, recs, n, last && at == q->used);
		if (r < 0)
			break;
		done += n;
	} while (at < q->used);
out:
	*ret_unsent = q->n - done;
	if (r == 0 || !b->keep_on_failure)
		flush_records_clear(q);
	free(recs);
	return r;
}

/* InterpreterRecords: pid, kind and the walker's bytes. */
static int send_interp(void *ctx, struct uplink *u, uint64_t gen, const struct flush_rec *recs,
		       size_t n, bool last)
{
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__InterpreterRecords ir = SONDE__V1__INTERPRETER_RECORDS__INIT;
	Sonde__V1__InterpreterRecord one[FLUSH_INTERP_PER_MESSAGE],
		*ptrs[FLUSH_INTERP_PER_MESSAGE];

	(void)ctx;
	(void)last;
	for (size_t i = 0; i < n && i < FLUSH_INTERP_PER_MESSAGE; i++) {
		sonde__v1__interpreter_record__init(&one[i]);
		one[i].pid = recs[i].pid;
		one[i].kind = recs[i].kind;
		one[i].data.data = (uint8_t *)recs[i].data;
		one[i].data.len = recs[i].len;
		ptrs[i] = &one[i];
	}
	ir.n_records = n;
	ir.records = ptrs;
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_INTERP_RECORDS;
	msg.interp_records = &ir;
	return uplink_send(u, gen, &msg, true);
}

int flush_interp_records(struct uplink *u, uint64_t gen, struct flush_records *q)
{
	/* Messages stay under 1 MiB: 512 records of up to 1.9 KiB, fewer of
	 * larger ones. On failure the records wait for the next flush: a new
	 * connection clears them (the walkers send them again). */
	const struct flush_batch b = { .per_message = FLUSH_INTERP_PER_MESSAGE,
				       .max_bytes = 1u << 20, .overhead = 16,
				       .keep_on_failure = true, .send = send_interp };
	size_t unsent;

	return flush_records_send(q, u, gen, &b, false, &unsent);
}

int flush_stats(struct uplink *u, uint64_t gen, const struct sensor_counters *c, bool more)
{
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__SensorStats st = SONDE__V1__SENSOR_STATS__INIT;

	st.samples_taken = c->samples_taken;
	st.samples_lost = c->samples_lost;
	st.samples_dropped = c->samples_dropped;
	st.processes = c->processes;
	st.files = c->files;
	st.unwind_tables_loaded = c->unwind_tables_loaded;
	st.unwind_rows_loaded = c->unwind_rows_loaded;
	st.unwind_tables_rejected = c->unwind_tables_rejected;
	st.bpf_map_bytes = c->bpf_map_bytes;
	st.connection_samples_taken = c->connection_samples_taken;
	st.connection_samples_dropped = c->connection_samples_dropped;
	st.samples_unconfirmed = c->samples_unconfirmed;
	st.go_probe_files = c->go_probe_files;
	st.go_probe_links = c->go_probe_links;
	st.go_probe_attach_failures = c->go_probe_attach_failures;
	st.go_probe_records = c->go_probe_records;
	st.go_probe_records_lost = c->go_probe_records_lost;
	st.probe_plans_refused = c->probe_plans_refused;
	st.interpreter_configs_refused = c->interpreter_configs_refused;
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_STATS;
	msg.stats = &st;
	return uplink_send(u, gen, &msg, more);
}
