/* fuzz-symbols-api.c - fuzzes the public Symbols API requests through the
 * real handlers of symbolizer/api/symbols.c and upload.c, with
 * fake_rpc.c in place of gRPC. Each record (fuzz_service.h) is one call,
 * its bytes unpacked as rpc_message.c would (undecodable: rpc_server.c answers
 * INVALID_ARGUMENT and no handler runs); op picks the method:
 *   0 Symbolize (SymbolizeRequest)   1 Upload (UploadRequest)
 *   2 Top (ProfileQuery)             3 Folded (ProfileQuery)
 *   4 Status
 * Calls share one service per input, so an Upload can be followed by a
 * Symbolize of the same file. Every call must be answered, at once or
 * (Symbolize waiting for an analysis) when the service stops.
 */
#include <stdlib.h>

#include "fuzz_service.h"
#include "symbols.pb-c.h"

#define FUZZ_MAX_INPUT (1u << 20)
#define FUZZ_MAX_CALLS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct {
	const char *path;
	const ProtobufCMessageDescriptor *request;
} methods[] = {
	{ "/sonde.v1.Symbols/Symbolize", &sonde__v1__symbolize_request__descriptor },
	{ "/sonde.v1.Symbols/Upload", &sonde__v1__upload_request__descriptor },
	{ "/sonde.v1.Symbols/Top", &sonde__v1__profile_query__descriptor },
	{ "/sonde.v1.Symbols/Folded", &sonde__v1__profile_query__descriptor },
	{ "/sonde.v1.Symbols/Status", &sonde__v1__status_request__descriptor },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rpc_call *calls[FUZZ_MAX_CALLS];
	struct fuzz_service fs;
	struct fuzz_record rec;
	size_t pos = 0, n = 0;

	if (size > FUZZ_MAX_INPUT || fuzz_service_start(&fs) < 0)
		return 0;
	while (n < FUZZ_MAX_CALLS && fuzz_next_record(data, size, &pos, &rec)) {
		size_t k = rec.op % (sizeof(methods) / sizeof(methods[0]));
		ProtobufCMessage *req;

		req = protobuf_c_message_unpack(methods[k].request, NULL, rec.len, rec.data);
		if (!req)
			continue;
		calls[n] = fuzz_unary(&fs, methods[k].path, req);
		protobuf_c_message_free_unpacked(req, NULL);
		if (calls[n])
			n++;
		fake_rpc_tick();
	}
	fuzz_service_stop(&fs);
	for (size_t i = 0; i < n; i++) {
		if (!calls[i]->finished)
			abort(); /* a call nobody answered */
		free(calls[i]);
	}
	return 0;
}
