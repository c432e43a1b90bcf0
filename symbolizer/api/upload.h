/* upload.h - the Symbols.Upload handler (upload.c): files a client sends
 * in chunks or hands over as a sealed memfd (fd_upload.h), checked
 * against their file ID and analysed like a file a sensor maps.
 */
#pragma once

#include <stdbool.h>

#include "api.h"
#include "rpc_server.h"

struct upload;

/* core is borrowed for the result's life. NULL on out of memory. */
struct upload *upload_new(const struct api_core *core);
/* Drops the uploads in progress. Accepts NULL. */
void upload_free(struct upload *up);
/* rpc_method.on_call of Symbols/Upload; ctx is the struct upload. */
void upload_call(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
/* Drops uploads idle for UPLOAD_IDLE_MS (from the timer), or all. */
void upload_expire(struct upload *up, bool all);
/* Whether an upload is in progress (the timer must expire it). */
bool upload_busy(const struct upload *up);
