/* probe_plan.h - a Go executable's probe plan (probes/go_plan.h) in its
 * wire form, the packed sonde.v1.ProbePlan that the cache keeps and
 * sensors receive (docs/go-probes.md). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fileid.h"
#include "go_plan.h"

/* p as a packed sonde.v1.ProbePlan for file id (both borrowed): 0 with
 * *ret (malloc'd, the caller's) and *ret_len, or -ENOMEM. */
int probe_plan_pack(const struct fileid *id, const struct go_plan *p, uint8_t **ret, size_t *ret_len);
