/* fake_rpc.c - see fake_rpc.h. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_rpc.h"
#include "ingest.pb-c.h"
#include "rpc_client.h"
#include "rpc_message.h"

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

/* The harness has no sockets (fd_upload.c's listener is never started). */
int rpc_unix_peer(int fd, struct rpc_peer *ret)
{
	(void)fd;
	(void)ret;
	return -ENOTSOCK;
}

bool rpc_call_peer_is_sensor(const struct rpc_call *call)
{
	(void)call;
	return true;
}

/* The harness's caller is root: an admin, so every handler path runs. */
bool rpc_call_peer_is_admin(const struct rpc_call *call)
{
	(void)call;
	return true;
}

void rpc_call_peer_creds(const struct rpc_call *call, struct rpc_peer *ret)
{
	(void)call;
	memset(ret, 0, sizeof(*ret));
	ret->transport = RPC_TRANSPORT_UNIX;
}

/* Packs msg with the real packing code, so a message the handlers build
 * wrongly (a NULL string, a count without its array) shows up here. */
static int pack_check(const ProtobufCMessage *msg)
{
	uint8_t *buf = NULL;
	size_t n;
	int r = rpc_message_pack(msg, SIZE_MAX, &buf, &n);

	if (r == -EIO)
		abort(); /* packed a different size than it computed */
	free(buf);
	return r;
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

/* ---- the client half the symbolizer links (OTLP exporter) ----
 * No network in a fuzzer: the exporter, which the harness never
 * configures, would only see refusals. */

struct rpc_channel *rpc_channel_new(const char *target, const struct rpc_channel_opts *opts)
{
	(void)target;
	(void)opts;
	return NULL;
}

void rpc_channel_free(struct rpc_channel *ch)
{
	(void)ch;
}

int rpc_unary_packed(struct rpc_channel *ch, const char *path, const void *data, size_t len,
		     const ProtobufCMessageDescriptor *reply_desc, int timeout_ms,
		     bool wait_for_ready, ProtobufCMessage **ret_reply, struct rpc_error *err)
{
	(void)ch;
	(void)path;
	(void)data;
	(void)len;
	(void)reply_desc;
	(void)timeout_ms;
	(void)wait_for_ready;
	(void)ret_reply;
	if (err) {
		err->status = RPC_UNAVAILABLE;
		snprintf(err->message, sizeof(err->message), "fuzz: no network");
	}
	return -ECONNREFUSED;
}
