/* test-rpc.c - the rpc wrapper (common/rpc*.c) end to end: a real server
 * (its loop thread) and real clients (the test thread and helper threads)
 * in one process, over a unix: socket in a mkdtemp directory and over
 * tcp:127.0.0.1:0.
 *
 * Test handlers, all on the server's loop thread:
 *   /sonde.v1.Symbols/Status   unary: answers version "test".
 *   /sonde.v1.Symbols/Top      unary on ProfileQuery.pid: 1 = error status
 *                              with details, 2 = finished later by the
 *                              timer, 3 = finished only after 2 s.
 *   /sonde.v1.Ingest/Connect   bidi: Hello -> Welcome; exit{pid} -> echo
 *                              read_range{request_id = pid}; exit{0} ->
 *                              100 messages then finish OK; stats{K} ->
 *                              the timer pushes K messages; exit{ENOBUFS_PID}
 *                              fills the write queue past its bound;
 *                              half-close -> finish OK.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ingest.pb-c.h"
#include "log.h"
#include "rpc_server.h"
#include "rpc_testing.h"
#include "symbols.pb-c.h"

#define PATH_STATUS "/sonde.v1.Symbols/Status"
#define PATH_TOP "/sonde.v1.Symbols/Top"
#define PATH_CONNECT "/sonde.v1.Ingest/Connect"
#define PUSH_BASE 1000000u
#define BYE_BASE 500000u
#define ENOBUFS_PID 777777u
#define MAX_MESSAGE (64 * 1024)
#define MAX_QUEUED (16 * 1024)

static char tmpdir[64];

/* ---- server side (loop thread) ---- */

struct deferred {
	struct rpc_call *call;
	uint64_t due_ms;
	uint64_t value;
};

struct stream_state {
	struct rpc_call *call;
	uint32_t push_remaining;
	uint32_t push_seq;
};

#define MAX_DEFERRED 16
#define MAX_STREAMS 16
static struct deferred deferred[MAX_DEFERRED];
static struct stream_state *streams[MAX_STREAMS];

/* Read by the test thread. */
static atomic_int srv_closes;
static atomic_int srv_half_closes;
static atomic_int srv_enobufs;
static atomic_int srv_enobufs_queued;
/* cmocka's asserts must not run on the loop thread: count failures there
 * and check the count from the test thread. */
static atomic_int srv_errors;
#define SRV_CHECK(cond)                                                       \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "server check failed: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                             \
			atomic_fetch_add(&srv_errors, 1);                     \
		}                                                             \
	} while (0)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void status_on_call(struct rpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	Sonde__V1__StatusResponse resp = SONDE__V1__STATUS_RESPONSE__INIT;

	resp.version = "test";
	resp.uptime_s = 42;
	rpc_call_finish(call, RPC_OK, NULL, &resp.base);
}

static void top_on_call(struct rpc_call *call, const ProtobufCMessage *req, void *ctx)
{
	const Sonde__V1__ProfileQuery *q = (const Sonde__V1__ProfileQuery *)req;
	uint64_t delay = q->pid == 2 ? 50 : 2000;

	if (q->pid == 1) {
		rpc_call_finish(call, RPC_PERMISSION_DENIED, "denied for pid 1", NULL);
		return;
	}
	for (int i = 0; i < MAX_DEFERRED; i++) {
		if (!deferred[i].call) {
			deferred[i].call = call;
			deferred[i].due_ms = now_ms() + delay;
			deferred[i].value = q->since_unix_s;
			return;
		}
	}
	rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "too many deferred", NULL);
}

static int write_read_range(struct rpc_call *call, uint64_t id, size_t pad)
{
	Sonde__V1__SymbolizerMessage m = SONDE__V1__SYMBOLIZER_MESSAGE__INIT;
	Sonde__V1__ReadRange rr = SONDE__V1__READ_RANGE__INIT;
	static uint8_t padding[256];

	rr.request_id = id;
	rr.file_id.data = padding;
	rr.file_id.len = pad < sizeof(padding) ? pad : sizeof(padding);
	m.kind_case = SONDE__V1__SYMBOLIZER_MESSAGE__KIND_READ_RANGE;
	m.read_range = &rr;
	return rpc_call_write(call, &m.base);
}

static void connect_on_open(struct rpc_call *call, void *ctx)
{
	struct stream_state *st = calloc(1, sizeof(*st));

	SRV_CHECK(st != NULL);
	if (!st)
		return;
	st->call = call;
	rpc_call_set_data(call, st);
	for (int i = 0; i < MAX_STREAMS; i++) {
		if (!streams[i]) {
			streams[i] = st;
			break;
		}
	}
	SRV_CHECK(rpc_call_peer(call)[0] != '\0');
}

static void connect_on_message(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	const Sonde__V1__SensorMessage *m = (const Sonde__V1__SensorMessage *)msg;
	struct stream_state *st = rpc_call_data(call);

	if (!m) {
		atomic_fetch_add(&srv_half_closes, 1);
		rpc_call_finish(call, RPC_OK, NULL, NULL);
		return;
	}
	switch (m->kind_case) {
	case SONDE__V1__SENSOR_MESSAGE__KIND_HELLO: {
		Sonde__V1__SymbolizerMessage out = SONDE__V1__SYMBOLIZER_MESSAGE__INIT;
		Sonde__V1__Welcome w = SONDE__V1__WELCOME__INIT;

		w.protocol_version = 1;
		w.max_message_bytes = MAX_MESSAGE;
		out.kind_case = SONDE__V1__SYMBOLIZER_MESSAGE__KIND_WELCOME;
		out.welcome = &w;
		SRV_CHECK((rpc_call_write(call, &out.base)) == 0);
		break;
	}
	case SONDE__V1__SENSOR_MESSAGE__KIND_EXIT:
		if (m->exit->pid == 0) {
			/* The status must come after all of these. */
			for (uint32_t i = 0; i < 100; i++)
				SRV_CHECK((write_read_range(call, BYE_BASE + i, 0)) == 0);
			rpc_call_finish(call, RPC_OK, "bye", NULL);
			SRV_CHECK((write_read_range(call, 1, 0)) == -EPIPE);
		} else if (m->exit->pid == ENOBUFS_PID) {
			int queued = 0, r = 0;

			for (int i = 0; i < 1000; i++) {
				r = write_read_range(call, 700000 + i, 200);
				if (r < 0)
					break;
				queued++;
			}
			atomic_store(&srv_enobufs_queued, queued);
			atomic_store(&srv_enobufs, r == -ENOBUFS);
		} else {
			SRV_CHECK((write_read_range(call, m->exit->pid, 0)) == 0);
		}
		break;
	case SONDE__V1__SENSOR_MESSAGE__KIND_STATS:
		st->push_remaining += (uint32_t)m->stats->samples_taken;
		break;
	default:
		break;
	}
}

static void connect_on_close(struct rpc_call *call, void *ctx)
{
	struct stream_state *st = rpc_call_data(call);

	for (int i = 0; i < MAX_STREAMS; i++)
		if (streams[i] == st)
			streams[i] = NULL;
	free(st);
	atomic_fetch_add(&srv_closes, 1);
}

static void test_timer(void *ctx)
{
	uint64_t now = now_ms();

	for (int i = 0; i < MAX_DEFERRED; i++) {
		struct deferred *d = &deferred[i];

		if (d->call && d->due_ms <= now) {
			Sonde__V1__TopResponse resp = SONDE__V1__TOP_RESPONSE__INIT;

			resp.total_samples = d->value;
			/* A no-op on a call the client gave up on. */
			rpc_call_finish(d->call, RPC_OK, NULL, &resp.base);
			d->call = NULL;
		}
	}
	/* Server-initiated writes, a few per tick, while clients write. */
	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream_state *st = streams[i];

		for (int k = 0; st && k < 50 && st->push_remaining > 0; k++) {
			if (write_read_range(st->call, PUSH_BASE + st->push_seq, 0) < 0)
				break;
			st->push_seq++;
			st->push_remaining--;
		}
	}
}

static const struct rpc_method methods[] = {
	{ .path = PATH_STATUS, .kind = RPC_UNARY,
	  .request = &sonde__v1__status_request__descriptor, .on_call = status_on_call },
	{ .path = PATH_TOP, .kind = RPC_UNARY, .request = &sonde__v1__profile_query__descriptor,
	  .on_call = top_on_call },
	{ .path = PATH_CONNECT, .kind = RPC_BIDI, .request = &sonde__v1__sensor_message__descriptor,
	  .on_open = connect_on_open, .on_message = connect_on_message,
	  .on_close = connect_on_close },
};

/* ---- fixture ---- */

struct env {
	bool tcp;
	struct rpc_server *server;
	struct rpc_channel *ch;
	char addr[160];   /* what the server listens on */
	char target[160]; /* what the client dials */
};

static struct env env_unix = { .tcp = false };
static struct env env_tcp = { .tcp = true };

static int server_up(void **state)
{
	struct env *e = *state;
	struct rpc_server_opts opts = { .max_message_bytes = MAX_MESSAGE,
					.max_queued_bytes = MAX_QUEUED };
	int port = -1;

	memset(deferred, 0, sizeof(deferred));
	memset(streams, 0, sizeof(streams));
	atomic_store(&srv_closes, 0);
	atomic_store(&srv_half_closes, 0);
	atomic_store(&srv_enobufs, 0);

	e->server = rpc_server_new(methods, sizeof(methods) / sizeof(methods[0]), NULL, &opts);
	if (!e->server)
		return -1;
	if (e->tcp)
		snprintf(e->addr, sizeof(e->addr), "tcp:127.0.0.1:0");
	else
		snprintf(e->addr, sizeof(e->addr), "unix:%s/sonde.sock", tmpdir);
	if (rpc_server_listen(e->server, e->addr, &port) < 0)
		return -1;
	if (e->tcp) {
		if (port <= 0)
			return -1;
		snprintf(e->target, sizeof(e->target), "tcp:127.0.0.1:%d", port);
	} else {
		if (port != 0)
			return -1;
		snprintf(e->target, sizeof(e->target), "%s", e->addr);
	}
	if (rpc_server_add_timer(e->server, 10, test_timer, NULL) < 0)
		return -1;
	if (rpc_server_start(e->server) < 0)
		return -1;
	e->ch = rpc_channel_new(e->target, NULL);
	return e->ch ? 0 : -1;
}

static int server_down(void **state)
{
	struct env *e = *state;

	rpc_channel_free(e->ch);
	e->ch = NULL;
	rpc_server_free(e->server);
	e->server = NULL;
	return atomic_load(&srv_errors) == 0 ? 0 : -1;
}

/* Waits up to 5 s for *v to reach want. */
static bool wait_for(atomic_int *v, int want)
{
	for (int i = 0; i < 500; i++) {
		if (atomic_load(v) >= want)
			return true;
		usleep(10000);
	}
	return false;
}

static int write_exit(struct rpc_stream *s, uint32_t pid, bool hint)
{
	Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__ProcessExit ex = SONDE__V1__PROCESS_EXIT__INIT;

	ex.pid = pid;
	m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_EXIT;
	m.exit = &ex;
	return rpc_stream_write(s, &m.base, hint);
}

static int write_hello(struct rpc_stream *s)
{
	Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__Hello h = SONDE__V1__HELLO__INIT;

	h.protocol_version = 1;
	h.hostname = "test";
	m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_HELLO;
	m.hello = &h;
	return rpc_stream_write(s, &m.base, false);
}

static Sonde__V1__SymbolizerMessage *read_msg(struct rpc_stream *s, int *ret)
{
	ProtobufCMessage *m = NULL;

	*ret = rpc_stream_read(s, &sonde__v1__symbolizer_message__descriptor, &m);
	return (Sonde__V1__SymbolizerMessage *)m;
}

static void expect_welcome(struct rpc_stream *s)
{
	Sonde__V1__SymbolizerMessage *m;
	int r;

	m = read_msg(s, &r);
	assert_int_equal(r, 0);
	assert_int_equal(m->kind_case, SONDE__V1__SYMBOLIZER_MESSAGE__KIND_WELCOME);
	assert_int_equal(m->welcome->max_message_bytes, MAX_MESSAGE);
	rpc_message_free(&m->base);
}

/* ---- unary ---- */

static void test_unary_ok(void **state)
{
	struct env *e = *state;
	Sonde__V1__StatusRequest req = SONDE__V1__STATUS_REQUEST__INIT;
	Sonde__V1__StatusResponse *resp = NULL;
	struct rpc_error err;

	for (int i = 0; i < 20; i++) {
		assert_int_equal(rpc_unary(e->ch, PATH_STATUS, &req.base,
					   &sonde__v1__status_response__descriptor, 2000, true,
					   (ProtobufCMessage **)&resp, &err),
				 0);
		assert_string_equal(resp->version, "test");
		assert_int_equal(resp->uptime_s, 42);
		rpc_message_free(&resp->base);
		resp = NULL;
	}
}

static void test_unary_error(void **state)
{
	struct env *e = *state;
	Sonde__V1__ProfileQuery q = SONDE__V1__PROFILE_QUERY__INIT;
	ProtobufCMessage *resp = NULL;
	struct rpc_error err;

	q.pid = 1;
	assert_int_equal(rpc_unary(e->ch, PATH_TOP, &q.base, &sonde__v1__top_response__descriptor,
				   2000, true, &resp, &err),
			 -EIO);
	assert_null(resp);
	assert_int_equal(err.status, RPC_PERMISSION_DENIED);
	assert_string_equal(err.message, "denied for pid 1");
}

static void test_unary_deferred(void **state)
{
	struct env *e = *state;
	Sonde__V1__ProfileQuery q = SONDE__V1__PROFILE_QUERY__INIT;
	Sonde__V1__TopResponse *resp = NULL;
	struct rpc_error err;
	uint64_t t0 = now_ms();

	q.pid = 2;
	q.since_unix_s = 12345;
	assert_int_equal(rpc_unary(e->ch, PATH_TOP, &q.base, &sonde__v1__top_response__descriptor,
				   2000, true, (ProtobufCMessage **)&resp, &err),
			 0);
	assert_true(now_ms() - t0 >= 45);
	assert_int_equal(resp->total_samples, 12345);
	rpc_message_free(&resp->base);
}

static void test_unary_deadline(void **state)
{
	struct env *e = *state;
	Sonde__V1__ProfileQuery q = SONDE__V1__PROFILE_QUERY__INIT;
	ProtobufCMessage *resp = NULL;
	struct rpc_error err;
	uint64_t t0 = now_ms(), dt;

	q.pid = 3; /* answered after 2 s */
	assert_int_equal(rpc_unary(e->ch, PATH_TOP, &q.base, &sonde__v1__top_response__descriptor,
				   200, true, &resp, &err),
			 -ETIMEDOUT);
	dt = now_ms() - t0;
	assert_true(dt >= 150 && dt < 1500);
	assert_int_equal(err.status, RPC_DEADLINE_EXCEEDED);
	assert_null(resp);
}

static void test_unary_unknown(void **state)
{
	struct env *e = *state;
	Sonde__V1__StatusRequest req = SONDE__V1__STATUS_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct rpc_error err;

	assert_int_equal(rpc_unary(e->ch, "/sonde.v1.Symbols/Nope", &req.base,
				   &sonde__v1__status_response__descriptor, 2000, true, &resp, &err),
			 -EIO);
	assert_int_equal(err.status, RPC_UNIMPLEMENTED);
}

static void test_socket_mode(void **state)
{
	struct env *e = *state;
	struct stat st;

	assert_int_equal(stat(e->addr + strlen("unix:"), &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0660);
}

/* ---- bidi ---- */

struct reader {
	struct rpc_stream *s;
	uint32_t want_echo, want_push;
	uint32_t echo, push, welcome;
	bool in_order;
	int rc;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;

	rd->in_order = true;
	while (rd->echo < rd->want_echo || rd->push < rd->want_push || rd->welcome < 1) {
		Sonde__V1__SymbolizerMessage *m = read_msg(rd->s, &rd->rc);

		if (rd->rc < 0)
			break;
		if (m->kind_case == SONDE__V1__SYMBOLIZER_MESSAGE__KIND_WELCOME) {
			rd->welcome++;
		} else if (m->read_range->request_id >= PUSH_BASE) {
			if (m->read_range->request_id != PUSH_BASE + rd->push)
				rd->in_order = false;
			rd->push++;
		} else {
			if (m->read_range->request_id != rd->echo + 1)
				rd->in_order = false;
			rd->echo++;
		}
		rpc_message_free(&m->base);
	}
	return NULL;
}

/* Echo in both directions, server pushes while the client writes, then
 * the client's half-close ends the call with OK. */
static void test_bidi_echo_push(void **state)
{
	struct env *e = *state;
	Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__SensorStats stats = SONDE__V1__SENSOR_STATS__INIT;
	struct reader rd = { .want_echo = 3000, .want_push = 500 };
	struct rpc_error err;
	pthread_t th;

	rd.s = rpc_stream_open(e->ch, PATH_CONNECT, 2000, &err);
	assert_non_null(rd.s);
	assert_int_equal(pthread_create(&th, NULL, reader_main, &rd), 0);
	assert_int_equal(write_hello(rd.s), 0);

	stats.samples_taken = rd.want_push;
	m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_STATS;
	m.stats = &stats;
	assert_int_equal(rpc_stream_write(rd.s, &m.base, false), 0);
	for (uint32_t i = 1; i <= rd.want_echo; i++)
		assert_int_equal(write_exit(rd.s, i, i % 100 != 0 && i != rd.want_echo), 0);

	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(rd.rc, 0);
	assert_int_equal(rd.welcome, 1);
	assert_int_equal(rd.echo, rd.want_echo);
	assert_int_equal(rd.push, rd.want_push);
	assert_true(rd.in_order);

	assert_int_equal(rpc_stream_close(rd.s, 5000, &err), 0);
	assert_true(wait_for(&srv_half_closes, 1));
	assert_true(wait_for(&srv_closes, 1));
}

/* The server finishes on its own: its queued writes arrive before the
 * status, and then the read reports a clean end. */
static void test_bidi_server_finish(void **state)
{
	struct env *e = *state;
	Sonde__V1__SymbolizerMessage *m;
	struct rpc_error err;
	struct rpc_stream *s;
	int r;

	s = rpc_stream_open(e->ch, PATH_CONNECT, 2000, &err);
	assert_non_null(s);
	assert_int_equal(write_hello(s), 0);
	assert_int_equal(write_exit(s, 0, false), 0);
	expect_welcome(s);
	for (uint32_t i = 0; i < 100; i++) {
		m = read_msg(s, &r);
		assert_int_equal(r, 0);
		assert_int_equal(m->read_range->request_id, BYE_BASE + i);
		rpc_message_free(&m->base);
	}
	m = read_msg(s, &r);
	assert_null(m);
	assert_int_equal(r, -ENODATA);
	assert_int_equal(rpc_stream_read(s, &sonde__v1__symbolizer_message__descriptor,
					 (ProtobufCMessage **)&m),
			 -ENODATA);
	assert_int_equal(write_exit(s, 5, false), -EPIPE);
	assert_int_equal(rpc_stream_close(s, 2000, &err), 0);
	assert_true(wait_for(&srv_closes, 1));
}

static void test_bidi_garbage(void **state)
{
	struct env *e = *state;
	/* Field 1, length 5, but only 2 bytes follow. */
	static const char garbage[] = "\x0a\x05" "ab";
	struct rpc_error err;
	struct rpc_stream *s;
	int r;

	s = rpc_stream_open(e->ch, PATH_CONNECT, 2000, &err);
	assert_non_null(s);
	assert_int_equal(write_hello(s), 0);
	expect_welcome(s);
	assert_int_equal(rpc_stream_write_raw(s, garbage, sizeof(garbage) - 1), 0);
	assert_null(read_msg(s, &r));
	assert_int_equal(r, -EPIPE);
	memset(&err, 0, sizeof(err));
	assert_int_equal(rpc_stream_close(s, 2000, &err), -EIO);
	assert_int_equal(err.status, RPC_INVALID_ARGUMENT);
	assert_true(wait_for(&srv_closes, 1));
}

static void test_bidi_oversized(void **state)
{
	struct env *e = *state;
	Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__FileRange fr = SONDE__V1__FILE_RANGE__INIT;
	struct rpc_error err;
	struct rpc_stream *s;
	uint8_t *big;

	big = calloc(1, 2 * MAX_MESSAGE);
	assert_non_null(big);
	s = rpc_stream_open(e->ch, PATH_CONNECT, 2000, &err);
	assert_non_null(s);
	assert_int_equal(write_hello(s), 0);
	expect_welcome(s);
	fr.data.data = big;
	fr.data.len = 2 * MAX_MESSAGE;
	m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_FILE_RANGE;
	m.file_range = &fr;
	/* The write itself may or may not see the reset in time. */
	(void)rpc_stream_write(s, &m.base, false);
	memset(&err, 0, sizeof(err));
	assert_int_equal(rpc_stream_close(s, 2000, &err), -EIO);
	assert_int_equal(err.status, RPC_RESOURCE_EXHAUSTED);
	assert_true(wait_for(&srv_closes, 1));
	free(big);
}

static void test_bidi_enobufs(void **state)
{
	struct env *e = *state;
	struct rpc_error err;
	struct rpc_stream *s;

	s = rpc_stream_open(e->ch, PATH_CONNECT, 2000, &err);
	assert_non_null(s);
	assert_int_equal(write_exit(s, ENOBUFS_PID, false), 0);
	assert_true(wait_for(&srv_enobufs, 1));
	/* About MAX_QUEUED / 200 bytes fitted. */
	assert_true(atomic_load(&srv_enobufs_queued) > 10);
	assert_true(atomic_load(&srv_enobufs_queued) < 1000);
	rpc_stream_cancel(s);
	assert_int_equal(write_exit(s, 1, false), -EPIPE);
	assert_true(rpc_stream_close(s, 2000, NULL) < 0);
	assert_true(wait_for(&srv_closes, 1));
}

static void test_bidi_cancel(void **state)
{
	struct env *e = *state;
	struct rpc_error err;
	struct rpc_stream *s;
	int r;

	s = rpc_stream_open(e->ch, PATH_CONNECT, 2000, &err);
	assert_non_null(s);
	assert_int_equal(write_hello(s), 0);
	expect_welcome(s);
	assert_int_equal(atomic_load(&srv_closes), 0);
	rpc_stream_cancel(s);
	assert_null(read_msg(s, &r));
	assert_int_equal(r, -EPIPE);
	assert_true(wait_for(&srv_closes, 1));
	memset(&err, 0, sizeof(err));
	assert_int_equal(rpc_stream_close(s, 2000, &err), -EIO);
	assert_int_equal(err.status, RPC_CANCELLED);
}

static void *blocked_reader(void *arg)
{
	struct reader *rd = arg;
	ProtobufCMessage *m = NULL;

	rd->rc = rpc_stream_read(rd->s, &sonde__v1__symbolizer_message__descriptor, &m);
	rpc_message_free(m);
	return NULL;
}

/* A cancel from another thread wakes a blocked reader. */
static void test_bidi_cancel_wakes_reader(void **state)
{
	struct env *e = *state;
	struct reader rd = { 0 };
	struct rpc_error err;
	pthread_t th;

	rd.s = rpc_stream_open(e->ch, PATH_CONNECT, 2000, &err);
	assert_non_null(rd.s);
	assert_int_equal(write_hello(rd.s), 0);
	expect_welcome(rd.s);
	assert_int_equal(pthread_create(&th, NULL, blocked_reader, &rd), 0);
	usleep(50000);
	rpc_stream_cancel(rd.s);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(rd.rc, -EPIPE);
	assert_true(rpc_stream_close(rd.s, 2000, NULL) < 0);
	assert_true(wait_for(&srv_closes, 1));
}

/* Stopping the server ends a live stream: a blocked client read returns
 * -EPIPE and the server's on_close ran. */
static void test_server_stop_live_stream(void **state)
{
	struct env *e = *state;
	struct reader rd = { 0 };
	struct rpc_error err;
	uint64_t t0;
	pthread_t th;

	rd.s = rpc_stream_open(e->ch, PATH_CONNECT, 2000, &err);
	assert_non_null(rd.s);
	assert_int_equal(write_hello(rd.s), 0);
	expect_welcome(rd.s);
	assert_int_equal(pthread_create(&th, NULL, blocked_reader, &rd), 0);

	t0 = now_ms();
	rpc_server_stop(e->server, 100);
	/* The grace period was waited for, then the call was cancelled. */
	assert_true(now_ms() - t0 >= 90);
	assert_true(now_ms() - t0 < 2000);
	assert_int_equal(atomic_load(&srv_closes), 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(rd.rc, -EPIPE);
	assert_int_equal(write_exit(rd.s, 1, false), -EPIPE);
	assert_true(rpc_stream_close(rd.s, 2000, NULL) < 0);
	/* Stopping twice, then freeing (in teardown), is fine. */
	rpc_server_stop(e->server, 100);
}

static void *finishing_client(void *arg)
{
	struct reader *rd = arg;
	ProtobufCMessage *m = NULL;

	usleep(100000);
	rd->rc = write_exit(rd->s, 0, false); /* the server finishes the call */
	if (rd->rc < 0)
		return NULL;
	while ((rd->rc = rpc_stream_read(rd->s, &sonde__v1__symbolizer_message__descriptor,
					 &m)) == 0) {
		rd->echo++;
		rpc_message_free(m);
		m = NULL;
	}
	return NULL;
}

/* A call that ends within the grace period ends normally, and the stop
 * returns as soon as it did. */
static void test_server_stop_graceful(void **state)
{
	struct env *e = *state;
	struct reader rd = { 0 };
	struct rpc_error err;
	uint64_t t0, dt;
	pthread_t th;

	rd.s = rpc_stream_open(e->ch, PATH_CONNECT, 2000, &err);
	assert_non_null(rd.s);
	assert_int_equal(write_hello(rd.s), 0);
	expect_welcome(rd.s);
	assert_int_equal(pthread_create(&th, NULL, finishing_client, &rd), 0);

	t0 = now_ms();
	rpc_server_stop(e->server, 5000);
	dt = now_ms() - t0;
	assert_true(dt >= 90 && dt < 4000);
	assert_int_equal(pthread_join(th, NULL), 0);
	if (rd.rc != -ENODATA) {
		/* After its final GOAWAY, gRPC's server closes the connection
		 * as soon as its last stream is done; a client too slow to
		 * have read everything by then (valgrind, or a loaded 2-CPU
		 * machine running the suite in parallel) loses the tail with
		 * UNAVAILABLE. Inherent to gRPC core, see the report; the
		 * outcome must then be exactly that. */
		print_message("graceful stop: the client lost the tail after %u of 100 (gRPC race)\n",
			      rd.echo);
		assert_int_equal(rd.rc, -EPIPE);
		assert_int_equal(rpc_stream_close(rd.s, 2000, &err), -ECONNREFUSED);
		assert_int_equal(err.status, RPC_UNAVAILABLE);
	} else {
		assert_int_equal(rd.rc, -ENODATA);
		assert_int_equal(rd.echo, 100);
		assert_int_equal(rpc_stream_close(rd.s, 2000, &err), 0);
	}
	assert_int_equal(atomic_load(&srv_closes), 1);
}

/* ---- no server ---- */

static void test_missing_server(void **state)
{
	Sonde__V1__StatusRequest req = SONDE__V1__STATUS_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct rpc_channel *ch;
	struct rpc_stream *s;
	struct rpc_error err;
	char target[128];
	uint64_t t0, dt;

	snprintf(target, sizeof(target), "unix:%s/nobody.sock", tmpdir);
	ch = rpc_channel_new(target, NULL);
	assert_non_null(ch);

	t0 = now_ms();
	assert_int_equal(rpc_unary(ch, PATH_STATUS, &req.base,
				   &sonde__v1__status_response__descriptor, 300, true, &resp, &err),
			 -ETIMEDOUT);
	dt = now_ms() - t0;
	assert_true(dt >= 250 && dt < 1500);

	t0 = now_ms();
	assert_int_equal(rpc_unary(ch, PATH_STATUS, &req.base,
				   &sonde__v1__status_response__descriptor, 3000, false, &resp, &err),
			 -ECONNREFUSED);
	assert_int_equal(err.status, RPC_UNAVAILABLE);
	assert_true(now_ms() - t0 < 1500);

	t0 = now_ms();
	s = rpc_stream_open(ch, PATH_CONNECT, 300, &err);
	dt = now_ms() - t0;
	assert_null(s);
	assert_int_equal(err.status, RPC_DEADLINE_EXCEEDED);
	assert_true(dt >= 250 && dt < 1500);
	rpc_channel_free(ch);
}

static void test_bad_addresses(void **state)
{
	struct rpc_server *s = rpc_server_new(methods, 3, NULL, NULL);
	int port = 7;

	assert_non_null(s);
	assert_int_equal(rpc_server_listen(s, "unix:relative.sock", &port), -EINVAL);
	assert_int_equal(rpc_server_listen(s, "tcp:127.0.0.1", &port), -EINVAL);
	assert_int_equal(rpc_server_listen(s, "tcp:127.0.0.1:x", &port), -EINVAL);
	assert_int_equal(rpc_server_listen(s, "udp:1.2.3.4:5", &port), -EINVAL);
	assert_int_equal(rpc_server_listen(s, "unix:/nonexistent-dir/x.sock", &port), -ENOENT);
	assert_int_equal(port, 7);
	rpc_server_free(s); /* never started */

	assert_null(rpc_channel_new("tcp:1.2.3.4", NULL));
	assert_null(rpc_channel_new("tcp:[::1:80", NULL));
	assert_null(rpc_channel_new("unix:rel", NULL));
	assert_null(rpc_channel_new("http://x", NULL));
	rpc_channel_free(rpc_channel_new("tcp:[::1]:80", NULL));
	rpc_channel_free(rpc_channel_new("tcp:localhost:80", NULL));
	rpc_server_free(NULL);
	rpc_channel_free(NULL);
	assert_int_equal(rpc_stream_close(NULL, 0, NULL), 0);
}

static int group_setup(void **state)
{
	log_init("test-rpc", LOG_LEVEL_WARN);
	rpc_global_init();
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-rpc.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/sonde.sock", tmpdir);
	unlink(path);
	rmdir(tmpdir);
	rpc_global_shutdown();
	return 0;
}

/* The sensor's checked connection (--symbolizer-uid): a socket connected
 * by rpc_unix_connect(), whose listener rpc_unix_peer() names (this test
 * process), carries unary calls and a stream as a channel of its own
 * (rpc_channel_new_from_fd); that channel does not reconnect, so a second
 * connection is a second channel. Bad targets are refused before any
 * socket. */
static void test_unix_connect_from_fd(void **state)
{
	struct env *e = *state;
	Sonde__V1__StatusRequest req = SONDE__V1__STATUS_REQUEST__INIT;
	Sonde__V1__StatusResponse *resp = NULL;
	struct rpc_channel *ch;
	struct rpc_stream *st;
	struct rpc_error err;
	struct rpc_peer peer;
	char longpath[200];
	int fd = -1;

	for (int round = 0; round < 2; round++) {
		assert_int_equal(rpc_unix_connect(e->target, &fd), 0);
		assert_true(fd >= 0);
		assert_int_equal(rpc_unix_peer(fd, &peer), 0);
		assert_int_equal(peer.uid, getuid());
		assert_int_equal(peer.pid, getpid());
		ch = rpc_channel_new_from_fd(e->target, fd, NULL);
		assert_non_null(ch);
		assert_int_equal(rpc_unary(ch, PATH_STATUS, &req.base,
					   &sonde__v1__status_response__descriptor, 2000, true,
					   (ProtobufCMessage **)&resp, &err),
				 0);
		assert_int_equal(resp->uptime_s, 42);
		rpc_message_free(&resp->base);
		resp = NULL;
		st = rpc_stream_open(ch, PATH_CONNECT, 2000, &err);
		assert_non_null(st);
		assert_int_equal(write_hello(st), 0);
		expect_welcome(st);
		assert_int_equal(rpc_stream_close(st, 5000, &err), 0);
		rpc_channel_free(ch);
	}

	fd = -1;
	assert_int_equal(rpc_unix_connect("tcp:127.0.0.1:1", &fd), -EINVAL);
	assert_int_equal(rpc_unix_connect("unix:relative.sock", &fd), -EINVAL);
	memset(longpath, 'a', sizeof(longpath));
	memcpy(longpath, "unix:/", 6);
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(rpc_unix_connect(longpath, &fd), -ENAMETOOLONG);
	assert_int_equal(rpc_unix_connect("unix:/nonexistent-dir/x.sock", &fd), -ENOENT);
	assert_int_equal(fd, -1);
	assert_null(rpc_channel_new_from_fd("unix:x", -1, NULL));
}

#define BOTH(fn)                                                                  \
	cmocka_unit_test_prestate_setup_teardown(fn, server_up, server_down, &env_unix), \
		cmocka_unit_test_prestate_setup_teardown(fn, server_up, server_down, &env_tcp)

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(test_unary_ok),
		BOTH(test_unary_error),
		BOTH(test_unary_deferred),
		BOTH(test_unary_deadline),
		BOTH(test_unary_unknown),
		cmocka_unit_test_prestate_setup_teardown(test_socket_mode, server_up, server_down,
							 &env_unix),
		BOTH(test_bidi_echo_push),
		BOTH(test_bidi_server_finish),
		BOTH(test_bidi_garbage),
		BOTH(test_bidi_oversized),
		BOTH(test_bidi_enobufs),
		BOTH(test_bidi_cancel),
		BOTH(test_bidi_cancel_wakes_reader),
		BOTH(test_server_stop_live_stream),
		BOTH(test_server_stop_graceful),
		cmocka_unit_test(test_missing_server),
		cmocka_unit_test(test_bad_addresses),
		cmocka_unit_test_prestate_setup_teardown(test_unix_connect_from_fd, server_up,
							 server_down, &env_unix),
	};

	/* TEST_RPC_FILTER=test_bidi_* runs a subset (e.g. under valgrind). */
	if (getenv("TEST_RPC_FILTER"))
		cmocka_set_test_filter(getenv("TEST_RPC_FILTER"));
	return cmocka_run_group_tests_name("rpc", tests, group_setup, group_teardown);
}
