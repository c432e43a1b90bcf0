/* fuzz_service.c - see fuzz_service.h. */
#include <stdlib.h>

#include "fuzz_service.h"
#include "interp_ops.h"
#include "log.h"

int fuzz_service_start(struct fuzz_service *fs)
{
	static const char *const no_dirs[] = { NULL };
	static int logging;
	struct service_opts opts = { .debug_dirs = no_dirs, .retention_minutes = 60,
				     .interp_kinds = interp_kinds_all() };

	if (!logging) {
		/* Bad input is logged as warnings by design; only errors here. */
		log_init("fuzz", LOG_LEVEL_ERROR);
		logging = 1;
	}
	fs->cache = NULL;
	fs->svc = NULL;
	if (cache_open(":memory:", NULL, &fs->cache) < 0)
		return -1;
	fs->svc = service_new(&opts);
	if (!fs->svc || service_attach(fs->svc, NULL, fs->cache, fs->cache) < 0) {
		fuzz_service_stop(fs);
		return -1;
	}
	return 0;
}

void fuzz_service_stop(struct fuzz_service *fs)
{
	service_free(fs->svc);
	cache_close(fs->cache);
	fs->svc = NULL;
	fs->cache = NULL;
}

int fuzz_next_record(const uint8_t *data, size_t size, size_t *pos, struct fuzz_record *ret)
{
	size_t p = *pos, len;

	if (size - p < 3)
		return 0;
	len = (size_t)data[p + 1] | (size_t)data[p + 2] << 8;
	if (size - p - 3 < len)
		return 0;
	ret->op = data[p];
	ret->data = data + p + 3;
	ret->len = len;
	*pos = p + 3 + len;
	return 1;
}

const struct rpc_method *fuzz_method(const char *path)
{
	const struct rpc_method *m = service_method(path);

	if (!m)
		abort();
	return m;
}

struct rpc_call *fuzz_unary(struct fuzz_service *fs, const char *path, const ProtobufCMessage *req)
{
	const struct rpc_method *m = fuzz_method(path);
	struct rpc_call *call = calloc(1, sizeof(*call));

	if (call)
		m->on_call(call, req, fs->svc);
	return call;
}
