/* ingest.h - the /sonde.v1.Ingest/Connect stream (ingest.c): one session
 * per sensor, each a byte source of the files its processes map
 * (core/registry.h). Stacks become folded text and raw stacks in the
 * profile store once their files are analysed; unwind tables, probe
 * plans and interpreter configs go back to the sensor.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "rpc_server.h"

struct ingest;

/* What ingest hands on to other handlers, wired by service.c. */
struct ingest_hooks {
	/* A sensor's Go probe records (ProbeEvents; borrowed for the
	 * call), with service_of(sctx, pid, &uid) naming a pid's service
	 * and owner. May be NULL: the records are dropped. */
	void (*probe_events)(void *ctx, const char *host, int64_t mono_to_unix_ns,
			     const ProtobufCBinaryData *recs, size_t n, uint64_t lost,
			     const char *(*service_of)(void *sctx, uint32_t pid, uint32_t *ret_uid),
			     void *sctx);
	void *ctx; /* borrowed */
};

/* core is borrowed for the result's life; hooks is copied (may be NULL).
 * NULL on out of memory. */
struct ingest *ingest_new(const struct api_core *core, const struct ingest_hooks *hooks);
/* Once core's members are set: installs the connected sessions' part
 * of core->stats (sensor_stats_live). */
void ingest_attach(struct ingest *in);
/* After rpc_server_stop (which closed every session). Accepts NULL. */
void ingest_free(struct ingest *in);
/* rpc_method.on_open, on_message and on_close of Ingest/Connect; ctx is
 * the struct ingest. */
void ingest_on_open(struct rpc_call *call, void *ctx);
void ingest_on_message(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx);
void ingest_on_close(struct rpc_call *call, void *ctx);
/* The timer: unwind tables and configs waiting for room, pending stacks
 * past their time, draining streams. */
void ingest_tick(struct ingest *in);
/* Whether a session waits for the timer: stacks pending, tables queued,
 * a stream draining. */
bool ingest_busy(const struct ingest *in);
/* A registry subscriber (ctx: the struct ingest): the analysis of id is
 * done (either way): sessions waiting for its unwind table get it now
 * (or an error UnwindTable), and their pending stacks are looked at
 * again. */
void ingest_file_done(void *ctx, const struct fileid *id);
