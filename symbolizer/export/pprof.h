/* pprof.h - a profile model (model.h) as pprof's gzipped profile.proto
 * (proto/pprof/profile.proto), the format `go tool pprof`, Pyroscope,
 * Parca and Speedscope read. docs/pprof.md says what goes where.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* The packed (uncompressed) profile may not exceed this, whatever the
 * caller allows for the gzipped bytes: it bounds the encoder's memory. */
#define PPROF_MAX_PACKED (1024u << 20)

/* Encodes m (borrowed, read only) as a gzipped Profile of at most
 * max_bytes (0: PPROF_MAX_PACKED). Returns 0 with *ret (malloc'd, the
 * caller frees it) and *ret_len, -E2BIG if the profile is larger than
 * allowed, -EINVAL if m is inconsistent (an index out of its table), or
 * -ENOMEM. Outputs are untouched on failure. */
int pprof_encode(const struct pmodel *m, size_t max_bytes, uint8_t **ret, size_t *ret_len);
