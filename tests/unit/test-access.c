/* test-access.c - the Symbols access policy (symbolizer/core/access.c,
 * and api/access_scope.c for a peer's scope):
 * which files' analyses and which uids' data a scope sees. The rpc layer
 * is faked: the scopes are built by hand or from a fake peer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "access_scope.h"

static struct rpc_peer fake_peer;
static bool fake_admin;

bool rpc_call_peer_is_admin(const struct rpc_call *call)
{
	(void)call;
	return fake_admin;
}

void rpc_call_peer_creds(const struct rpc_call *call, struct rpc_peer *ret)
{
	(void)call;
	*ret = fake_peer;
}

static struct access_scope unix_scope(uint32_t uid, uint32_t gid, uint32_t group)
{
	struct access_scope sc;

	memset(&fake_peer, 0, sizeof(fake_peer));
	fake_peer.transport = RPC_TRANSPORT_UNIX;
	fake_peer.uid = uid;
	fake_peer.gid = gid;
	fake_peer.groups[0] = group;
	fake_peer.n_groups = 1;
	fake_admin = false;
	access_scope_of(NULL, &sc);
	return sc;
}

static void test_files(void **state)
{
	struct access *acl = access_new();
	struct fileid priv = { { 1 } }, shared = { { 2 } }, grp = { { 3 } }, unseen = { { 4 } },
		      nometa = { { 5 } };
	struct access_scope a = unix_scope(1000, 1000, 50), b = unix_scope(2000, 2000, 60);
	struct access_scope tls;

	(void)state;
	assert_non_null(acl);
	/* B's 0600 file, mapped by B's process. */
	access_note_mapping(acl, &priv, 0600, 2000, 2000, 2000);
	/* A world-readable library mapped by root only. */
	access_note_mapping(acl, &shared, 0755, 0, 0, 0);
	/* 0640 root:50, mapped by B. */
	access_note_mapping(acl, &grp, 0640, 0, 50, 2000);
	/* A sensor that reports no owner. */
	access_note_mapping(acl, &nometa, 0, 0, 0, 1000);

	assert_false(access_may_read_file(acl, &a, &priv));
	assert_true(access_may_read_file(acl, &b, &priv));
	assert_true(access_may_read_file(acl, &a, &shared));
	/* Group 50 may read, but no process of A's maps it and it is not
	 * world-readable: the directories on the way are unknown. */
	assert_false(access_may_read_file(acl, &a, &grp));
	access_note_mapping(acl, &grp, 0640, 0, 50, 1000);
	assert_true(access_may_read_file(acl, &a, &grp));
	/* B maps it but is in no group 50: other bits say no. */
	assert_false(access_may_read_file(acl, &b, &grp));
	assert_false(access_may_read_file(acl, &a, &unseen));
	assert_false(access_may_read_file(acl, &a, &nometa));

	/* Uploads: the uploader only. */
	access_note_upload(acl, &priv, &a);
	assert_true(access_may_read_file(acl, &a, &priv));
	access_note_upload(acl, &unseen, &a);
	assert_true(access_may_read_file(acl, &a, &unseen));
	assert_false(access_may_read_file(acl, &b, &unseen));

	/* A certificate reader: world-readable files and readers' uploads. */
	memset(&fake_peer, 0, sizeof(fake_peer));
	fake_peer.transport = RPC_TRANSPORT_TLS;
	fake_admin = false;
	access_scope_of(NULL, &tls);
	assert_false(tls.has_uid);
	assert_true(access_may_read_file(acl, &tls, &shared));
	assert_false(access_may_read_file(acl, &tls, &priv));
	assert_false(access_may_read_file(acl, &tls, &grp));

	/* An admin sees everything. */
	fake_admin = true;
	access_scope_of(NULL, &tls);
	assert_true(access_may_read_file(acl, &tls, &priv));
	assert_true(access_may_read_file(acl, &tls, &(struct fileid){ { 9 } }));
	access_free(acl);
}

static void test_uids(void **state)
{
	struct access_scope a = unix_scope(1000, 1000, 50), tls;
	struct profile_query q = { 0 };

	(void)state;
	assert_true(access_sees_uid(&a, 1000));
	assert_false(access_sees_uid(&a, 0));
	assert_false(access_sees_uid(&a, 2000));
	access_profile_query(&a, &q);
	assert_true(q.scoped);
	assert_int_equal(q.uid, 1000);

	/* A TCP peer's uid field is 0 but means nothing: no root's data. */
	memset(&fake_peer, 0, sizeof(fake_peer));
	fake_peer.transport = RPC_TRANSPORT_TLS;
	fake_admin = false;
	access_scope_of(NULL, &tls);
	assert_false(access_sees_uid(&tls, 0));
	access_profile_query(&tls, &q);
	assert_true(q.scoped);
	assert_int_equal(q.uid, ACCESS_NO_UID);

	fake_admin = true;
	access_scope_of(NULL, &tls);
	assert_true(access_sees_uid(&tls, 0));
	access_profile_query(&tls, &q);
	assert_false(q.scoped);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_uids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
