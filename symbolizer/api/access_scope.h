/* access_scope.h - a Symbols call's scope (core/access.h) from its rpc
 * peer: admin or not, and a Unix peer's credentials. Shared by the
 * handlers; no handler of its own. */
#pragma once

#include "access.h"
#include "rpc_server.h"

/* The scope of call's peer (call borrowed for the call) into *ret. */
void access_scope_of(const struct rpc_call *call, struct access_scope *ret);
