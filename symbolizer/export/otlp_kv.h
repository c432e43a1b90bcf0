/* otlp_kv.h - what every OTLP encoder (profiles: otlp.c, otlp_v150.c;
 * traces: otlp_traces.c) needs: common.v1 key-value attributes built in
 * an arena, and a request packed into bytes. */
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

/* A string (s) or, for s NULL, int (v) value in a; s is borrowed until
 * packing. NULL on out of memory. */
Opentelemetry__Proto__Common__V1__AnyValue *otlp_kv_value(struct arena *a, const char *s, int64_t v);
/* Packs msg into *ret (malloc'd, the caller frees it) and *ret_len.
 * Returns 0 or -ENOMEM (nothing returned). */
int otlp_kv_pack(const ProtobufCMessage *msg, uint8_t **ret, size_t *ret_len);
