/* service.h - state shared by the symbolizer's rpc handlers (private to
 * symbolizer/api/): sensor sessions (ingest.c), file analysis jobs
 * (analysis.c) and the public Symbols service (symbols.c).
 *
 * Everything here runs on the rpc loop thread (see rpc.h), so nothing is
 * locked. Pointers between the pieces (job -> session, request -> job)
 * are cleared by whoever frees the target.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc.h"
#include "fileid.h"
#include "symtab.h"
#include "cache.h"
#include "profile.h"
#include "hmap.h"
#include "file_image.h"
#include "analysis.h"
#include "clock.h"
#include "index_worker.h"
#include "registry.h"
#include "symbolize.h"

#define SERVICE_MAX_MESSAGE (16u << 20)
#define SERVICE_PENDING_TIMEOUT_MS 10000
#define SERVICE_SYMBOLIZE_TIMEOUT_MS 10000
#define SERVICE_DRAIN_TIMEOUT_MS 30000

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

	struct registry *reg;      /* paths, byte sources, file done */
	struct analysis *analysis; /* file analysis jobs */
	struct symbolize_ctx sym;  /* reg, analysis and cache, for exports */
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
void ingest_tick(struct service *svc);
/* Whether a session waits for the timer: stacks pending, tables queued,
 * a stream draining. */
bool ingest_busy(struct service *svc);
void ingest_sum_counters(struct service *svc, struct sensor_counters *ret);
/* The sampling rate of the connected sensors; 0 if none is connected or
 * they differ. */
uint32_t ingest_frequency_hz(struct service *svc);
/* A registry subscriber: the analysis of id is done (either way):
 * sessions waiting for its unwind table get it now (or an error
 * UnwindTable), and their pending stacks are looked at again. */
void ingest_file_done(void *svc, const struct fileid *id);

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
/* ---- upload.c ---- */
void upload_call(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
/* Drops uploads idle for UPLOAD_IDLE_MS (from the timer), or all. */
void upload_expire(struct service *svc, bool all);
/* Answers deferred Symbolize calls whose files are done (or all, if
 * force). */
void symbols_wake(struct service *svc, bool force);
/* A registry subscriber: symbols_wake(svc, false). */
void symbols_file_done(void *svc, const struct fileid *id);

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
