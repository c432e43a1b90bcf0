/* fuzz-go-plan.c - fuzzes the planner of Go executables
 * (symbolizer/probes/go_plan.c): the .go.buildinfo reader on raw bytes,
 * and the whole planner (ELF sections, symbols, .gopclntab, capstone over
 * the functions' bytes, DWARF) on the input as a file. A file is what a
 * target process's owner controls. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "go_plan.h"

#define FUZZ_MAX_INPUT (4u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char ver[32];
	struct go_plan *plan;
	uint8_t *copy;

	if (go_buildinfo_version(data, size, ver, sizeof(ver)) == 0 && strlen(ver) >= sizeof(ver))
		abort();
	if (size > FUZZ_MAX_INPUT)
		return 0;
	/* The planner may decompress sections in place: give it a copy. */
	copy = malloc(size ? size : 1);
	plan = malloc(sizeof(*plan));
	if (copy && plan) {
		memcpy(copy, data, size);
		if (go_plan_build(copy, size, plan) == 0)
			for (size_t i = 0; i < plan->n_probes; i++)
				if (plan->probes[i].n_attach > GO_PLAN_MAX_ATTACH ||
				    plan->probes[i].n_consts > GO_PLAN_MAX_CONSTS)
					abort();
	}
	free(plan);
	free(copy);
	return 0;
}
