/* rpc_server.c - the server side of the rpc wrapper (see rpc_server.h).
 *
 * One NEXT completion queue served by one loop thread. Every call has a
 * context (struct rpc_call) with a reference count: one reference per
 * pending gRPC batch and one "user" reference while the handler may still
 * use the call pointer. Each op kind has its own tag, so a completion
 * says which batch ended (tags are struct rpc_tag members, the loop calls
 * tag->fn). Per call, at most one RECV_MESSAGE and one send batch
 * (SEND_MESSAGE or the final status) are pending; further writes wait in
 * a bounded queue. A RECV_CLOSE_ON_SERVER batch ("close watch") is
 * started as soon as a call arrives: its completion is the one event that
 * says the call is over, whatever the reason, and it triggers on_close.
 * Timers are driven by the deadline of grpc_completion_queue_next.
 *
 * Every call is judged by rpc_admission.c before its handler runs; Unix
 * listeners are accepted here, so their peers' credentials can be
 * recorded before gRPC reads a byte.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "log.h"
#include "parse.h"
#include "rpc_deadline.h"
#include "rpc_message.h"
#include "rpc_server.h"


#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#define SERVER_MAX_MESSAGE_DEFAULT (16u << 20)
#define SERVER_MAX_QUEUED_DEFAULT (64u << 20)
/* Outstanding request_call()s per method: how many calls to one method
 * can arrive between two turns of the loop without waiting. */
#define REQUESTS_PER_METHOD 4
/* See server_create_grpc(): OpenSSL's bounds are 1 and 16 KiB, and each
 * record costs 29 bytes of overhead (0.7 % at 4 KiB). */
#define RPC_TLS_MAX_FRAME 4096

/* The loop wakes at least this often, so a timer added after start is
 * noticed (the C API has no way to wake a NEXT queue from outside). Not
 * more often: an idle symbolizer's timer sleeps 5 s, and each wakeup
 * costs hundreds of microseconds of CPU on a VM. */
#define LOOP_MAX_SLEEP_MS 5000
#define MAX_UNIX_LISTENERS 16

struct rpc_tag {
	void (*fn)(struct rpc_tag *tag, bool ok);
};

struct rpc_timer {
	int interval_ms;
	void (*fn)(void *ctx);
	void *ctx;
	gpr_timespec due;
};

/* One registered method, or (m == NULL) the catch-all for unknown ones. */
struct server_slot {
	struct rpc_server *server;
	const struct rpc_method *m;
	void *handle;
};

struct write_item {
	struct write_item *next;
	grpc_byte_buffer *bb;
	size_t len;
};

struct rpc_call {
	struct rpc_server *server;
	struct server_slot *slot;
	struct rpc_call *prev, *next; /* server->calls */
	int refs;

	/* Filled by request_call; must stay valid until t_new is back. */
	grpc_call *call;
	gpr_timespec deadline;
	grpc_metadata_array md;
	grpc_call_details details; /* catch-all slot only */
	grpc_byte_buffer *payload; /* unary request */

	char *peer; /* gpr_malloc'd */
	int cancelled; /* RECV_CLOSE_ON_SERVER result */
	grpc_byte_buffer *recv_bb;
	grpc_byte_buffer *send_bb;
	size_t send_len;
	struct write_item *q_head, *q_tail;
	size_t queued_bytes; /* queued plus the one being sent */

	grpc_status_code fin_status;
	grpc_slice fin_details;
	bool has_fin_details;
	grpc_byte_buffer *fin_reply;

	bool md_sent;
	bool recv_pending;
	bool send_pending;
	bool finishing;      /* rpc_call_finish() was called */
	bool finish_started; /* the status batch was started */
	bool closed;         /* the close watch came back: the call is over */
	bool user_ref;
	void *data;

	struct rpc_admission_grant grant; /* what admission learnt of the peer */
	struct rpc_admission_bucket msgs; /* stream messages */

	struct rpc_tag t_new, t_close, t_recv, t_send, t_finish;
};

struct rpc_server {
	grpc_server *srv;
	grpc_completion_queue *cq;
	const struct rpc_method *methods;
	size_t n_methods;
	void *ctx;
	size_t max_message_bytes;
	size_t max_queued_bytes;
	struct server_slot *slots; /* n_methods + 1 */

	pthread_t thread;
	bool thread_running;
	bool started;
	bool stopped;
	atomic_bool stopping;

	/* lock guards the timer array and shutdown_done. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool sync_ready;
	bool shutdown_done;
	struct rpc_tag t_shutdown;
	struct rpc_timer *timers;
	size_t n_timers;

	struct rpc_call *calls; /* every live context */

	/* Authentication and limits (rpc_server_opts). */
	char *tls_cert, *tls_key, *tls_client_ca; /* PEM, NULL: plaintext */
	struct rpc_admission *admission;

	/* Unix listeners accepted here, not by gRPC (SO_PEERCRED). */
	int unix_fds[MAX_UNIX_LISTENERS];
	size_t n_unix;
	int accept_stop_fd; /* eventfd */
	pthread_t accept_thread;
	bool accept_running;
};


static void call_on_new(struct rpc_tag *tag, bool ok);
static void call_on_close(struct rpc_tag *tag, bool ok);
static void call_on_recv(struct rpc_tag *tag, bool ok);
static void call_on_send(struct rpc_tag *tag, bool ok);
static void call_on_finish(struct rpc_tag *tag, bool ok);

static void call_drop_queue(struct rpc_call *c)
{
	while (c->q_head) {
		struct write_item *it = c->q_head;

		c->q_head = it->next;
		c->queued_bytes -= it->len;
		grpc_byte_buffer_destroy(it->bb);
		free(it);
	}
	c->q_tail = NULL;
}

static void call_free(struct rpc_call *c)
{
	struct rpc_server *s = c->server;

	if (c->prev)
		c->prev->next = c->next;
	else if (s->calls == c)
		s->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;

	call_drop_queue(c);
	if (c->call)
		grpc_call_unref(c->call);
	grpc_metadata_array_destroy(&c->md);
	if (!c->slot->m)
		grpc_call_details_destroy(&c->details);
	if (c->payload)
		grpc_byte_buffer_destroy(c->payload);
	if (c->recv_bb)
		grpc_byte_buffer_destroy(c->recv_bb);
	if (c->send_bb)
		grpc_byte_buffer_destroy(c->send_bb);
	if (c->fin_reply)
		grpc_byte_buffer_destroy(c->fin_reply);
	if (c->has_fin_details)
		grpc_slice_unref(c->fin_details);
	gpr_free(c->peer);
	free(c);
}

static void call_unref(struct rpc_call *c)
{
	assert(c->refs > 0);
	if (--c->refs == 0)
		call_free(c);
}

/* Starts a batch holding one reference for its tag. */
static int call_start(struct rpc_call *c, const grpc_op *ops, size_t n, struct rpc_tag *tag)
{
	grpc_call_error e;

	c->refs++;
	e = grpc_call_start_batch(c->call, ops, n, tag, NULL);
	if (e != GRPC_CALL_OK) {
		log_debug("grpc_call_start_batch: error %d", (int)e);
		c->refs--;
		return -EIO;
	}
	return 0;
}

/* Posts one request for a new call on slot. */
static int server_request(struct server_slot *slot)
{
	struct rpc_server *s = slot->server;
	grpc_call_error e;
	struct rpc_call *c;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->server = s;
	c->slot = slot;
	c->refs = 1; /* t_new */
	c->t_new.fn = call_on_new;
	c->t_close.fn = call_on_close;
	c->t_recv.fn = call_on_recv;
	c->t_send.fn = call_on_send;
	c->t_finish.fn = call_on_finish;
	grpc_metadata_array_init(&c->md);
	c->next = s->calls;
	if (s->calls)
		s->calls->prev = c;
	s->calls = c;

	if (!slot->m) {
		grpc_call_details_init(&c->details);
		e = grpc_server_request_call(s->srv, &c->call, &c->details, &c->md, s->cq, s->cq,
					     &c->t_new);
	} else {
		e = grpc_server_request_registered_call(
			s->srv, slot->handle, &c->call, &c->deadline, &c->md,
			slot->m->kind == RPC_UNARY ? &c->payload : NULL, s->cq, s->cq, &c->t_new);
	}
	if (e != GRPC_CALL_OK) {
		call_unref(c);
		return -EIO;
	}
	return 0;
}

/* Starts the next send batch if none is pending: a queued message, or
 * once the queue is empty and the call is finishing, the final status. */
static void call_kick_send(struct rpc_call *c)
{
	grpc_op ops[3];
	size_t n = 0;

	if (c->send_pending || c->closed || c->finish_started)
		return;
	memset(ops, 0, sizeof(ops));
	if (!c->md_sent) {
		ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
		n++;
	}

	if (c->q_head) {
		struct write_item *it = c->q_head;

		c->q_head = it->next;
		if (!c->q_head)
			c->q_tail = NULL;
		c->send_bb = it->bb;
		c->send_len = it->len;
		free(it);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n].data.send_message.send_message = c->send_bb;
		n++;
		c->send_pending = true;
		if (call_start(c, ops, n, &c->t_send) < 0) {
			c->send_pending = false;
			c->queued_bytes -= c->send_len;
			grpc_byte_buffer_destroy(c->send_bb);
			c->send_bb = NULL;
			return;
		}
		c->md_sent = true;
		return;
	}

	if (!c->finishing)
		return;
	if (c->fin_reply) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n].data.send_message.send_message = c->fin_reply;
		n++;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.trailing_metadata_count = 0;
	ops[n].data.send_status_from_server.status = c->fin_status;
	ops[n].data.send_status_from_server.status_details =
		c->has_fin_details ? &c->fin_details : NULL;
	n++;
	c->finish_started = true;
	if (call_start(c, ops, n, &c->t_finish) < 0)
		return; /* the close watch still ends the call */
	c->md_sent = true;
}

static void call_start_recv(struct rpc_call *c)
{
	grpc_op op;

	if (c->recv_pending || c->closed || c->finishing)
		return;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &c->recv_bb;
	c->recv_pending = true;
	if (call_start(c, &op, 1, &c->t_recv) < 0)
		c->recv_pending = false;
}

void rpc_call_finish(struct rpc_call *call, enum rpc_status status, const char *details,
		     const ProtobufCMessage *reply)
{
	struct rpc_call *c = call;

	if (!c || c->finishing)
		return;
	c->finishing = true;
	if (!c->closed) {
		c->fin_status = (grpc_status_code)status;
		if (details) {
			c->fin_details = grpc_slice_from_copied_string(details);
			c->has_fin_details = true;
		}
		/* A reply goes with OK only: with an error, clients ignore it. */
		if (reply && status == RPC_OK && c->slot->m && c->slot->m->kind == RPC_UNARY)
			c->fin_reply = rpc_message_to_buffer(reply, NULL);
		call_kick_send(c);
	}
	/* A unary handler's hold on the call ends here; a bidi one's at
	 * on_close. */
	if (c->user_ref && c->slot->m && c->slot->m->kind == RPC_UNARY) {
		c->user_ref = false;
		call_unref(c);
	}
}

int rpc_call_write(struct rpc_call *call, const ProtobufCMessage *msg)
{
	struct rpc_call *c = call;
	struct write_item *it;
	size_t len;

	if (!c || !msg)
		return -EINVAL;
	if (c->closed || c->finishing)
		return -EPIPE;
	if (!c->slot->m || c->slot->m->kind != RPC_BIDI)
		return -EINVAL;
	len = protobuf_c_message_get_packed_size(msg);
	if (len > c->server->max_queued_bytes ||
	    c->queued_bytes > c->server->max_queued_bytes - len)
		return -ENOBUFS;
	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->bb = rpc_message_to_buffer(msg, &it->len);
	if (c->q_tail)
		c->q_tail->next = it;
	else
		c->q_head = it;
	c->q_tail = it;
	c->queued_bytes += it->len;
	call_kick_send(c);
	return 0;
}

void rpc_call_set_data(struct rpc_call *call, void *data)
{
	if (call)
		call->data = data;
}

void *rpc_call_data(const struct rpc_call *call)
{
	return call ? call->data : NULL;
}

const char *rpc_call_peer(const struct rpc_call *call)
{
	return call && call->peer ? call->peer : "";
}

int rpc_call_peer_uid(const struct rpc_call *call, uint32_t *ret_uid)
{
	if (!call || !call->grant.unix_known)
		return -ENODATA;
	*ret_uid = call->grant.peer.uid;
	return 0;
}

bool rpc_call_peer_is_sensor(const struct rpc_call *call)
{
	return call && call->grant.is_sensor;
}

bool rpc_call_peer_is_admin(const struct rpc_call *call)
{
	return call && call->grant.is_admin;
}

void rpc_call_peer_creds(const struct rpc_call *call, struct rpc_peer *ret)
{
	if (!call) {
		memset(ret, 0, sizeof(*ret));
		ret->transport = RPC_TRANSPORT_UNIX;
		ret->uid = ret->gid = UINT32_MAX;
		ret->pid = -1;
		return;
	}
	*ret = call->grant.peer;
}

static void call_handle_unary(struct rpc_call *c)
{
	const struct rpc_method *m = c->slot->m;
	ProtobufCMessage *req;

	if (!m->on_call) {
		rpc_call_finish(c, RPC_UNIMPLEMENTED, "no handler", NULL);
		return;
	}
	/* No payload: the client half-closed without a message. */
	req = c->payload ? rpc_message_from_buffer(m->request, c->payload) : NULL;
	if (!req) {
		rpc_call_finish(c, RPC_INVALID_ARGUMENT, "request does not decode", NULL);
		return;
	}
	c->user_ref = true;
	c->refs++;
	m->on_call(c, req, c->server->ctx);
	protobuf_c_message_free_unpacked(req, NULL);
}

static void call_handle_bidi(struct rpc_call *c)
{
	const struct rpc_method *m = c->slot->m;

	c->user_ref = true;
	c->refs++;
	if (m->on_open)
		m->on_open(c, c->server->ctx);
	call_start_recv(c);
}

static void call_on_new(struct rpc_tag *tag, bool ok)
{
	struct rpc_call *c = container_of(tag, struct rpc_call, t_new);
	struct rpc_server *s = c->server;
	const char *reason = NULL;
	enum rpc_status st;
	grpc_op op;

	if (!ok) {
		/* Shutdown: the request is returned unused. */
		call_unref(c);
		return;
	}
	/* Replace the request, so the method keeps its outstanding count. */
	if (!atomic_load(&s->stopping) && server_request(c->slot) < 0)
		log_debug("cannot request a new call, ignoring");

	c->peer = grpc_call_get_peer(c->call);
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &c->cancelled;
	if (call_start(c, &op, 1, &c->t_close) < 0) {
		/* Cannot watch the call: give up on it at once. */
		c->closed = true;
		grpc_call_cancel(c->call, NULL);
		call_unref(c);
		return;
	}

	if (!c->slot->m)
		rpc_call_finish(c, RPC_UNIMPLEMENTED, "unknown method", NULL);
	else if ((st = rpc_admission_check_call(s->admission, c->call, c->peer, c->slot->m->path,
						c->slot->m->role, c->slot->m->kind == RPC_UNARY,
						&c->grant, &reason)) != RPC_OK)
		rpc_call_finish(c, st, reason, NULL);
	else if (c->slot->m->kind == RPC_UNARY)
		call_handle_unary(c);
	else
		call_handle_bidi(c);
	call_unref(c); /* t_new's */
}

static void call_on_close(struct rpc_tag *tag, bool ok)
{
	struct rpc_call *c = container_of(tag, struct rpc_call, t_close);
	const struct rpc_method *m = c->slot->m;

	c->closed = true;
	call_drop_queue(c);
	if (c->user_ref && m && m->kind == RPC_BIDI) {
		if (m->on_close)
			m->on_close(c, c->server->ctx);
		c->user_ref = false;
		call_unref(c); /* not the last: t_close's is still held */
	} else if (c->user_ref && !c->finish_started && !c->recv_pending && !c->send_pending) {
		/* A unary handler still holds the call (deferred finish) but the
		 * call is cancelled: no batch is pending, so release the gRPC
		 * call now. The server's shutdown waits for it, and a handler
		 * that never finishes must not hold the stop up. */
		grpc_call_unref(c->call);
		c->call = NULL;
	}
	call_unref(c);
}

static void call_on_recv(struct rpc_tag *tag, bool ok)
{
	struct rpc_call *c = container_of(tag, struct rpc_call, t_recv);
	const struct rpc_method *m = c->slot->m;
	grpc_byte_buffer *bb = c->recv_bb;
	const char *reason = NULL;
	enum rpc_status st;
	ProtobufCMessage *msg;

	c->recv_bb = NULL;
	c->recv_pending = false;
	if (!ok || c->closed || c->finishing) {
		if (bb)
			grpc_byte_buffer_destroy(bb);
		goto out;
	}
	if (!bb) {
		/* The client half-closed. */
		if (m->on_message)
			m->on_message(c, NULL, c->server->ctx);
		goto out;
	}
	st = rpc_admission_check_message(c->server->admission, &c->msgs, &reason);
	if (st != RPC_OK) {
		grpc_byte_buffer_destroy(bb);
		rpc_call_finish(c, st, reason, NULL);
		goto out;
	}
	msg = rpc_message_from_buffer(m->request, bb);
	grpc_byte_buffer_destroy(bb);
	if (!msg) {
		rpc_call_finish(c, RPC_INVALID_ARGUMENT, "message does not decode", NULL);
		goto out;
	}
	if (m->on_message)
		m->on_message(c, msg, c->server->ctx);
	protobuf_c_message_free_unpacked(msg, NULL);
	call_start_recv(c);
out:
	call_unref(c);
}

static void call_on_send(struct rpc_tag *tag, bool ok)
{
	struct rpc_call *c = container_of(tag, struct rpc_call, t_send);

	grpc_byte_buffer_destroy(c->send_bb);
	c->send_bb = NULL;
	c->queued_bytes -= c->send_len;
	c->send_len = 0;
	c->send_pending = false;
	if (ok)
		call_kick_send(c);
	else
		call_drop_queue(c); /* the call is dead; the close watch reports it */
	call_unref(c);
}

static void call_on_finish(struct rpc_tag *tag, bool ok)
{
	struct rpc_call *c = container_of(tag, struct rpc_call, t_finish);

	if (c->fin_reply) {
		grpc_byte_buffer_destroy(c->fin_reply);
		c->fin_reply = NULL;
	}
	call_unref(c);
}

static void server_on_shutdown(struct rpc_tag *tag, bool ok)
{
	struct rpc_server *s = container_of(tag, struct rpc_server, t_shutdown);

	pthread_mutex_lock(&s->lock);
	s->shutdown_done = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Runs the timers that are due. The lock is dropped around each callback,
 * so a callback may add timers. */
static void server_run_timers(struct rpc_server *s)
{
	gpr_timespec now = gpr_now(GPR_CLOCK_MONOTONIC);

	for (size_t i = 0;; i++) {
		void (*fn)(void *ctx) = NULL;
		void *ctx = NULL;

		pthread_mutex_lock(&s->lock);
		if (i >= s->n_timers) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		if (gpr_time_cmp(s->timers[i].due, now) <= 0) {
			fn = s->timers[i].fn;
			ctx = s->timers[i].ctx;
			/* From now, not from due: a slow loop skips ticks rather
			 * than running a burst of them. */
			s->timers[i].due = gpr_time_add(
				now, gpr_time_from_millis(s->timers[i].interval_ms, GPR_TIMESPAN));
		}
		pthread_mutex_unlock(&s->lock);
		if (fn)
			fn(ctx);
	}
}

static gpr_timespec server_next_deadline(struct rpc_server *s)
{
	gpr_timespec dl = rpc_deadline_after_ms(LOOP_MAX_SLEEP_MS);

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_timers; i++)
		if (gpr_time_cmp(s->timers[i].due, dl) < 0)
			dl = s->timers[i].due;
	pthread_mutex_unlock(&s->lock);
	return dl;
}

/* One turn of the loop. Returns false once the queue is shut down. */
static bool server_turn(struct rpc_server *s, bool run_timers)
{
	grpc_event ev = grpc_completion_queue_next(s->cq, server_next_deadline(s), NULL);

	if (ev.type == GRPC_QUEUE_SHUTDOWN)
		return false;
	if (ev.type == GRPC_OP_COMPLETE) {
		struct rpc_tag *tag = ev.tag;

		tag->fn(tag, ev.success != 0);
	}
	if (run_timers)
		server_run_timers(s);
	return true;
}

static void *server_loop(void *arg)
{
	struct rpc_server *s = arg;

	while (server_turn(s, true))
		;
	return NULL;
}

/* Reads the PEM files of t into s (now: the caller may sandbox itself
 * before listening). Returns 0 or a negative errno (logged). */
static int server_read_tls(struct rpc_server *s, const struct rpc_tls *t)
{
	int err = -EINVAL;

	if (!t->cert || !t->key || !t->ca || (err = rpc_pem_read(t->cert, &s->tls_cert)) < 0 ||
	    (err = rpc_pem_read(t->key, &s->tls_key)) < 0 ||
	    (err = rpc_pem_read(t->ca, &s->tls_client_ca)) < 0) {
		log_error_errno(err, "cannot read the TLS certificate, key or client CA");
		return err;
	}
	return 0;
}

/* The lock and the condition variable (on CLOCK_MONOTONIC) of s. Returns
 * 0, or -1 with neither left initialised. */
static int server_init_sync(struct rpc_server *s)
{
	pthread_condattr_t cattr;

	if (pthread_mutex_init(&s->lock, NULL) != 0)
		return -1;
	if (pthread_condattr_init(&cattr) != 0) {
		pthread_mutex_destroy(&s->lock);
		return -1;
	}
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	if (pthread_cond_init(&s->cond, &cattr) != 0) {
		pthread_condattr_destroy(&cattr);
		pthread_mutex_destroy(&s->lock);
		return -1;
	}
	pthread_condattr_destroy(&cattr);
	s->sync_ready = true;
	return 0;
}

/* The completion queue and the gRPC server of s. Returns 0 or -1
 * (logged). */
static int server_create_grpc(struct rpc_server *s)
{
	grpc_channel_args args;
	grpc_arg arg[4];
	size_t max_msg;

	/* gRPC itself refuses bigger messages with RESOURCE_EXHAUSTED. */
	max_msg = s->max_message_bytes > INT_MAX ? INT_MAX : s->max_message_bytes;
	memset(arg, 0, sizeof(arg));
	arg[0].type = GRPC_ARG_INTEGER;
	arg[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	arg[0].value.integer = (int)max_msg;
	/* No bandwidth-delay probes: each is a PING and a wakeup on both
	 * sides per burst of data, for window tuning a sensor stream does not
	 * need (it sends a batch every few seconds). */
	arg[1].type = GRPC_ARG_INTEGER;
	arg[1].key = GRPC_ARG_HTTP2_BDP_PROBE;
	arg[1].value.integer = 0;
	/* No keepalive timer (the server default is a ping every 2 h): gRPC
	 * re-arms it on every read, and any pending timer makes its timer
	 * thread wake about once a second; a dead sensor shows as a closed
	 * or reset connection, and sensors send every few seconds. */
	arg[2].type = GRPC_ARG_INTEGER;
	arg[2].key = GRPC_ARG_KEEPALIVE_TIME_MS;
	arg[2].value.integer = INT_MAX;
	/* TLS records of at most RPC_TLS_MAX_FRAME bytes from this side: the
	 * frame protector of every TLS connection holds a buffer of that
	 * size for its lifetime (16 KiB by default, 8 MiB at 500 sensors). */
	arg[3].type = GRPC_ARG_INTEGER;
	arg[3].key = GRPC_ARG_TSI_MAX_FRAME_SIZE;
	arg[3].value.integer = RPC_TLS_MAX_FRAME;
	args.num_args = 4;
	args.args = arg;

	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->srv = grpc_server_create(&args, NULL);
	if (!s->cq || !s->srv) {
		log_error("cannot create the gRPC server");
		return -1;
	}
	grpc_server_register_completion_queue(s->srv, s->cq, NULL);
	return 0;
}

/* One slot per method of s, registered with gRPC, and the catch-all slot
 * for unknown methods last. Returns 0 or -1 (logged). */
static int server_register_methods(struct rpc_server *s)
{
	s->slots = calloc(s->n_methods + 1, sizeof(*s->slots));
	if (!s->slots) {
		log_error_errno(-ENOMEM, "cannot allocate the method table");
		return -1;
	}
	for (size_t i = 0; i < s->n_methods; i++) {
		const struct rpc_method *m = &s->methods[i];

		if (!m->path || m->path[0] != '/' || !m->request ||
		    (m->kind != RPC_UNARY && m->kind != RPC_BIDI)) {
			log_error("bad method table entry %zu", i);
			return -1;
		}
		s->slots[i].server = s;
		s->slots[i].m = m;
		s->slots[i].handle = grpc_server_register_method(
			s->srv, m->path, NULL,
			m->kind == RPC_UNARY ? GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER
					     : GRPC_SRM_PAYLOAD_NONE,
			0);
		if (!s->slots[i].handle) {
			log_error("cannot register method %s (duplicate?)", m->path);
			return -1;
		}
	}
	s->slots[s->n_methods].server = s;
	s->slots[s->n_methods].m = NULL;
	return 0;
}

/* The admission policy of opts (NULL: no authorize(), no limits). */
static struct rpc_admission_policy server_policy(const struct rpc_server_opts *opts, void *ctx)
{
	struct rpc_admission_policy policy = { .ctx = ctx };

	if (opts) {
		policy.authorize = opts->authorize;
		policy.stream_msgs_per_s = opts->stream_msgs_per_s;
		policy.stream_burst = opts->stream_burst;
		policy.unary_calls_per_s = opts->unary_calls_per_s;
		policy.unary_burst = opts->unary_burst;
	}
	return policy;
}

struct rpc_server *rpc_server_new(const struct rpc_method *methods, size_t n_methods, void *ctx,
				  const struct rpc_server_opts *opts)
{
	struct rpc_admission_policy policy = server_policy(opts, ctx);
	struct rpc_server *s = NULL;

	if (!methods && n_methods > 0) {
		log_error("no method table");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		log_error_errno(-ENOMEM, "cannot allocate the server");
		return NULL;
	}
	s->methods = methods;
	s->n_methods = n_methods;
	s->ctx = ctx;
	s->max_message_bytes = opts && opts->max_message_bytes ? opts->max_message_bytes
							       : SERVER_MAX_MESSAGE_DEFAULT;
	s->max_queued_bytes = opts && opts->max_queued_bytes ? opts->max_queued_bytes
							     : SERVER_MAX_QUEUED_DEFAULT;
	s->t_shutdown.fn = server_on_shutdown;
	atomic_init(&s->stopping, false);
	s->accept_stop_fd = -1;
	s->admission = rpc_admission_new(&policy);
	if (!s->admission) {
		free(s);
		return NULL;
	}
	if (opts && opts->tls && server_read_tls(s, opts->tls) < 0)
		goto fail_early;
	if (server_init_sync(s) < 0 || server_create_grpc(s) < 0 || server_register_methods(s) < 0)
		goto fail;
	return s;
fail:
	rpc_server_free(s);
	return NULL;
fail_early:
	free(s->tls_cert);
	free(s->tls_key);
	free(s->tls_client_ca);
	rpc_admission_free(s->admission);
	free(s);
	return NULL;
}

/* Binds a Unix stream socket at path, mode 0660, and listens. */
static int unix_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old_mask;
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* Like gRPC: a stale socket file from a killed server is replaced. */
	{
		struct stat st;

		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(path);
	}
	/* The mode comes from the umask at bind(): a chmod(path) after it,
	 * as root, would follow a symlink put in the socket's place. */
	old_mask = umask(0117);
	err = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_mask);
	if (err < 0 || listen(fd, 128) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* Accepts one connection on a Unix listener, records who is on the other
 * side, and hands the socket to gRPC. */
static void unix_accept_one(struct rpc_server *s, int lfd)
{
	grpc_server_credentials *creds;
	int fd, err;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_debug("accept4 on a Unix listener: %s", strerror(errno));
		return;
	}
	err = rpc_admission_add_unix(s->admission, fd);
	if (err < 0) {
		log_debug("SO_PEERCRED: %s, closing the connection", strerror(-err));
		close(fd);
		return;
	}
	/* gRPC 1.51 takes only insecure credentials here (a local socket). */
	creds = grpc_insecure_server_credentials_create();
	grpc_server_add_channel_from_fd(s->srv, fd, creds);
	grpc_server_credentials_release(creds);
}

static void *unix_accept_loop(void *arg)
{
	struct rpc_server *s = arg;
	struct pollfd pfd[MAX_UNIX_LISTENERS + 1];

	for (;;) {
		size_t n = 0;

		pfd[n].fd = s->accept_stop_fd;
		pfd[n++].events = POLLIN;
		for (size_t i = 0; i < s->n_unix; i++) {
			pfd[n].fd = s->unix_fds[i];
			pfd[n++].events = POLLIN;
		}
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error_errno(-errno, "poll on the Unix listeners");
			return NULL;
		}
		if (pfd[0].revents)
			return NULL;
		for (size_t i = 1; i < n; i++)
			if (pfd[i].revents & POLLIN)
				unix_accept_one(s, pfd[i].fd);
	}
}

int rpc_server_listen(struct rpc_server *s, const char *addr, int *ret_port)
{
	grpc_server_credentials *creds = NULL;
	const char *bind_addr;
	const char *path = NULL;
	struct stat st;
	int port;
	int err;

	if (!s || !addr || s->started || s->stopped)
		return -EINVAL;
	if (strncmp(addr, "unix:", 5) == 0) {
		int fd;

		path = addr + 5;
		if (path[0] != '/')
			return -EINVAL;
		if (s->n_unix == MAX_UNIX_LISTENERS)
			return -EMFILE;
		/* Our own listener: gRPC 1.51 has no API for SO_PEERCRED, so
		 * rpc_server.c accepts and hands each connection over (see
		 * unix_accept_one). Guarded by its file mode, too. */
		fd = unix_listen(path);
		if (fd < 0) {
			log_debug("cannot listen on %s", addr);
			return fd;
		}
		s->unix_fds[s->n_unix++] = fd;
		if (ret_port)
			*ret_port = 0;
		return 0;
	} else if (strncmp(addr, "tcp:", 4) == 0) {
		const char *colon = strrchr(addr + 4, ':');
		uint32_t p;

		if (!colon || colon == addr + 4 || parse_u32(colon + 1, 10, &p) < 0 || p > 65535)
			return -EINVAL;
		bind_addr = addr + 4; /* "HOST:PORT" */
		if (s->tls_cert) {
			grpc_ssl_pem_key_cert_pair pair = { s->tls_key, s->tls_cert };

			/* Mutual TLS: no certificate, or one the CA did not sign,
			 * fails the handshake before any call. */
			creds = grpc_ssl_server_credentials_create_ex(
				s->tls_client_ca, &pair, 1,
				GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, NULL);
		} else {
			creds = grpc_insecure_server_credentials_create();
		}
	} else {
		return -EINVAL;
	}
	if (!creds)
		return -ENOMEM;

	/* gRPC 1.51 binds and listens inside add_http2_port (the socket file
	 * exists when it returns; test-rpc checks the mode right after). */
	port = grpc_server_add_http2_port(s->srv, bind_addr, creds);
	if (port <= 0) {
		err = -EADDRNOTAVAIL;
		if (path) {
			char dir[PATH_MAX];
			const char *slash = strrchr(path, '/');
			size_t n = (size_t)(slash - path);

			if (n == 0)
				n = 1;
			if (n < sizeof(dir)) {
				memcpy(dir, path, n);
				dir[n] = '\0';
				if (stat(dir, &st) < 0)
					err = -errno;
			}
		}
		log_debug("cannot listen on %s", addr);
		goto cleanup;
	}
	if (ret_port)
		*ret_port = port;
	err = 0;
cleanup:
	grpc_server_credentials_release(creds);
	return err;
}

int rpc_server_add_timer(struct rpc_server *s, int interval_ms, void (*fn)(void *ctx), void *ctx)
{
	struct rpc_timer *t;

	if (!s || interval_ms <= 0 || !fn)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	t = realloc(s->timers, (s->n_timers + 1) * sizeof(*t));
	if (!t) {
		pthread_mutex_unlock(&s->lock);
		return -ENOMEM;
	}
	s->timers = t;
	t[s->n_timers].interval_ms = interval_ms;
	t[s->n_timers].fn = fn;
	t[s->n_timers].ctx = ctx;
	t[s->n_timers].due = rpc_deadline_after_ms(interval_ms);
	s->n_timers++;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void rpc_server_timer_delay(struct rpc_server *s, void (*fn)(void *ctx), int ms, bool sooner_only)
{
	gpr_timespec due = rpc_deadline_after_ms(ms);

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_timers; i++)
		if (s->timers[i].fn == fn &&
		    (!sooner_only || gpr_time_cmp(due, s->timers[i].due) < 0))
			s->timers[i].due = due;
	pthread_mutex_unlock(&s->lock);
}

int rpc_server_start(struct rpc_server *s)
{
	int err;

	if (!s || s->started || s->stopped)
		return -EINVAL;
	grpc_server_start(s->srv);
	s->started = true;
	for (size_t i = 0; i <= s->n_methods; i++) {
		for (int k = 0; k < REQUESTS_PER_METHOD; k++) {
			err = server_request(&s->slots[i]);
			if (err < 0)
				return err; /* rpc_server_stop() cleans up */
		}
	}
	err = -pthread_create(&s->thread, NULL, server_loop, s);
	if (err < 0)
		return err;
	s->thread_running = true;
	if (s->n_unix > 0) {
		s->accept_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (s->accept_stop_fd < 0)
			return -errno;
		err = -pthread_create(&s->accept_thread, NULL, unix_accept_loop, s);
		if (err < 0)
			return err;
		s->accept_running = true;
	}
	return 0;
}

/* Stops accepting on the Unix listeners and closes them. */
static void unix_listeners_close(struct rpc_server *s)
{
	if (s->accept_running) {
		uint64_t one = 1;

		if (write(s->accept_stop_fd, &one, sizeof(one)) < 0)
			log_debug("cannot wake the accept thread: %s", strerror(errno));
		pthread_join(s->accept_thread, NULL);
		s->accept_running = false;
	}
	if (s->accept_stop_fd >= 0) {
		close(s->accept_stop_fd);
		s->accept_stop_fd = -1;
	}
	for (size_t i = 0; i < s->n_unix; i++) {
		struct sockaddr_un sa;
		socklen_t len = sizeof(sa);

		/* Remove the socket file, as gRPC's own listeners do; a
		 * sandboxed server may not be allowed to (ignored). */
		if (getsockname(s->unix_fds[i], (struct sockaddr *)&sa, &len) == 0 &&
		    sa.sun_family == AF_UNIX && sa.sun_path[0] == '/')
			unlink(sa.sun_path);
		close(s->unix_fds[i]);
	}
	s->n_unix = 0;
}

/* Waits for the shutdown tag for up to wait_ms (< 0: no limit). Without a
 * loop thread, runs the loop here. Returns true if the tag came. */
static bool server_wait_shutdown(struct rpc_server *s, int wait_ms)
{
	struct timespec ts;
	bool done;

	if (!s->thread_running) {
		gpr_timespec deadline = rpc_deadline_after_ms(wait_ms);

		for (;;) {
			pthread_mutex_lock(&s->lock);
			done = s->shutdown_done;
			pthread_mutex_unlock(&s->lock);
			if (done || gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), deadline) >= 0)
				return done;
			server_turn(s, false);
		}
	}

	/* The condition variable runs on CLOCK_MONOTONIC (rpc_server_new);
	 * its deadline is computed from that clock, not from gpr's. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (wait_ms >= 0) {
		ts.tv_sec += wait_ms / 1000;
		ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&s->lock);
	while (!s->shutdown_done) {
		if (wait_ms < 0)
			pthread_cond_wait(&s->cond, &s->lock);
		else if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
			break;
	}
	done = s->shutdown_done;
	pthread_mutex_unlock(&s->lock);
	return done;
}

void rpc_server_stop(struct rpc_server *s, int grace_ms)
{
	if (!s || s->stopped)
		return;
	s->stopped = true;
	atomic_store(&s->stopping, true);
	unix_listeners_close(s);

	if (s->srv) { /* also never started: gRPC wants its listeners shut down */
		grpc_server_shutdown_and_notify(s->srv, s->cq, &s->t_shutdown);
		if (!server_wait_shutdown(s, grace_ms < 0 ? 0 : grace_ms)) {
			log_debug("grace period over, cancelling remaining calls");
			grpc_server_cancel_all_calls(s->srv);
			server_wait_shutdown(s, -1);
		}
	}
	if (s->srv) {
		grpc_server_destroy(s->srv);
		s->srv = NULL;
	}
	if (s->cq) {
		grpc_completion_queue_shutdown(s->cq);
		if (s->thread_running) {
			pthread_join(s->thread, NULL);
			s->thread_running = false;
		} else {
			/* Never started, or no thread: drain here. */
			while (server_turn(s, false))
				;
		}
		grpc_completion_queue_destroy(s->cq);
		s->cq = NULL;
	}
	/* Every batch is back. What is left are unary calls whose handler
	 * never finished them; nothing can run their handler any more. */
	while (s->calls)
		call_free(s->calls);
}

void rpc_server_free(struct rpc_server *s)
{
	if (!s)
		return;
	if (s->sync_ready)
		rpc_server_stop(s, 0);
	else if (s->srv || s->cq) {
		/* Half-built: nothing was started and no lock is needed. */
		if (s->srv)
			grpc_server_destroy(s->srv);
		if (s->cq) {
			grpc_completion_queue_shutdown(s->cq);
			while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
							  NULL)
				       .type != GRPC_QUEUE_SHUTDOWN)
				;
			grpc_completion_queue_destroy(s->cq);
		}
	}
	unix_listeners_close(s);
	if (s->sync_ready) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->lock);
	}
	rpc_admission_free(s->admission);
	free(s->tls_cert);
	free(s->tls_key);
	free(s->tls_client_ca);
	free(s->timers);
	free(s->slots);
	free(s);
}
