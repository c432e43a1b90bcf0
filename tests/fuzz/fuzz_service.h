/* fuzz_service.h - a whole symbolizer service in one process for the
 * fuzzers of its rpc handlers: an in-memory SQLite cache and profile
 * store, the real handlers, and fake_rpc.c instead of gRPC. Inputs are a
 * sequence of records, each a u8 op, a u16 little-endian length and that
 * many bytes; what an op means is the harness's business.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fake_rpc.h"
#include "service.h"

struct fuzz_service {
	struct cache *cache;
	struct service *svc;
};

/* 0, or -1 if it could not be set up (not the input's fault). */
int fuzz_service_start(struct fuzz_service *fs);
void fuzz_service_stop(struct fuzz_service *fs);

struct fuzz_record {
	uint8_t op;
	const uint8_t *data;
	size_t len;
};

/* The next record at *pos of (data, size): 1 with *ret filled, 0 at the
 * end (a truncated last record ends the input). */
int fuzz_next_record(const uint8_t *data, size_t size, size_t *pos, struct fuzz_record *ret);

/* The service's method of path (service_method()); aborts if there is
 * none. Its handlers take fs->svc as ctx, as from the rpc server. */
const struct rpc_method *fuzz_method(const char *path);
/* Runs the unary method of path on req (borrowed) with a fresh call; the
 * call is freed by the caller (after fuzz_service_stop: deferred calls
 * are answered there). */
struct rpc_call *fuzz_unary(struct fuzz_service *fs, const char *path, const ProtobufCMessage *req);
