/* service.h - state shared by the symbolizer's rpc handlers (private to
 * symbolizer/api/): sensor sessions (ingest.c), file analysis jobs
 * (analysis.c) and the public Symbols service (symbols.c).
 *
 * Everything here runs on the rpc loop thread (see rpc_server.h), so nothing is
 * locked. Pointers between the pieces (job -> session, request -> job)
 * are cleared by whoever frees the target.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc_server.h"
#include "fileid.h"
#include "symtab.h"
#include "cache.h"
#include "profile.h"
#include "hmap.h"
#include "file_image.h"

#define SERVICE_MAX_MESSAGE (16u << 20)
#define SERVICE_MAX_READ (4u << 20)           /* largest ReadRange */
#define SERVICE_MAX_FETCH (256ull << 20)      /* bytes fetched per file */
#define SERVICE_MAX_REQUESTS_PER_JOB 4096u
#define SERVICE_MAX_ACTIVE_JOBS 8u
#define SERVICE_MAX_QUEUED_JOBS 10000u
#define SERVICE_JOB_TIMEOUT_MS 60000
#define SERVICE_RETRY_AFTER_MS 60000          /* after a transient failure */
#define SERVICE_PENDING_TIMEOUT_MS 10000
#define SERVICE_SYMBOLIZE_TIMEOUT_MS 10000
#define SERVICE_DRAIN_TIMEOUT_MS 30000
#define SERVICE_MAX_PATHS 200000u             /* global path <-> file ID index */

#define SESSION_MAX_PROCESSES 100000u
#define SESSION_MAX_MAPPINGS 10000u           /* per process */
#define SESSION_MAX_FILES 100000u
#define SESSION_MAX_PATH 4096u
#define SESSION_MAX_FRAMES 256u               /* per stack, kernel and user each */
#define SESSION_MAX_INTERP_RECORDS 65536u     /* per InterpreterRecords message */
#define SESSION_MAX_STACKS 1000000u
#define SESSION_MAX_STACK_FRAMES (16u << 20)  /* unresolved frames held */
#define SESSION_MAX_PENDING_STACKS 10000u
#define SESSION_MAX_PENDING_SAMPLES 200000u

struct session;
struct job;
struct line_index;

struct sensor_counters {
	uint64_t samples_taken, samples_lost, samples_dropped;
	/* the accounting identity (ingest.proto SensorStats), per session */
	uint64_t session_taken, session_dropped, samples_unconfirmed;
	/* latest values, summed over connected sensors only */
	uint64_t unwind_tables_loaded, unwind_rows_loaded, bpf_map_bytes;
	uint64_t samples_waiting; /* held until their stacks' files are analysed */
	uint64_t processes;       /* latest, summed over connected sensors */
	/* Go probes: latest, summed over connected sensors */
	uint64_t go_files, go_links, go_attach_failures, go_records, go_records_lost;
	/* refused by the sensors' checks (sensor/validate.h) */
	uint64_t plans_refused, configs_refused;
};

/* How user stacks ended, by samples: index = sonde.v1.StackOutcome
 * (0 unspecified = no user stack). */
#define SERVICE_N_OUTCOMES 5
#define SERVICE_MAX_OUTCOME_PIDS 65536u /* pids counted one by one */
#define SERVICE_STATUS_PROCESSES 50u

struct outcome_counts {
	uint64_t n[SERVICE_N_OUTCOMES];
	uint64_t total;
};

struct service {
	struct rpc_server *server;
	struct cache *cache;
	struct profile_store *profile;
	unsigned retention_minutes;
	const char *const *debug_dirs; /* borrowed, NULL-terminated */
	int64_t start_ms;              /* monotonic */

	struct session *sessions; /* list */
	uint64_t next_session_id;
	uint64_t sensors_connected;
	struct sensor_counters past; /* of sessions that ended */
	uint64_t stacks_received, samples_received;
	uint64_t samples_not_stored; /* no memory for them (never in the store) */

	struct hmap *jobs;     /* fileid -> struct job */
	struct hmap *requests; /* request id (u64) -> struct range_req */
	uint64_t next_request_id;
	struct job *queue_head, *queue_tail; /* jobs waiting for a slot */
	size_t n_active, n_queued;
	struct hmap *retry;    /* fileid -> int64_t *: no new job before then */

	struct hmap *paths;    /* path -> struct fileid */
	struct hmap *names;    /* fileid -> char *path (first path seen) */
	struct hmap *file_acl; /* fileid -> owner, mode, mapping uids (access.c) */

	struct outcome_counts outcomes;
	struct hmap *proc_outcomes; /* proc_outcome_key() -> struct proc_outcome */

	struct sym_wait *waits; /* deferred Symbolize calls */
	struct hmap *uploads;   /* fileid -> struct upload (in progress) */
	uint64_t upload_bytes;  /* held by uploads in progress */
	double upload_tokens;   /* byte budget (token bucket, see upload.c) */
	int64_t upload_refill_ms;
	int64_t last_flush_ms, last_expire_ms;
	struct otlp_exporter *otlp; /* NULL: no --otlp-endpoint */
	struct span_store *spans;   /* spans.c */
};

/* ---- service.c ---- */
int64_t service_now_ms(void);
/* Remembers path <-> id for Symbolize by path and for frame names. */
void service_note_path(struct service *svc, const struct fileid *id, const char *path);
/* Remembers a display name for id (an upload's file name). */
void service_note_name(struct service *svc, const struct fileid *id, const char *name);
/* Basename of a path some session mapped id from, or NULL. Borrowed. */
const char *service_file_name(struct service *svc, const struct fileid *id);
/* How a user frame of id at file offset `offset` is shown: symbol (the
 * file's symbol table's name) demangled, or as is, or basename+0xOFFSET
 * when there is none. Folded stacks and exports both name frames so.
 * Returns buf. */
const char *service_frame_name(struct service *svc, const struct fileid *id, const char *symbol,
			       uint64_t offset, char *buf, size_t len);
/* The whole path of the same, or NULL. Borrowed. */
const char *service_file_path(struct service *svc, const struct fileid *id);
/* Called when a job for id ended either way: wakes pending stacks and
 * deferred Symbolize calls. */
void service_file_done(struct service *svc, const struct fileid *id);

enum file_state {
	FILE_READY,   /* *ret_symtab (borrowed, see cache_lookup) */
	FILE_FAILED,  /* *ret_error (borrowed, static or cache-owned) */
	FILE_PENDING, /* an analysis job is running or queued */
	FILE_UNKNOWN, /* no session has it and it was never analysed */
};
/* Where a file stands; starts an analysis if a session has the file and
 * start is true. */
enum file_state service_file_state(struct service *svc, const struct fileid *id, bool start,
				   const struct symtab **ret_symtab, const char **ret_error);

struct export_sample;
/* Hands samples just stored to the exporters (OTLP), if any are
 * configured. s and what it points to are borrowed for the call. */
void service_export(struct service *svc, const struct export_sample *s);
struct trace_span;
/* Hands a finished span (Go probes) to the OTLP traces export, if one is
 * configured. Borrowed for the call. */
void service_export_span(struct service *svc, const struct trace_span *span);

/* After a handler that may have left work for the timer (pending stacks,
 * queued tables, jobs): the tick comes within its busy interval. */
void service_poke(struct service *svc);

/* ---- access.c ---- */
/* What a Symbols caller may see (docs/security.md, roles). */
#define ACCESS_NO_UID UINT32_MAX          /* owns no process */
#define ACCESS_TLS_OWNER (UINT32_MAX - 1) /* uploads of certificate readers */
struct access_scope {
	bool all;          /* an admin: every user's data */
	bool has_uid;      /* a Unix peer: uid, gid and groups are its own */
	uint32_t uid, gid; /* uid ACCESS_NO_UID without has_uid */
	uint32_t groups[RPC_PEER_MAX_GROUPS];
	size_t n_groups;
	uint32_t owner;    /* whose uploads are its own: uid or ACCESS_TLS_OWNER */
};
/* The scope of call's peer (borrowed for the call). */
void access_scope_of(const struct rpc_call *call, struct access_scope *ret);
/* Whether sc sees the data (samples, spans, process lists) of a process
 * owned by uid. */
bool access_sees_uid(const struct access_scope *sc, uint32_t uid);
/* Limits q to what sc sees. */
void access_profile_query(const struct access_scope *sc, struct profile_query *q);
/* Whether sc may have the analysis of file id (symbols, lines): an admin;
 * its uploader; or the file's mode lets sc read it and it is world-
 * readable or mapped by a process of sc's uid. */
bool access_may_read_file(struct service *svc, const struct access_scope *sc,
			  const struct fileid *id);
/* A sensor on this host (a Unix peer) reported a process of proc_uid
 * mapping id, whose owner and mode bits are file_uid, file_gid, mode. Of
 * several reports of one file the most restrictive wins: the mode bits
 * intersect, and an owner or group that differs clears them all. */
void access_note_mapping(struct service *svc, const struct fileid *id, uint32_t mode,
			 uint32_t file_uid, uint32_t file_gid, uint32_t proc_uid);
/* sc uploaded id (its bytes matched the ID). */
void access_note_upload(struct service *svc, const struct fileid *id,
			const struct access_scope *sc);

/* ---- ingest.c ---- */
void ingest_on_open(struct rpc_call *call, void *ctx);
void ingest_on_message(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx);
void ingest_on_close(struct rpc_call *call, void *ctx);
struct session *session_next(const struct session *s);
/* Size of id as registered by s; 0 if s does not have it. */
uint64_t session_file_size(const struct session *s, const struct fileid *id);
/* A session (not finishing) that registered id, other than except; NULL. */
struct session *service_session_with_file(struct service *svc, const struct fileid *id,
					  const struct session *except);
/* Sends a ReadRange through s. Returns 0 or a negative errno. */
int session_send_read_range(struct session *s, uint64_t request_id, const struct fileid *id,
			    uint64_t offset, uint32_t length);
/* Re-examines s's pending stacks (after a file was done, or on the timer). */
void session_retry_pending(struct session *s, bool force_expired);
/* Ends a draining session once nothing is left for it to wait for. */
void session_try_finish(struct session *s);
void ingest_tick(struct service *svc);
/* Whether a session waits for the timer: stacks pending, tables queued,
 * a stream draining. */
bool ingest_busy(struct service *svc);
void ingest_sum_counters(struct service *svc, struct sensor_counters *ret);
/* The sampling rate of the connected sensors; 0 if none is connected or
 * they differ. */
uint32_t ingest_frequency_hz(struct service *svc);
/* Unwind tables: a job for id ended (either way); sessions waiting for
 * its table get it now (or an error UnwindTable). */
void ingest_unwind_done(struct service *svc, const struct fileid *id);

struct proc_outcome {
	uint64_t key; /* proc_outcome_key(): the session's and the pid */
	uint32_t pid;
	uint32_t uid; /* the process's owner (access.c decides who sees it) */
	char comm[17];
	struct outcome_counts c;
	int64_t exited_ms; /* 0: running; else forgotten PROC_OUTCOME_KEEP_MS later */
};
/* The proc_outcomes key of pid as one sensor session sees it: a pid
 * names a process of one host only. */
static inline uint64_t proc_outcome_key(uint64_t session_id, uint32_t pid)
{
	return session_id << 32 | pid;
}
/* How long `sonde status` still shows an exited process's outcomes. Without
 * it the table filled with every short-lived pid, up to the bound. */
#define PROC_OUTCOME_KEEP_MS 120000

/* ---- analysis.c ---- */
/* Starts (or queues) an analysis of id, or does nothing if one runs.
 * Returns 0, -ENOENT if no session has the file, -E2BIG if the queue is
 * full. */
int analysis_start(struct service *svc, const struct fileid *id);
bool analysis_running(struct service *svc, const struct fileid *id);
/* A FileRange from s. Returns 0, or -EBADMSG for a protocol violation
 * (the caller ends the stream; *reason says why). */
int analysis_on_file_range(struct service *svc, struct session *s, uint64_t request_id,
			   const uint8_t *file_id, size_t file_id_len, uint64_t offset,
			   const uint8_t *data, size_t len, const char *error, const char **reason);
/* Analyses a whole local image (an upload; taken) of id in one go and
 * caches every product, like a job would; the source index is queued on
 * the worker, held UPLOAD_INDEX_HOLD_MS for the uploader's first query.
 * Returns 0 with *ret_error NULL (analysed) or set (a property of the
 * file, cached), or -ENOMEM. */
#define UPLOAD_INDEX_HOLD_MS 250
int analysis_whole(struct service *svc, const struct fileid *id, struct file_image *img,
		   const char *name, const char **ret_error);
/* s is going away: its jobs move to another session or fail. */
void analysis_session_gone(struct service *svc, struct session *s);
/* Whether a job currently fetches through s. */
bool analysis_uses_session(struct service *svc, const struct session *s);
void analysis_tick(struct service *svc);
/* Wakes the waiters of jobs that ended and starts queued jobs; call at
 * the end of a handler that may have started or ended a job. */
void analysis_flush_done(struct service *svc);
void analysis_free_all(struct service *svc);

/* ---- symbols.c ---- */
void symbols_symbolize(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
void symbols_status(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
void symbols_top(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
void symbols_folded(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
/* ---- probe_plan.c ---- */
struct go_plan;
/* p as a packed sonde.v1.ProbePlan for file id: 0 with *ret (malloc'd)
 * and *ret_len, or -ENOMEM. */
int probe_plan_pack(const struct fileid *id, const struct go_plan *p, uint8_t **ret, size_t *ret_len);

/* ---- spans.c ---- */
struct span_store *span_store_new(void);
void span_store_free(struct span_store *st);
/* Decodes a sensor's ProbeEvents records (rejecting and counting bad
 * ones), keeps the spans for the Spans method and exports them.
 * service_of names the service of a pid (OTEL_SERVICE_NAME, else the
 * executable's name; NULL: unknown) and gives its owner in *ret_uid (0
 * when unknown: admins only). */
void spans_add_records(struct service *svc, const char *host, int64_t mono_to_unix_ns,
		       const ProtobufCBinaryData *recs, size_t n, uint64_t lost,
		       const char *(*service_of)(void *ctx, uint32_t pid, uint32_t *ret_uid),
		       void *ctx);
void spans_call(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);

/* ---- pprof_call.c ---- */
void pprof_call(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
/* ---- index_worker.c ---- */
/* index_worker_submit flags. */
#define INDEX_TASK_SPARSE 1u /* symbols only (LINE_INDEX_SYMBOLS_ONLY) */
/* Also the unwind table, after the index, stored when collected: an
 * upload's client waits for its answers, not for a table that only a
 * sensor mapping the file would load. */
#define INDEX_TASK_UNWIND 2u
/* Queues the source index of id for the worker thread; takes img, dimg
 * (the debug file) and aimg (its DWZ alternate file; both may be NULL) in
 * any case. hold_until_ms (service_now_ms() time, 0: none): keep the task
 * off the queue until then or until a first answer is asked of it.
 * Returns 0 or a negative errno. */
int index_worker_submit(const struct fileid *id, struct file_image *img, struct file_image *dimg,
			struct file_image *aimg, unsigned flags, const char *name,
			int64_t hold_until_ms);
/* Loop thread: when id's index is held or queued (not yet being built),
 * builds an index of only the units that hold addrs (vaddrs) into *ret
 * (owned) and queues the task first. -ENOENT: no such task (building,
 * or none); -E2BIG: the addresses need too much of the DWARF; -ENOMEM,
 * -EBADMSG as line_index_build. *ret_units: the units read. */
int index_worker_first_answer(const struct fileid *id, const uint64_t *addrs, size_t n,
			      struct line_index **ret, size_t *ret_units);
/* A query waits for id's whole index: its task (held or queued) goes to
 * the queue's head. */
void index_worker_hurry(const struct fileid *id);
/* Queues the held tasks whose time is up at now_ms. */
void index_worker_release_held(int64_t now_ms);
/* Whether the index of id is queued, being built or not collected yet. */
bool index_worker_pending(const struct fileid *id);
/* Whether a task is queued, running or waits to be collected. */
bool index_worker_busy(void);
/* Loop thread: stores finished indexes (and unwind tables) in the
 * cache, wakes waiters. */
void index_worker_collect(struct service *svc);
/* Joins the worker (after the task it is on), stores what it finished
 * and drops what is left. */
void index_worker_stop(struct service *svc);
/* ---- upload.c ---- */
void upload_call(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
/* Drops uploads idle for UPLOAD_IDLE_MS (from the timer), or all. */
void upload_expire(struct service *svc, bool all);
/* Answers deferred Symbolize calls whose files are done (or all, if
 * force). */
void symbols_wake(struct service *svc, bool force);

/* ---- public: main.c ---- */
struct otlp_exporter_opts;
struct service_opts {
	const char *const *debug_dirs;
	unsigned retention_minutes;
	const struct otlp_exporter_opts *otlp; /* borrowed; NULL: no OTLP export */
};
/* opts->debug_dirs is borrowed. Returns NULL on failure. */
struct service *service_new(const struct service_opts *opts);
/* The rpc method table (static). */
const struct rpc_method *service_methods(size_t *ret_n);
/* Gives the service its cache and the database of its profile store
 * (both borrowed, must outlive it; they may be the same), creates the
 * profile store and installs the timer; before rpc_server_start. Returns
 * 0 or a negative errno. */
int service_attach(struct service *svc, struct rpc_server *server, struct cache *cache,
		   struct cache *profile_db);
/* After rpc_server_stop: flushes and frees. Accepts NULL. */
void service_free(struct service *svc);
