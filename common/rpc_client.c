/* rpc_client.c - the client side of the rpc wrapper (see rpc_client.h):
 * channels (Unix, TCP, TLS, or one connected fd), blocking unary calls,
 * and bidirectional streams.
 *
 * Blocking calls on pluck completion queues, one per unary call and one
 * per stream. Every client call requests RECV_INITIAL_METADATA together
 * with RECV_STATUS_ON_CLIENT at once: without it a call that breaks
 * before the server sent headers never reports its status
 * (GRPC-C-CORE.md 5.1).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "log.h"
#include "parse.h"
#include "rpc_deadline.h"
#include "rpc_client.h"
#include "rpc_testing.h"

#define CHANNEL_MAX_MESSAGE_DEFAULT (64u << 20)
#define RECONNECT_MIN_DEFAULT_MS 100
#define RECONNECT_MAX_DEFAULT_MS 2000
/* How long one connection attempt (TCP connect, TLS and HTTP/2
 * handshakes) may take; gRPC reads it from GRPC_ARG_MIN_RECONNECT_BACKOFF_MS.
 * Not under ~3.03 s either, for gRPC 1.51's timer list: each of its shards
 * (two per CPU) re-arms its check window at a width derived from the mean
 * duration of the timers it has seen, about 1 s at the mean it starts with
 * (3.03 s) and above, less below; a timer much shorter than that puts its
 * shard on a phase of its own for good, and the timer thread then wakes
 * once a second per phase, with no timer pending. Each wakeup costs a few hundred
 * microseconds of CPU on a VM. */
#define CONNECT_ATTEMPT_TIMEOUT_MS 5000
/* After the server's end of stream, how long a reader waits for the
 * status that says whether the end was clean. The status follows the
 * trailers at once; this only bounds a misbehaving peer. */
#define READ_STATUS_WAIT_MS 5000

struct rpc_channel {
	grpc_channel *ch;
	/* rpc_channel_new_from_fd(): a direct channel over one connection,
	 * not a client channel: it has no connectivity state to watch. */
	bool direct;
};

/* rpc_client_set_tls(): PEM contents, set before channels are made. */
static struct {
	char *ca, *cert, *key, *server_name;
	bool on;
} client_tls;

static void client_tls_clear(void)
{
	free(client_tls.ca);
	free(client_tls.cert);
	free(client_tls.key);
	free(client_tls.server_name);
	memset(&client_tls, 0, sizeof(client_tls));
}

int rpc_client_set_tls(const struct rpc_tls *tls)
{
	int err;

	client_tls_clear();
	if (!tls)
		return 0;
	if (!tls->ca || (!tls->cert) != (!tls->key))
		return -EINVAL;
	err = rpc_pem_read(tls->ca, &client_tls.ca);
	if (err == 0 && tls->cert)
		err = rpc_pem_read(tls->cert, &client_tls.cert);
	if (err == 0 && tls->key)
		err = rpc_pem_read(tls->key, &client_tls.key);
	if (err == 0 && tls->server_name && !(client_tls.server_name = strdup(tls->server_name)))
		err = -ENOMEM;
	if (err < 0) {
		client_tls_clear();
		return err;
	}
	client_tls.on = true;
	return 0;
}

/* Maps our address syntax to a gRPC target. Returns a malloc'd string or
 * NULL (bad syntax or no memory). */
static char *channel_target(const char *target)
{
	const char *hostport, *colon;
	size_t host_len;
	char host[256];
	struct in_addr a4;
	uint32_t port;
	char *out = NULL;

	if (strncmp(target, "unix:", 5) == 0) {
		if (target[5] != '/')
			return NULL;
		return strdup(target);
	}
	if (strncmp(target, "tcp:", 4) != 0)
		return NULL;
	hostport = target + 4;
	colon = strrchr(hostport, ':');
	if (!colon || colon == hostport)
		return NULL;
	if (parse_u32(colon + 1, 10, &port) < 0 || port == 0 || port > 65535)
		return NULL;
	host_len = (size_t)(colon - hostport);
	if (host_len >= sizeof(host))
		return NULL;
	memcpy(host, hostport, host_len);
	host[host_len] = '\0';

	if (host[0] == '[') {
		struct in6_addr a6;
		char inner[sizeof(host)];

		if (host_len < 3 || host[host_len - 1] != ']')
			return NULL;
		memcpy(inner, host + 1, host_len - 2);
		inner[host_len - 2] = '\0';
		if (inet_pton(AF_INET6, inner, &a6) != 1)
			return NULL;
		if (asprintf(&out, "ipv6:%s:%u", host, port) < 0)
			return NULL;
	} else if (inet_pton(AF_INET, host, &a4) == 1) {
		if (asprintf(&out, "ipv4:%s:%u", host, port) < 0)
			return NULL;
	} else {
		if (asprintf(&out, "dns:///%s:%u", host, port) < 0)
			return NULL;
	}
	return out;
}

/* PEM contents of a channel's own TLS settings (rpc_channel_opts.tls). */
struct channel_tls {
	char *ca, *cert, *key;
};

static void channel_tls_done(struct channel_tls *t)
{
	free(t->ca);
	free(t->cert);
	free(t->key);
}

static int channel_tls_read(const struct rpc_tls *tls, struct channel_tls *t)
{
	int err;

	memset(t, 0, sizeof(*t));
	if (!tls->ca || (!tls->cert) != (!tls->key))
		return -EINVAL;
	err = rpc_pem_read(tls->ca, &t->ca);
	if (err == 0 && tls->cert)
		err = rpc_pem_read(tls->cert, &t->cert);
	if (err == 0 && tls->key)
		err = rpc_pem_read(tls->key, &t->key);
	if (err < 0)
		channel_tls_done(t);
	return err;
}

/* The channel arguments of opts into arg[] (room for 10); returns how
 * many. */
static size_t channel_args_fill(const struct rpc_channel_opts *opts, grpc_arg *arg)
{
	size_t max_msg, n = 0;
	int rmin, rmax;

	max_msg = opts && opts->max_message_bytes ? opts->max_message_bytes
						  : CHANNEL_MAX_MESSAGE_DEFAULT;
	if (max_msg > INT_MAX)
		max_msg = INT_MAX;
	rmin = opts && opts->reconnect_min_ms > 0 ? opts->reconnect_min_ms : RECONNECT_MIN_DEFAULT_MS;
	rmax = opts && opts->reconnect_max_ms > 0 ? opts->reconnect_max_ms : RECONNECT_MAX_DEFAULT_MS;
	if (rmax < rmin)
		rmax = rmin;

	memset(arg, 0, 10 * sizeof(*arg));
	arg[n].type = GRPC_ARG_INTEGER;
	arg[n].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	arg[n++].value.integer = (int)max_msg;
	/* Local peers restart quickly: gRPC's default backoff (1 s, x1.6, up
	 * to 120 s) would leave a sensor disconnected for minutes. */
	arg[n].type = GRPC_ARG_INTEGER;
	arg[n].key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
	arg[n++].value.integer = rmin;
	arg[n].type = GRPC_ARG_INTEGER;
	arg[n].key = GRPC_ARG_MIN_RECONNECT_BACKOFF_MS;
	arg[n++].value.integer = CONNECT_ATTEMPT_TIMEOUT_MS;
	arg[n].type = GRPC_ARG_INTEGER;
	arg[n].key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
	arg[n++].value.integer = rmax;
	/* No bandwidth-delay probes (see rpc_server_new() in rpc_server.c). */
	arg[n].type = GRPC_ARG_INTEGER;
	arg[n].key = GRPC_ARG_HTTP2_BDP_PROBE;
	arg[n++].value.integer = 0;
	/* No keepalive timer either (see rpc_server_new() in rpc_server.c). */
	arg[n].type = GRPC_ARG_INTEGER;
	arg[n].key = GRPC_ARG_KEEPALIVE_TIME_MS;
	arg[n++].value.integer = INT_MAX;
	if (opts && opts->gzip) {
		arg[n].type = GRPC_ARG_INTEGER;
		arg[n].key = GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM;
		arg[n++].value.integer = GRPC_COMPRESS_GZIP;
	}
	if (opts && opts->own_connection) {
		arg[n].type = GRPC_ARG_INTEGER;
		arg[n].key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
		arg[n++].value.integer = 1;
	}
	return n;
}

struct rpc_channel *rpc_channel_new(const char *target, const struct rpc_channel_opts *opts)
{
	grpc_channel_credentials *creds = NULL;
	struct rpc_channel *ch = NULL;
	struct channel_tls own = { 0 };
	grpc_channel_args args;
	grpc_arg arg[10];
	char *gtarget = NULL;
	const char *ca = client_tls.ca, *cert = client_tls.cert, *key = client_tls.key;
	const char *server_name = client_tls.server_name;
	bool tls = client_tls.on;

	if (!target)
		return NULL;
	gtarget = channel_target(target);
	if (!gtarget) {
		log_debug("bad target %.100s", target);
		goto fail;
	}
	if (opts && opts->tls) {
		int err = channel_tls_read(opts->tls, &own);

		if (err < 0) {
			log_debug("cannot read the TLS files of %.100s: %s", target, strerror(-err));
			goto fail;
		}
		tls = true;
		ca = own.ca;
		cert = own.cert;
		key = own.key;
		server_name = opts->tls->server_name;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		goto fail;
	args.num_args = channel_args_fill(opts, arg);
	args.args = arg;

	if (tls && strncmp(target, "tcp:", 4) == 0) {
		grpc_ssl_pem_key_cert_pair pair = { key, cert };

		creds = grpc_ssl_credentials_create_ex(ca, cert ? &pair : NULL, NULL, NULL);
		if (server_name) {
			arg[args.num_args].type = GRPC_ARG_STRING;
			arg[args.num_args].key = GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
			arg[args.num_args].value.string = (char *)server_name;
			args.num_args++;
		}
	} else {
		creds = grpc_insecure_credentials_create();
	}
	if (!creds)
		goto fail;
	ch->ch = grpc_channel_create(gtarget, creds, &args);
	grpc_channel_credentials_release(creds);
	if (!ch->ch)
		goto fail;
	channel_tls_done(&own);
	free(gtarget);
	return ch;
fail:
	channel_tls_done(&own);
	free(gtarget);
	free(ch);
	return NULL;
}

int rpc_unix_connect(const char *target, int *ret_fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path;
	size_t len;
	int fd, r;

	if (!target || strncmp(target, "unix:", 5) != 0 || target[5] != '/')
		return -EINVAL;
	path = target + 5;
	len = strlen(path);
	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, len + 1);
	/* Non-blocking: a listener whose backlog is full answers EAGAIN at
	 * once instead of holding the caller (Unix stream sockets connect
	 * synchronously otherwise). gRPC keeps the fd non-blocking anyway. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

struct rpc_channel *rpc_channel_new_from_fd(const char *target, int fd,
					    const struct rpc_channel_opts *opts)
{
	grpc_channel_credentials *creds = NULL;
	struct rpc_channel *ch = NULL;
	grpc_channel_args args;
	grpc_arg arg[10];

	if (fd < 0)
		return NULL;
	ch = calloc(1, sizeof(*ch));
	creds = grpc_insecure_credentials_create();
	if (!ch || !creds)
		goto fail;
	args.num_args = channel_args_fill(opts, arg);
	args.args = arg;
	/* gRPC owns fd from here, whatever happens (a failure gives a lame
	 * channel that closed it). */
	ch->direct = true;
	ch->ch = grpc_channel_create_from_fd(target ? target : "unix:fd", fd, creds, &args);
	fd = -1;
	grpc_channel_credentials_release(creds);
	creds = NULL;
	if (!ch->ch)
		goto fail;
	return ch;
fail:
	if (creds)
		grpc_channel_credentials_release(creds);
	if (fd >= 0)
		close(fd);
	free(ch);
	return NULL;
}

void rpc_channel_connect(struct rpc_channel *ch)
{
	if (ch && ch->ch && !ch->direct)
		grpc_channel_check_connectivity_state(ch->ch, 1);
}

void rpc_channel_free(struct rpc_channel *ch)
{
	if (!ch)
		return;
	if (ch->ch)
		grpc_channel_destroy(ch->ch);
	free(ch);
}

static int status_to_errno(grpc_status_code status)
{
	switch (status) {
	case GRPC_STATUS_OK:
		return 0;
	case GRPC_STATUS_DEADLINE_EXCEEDED:
		return -ETIMEDOUT;
	case GRPC_STATUS_UNAVAILABLE:
		return -ECONNREFUSED;
	default:
		return -EIO;
	}
}

static void error_set(struct rpc_error *err, enum rpc_status status, const char *msg)
{
	if (!err)
		return;
	err->status = status;
	snprintf(err->message, sizeof(err->message), "%s", msg ? msg : "");
}

/* Fills err from a received status: the details, or if empty gRPC's
 * debug string. */
static void error_from_status(struct rpc_error *err, grpc_status_code status,
			      const grpc_slice *details, const char *error_string)
{
	size_t n;

	if (!err)
		return;
	err->status = (enum rpc_status)status;
	n = details ? GRPC_SLICE_LENGTH(*details) : 0;
	if (n > 0) {
		if (n >= sizeof(err->message))
			n = sizeof(err->message) - 1;
		memcpy(err->message, GRPC_SLICE_START_PTR(*details), n);
		err->message[n] = '\0';
	} else {
		snprintf(err->message, sizeof(err->message), "%s",
			 error_string ? error_string : "");
	}
}

/* Shuts a pluck queue down, drains it and destroys it. */
static void cq_destroy(grpc_completion_queue *cq)
{
	if (!cq)
		return;
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

/* One unary call sending send_bb (borrowed). */
static int unary_call(struct rpc_channel *ch, const char *path, grpc_byte_buffer *send_bb,
		      const ProtobufCMessageDescriptor *reply_desc, int timeout_ms,
		      bool wait_for_ready, ProtobufCMessage **ret_reply, struct rpc_error *err)
{
	grpc_metadata_array initial_md, trailing_md;
	grpc_completion_queue *cq = NULL;
	grpc_byte_buffer *recv_bb = NULL;
	grpc_slice details = grpc_empty_slice();
	grpc_slice method = grpc_empty_slice();
	const char *error_string = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	ProtobufCMessage *reply;
	grpc_call *call = NULL;
	grpc_event ev;
	grpc_op ops[6];
	int tag;
	int r;

	grpc_metadata_array_init(&initial_md);
	grpc_metadata_array_init(&trailing_md);
	if (!ch || !path || !send_bb || !reply_desc || !ret_reply) {
		error_set(err, RPC_INVALID_ARGUMENT, "bad arguments");
		r = -EINVAL;
		goto cleanup;
	}

	cq = grpc_completion_queue_create_for_pluck(NULL);
	method = grpc_slice_from_copied_string(path);
	call = grpc_channel_create_call(ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
					rpc_deadline_after_ms(timeout_ms), NULL);
	if (!cq || !call) {
		error_set(err, RPC_INTERNAL, "cannot create the call");
		r = -ENOMEM;
		goto cleanup;
	}

	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[0].flags = wait_for_ready ? GRPC_INITIAL_METADATA_WAIT_FOR_READY : 0;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv_bb;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	ops[5].data.recv_status_on_client.error_string = &error_string;
	if (grpc_call_start_batch(call, ops, 6, &tag, NULL) != GRPC_CALL_OK) {
		error_set(err, RPC_INTERNAL, "cannot start the call");
		r = -EIO;
		goto cleanup;
	}
	/* The call's deadline bounds this wait. */
	ev = grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	if (ev.type != GRPC_OP_COMPLETE) {
		error_set(err, RPC_INTERNAL, "completion queue failed");
		r = -EIO;
		goto cleanup;
	}

	if (status != GRPC_STATUS_OK) {
		error_from_status(err, status, &details, error_string);
		r = status_to_errno(status);
		goto cleanup;
	}
	reply = recv_bb ? rpc_message_from_buffer(reply_desc, recv_bb) : NULL;
	if (!reply) {
		error_set(err, RPC_INTERNAL, recv_bb ? "reply does not decode" : "no reply");
		r = -EBADMSG;
		goto cleanup;
	}
	*ret_reply = reply;
	r = 0;
cleanup:
	if (call)
		grpc_call_unref(call);
	cq_destroy(cq);
	if (recv_bb)
		grpc_byte_buffer_destroy(recv_bb);
	grpc_slice_unref(details);
	grpc_slice_unref(method);
	gpr_free((void *)error_string);
	grpc_metadata_array_destroy(&initial_md);
	grpc_metadata_array_destroy(&trailing_md);
	return r;
}

int rpc_unary(struct rpc_channel *ch, const char *path, const ProtobufCMessage *req,
	      const ProtobufCMessageDescriptor *reply_desc, int timeout_ms, bool wait_for_ready,
	      ProtobufCMessage **ret_reply, struct rpc_error *err)
{
	grpc_byte_buffer *bb;
	int r;

	if (!req) {
		error_set(err, RPC_INVALID_ARGUMENT, "bad arguments");
		return -EINVAL;
	}
	bb = rpc_message_to_buffer(req, NULL);
	r = unary_call(ch, path, bb, reply_desc, timeout_ms, wait_for_ready, ret_reply, err);
	grpc_byte_buffer_destroy(bb);
	return r;
}

int rpc_unary_packed(struct rpc_channel *ch, const char *path, const void *data, size_t len,
		     const ProtobufCMessageDescriptor *reply_desc, int timeout_ms,
		     bool wait_for_ready, ProtobufCMessage **ret_reply, struct rpc_error *err)
{
	grpc_byte_buffer *bb;
	int r;

	if (!data && len > 0) {
		error_set(err, RPC_INVALID_ARGUMENT, "bad arguments");
		return -EINVAL;
	}
	bb = rpc_message_bytes_to_buffer(data, len);
	r = unary_call(ch, path, bb, reply_desc, timeout_ms, wait_for_ready, ret_reply, err);
	grpc_byte_buffer_destroy(bb);
	return r;
}

struct rpc_stream {
	grpc_call *call;
	grpc_completion_queue *cq;
	grpc_slice method;

	/* Serialises writers: a batch is started and plucked under it. */
	pthread_mutex_t write_lock;
	bool write_broken; /* under write_lock */
	int write_timeout_ms; /* 0: none; set before any write */
	bool half_closed;  /* under write_lock */
	atomic_bool cancelled;

	/* Reader (and close, which no reader may overlap) only. */
	int read_end; /* 0, or what read returns from now on */
	bool status_done;

	grpc_metadata_array initial_md, trailing_md;
	grpc_status_code status;
	grpc_slice status_details;
	const char *error_string;

	/* Tags: distinct addresses, one per kind of batch. */
	char t_open, t_status, t_write, t_read, t_watch;
};

/* Plucks tag until deadline; on timeout cancels the call and plucks it
 * anyway (cancelling completes every pending batch). Returns the event's
 * success, and sets *timed_out. */
static bool stream_pluck(struct rpc_stream *s, void *tag, gpr_timespec deadline, bool *timed_out)
{
	grpc_event ev = grpc_completion_queue_pluck(s->cq, tag, deadline, NULL);

	if (ev.type == GRPC_QUEUE_TIMEOUT) {
		if (timed_out)
			*timed_out = true;
		grpc_call_cancel(s->call, NULL);
		ev = grpc_completion_queue_pluck(s->cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC),
						 NULL);
	}
	return ev.type == GRPC_OP_COMPLETE && ev.success;
}

static void stream_wait_status(struct rpc_stream *s, gpr_timespec deadline, bool *timed_out)
{
	if (s->status_done)
		return;
	stream_pluck(s, &s->t_status, deadline, timed_out);
	s->status_done = true;
}

static void stream_free(struct rpc_stream *s)
{
	if (s->call) {
		if (!s->status_done) {
			grpc_call_cancel(s->call, NULL);
			stream_wait_status(s, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		}
		grpc_call_unref(s->call);
	}
	cq_destroy(s->cq);
	grpc_slice_unref(s->method);
	grpc_slice_unref(s->status_details);
	gpr_free((void *)s->error_string);
	grpc_metadata_array_destroy(&s->initial_md);
	grpc_metadata_array_destroy(&s->trailing_md);
	pthread_mutex_destroy(&s->write_lock);
	free(s);
}

/* Waits until the channel is READY or deadline. gRPC connects lazily;
 * check_connectivity_state(.., 1) starts the attempt. */
static int stream_wait_connected(struct rpc_stream *s, grpc_channel *ch, gpr_timespec deadline)
{
	for (;;) {
		grpc_connectivity_state st = grpc_channel_check_connectivity_state(ch, 1);
		grpc_event ev;

		if (st == GRPC_CHANNEL_READY)
			return 0;
		if (st == GRPC_CHANNEL_SHUTDOWN)
			return -ECONNREFUSED;
		/* Completes on a state change (success) or at the deadline. */
		grpc_channel_watch_connectivity_state(ch, st, deadline, s->cq, &s->t_watch);
		ev = grpc_completion_queue_pluck(s->cq, &s->t_watch,
						 gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		if (ev.type != GRPC_OP_COMPLETE || !ev.success)
			return -ETIMEDOUT;
	}
}

struct rpc_stream *rpc_stream_open(struct rpc_channel *ch, const char *path,
				   int connect_timeout_ms, struct rpc_error *err)
{
	struct rpc_stream *s = NULL;
	gpr_timespec deadline = rpc_deadline_after_ms(connect_timeout_ms);
	bool timed_out = false;
	grpc_op ops[2];
	int r;

	if (!ch || !path) {
		error_set(err, RPC_INVALID_ARGUMENT, "bad arguments");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		error_set(err, RPC_INTERNAL, "out of memory");
		return NULL;
	}
	if (pthread_mutex_init(&s->write_lock, NULL) != 0) {
		free(s);
		error_set(err, RPC_INTERNAL, "cannot create a lock");
		return NULL;
	}
	atomic_init(&s->cancelled, false);
	grpc_metadata_array_init(&s->initial_md);
	grpc_metadata_array_init(&s->trailing_md);
	s->status_details = grpc_empty_slice();
	s->method = grpc_slice_from_copied_string(path);
	s->status_done = true; /* until the status batch is started */
	s->cq = grpc_completion_queue_create_for_pluck(NULL);
	if (!s->cq) {
		error_set(err, RPC_INTERNAL, "cannot create a completion queue");
		goto fail;
	}

	r = ch->direct ? 0 : stream_wait_connected(s, ch->ch, deadline);
	if (r < 0) {
		error_set(err, r == -ETIMEDOUT ? RPC_DEADLINE_EXCEEDED : RPC_UNAVAILABLE,
			  "cannot connect to the server in time");
		goto fail;
	}

	/* No deadline on the call: it would end a long-lived stream. The
	 * connect wait above and the open pluck below are bounded instead. */
	s->call = grpc_channel_create_call(ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq, s->method,
					   NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	if (!s->call) {
		error_set(err, RPC_INTERNAL, "cannot create the call");
		goto fail;
	}
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	/* The connection may drop again between the check and the call. */
	ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
	if (grpc_call_start_batch(s->call, ops, 1, &s->t_open, NULL) != GRPC_CALL_OK) {
		error_set(err, RPC_INTERNAL, "cannot start the call");
		goto fail;
	}
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[0].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
	ops[1].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[1].data.recv_status_on_client.trailing_metadata = &s->trailing_md;
	ops[1].data.recv_status_on_client.status = &s->status;
	ops[1].data.recv_status_on_client.status_details = &s->status_details;
	ops[1].data.recv_status_on_client.error_string = &s->error_string;
	if (grpc_call_start_batch(s->call, ops, 2, &s->t_status, NULL) != GRPC_CALL_OK) {
		grpc_call_cancel(s->call, NULL);
		stream_pluck(s, &s->t_open, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		error_set(err, RPC_INTERNAL, "cannot start the call");
		goto fail;
	}
	s->status_done = false;

	if (!stream_pluck(s, &s->t_open, deadline, &timed_out)) {
		stream_wait_status(s, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		if (timed_out)
			error_set(err, RPC_DEADLINE_EXCEEDED, "cannot connect to the server in time");
		else
			error_from_status(err, s->status, &s->status_details, s->error_string);
		goto fail;
	}
	return s;
fail:
	stream_free(s);
	return NULL;
}

/* Sends bb (borrowed) as one message. */
static int stream_send(struct rpc_stream *s, grpc_byte_buffer *bb, bool buffer_hint)
{
	bool timed_out = false;
	grpc_op op;
	int r;

	pthread_mutex_lock(&s->write_lock);
	if (atomic_load(&s->cancelled) || s->write_broken || s->half_closed) {
		r = -EPIPE;
		goto out;
	}
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_SEND_MESSAGE;
	op.flags = buffer_hint ? GRPC_WRITE_BUFFER_HINT : 0;
	op.data.send_message.send_message = bb;
	if (grpc_call_start_batch(s->call, &op, 1, &s->t_write, NULL) != GRPC_CALL_OK) {
		s->write_broken = true;
		r = -EPIPE;
		goto out;
	}
	/* Flow control can hold this; rpc_stream_cancel() releases it, and
	 * so does the write timeout (by cancelling the call). */
	if (!stream_pluck(s, &s->t_write,
			  s->write_timeout_ms > 0 ? rpc_deadline_after_ms(s->write_timeout_ms)
						  : gpr_inf_future(GPR_CLOCK_MONOTONIC),
			  &timed_out)) {
		s->write_broken = true;
		r = timed_out ? -ETIMEDOUT : -EPIPE;
		goto out;
	}
	r = 0;
out:
	pthread_mutex_unlock(&s->write_lock);
	return r;
}

void rpc_stream_set_write_timeout(struct rpc_stream *s, int timeout_ms)
{
	pthread_mutex_lock(&s->write_lock);
	s->write_timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
	pthread_mutex_unlock(&s->write_lock);
}

int rpc_stream_write(struct rpc_stream *s, const ProtobufCMessage *msg, bool buffer_hint)
{
	grpc_byte_buffer *bb;
	int r;

	if (!s || !msg)
		return -EINVAL;
	bb = rpc_message_to_buffer(msg, NULL);
	r = stream_send(s, bb, buffer_hint);
	grpc_byte_buffer_destroy(bb);
	return r;
}

int rpc_stream_write_raw(struct rpc_stream *s, const void *data, size_t len)
{
	grpc_byte_buffer *bb;
	int r;

	if (!s || (!data && len > 0))
		return -EINVAL;
	bb = rpc_message_bytes_to_buffer(data, len);
	r = stream_send(s, bb, false);
	grpc_byte_buffer_destroy(bb);
	return r;
}

/* Receives one message into *ret_bb (NULL at the end). Returns 0, or
 * -EPIPE (broken); sets read_end when the stream is over. */
static int stream_recv(struct rpc_stream *s, gpr_timespec deadline, bool *timed_out,
		       grpc_byte_buffer **ret_bb)
{
	grpc_byte_buffer *bb = NULL;
	grpc_op op;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &bb;
	if (grpc_call_start_batch(s->call, &op, 1, &s->t_read, NULL) != GRPC_CALL_OK) {
		s->read_end = -EPIPE;
		return -EPIPE;
	}
	if (!stream_pluck(s, &s->t_read, deadline, timed_out)) {
		if (bb)
			grpc_byte_buffer_destroy(bb);
		s->read_end = -EPIPE;
		return -EPIPE;
	}
	*ret_bb = bb;
	return 0;
}

int rpc_stream_read(struct rpc_stream *s, const ProtobufCMessageDescriptor *desc,
		    ProtobufCMessage **ret_msg)
{
	grpc_byte_buffer *bb = NULL;
	ProtobufCMessage *msg;
	int r;

	if (!s || !desc || !ret_msg)
		return -EINVAL;
	if (s->read_end)
		return s->read_end;
	if (atomic_load(&s->cancelled))
		return -EPIPE;
	r = stream_recv(s, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL, &bb);
	if (r < 0)
		return r;
	if (!bb) {
		/* End of the server's messages: clean only if its status is
		 * OK (a cancelled call also ends this way). */
		bool timed_out = false;

		stream_wait_status(s, rpc_deadline_after_ms(READ_STATUS_WAIT_MS), &timed_out);
		s->read_end = !timed_out && s->status == GRPC_STATUS_OK ? -ENODATA : -EPIPE;
		return s->read_end;
	}
	msg = rpc_message_from_buffer(desc, bb);
	grpc_byte_buffer_destroy(bb);
	if (!msg)
		return -EBADMSG;
	*ret_msg = msg;
	return 0;
}

void rpc_stream_cancel(struct rpc_stream *s)
{
	if (!s)
		return;
	atomic_store(&s->cancelled, true);
	grpc_call_cancel(s->call, NULL);
}

/* Sends the half-close once, under the write lock. Returns 0, -EPIPE
 * when the stream is broken, or -ETIMEDOUT (*timed_out set). */
static int stream_half_close(struct rpc_stream *s, gpr_timespec deadline, bool *timed_out)
{
	int r = 0;

	pthread_mutex_lock(&s->write_lock);
	if (atomic_load(&s->cancelled) || s->write_broken) {
		r = -EPIPE;
	} else if (!s->half_closed) {
		grpc_op op;

		memset(&op, 0, sizeof(op));
		op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
		if (grpc_call_start_batch(s->call, &op, 1, &s->t_write, NULL) == GRPC_CALL_OK)
			stream_pluck(s, &s->t_write, deadline, timed_out);
		else
			r = -EPIPE;
		s->half_closed = true;
		if (*timed_out)
			r = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&s->write_lock);
	return r;
}

int rpc_stream_close_send(struct rpc_stream *s)
{
	bool timed_out = false;

	return stream_half_close(s, rpc_deadline_after_ms(5000), &timed_out);
}

int rpc_stream_close(struct rpc_stream *s, int timeout_ms, struct rpc_error *err)
{
	gpr_timespec deadline = rpc_deadline_after_ms(timeout_ms);
	bool timed_out = false;
	int r;

	if (!s)
		return 0;

	stream_half_close(s, deadline, &timed_out);

	/* Messages nobody read hold the status back (gRPC delivers the
	 * trailers after the last message), so read and drop them. */
	while (!timed_out && !s->read_end && !atomic_load(&s->cancelled)) {
		grpc_byte_buffer *bb = NULL;

		if (stream_recv(s, deadline, &timed_out, &bb) < 0)
			break;
		if (!bb) {
			s->read_end = -ENODATA;
			break;
		}
		grpc_byte_buffer_destroy(bb);
	}
	stream_wait_status(s, deadline, &timed_out);

	if (timed_out) {
		error_set(err, RPC_DEADLINE_EXCEEDED, "timed out waiting for the server's status");
		r = -ETIMEDOUT;
	} else {
		r = status_to_errno(s->status);
		if (r < 0)
			error_from_status(err, s->status, &s->status_details, s->error_string);
	}
	stream_free(s);
	return r;
}
