/* rpc.c - the one wrapper over gRPC core 1.51 and protobuf-c (see rpc.h).
 *
 * Server: one NEXT completion queue served by one loop thread. Every call
 * has a context (struct rpc_call) with a reference count: one reference
 * per pending gRPC batch and one "user" reference while the handler may
 * still use the call pointer. Each op kind has its own tag, so a
 * completion says which batch ended (tags are struct rpc_tag members, the
 * loop calls tag->fn). Per call, at most one RECV_MESSAGE and one send
 * batch (SEND_MESSAGE or the final status) are pending; further writes
 * wait in a bounded queue. A RECV_CLOSE_ON_SERVER batch ("close watch")
 * is started as soon as a call arrives: its completion is the one event
 * that says the call is over, whatever the reason, and it triggers
 * on_close. Timers are driven by the deadline of grpc_completion_queue_next.
 *
 * Client: blocking calls on pluck completion queues, one per unary call
 * and one per stream. Every client call requests RECV_INITIAL_METADATA
 * together with RECV_STATUS_ON_CLIENT at once: without it a call that
 * breaks before the server sent headers never reports its status
 * (GRPC-C-CORE.md 5.1).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "log.h"
#include "parse.h"
#include "rpc.h"
#include "rpc_testing.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#define SERVER_MAX_MESSAGE_DEFAULT (16u << 20)
#define SERVER_MAX_QUEUED_DEFAULT (64u << 20)
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
 * once a second per phase, with no timer pending. A wakeup costs 0.1-0.3 ms
 * of CPU on a VM (docs/benchmarks.md). */
#define CONNECT_ATTEMPT_TIMEOUT_MS 5000
/* Outstanding request_call()s per method: how many calls to one method
 * can arrive between two turns of the loop without waiting. */
#define REQUESTS_PER_METHOD 4
/* The loop wakes at least this often, so a timer added after start is
 * noticed (the C API has no way to wake a NEXT queue from outside). Not
 * more often: an idle symbolizer's timer sleeps 5 s, and each wakeup
 * costs hundreds of microseconds of CPU on a VM. */
#define LOOP_MAX_SLEEP_MS 5000
/* After the server's end of stream, how long a reader waits for the
 * status that says whether the end was clean. The status follows the
 * trailers at once; this only bounds a misbehaving peer. */
#define READ_STATUS_WAIT_MS 5000

/* Connections the server tracks (Unix peers' credentials, per-connection
 * rate buckets). More live connections than this: the oldest entry is
 * reused, and a Unix peer whose entry is gone is denied (fail closed). */
#define CONN_TABLE_SIZE 4096
#define MAX_UNIX_LISTENERS 16
#define MAX_PEM_BYTES (1u << 20)

/* ---- shared helpers ---- */

/* Reads a PEM file into a NUL-terminated malloc'd string. */
static int read_pem(const char *path, char **ret)
{
	char *buf = NULL;
	size_t len = 0;
	ssize_t n;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	buf = malloc(MAX_PEM_BYTES + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (len < MAX_PEM_BYTES && (n = read(fd, buf + len, MAX_PEM_BYTES - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		len += (size_t)n;
	}
	close(fd);
	if (err == 0 && (len == 0 || len == MAX_PEM_BYTES))
		err = -EBADMSG;
	if (err < 0) {
		free(buf);
		return err;
	}
	buf[len] = '\0';
	*ret = buf;
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A token bucket: rate tokens per second, at most burst. */
struct bucket {
	double tokens;
	uint64_t last_ns;
	bool primed;
};

static bool bucket_take(struct bucket *b, uint32_t rate, uint32_t burst)
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

static gpr_timespec deadline_after_ms(int ms)
{
	if (ms < 0)
		return gpr_inf_future(GPR_CLOCK_MONOTONIC);
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
			    gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* Packs msg into a new byte buffer (destroy it after its batch is done). */
static grpc_byte_buffer *rpc_pack(const ProtobufCMessage *msg, size_t *ret_len)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	grpc_slice slice = grpc_slice_malloc(len);
	grpc_byte_buffer *bb;

	protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(slice));
	bb = grpc_raw_byte_buffer_create(&slice, 1); /* takes its own ref */
	grpc_slice_unref(slice);
	if (ret_len)
		*ret_len = len;
	return bb;
}

/* Decodes bb (borrowed). NULL if it does not decode. */
static ProtobufCMessage *rpc_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb)
{
	grpc_byte_buffer_reader reader;
	ProtobufCMessage *msg;
	grpc_slice slice;

	if (!grpc_byte_buffer_reader_init(&reader, bb))
		return NULL;
	/* protobuf-c needs one contiguous buffer: readall joins the slices. */
	slice = grpc_byte_buffer_reader_readall(&reader);
	msg = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(slice),
					GRPC_SLICE_START_PTR(slice));
	grpc_slice_unref(slice);
	grpc_byte_buffer_reader_destroy(&reader);
	return msg;
}

void rpc_message_free(ProtobufCMessage *msg)
{
	if (msg)
		protobuf_c_message_free_unpacked(msg, NULL);
}

int rpc_message_pack(const ProtobufCMessage *msg, size_t max, uint8_t **ret, size_t *ret_len)
{
	size_t size = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf;

	if (size > max)
		return -E2BIG;
	buf = malloc(size ? size : 1);
	if (!buf)
		return -ENOMEM;
	if (protobuf_c_message_pack(msg, buf) != size) {
		free(buf); /* cannot happen: the size was computed from msg */
		return -EIO;
	}
	*ret = buf;
	*ret_len = size;
	return 0;
}

/* ---- server ---- */

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

	bool is_unix;       /* peer_uid is known */
	uint32_t peer_uid;
	bool is_sensor;     /* authorize() granted RPC_ROLE_SENSOR */
	bool is_admin;      /* authorize() granted RPC_ROLE_ADMIN */
	/* The peer as authorize() saw it (certificate names not kept). */
	struct rpc_peer peer_creds;
	struct bucket msgs; /* stream messages */

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
	bool (*authorize)(const struct rpc_peer *peer, enum rpc_role role, void *ctx);
	uint32_t stream_rate, stream_burst, unary_rate, unary_burst;

	/* Unix listeners rpc.c accepts on itself (SO_PEERCRED). */
	int unix_fds[MAX_UNIX_LISTENERS];
	size_t n_unix;
	int accept_stop_fd; /* eventfd */
	pthread_t accept_thread;
	bool accept_running;

	/* conn_lock guards conns (the accept thread writes Unix entries). */
	pthread_mutex_t conn_lock;
	struct conn_entry *conns; /* CONN_TABLE_SIZE */
	uint64_t conn_clock;
};

/* One connection: found by the peer string gRPC gives its calls. */
struct conn_entry {
	char key[64];
	bool used;
	bool is_unix;
	uint32_t uid, gid;
	int32_t pid;
	uint32_t groups[RPC_PEER_MAX_GROUPS];
	size_t n_groups;
	struct bucket unary;
	uint64_t last_used;
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
			c->fin_reply = rpc_pack(reply, NULL);
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
	it->bb = rpc_pack(msg, &it->len);
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
	if (!call || !call->is_unix)
		return -ENODATA;
	*ret_uid = call->peer_uid;
	return 0;
}

bool rpc_call_peer_is_sensor(const struct rpc_call *call)
{
	return call && call->is_sensor;
}

bool rpc_call_peer_is_admin(const struct rpc_call *call)
{
	return call && call->is_admin;
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
	*ret = call->peer_creds;
}

/* ---- peers: credentials, certificates, rate buckets ---- */

/* The peer string gRPC gives calls on a channel made from an fd
 * (grpc_server_add_channel_from_fd names the endpoint after the fd). */
static void conn_key_for_fd(int fd, char *buf, size_t size)
{
	snprintf(buf, size, "fd:%d", fd);
}

/* Under conn_lock. Returns the entry for key, or NULL. */
static struct conn_entry *conn_find(struct rpc_server *s, const char *key)
{
	for (size_t i = 0; i < CONN_TABLE_SIZE; i++)
		if (s->conns[i].used && strcmp(s->conns[i].key, key) == 0)
			return &s->conns[i];
	return NULL;
}

/* Under conn_lock. A free entry, or the least recently used one. */
static struct conn_entry *conn_slot(struct rpc_server *s)
{
	struct conn_entry *lru = &s->conns[0];

	for (size_t i = 0; i < CONN_TABLE_SIZE; i++) {
		if (!s->conns[i].used)
			return &s->conns[i];
		if (s->conns[i].last_used < lru->last_used)
			lru = &s->conns[i];
	}
	return lru;
}

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

/* Decides whether call c may go on: the method's role, and the unary rate
 * of its connection. Returns RPC_OK or the status to end it with. */
static enum rpc_status call_authorize(struct rpc_call *c)
{
	struct rpc_server *s = c->server;
	const struct rpc_method *m = c->slot->m;
	grpc_auth_context *actx = NULL;
	struct rpc_peer peer;
	struct conn_entry *e;
	enum rpc_status st = RPC_OK;
	bool known = false, rate_ok = true;

	memset(&peer, 0, sizeof(peer));
	pthread_mutex_lock(&s->conn_lock);
	e = c->peer ? conn_find(s, c->peer) : NULL;
	if (e && e->is_unix) {
		peer.transport = RPC_TRANSPORT_UNIX;
		peer.uid = e->uid;
		peer.gid = e->gid;
		peer.pid = e->pid;
		peer.n_groups = e->n_groups;
		memcpy(peer.groups, e->groups, e->n_groups * sizeof(e->groups[0]));
		c->is_unix = true;
		c->peer_uid = e->uid;
		known = true;
	} else if (!e && c->peer && strncmp(c->peer, "fd:", 3) != 0) {
		/* TCP: the first call of a connection adds it. */
		e = conn_slot(s);
		memset(e, 0, sizeof(*e));
		snprintf(e->key, sizeof(e->key), "%s", c->peer);
		e->used = true;
	}
	if (e) {
		e->last_used = ++s->conn_clock;
		if (m && m->kind == RPC_UNARY)
			rate_ok = bucket_take(&e->unary, s->unary_rate, s->unary_burst);
	}
	pthread_mutex_unlock(&s->conn_lock);

	if (!known) {
		if (c->peer && strncmp(c->peer, "fd:", 3) == 0) {
			/* A Unix connection whose entry is gone: nobody to trust. */
			peer.transport = RPC_TRANSPORT_UNIX;
			peer.uid = peer.gid = UINT32_MAX;
			peer.pid = -1;
		} else {
			peer.transport = peer_from_tls(c->call, &peer, &actx) ? RPC_TRANSPORT_TLS
									      : RPC_TRANSPORT_INSECURE;
		}
	}
	c->is_sensor = s->authorize && peer.uid != UINT32_MAX &&
		       s->authorize(&peer, RPC_ROLE_SENSOR, s->ctx);
	c->is_admin = s->authorize && peer.uid != UINT32_MAX &&
		      s->authorize(&peer, RPC_ROLE_ADMIN, s->ctx);
	c->peer_creds = peer;
	c->peer_creds.n_names = 0; /* borrowed from actx, released below */
	if (m && m->role != RPC_ROLE_ANY) {
		bool ok = m->role == RPC_ROLE_SENSOR ? c->is_sensor
			  : s->authorize && peer.uid != UINT32_MAX && s->authorize(&peer, m->role, s->ctx);

		if (!ok) {
			log_debug("%s: peer %.100s may not call %s", m->path, c->peer ? c->peer : "?",
				  m->path);
			st = RPC_PERMISSION_DENIED;
		}
	}
	if (st == RPC_OK && !rate_ok)
		st = RPC_RESOURCE_EXHAUSTED;
	if (actx)
		grpc_auth_context_release(actx);
	return st;
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
	req = c->payload ? rpc_unpack(m->request, c->payload) : NULL;
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
	else if ((st = call_authorize(c)) != RPC_OK)
		rpc_call_finish(c, st, st == RPC_PERMISSION_DENIED ? "this peer may not call this method"
								   : "rate limit: too many calls",
				NULL);
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
	if (!bucket_take(&c->msgs, c->server->stream_rate, c->server->stream_burst)) {
		grpc_byte_buffer_destroy(bb);
		rpc_call_finish(c, RPC_RESOURCE_EXHAUSTED, "rate limit: too many messages", NULL);
		goto out;
	}
	msg = rpc_unpack(m->request, bb);
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
	gpr_timespec dl = deadline_after_ms(LOOP_MAX_SLEEP_MS);

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

struct rpc_server *rpc_server_new(const struct rpc_method *methods, size_t n_methods, void *ctx,
				  const struct rpc_server_opts *opts)
{
	pthread_condattr_t cattr;
	struct rpc_server *s = NULL;
	grpc_channel_args args;
	grpc_arg arg[3];
	size_t max_msg;

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
	if (opts) {
		s->authorize = opts->authorize;
		s->stream_rate = opts->stream_msgs_per_s;
		s->stream_burst = opts->stream_burst;
		s->unary_rate = opts->unary_calls_per_s;
		s->unary_burst = opts->unary_burst;
	}
	s->conns = calloc(CONN_TABLE_SIZE, sizeof(*s->conns));
	if (!s->conns || pthread_mutex_init(&s->conn_lock, NULL) != 0) {
		free(s->conns);
		free(s);
		return NULL;
	}
	if (opts && opts->tls) {
		const struct rpc_tls *t = opts->tls;
		int err = -EINVAL;

		/* Read now: the caller may sandbox itself before listening. */
		if (!t->cert || !t->key || !t->ca ||
		    (err = read_pem(t->cert, &s->tls_cert)) < 0 ||
		    (err = read_pem(t->key, &s->tls_key)) < 0 ||
		    (err = read_pem(t->ca, &s->tls_client_ca)) < 0) {
			log_error_errno(err, "cannot read the TLS certificate, key or client CA");
			goto fail_early;
		}
	}

	if (pthread_mutex_init(&s->lock, NULL) != 0)
		goto fail;
	if (pthread_condattr_init(&cattr) != 0) {
		pthread_mutex_destroy(&s->lock);
		goto fail;
	}
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	if (pthread_cond_init(&s->cond, &cattr) != 0) {
		pthread_condattr_destroy(&cattr);
		pthread_mutex_destroy(&s->lock);
		goto fail;
	}
	pthread_condattr_destroy(&cattr);
	s->sync_ready = true;

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
	args.num_args = 3;
	args.args = arg;

	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->srv = grpc_server_create(&args, NULL);
	if (!s->cq || !s->srv) {
		log_error("cannot create the gRPC server");
		goto fail;
	}
	grpc_server_register_completion_queue(s->srv, s->cq, NULL);

	s->slots = calloc(n_methods + 1, sizeof(*s->slots));
	if (!s->slots) {
		log_error_errno(-ENOMEM, "cannot allocate the method table");
		goto fail;
	}
	for (size_t i = 0; i < n_methods; i++) {
		const struct rpc_method *m = &methods[i];

		if (!m->path || m->path[0] != '/' || !m->request ||
		    (m->kind != RPC_UNARY && m->kind != RPC_BIDI)) {
			log_error("bad method table entry %zu", i);
			goto fail;
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
			goto fail;
		}
	}
	s->slots[n_methods].server = s;
	s->slots[n_methods].m = NULL;
	return s;
fail:
	rpc_server_free(s);
	return NULL;
fail_early:
	free(s->tls_cert);
	free(s->tls_key);
	free(s->tls_client_ca);
	pthread_mutex_destroy(&s->conn_lock);
	free(s->conns);
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

int rpc_unix_peer(int fd, struct rpc_peer *ret)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[RPC_PEER_MAX_GROUPS];
	socklen_t glen = sizeof(groups);

	/* The kernel records the credentials at connect(): the peer cannot
	 * change them afterwards (a set-uid helper it execs included). */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	if (len != sizeof(cred))
		return -EINVAL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) < 0) {
		/* ERANGE: more groups than we keep; the primary gid still counts. */
		glen = 0;
	}
	*ret = (struct rpc_peer){ .transport = RPC_TRANSPORT_UNIX, .uid = cred.uid, .gid = cred.gid,
				  .pid = cred.pid, .n_groups = glen / sizeof(gid_t) };
	for (size_t i = 0; i < ret->n_groups; i++)
		ret->groups[i] = groups[i];
	return 0;
}

/* Accepts one connection on a Unix listener, records who is on the other
 * side, and hands the socket to gRPC. */
static void unix_accept_one(struct rpc_server *s, int lfd)
{
	struct rpc_peer peer;
	grpc_server_credentials *creds;
	struct conn_entry *e;
	char key[64];
	int fd, err;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_debug("accept4 on a Unix listener: %s", strerror(errno));
		return;
	}
	err = rpc_unix_peer(fd, &peer);
	if (err < 0) {
		log_debug("SO_PEERCRED: %s, closing the connection", strerror(-err));
		close(fd);
		return;
	}
	conn_key_for_fd(fd, key, sizeof(key));
	pthread_mutex_lock(&s->conn_lock);
	e = conn_find(s, key); /* an old connection that had this fd number */
	if (!e)
		e = conn_slot(s);
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
	e->last_used = ++s->conn_clock;
	pthread_mutex_unlock(&s->conn_lock);
	log_debug("unix peer uid %u gid %u pid %d on %s", (unsigned)peer.uid, (unsigned)peer.gid,
		  (int)peer.pid, key);
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
		 * rpc.c accepts and hands each connection over (see
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
	t[s->n_timers].due = deadline_after_ms(interval_ms);
	s->n_timers++;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void rpc_server_timer_delay(struct rpc_server *s, void (*fn)(void *ctx), int ms, bool sooner_only)
{
	gpr_timespec due = deadline_after_ms(ms);

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
		gpr_timespec deadline = deadline_after_ms(wait_ms);

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
	pthread_mutex_destroy(&s->conn_lock);
	free(s->conns);
	free(s->tls_cert);
	free(s->tls_key);
	free(s->tls_client_ca);
	free(s->timers);
	free(s->slots);
	free(s);
}

/* ---- client ---- */

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
	err = read_pem(tls->ca, &client_tls.ca);
	if (err == 0 && tls->cert)
		err = read_pem(tls->cert, &client_tls.cert);
	if (err == 0 && tls->key)
		err = read_pem(tls->key, &client_tls.key);
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
	err = read_pem(tls->ca, &t->ca);
	if (err == 0 && tls->cert)
		err = read_pem(tls->cert, &t->cert);
	if (err == 0 && tls->key)
		err = read_pem(tls->key, &t->key);
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
	/* No bandwidth-delay probes (see rpc_server_new). */
	arg[n].type = GRPC_ARG_INTEGER;
	arg[n].key = GRPC_ARG_HTTP2_BDP_PROBE;
	arg[n++].value.integer = 0;
	/* No keepalive timer either (see rpc_server_new). */
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
					deadline_after_ms(timeout_ms), NULL);
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
	reply = recv_bb ? rpc_unpack(reply_desc, recv_bb) : NULL;
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
	bb = rpc_pack(req, NULL);
	r = unary_call(ch, path, bb, reply_desc, timeout_ms, wait_for_ready, ret_reply, err);
	grpc_byte_buffer_destroy(bb);
	return r;
}

int rpc_unary_packed(struct rpc_channel *ch, const char *path, const void *data, size_t len,
		     const ProtobufCMessageDescriptor *reply_desc, int timeout_ms,
		     bool wait_for_ready, ProtobufCMessage **ret_reply, struct rpc_error *err)
{
	grpc_byte_buffer *bb;
	grpc_slice slice;
	int r;

	if (!data && len > 0) {
		error_set(err, RPC_INVALID_ARGUMENT, "bad arguments");
		return -EINVAL;
	}
	slice = grpc_slice_from_copied_buffer(data, len);
	bb = grpc_raw_byte_buffer_create(&slice, 1);
	grpc_slice_unref(slice);
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
	gpr_timespec deadline = deadline_after_ms(connect_timeout_ms);
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
			  s->write_timeout_ms > 0 ? deadline_after_ms(s->write_timeout_ms)
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
	bb = rpc_pack(msg, NULL);
	r = stream_send(s, bb, buffer_hint);
	grpc_byte_buffer_destroy(bb);
	return r;
}

int rpc_stream_write_raw(struct rpc_stream *s, const void *data, size_t len)
{
	grpc_byte_buffer *bb;
	grpc_slice slice;
	int r;

	if (!s || (!data && len > 0))
		return -EINVAL;
	slice = grpc_slice_from_copied_buffer(data, len);
	bb = grpc_raw_byte_buffer_create(&slice, 1);
	grpc_slice_unref(slice);
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

		stream_wait_status(s, deadline_after_ms(READ_STATUS_WAIT_MS), &timed_out);
		s->read_end = !timed_out && s->status == GRPC_STATUS_OK ? -ENODATA : -EPIPE;
		return s->read_end;
	}
	msg = rpc_unpack(desc, bb);
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

	return stream_half_close(s, deadline_after_ms(5000), &timed_out);
}

int rpc_stream_close(struct rpc_stream *s, int timeout_ms, struct rpc_error *err)
{
	gpr_timespec deadline = deadline_after_ms(timeout_ms);
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

/* ---- process-wide ---- */

/* gRPC's log lines go through log.h. gRPC's errors are warnings to us:
 * the call results carry what matters, and gRPC logs some errors the
 * application recovers from (reconnects). */
static void grpc_log_bridge(gpr_log_func_args *args)
{
	enum log_level level =
		args->severity == GPR_LOG_SEVERITY_ERROR ? LOG_LEVEL_WARN : LOG_LEVEL_DEBUG;
	const char *file = args->file ? strrchr(args->file, '/') : NULL;

	log_at(level, 0, "grpc %s:%d: %s", file ? file + 1 : (args->file ? args->file : "?"),
	       args->line, args->message ? args->message : "");
}

/* Debian's Abseil is built without NDEBUG, so every absl::Mutex lock and
 * unlock inside gRPC runs Abseil's deadlock detection (a lock-order graph:
 * GraphCycles::GetId was ~6% of the sensor's CPU). It is switched off
 * through Abseil's own API, absl::SetMutexDeadlockDetectionMode(kIgnore),
 * looked up at run time: an Abseil without this symbol keeps its default. */
static void absl_deadlock_detection_off(void)
{
	static const char *const names[] = {
		"_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
		"_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void (*set_mode)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, names[i]);

		if (set_mode) {
			set_mode(0); /* OnDeadlockCycle::kIgnore */
			return;
		}
	}
}

void rpc_global_init(void)
{
	gpr_set_log_function(grpc_log_bridge);
	absl_deadlock_detection_off();
	grpc_init();
	/* After grpc_init(), which reads GRPC_VERBOSITY; an explicit setting
	 * in the environment wins. */
	if (!getenv("GRPC_VERBOSITY"))
		gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
}

void rpc_global_shutdown(void)
{
	grpc_shutdown();
}
