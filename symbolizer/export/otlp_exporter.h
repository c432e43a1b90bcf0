/* otlp_exporter.h - the symbolizer's OTLP profiles exporter: collects the
 * samples ingest.c stores, and every interval symbolizes them into one
 * model, encodes it (otlp.h) and queues the request for a sender thread
 * that delivers it (gzip, deadline, retry with backoff, bounded backlog).
 *
 * Threads: new/add/tick/free run on the rpc loop thread (free: after the
 * loop stopped); only the backlog is shared with the sender thread, under
 * a mutex. The sender exists because rpc_client.h's calls block and a
 * loop handler must not. docs/exports.md describes the semantics.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "otlp_traces.h"
#include "rpc_client.h"

struct symbolize_ctx;
struct otlp_exporter;

/* How profiles are laid out (docs/exports.md, "Layouts"). */
enum otlp_layout {
	OTLP_LAYOUT_CURRENT = 0, /* opentelemetry-proto v1.10/v1.11: otlp.h */
	OTLP_LAYOUT_V1_5_0,      /* v1.5.0's, tables in each Profile: otlp_v150.h */
};

/* "1.10" (also "1.11", "1.10.0", "1.11.0") or "1.5.0" (also "1.5"):
 * 0 and the layout in *ret, or -EINVAL. */
int otlp_layout_parse(const char *s, enum otlp_layout *ret);
/* "1.10/1.11" or "1.5.0". */
const char *otlp_layout_name(enum otlp_layout layout);

struct otlp_exporter_opts {
	/* "tcp:HOST:PORT" with HOST an IP literal (main.c resolves names
	 * before the sandbox), borrowed. */
	const char *target;
	const struct rpc_tls *tls; /* NULL: plaintext; files read in _new */
	unsigned interval_ms;      /* 0: 10 s */
	size_t max_held_bytes;     /* samples waiting for the next window; 0: 64 MiB */
	size_t max_backlog_bytes;  /* encoded requests not yet delivered; 0: 64 MiB */
	size_t max_backlog_requests; /* 0: 64 */
	size_t max_request_bytes;  /* a bigger window is split; 0: 4 MiB */
	unsigned send_timeout_ms;  /* deadline of one Export call; 0: 10 s */
	enum otlp_layout layout;   /* of the profile requests */
};

struct otlp_counters {
	uint64_t requests;        /* delivered */
	uint64_t samples;         /* delivered (sum of counts) */
	uint64_t failures;        /* failed attempts (each retry counts) */
	uint64_t dropped_samples; /* never delivered: over a bound, or not symbolizable */
	uint64_t dropped_requests;/* pushed out of the backlog */
	uint64_t backlog_requests, backlog_bytes; /* now */
	uint64_t spans;           /* delivered (TraceService/Export) */
	uint64_t dropped_spans;   /* never delivered */
};

/* sc is borrowed (for symbolization at tick time; its members may be set
 * later, before the first tick). Starts the sender thread. Returns NULL on
 * failure (logged). */
struct otlp_exporter *otlp_exporter_new(const struct symbolize_ctx *sc,
					const struct otlp_exporter_opts *opts);
/* Copies what it needs from s. Over max_held_bytes the sample is
 * dropped and counted. Accepts x == NULL (no exporter: nothing). */
void otlp_exporter_add(struct otlp_exporter *x, const struct export_sample *s);
/* Copies span; it goes out in the window's TraceService/Export request(s).
 * Over max_held_bytes it is dropped and counted. Accepts x == NULL. */
void otlp_exporter_add_span(struct otlp_exporter *x, const struct trace_span *span);
/* From the service timer: once the interval is over, builds and queues
 * the window's request(s). now_ms is monotonic. */
void otlp_exporter_tick(struct otlp_exporter *x, int64_t now_ms);
/* Milliseconds from now_ms until the current window is over (0 if it is);
 * INT64_MAX for x == NULL. */
int64_t otlp_exporter_due_ms(const struct otlp_exporter *x, int64_t now_ms);
/* Counters, consistent with each other. */
void otlp_exporter_counters(struct otlp_exporter *x, struct otlp_counters *ret);
/* Queues what is held, gives the sender up to drain_ms to deliver the
 * backlog, stops it and frees everything (the rest is counted dropped and
 * logged). Accepts NULL. */
void otlp_exporter_free(struct otlp_exporter *x, int drain_ms);
