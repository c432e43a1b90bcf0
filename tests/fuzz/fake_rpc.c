/* fake_rpc.c - see fake_rpc.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake_rpc.h"
#include "ingest.pb-c.h"

static void (*timer_fn)(void *ctx);
static void *timer_ctx;

void fake_rpc_tick(void)
{
	if (timer_fn)
		timer_fn(timer_ctx);
}

int rpc_server_add_timer(struct rpc_server *s, int interval_ms, void (*fn)(void *ctx), void *ctx)
{
	(void)s;
	(void)interval_ms;
	timer_fn = fn;
	timer_ctx = ctx;
	return 0;
}

void rpc_server_timer_delay(struct rpc_server *s, void (*fn)(void *ctx), int ms, bool sooner_only)
{
	/* The harness ticks when its input says so. */
	(void)s;
	(void)fn;
	(void)ms;
	(void)sooner_only;
}

void rpc_call_set_data(struct rpc_call *call, void *data)
{
	call->data = data;
}

void *rpc_call_data(const struct rpc_call *call)
{
	return call->data;
}

const char *rpc_call_peer(const struct rpc_call *call)
{
	(void)call;
	return "fuzz:peer";
}

int rpc_call_peer_uid(const struct rpc_call *call, uint32_t *ret_uid)
{
	(void)call;
	*ret_uid = 0;
	return 0;
}

bool rpc_call_peer_is_sensor(const struct rpc_call *call)
{
	(void)call;
	return true;
}

/* Packs msg as rpc.c would, so a message the handlers build wrongly
 * (a NULL string, a count without its array) shows up here. */
static int pack_check(const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(n ? n : 1);

	if (!buf)
		return -ENOMEM;
	if (protobuf_c_message_pack(msg, buf) != n)
		abort();
	free(buf);
	return 0;
}

int rpc_call_write(struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Sonde__V1__SymbolizerMessage *m = (const Sonde__V1__SymbolizerMessage *)msg;

	if (call->finished)
		return -EPIPE;
	if (pack_check(msg) < 0)
		return -ENOBUFS;
	call->writes++;
	if (msg->descriptor == &sonde__v1__symbolizer_message__descriptor &&
	    m->kind_case == SONDE__V1__SYMBOLIZER_MESSAGE__KIND_READ_RANGE &&
	    call->n_reads < FAKE_RPC_MAX_READS) {
		struct fake_read *r = &call->reads[call->n_reads++];

		r->request_id = m->read_range->request_id;
		if (m->read_range->file_id.len != sizeof(r->file_id))
			abort(); /* the symbolizer asks only for 16-byte IDs */
		memcpy(r->file_id, m->read_range->file_id.data, sizeof(r->file_id));
		r->offset = m->read_range->offset;
		r->length = m->read_range->length;
	}
	return 0;
}

void rpc_call_finish(struct rpc_call *call, enum rpc_status status, const char *details,
		     const ProtobufCMessage *reply)
{
	(void)details;
	if (call->finished)
		return;
	call->finished = true;
	call->status = status;
	if (reply && status == RPC_OK)
		pack_check(reply);
}
