/* otlp_v150.h - encodes a profile model (model.h) as one OTLP
 * ExportProfilesServiceRequest in opentelemetry-proto v1.5.0's profiles
 * layout (proto/otlp/otlp_v150_*.proto), for the OpenTelemetry Collectors
 * and backends built on that release: each Profile holds its own tables,
 * with only what its samples use.
 *
 * The same resources, Profiles (one per process and sample shape),
 * samples, value types and attributes as otlp.h's v1.10/v1.11 layout
 * (both follow otlp_plan.h); what differs is in docs/exports.md
 * ("Layouts").
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Encodes m (borrowed) into *ret (malloc'd, the caller frees it) and
 * *ret_len. Returns 0, -ENOMEM, or -E2BIG when a Profile's table has more
 * entries than OTLP's int32 indexes can name; -EINVAL for a model whose
 * indexes point outside its tables (the pm_* builders make none).
 * Nothing is returned on failure. */
int otlp_v150_encode(const struct pmodel *m, uint8_t **ret, size_t *ret_len);
