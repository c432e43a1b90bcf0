/* otlp_kv.c - see otlp_kv.h. */
#include <errno.h>
#include <stdlib.h>

#include "arena.h"
#include "otlp_kv.h"

Opentelemetry__Proto__Common__V1__AnyValue *otlp_kv_value(struct arena *a, const char *s, int64_t v)
{
	Opentelemetry__Proto__Common__V1__AnyValue *val = arena_alloc(a, sizeof(*val));

	if (!val)
		return NULL;
	opentelemetry__proto__common__v1__any_value__init(val);
	if (s) {
		val->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		val->string_value = (char *)s;
	} else {
		val->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		val->int_value = v;
	}
	return val;
}

int otlp_kv_add(struct arena *a, Opentelemetry__Proto__Common__V1__KeyValue **kvs, size_t *n,
		const char *key, const char *s, int64_t v)
{
	Opentelemetry__Proto__Common__V1__KeyValue *kv;

	if (s && !*s)
		return 0;
	kv = arena_alloc(a, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	opentelemetry__proto__common__v1__key_value__init(kv);
	kv->key = (char *)key;
	kv->value = otlp_kv_value(a, s, v);
	if (!kv->value)
		return -ENOMEM;
	kvs[(*n)++] = kv;
	return 0;
}

int otlp_kv_pack(const ProtobufCMessage *msg, uint8_t **ret, size_t *ret_len)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *out = malloc(len ? len : 1);

	if (!out)
		return -ENOMEM;
	protobuf_c_message_pack(msg, out);
	*ret = out;
	*ret_len = len;
	return 0;
}
