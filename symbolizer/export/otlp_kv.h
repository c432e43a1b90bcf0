/* otlp_kv.h - OTLP common.v1 key-value attributes built in an arena, for
 * the profiles (otlp.c) and traces (otlp_traces.c) encoders. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "otlp_common.pb-c.h"

struct arena;

/* Appends key = s (a string; skipped when s is "") or, for s NULL, key = v
 * (an int) to kvs, which has room. key and s are borrowed until packing.
 * Returns 0 or -ENOMEM. */
int otlp_kv_add(struct arena *a, Opentelemetry__Proto__Common__V1__KeyValue **kvs, size_t *n,
		const char *key, const char *s, int64_t v);
