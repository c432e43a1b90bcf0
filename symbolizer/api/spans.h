/* spans.h - the spans of the Go probes (spans.c): records sensors forward
 * (ProbeEvents), decoded and kept in a bounded ring for the Spans method,
 * and handed to the OTLP traces export.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "rpc_server.h"

struct spans;

/* core is borrowed for the result's life. NULL on out of memory. */
struct spans *spans_new(const struct api_core *core);
/* Accepts NULL. */
void spans_free(struct spans *st);
/* Decodes a sensor's ProbeEvents records (rejecting and counting bad
 * ones), keeps the spans for the Spans method and exports them. recs
 * and host are borrowed for the call. service_of names the service of a
 * pid (OTEL_SERVICE_NAME, else the executable's name; NULL: unknown) and
 * gives its owner in *ret_uid (0 when unknown: admins only). */
void spans_add_records(struct spans *st, const char *host, int64_t mono_to_unix_ns,
		       const ProtobufCBinaryData *recs, size_t n, uint64_t lost,
		       const char *(*service_of)(void *ctx, uint32_t pid, uint32_t *ret_uid),
		       void *ctx);
/* rpc_method.on_call of Symbols/Spans; ctx is the struct spans. */
void spans_call(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
