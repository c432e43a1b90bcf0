/* otlp_plan.h - what sonde's two OTLP profiles layouts send alike, worked
 * out once from a model: otlp.c writes it in the v1.10/v1.11 layout (one
 * dictionary per request), otlp_v150.c in v1.5.0's (tables in each
 * Profile). Which Profiles there are (one per process and sample shape)
 * and which samples each holds, a process's resource and the scope, the
 * value and period types, a sample's values and timestamps, the profile
 * ID, the attribute keys. docs/exports.md describes each.
 *
 * Memory: everything returned in an arena is the caller's arena's; the
 * plan's lists are freed by otlp_plan_free.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "otlp_common.pb-c.h"
#include "otlp_resource.pb-c.h"

struct arena;

/* Attribute keys (semantic conventions). */
#define OTLP_KEY_FRAME_TYPE "profile.frame.type"
#define OTLP_KEY_BUILD_GNU "process.executable.build_id.gnu"
#define OTLP_KEY_BUILD_HTL "process.executable.build_id.htlhash"
#define OTLP_KEY_THREAD_ID "thread.id"
#define OTLP_KEY_THREAD_NAME "thread.name"

/* One Profile: samples of one process, all of one shape. */
struct otlp_plan_profile {
	uint32_t process;        /* index into the model's processes */
	bool timed;              /* its samples have timestamps (else none has) */
	const uint32_t *samples; /* indexes into the model's samples, in model order */
	size_t n_samples;
};

struct otlp_plan {
	/* Grouped by process in model order, a process's timed Profile
	 * before its untimed one; processes without samples have none. */
	struct otlp_plan_profile *profiles;
	size_t n_profiles;
	/* One ResourceProfiles per process with samples: its Profiles are
	 * profiles[first, first + n). */
	struct otlp_plan_resource {
		size_t first, n;
	} *resources;
	size_t n_resources;
	uint32_t *order; /* holds the profiles' sample lists */
};

/* Plans m's Profiles (m borrowed; the plan points into nothing of it).
 * Returns 0 or -ENOMEM (nothing to free then). */
int otlp_plan_build(const struct pmodel *m, struct otlp_plan *ret);
/* Accepts a zeroed or freed plan. */
void otlp_plan_free(struct otlp_plan *p);

/* The value type of every sample, and the period. */
struct otlp_plan_types {
	const char *sample_type, *sample_unit; /* static */
	const char *period_type, *period_unit; /* static; NULL: no period known */
	int64_t period;                        /* 0 without a period */
};
void otlp_plan_types(const struct pmodel *m, struct otlp_plan_types *ret);

/* A sample's values and timestamps (at most two each). */
struct otlp_plan_values {
	int64_t v[2];
	uint64_t ts[2];
	size_t n_v, n_ts;
};
/* per_timestamp (the v1.10 layout): a CPU sample of count n >= 2 with a
 * time is two values, 1 at its first time and n - 1 at its last.
 * Otherwise (and always for v1.5.0, whose values follow sample_type) one
 * value, the count or weight, at the first time and, for a CPU count of
 * 2 or more, the last. A sample without a time has no timestamps. */
void otlp_plan_values(const struct pmodel *m, const struct pm_sample *s, bool per_timestamp,
		      struct otlp_plan_values *ret);

/* Fills res (initialised here) with process p's resource attributes,
 * allocated in a; strings borrowed from m. Returns 0 or -ENOMEM. */
int otlp_plan_resource(struct arena *a, const struct pmodel *m, const struct pm_process *p,
		       Opentelemetry__Proto__Resource__V1__Resource *res);
/* The instrumentation scope (sonde and its version), in a; NULL on
 * out of memory. */
Opentelemetry__Proto__Common__V1__InstrumentationScope *otlp_plan_scope(struct arena *a);
/* A random 16-byte profile ID in a, or an empty one when no randomness
 * is at hand or memory is out (all zeroes would be invalid). */
ProtobufCBinaryData otlp_plan_profile_id(struct arena *a);
/* A model string, "" for a missing one. */
const char *otlp_plan_str(const struct pmodel *m, uint32_t i);

/* A growing table of message (or string) pointers. */
struct otlp_vec {
	void **v;
	size_t n, cap;
};
/* Appends p (borrowed) to t; its index in *ret. Returns 0, -ENOMEM or
 * -E2BIG (past what an int32 index names). free(t->v) when done. */
int otlp_vec_push(struct otlp_vec *t, void *p, int32_t *ret);

/* Plans m's Profiles into *plan (otlp_plan_build; the caller frees it
 * even on failure) and makes its ResourceProfiles, messages of size bytes
 * in a, each filled by fill(ctx, plan, resource, msg), stopping at the
 * first error: the array in *ret, its length in *n. Returns 0, -ENOMEM or
 * fill's error. */
int otlp_plan_resources(struct arena *a, const struct pmodel *m, struct otlp_plan *plan, size_t size,
			int (*fill)(void *ctx, const struct otlp_plan *plan,
				    const struct otlp_plan_resource *res, void *msg),
			void *ctx, void ***ret, size_t *n);

/* Makes room for need elements of elem bytes in *p (cap elements now).
 * Returns 0 or -ENOMEM (*p unchanged). */
int otlp_plan_grow(void **p, size_t *cap, size_t need, size_t elem);
