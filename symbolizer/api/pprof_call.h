/* pprof_call.h - the Symbols/Pprof handler (pprof_call.c): the stored
 * samples of a window, symbolized again from their raw stacks, as a
 * gzipped pprof Profile.
 */
#pragma once

#include "api.h"
#include "rpc_server.h"

/* rpc_method.on_call of Symbols/Pprof; ctx is the const struct api_core. */
void pprof_call(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
