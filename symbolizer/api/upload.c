/* upload.c - Symbols.Upload: a client sends a file the symbolizer has not
 * seen (its own binary, a library from another machine), in order, in
 * chunks of at most 4 MiB; the last chunk makes the symbolizer check that
 * the file ID the client named is the htlhash of the bytes it sent, and
 * analyse the file like one a sensor maps. Then Symbolize answers for it.
 *
 * Upload is the one Symbols method that makes the symbolizer hold and
 * parse client bytes, so it is bounded every way: files up to
 * UPLOAD_MAX_FILE, UPLOAD_MAX_ACTIVE uploads in progress holding at most
 * UPLOAD_MAX_HELD bytes together, a byte budget refilled at
 * UPLOAD_BYTES_PER_S for all clients together (RESOURCE_EXHAUSTED when
 * over: retry later), and uploads idle for UPLOAD_IDLE_MS are dropped. The
 * bytes go into a file image (address space reserved, pages filled as
 * chunks come) and are parsed only by the same bounded analyses as
 * everything else, in the sandbox.
 *
 * A local client may instead hand the file over as a sealed memfd on the
 * descriptor socket (fd_upload.c) and send one Upload with by_descriptor:
 * no chunks, no copies; the same budget, ID check and analysis.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access_scope.h"
#include "clock.h"
#include "fd_upload.h"
#include "hmap.h"
#include "log.h"
#include "symbols.pb-c.h"
#include "upload.h"

#define UPLOAD_MAX_FILE (1ull << 30)
#define UPLOAD_MAX_CHUNK (4u << 20)
#define UPLOAD_MAX_ACTIVE 4u
#define UPLOAD_MAX_HELD (2ull << 30)
#define UPLOAD_BYTES_PER_S (256.0 * 1024 * 1024)
#define UPLOAD_BURST (1024.0 * 1024 * 1024)
#define UPLOAD_IDLE_MS 60000
#define UPLOAD_MAX_NAME 255

struct upload {
	const struct api_core *core;
	struct hmap *files; /* fileid -> struct upload_file (in progress) */
	uint64_t bytes;     /* held by uploads in progress */
	double tokens;      /* byte budget (token bucket, see take_budget) */
	int64_t refill_ms;
};

struct upload_file {
	struct fileid id;
	uint32_t owner; /* access_scope.owner of whoever started it */
	uint64_t size, received;
	struct file_image *img;
	int64_t last_ms;
	char name[UPLOAD_MAX_NAME + 1];
};

static void upload_file_free(struct upload *up, struct upload_file *u)
{
	up->bytes -= u->received;
	file_image_free(u->img);
	free(u);
}

struct upload *upload_new(const struct api_core *core)
{
	struct upload *up = calloc(1, sizeof(*up));

	if (!up)
		return NULL;
	up->core = core;
	up->files = hmap_new();
	if (!up->files) {
		free(up);
		return NULL;
	}
	return up;
}

void upload_free(struct upload *up)
{
	if (!up)
		return;
	upload_expire(up, true);
	hmap_free(up->files, NULL);
	free(up);
}

bool upload_busy(const struct upload *up)
{
	return hmap_count(up->files) != 0;
}

void upload_expire(struct upload *up, bool all)
{
	int64_t now = clock_now_ms();
	struct hmap_iter it;
	void *val;

	hmap_iter_init(up->files, &it);
	while (hmap_next(up->files, &it, NULL, NULL, &val)) {
		struct upload_file *u = val;

		if (all || now - u->last_ms > UPLOAD_IDLE_MS) {
			hmap_remove(up->files, &u->id, sizeof(u->id));
			upload_file_free(up, u);
		}
	}
}

/* Takes len bytes from the shared budget; false when it is empty. */
static bool take_budget(struct upload *up, size_t len)
{
	int64_t now = clock_now_ms();

	if (up->refill_ms == 0) {
		up->tokens = UPLOAD_BURST;
		up->refill_ms = now;
	}
	up->tokens += (double)(now - up->refill_ms) * UPLOAD_BYTES_PER_S / 1000.0;
	if (up->tokens > UPLOAD_BURST)
		up->tokens = UPLOAD_BURST;
	up->refill_ms = now;
	if (up->tokens < (double)len)
		return false;
	up->tokens -= (double)len;
	return true;
}

/* The basename of a client-given name, printable ASCII only. */
static void clean_name(const char *in, char *out, size_t size)
{
	const char *slash = in ? strrchr(in, '/') : NULL;
	size_t k = 0;

	if (slash)
		in = slash + 1;
	for (; in && *in && k + 1 < size; in++)
		out[k++] = (*in > 0x20 && *in < 0x7f) ? *in : '_';
	out[k] = '\0';
}

static void reply(struct rpc_call *call, uint64_t received, bool complete, const char *error)
{
	Sonde__V1__UploadResponse r = SONDE__V1__UPLOAD_RESPONSE__INIT;

	r.received = received;
	r.complete = complete;
	r.error = (char *)(error ? error : "");
	rpc_call_finish(call, RPC_OK, NULL, &r.base);
}

/* A whole image of id (taken): the ID must be the bytes' own, or a client
 * could plant an analysis under another file's ID. Then analysed like a
 * file a sensor maps, and the call answered. */
static void analyse(struct upload *up, struct rpc_call *call, const struct access_scope *sc,
		    const struct fileid *id, struct file_image *img, const char *name)
{
	uint64_t size = file_image_size(img);
	const char *error = NULL;
	char hex[FILEID_HEX_LEN + 1];
	struct fileid got;
	int r;

	fileid_from_buffer(file_image_data(img), size, &got);
	if (memcmp(got.bytes, id->bytes, FILEID_LEN) != 0) {
		file_image_free(img);
		rpc_call_finish(call, RPC_INVALID_ARGUMENT,
				"file_id is not the htlhash of the uploaded bytes", NULL);
		return;
	}
	/* The caller holds the bytes: their analysis is its to see. */
	access_note_upload(up->core->access, id, sc);
	if (cache_contains(up->core->cache, id) == 1 || analysis_running(up->core->analysis, id)) {
		/* Analysed already (for a sensor, or another client): the
		 * bytes only had to prove the caller holds the file. */
		file_image_free(img);
		reply(call, size, true, NULL);
		return;
	}
	if (!name[0])
		name = fileid_to_hex(id, hex);
	registry_note_name(up->core->reg, id, name);
	r = analysis_whole(up->core->analysis, id, img, name, &error);
	if (r < 0) {
		rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
		return;
	}
	reply(call, size, true, error);
}

/* The bytes came as a sealed memfd (fd_upload.c checked it and its ID). */
static void upload_by_descriptor(struct upload *up, struct rpc_call *call,
				 const struct access_scope *sc, const Sonde__V1__UploadRequest *req,
				 const struct fileid *id)
{
	struct file_image *img;
	char name[UPLOAD_MAX_NAME + 1];
	uint64_t size;
	int fd;

	if (req->data.len || req->offset) {
		rpc_call_finish(call, RPC_INVALID_ARGUMENT, "by_descriptor carries no data", NULL);
		return;
	}
	fd = sc->has_uid ? fd_upload_take(id, sc->uid, &size) : -ENOENT;
	if (fd < 0) {
		rpc_call_finish(call, RPC_FAILED_PRECONDITION,
				"no descriptor for this file_id on the descriptor socket", NULL);
		return;
	}
	/* Analysis costs the same whichever way the bytes came. */
	if (!take_budget(up, size)) {
		close(fd);
		rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "upload budget used up, retry later", NULL);
		return;
	}
	img = file_image_map_sealed(fd);
	close(fd);
	if (!img) {
		rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "cannot map the descriptor", NULL);
		return;
	}
	clean_name(req->name, name, sizeof(name));
	log_info("upload of %s by descriptor: %llu bytes", name[0] ? name : "(no name)",
		 (unsigned long long)size);
	analyse(up, call, sc, id, img, name);
}

void upload_call(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	struct upload *up = ctx;
	const Sonde__V1__UploadRequest *req = (const Sonde__V1__UploadRequest *)msg;
	struct upload_file *u;
	struct fileid id;
	struct file_image *img;
	char name[UPLOAD_MAX_NAME + 1];
	struct access_scope scope;

	access_scope_of(call, &scope);
	if (req->file_id.len != FILEID_LEN) {
		rpc_call_finish(call, RPC_INVALID_ARGUMENT, "file_id must be 16 bytes", NULL);
		return;
	}
	memcpy(id.bytes, req->file_id.data, FILEID_LEN);
	/* Known already (analysed, by a sensor or an earlier upload) and the
	 * caller may see it: nothing to send. Otherwise the caller sends the
	 * bytes, which prove it holds the file (access.c). */
	if ((cache_contains(up->core->cache, &id) == 1 || analysis_running(up->core->analysis, &id)) &&
	    access_may_read_file(up->core->access, &scope, &id)) {
		if (req->by_descriptor && scope.has_uid) {
			uint64_t size;
			int fd = fd_upload_take(&id, scope.uid, &size);

			if (fd >= 0)
				close(fd);
		}
		reply(call, req->size, true, NULL);
		return;
	}
	if (req->by_descriptor) {
		upload_by_descriptor(up, call, &scope, req, &id);
		return;
	}
	if (req->size == 0 || req->size > UPLOAD_MAX_FILE) {
		rpc_call_finish(call, RPC_INVALID_ARGUMENT, "size must be 1 byte to 1 GiB", NULL);
		return;
	}
	if (req->data.len > UPLOAD_MAX_CHUNK) {
		rpc_call_finish(call, RPC_INVALID_ARGUMENT, "chunks are at most 4 MiB", NULL);
		return;
	}
	u = hmap_get(up->files, &id, sizeof(id));
	if (u && u->owner != scope.owner) {
		/* The bytes so far are another client's: finishing them must
		 * not count as holding the file. */
		rpc_call_finish(call, RPC_FAILED_PRECONDITION,
				"another client's upload of this file is in progress; retry later", NULL);
		return;
	}
	if (u && u->size != req->size) {
		rpc_call_finish(call, RPC_INVALID_ARGUMENT, "size differs from the upload's first chunk", NULL);
		return;
	}
	if (!u) {
		if (req->offset != 0) {
			rpc_call_finish(call, RPC_FAILED_PRECONDITION,
					"no upload of this file in progress: start at offset 0", NULL);
			return;
		}
		if (hmap_count(up->files) >= UPLOAD_MAX_ACTIVE) {
			rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "too many uploads in progress", NULL);
			return;
		}
		u = calloc(1, sizeof(*u));
		if (!u || !(u->img = file_image_new(req->size))) {
			free(u);
			rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
			return;
		}
		u->id = id;
		u->owner = scope.owner;
		u->size = req->size;
		clean_name(req->name, u->name, sizeof(u->name));
		if (hmap_put(up->files, &id, sizeof(id), u, NULL) < 0) {
			file_image_free(u->img);
			free(u);
			rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
			return;
		}
	}
	u->last_ms = clock_now_ms();
	if (req->offset != u->received) {
		/* Chunks come in order; say where to go on. */
		char msg[96];

		snprintf(msg, sizeof(msg), "expected offset %llu", (unsigned long long)u->received);
		rpc_call_finish(call, RPC_FAILED_PRECONDITION, msg, NULL);
		return;
	}
	if (req->data.len > u->size - u->received) {
		rpc_call_finish(call, RPC_INVALID_ARGUMENT, "chunk goes past the file's size", NULL);
		return;
	}
	if (up->bytes + req->data.len > UPLOAD_MAX_HELD || !take_budget(up, req->data.len)) {
		rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "upload budget used up, retry later", NULL);
		return;
	}
	if (req->data.len && file_image_put(u->img, u->received, req->data.data, req->data.len) < 0) {
		rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
		return;
	}
	u->received += req->data.len;
	up->bytes += req->data.len;
	if (u->received < u->size) {
		reply(call, u->received, false, NULL);
		return;
	}
	memcpy(name, u->name, sizeof(name));
	hmap_remove(up->files, &id, sizeof(id));
	img = u->img;
	u->img = NULL;
	upload_file_free(up, u);
	analyse(up, call, &scope, &id, img, name);
}
