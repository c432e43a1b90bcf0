/* fuzz-probe-plan.c - fuzzes the sensor's one check of what the symbolizer
 * steers BPF and probes with (sensor/validate.c): a SymbolizerMessage
 * unpacked as rpc_message.c would, its probe_plan through validate_probe_plan()
 * against a catalog shaped like the sensor's probe objects, and its
 * interpreter_config through validate_interp_config(). Must never crash
 * or read out of bounds; an accepted plan must be inside the documented
 * bounds (known probes and programs only, counts under the caps), and any
 * answer other than 0 or -EBADMSG with a reason is a bug.
 *
 * Input: one packed SymbolizerMessage.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.pb-c.h"
#include "validate.h"

#define FUZZ_MAX_INPUT (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Programs and some consts of the objects in bpf/probes/ (goprobes.c
 * lists the real catalog from the objects at start). */
static const char *const server_progs[] = { "server_enter", "server_return" };
static const char *const client_progs[] = { "client_enter", "client_return" };
static const char *const server_consts[] = { "req_method_off", "req_url_off", "header_lookup" };
static const char *const client_consts[] = { "req_method_off", "req_url_off" };
static const struct validate_probe_def defs[] = {
	{ "go_http_server", server_progs, 2, server_consts, 3 },
	{ "go_http_client", client_progs, 2, client_consts, 2 },
};

static bool known_program(const struct validate_probe_def *d, const char *name)
{
	for (size_t i = 0; i < d->n_programs; i++)
		if (!strcmp(d->programs[i], name))
			return true;
	return false;
}

/* An accepted plan: every applying set names a known probe, every attach
 * a program of it, within the caps. */
static void check_accepted(const Sonde__V1__ProbePlan *pp)
{
	if (pp->file_id.len != 16 || pp->n_probes == 0 || pp->n_probes > VALIDATE_MAX_PROBES)
		abort();
	for (size_t i = 0; i < pp->n_probes; i++) {
		const Sonde__V1__ProbeSet *s = pp->probes[i];
		const struct validate_probe_def *d = NULL;

		if (s->error && s->error[0])
			continue;
		for (size_t k = 0; k < sizeof(defs) / sizeof(defs[0]); k++)
			if (s->probe && !strcmp(s->probe, defs[k].name))
				d = &defs[k];
		if (!d || s->n_attaches == 0 || s->n_attaches > VALIDATE_MAX_ATTACHES ||
		    s->n_consts > VALIDATE_MAX_CONSTS)
			abort();
		for (size_t k = 0; k < s->n_attaches; k++)
			if (!s->attaches[k]->program || !known_program(d, s->attaches[k]->program))
				abort();
	}
}

static void check_answer(int r, const char *reason)
{
	if (r != 0 && (r != -EBADMSG || !reason || !reason[0]))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Sonde__V1__SymbolizerMessage *m;
	const char *reason = NULL;
	int r;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	m = (Sonde__V1__SymbolizerMessage *)protobuf_c_message_unpack(
		&sonde__v1__symbolizer_message__descriptor, NULL, size, data);
	if (!m)
		return 0;
	if (m->kind_case == SONDE__V1__SYMBOLIZER_MESSAGE__KIND_PROBE_PLAN) {
		r = validate_probe_plan(m->probe_plan, defs, sizeof(defs) / sizeof(defs[0]), &reason);
		check_answer(r, reason);
		if (r == 0)
			check_accepted(m->probe_plan);
	} else if (m->kind_case == SONDE__V1__SYMBOLIZER_MESSAGE__KIND_INTERPRETER_CONFIG) {
		r = validate_interp_config(m->interpreter_config, size * 4096, &reason);
		check_answer(r, reason);
	}
	protobuf_c_message_free_unpacked(&m->base, NULL);
	return 0;
}
