/* fuzz-ingest.c - fuzzes the symbolizer's sensor stream
 * (/sonde.v1.Ingest/Connect) through the real handlers of
 * symbolizer/api/ingest.c and everything they reach (sessions, file
 * analysis jobs, kernel symbols, unwind tables, the profile store), with
 * fake_rpc.c in place of gRPC.
 *
 * Input: records (fuzz_service.h) of op
 *   0  a SensorMessage, unpacked as rpc_message.c would (undecodable: the stream
 *      ends, as gRPC's INVALID_ARGUMENT would end it)
 *   1  the answers to every ReadRange the symbolizer sent so far, the
 *      record's bytes taken as the file (a range past its end gets a
 *      FileRange with error set, as a vanished file would)
 *   2  half-close
 *   3  the 200 ms timer
 * After the input the stream closes, and Status and Folded read back what
 * was stored. tests/fuzz/make-service-corpus.py writes the seeds.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_service.h"
#include "ingest.pb-c.h"
#include "symbols.pb-c.h"

#define FUZZ_MAX_INPUT (1u << 20)
#define CONNECT "/sonde.v1.Ingest/Connect"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void answer_reads(struct fuzz_service *fs, struct rpc_call *call,
			 const struct fuzz_record *rec)
{
	size_t n = call->n_reads;

	for (size_t i = 0; i < n && !call->finished; i++) {
		Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
		Sonde__V1__FileRange fr = SONDE__V1__FILE_RANGE__INIT;
		struct fake_read rd = call->reads[i];

		fr.request_id = rd.request_id;
		fr.file_id.data = rd.file_id;
		fr.file_id.len = sizeof(rd.file_id);
		fr.offset = rd.offset;
		if (rd.offset >= rec->len) {
			fr.error = (char *)"fuzz: past the end";
		} else {
			fr.data.data = (uint8_t *)rec->data + rd.offset;
			fr.data.len = rec->len - rd.offset < rd.length ? rec->len - rd.offset
								      : rd.length;
		}
		m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_FILE_RANGE;
		m.file_range = &fr;
		fuzz_method(CONNECT)->on_message(call, &m.base, fs->svc);
	}
	/* Reads sent while answering wait for the next record. */
	memmove(call->reads, call->reads + n, (call->n_reads - n) * sizeof(call->reads[0]));
	call->n_reads -= n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Sonde__V1__StatusRequest sreq = SONDE__V1__STATUS_REQUEST__INIT;
	Sonde__V1__ProfileQuery pq = SONDE__V1__PROFILE_QUERY__INIT;
	struct rpc_call *call = NULL, *status = NULL, *folded = NULL;
	struct fuzz_service fs;
	struct fuzz_record rec;
	size_t pos = 0;

	if (size > FUZZ_MAX_INPUT || fuzz_service_start(&fs) < 0)
		return 0;
	call = calloc(1, sizeof(*call));
	if (!call)
		goto cleanup;
	fuzz_method(CONNECT)->on_open(call, fs.svc);
	while (!call->finished && fuzz_next_record(data, size, &pos, &rec)) {
		ProtobufCMessage *m;

		switch (rec.op & 3) {
		case 0:
			m = protobuf_c_message_unpack(&sonde__v1__sensor_message__descriptor, NULL,
						      rec.len, rec.data);
			if (!m) {
				call->finished = true; /* rpc_server.c ends the call */
				break;
			}
			fuzz_method(CONNECT)->on_message(call, m, fs.svc);
			protobuf_c_message_free_unpacked(m, NULL);
			break;
		case 1:
			answer_reads(&fs, call, &rec);
			break;
		case 2:
			fuzz_method(CONNECT)->on_message(call, NULL, fs.svc);
			break;
		case 3:
			fake_rpc_tick();
			break;
		}
	}
	fuzz_method(CONNECT)->on_close(call, fs.svc);
	status = fuzz_unary(&fs, "/sonde.v1.Symbols/Status", &sreq.base);
	folded = fuzz_unary(&fs, "/sonde.v1.Symbols/Folded", &pq.base);
	if ((status && !status->finished) || (folded && !folded->finished))
		abort(); /* Status and Folded answer at once */
cleanup:
	fuzz_service_stop(&fs);
	free(call);
	free(status);
	free(folded);
	return 0;
}
