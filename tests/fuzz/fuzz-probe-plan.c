/* fuzz-probe-plan.c - fuzzes what the sensor makes of a ProbePlan from
 * the symbolizer: a SymbolizerMessage unpacked as rpc.c would, its
 * probe_plan handed as uplink.c's handle_probe_plan() hands it to
 * goprobes_queue_plan(), whose shape checks and copies are
 * goprobes_plan_from_msg() (sensor/goprobes_plan.c: pure, no BPF). Every
 * plan it returns must be inside the sensor's bounds: known probes only,
 * counts under the caps, names terminated and non-empty, nothing loaded.
 *
 * Input: one packed SymbolizerMessage.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "goprobes_plan.h"
#include "ingest.pb-c.h"
#include "log.h"

#define FUZZ_MAX_INPUT (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The probes sensor/goprobes.c carries (its probe_defs). */
static const char *const known[] = { "go_http_server", "go_http_client" };

static void check_name(const char *s, size_t size)
{
	size_t n = strnlen(s, size);

	if (n == 0 || n == size)
		abort();
}

static void check_plan(const struct goprobes_plan *p, const Sonde__V1__ProbePlan *pp)
{
	if (p->n_sets == 0 || p->n_sets > GOPROBES_PLAN_MAX_SETS || p->n_sets > pp->n_probes ||
	    memcmp(p->file_id, pp->file_id.data, FILEID_LEN) != 0 || p->next)
		abort();
	for (size_t i = 0; i < p->n_sets; i++) {
		const struct goprobes_plan_set *s = &p->sets[i];

		if (s->def >= sizeof(known) / sizeof(known[0]) || strcmp(known[s->def], s->probe) ||
		    s->n_consts > GOPROBES_PLAN_MAX_CONSTS || s->n_attaches == 0 ||
		    s->n_attaches > GOPROBES_PLAN_MAX_ATTACHES || !s->attaches || s->obj || s->progs)
			abort();
		for (size_t k = 0; k < s->n_consts; k++)
			check_name(s->consts[k].name, sizeof(s->consts[k].name));
		for (size_t k = 0; k < s->n_attaches; k++) {
			check_name(s->attaches[k].program, sizeof(s->attaches[k].program));
			check_name(s->attaches[k].symbol, sizeof(s->attaches[k].symbol));
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Sonde__V1__SymbolizerMessage *m;
	struct goprobes_plan *p = (struct goprobes_plan *)&size; /* untouched on failure */
	int r;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	log_max_level = LOG_LEVEL_ERROR; /* refusals are warnings: not the fuzzer's output */
	m = (Sonde__V1__SymbolizerMessage *)protobuf_c_message_unpack(
		&sonde__v1__symbolizer_message__descriptor, NULL, size, data);
	if (!m)
		return 0;
	if (m->kind_case == SONDE__V1__SYMBOLIZER_MESSAGE__KIND_PROBE_PLAN) {
		r = goprobes_plan_from_msg(m->probe_plan, known, sizeof(known) / sizeof(known[0]), &p);
		if (r == 0 && p) {
			check_plan(p, m->probe_plan);
			goprobes_plan_free(p);
		} else if (r != 0 && ((r != -EPROTO && r != -ENOMEM) || p != (void *)&size)) {
			abort();
		} else if (r == -EPROTO && m->probe_plan && m->probe_plan->file_id.len == FILEID_LEN) {
			abort(); /* refused a well-shaped plan as malformed */
		}
	}
	protobuf_c_message_free_unpacked(&m->base, NULL);
	return 0;
}
