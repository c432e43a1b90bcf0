/* symbols.h - the public Symbols service's Symbolize, Status, Top and
 * Folded handlers (symbols.c). Symbolize calls whose files are being
 * analysed wait here until they are done (symbols_file_done).
 */
#pragma once

#include <stdbool.h>

#include "api.h"
#include "rpc_server.h"

struct symbols;

/* core is borrowed for the result's life. NULL on out of memory. */
struct symbols *symbols_new(const struct api_core *core);
/* Answers every deferred call with what is known, then frees. Accepts
 * NULL. */
void symbols_free(struct symbols *sy);
/* rpc_method.on_call of Symbols/Symbolize, Status, Top and Folded; ctx
 * is the struct symbols. */
void symbols_symbolize(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
void symbols_status(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
void symbols_top(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
void symbols_folded(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
/* Answers deferred Symbolize calls whose files are done (or all, if
 * force). */
void symbols_wake(struct symbols *sy, bool force);
/* A registry subscriber (ctx: the struct symbols): symbols_wake(ctx,
 * false). */
void symbols_file_done(void *ctx, const struct fileid *id);
/* Whether a Symbolize call is deferred. */
bool symbols_waiting(const struct symbols *sy);
