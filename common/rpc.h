/* rpc.h - the one wrapper over gRPC core and protobuf-c.
 *
 * No other file includes <grpc/grpc.h>. Messages cross this interface as
 * protobuf-c messages (the generated structs of proto/sonde/v1); packing,
 * unpacking, size limits and call state are handled here.
 *
 * Server model: one completion-queue loop thread runs every handler, so
 * handlers of one server never run concurrently and need no locks for
 * per-call or service state. Handlers must not block.
 *
 * Client model: blocking calls on a pluck completion queue. A stream can be
 * written from several threads (writes are serialised inside) while one
 * other thread reads.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

/* Same numbers as gRPC status codes. */
enum rpc_status {
	RPC_OK = 0,
	RPC_CANCELLED = 1,
	RPC_UNKNOWN = 2,
	RPC_INVALID_ARGUMENT = 3,
	RPC_DEADLINE_EXCEEDED = 4,
	RPC_NOT_FOUND = 5,
	RPC_PERMISSION_DENIED = 7,
	RPC_RESOURCE_EXHAUSTED = 8,
	RPC_FAILED_PRECONDITION = 9,
	RPC_UNIMPLEMENTED = 12,
	RPC_INTERNAL = 13,
	RPC_UNAVAILABLE = 14,
};

/* Filled by client calls on failure. */
struct rpc_error {
	enum rpc_status status;
	char message[256];
};

/* ---- server ---- */

struct rpc_server;
struct rpc_call;

enum rpc_kind {
	RPC_UNARY,
	RPC_BIDI,
};

/* Who may call a method. rpc.c asks rpc_server_opts.authorize before the
 * handler sees anything and answers PERMISSION_DENIED when it says no. */
enum rpc_role {
	RPC_ROLE_ANY = 0, /* whoever can connect (tests, health) */
	RPC_ROLE_SENSOR,  /* streams data in (Ingest) */
	RPC_ROLE_CLIENT,  /* reads (the public Symbols API) */
	/* Not a method's role: asked once per call (like RPC_ROLE_SENSOR), it
	 * says whether the peer sees every user's data; handlers read the
	 * answer with rpc_call_peer_is_admin(). */
	RPC_ROLE_ADMIN,
};

/* What the server knows about a connection's peer. */
enum rpc_transport {
	RPC_TRANSPORT_UNIX,     /* accepted by rpc.c: credentials from SO_PEERCRED */
	RPC_TRANSPORT_TLS,      /* TCP, client certificate verified by the CA */
	RPC_TRANSPORT_INSECURE, /* plaintext TCP (explicitly allowed) */
};

#define RPC_PEER_MAX_GROUPS 64
#define RPC_PEER_MAX_NAMES 16

struct rpc_peer {
	enum rpc_transport transport;
	/* RPC_TRANSPORT_UNIX: the peer process at connect() time. */
	uint32_t uid, gid;
	int32_t pid;
	uint32_t groups[RPC_PEER_MAX_GROUPS]; /* supplementary (SO_PEERGROUPS) */
	size_t n_groups;
	/* RPC_TRANSPORT_TLS: subject CN and SAN entries of the verified
	 * client certificate (borrowed, valid during authorize). */
	const char *names[RPC_PEER_MAX_NAMES];
	size_t n_names;
};

/* The peer of a connected Unix socket fd as the kernel recorded it at
 * connect() (SO_PEERCRED, SO_PEERGROUPS): 0, or a negative errno. */
int rpc_unix_peer(int fd, struct rpc_peer *ret);

/* TLS material (file paths, PEM). Server: cert+key of the server and
 * client_ca for client certificates (required and verified). Client: ca
 * to verify the server, cert+key for its own certificate, server_name to
 * override the name checked against the server's certificate. */
struct rpc_tls {
	const char *ca;
	const char *cert;
	const char *key;
	const char *server_name;
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
	/* TLS for tcp: listeners (files read by rpc_server_listen()); NULL:
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

/* methods and ctx are borrowed and must outlive the server. Returns NULL
 * on failure (logged). */
struct rpc_server *rpc_server_new(const struct rpc_method *methods, size_t n_methods,
				  void *ctx, const struct rpc_server_opts *opts);
/* addr: "unix:/abs/path" or "tcp:HOST:PORT" (TLS if opts->tls). Before
 * rpc_server_start(). For unix: rpc.c binds and accepts itself, so it can
 * read each peer's credentials (SO_PEERCRED) before gRPC sees a byte; the
 * socket file gets mode 0660 after bind.
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

/* Per-call user data, NULL until set. */
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

/* ---- client ---- */

struct rpc_channel;
struct rpc_stream;

struct rpc_channel_opts {
	size_t max_message_bytes; /* receive limit; 0: 64 MiB */
	int reconnect_min_ms;     /* 0: 100 */
	int reconnect_max_ms;     /* 0: 2000 */
	/* TLS for this channel only (tcp: targets; files read now, so
	 * before any sandbox; ca is required). NULL: the process-wide
	 * setting of rpc_client_set_tls(). */
	const struct rpc_tls *tls;
	/* Compress every message with gzip (grpc-encoding: gzip), which
	 * any gRPC server decodes. */
	bool gzip;
	/* Its own connection: gRPC otherwise shares one TCP connection among
	 * channels to the same target with the same options (the load
	 * generator plays many sensors, each with its own connection). */
	bool own_connection;
};

/* TLS for every tcp: channel created afterwards (process-wide: the
 * sensor's uplink and the CLI create their channels deep inside). Reads
 * the files now (before any sandbox). tls NULL: back to plaintext.
 * Returns 0 or a negative errno (file unreadable). */
int rpc_client_set_tls(const struct rpc_tls *tls);

/* target: "unix:/abs/path" or "tcp:HOST:PORT". NULL on failure. */
struct rpc_channel *rpc_channel_new(const char *target, const struct rpc_channel_opts *opts);
void rpc_channel_free(struct rpc_channel *ch);
/* For a client that checks who listens before it sends a byte (the
 * sensor: --symbolizer-uid): connects a Unix stream socket to target
 * ("unix:/abs/path") itself. Returns 0 with *ret_fd (owned by the caller,
 * O_CLOEXEC, non-blocking) connected, or a negative errno (-EAGAIN: the
 * listener's backlog is full). rpc_unix_peer() on it then gives the
 * credentials of the process that called listen() on the other side. */
int rpc_unix_connect(const char *target, int *ret_fd);
/* A plaintext channel over one connected socket fd (taken, also on
 * failure): gRPC uses that connection and never makes another, so when
 * it breaks every call fails and the caller makes a new channel. target
 * names the channel in gRPC's logs only. NULL on failure. */
struct rpc_channel *rpc_channel_new_from_fd(const char *target, int fd,
					    const struct rpc_channel_opts *opts);
/* Starts connecting now, in gRPC's threads, instead of at the first
 * call: the caller can do other work meanwhile. */
void rpc_channel_connect(struct rpc_channel *ch);

/* Blocking unary call. On success *ret_reply is an owned message (free it
 * with rpc_message_free) and 0 is returned; otherwise a negative errno
 * (-ETIMEDOUT, -ECONNREFUSED for UNAVAILABLE, -EIO for other statuses,
 * -EBADMSG for an undecodable or missing reply) and err (may be NULL) is
 * filled. timeout_ms is the call's deadline (< 0: none). wait_for_ready:
 * wait up to timeout_ms for the server to appear instead of failing at
 * once. */
int rpc_unary(struct rpc_channel *ch, const char *path, const ProtobufCMessage *req,
	      const ProtobufCMessageDescriptor *reply_desc, int timeout_ms, bool wait_for_ready,
	      ProtobufCMessage **ret_reply, struct rpc_error *err);

/* rpc_unary() with a request that is already packed (len bytes at data,
 * borrowed): for callers that keep requests as bytes, e.g. a backlog. */
int rpc_unary_packed(struct rpc_channel *ch, const char *path, const void *data, size_t len,
		     const ProtobufCMessageDescriptor *reply_desc, int timeout_ms,
		     bool wait_for_ready, ProtobufCMessage **ret_reply, struct rpc_error *err);

/* Opens a bidirectional stream, waiting up to connect_timeout_ms (< 0:
 * no limit) for the channel to connect and the call to start. The stream
 * itself has no deadline. NULL on failure, with err filled (may be NULL;
 * RPC_DEADLINE_EXCEEDED on a connect timeout). */
struct rpc_stream *rpc_stream_open(struct rpc_channel *ch, const char *path,
				   int connect_timeout_ms, struct rpc_error *err);
/* Blocking write; thread-safe. buffer_hint: let gRPC coalesce this write
 * with the next one (use for all but the last message of a burst).
 * Returns 0, -EPIPE when the stream is broken, or -ETIMEDOUT when the
 * write timeout passed (the peer took nothing: the call is cancelled). */
int rpc_stream_write(struct rpc_stream *s, const ProtobufCMessage *msg, bool buffer_hint);
/* Bounds how long one write may wait for the peer's flow-control window
 * (0: forever, the default). A peer that stalls then costs a reconnect
 * instead of a writer blocked for good. */
void rpc_stream_set_write_timeout(struct rpc_stream *s, int timeout_ms);
/* Blocking read by one thread. Returns 0 with an owned *ret_msg, -ENODATA
 * at a clean end of stream (the server finished with OK), -EPIPE when
 * broken, cancelled or ended with another status (rpc_stream_close()
 * reports it), -EBADMSG for an undecodable message (the stream goes on).
 * After the end every read returns the same value. */
int rpc_stream_read(struct rpc_stream *s, const ProtobufCMessageDescriptor *desc,
		    ProtobufCMessage **ret_msg);
/* Half-closes: tells the server no more messages come, while the stream
 * stays readable (the server may still send, and the caller's reader
 * thread keeps reading until -ENODATA/-EPIPE). Thread-safe with writes;
 * later writes fail. Returns 0 or -EPIPE when the stream is broken. */
int rpc_stream_close_send(struct rpc_stream *s);
/* Thread-safe: makes pending and later reads/writes fail with -EPIPE. */
void rpc_stream_cancel(struct rpc_stream *s);
/* Half-closes (if not cancelled), reads and drops messages nobody read
 * (they would hold the status back), waits up to timeout_ms in total for
 * the status (then cancels), and frees the stream. No other thread may
 * still use it. Returns 0 if the server ended with OK, -ETIMEDOUT on
 * timeout, else the errno rpc_unary() would give, with err filled (err
 * may be NULL). Accepts NULL. */
int rpc_stream_close(struct rpc_stream *s, int timeout_ms, struct rpc_error *err);

/* Frees a message returned by this module. Accepts NULL. */
void rpc_message_free(ProtobufCMessage *msg);

/* Serializes msg (borrowed) for a file rather than a call (pprof.c):
 * returns 0 with a malloc'd *ret (the caller frees it) and *ret_len,
 * -E2BIG if it would exceed max bytes, -ENOMEM; outputs untouched on
 * failure. */
int rpc_message_pack(const ProtobufCMessage *msg, size_t max, uint8_t **ret, size_t *ret_len);

/* Once per process, before threads that use rpc are started; and at the end. */
void rpc_global_init(void);
void rpc_global_shutdown(void);
