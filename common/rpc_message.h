/* rpc_message.h - packing and unpacking protobuf-c messages, for a file
 * (rpc_message_pack) or for gRPC (the byte-buffer calls, which only
 * rpc_server.c and rpc_client.c use: nobody else sees a grpc_byte_buffer).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

struct grpc_byte_buffer;

/* Frees a message returned by an rpc call or rpc_message_from_buffer().
 * Accepts NULL. */
void rpc_message_free(ProtobufCMessage *msg);

/* Serializes msg (borrowed) for a file rather than a call (pprof.c):
 * returns 0 with a malloc'd *ret (the caller frees it) and *ret_len,
 * -E2BIG if it would exceed max bytes, -ENOMEM; outputs untouched on
 * failure. */
int rpc_message_pack(const ProtobufCMessage *msg, size_t max, uint8_t **ret, size_t *ret_len);

/* Packs msg (borrowed) into a new byte buffer, owned by the caller
 * (grpc_byte_buffer_destroy() it once its batch is done); its length in
 * *ret_len if not NULL. Cannot fail (gRPC aborts when out of memory). */
struct grpc_byte_buffer *rpc_message_to_buffer(const ProtobufCMessage *msg, size_t *ret_len);

/* A byte buffer holding a copy of len bytes at data (borrowed), owned by
 * the caller: for messages that are already packed. */
struct grpc_byte_buffer *rpc_message_bytes_to_buffer(const void *data, size_t len);

/* Decodes bb (borrowed) as a desc message: an owned message (free it
 * with rpc_message_free()), or NULL if it does not decode. Size limits
 * are gRPC's, applied before a buffer reaches this. */
ProtobufCMessage *rpc_message_from_buffer(const ProtobufCMessageDescriptor *desc,
					  struct grpc_byte_buffer *bb);
