/* goprobes_plan.h - the sensor's copy of a ProbePlan from the symbolizer
 * (docs/go-probes.md): shape checks and bounded copies of the unpacked
 * message, nothing loaded or attached. Pure (no BPF, no I/O beyond debug
 * and warning logs), so tests/fuzz/fuzz-probe-plan.c feeds it anything;
 * goprobes.c queues what it returns and later loads it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fileid.h"
#include "ingest.pb-c.h"

/* Bounds on what a plan may ask for. */
#define GOPROBES_PLAN_MAX_SETS 8       /* probes per plan */
#define GOPROBES_PLAN_MAX_CONSTS 32    /* per probe */
#define GOPROBES_PLAN_MAX_ATTACHES 256 /* per probe (an entry and each RET) */
#define GOPROBES_PLAN_MAX_NAME 64      /* with the NUL */

struct bpf_object;
struct bpf_program;

struct goprobes_plan_attach {
	char program[GOPROBES_PLAN_MAX_NAME];
	char symbol[GOPROBES_PLAN_MAX_NAME * 2]; /* "?" when absent or too long */
	uint64_t file_offset;
	bool optional;
};

struct goprobes_plan_set {
	size_t def; /* index of the probe in the caller's list of names */
	char probe[GOPROBES_PLAN_MAX_NAME];
	size_t n_consts;
	struct { char name[GOPROBES_PLAN_MAX_NAME]; uint64_t value; } consts[GOPROBES_PLAN_MAX_CONSTS];
	size_t n_attaches; /* 1 to GOPROBES_PLAN_MAX_ATTACHES */
	struct goprobes_plan_attach *attaches;
	/* After load (goprobes.c; NULL until then): */
	struct bpf_object *obj;
	struct bpf_program **progs; /* one per attach */
};

struct goprobes_plan {
	uint8_t file_id[FILEID_LEN];
	size_t n_sets;
	struct goprobes_plan_set sets[GOPROBES_PLAN_MAX_SETS];
	struct goprobes_plan *next; /* goprobes.c's queue */
};

/* Copies pp (borrowed; NULL allowed) into a new plan: the sets whose probe
 * is one of known[0..n_known) and whose names and counts are in bounds
 * (others are left out with a warning, as is a set with an error). Returns
 *   0        *ret an owned plan, or NULL when nothing is left to load (the
 *            plan says it has none, or every set was refused);
 *   -EPROTO  no plan, or a file ID that is not FILEID_LEN bytes;
 *   -ENOMEM.
 * *ret untouched unless 0. */
int goprobes_plan_from_msg(const Sonde__V1__ProbePlan *pp, const char *const *known, size_t n_known,
			   struct goprobes_plan **ret);
/* Frees the plan's own memory (the sets' attaches and progs arrays); BPF
 * objects are the loader's to close first. Accepts NULL. */
void goprobes_plan_free(struct goprobes_plan *p);
