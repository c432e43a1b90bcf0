/* rpc_client.h - the client side of the rpc wrapper: channels, blocking
 * unary calls and bidirectional streams (the sensor's uplink, the CLI,
 * the symbolizer's exporters).
 *
 * Client model: blocking calls on a pluck completion queue. A stream can
 * be written from several threads (writes are serialised inside) while
 * one other thread reads. Replies and read messages are owned by the
 * caller: free them with rpc_message_free() (rpc_message.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

#include "rpc.h"
#include "rpc_message.h"

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

/* target: "unix:/abs/path" or "tcp:HOST:PORT" (borrowed). opts may be
 * NULL (defaults) and is borrowed (its TLS files are read now). Returns
 * an owned channel (free it with rpc_channel_free()), or NULL on a bad
 * target, unreadable TLS files or no memory. gRPC connects lazily: a
 * server that is not there shows in the calls, not here. */
struct rpc_channel *rpc_channel_new(const char *target, const struct rpc_channel_opts *opts);
/* Destroys ch; its streams must be closed first. Accepts NULL. */
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
 * call: the caller can do other work meanwhile. Accepts NULL; a no-op
 * on a channel made from an fd (already connected). */
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
