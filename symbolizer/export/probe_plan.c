/* probe_plan.c - the probe plan of a Go executable (probes/go_plan.c) as
 * the packed sonde.v1.ProbePlan the cache keeps and sensors receive
 * (docs/go-probes.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "go_plan.h"
#include "ingest.pb-c.h"
#include "log.h"
#include "probe_plan.h"

int probe_plan_pack(const struct fileid *id, const struct go_plan *p, uint8_t **ret, size_t *ret_len)
{
	Sonde__V1__ProbePlan plan = SONDE__V1__PROBE_PLAN__INIT;
	Sonde__V1__ProbeSet sets[2], *psets[2];
	Sonde__V1__ProbeConst consts[2][GO_PLAN_MAX_CONSTS], *pconsts[2][GO_PLAN_MAX_CONSTS];
	Sonde__V1__ProbeAttach att[2][GO_PLAN_MAX_ATTACH], *patt[2][GO_PLAN_MAX_ATTACH];
	size_t len;
	uint8_t *out;

	plan.file_id.data = (uint8_t *)id->bytes;
	plan.file_id.len = FILEID_LEN;
	plan.go_version = (char *)p->go_version;
	plan.error = (char *)(p->error ? p->error : "");
	for (size_t i = 0; !p->error && i < p->n_probes && i < 2; i++) {
		const struct go_plan_probe *q = &p->probes[i];

		sonde__v1__probe_set__init(&sets[i]);
		sets[i].probe = (char *)q->probe;
		sets[i].error = (char *)(q->error ? q->error : "");
		for (size_t k = 0; k < q->n_consts; k++) {
			sonde__v1__probe_const__init(&consts[i][k]);
			consts[i][k].name = (char *)q->consts[k].name;
			consts[i][k].value = q->consts[k].value;
			pconsts[i][k] = &consts[i][k];
		}
		sets[i].consts = pconsts[i];
		sets[i].n_consts = q->n_consts;
		for (size_t k = 0; !q->error && k < q->n_attach; k++) {
			sonde__v1__probe_attach__init(&att[i][k]);
			att[i][k].program = (char *)q->attach[k].program;
			att[i][k].file_offset = q->attach[k].file_offset;
			att[i][k].symbol = (char *)q->attach[k].symbol;
			patt[i][k] = &att[i][k];
			sets[i].n_attaches = k + 1;
		}
		sets[i].attaches = patt[i];
		psets[i] = &sets[i];
		plan.n_probes = i + 1;
	}
	plan.probes = psets;
	len = protobuf_c_message_get_packed_size(&plan.base);
	out = malloc(len ? len : 1);
	if (!out)
		return -ENOMEM;
	protobuf_c_message_pack(&plan.base, out);
	*ret = out;
	*ret_len = len;
	return 0;
}
