/* access.c - who sees what of the Symbols API (docs/security.md, roles):
 * the one place that decides, for a caller's scope (made from its rpc
 * peer by api/access_scope.c), which processes' data and which files'
 * analyses it may see. Handlers ask here and nowhere else.
 *
 * As perf_event_paranoid gives perf users: an admin (main.c's policy
 * grants RPC_ROLE_ADMIN: root, the service user, --admin-group members,
 * --tls-admin-name certificates) sees everything; any other client sees
 * the samples, spans and processes of its own uid only, and the analysis
 * of a file only when it could have read the file itself, or uploaded it.
 *
 * A file's owner and mode come from the sensors on this host (ingest.proto
 * Mapping.file_mode/uid/gid, the fstat of the descriptor the sensor
 * hashed); which uids map it, from the ProcessUpdates that name it. A
 * uid means something only on its own host: ingest.c notes no mapping
 * from a sensor over TCP (another node), so those files are admins'. The
 * mode bits approximate "could read": directories on the way are not
 * seen, so a file that is not world-readable also needs a process of the
 * caller's own that maps it (which proves the caller reached it).
 * Bounded: ACCESS_MAX_FILES files, ACCESS_MAX_UIDS mapping and uploading
 * uids a file; past the bound a uid is not recorded (fails closed).
 */
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "hmap.h"

#define ACCESS_MAX_FILES 200000u
#define ACCESS_MAX_UIDS 16u

struct file_acl {
	bool has_meta;
	uint32_t mode, uid, gid;
	uint32_t mappers[ACCESS_MAX_UIDS];
	uint8_t n_mappers;
	uint32_t uploaders[ACCESS_MAX_UIDS];
	uint8_t n_uploaders;
};

struct access {
	struct hmap *files; /* fileid -> struct file_acl */
};

struct access *access_new(void)
{
	struct access *acl = calloc(1, sizeof(*acl));

	if (!acl)
		return NULL;
	acl->files = hmap_new();
	if (!acl->files) {
		free(acl);
		return NULL;
	}
	return acl;
}

void access_free(struct access *acl)
{
	if (!acl)
		return;
	hmap_free(acl->files, free);
	free(acl);
}

void access_scope_unix(struct access_scope *ret, bool admin, uint32_t uid, uint32_t gid,
		       const uint32_t *groups, size_t n_groups)
{
	memset(ret, 0, sizeof(*ret));
	ret->all = admin;
	ret->has_uid = true;
	ret->uid = uid;
	ret->gid = gid;
	ret->n_groups = n_groups < ACCESS_MAX_GROUPS ? n_groups : ACCESS_MAX_GROUPS;
	memcpy(ret->groups, groups, ret->n_groups * sizeof(ret->groups[0]));
	ret->owner = uid;
}

void access_scope_remote(struct access_scope *ret, bool admin)
{
	memset(ret, 0, sizeof(*ret));
	ret->all = admin;
	/* Certificate readers own no processes; their uploads are theirs
	 * together (one CA, one identity). */
	ret->uid = ACCESS_NO_UID;
	ret->owner = ACCESS_TLS_OWNER;
}

bool access_sees_uid(const struct access_scope *sc, uint32_t uid)
{
	return sc->all || (sc->has_uid && sc->uid == uid);
}

void access_profile_query(const struct access_scope *sc, struct profile_query *q)
{
	q->scoped = !sc->all;
	/* ACCESS_NO_UID: no process has it, so nothing matches. */
	q->uid = sc->has_uid ? sc->uid : ACCESS_NO_UID;
}

static bool in_list(const uint32_t *v, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* The file's mode bits for the scope, as the kernel's permission check
 * picks the class: owner, else group, else other. */
static bool mode_allows(const struct file_acl *f, const struct access_scope *sc)
{
	if (sc->has_uid && sc->uid == f->uid)
		return f->mode & 0400;
	if (sc->has_uid && (sc->gid == f->gid || in_list(sc->groups, sc->n_groups, f->gid)))
		return f->mode & 0040;
	return f->mode & 0004;
}

bool access_may_read_file(struct access *acl, const struct access_scope *sc,
			  const struct fileid *id)
{
	const struct file_acl *f;

	if (sc->all)
		return true;
	f = hmap_get(acl->files, id, sizeof(*id));
	if (!f)
		return false;
	if (in_list(f->uploaders, f->n_uploaders, sc->owner))
		return true;
	if (!f->has_meta || !mode_allows(f, sc))
		return false;
	return (f->mode & 0004) || (sc->has_uid && in_list(f->mappers, f->n_mappers, sc->uid));
}

static struct file_acl *acl_get(struct access *acl, const struct fileid *id)
{
	struct file_acl *f = hmap_get(acl->files, id, sizeof(*id));

	if (f || hmap_count(acl->files) >= ACCESS_MAX_FILES)
		return f;
	f = calloc(1, sizeof(*f));
	if (f && hmap_put(acl->files, id, sizeof(*id), f, NULL) < 0) {
		free(f);
		f = NULL;
	}
	return f;
}

static void add_uid(uint32_t *v, uint8_t *n, uint32_t uid)
{
	if (!in_list(v, *n, uid) && *n < ACCESS_MAX_UIDS)
		v[(*n)++] = uid;
}

void access_note_mapping(struct access *acl, const struct fileid *id, uint32_t mode,
			 uint32_t file_uid, uint32_t file_gid, uint32_t proc_uid)
{
	struct file_acl *f = acl_get(acl, id);

	if (!f)
		return;
	/* The most restrictive report wins: a sensor that names this file ID
	 * with looser bits (a lie, or a chmod) widens nothing. Reports that
	 * disagree on the owner or group leave no class to trust: no mode
	 * bit at all, so admins and uploaders only. All zero (a sensor that
	 * does not report owners, or a root-owned file of mode 0) is a
	 * report like any other. Loosening shows only after a restart. */
	if (!f->has_meta) {
		f->has_meta = true;
		f->mode = mode & 07777;
		f->uid = file_uid;
		f->gid = file_gid;
	} else if (f->uid != file_uid || f->gid != file_gid) {
		f->mode = 0;
	} else {
		f->mode &= mode & 07777;
	}
	add_uid(f->mappers, &f->n_mappers, proc_uid);
}

void access_note_upload(struct access *acl, const struct fileid *id,
			const struct access_scope *sc)
{
	struct file_acl *f = acl_get(acl, id);

	if (f)
		add_uid(f->uploaders, &f->n_uploaders, sc->owner);
}
