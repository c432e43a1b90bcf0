/* rpc_testing.h - test-only entry points of rpc_client.c. Not for production
 * code: they bypass the protobuf layer to exercise error paths. */
#pragma once

#include <stddef.h>

#include "rpc_client.h"

/* Writes len raw bytes (borrowed) as one message on the stream, without
 * packing. Same return values as rpc_stream_write(). */
int rpc_stream_write_raw(struct rpc_stream *s, const void *data, size_t len);
