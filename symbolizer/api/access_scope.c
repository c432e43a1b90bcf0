/* access_scope.c - see access_scope.h. */
#include <assert.h>

#include "access_scope.h"

static_assert(RPC_PEER_MAX_GROUPS == ACCESS_MAX_GROUPS, "a scope keeps every group of a peer");

void access_scope_of(const struct rpc_call *call, struct access_scope *ret)
{
	struct rpc_peer peer;
	bool admin = rpc_call_peer_is_admin(call);

	rpc_call_peer_creds(call, &peer);
	if (peer.transport == RPC_TRANSPORT_UNIX && peer.uid != UINT32_MAX)
		access_scope_unix(ret, admin, peer.uid, peer.gid, peer.groups, peer.n_groups);
	else
		access_scope_remote(ret, admin);
}
