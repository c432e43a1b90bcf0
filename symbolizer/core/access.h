/* access.h - what a Symbols caller may see (docs/security.md, roles):
 * a caller's scope, and the owners and modes of files as sensors on this
 * host reported them (access.c). No rpc here: api/access_scope.h makes a
 * scope from a call's peer.
 *
 * Everything runs on the rpc loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fileid.h"
#include "profile.h"

#define ACCESS_NO_UID UINT32_MAX          /* owns no process */
#define ACCESS_TLS_OWNER (UINT32_MAX - 1) /* uploads of certificate readers */
#define ACCESS_MAX_GROUPS 64              /* supplementary groups kept */

struct access_scope {
	bool all;          /* an admin: every user's data */
	bool has_uid;      /* a Unix peer: uid, gid and groups are its own */
	uint32_t uid, gid; /* uid ACCESS_NO_UID without has_uid */
	uint32_t groups[ACCESS_MAX_GROUPS];
	size_t n_groups;
	uint32_t owner;    /* whose uploads are its own: uid or ACCESS_TLS_OWNER */
};

/* The files' owners, modes, mapping and uploading uids. */
struct access;

/* NULL on out of memory. */
struct access *access_new(void);
/* Accepts NULL. */
void access_free(struct access *acl);

/* The scope of a local (Unix) peer with these credentials; groups (the
 * first ACCESS_MAX_GROUPS of n_groups) are copied. admin: it sees all. */
void access_scope_unix(struct access_scope *ret, bool admin, uint32_t uid, uint32_t gid,
		       const uint32_t *groups, size_t n_groups);
/* The scope of a peer without Unix credentials (TLS, TCP). */
void access_scope_remote(struct access_scope *ret, bool admin);
/* Whether sc sees the data (samples, spans, process lists) of a process
 * owned by uid. */
bool access_sees_uid(const struct access_scope *sc, uint32_t uid);
/* Limits q to what sc sees. */
void access_profile_query(const struct access_scope *sc, struct profile_query *q);
/* Whether sc may have the analysis of file id (symbols, lines): an admin;
 * its uploader; or the file's mode lets sc read it and it is world-
 * readable or mapped by a process of sc's uid. */
bool access_may_read_file(struct access *acl, const struct access_scope *sc,
			  const struct fileid *id);
/* A sensor on this host (a Unix peer) reported a process of proc_uid
 * mapping id, whose owner and mode bits are file_uid, file_gid, mode. Of
 * several reports of one file the most restrictive wins: the mode bits
 * intersect, and an owner or group that differs clears them all. */
void access_note_mapping(struct access *acl, const struct fileid *id, uint32_t mode,
			 uint32_t file_uid, uint32_t file_gid, uint32_t proc_uid);
/* sc uploaded id (its bytes matched the ID). */
void access_note_upload(struct access *acl, const struct fileid *id,
			const struct access_scope *sc);
