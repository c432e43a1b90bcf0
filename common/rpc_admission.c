/* rpc_admission.c - how the rpc server decides who may call what (see
 * rpc_admission.h). This is the file a security review reads: with the
 * caller's authorize() (the symbolizer's is authorize_peer() in
 * symbolizer/main.c) it holds every decision, and it reads on its own.
 *
 * Who can connect at all:
 *   - Unix sockets: the socket file is created with mode 0660 (the umask
 *     at bind() in rpc_server.c's unix_listen(), so no chmod follows a
 *     symlink). rpc_server.c accepts each connection itself and, before
 *     gRPC reads a byte, rpc_admission_add_unix() records the peer's
 *     credentials as the kernel took them at connect() (SO_PEERCRED,
 *     SO_PEERGROUPS: the peer cannot change them later).
 *   - TCP with TLS: the handshake requires a client certificate that the
 *     configured CA signed (rpc_server_listen()); a peer without one never
 *     makes a call. The certificate's CN and SAN entries are its names.
 *   - Plaintext TCP, when the operator allowed it: no identity at all.
 *
 * Each call: rpc_admission_check_call() finds the call's connection (a
 * Unix one by the "fd:N" name gRPC gives it), builds a struct rpc_peer,
 * and asks authorize() for RPC_ROLE_SENSOR and RPC_ROLE_ADMIN (kept for
 * the handlers) and for the method's role unless it is RPC_ROLE_ANY.
 * Fail closed: a Unix connection whose record is gone (more than
 * CONN_TABLE_SIZE live connections) has uid UINT32_MAX, and such a peer
 * is granted nothing without asking authorize(). No authorize() grants
 * nothing either.
 *
 * Rates: unary calls per connection and messages per stream, each a
 * token bucket (rate per second, burst); over it, RESOURCE_EXHAUSTED.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "log.h"
#include "rpc_admission.h"

/* Connections tracked (Unix peers' credentials, per-connection rate
 * buckets). More live connections than this: the oldest entry is reused,
 * and a Unix peer whose entry is gone is denied (fail closed). */
#define CONN_TABLE_SIZE 4096

/* One connection: found by the peer string gRPC gives its calls. */
struct conn_entry {
	char key[64];
	bool used;
	bool is_unix;
	uint32_t uid, gid;
	int32_t pid;
	uint32_t groups[RPC_PEER_MAX_GROUPS];
	size_t n_groups;
	struct rpc_admission_bucket unary;
	uint64_t last_used;
};

struct rpc_admission {
	struct rpc_admission_policy policy;
	/* lock guards conns and clock (the accept thread writes Unix entries). */
	pthread_mutex_t lock;
	struct conn_entry *conns; /* CONN_TABLE_SIZE */
	uint64_t clock;
};

struct rpc_admission *rpc_admission_new(const struct rpc_admission_policy *policy)
{
	struct rpc_admission *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->policy = *policy;
	a->conns = calloc(CONN_TABLE_SIZE, sizeof(*a->conns));
	if (!a->conns || pthread_mutex_init(&a->lock, NULL) != 0) {
		free(a->conns);
		free(a);
		return NULL;
	}
	return a;
}

void rpc_admission_free(struct rpc_admission *a)
{
	if (!a)
		return;
	pthread_mutex_destroy(&a->lock);
	free(a->conns);
	free(a);
}

/* ---- rate buckets ---- */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Takes a token from b, which holds rate tokens per second, at most
 * burst: whether there was one. rate 0: always. */
static bool bucket_take(struct rpc_admission_bucket *b, uint32_t rate, uint32_t burst)
{
	uint64_t now = mono_ns();

	if (rate == 0)
		return true;
	if (burst == 0)
		burst = rate;
	if (!b->primed) {
		b->tokens = burst;
		b->primed = true;
	} else {
		b->tokens += (double)(now - b->last_ns) * rate / 1e9;
		if (b->tokens > burst)
			b->tokens = burst;
	}
	b->last_ns = now;
	if (b->tokens < 1.0)
		return false;
	b->tokens -= 1.0;
	return true;
}

enum rpc_status rpc_admission_check_message(struct rpc_admission *a,
					    struct rpc_admission_bucket *b,
					    const char **ret_reason)
{
	if (bucket_take(b, a->policy.stream_msgs_per_s, a->policy.stream_burst))
		return RPC_OK;
	*ret_reason = "rate limit: too many messages";
	return RPC_RESOURCE_EXHAUSTED;
}

/* ---- the connection table ---- */

/* The peer string gRPC gives calls on a channel made from an fd
 * (grpc_server_add_channel_from_fd names the endpoint after the fd). */
static void conn_key_for_fd(int fd, char *buf, size_t size)
{
	snprintf(buf, size, "fd:%d", fd);
}

/* Under lock. Returns the entry for key, or NULL. */
static struct conn_entry *conn_find(struct rpc_admission *a, const char *key)
{
	for (size_t i = 0; i < CONN_TABLE_SIZE; i++)
		if (a->conns[i].used && strcmp(a->conns[i].key, key) == 0)
			return &a->conns[i];
	return NULL;
}

/* Under lock. A free entry, or the least recently used one. */
static struct conn_entry *conn_slot(struct rpc_admission *a)
{
	struct conn_entry *lru = &a->conns[0];

	for (size_t i = 0; i < CONN_TABLE_SIZE; i++) {
		if (!a->conns[i].used)
			return &a->conns[i];
		if (a->conns[i].last_used < lru->last_used)
			lru = &a->conns[i];
	}
	return lru;
}

int rpc_admission_add_unix(struct rpc_admission *a, int fd)
{
	struct rpc_peer peer;
	struct conn_entry *e;
	char key[64];
	int err;

	err = rpc_unix_peer(fd, &peer);
	if (err < 0)
		return err;
	conn_key_for_fd(fd, key, sizeof(key));
	pthread_mutex_lock(&a->lock);
	e = conn_find(a, key); /* an old connection that had this fd number */
	if (!e)
		e = conn_slot(a);
	memset(e, 0, sizeof(*e));
	snprintf(e->key, sizeof(e->key), "%s", key);
	e->used = true;
	e->is_unix = true;
	e->uid = peer.uid;
	e->gid = peer.gid;
	e->pid = peer.pid;
	e->n_groups = peer.n_groups;
	for (size_t i = 0; i < e->n_groups; i++)
		e->groups[i] = peer.groups[i];
	e->last_used = ++a->clock;
	pthread_mutex_unlock(&a->lock);
	log_debug("unix peer uid %u gid %u pid %d on %s", (unsigned)peer.uid, (unsigned)peer.gid,
		  (int)peer.pid, key);
	return 0;
}

/* ---- one call ---- */

/* Fills peer's certificate names from the call's auth context. Returns
 * whether the connection is TLS with a verified peer. names point into
 * *ret_ctx, which the caller releases. */
static bool peer_from_tls(grpc_call *call, struct rpc_peer *peer, grpc_auth_context **ret_ctx)
{
	static const char *const props[] = { GRPC_X509_CN_PROPERTY_NAME,
					     GRPC_X509_SAN_PROPERTY_NAME };
	grpc_auth_context *ctx = grpc_call_auth_context(call);
	grpc_auth_property_iterator it;
	const grpc_auth_property *p;
	bool tls = false;

	*ret_ctx = ctx;
	if (!ctx)
		return false;
	it = grpc_auth_context_find_properties_by_name(ctx, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
	while ((p = grpc_auth_property_iterator_next(&it)))
		if (p->value_length == strlen(GRPC_SSL_TRANSPORT_SECURITY_TYPE) &&
		    memcmp(p->value, GRPC_SSL_TRANSPORT_SECURITY_TYPE, p->value_length) == 0)
			tls = true;
	/* Required and verified by the handshake: a TLS call without a peer
	 * identity cannot happen; treat it as no identity. */
	if (!tls || !grpc_auth_context_peer_is_authenticated(ctx))
		return tls;
	for (size_t k = 0; k < sizeof(props) / sizeof(props[0]); k++) {
		it = grpc_auth_context_find_properties_by_name(ctx, props[k]);
		while ((p = grpc_auth_property_iterator_next(&it)) && peer->n_names < RPC_PEER_MAX_NAMES)
			if (p->value && memchr(p->value, '\0', p->value_length + 1))
				peer->names[peer->n_names++] = p->value;
	}
	return true;
}

/* Finds (or, for a TCP connection's first call, adds) the connection
 * named key, copies a Unix peer's credentials into *peer, and takes a
 * token from its unary bucket when unary. Sets *ret_known when the
 * credentials were on record; returns whether the rate allows the call. */
static bool conn_lookup(struct rpc_admission *a, const char *key, bool unary,
			struct rpc_peer *peer, bool *ret_known)
{
	struct conn_entry *e;
	bool rate_ok = true;

	pthread_mutex_lock(&a->lock);
	e = key ? conn_find(a, key) : NULL;
	if (e && e->is_unix) {
		peer->transport = RPC_TRANSPORT_UNIX;
		peer->uid = e->uid;
		peer->gid = e->gid;
		peer->pid = e->pid;
		peer->n_groups = e->n_groups;
		memcpy(peer->groups, e->groups, e->n_groups * sizeof(e->groups[0]));
		*ret_known = true;
	} else if (!e && key && strncmp(key, "fd:", 3) != 0) {
		/* TCP: the first call of a connection adds it. */
		e = conn_slot(a);
		memset(e, 0, sizeof(*e));
		snprintf(e->key, sizeof(e->key), "%s", key);
		e->used = true;
	}
	if (e) {
		e->last_used = ++a->clock;
		if (unary)
			rate_ok = bucket_take(&e->unary, a->policy.unary_calls_per_s,
					      a->policy.unary_burst);
	}
	pthread_mutex_unlock(&a->lock);
	return rate_ok;
}

/* Whether authorize() grants peer this role; a peer without credentials
 * (uid UINT32_MAX) gets nothing. */
static bool peer_may(const struct rpc_admission *a, const struct rpc_peer *peer, enum rpc_role role)
{
	return a->policy.authorize && peer->uid != UINT32_MAX &&
	       a->policy.authorize(peer, role, a->policy.ctx);
}

enum rpc_status rpc_admission_check_call(struct rpc_admission *a, struct grpc_call *call,
					 const char *peer_key, const char *method, enum rpc_role role,
					 bool unary, struct rpc_admission_grant *ret,
					 const char **ret_reason)
{
	grpc_auth_context *actx = NULL;
	struct rpc_peer peer;
	enum rpc_status st = RPC_OK;
	bool known = false, rate_ok;

	memset(&peer, 0, sizeof(peer));
	rate_ok = conn_lookup(a, peer_key, unary, &peer, &known);
	if (!known) {
		if (peer_key && strncmp(peer_key, "fd:", 3) == 0) {
			/* A Unix connection whose entry is gone: nobody to trust. */
			peer.transport = RPC_TRANSPORT_UNIX;
			peer.uid = peer.gid = UINT32_MAX;
			peer.pid = -1;
		} else {
			peer.transport = peer_from_tls(call, &peer, &actx) ? RPC_TRANSPORT_TLS
									   : RPC_TRANSPORT_INSECURE;
		}
	}
	ret->unix_known = known;
	ret->is_sensor = peer_may(a, &peer, RPC_ROLE_SENSOR);
	ret->is_admin = peer_may(a, &peer, RPC_ROLE_ADMIN);
	if (role != RPC_ROLE_ANY &&
	    !(role == RPC_ROLE_SENSOR ? ret->is_sensor : peer_may(a, &peer, role))) {
		log_debug("%s: peer %.100s may not call %s", method, peer_key ? peer_key : "?",
			  method);
		st = RPC_PERMISSION_DENIED;
		*ret_reason = "this peer may not call this method";
	}
	if (st == RPC_OK && !rate_ok) {
		st = RPC_RESOURCE_EXHAUSTED;
		*ret_reason = "rate limit: too many calls";
	}
	ret->peer = peer;
	ret->peer.n_names = 0; /* borrowed from actx, released below */
	if (actx)
		grpc_auth_context_release(actx);
	return st;
}
