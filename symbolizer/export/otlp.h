/* otlp.h - encodes a profile model (model.h) as one OTLP
 * ExportProfilesServiceRequest (opentelemetry.proto.collector.profiles.
 * v1development, the v1.10/v1.11 layout: one ProfilesDictionary for the
 * whole request, proto/otlp/).
 *
 * One ResourceProfiles per process of the model (host.name, process.pid,
 * process.executable.name/.path, container.id), each with one Profile of
 * sample type cpu/nanoseconds: a sample's value is its count times the
 * model's period. docs/exports.md lists every attribute.
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
