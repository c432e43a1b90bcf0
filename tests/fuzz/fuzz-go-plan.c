/* fuzz-go-plan.c - fuzzes the whole probe planning of a Go executable
 * (go_plan_build() in symbolizer/probes/go_plan.c: libelf, .go.buildinfo,
 * .symtab or .gopclntab, capstone, libdw) on an ELF file's bytes, which
 * the target's owner controls, and the .go.buildinfo reader on the raw
 * bytes (fuzz-go-buildinfo checks it more closely). Whatever the input, a
 * plan must stay in its bounds: attaches inside the file, an entry first,
 * terminated strings. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "go_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_INPUT (1u << 20)

static void check_probe(const struct go_plan_probe *p, size_t size)
{
	if (!p->probe || p->n_consts > GO_PLAN_MAX_CONSTS || p->n_attach > GO_PLAN_MAX_ATTACH)
		abort();
	for (size_t i = 0; i < p->n_consts; i++)
		if (!p->consts[i].name)
			abort();
	if (p->error)
		return;
	if (p->n_attach < 2)
		abort(); /* an entry and at least one RET */
	for (size_t i = 0; i < p->n_attach; i++) {
		const char *prog = p->attach[i].program;

		if (!prog || p->attach[i].file_offset >= size)
			abort();
		if (strnlen(p->attach[i].symbol, sizeof(p->attach[i].symbol)) ==
		    sizeof(p->attach[i].symbol))
			abort();
		/* the entry first, then only returns */
		if ((i == 0) != (strstr(prog, "_enter") != NULL))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct go_plan *plan;
	uint8_t *copy;
	char ver[32];
	int r;

	if (go_buildinfo_version(data, size, ver, sizeof(ver)) == 0 &&
	    strnlen(ver, sizeof(ver)) == sizeof(ver))
		abort();
	if (size > FUZZ_MAX_INPUT)
		return 0;
	/* go_plan_build wants a writable whole file (libelf may decompress
	 * in place), and the plan is large for a stack. */
	copy = malloc(size ? size : 1);
	plan = malloc(sizeof(*plan));
	if (!copy || !plan)
		abort();
	memcpy(copy, data, size);
	r = go_plan_build(copy, size, plan);
	if (r != 0 && r != -ENOENT && r != -EBADMSG && r != -ENOMEM)
		abort();
	if (r == 0) {
		if (strnlen(plan->go_version, sizeof(plan->go_version)) == sizeof(plan->go_version))
			abort();
		if (plan->n_probes > sizeof(plan->probes) / sizeof(plan->probes[0]))
			abort();
		if (plan->error && plan->n_probes)
			abort();
		for (size_t i = 0; i < plan->n_probes; i++)
			check_probe(&plan->probes[i], size);
	}
	free(plan);
	free(copy);
	return 0;
}
