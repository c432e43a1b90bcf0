/* fake_rpc.h - a stand-in for the server side of the rpc wrapper
 * (common/rpc_server.c) and for its channels, so the fuzzers drive the
 * symbolizer's real rpc handlers (symbolizer/api/) in one process,
 * without a server loop, a connection or a socket. Calls are plain
 * structs; writes are packed by the real common/rpc_message.c (so every
 * answer must be a packable message) and the
 * ReadRanges not answered yet are kept (up to FAKE_RPC_MAX_READS) for the
 * harness to answer. Timers run when the harness ticks. Single-threaded,
 * like the server loop it replaces.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc_server.h"

#define FAKE_RPC_MAX_READS 64

struct fake_read {
	uint64_t request_id;
	uint8_t file_id[16];
	uint64_t offset;
	uint32_t length;
};

struct rpc_call {
	void *data;
	bool finished;
	enum rpc_status status;
	size_t writes;
	struct fake_read reads[FAKE_RPC_MAX_READS]; /* ReadRanges not answered yet */
	size_t n_reads;
};

/* The timer service_attach() installs: the harness calls it to tick. */
void fake_rpc_tick(void);
