/* otlp_kv.c - see otlp_kv.h. */
#include <errno.h>

#include "arena.h"
#include "otlp_kv.h"

int otlp_kv_add(struct arena *a, Opentelemetry__Proto__Common__V1__KeyValue **kvs, size_t *n,
		const char *key, const char *s, int64_t v)
{
	Opentelemetry__Proto__Common__V1__KeyValue *kv;
	Opentelemetry__Proto__Common__V1__AnyValue *val;

	if (s && !*s)
		return 0;
	kv = arena_alloc(a, sizeof(*kv));
	val = arena_alloc(a, sizeof(*val));
	if (!kv || !val)
		return -ENOMEM;
	opentelemetry__proto__common__v1__key_value__init(kv);
	opentelemetry__proto__common__v1__any_value__init(val);
	kv->key = (char *)key;
	if (s) {
		val->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		val->string_value = (char *)s;
	} else {
		val->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		val->int_value = v;
	}
	kv->value = val;
	kvs[(*n)++] = kv;
	return 0;
}
