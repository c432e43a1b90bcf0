/* rpc_message.c - protobuf-c messages to and from bytes (see
 * rpc_message.h). A message crosses gRPC as one byte buffer; protobuf-c
 * needs one contiguous buffer to decode, so a received one is joined
 * first.
 */
#include <errno.h>
#include <stdlib.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>

#include "rpc_message.h"

void rpc_message_free(ProtobufCMessage *msg)
{
	if (msg)
		protobuf_c_message_free_unpacked(msg, NULL);
}

int rpc_message_pack(const ProtobufCMessage *msg, size_t max, uint8_t **ret, size_t *ret_len)
{
	size_t size = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf;

	if (size > max)
		return -E2BIG;
	buf = malloc(size ? size : 1);
	if (!buf)
		return -ENOMEM;
	if (protobuf_c_message_pack(msg, buf) != size) {
		free(buf); /* cannot happen: the size was computed from msg */
		return -EIO;
	}
	*ret = buf;
	*ret_len = size;
	return 0;
}

grpc_byte_buffer *rpc_message_to_buffer(const ProtobufCMessage *msg, size_t *ret_len)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	grpc_slice slice = grpc_slice_malloc(len);
	grpc_byte_buffer *bb;

	protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(slice));
	bb = grpc_raw_byte_buffer_create(&slice, 1); /* takes its own ref */
	grpc_slice_unref(slice);
	if (ret_len)
		*ret_len = len;
	return bb;
}

grpc_byte_buffer *rpc_message_bytes_to_buffer(const void *data, size_t len)
{
	grpc_slice slice = grpc_slice_from_copied_buffer(data, len);
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&slice, 1);

	grpc_slice_unref(slice);
	return bb;
}

ProtobufCMessage *rpc_message_from_buffer(const ProtobufCMessageDescriptor *desc,
					  grpc_byte_buffer *bb)
{
	grpc_byte_buffer_reader reader;
	ProtobufCMessage *msg;
	grpc_slice slice;

	if (!grpc_byte_buffer_reader_init(&reader, bb))
		return NULL;
	/* protobuf-c needs one contiguous buffer: readall joins the slices. */
	slice = grpc_byte_buffer_reader_readall(&reader);
	msg = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(slice),
					GRPC_SLICE_START_PTR(slice));
	grpc_slice_unref(slice);
	grpc_byte_buffer_reader_destroy(&reader);
	return msg;
}
