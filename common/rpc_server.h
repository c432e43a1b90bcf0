/* rpc_server.h - the server side of the rpc wrapper: a method table, the
 * loop that runs its handlers, timers, and the calls handlers answer
 * (the symbolizer). Who may call a method is rpc_admission.h's part.
 *
 * Server model: one completion-queue loop thread runs every handler, so
 * handlers of one server never run concurrently and need no locks for
 * per-call or service state. Handlers must not block. Messages reach
 * handlers decoded (protobuf-c structs of proto/sonde/v1), borrowed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

#include "rpc.h"
#include "rpc_admission.h"

struct rpc_server;
struct rpc_call;

enum rpc_kind {
	RPC_UNARY,
	RPC_BIDI,
};

struct rpc_method {
	const char *path; /* "/sonde.v1.Symbols/Status" */
	enum rpc_kind kind;
	const ProtobufCMessageDescriptor *request;
	/* RPC_UNARY: called once with the decoded request (borrowed: freed
	 * when the handler returns). The handler answers with
	 * rpc_call_finish(), at once or later from the loop thread (e.g. from
	 * another call's handler or a timer); the call stays valid until then. */
	void (*on_call)(struct rpc_call *call, const ProtobufCMessage *req, void *ctx);
	/* RPC_BIDI: on_open when the stream starts; on_message for each
	 * message (borrowed), and once with msg == NULL when the client
	 * half-closed; on_close exactly once when the call is over, for
	 * whatever reason (after it the call pointer is invalid). A message
	 * that does not decode ends the call with INVALID_ARGUMENT, one over
	 * the size limit with RESOURCE_EXHAUSTED, before any handler sees it.
	 * on_close is not called for RPC_UNARY: a unary call pointer is
	 * valid until the handler calls rpc_call_finish() (a no-op if the
	 * client is gone by then). */
	void (*on_open)(struct rpc_call *call, void *ctx);
	void (*on_message)(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx);
	void (*on_close)(struct rpc_call *call, void *ctx);
	enum rpc_role role; /* checked before on_call/on_open */
};

struct rpc_server_opts {
	size_t max_message_bytes; /* 0: 16 MiB */
	size_t max_queued_bytes;  /* per-call write queue bound; 0: 64 MiB */
	/* TLS for tcp: listeners (files read by rpc_server_new()); NULL:
	 * plaintext. With TLS every client must present a certificate that
	 * client_ca verifies. */
	const struct rpc_tls *tls;
	/* Policy: may peer call a method of this role? Called on the loop
	 * thread for each call to a method whose role is not RPC_ROLE_ANY;
	 * NULL denies all of them. */
	bool (*authorize)(const struct rpc_peer *peer, enum rpc_role role, void *ctx);
	/* Token buckets, 0: unlimited. Messages per second on each stream
	 * (burst: stream_burst), and unary calls per second on each
	 * connection (burst: unary_burst). Over: RESOURCE_EXHAUSTED. */
	uint32_t stream_msgs_per_s, stream_burst;
	uint32_t unary_calls_per_s, unary_burst;
};

/* methods and ctx are borrowed and must outlive the server; opts (may
 * be NULL: defaults) is read now, its TLS files too. Returns an owned
 * server (rpc_server_free()), or NULL on failure (logged, but for the
 * allocation of the admission table). */
struct rpc_server *rpc_server_new(const struct rpc_method *methods, size_t n_methods,
				  void *ctx, const struct rpc_server_opts *opts);
/* addr: "unix:/abs/path" or "tcp:HOST:PORT" (TLS if opts->tls). Before
 * rpc_server_start(). For unix: rpc_server.c binds and accepts itself,
 * so rpc_admission.c can read each peer's credentials (SO_PEERCRED)
 * before gRPC sees a byte; the socket file gets mode 0660 at bind.
 * Returns 0 or a negative errno. If ret_port is not NULL it receives the
 * bound TCP port (useful with port 0). */
int rpc_server_listen(struct rpc_server *s, const char *addr, int *ret_port);
/* Starts the loop thread. Returns 0 or a negative errno. */
int rpc_server_start(struct rpc_server *s);
/* Periodic callback on the loop thread, every interval_ms, until stop.
 * Before or after start (a timer added after start may first fire up to
 * 5 s late: the loop is woken only by its own deadline). Returns 0 or
 * a negative errno. */
int rpc_server_add_timer(struct rpc_server *s, int interval_ms,
			 void (*fn)(void *ctx), void *ctx);
/* The timer with callback fn next fires ms from now (from the callback
 * itself: instead of its interval), or, with sooner_only, within ms (an
 * earlier due time stays). For timers that sleep longer when there is
 * nothing to do, and are called back early when there is. Loop thread
 * only. */
void rpc_server_timer_delay(struct rpc_server *s, void (*fn)(void *ctx), int ms, bool sooner_only);
/* Graceful stop: no new calls, running calls get grace_ms, then are
 * cancelled (on_close runs for each). Joins the loop thread, so it must
 * not be called from a handler. A unary call that its handler never
 * finished is freed here. Calling it again is a no-op. */
void rpc_server_stop(struct rpc_server *s, int grace_ms);
/* Accepts NULL and a server that was never started. Stops it first. */
void rpc_server_free(struct rpc_server *s);

/* Per-call user data (borrowed: the call never frees it), NULL until
 * set. Both accept a NULL call (set does nothing, get returns NULL). */
void rpc_call_set_data(struct rpc_call *call, void *data);
void *rpc_call_data(const struct rpc_call *call);
/* Peer address as gRPC names it ("unix:..." / "ipv4:..."); borrowed, valid
 * for the call's life. */
const char *rpc_call_peer(const struct rpc_call *call);
/* The peer's uid on a Unix socket connection: 0 and *ret_uid set, or
 * -ENODATA for TCP peers. */
int rpc_call_peer_uid(const struct rpc_call *call, uint32_t *ret_uid);
/* Whether authorize() granted the call's peer RPC_ROLE_SENSOR. */
bool rpc_call_peer_is_sensor(const struct rpc_call *call);
/* Whether authorize() granted the call's peer RPC_ROLE_ADMIN. */
bool rpc_call_peer_is_admin(const struct rpc_call *call);
/* The call's peer as authorize() saw it: transport, and for Unix peers
 * uid, gid and supplementary groups (uid UINT32_MAX: unknown); no
 * certificate names (n_names 0). */
void rpc_call_peer_creds(const struct rpc_call *call, struct rpc_peer *ret);

/* RPC_BIDI: queues msg (packed now; msg stays the caller's). Returns 0,
 * -ENOBUFS when the call's write queue would go over its bound (queued
 * bytes, counting the message being sent, plus this one > max_queued_bytes;
 * nothing queued), -EPIPE when the call is already over or finishing,
 * -EINVAL on a unary call. */
int rpc_call_write(struct rpc_call *call, const ProtobufCMessage *msg);
/* Ends the call: sends reply (unary only; may be NULL for an error) after
 * any queued writes, then the status. details may be NULL. Further
 * writes fail with -EPIPE. Calling it twice is a no-op. The reply is sent
 * only with RPC_OK; a unary RPC_OK without a reply makes the client's
 * rpc_unary() fail with -EBADMSG. */
void rpc_call_finish(struct rpc_call *call, enum rpc_status status, const char *details,
		     const ProtobufCMessage *reply);
