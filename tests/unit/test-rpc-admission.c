/* test-rpc-admission.c - the server's admission decisions on their own
 * (common/rpc_admission.c), without a server: Unix peers judged by the
 * credentials recorded at accept (a socketpair stands for the accepted
 * connection), fail closed when the record is gone or nobody decides,
 * the method's role, and the two rate limits. TLS identities need a real
 * handshake: test-rpc and the integration tests cover them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc_admission.h"

/* What the fake policy saw and answers. */
struct policy_state {
	unsigned calls;
	struct rpc_peer last;
	bool grant_sensor, grant_client, grant_admin;
};

static bool authorize(const struct rpc_peer *peer, enum rpc_role role, void *ctx)
{
	struct policy_state *p = ctx;

	p->calls++;
	p->last = *peer;
	switch (role) {
	case RPC_ROLE_SENSOR:
		return p->grant_sensor;
	case RPC_ROLE_CLIENT:
		return p->grant_client;
	case RPC_ROLE_ADMIN:
		return p->grant_admin;
	case RPC_ROLE_ANY:
		break;
	}
	return false;
}

/* A connected socket standing for an accepted connection, recorded by
 * a; key is its name as gRPC gives it ("fd:N"). */
struct conn {
	int fd, other;
	char key[32];
};

static void conn_accept(struct rpc_admission *a, struct conn *c)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(rpc_admission_add_unix(a, sv[0]), 0);
	snprintf(c->key, sizeof(c->key), "fd:%d", sv[0]);
	c->fd = sv[0];
	c->other = sv[1];
}

static void conn_close(struct conn *c)
{
	close(c->fd);
	close(c->other);
}

/* rpc_admission_check_call() for a call on the connection named key. */
static enum rpc_status check(struct rpc_admission *a, const char *key, enum rpc_role role,
			     bool unary, struct rpc_admission_grant *g, const char **reason)
{
	return rpc_admission_check_call(a, NULL, key, "/t/Method", role, unary, g, reason);
}

/* An admission whose policy is authorize() on p, and one connection it
 * recorded. */
struct fixture {
	struct policy_state p;
	struct rpc_admission *a;
	struct conn c;
};

static void fixture_init(struct fixture *f, struct rpc_admission_policy policy)
{
	policy.authorize = authorize;
	policy.ctx = &f->p;
	f->a = rpc_admission_new(&policy);
	assert_non_null(f->a);
	conn_accept(f->a, &f->c);
}

static void fixture_done(struct fixture *f)
{
	conn_close(&f->c);
	rpc_admission_free(f->a);
}

static void test_unix_peer_roles(void **state)
{
	struct fixture f = { .p = { .grant_sensor = true, .grant_client = true } };
	struct rpc_admission_grant g;
	const char *reason = NULL;

	fixture_init(&f, (struct rpc_admission_policy){ 0 });
	assert_int_equal(check(f.a, f.c.key, RPC_ROLE_CLIENT, true, &g, &reason), RPC_OK);
	assert_true(g.unix_known);
	assert_int_equal(g.peer.transport, RPC_TRANSPORT_UNIX);
	assert_int_equal(g.peer.uid, getuid());
	assert_int_equal(g.peer.gid, getgid());
	assert_int_equal(g.peer.pid, getpid());
	assert_int_equal(g.peer.n_names, 0);
	assert_true(g.is_sensor);
	assert_false(g.is_admin);
	assert_int_equal(f.p.last.uid, getuid());

	/* The policy says no: the method's role decides. */
	f.p.grant_client = false;
	assert_int_equal(check(f.a, f.c.key, RPC_ROLE_CLIENT, true, &g, &reason),
			 RPC_PERMISSION_DENIED);
	assert_string_equal(reason, "this peer may not call this method");
	/* RPC_ROLE_ANY asks nobody about the method. */
	assert_int_equal(check(f.a, f.c.key, RPC_ROLE_ANY, true, &g, &reason), RPC_OK);
	fixture_done(&f);
}

static void test_fail_closed(void **state)
{
	struct policy_state p = { .grant_sensor = true, .grant_client = true, .grant_admin = true };
	struct rpc_admission_policy policy = { .authorize = authorize, .ctx = &p };
	struct rpc_admission_policy nobody = { 0 };
	struct rpc_admission *a = rpc_admission_new(&policy);
	struct rpc_admission *b = rpc_admission_new(&nobody);
	struct rpc_admission_grant g;
	const char *reason = NULL;
	struct conn c;

	assert_non_null(a);
	assert_non_null(b);
	/* A Unix connection without a record: nobody to trust, and the
	 * policy is not even asked. */
	assert_int_equal(check(a, "fd:100000", RPC_ROLE_CLIENT, true, &g, &reason),
			 RPC_PERMISSION_DENIED);
	assert_int_equal(p.calls, 0);
	assert_false(g.unix_known);
	assert_int_equal(g.peer.transport, RPC_TRANSPORT_UNIX);
	assert_true(g.peer.uid == UINT32_MAX);
	assert_false(g.is_sensor);
	assert_false(g.is_admin);

	/* No authorize(): every role but RPC_ROLE_ANY is refused. */
	conn_accept(b, &c);
	assert_int_equal(check(b, c.key, RPC_ROLE_SENSOR, false, &g, &reason),
			 RPC_PERMISSION_DENIED);
	assert_true(g.unix_known);
	assert_int_equal(check(b, c.key, RPC_ROLE_ANY, false, &g, &reason), RPC_OK);
	conn_close(&c);
	rpc_admission_free(a);
	rpc_admission_free(b);
}

static void test_unary_rate(void **state)
{
	struct fixture f = { .p = { .grant_client = true } };
	struct rpc_admission_grant g;
	const char *reason = NULL;

	fixture_init(&f, (struct rpc_admission_policy){ .unary_calls_per_s = 1, .unary_burst = 2 });
	for (int i = 0; i < 2; i++)
		assert_int_equal(check(f.a, f.c.key, RPC_ROLE_CLIENT, true, &g, &reason), RPC_OK);
	assert_int_equal(check(f.a, f.c.key, RPC_ROLE_CLIENT, true, &g, &reason),
			 RPC_RESOURCE_EXHAUSTED);
	assert_string_equal(reason, "rate limit: too many calls");
	/* Streams are not unary calls. */
	assert_int_equal(check(f.a, f.c.key, RPC_ROLE_CLIENT, false, &g, &reason), RPC_OK);
	/* A refusal is reported as such, not as the rate. */
	f.p.grant_client = false;
	assert_int_equal(check(f.a, f.c.key, RPC_ROLE_CLIENT, true, &g, &reason),
			 RPC_PERMISSION_DENIED);
	fixture_done(&f);
}

static void test_message_rate(void **state)
{
	struct rpc_admission_policy policy = { .stream_msgs_per_s = 1, .stream_burst = 1 };
	struct rpc_admission_policy unlimited = { 0 };
	struct rpc_admission *a = rpc_admission_new(&policy);
	struct rpc_admission *b = rpc_admission_new(&unlimited);
	struct rpc_admission_bucket bucket = { 0 }, other = { 0 };
	const char *reason = NULL;

	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(rpc_admission_check_message(a, &bucket, &reason), RPC_OK);
	assert_int_equal(rpc_admission_check_message(a, &bucket, &reason),
			 RPC_RESOURCE_EXHAUSTED);
	assert_string_equal(reason, "rate limit: too many messages");
	/* Each stream has its own bucket. */
	assert_int_equal(rpc_admission_check_message(a, &other, &reason), RPC_OK);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(rpc_admission_check_message(b, &bucket, &reason), RPC_OK);
	rpc_admission_free(a);
	rpc_admission_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unix_peer_roles),
		cmocka_unit_test(test_fail_closed),
		cmocka_unit_test(test_unary_rate),
		cmocka_unit_test(test_message_rate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
