/* test-access.c - the Symbols access policy (symbolizer/api/access.c):
 * which files' analyses and which uids' data a scope sees. The rpc layer
 * is faked: the scopes are built by hand or from a fake peer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "service.h"

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
	struct service svc = { 0 };
	struct fileid priv = { { 1 } }, shared = { { 2 } }, grp = { { 3 } }, unseen = { { 4 } },
		      nometa = { { 5 } };
	struct access_scope a = unix_scope(1000, 1000, 50), b = unix_scope(2000, 2000, 60);
	struct access_scope tls;

	(void)state;
	svc.file_acl = hmap_new();
	assert_non_null(svc.file_acl);
	/* B's 0600 file, mapped by B's process. */
	access_note_mapping(&svc, &priv, 0600, 2000, 2000, 2000);
	/* A world-readable library mapped by root only. */
	access_note_mapping(&svc, &shared, 0755, 0, 0, 0);
	/* 0640 root:50, mapped by B. */
	access_note_mapping(&svc, &grp, 0640, 0, 50, 2000);
	/* A sensor that reports no owner. */
	access_note_mapping(&svc, &nometa, 0, 0, 0, 1000);

	assert_false(access_may_read_file(&svc, &a, &priv));
	assert_true(access_may_read_file(&svc, &b, &priv));
	assert_true(access_may_read_file(&svc, &a, &shared));
	/* Group 50 may read, but no process of A's maps it and it is not
	 * world-readable: the directories on the way are unknown. */
	assert_false(access_may_read_file(&svc, &a, &grp));
	access_note_mapping(&svc, &grp, 0640, 0, 50, 1000);
	assert_true(access_may_read_file(&svc, &a, &grp));
	/* B maps it but is in no group 50: other bits say no. */
	assert_false(access_may_read_file(&svc, &b, &grp));
	assert_false(access_may_read_file(&svc, &a, &unseen));
	assert_false(access_may_read_file(&svc, &a, &nometa));

	/* Uploads: the uploader only. */
	access_note_upload(&svc, &priv, &a);
	assert_true(access_may_read_file(&svc, &a, &priv));
	access_note_upload(&svc, &unseen, &a);
	assert_true(access_may_read_file(&svc, &a, &unseen));
	assert_false(access_may_read_file(&svc, &b, &unseen));

	/* A certificate reader: world-readable files and readers' uploads. */
	memset(&fake_peer, 0, sizeof(fake_peer));
	fake_peer.transport = RPC_TRANSPORT_TLS;
	fake_admin = false;
	access_scope_of(NULL, &tls);
	assert_false(tls.has_uid);
	assert_true(access_may_read_file(&svc, &tls, &shared));
	assert_false(access_may_read_file(&svc, &tls, &priv));
	assert_false(access_may_read_file(&svc, &tls, &grp));

	/* An admin sees everything. */
	fake_admin = true;
	access_scope_of(NULL, &tls);
	assert_true(access_may_read_file(&svc, &tls, &priv));
	assert_true(access_may_read_file(&svc, &tls, &(struct fileid){ { 9 } }));
	hmap_free(svc.file_acl, free);
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
