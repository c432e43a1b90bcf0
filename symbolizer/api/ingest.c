/* ingest.c - the /sonde.v1.Ingest/Connect stream: one session per sensor.
 *
 * A session holds what its sensor told it: processes and their mappings,
 * the files they map (file ID -> size; only these may be read back), its
 * kernel symbols, and its stack definitions. What sessions have in common
 * is held once: kernel symbol tables of equal snapshots (struct kshared)
 * and symbolized stacks (store/stack_texts.h, which the profile store's
 * batch references too). Every field from the sensor
 * is checked against the bounds below before it is used; a
 * violation ends the stream with INVALID_ARGUMENT (RESOURCE_EXHAUSTED for
 * bounds on totals).
 *
 * A stack is symbolized once, when every file it needs is analysed (or
 * failed), into folded text; until then it waits with its samples in the
 * session's pending queue, at most INGEST_PENDING_TIMEOUT_MS.
 *
 * Unwind tables: every executable file a session's processes map gets its
 * table sent once per session, unless the sensor's Hello listed it with
 * the version the cache holds (a reconnect: the sensor still has it in its
 * BPF maps): at once from the cache, or when the file's job ends. A file
 * without a usable table gets one UnwindTable with error set, so the
 * sensor stops waiting. Tables go out in chunks of UNWIND_CHUNK_ROWS
 * through the session's bounded write queue; when it is full
 * (-ENOBUFS) the rest waits for the 200 ms tick.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "demangle.h"
#include "export.h"
#include "hmap.h"
#include "ingest.h"
#include "log.h"
#include "ksyms.h"
#include "cgroup_ids.h"
#include "otlp_exporter.h"
#include "rawstack.h"
#include "stack_texts.h"
#include "unwind_table.h"
#include "utf8.h"
#include "interp_loader.h"
#include "interp_ops.h"
#include "ingest.pb-c.h"

#define INGEST_PENDING_TIMEOUT_MS 10000
#define INGEST_DRAIN_TIMEOUT_MS 30000

#define SESSION_MAX_PROCESSES 100000u
#define SESSION_MAX_MAPPINGS 10000u           /* per process */
#define SESSION_MAX_FILES 100000u
#define SESSION_MAX_PATH REGISTRY_MAX_PATH
#define SESSION_MAX_FRAMES 256u               /* per stack, kernel and user each */
#define SESSION_MAX_INTERP_RECORDS 65536u     /* per InterpreterRecords message */
#define SESSION_MAX_STACKS 1000000u
#define SESSION_MAX_STACK_FRAMES (16u << 20)  /* unresolved frames held */
#define SESSION_MAX_PENDING_STACKS 10000u
#define SESSION_MAX_PENDING_SAMPLES 200000u
#define SESSION_MAX_LOADED_TABLES 65536u      /* Hello.loaded_tables */

#define COMM_MAX 64

/* One kernel symbol table, shared by the sessions that sent equal ones
 * (same build ID, same symbols at the same addresses). */
struct kshared {
	struct kshared *next; /* in in->kernels, same key */
	uint64_t key;         /* ksyms_digest() mixed with the build ID */
	uint8_t build_id[64];
	size_t build_id_len;
	struct ksyms *k;
	uint32_t refs;
};

struct ingest {
	const struct api_core *core;
	struct ingest_hooks hooks;
	struct session *sessions; /* list, newest first */
	uint64_t next_session_id;
	struct stack_texts *texts; /* the sessions' symbolized stacks, shared */
	struct hmap *kernels; /* key -> struct kshared list */
	/* fileid -> uint64_t table version (unwind_table_version()), of the
	 * table the cache holds now; dropped when a job for the file ends. */
	struct hmap *table_versions;
};

struct mapping {
	uint64_t start, end, offset;
	struct fileid id;
	bool has_file;
};

struct process {
	uint32_t pid;
	uint32_t uid; /* owner as the sensor read it (ProcessUpdate.uid) */
	char comm[COMM_MAX + 1];
	char *exe;
	uint64_t start; /* start time, clock ticks after the node's boot */
	char *cmdline;  /* ProcessUpdate.command_line, escaped; NULL: not sent */
	char service[128]; /* OTEL_SERVICE_NAME as the sensor read it; "" if unset */
	char container_id[CGROUP_IDS_CONTAINER_LEN + 1]; /* "" when the cgroup shows none */
	char pod_uid[CGROUP_IDS_POD_UID_LEN + 1];        /* Kubernetes pod UID; "" if none */
	struct mapping *maps;
	size_t n_maps;
};

struct sfile {
	uint64_t size;
	/* Known to be analysed: later processes mapping it skip the cache
	 * lookup (one SQLite query per mapping of every ProcessUpdate). */
	bool in_cache;
};

struct uframe {
	struct fileid id;
	bool has_file;
	uint64_t addr;
};

/* A SampleCount, checked; its comm is the thread's. */
struct pending_sample {
	uint64_t first_ns, last_ns;
	uint32_t pid, tid;
	uint32_t uid; /* the process's owner when the sample came */
	uint32_t count;
	uint32_t profile; /* enum profile_type, checked */
	uint64_t weight;
	uint64_t start; /* the process's start time (0: unknown process) */
	bool has_span;
	uint8_t span[PROFILE_SPAN_LEN]; /* trace ID, span ID */
	char comm[COMM_MAX + 1];
};

enum table_state {
	TABLE_WAITING, /* no result in the cache yet */
	TABLE_QUEUED,  /* in the send queue */
	TABLE_SENT,
};

struct table_send {
	struct fileid id;
	enum table_state state;
	uint32_t next_row; /* rows sent so far */
	struct table_send *qnext;
	bool interp_done; /* InterpreterConfig sent, or none is due */
};

struct stackdef {
	uint32_t id;
	uint8_t outcome;
	uint32_t n_kernel, n_user; /* leaf first */
	uint64_t *kernel;
	struct uframe *user;
	struct interp_frame *interp; /* leaf first, of process interp_pid */
	uint32_t n_interp, interp_pid;
	char *text; /* folded frames, root first, without comm; NULL: pending */
	uint8_t *raw; /* the raw stack (core/rawstack.h), with text */
	/* When set, text and raw are its (shared with every session and
	 * profile batch that has the same stack), not this stackdef's. */
	const struct stack_text *st;
	size_t raw_len, text_len;
	uint64_t hash; /* profile_stack_hash(), with text */
	bool queued;
	int64_t deadline_ms;
	struct pending_sample *samples;
	size_t n_samples, cap_samples;
	struct stackdef *pprev, *pnext;
};

#define GONE_RING 64
struct gone_proc {
	uint32_t pid, uid;
	char service[128];
};

struct session {
	struct byte_source src; /* first: its files' bytes, for analysis jobs */
	struct session *next;
	struct ingest *in;
	struct rpc_call *call; /* NULL once closed */
	uint64_t id;
	bool hello, half_closed, finished;
	/* A Unix peer: a sensor on this host, whose uids (process and file
	 * owners) are this host's. A TCP sensor's are another node's, which
	 * name nobody here: its processes are root's, its files noted not. */
	bool local;
	int64_t drain_deadline_ms;
	char hostname[128];
	/* Hello.node_name (else the host name): what the store keys this
	 * sensor's samples by, node_id its id there; machine_id for host.id. */
	char node[PROFILE_MAX_NODE_NAME + 1];
	uint32_t node_id;
	char machine_id[65];
	uint32_t frequency_hz;
	struct hmap *procs;  /* pid -> process */
	/* The service names of the last processes that exited: probe records
	 * of a process often arrive after its exit (a client that made its
	 * last request and quit). A ring of GONE_RING, newest at gone_next -
	 * 1; allocated at the first exit (8.5 KiB, 4 MiB at 500 sensors whose
	 * processes never exit). */
	struct gone_proc *gone;
	unsigned gone_next;
	struct hmap *files;  /* fileid -> sfile */
	struct hmap *stacks; /* stack id -> stackdef */
	/* Kernel symbols: the snapshot being received (NULL between
	 * snapshots), and the one in use, shared with the sessions of the
	 * same kernel build whose snapshot is equal (NULL until the first). */
	struct ksyms *kstage;
	struct kshared *kern;
	uint8_t kernel_build_id[64];
	size_t kernel_build_id_len;
	bool ksyms_overflow_logged;
	struct stackdef *pend_head, *pend_tail;
	size_t n_pending, n_pending_samples, n_frames_held;
	uint64_t waiting_count; /* sum of the pending samples' counts */
	struct sensor_counters stats;
	struct hmap *tables; /* fileid -> table_send */
	/* Hello.loaded_tables: fileid -> uint64_t version the sensor says it
	 * holds. Only consulted for files this session's processes map. */
	struct hmap *loaded;
	struct table_send *tq_head, *tq_tail;
	size_t n_tables_waiting;
	uint64_t tables_sent, table_rows_sent, tables_skipped;
	size_t n_interp_waiting; /* table_sends without interp_done */
	uint64_t interp_sent;
	struct interp_session *interp; /* from InterpreterRecords; NULL until one */
	bool interp_refused_logged;
};


/* Copies text a target or a sensor chose (NULL: "") into dst (cap bytes) as valid
 * UTF-8 (common/utf8.h): the sensor is not trusted to have escaped it. */
static void text_copy(char *dst, size_t cap, const char *src)
{
	src = src ? src : "";
	utf8_escape(dst, cap, src, strnlen(src, 4 * cap));
}

static void process_free(void *p)
{
	struct process *pr = p;

	if (!pr)
		return;
	free(pr->exe);
	free(pr->cmdline);
	free(pr->maps);
	free(pr);
}

static void stackdef_free(void *p)
{
	struct stackdef *d = p;

	if (!d)
		return;
	free(d->kernel);
	free(d->user);
	free(d->interp);
	if (d->st) {
		stack_text_unref(d->st);
	} else {
		free(d->text);
		free(d->raw);
	}
	free(d->samples);
	free(d);
}

static void session_fail(struct session *s, enum rpc_status status, const char *msg)
{
	if (s->finished)
		return;
	log_warn("sensor %.100s (%s): %s; ending its stream", s->hostname,
		 s->call ? rpc_call_peer(s->call) : "?", msg);
	s->finished = true;
	if (s->call)
		rpc_call_finish(s->call, status, msg, NULL);
}

/* byte_source_ops.has_file: a session serves the files its sensor
 * registered while its stream is open. */
static bool session_has_file(const struct byte_source *src, const struct fileid *id,
			     uint64_t *ret_size)
{
	const struct session *s = (const struct session *)src;
	const struct sfile *f;

	if (s->finished || !s->call)
		return false;
	f = hmap_get(s->files, id, sizeof(*id));
	if (!f)
		return false;
	*ret_size = f->size;
	return true;
}

/* byte_source_ops.read_range: a ReadRange to the sensor. */
static int session_read_range(struct byte_source *src, uint64_t request_id,
			      const struct fileid *id, uint64_t offset, uint32_t length)
{
	struct session *s = (struct session *)src;
	Sonde__V1__SymbolizerMessage m = SONDE__V1__SYMBOLIZER_MESSAGE__INIT;
	Sonde__V1__ReadRange rr = SONDE__V1__READ_RANGE__INIT;
	int r;

	if (s->finished || !s->call)
		return -EPIPE;
	if (!hmap_get(s->files, id, sizeof(*id)))
		return -EPIPE; /* never ask a sensor for a file it did not register */
	rr.request_id = request_id;
	rr.file_id.data = (uint8_t *)id->bytes;
	rr.file_id.len = FILEID_LEN;
	rr.offset = offset;
	rr.length = length;
	m.kind_case = SONDE__V1__SYMBOLIZER_MESSAGE__KIND_READ_RANGE;
	m.read_range = &rr;
	r = rpc_call_write(s->call, &m.base);
	if (r == -EPIPE)
		s->finished = true;
	return r;
}

static const struct byte_source_ops session_source_ops = {
	.has_file = session_has_file,
	.read_range = session_read_range,
};

/* ---- unwind tables ---- */

static void session_send_plan(struct session *s, const struct fileid *id);

static void table_enqueue(struct session *s, struct table_send *t)
{
	if (t->state == TABLE_WAITING)
		s->n_tables_waiting--;
	t->state = TABLE_QUEUED;
	t->next_row = 0;
	t->qnext = NULL;
	if (s->tq_tail)
		s->tq_tail->qnext = t;
	else
		s->tq_head = t;
	s->tq_tail = t;
}

/* The digest of the table the cache holds for id (0: none, or an
 * error table), computed once per table and kept in in->table_versions. */
static uint64_t table_version(struct ingest *in, const struct fileid *id)
{
	const struct unwind_table *tbl = NULL;
	uint64_t *v = hmap_get(in->table_versions, id, sizeof(*id));

	if (v)
		return *v;
	if (cache_lookup_unwind(in->core->cache, id, &tbl, NULL) != CACHE_OK || !tbl)
		return 0;
	v = malloc(sizeof(*v));
	if (!v)
		return 0;
	*v = unwind_table_version(tbl);
	if (hmap_put(in->table_versions, id, sizeof(*id), v, NULL) < 0) {
		uint64_t r = *v;

		free(v);
		return r;
	}
	return *v;
}

/* The sensor listed this table, with the version the cache holds now,
 * in its Hello: it has the rows. Its probe plan still goes out (the
 * sensor attaches probes per connection). */
static bool table_skip(struct session *s, struct table_send *t)
{
	const uint64_t *claimed = s->loaded ? hmap_get(s->loaded, &t->id, sizeof(t->id)) : NULL;

	/* Only files this session's processes map get here
	 * (session_want_table()): a claim for any other file is never read. */
	if (!claimed || *claimed == 0 || *claimed != table_version(s->in, &t->id))
		return false;
	s->n_tables_waiting--;
	t->state = TABLE_SENT;
	s->tables_skipped++;
	if (s->call && !s->finished && s->hello)
		session_send_plan(s, &t->id);
	return true;
}

/* Queues t if its result is known; otherwise makes sure a job computes
 * it (unless a transient failure waits for its retry time). */
static void table_check(struct session *s, struct table_send *t)
{
	struct ingest *in = s->in;

	if (t->state != TABLE_WAITING)
		return;
	if (cache_lookup_unwind(in->core->cache, &t->id, NULL, NULL) != CACHE_MISS) {
		if (!table_skip(s, t))
			table_enqueue(s, t);
		return;
	}
	if (analysis_running(in->core->analysis, &t->id) ||
	    analysis_retry_later(in->core->analysis, &t->id))
		return;
	/* Also when the symtab is cached: a cache from before unwind tables
	 * (or an older UNWIND_BLOB_VERSION) has none; the job recomputes
	 * both from one fetch. */
	if (analysis_start(in->core->analysis, &t->id) < 0)
		log_debug("cannot start the analysis of a file for its unwind table");
}

/* ---- interpreter configs ---- */

static void interp_mark_done(struct session *s, struct table_send *t)
{
	t->interp_done = true;
	s->n_interp_waiting--;
}

/* Sends the InterpreterConfig of t's file if it is an interpreter whose
 * Data is cached; starts an analysis for a file cached before interpreter
 * Data existed. One small message per file and session. */
static void interp_check(struct session *s, struct table_send *t)
{
	Sonde__V1__SymbolizerMessage m = SONDE__V1__SYMBOLIZER_MESSAGE__INIT;
	Sonde__V1__InterpreterConfig ic = SONDE__V1__INTERPRETER_CONFIG__INIT;
	struct ingest *in = s->in;
	const char *name = registry_file_name(in->core->reg, &t->id);
	const struct interp_ops *ops;
	struct interp_config cfg;
	struct interp_data d;
	int r;

	if (t->interp_done || !s->call || s->finished || !s->hello)
		return;
	if (!name || !interp_loader_wants(name)) {
		interp_mark_done(s, t);
		return;
	}
	switch (cache_lookup_interp(in->core->cache, &t->id, &d, NULL, 0)) {
	case CACHE_ERROR:
		interp_mark_done(s, t); /* said once in the log by the analysis */
		return;
	case CACHE_MISS:
		if (analysis_running(in->core->analysis, &t->id) ||
		    !cache_contains(in->core->cache, &t->id))
			return; /* the running (or coming) job stores it */
		if (analysis_retry_later(in->core->analysis, &t->id))
			return;
		if (analysis_start(in->core->analysis, &t->id) < 0)
			log_debug("cannot start the analysis of an interpreter file");
		return;
	case CACHE_OK:
		break;
	}
	ops = interp_ops_of(d.kind);
	if (!ops || d.kind >= 32 || !(in->core->interp_kinds & (1u << d.kind)) ||
	    ops->config(&d, &cfg) < 0) {
		interp_mark_done(s, t);
		return;
	}
	ic.file_id.data = (uint8_t *)t->id.bytes;
	ic.file_id.len = FILEID_LEN;
	ic.kind = cfg.kind;
	ic.format_version = cfg.format_version;
	ic.runtime_offset = cfg.runtime_offset;
	ic.layout.data = cfg.layout;
	ic.layout.len = cfg.layout_len;
	m.kind_case = SONDE__V1__SYMBOLIZER_MESSAGE__KIND_INTERPRETER_CONFIG;
	m.interpreter_config = &ic;
	r = rpc_call_write(s->call, &m.base);
	if (r == -ENOBUFS)
		return; /* the tick tries again */
	if (r == -EPIPE) {
		s->finished = true;
		return;
	}
	if (r == 0) {
		char hex[FILEID_HEX_LEN + 1];

		s->interp_sent++;
		log_debug("sent the %s %u.%u config of %.100s (%s) to %.100s", ops->name, d.major,
			  d.minor, name, fileid_to_hex(&t->id, hex), s->hostname);
	}
	interp_mark_done(s, t);
}

static void session_tick_interp(struct session *s)
{
	struct hmap_iter it;
	void *val;

	if (!s->n_interp_waiting)
		return;
	hmap_iter_init(s->tables, &it);
	while (hmap_next(s->tables, &it, NULL, NULL, &val))
		interp_check(s, val);
}

static void session_want_table(struct session *s, const struct fileid *id)
{
	struct table_send *t;

	if (hmap_get(s->tables, id, sizeof(*id)))
		return;
	t = calloc(1, sizeof(*t));
	if (!t)
		return;
	t->id = *id;
	t->state = TABLE_WAITING;
	if (hmap_put(s->tables, id, sizeof(*id), t, NULL) < 0) {
		free(t);
		return;
	}
	s->n_tables_waiting++;
	s->n_interp_waiting++;
	table_check(s, t);
	interp_check(s, t);
}

/* Writes the next message of the queue head. Returns 0 (sent), -ENOBUFS
 * (queue full: try again later), or another negative errno. */
static int table_send_one(struct session *s, struct table_send *t, bool *ret_done)
{
	Sonde__V1__SymbolizerMessage m = SONDE__V1__SYMBOLIZER_MESSAGE__INIT;
	Sonde__V1__UnwindTable ut = SONDE__V1__UNWIND_TABLE__INIT;
	const struct unwind_table *tbl = NULL;
	const char *error = NULL;
	uint8_t *rows = NULL;
	size_t total = 0, n = 0;
	/* Before the lookup below: its table is borrowed until the next. */
	uint64_t version = t->next_row == 0 ? table_version(s->in, &t->id) : 0;
	int r;

	*ret_done = false;
	switch (cache_lookup_unwind(s->in->core->cache, &t->id, &tbl, &error)) {
	case CACHE_OK:
		total = unwind_table_count(tbl);
		if (total == 0)
			error = "empty unwind table";
		break;
	case CACHE_ERROR:
		break;
	case CACHE_MISS:
		return -ENOENT; /* dropped from the cache meanwhile */
	}
	ut.file_id.data = (uint8_t *)t->id.bytes;
	ut.file_id.len = FILEID_LEN;
	ut.format_version = SONDE_UNWIND_FORMAT_VERSION;
	ut.first = t->next_row == 0;
	if (ut.first && !error)
		ut.table_version = version;
	if (error) {
		ut.first = ut.last = true;
		ut.error = (char *)error;
	} else {
		n = total - t->next_row;
		if (n > UNWIND_CHUNK_ROWS)
			n = UNWIND_CHUNK_ROWS;
		rows = malloc(n * sizeof(struct sonde_unwind_row));
		if (!rows)
			return -ENOMEM;
		unwind_table_pack(tbl, t->next_row, n, rows);
		ut.rows.data = rows;
		ut.rows.len = n * sizeof(struct sonde_unwind_row);
		ut.total_rows = (uint32_t)total;
		ut.last = t->next_row + n == total;
	}
	m.kind_case = SONDE__V1__SYMBOLIZER_MESSAGE__KIND_UNWIND_TABLE;
	m.unwind_table = &ut;
	r = rpc_call_write(s->call, &m.base);
	free(rows);
	if (r < 0)
		return r;
	t->next_row += (uint32_t)n;
	s->table_rows_sent += n;
	*ret_done = ut.last;
	return 0;
}

/* The file's probe plan (a Go executable, docs/go-probes.md), if the
 * cache has one: sent once, right after the file's unwind table, so a
 * restarted symbolizer sends it again from the cache. A plan that does not
 * unpack (damaged cache) is not sent. */
static void session_send_plan(struct session *s, const struct fileid *id)
{
	Sonde__V1__SymbolizerMessage m = SONDE__V1__SYMBOLIZER_MESSAGE__INIT;
	Sonde__V1__ProbePlan *plan;
	void *blob = NULL;
	size_t len = 0;
	int r;

	if (cache_lookup_plan(s->in->core->cache, id, &blob, &len) < 0)
		return;
	plan = sonde__v1__probe_plan__unpack(NULL, len, blob);
	free(blob);
	if (!plan)
		return;
	m.kind_case = SONDE__V1__SYMBOLIZER_MESSAGE__KIND_PROBE_PLAN;
	m.probe_plan = plan;
	r = rpc_call_write(s->call, &m.base);
	if (r < 0)
		log_warn_errno(r, "sensor %.100s: sending a probe plan failed", s->hostname);
	sonde__v1__probe_plan__free_unpacked(plan, NULL);
}

/* Sends what is queued until done or the write queue is full. */
static void session_pump_tables(struct session *s)
{
	while (s->tq_head && s->call && !s->finished && s->hello) {
		struct table_send *t = s->tq_head;
		bool done = false;
		int r = table_send_one(s, t, &done);

		if (r == -ENOBUFS)
			return; /* the tick tries again */
		if (r == -EPIPE) {
			s->finished = true;
			return;
		}
		if (r == 0 && !done)
			continue;
		s->tq_head = t->qnext;
		if (!s->tq_head)
			s->tq_tail = NULL;
		t->qnext = NULL;
		if (r == 0) {
			t->state = TABLE_SENT;
			s->tables_sent++;
			session_send_plan(s, &t->id);
		} else {
			/* Not in the cache any more, or no memory: wait for
			 * it again (the tick re-checks). */
			t->state = TABLE_WAITING;
			s->n_tables_waiting++;
			if (r != -ENOENT)
				return;
		}
	}
}

/* Unwind tables: a job for id ended (either way); sessions waiting for
 * its table get it now (or an error UnwindTable). */
static void unwind_done(struct ingest *in, const struct fileid *id)
{
	for (struct session *s = in->sessions; s; s = s->next) {
		struct table_send *t;

		if (!s->tables || !(t = hmap_get(s->tables, id, sizeof(*id))))
			continue;
		table_check(s, t);
		session_pump_tables(s);
		interp_check(s, t);
	}
}

static void session_tick_tables(struct session *s)
{
	if (s->n_tables_waiting) {
		struct hmap_iter it;
		void *val;

		hmap_iter_init(s->tables, &it);
		while (hmap_next(s->tables, &it, NULL, NULL, &val))
			table_check(s, val);
	}
	session_pump_tables(s);
}

/* ---- stack symbolization ---- */

static void pend_remove(struct session *s, struct stackdef *d)
{
	if (!d->queued)
		return;
	if (d->pprev)
		d->pprev->pnext = d->pnext;
	else
		s->pend_head = d->pnext;
	if (d->pnext)
		d->pnext->pprev = d->pprev;
	else
		s->pend_tail = d->pprev;
	d->pprev = d->pnext = NULL;
	d->queued = false;
	s->n_pending--;
}

static void pend_add(struct session *s, struct stackdef *d)
{
	d->queued = true;
	d->deadline_ms = clock_now_ms() + INGEST_PENDING_TIMEOUT_MS;
	d->pnext = NULL;
	d->pprev = s->pend_tail;
	if (s->pend_tail)
		s->pend_tail->pnext = d;
	else
		s->pend_head = d;
	s->pend_tail = d;
	s->n_pending++;
}

static int session_ksym(const struct session *s, uint64_t addr, struct ksyms_lookup *ret)
{
	return s->kern ? ksyms_lookup(s->kern->k, addr, ret) : -ENOENT;
}

static void kshared_unref(struct ingest *in, struct kshared *ks)
{
	struct kshared **pp, *head;

	if (!ks || --ks->refs)
		return;
	head = hmap_get_u64(in->kernels, ks->key);
	for (pp = &head; *pp; pp = &(*pp)->next)
		if (*pp == ks) {
			*pp = ks->next;
			break;
		}
	if (head)
		hmap_put_u64(in->kernels, ks->key, head, NULL); /* replaces: no allocation */
	else
		hmap_remove_u64(in->kernels, ks->key);
	ksyms_free(ks->k);
	free(ks);
}

/* Makes s's committed snapshot (s->kstage, taken) its table: the shared
 * one of an equal snapshot, else a new shared entry. */
static void session_ksyms_share(struct session *s)
{
	struct ingest *in = s->in;
	struct ksyms *k = s->kstage;
	uint64_t key = ksyms_digest(k);
	struct kshared *ks, *head;

	s->kstage = NULL;
	for (size_t i = 0; i < s->kernel_build_id_len; i++)
		key = (key ^ s->kernel_build_id[i]) * 0x100000001b3ull;
	head = hmap_get_u64(in->kernels, key);
	for (ks = head; ks; ks = ks->next)
		if (ks->build_id_len == s->kernel_build_id_len &&
		    memcmp(ks->build_id, s->kernel_build_id, ks->build_id_len) == 0 &&
		    ksyms_same(ks->k, k))
			break;
	if (ks) {
		ks->refs++;
		ksyms_free(k);
	} else if (!(ks = calloc(1, sizeof(*ks))) ||
		   hmap_put_u64(in->kernels, key, ks, NULL) < 0) {
		free(ks);
		ks = NULL;
	} else {
		ks->next = head;
		ks->key = key;
		memcpy(ks->build_id, s->kernel_build_id, s->kernel_build_id_len);
		ks->build_id_len = s->kernel_build_id_len;
		ks->k = k;
		ks->refs = 1;
	}
	if (!ks) {
		/* Without memory: the old table stays in use. */
		ksyms_free(k);
		log_warn("sensor %.100s: out of memory for its kernel symbols", s->hostname);
		return;
	}
	kshared_unref(in, s->kern);
	s->kern = ks;
}

/* Whether every file of d is done (analysed or failed). Starts analyses. */
static bool stack_ready(struct session *s, const struct stackdef *d)
{
	if (d->n_kernel && s->kstage)
		return false;
	for (uint32_t i = 0; i < d->n_user; i++) {
		if (!d->user[i].has_file)
			continue;
		if (analysis_file_state(s->in->core->analysis, &d->user[i].id, true, NULL, NULL) ==
		    FILE_PENDING)
			return false;
	}
	return true;
}

/* The symbol of user frame u (borrowed from its file's table), or NULL. */
static const char *user_frame_symbol(struct session *s, const struct uframe *u,
				     bool return_address)
{
	struct symbolize_file sf;
	struct symbolized sy;

	if (!u->has_file)
		return NULL;
	symbolize_file_init(&sf, s->in->core->sym, &u->id);
	symbolize_addr(&sf, u->addr, SYMBOLIZE_FILE_OFFSET | (return_address ? SYMBOLIZE_RETURN : 0),
		       &sy);
	return sy.has_symbol && sy.symbol.name && *sy.symbol.name ? sy.symbol.name : NULL;
}

static int push_user_frame(struct session *s, struct folded *f, const struct uframe *u,
			   const char *symbol)
{
	char buf[PROFILE_MAX_NAME];

	if (!u->has_file)
		return folded_push(f, "[unknown]", false);
	return folded_push(f, symbolize_frame_name(s->in->core->reg, &u->id, symbol, u->addr, buf,
						   sizeof(buf)),
			   false);
}

/* ---- interpreter frames (docs/interpreters.md) ---- */

static void interp_frame_name(const struct session *s, const struct stackdef *d, uint32_t k,
			      char *buf, size_t len)
{
	interp_session_frame_name(s->interp, d->interp_pid, &d->interp[k], buf, len);
}

/* The user frames of d, root first, into f, with the interpreter frames
 * spliced in where their runtime says (interp_splice()); order gets what
 * went where: a native frame is its index in d->user, an interpreter
 * frame INTERP_ORDER_FRAME | its index in d->interp. */
static int push_user_frames(struct session *s, struct folded *f, const struct stackdef *d,
			    uint32_t *order, uint32_t *n_order)
{
	char buf[PROFILE_MAX_NAME];
	const char **syms = NULL;
	int r = 0;

	if (d->n_user) {
		syms = calloc(d->n_user, sizeof(*syms));
		if (!syms)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < d->n_user; i++)
		syms[i] = user_frame_symbol(s, &d->user[i], i != 0);
	interp_splice(syms, d->n_user, d->interp, d->n_interp, order, n_order);
	for (uint32_t j = 0; j < *n_order && r != -ENOMEM; j++) {
		uint32_t i = order[j];

		if (i & INTERP_ORDER_FRAME) {
			interp_frame_name(s, d, i & ~INTERP_ORDER_FRAME, buf, sizeof(buf));
			r = folded_push(f, buf, false);
		} else {
			r = push_user_frame(s, f, &d->user[i], syms[i]);
		}
	}
	free(syms);
	return r;
}

static void on_interp_records(struct session *s, const Sonde__V1__InterpreterRecords *m)
{
	if (m->n_records > SESSION_MAX_INTERP_RECORDS) {
		session_fail(s, RPC_INVALID_ARGUMENT, "more than 65536 interpreter records in a message");
		return;
	}
	if (!s->interp && m->n_records && !(s->interp = interp_session_new())) {
		log_warn("out of memory for interpreter records; their frames stay unnamed");
		return;
	}
	for (size_t i = 0; i < m->n_records; i++) {
		const Sonde__V1__InterpreterRecord *rec = m->records[i];
		int r = interp_session_put_record(s->interp, rec->kind, rec->pid, rec->data.data,
						  rec->data.len);

		if (r == -EBADMSG && !s->interp_refused_logged) {
			/* Said once per session: a hostile process can send many. */
			log_info("pid %" PRIu32 " sent a damaged %s record (%zu bytes); the frames"
				 " it names stay unknown",
				 rec->pid, interp_ops_of(rec->kind)->name, rec->data.len);
			s->interp_refused_logged = true;
		} else if (r == -ENOMEM) {
			log_warn("out of memory for interpreter records; their frames stay unnamed");
		}
	}
}

/* Stores p's samples of the resolved stack d and hands them to the
 * exporters. */
static void emit(struct session *s, const struct stackdef *d, const struct pending_sample *p)
{
	const struct process *proc = hmap_get_u64(s->procs, p->pid);
	struct profile_sample ps = {
		.unix_s = p->first_ns / 1000000000ull,
		.node = s->node_id,
		.start = p->start,
		.pid = p->pid,
		.tid = p->tid,
		.uid = p->uid,
		.comm = p->comm,
		.frames = d->text,
		.raw = d->raw,
		.raw_len = d->raw_len,
		.count = p->count,
		.profile = p->profile,
		.weight = p->weight,
		.span = p->has_span ? p->span : NULL,
		.frames_len = d->text_len,
		.stack_hash = d->hash,
		.shared = d->st,
	};
	struct export_sample es = {
		.host = s->node,
		.host_id = s->machine_id[0] ? s->machine_id : NULL,
		.pid = p->pid,
		.start = p->start,
		.tid = p->tid,
		.thread_name = p->comm,
		.comm = proc && proc->comm[0] ? proc->comm : NULL,
		.exe_path = proc ? proc->exe : NULL,
		.container_id = proc && proc->container_id[0] ? proc->container_id : NULL,
		.pod_uid = proc && proc->pod_uid[0] ? proc->pod_uid : NULL,
		.command_line = proc ? proc->cmdline : NULL,
		.raw = d->raw,
		.raw_len = d->raw_len,
		.count = p->count,
		.profile = p->profile,
		.weight = p->weight,
		.span = p->has_span ? p->span : NULL,
		.first_ns = p->first_ns,
		.last_ns = p->last_ns,
		.frequency_hz = s->frequency_hz,
	};

	if (profile_add(s->in->core->profile, &ps) < 0) {
		s->in->core->stats->samples_not_stored += p->count;
		log_debug("profile_add failed");
	}
	if (d->raw)
		otlp_exporter_add(s->in->core->otlp, &es);
}

/* n, or less: the bytes of the valid UTF-8 name s (n bytes) a raw
 * stack's u8 length keeps, cut between characters. */
static size_t raw_name_len(const char *s, size_t n)
{
	if (n <= RAWSTACK_MAX_NAME)
		return n;
	n = RAWSTACK_MAX_NAME;
	while (n && ((uint8_t)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/* The raw stack of d, leaf first: kernel frames (named with this
 * session's kernel symbols: the snapshot is per sensor), then user frames
 * in the reverse of order (push_user_frames), interpreter frames with
 * their names (the records that name them are the process's). */
static void build_raw(struct session *s, struct stackdef *d, const uint32_t *order,
		      uint32_t n_order)
{
	struct rawstack_builder b;
	struct ksyms_lookup kl;

	rawstack_begin(&b);
	for (uint32_t i = 0; i < d->n_kernel; i++) {
		struct rawframe f = { .kind = RAW_KERNEL, .address = d->kernel[i] };

		if (session_ksym(s, d->kernel[i], &kl) == 0 && kl.name) {
			size_t n = strlen(kl.name);

			f.name = kl.name;
			f.name_len = (uint8_t)(n > RAWSTACK_MAX_NAME ? RAWSTACK_MAX_NAME : n);
		}
		rawstack_push(&b, &f);
	}
	for (uint32_t j = n_order; j-- > 0;) {
		uint32_t i = order[j];
		struct rawframe f;

		if (i & INTERP_ORDER_FRAME) {
			uint32_t k = i & ~INTERP_ORDER_FRAME;
			char name[PROFILE_MAX_NAME], sys[PROFILE_MAX_NAME];
			size_t sys_len;

			interp_frame_name(s, d, k, name, sizeof(name));
			sys_len = raw_name_len(sys, interp_session_frame_system_name(
							    s->interp, d->interp_pid, &d->interp[k], sys,
							    sizeof(sys)));
			f = (struct rawframe){ .kind = rawframe_interp_kind(d->interp[k].kind),
					       .address = profile_stack_hash(name, sys_len ? sys : NULL,
									     sys_len),
					       .name = name,
					       .name_len = (uint8_t)raw_name_len(name, strlen(name)),
					       .system_name = sys_len ? sys : NULL,
					       .system_name_len = (uint8_t)sys_len };
			rawstack_push(&b, &f);
			continue;
		}
		f = (struct rawframe){ .kind = d->user[i].has_file ? RAW_USER_FILE : RAW_USER_ANON,
				       .address = d->user[i].addr };
		if (d->user[i].has_file)
			memcpy(f.file_id, d->user[i].id.bytes, FILEID_LEN);
		rawstack_push(&b, &f);
	}
	if (rawstack_end(&b, &d->raw, &d->raw_len) < 0) {
		d->raw = NULL;
		d->raw_len = 0;
		log_debug("no raw stack (out of memory); exports skip this stack");
	}
}

/* Swaps d's text and raw stack for the shared entry of the same content
 * (kept as they are without memory). */
static void stack_share(struct ingest *in, struct stackdef *d)
{
	const struct stack_text *st =
		stack_texts_get(in->texts, d->text, d->text_len, d->raw, d->raw_len, d->hash);

	if (!st)
		return;
	free(d->text);
	free(d->raw);
	d->st = st;
	d->text = (char *)st->text;
	d->raw = (uint8_t *)st->raw;
}

/* Symbolizes d into d->text and stores its waiting samples. */
static void stack_resolve(struct session *s, struct stackdef *d)
{
	struct folded f = { 0 };
	struct ksyms_lookup kl;
	uint32_t *order, n_order = 0;
	struct interp_frame *expanded;
	uint32_t n_expanded;
	int r = 0;

	/* A JIT frame with inlined functions becomes one frame for each
	 * (kept as it came without memory). */
	if (d->n_interp && interp_session_expand(s->interp, d->interp_pid, d->interp, d->n_interp,
						 &expanded, &n_expanded) == 0) {
		free(d->interp);
		d->interp = expanded;
		d->n_interp = n_expanded;
	}
	order = calloc(d->n_user + d->n_interp + 1, sizeof(*order));
	r = order ? push_user_frames(s, &f, d, order, &n_order) : -ENOMEM;
	for (uint32_t i = d->n_kernel; i-- > 0 && r != -ENOMEM;) {
		if (session_ksym(s, d->kernel[i], &kl) == 0)
			r = folded_push(&f, kl.name, true);
		else
			r = folded_push(&f, "[unknown]", true);
	}
	d->text = strdup(f.buf ? f.buf : "");
	folded_done(&f);
	if (!d->text) {
		d->text = NULL;
		log_warn("out of memory symbolizing a stack, dropping its samples");
	}
	if (!order) {
		free(d->text);
		d->text = NULL;
	} else {
		build_raw(s, d, order, n_order);
	}
	free(order);
	if (d->text) {
		d->text_len = strlen(d->text);
		d->hash = profile_stack_hash(d->text, d->raw, d->raw_len);
		stack_share(s->in, d);
	}
	s->n_frames_held -= d->n_kernel + d->n_user;
	free(d->kernel);
	free(d->user);
	free(d->interp);
	d->kernel = NULL;
	d->user = NULL;
	d->interp = NULL;
	d->n_kernel = d->n_user = d->n_interp = 0;
	for (size_t i = 0; i < d->n_samples; i++) {
		if (d->text)
			emit(s, d, &d->samples[i]);
		else
			s->in->core->stats->samples_not_stored += d->samples[i].count;
		s->waiting_count -= d->samples[i].count;
	}
	s->n_pending_samples -= d->n_samples;
	free(d->samples);
	d->samples = NULL;
	d->n_samples = d->cap_samples = 0;
	if (!d->text)
		d->text = strdup("[unknown]");
}

static void session_retry_pending(struct session *s, bool force_expired)
{
	int64_t now = clock_now_ms();

	for (struct stackdef *d = s->pend_head, *next; d; d = next) {
		next = d->pnext;
		if (stack_ready(s, d) || (force_expired && now >= d->deadline_ms)) {
			pend_remove(s, d);
			stack_resolve(s, d);
		}
	}
}

static void resolve_oldest(struct session *s)
{
	struct stackdef *d = s->pend_head;

	if (!d)
		return;
	pend_remove(s, d);
	stack_resolve(s, d);
}

static void flush_all_pending(struct session *s)
{
	while (s->pend_head)
		resolve_oldest(s);
}

static void session_try_finish(struct session *s)
{
	if (!s->half_closed || s->finished || !s->call)
		return;
	if ((s->n_pending > 0 || analysis_uses_source(s->in->core->analysis, &s->src)) &&
	    clock_now_ms() < s->drain_deadline_ms)
		return;
	flush_all_pending(s);
	profile_flush(s->in->core->profile);
	s->finished = true;
	log_info("sensor %.100s ended its stream", s->hostname);
	rpc_call_finish(s->call, RPC_OK, NULL, NULL);
}

void ingest_file_done(void *ctx, const struct fileid *id)
{
	struct ingest *in = ctx;

	free(hmap_remove(in->table_versions, id, sizeof(*id)));
	unwind_done(in, id);
	for (struct session *s = in->sessions; s;) {
		/* session_retry_pending may finish, but never free, a session. */
		struct session *next = s->next;

		session_retry_pending(s, false);
		session_try_finish(s);
		s = next;
	}
}

/* ---- message handlers ---- */

/* Control characters in a name for logs and clients become '?'. */
static void no_controls(char *p)
{
	for (; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* Hello.loaded_tables into s->loaded: bounded, each file ID 16 bytes. A
 * claim only ever stops a table for a file this session maps from being
 * sent (table_skip()); a false claim costs the sensor its own unwinding. */
static int hello_loaded_tables(struct session *s, const Sonde__V1__Hello *h)
{
	if (h->n_loaded_tables > SESSION_MAX_LOADED_TABLES) {
		session_fail(s, RPC_INVALID_ARGUMENT, "more than 65536 loaded_tables in Hello");
		return -EINVAL;
	}
	if (!h->n_loaded_tables)
		return 0;
	s->loaded = hmap_new();
	if (!s->loaded)
		goto nomem;
	for (size_t i = 0; i < h->n_loaded_tables; i++) {
		const Sonde__V1__LoadedTable *lt = h->loaded_tables[i];
		uint64_t *v;
		void *old = NULL;

		if (lt->file_id.len != FILEID_LEN) {
			session_fail(s, RPC_INVALID_ARGUMENT, "loaded_tables file_id is not 16 bytes");
			return -EINVAL;
		}
		v = malloc(sizeof(*v));
		if (!v)
			goto nomem;
		*v = lt->table_version;
		if (hmap_put(s->loaded, lt->file_id.data, FILEID_LEN, v, &old) < 0) {
			free(v);
			goto nomem;
		}
		free(old);
	}
	return 0;
nomem:
	session_fail(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
	return -ENOMEM;
}

static int on_hello(struct session *s, const Sonde__V1__Hello *h)
{
	Sonde__V1__SymbolizerMessage m = SONDE__V1__SYMBOLIZER_MESSAGE__INIT;
	Sonde__V1__Welcome w = SONDE__V1__WELCOME__INIT;
	int r;

	if (s->hello) {
		session_fail(s, RPC_INVALID_ARGUMENT, "second Hello");
		return -EINVAL;
	}
	if (h->protocol_version != 1) {
		session_fail(s, RPC_INVALID_ARGUMENT, "unsupported protocol_version (want 1)");
		return -EINVAL;
	}
	s->hello = true;
	/* Exported as host.name and shown to clients: valid UTF-8 too. */
	text_copy(s->hostname, 101, h->hostname);
	text_copy(s->node, sizeof(s->node),
		  h->node_name && *h->node_name ? h->node_name : h->hostname);
	text_copy(s->machine_id, sizeof(s->machine_id), h->machine_id);
	s->frequency_hz = h->frequency_hz;
	no_controls(s->hostname);
	no_controls(s->node);
	no_controls(s->machine_id);
	r = profile_node(s->in->core->profile, s->node, &s->node_id);
	if (r < 0) {
		session_fail(s, RPC_RESOURCE_EXHAUSTED, "cannot store the node name");
		return r;
	}
	if (h->kernel_build_id.len && h->kernel_build_id.len <= sizeof(s->kernel_build_id)) {
		memcpy(s->kernel_build_id, h->kernel_build_id.data, h->kernel_build_id.len);
		s->kernel_build_id_len = h->kernel_build_id.len;
	}
	r = hello_loaded_tables(s, h);
	if (r < 0)
		return r;
	log_info("sensor %s (node %s) connected from %s (sensor %.40s, kernel %.60s, %u Hz)",
		 s->hostname, s->node, rpc_call_peer(s->call), h->sensor_version ? h->sensor_version : "?",
		 h->kernel_release ? h->kernel_release : "?", h->frequency_hz);
	w.protocol_version = 1;
	w.max_message_bytes = API_MAX_MESSAGE;
	w.max_read_bytes = ANALYSIS_MAX_READ;
	m.kind_case = SONDE__V1__SYMBOLIZER_MESSAGE__KIND_WELCOME;
	m.welcome = &w;
	if (rpc_call_write(s->call, &m.base) < 0) {
		session_fail(s, RPC_UNAVAILABLE, "cannot send Welcome");
		return -EPIPE;
	}
	return 0;
}

/* The Status outcomes of p, if it has any, take its owner and name from
 * its ProcessUpdate: a sample may come before it (root's until then), and
 * a reused pid is another process, whose counts start again. */
static void outcome_refresh(struct session *s, const struct process *p)
{
	struct proc_outcome *po =
		hmap_get_u64(s->in->core->stats->proc_outcomes, proc_outcome_key(s->id, p->pid));

	if (!po)
		return;
	if (po->uid != p->uid) {
		memset(&po->c, 0, sizeof(po->c));
		po->uid = p->uid;
	}
	if (p->comm[0])
		utf8_escape(po->comm, sizeof(po->comm), p->comm, strlen(p->comm));
	po->exited_ms = 0;
}

static int on_process(struct session *s, const Sonde__V1__ProcessUpdate *u)
{
	struct process *p;
	struct mapping *maps = NULL;
	size_t n_new_files = 0;
	int r;

	if (u->pid == 0) {
		session_fail(s, RPC_INVALID_ARGUMENT, "ProcessUpdate with pid 0");
		return -EINVAL;
	}
	if (u->exe_path && strnlen(u->exe_path, SESSION_MAX_PATH + 1) > SESSION_MAX_PATH) {
		session_fail(s, RPC_INVALID_ARGUMENT, "exe_path longer than 4096 bytes");
		return -EINVAL;
	}
	if (u->n_mappings > SESSION_MAX_MAPPINGS) {
		session_fail(s, RPC_INVALID_ARGUMENT, "more than 10000 mappings in one process");
		return -EINVAL;
	}
	/* Validate everything before changing anything. */
	for (size_t i = 0; i < u->n_mappings; i++) {
		const Sonde__V1__Mapping *m = u->mappings[i];
		const struct sfile *f;

		if (m->file_id.len != 0 && m->file_id.len != FILEID_LEN) {
			session_fail(s, RPC_INVALID_ARGUMENT, "mapping file_id is not 16 bytes");
			return -EINVAL;
		}
		if (m->path && strnlen(m->path, SESSION_MAX_PATH + 1) > SESSION_MAX_PATH) {
			session_fail(s, RPC_INVALID_ARGUMENT, "mapping path longer than 4096 bytes");
			return -EINVAL;
		}
		if (m->file_id.len == FILEID_LEN && m->file_size) {
			f = hmap_get(s->files, m->file_id.data, FILEID_LEN);
			if (f && f->size != m->file_size) {
				/* The size is part of the file ID's hash. */
				session_fail(s, RPC_INVALID_ARGUMENT,
					     "one file_id reported with two sizes");
				return -EINVAL;
			}
			if (!f)
				n_new_files++;
		}
	}
	if (hmap_count(s->files) + n_new_files > SESSION_MAX_FILES) {
		session_fail(s, RPC_RESOURCE_EXHAUSTED, "more than 100000 files in one session");
		return -E2BIG;
	}
	p = hmap_get_u64(s->procs, u->pid);
	if (!p) {
		if (hmap_count(s->procs) >= SESSION_MAX_PROCESSES) {
			session_fail(s, RPC_RESOURCE_EXHAUSTED,
				     "more than 100000 processes in one session");
			return -E2BIG;
		}
		p = calloc(1, sizeof(*p));
		if (!p || hmap_put_u64(s->procs, u->pid, p, NULL) < 0) {
			free(p);
			session_fail(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
			return -ENOMEM;
		}
		p->pid = u->pid;
	}
	p->uid = s->local ? u->uid : 0;
	/* Target text: valid UTF-8 from here on, whatever the sensor sent. */
	text_copy(p->comm, sizeof(p->comm), u->comm);
	outcome_refresh(s, p);
	p->start = u->start_time_ticks;
	cgroup_ids_parse(u->cgroup, p->container_id, p->pod_uid);
	free(p->exe);
	p->exe = u->exe_path && *u->exe_path ? utf8_escape_dup(u->exe_path, SESSION_MAX_PATH) : NULL;
	text_copy(p->service, sizeof(p->service), u->otel_service_name);
	free(p->cmdline);
	p->cmdline = u->command_line && *u->command_line
			     ? utf8_escape_dup(u->command_line, SESSION_MAX_PATH)
			     : NULL;
	if (u->n_mappings) {
		maps = calloc(u->n_mappings, sizeof(*maps));
		if (!maps) {
			session_fail(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
			return -ENOMEM;
		}
	}
	free(p->maps);
	p->maps = maps;
	p->n_maps = u->n_mappings;
	for (size_t i = 0; i < u->n_mappings; i++) {
		const Sonde__V1__Mapping *m = u->mappings[i];
		struct fileid id;

		maps[i].start = m->start;
		maps[i].end = m->end;
		maps[i].offset = m->file_offset;
		if (m->file_id.len != FILEID_LEN)
			continue;
		memcpy(id.bytes, m->file_id.data, FILEID_LEN);
		maps[i].id = id;
		maps[i].has_file = true;
		if (s->local)
			access_note_mapping(s->in->core->access, &id, m->file_mode, m->file_uid, m->file_gid,
					    u->uid);
		if (m->path && *m->path && utf8_valid(m->path, strlen(m->path))) {
			registry_note_path(s->in->core->reg, &id, m->path);
		} else if (m->path && *m->path) {
			char *path = utf8_escape_dup(m->path, SESSION_MAX_PATH);

			if (path)
				registry_note_path(s->in->core->reg, &id, path);
			free(path);
		}
		if (!m->file_size)
			continue; /* cannot be read back; frames get basename+offset */
		struct sfile *f = hmap_get(s->files, &id, sizeof(id));

		if (!f) {
			f = calloc(1, sizeof(*f));
			if (!f)
				continue;
			f->size = m->file_size;
			r = hmap_put(s->files, &id, sizeof(id), f, NULL);
			if (r < 0) {
				free(f);
				continue;
			}
		}
		/* Analyse executable files now, so their stacks do not wait. */
		if (m->executable && !f->in_cache) {
			if (cache_contains(s->in->core->cache, &id) == 1)
				f->in_cache = true;
			else
				analysis_file_state(s->in->core->analysis, &id, true, NULL, NULL);
		}
		if (m->executable)
			session_want_table(s, &id);
	}
	session_pump_tables(s);
	return 0;
}

static int on_kernel_symbols(struct session *s, const Sonde__V1__KernelSymbols *k)
{
	if (k->first) {
		if (!s->kstage && !(s->kstage = ksyms_new())) {
			session_fail(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
			return -ENOMEM;
		}
		ksyms_begin(s->kstage);
	}
	if (!s->kstage || !ksyms_staging(s->kstage)) {
		session_fail(s, RPC_INVALID_ARGUMENT, "KernelSymbols chunk without a first one");
		return -EINVAL;
	}
	for (size_t i = 0; i < k->n_symbols; i++) {
		const Sonde__V1__KernelSymbol *ks = k->symbols[i];
		char name[KSYMS_MAX_NAME_LEN + 1], module[KSYMS_MAX_NAME_LEN + 1];
		int r;

		/* Cut at the bound ksyms_add() keeps, and valid UTF-8. */
		text_copy(name, sizeof(name), ks->name);
		text_copy(module, sizeof(module), ks->module);
		r = ksyms_add(s->kstage, ks->address, name, ks->module ? module : NULL);

		if (r == -E2BIG && !s->ksyms_overflow_logged) {
			log_warn("sensor %.100s: kernel symbols over the bound (%u symbols, %u MiB), ignoring the rest",
				 s->hostname, KSYMS_MAX_SYMBOLS, KSYMS_MAX_NAME_BYTES >> 20);
			s->ksyms_overflow_logged = true;
		}
		if (r == -E2BIG)
			break;
	}
	if (k->last) {
		ksyms_commit(s->kstage);
		s->ksyms_overflow_logged = false;
		log_debug("sensor %.100s: %zu kernel symbols", s->hostname, ksyms_count(s->kstage));
		session_ksyms_share(s);
		session_retry_pending(s, false);
	}
	return 0;
}

/* The service a span of p belongs to: OTEL_SERVICE_NAME, else the
 * executable's name (semantic conventions), else the process name. */
static const char *process_service(const struct process *p)
{
	const char *slash;

	if (p->service[0])
		return p->service;
	if (p->exe && (slash = strrchr(p->exe, '/')) && slash[1])
		return slash + 1;
	return p->comm[0] ? p->comm : NULL;
}

/* process_service() of pid and its owner (0, admins only, when the
 * process is unknown), also for a process that exited lately. */
static const char *service_of(void *ctx, uint32_t pid, uint32_t *ret_uid)
{
	struct session *s = ctx;
	const struct process *p = hmap_get_u64(s->procs, pid);
	const unsigned n = s->gone ? GONE_RING : 0;

	*ret_uid = 0;
	if (!p) {
		for (unsigned k = 1; k <= n && k <= s->gone_next; k++) {
			unsigned i = (s->gone_next - k) % n;

			if (s->gone[i].pid == pid) {
				*ret_uid = s->gone[i].uid;
				return s->gone[i].service[0] ? s->gone[i].service : NULL;
			}
		}
		return NULL;
	}
	*ret_uid = p->uid;
	return process_service(p);
}

static int add_stackdef(struct session *s, const Sonde__V1__StackDef *sd)
{
	struct stackdef *d, *old = NULL;

	if (sd->n_kernel > SESSION_MAX_FRAMES || sd->n_user > SESSION_MAX_FRAMES ||
	    sd->n_interp > SESSION_MAX_FRAMES) {
		session_fail(s, RPC_INVALID_ARGUMENT, "stack with more than 256 frames");
		return -EINVAL;
	}
	for (size_t i = 0; i < sd->n_user; i++) {
		size_t len = sd->user[i]->file_id.len;

		if (len != 0 && len != FILEID_LEN) {
			session_fail(s, RPC_INVALID_ARGUMENT, "frame file_id is not 16 bytes");
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < sd->n_interp; i++) {
		if (sd->interp[i]->n_words > INTERP_FRAME_WORDS) {
			session_fail(s, RPC_INVALID_ARGUMENT,
				     "interpreter frame with more than 2 words");
			return -EINVAL;
		}
		/* One walker per stack, one this symbolizer has an entry for. */
		if (sd->interp[i]->kind != sd->interp[0]->kind || !interp_ops_of(sd->interp[i]->kind)) {
			session_fail(s, RPC_INVALID_ARGUMENT,
				     "interpreter frames of an unknown or mixed kind");
			return -EINVAL;
		}
	}
	old = hmap_get_u64(s->stacks, sd->id);
	if (!old && hmap_count(s->stacks) >= SESSION_MAX_STACKS) {
		session_fail(s, RPC_RESOURCE_EXHAUSTED, "more than 1000000 stacks in one session");
		return -E2BIG;
	}
	if (old && old->queued) {
		/* A redefinition: settle the old one's samples first. */
		pend_remove(s, old);
		stack_resolve(s, old);
	}
	if (s->n_frames_held + sd->n_kernel + sd->n_user > SESSION_MAX_STACK_FRAMES)
		flush_all_pending(s);
	d = calloc(1, sizeof(*d));
	if (!d)
		goto nomem;
	d->id = sd->id;
	/* An outcome this symbolizer does not know counts as unspecified. */
	d->outcome = (unsigned)sd->outcome < SENSOR_STATS_N_OUTCOMES ? (uint8_t)sd->outcome : 0;
	d->n_kernel = (uint32_t)sd->n_kernel;
	d->n_user = (uint32_t)sd->n_user;
	if (d->n_kernel) {
		d->kernel = malloc(d->n_kernel * sizeof(*d->kernel));
		if (!d->kernel)
			goto nomem;
		memcpy(d->kernel, sd->kernel, d->n_kernel * sizeof(*d->kernel));
	}
	if (d->n_user) {
		d->user = calloc(d->n_user, sizeof(*d->user));
		if (!d->user)
			goto nomem;
		for (uint32_t i = 0; i < d->n_user; i++) {
			const Sonde__V1__Frame *fr = sd->user[i];

			d->user[i].addr = fr->address;
			if (fr->file_id.len == FILEID_LEN) {
				memcpy(d->user[i].id.bytes, fr->file_id.data, FILEID_LEN);
				d->user[i].has_file = true;
			}
		}
	}
	if (sd->n_interp) {
		d->interp = calloc(sd->n_interp, sizeof(*d->interp));
		if (!d->interp)
			goto nomem;
		d->n_interp = (uint32_t)sd->n_interp;
		d->interp_pid = sd->pid;
		for (uint32_t i = 0; i < d->n_interp; i++) {
			const Sonde__V1__InterpFrame *fr = sd->interp[i];

			d->interp[i].kind = fr->kind;
			d->interp[i].n_words = (uint8_t)fr->n_words;
			memcpy(d->interp[i].words, fr->words, fr->n_words * sizeof(uint64_t));
		}
	}
	s->n_frames_held += d->n_kernel + d->n_user;
	if (hmap_put_u64(s->stacks, d->id, d, NULL) < 0) {
		s->n_frames_held -= d->n_kernel + d->n_user;
		goto nomem;
	}
	stackdef_free(old);
	s->in->core->stats->stacks_received++;
	if (stack_ready(s, d)) {
		stack_resolve(s, d);
	} else {
		if (s->n_pending >= SESSION_MAX_PENDING_STACKS)
			resolve_oldest(s);
		pend_add(s, d);
	}
	return 0;
nomem:
	stackdef_free(d);
	session_fail(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
	return -ENOMEM;
}

static void count_outcome(struct session *s, uint8_t outcome, const Sonde__V1__SampleCount *sc)
{
	struct ingest *in = s->in;
	uint64_t key = proc_outcome_key(s->id, sc->pid);
	struct proc_outcome *po = hmap_get_u64(in->core->stats->proc_outcomes, key);

	in->core->stats->outcomes.n[outcome] += sc->count;
	in->core->stats->outcomes.total += sc->count;
	if (!po) {
		const struct process *p = hmap_get_u64(s->procs, sc->pid);

		if (hmap_count(in->core->stats->proc_outcomes) >= SENSOR_STATS_MAX_OUTCOME_PIDS)
			return;
		po = calloc(1, sizeof(*po));
		if (!po || hmap_put_u64(in->core->stats->proc_outcomes, key, po, NULL) < 0) {
			free(po);
			return;
		}
		po->key = key;
		po->pid = sc->pid;
		po->node = profile_node_name(in->core->profile, s->node_id);
		/* Unknown process: root's, so only admins see it. */
		po->uid = p ? p->uid : 0;
		/* The process name; a thread's comm if the process is unknown. */
		text_copy(po->comm, sizeof(po->comm), p && p->comm[0] ? p->comm : sc->comm);
	}
	po->c.n[outcome] += sc->count;
	po->c.total += sc->count;
}

static int add_sample(struct session *s, const Sonde__V1__SampleCount *sc)
{
	struct stackdef *d = hmap_get_u64(s->stacks, sc->stack_id);
	const struct process *p;
	const char *comm = sc->comm;
	uint64_t now_ns = (uint64_t)time(NULL) * 1000000000ull;
	struct pending_sample ps = { .pid = sc->pid, .tid = sc->tid, .count = sc->count,
				     .profile = sc->profile, .weight = sc->weight };

	if (!d) {
		session_fail(s, RPC_INVALID_ARGUMENT, "SampleCount for an unknown stack id");
		return -EINVAL;
	}
	if (sc->profile >= PROFILE_TYPES) {
		session_fail(s, RPC_INVALID_ARGUMENT, "SampleCount of an unknown profile type");
		return -EINVAL;
	}
	if (sc->trace_id.len || sc->span_id.len) {
		if (sc->trace_id.len != 16 || sc->span_id.len != 8) {
			session_fail(s, RPC_INVALID_ARGUMENT,
				     "SampleCount trace_id/span_id are not 16 and 8 bytes");
			return -EINVAL;
		}
		memcpy(ps.span, sc->trace_id.data, 16);
		memcpy(ps.span + 16, sc->span_id.data, 8);
		ps.has_span = true;
	}
	if (sc->count == 0)
		return 0;
	s->in->core->stats->samples_received += sc->count;
	count_outcome(s, d->outcome, sc);
	ps.first_ns = sc->first_unix_ns ? sc->first_unix_ns : now_ns;
	/* A sensor clock far ahead would outlive retention. */
	if (ps.first_ns > now_ns + 300000000000ull)
		ps.first_ns = now_ns;
	ps.last_ns = sc->last_unix_ns >= ps.first_ns && sc->last_unix_ns <= now_ns + 300000000000ull
			     ? sc->last_unix_ns
			     : ps.first_ns;
	/* A sample of a pid no ProcessUpdate named (or one that exited
	 * lately) belongs to root: only admins see it, rather than
	 * whoever later gets the pid. */
	service_of(s, sc->pid, &ps.uid);
	p = hmap_get_u64(s->procs, sc->pid);
	ps.start = p ? p->start : 0;
	if (!comm || !*comm)
		comm = p && p->comm[0] ? p->comm : "[unknown]";
	text_copy(ps.comm, sizeof(ps.comm), comm);
	if (d->text) {
		/* The store logs its failures at debug level: not the sensor's fault. */
		emit(s, d, &ps);
		return 0;
	}
	if (d->n_samples == d->cap_samples) {
		size_t cap = d->cap_samples ? d->cap_samples * 2 : 4;
		struct pending_sample *ns = realloc(d->samples, cap * sizeof(*ns));

		if (!ns) {
			session_fail(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
			return -ENOMEM;
		}
		d->samples = ns;
		d->cap_samples = cap;
	}
	d->samples[d->n_samples++] = ps;
	s->n_pending_samples++;
	s->waiting_count += ps.count;
	while (s->n_pending_samples > SESSION_MAX_PENDING_SAMPLES && s->pend_head)
		resolve_oldest(s);
	return 0;
}

static int on_stacks(struct session *s, const Sonde__V1__StackBatch *b)
{
	int r;

	for (size_t i = 0; i < b->n_stacks; i++) {
		r = add_stackdef(s, b->stacks[i]);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < b->n_samples; i++) {
		r = add_sample(s, b->samples[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

static void on_file_range(struct session *s, const Sonde__V1__FileRange *fr)
{
	const char *reason = NULL;

	if (analysis_on_file_range(s->in->core->analysis, &s->src, fr->request_id, fr->file_id.data, fr->file_id.len,
				   fr->offset, fr->data.data, fr->data.len, fr->error,
				   &reason) < 0)
		session_fail(s, RPC_INVALID_ARGUMENT, reason ? reason : "bad FileRange");
}

void ingest_on_open(struct rpc_call *call, void *ctx)
{
	struct ingest *in = ctx;
	struct session *s = calloc(1, sizeof(*s));
	struct rpc_peer peer;

	if (!s)
		goto fail;
	s->in = in;
	s->call = call;
	s->id = in->next_session_id++;
	rpc_call_peer_creds(call, &peer);
	s->local = peer.transport == RPC_TRANSPORT_UNIX;
	snprintf(s->hostname, sizeof(s->hostname), "session %" PRIu64, s->id);
	s->procs = hmap_new();
	s->files = hmap_new();
	s->stacks = hmap_new();
	s->tables = hmap_new();
	if (!s->procs || !s->files || !s->stacks || !s->tables)
		goto fail;
	s->next = in->sessions;
	in->sessions = s;
	s->src.ops = &session_source_ops;
	registry_add_source(in->core->reg, &s->src);
	in->core->stats->sensors_connected++;
	rpc_call_set_data(call, s);
	return;
fail:
	if (s) {
		hmap_free(s->procs, NULL);
		hmap_free(s->files, NULL);
		hmap_free(s->stacks, NULL);
		hmap_free(s->tables, NULL);
		free(s);
	}
	rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
}

/* The sensor's messages, one handler each (the other direction's table is
 * in sensor/uplink.c). Every kind but Hello needs the session's Hello;
 * a kind not listed ends the stream. */
static void handle_hello(struct session *s, const Sonde__V1__SensorMessage *m)
{
	on_hello(s, m->hello);
}

static void handle_process(struct session *s, const Sonde__V1__SensorMessage *m)
{
	on_process(s, m->process);
}

static void handle_exit(struct session *s, const Sonde__V1__SensorMessage *m)
{
	struct proc_outcome *po =
		hmap_get_u64(s->in->core->stats->proc_outcomes, proc_outcome_key(s->id, m->exit->pid));
	struct process *p = hmap_remove_u64(s->procs, m->exit->pid);

	if (p && !s->gone)
		s->gone = calloc(GONE_RING, sizeof(*s->gone)); /* NULL: not remembered */
	if (p && s->gone) {
		const char *name = process_service(p);
		unsigned i = s->gone_next++ % GONE_RING;

		s->gone[i].pid = p->pid;
		s->gone[i].uid = p->uid;
		snprintf(s->gone[i].service, sizeof(s->gone[i].service), "%s", name ? name : "");
	}
	process_free(p);
	if (po)
		po->exited_ms = clock_now_ms();
}

static void handle_probe_events(struct session *s, const Sonde__V1__SensorMessage *m)
{
	if (s->in->hooks.probe_events)
		s->in->hooks.probe_events(s->in->hooks.ctx, s->node,
					  m->probe_events->monotonic_to_unix_ns,
					  m->probe_events->records, m->probe_events->n_records,
					  m->probe_events->records_lost, service_of, s);
}

static void handle_kernel_symbols(struct session *s, const Sonde__V1__SensorMessage *m)
{
	on_kernel_symbols(s, m->kernel_symbols);
}

static void handle_stacks(struct session *s, const Sonde__V1__SensorMessage *m)
{
	on_stacks(s, m->stacks);
}

static void handle_interp_records(struct session *s, const Sonde__V1__SensorMessage *m)
{
	on_interp_records(s, m->interp_records);
}

static void handle_file_range(struct session *s, const Sonde__V1__SensorMessage *m)
{
	on_file_range(s, m->file_range);
}

static void handle_stats(struct session *s, const Sonde__V1__SensorMessage *m)
{
	const Sonde__V1__SensorStats *st = m->stats;

	s->stats.samples_taken = st->samples_taken;
	s->stats.samples_lost = st->samples_lost;
	s->stats.samples_dropped = st->samples_dropped;
	s->stats.unwind_tables_loaded = st->unwind_tables_loaded;
	s->stats.unwind_rows_loaded = st->unwind_rows_loaded;
	s->stats.bpf_map_bytes = st->bpf_map_bytes;
	s->stats.session_taken = st->connection_samples_taken;
	s->stats.session_dropped = st->connection_samples_dropped;
	s->stats.samples_unconfirmed = st->samples_unconfirmed;
	s->stats.processes = st->processes;
	s->stats.go_files = st->go_probe_files;
	s->stats.go_links = st->go_probe_links;
	s->stats.go_attach_failures = st->go_probe_attach_failures;
	s->stats.go_records = st->go_probe_records;
	s->stats.go_records_lost = st->go_probe_records_lost;
	s->stats.plans_refused = st->probe_plans_refused;
	s->stats.configs_refused = st->interpreter_configs_refused;
}

struct ingest_handler {
	Sonde__V1__SensorMessage__KindCase kind;
	bool after_hello;
	void (*fn)(struct session *s, const Sonde__V1__SensorMessage *m);
};

static const struct ingest_handler ingest_handlers[] = {
	{SONDE__V1__SENSOR_MESSAGE__KIND_HELLO, false, handle_hello},
	{SONDE__V1__SENSOR_MESSAGE__KIND_PROCESS, true, handle_process},
	{SONDE__V1__SENSOR_MESSAGE__KIND_EXIT, true, handle_exit},
	{SONDE__V1__SENSOR_MESSAGE__KIND_PROBE_EVENTS, true, handle_probe_events},
	{SONDE__V1__SENSOR_MESSAGE__KIND_KERNEL_SYMBOLS, true, handle_kernel_symbols},
	{SONDE__V1__SENSOR_MESSAGE__KIND_STACKS, true, handle_stacks},
	{SONDE__V1__SENSOR_MESSAGE__KIND_INTERP_RECORDS, true, handle_interp_records},
	{SONDE__V1__SENSOR_MESSAGE__KIND_FILE_RANGE, true, handle_file_range},
	{SONDE__V1__SENSOR_MESSAGE__KIND_STATS, true, handle_stats},
};

static const struct ingest_handler *ingest_handler(Sonde__V1__SensorMessage__KindCase kind)
{
	for (size_t i = 0; i < sizeof(ingest_handlers) / sizeof(ingest_handlers[0]); i++)
		if (ingest_handlers[i].kind == kind)
			return &ingest_handlers[i];
	return NULL;
}

void ingest_on_message(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	struct session *s = rpc_call_data(call);
	const Sonde__V1__SensorMessage *m = (const Sonde__V1__SensorMessage *)msg;
	const struct ingest_handler *h;

	if (!s || s->finished)
		return;
	if (!msg) {
		/* Half-close: finish what is pending, then end with OK. */
		s->half_closed = true;
		s->drain_deadline_ms = clock_now_ms() + INGEST_DRAIN_TIMEOUT_MS;
		session_retry_pending(s, false);
		session_try_finish(s);
		return;
	}
	h = ingest_handler(m->kind_case);
	if (!s->hello && (!h || h->after_hello))
		session_fail(s, RPC_INVALID_ARGUMENT, "Hello must come first");
	else if (!h)
		session_fail(s, RPC_INVALID_ARGUMENT, "empty or unknown SensorMessage");
	else
		h->fn(s, m);
	analysis_flush_done(s->in->core->analysis);
}

/* The session's processes are as good as exited: its Status entries are
 * forgotten after a while, not kept beside a reconnected sensor's. */
static void outcomes_session_gone(struct session *s)
{
	struct hmap_iter it;
	int64_t now = clock_now_ms();
	void *val;

	hmap_iter_init(s->in->core->stats->proc_outcomes, &it);
	while (hmap_next(s->in->core->stats->proc_outcomes, &it, NULL, NULL, &val)) {
		struct proc_outcome *po = val;

		if (po->key >> 32 == (s->id & UINT32_MAX) && !po->exited_ms)
			po->exited_ms = now;
	}
}

void ingest_on_close(struct rpc_call *call, void *ctx)
{
	struct ingest *in = ctx;
	struct session *s = rpc_call_data(call);

	if (!s)
		return;
	rpc_call_set_data(call, NULL);
	if (!s->half_closed || !s->finished)
		log_info("sensor %.100s disconnected", s->hostname);
	if (s->hello)
		log_info("sensor %.100s: %" PRIu64 " unwind tables sent (%" PRIu64 " rows), %" PRIu64
			 " not sent (loaded before a reconnect)",
			 s->hostname, s->tables_sent, s->table_rows_sent, s->tables_skipped);
	s->finished = true;
	s->call = NULL;
	analysis_source_gone(in->core->analysis, &s->src);
	/* What waited is stored with what is known now. */
	flush_all_pending(s);
	outcomes_session_gone(s);
	in->core->stats->past.samples_taken += s->stats.samples_taken;
	in->core->stats->past.samples_lost += s->stats.samples_lost;
	in->core->stats->past.samples_dropped += s->stats.samples_dropped;
	in->core->stats->past.session_taken += s->stats.session_taken;
	in->core->stats->past.session_dropped += s->stats.session_dropped;
	in->core->stats->past.samples_unconfirmed += s->stats.samples_unconfirmed;
	for (struct session **pp = &in->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	registry_remove_source(in->core->reg, &s->src);
	in->core->stats->sensors_connected--;
	hmap_free(s->procs, process_free);
	hmap_free(s->files, free);
	hmap_free(s->stacks, stackdef_free);
	hmap_free(s->tables, free);
	hmap_free(s->loaded, free);
	interp_session_free(s->interp);
	ksyms_free(s->kstage);
	kshared_unref(in, s->kern);
	free(s->gone);
	free(s);
	analysis_flush_done(in->core->analysis);
}

void ingest_tick(struct ingest *in)
{
	for (struct session *s = in->sessions; s; s = s->next) {
		session_tick_tables(s);
		session_tick_interp(s);
		session_retry_pending(s, true);
		session_try_finish(s);
	}
}

bool ingest_busy(const struct ingest *in)
{
	for (struct session *s = in->sessions; s; s = s->next)
		if (s->n_pending || s->tq_head || s->n_tables_waiting || s->half_closed)
			return true;
	return false;
}

/* sensor_stats_live.add: the connected sessions' counters. */
static void add_live_counters(void *ctx, struct sensor_counters *ret)
{
	const struct ingest *in = ctx;

	for (const struct session *s = in->sessions; s; s = s->next) {
		ret->samples_taken += s->stats.samples_taken;
		ret->samples_lost += s->stats.samples_lost;
		ret->samples_dropped += s->stats.samples_dropped;
		ret->unwind_tables_loaded += s->stats.unwind_tables_loaded;
		ret->unwind_rows_loaded += s->stats.unwind_rows_loaded;
		ret->bpf_map_bytes += s->stats.bpf_map_bytes;
		ret->session_taken += s->stats.session_taken;
		ret->session_dropped += s->stats.session_dropped;
		ret->samples_unconfirmed += s->stats.samples_unconfirmed;
		ret->samples_waiting += s->waiting_count;
		ret->processes += s->stats.processes;
		ret->go_files += s->stats.go_files;
		ret->go_links += s->stats.go_links;
		ret->go_attach_failures += s->stats.go_attach_failures;
		ret->go_records += s->stats.go_records;
		ret->go_records_lost += s->stats.go_records_lost;
		ret->plans_refused += s->stats.plans_refused;
		ret->configs_refused += s->stats.configs_refused;
	}
}

/* sensor_stats_live.frequency_hz. */
static uint32_t live_frequency_hz(void *ctx)
{
	const struct ingest *in = ctx;
	uint32_t hz = 0;

	for (const struct session *s = in->sessions; s; s = s->next) {
		if (!s->hello || !s->frequency_hz)
			continue;
		if (hz && hz != s->frequency_hz)
			return 0;
		hz = s->frequency_hz;
	}
	return hz;
}

static int cmp_session_node(const void *a, const void *b)
{
	return strcmp((*(const struct session *const *)a)->node,
		      (*(const struct session *const *)b)->node);
}

/* sensor_stats_live.nodes: sorted by name, so equal names are neighbours
 * (Status asks for them at every poll: a scan per session of the nodes
 * found so far was quadratic in the sensors). The first max names. */
static size_t live_nodes(void *ctx, struct sensor_node *out, size_t max)
{
	const struct ingest *in = ctx;
	const struct session **v;
	size_t n_live = 0, n = 0;

	for (const struct session *s = in->sessions; s; s = s->next)
		n_live += s->hello && !s->finished;
	v = malloc((n_live ? n_live : 1) * sizeof(*v));
	if (!v)
		return 0;
	n_live = 0;
	for (const struct session *s = in->sessions; s; s = s->next)
		if (s->hello && !s->finished)
			v[n_live++] = s;
	qsort(v, n_live, sizeof(*v), cmp_session_node);
	for (size_t i = 0; i < n_live; i++) {
		if (n && !strcmp(out[n - 1].node, v[i]->node)) {
			out[n - 1].sensors++;
			continue;
		}
		if (n == max)
			break;
		out[n++] = (struct sensor_node){ .node = v[i]->node, .host_name = v[i]->hostname,
						 .machine_id = v[i]->machine_id, .sensors = 1 };
	}
	free(v);
	return n;
}

struct ingest *ingest_new(const struct api_core *core, const struct ingest_hooks *hooks)
{
	struct ingest *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->core = core;
	if (hooks)
		in->hooks = *hooks;
	in->next_session_id = 1;
	in->table_versions = hmap_new();
	in->texts = stack_texts_new();
	in->kernels = hmap_new();
	if (!in->table_versions || !in->texts || !in->kernels) {
		hmap_free(in->table_versions, NULL);
		hmap_free(in->kernels, NULL);
		stack_texts_free(in->texts);
		free(in);
		return NULL;
	}
	return in;
}

void ingest_attach(struct ingest *in)
{
	in->core->stats->live = (struct sensor_stats_live){
		.add = add_live_counters,
		.frequency_hz = live_frequency_hz,
		.nodes = live_nodes,
		.ctx = in,
	};
}

void ingest_free(struct ingest *in)
{
	if (!in)
		return;
	hmap_free(in->table_versions, free);
	stack_texts_free(in->texts);
	hmap_free(in->kernels, NULL); /* empty: every session unref'd its table */
	free(in);
}
