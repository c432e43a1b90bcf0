/* otlp.h - encodes a profile model (model.h) as one OTLP
 * ExportProfilesServiceRequest (opentelemetry.proto.collector.profiles.
 * v1development, the v1.10/v1.11 layout: one ProfilesDictionary for the
 * whole request, proto/otlp/). otlp_v150.h writes the same in
 * opentelemetry-proto v1.5.0's layout; otlp_plan.h is what both share.
 *
 * One ResourceProfiles per process of the model (host.name, host.id,
 * process.pid, process.executable.name/.path, process.command_line,
 * container.id, k8s.pod.uid), with one Profile per sample shape (values
 * with timestamps; one aggregated value without), each of sample type
 * samples/count and, when the model has a period, period type
 * cpu/nanoseconds. docs/exports.md lists every attribute.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* The gRPC method an OTLP profiles receiver serves. */
#define OTLP_PROFILES_EXPORT_PATH \
	"/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

/* Encodes m (borrowed) into *ret (malloc'd, the caller frees it) and
 * *ret_len. Returns 0, -ENOMEM, or -E2BIG when a table has more entries
 * than OTLP's int32 indexes can name. Nothing is returned on failure. */
int otlp_encode(const struct pmodel *m, uint8_t **ret, size_t *ret_len);
