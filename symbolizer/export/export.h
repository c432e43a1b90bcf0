/* export.h - what ingest.c hands to exporters for every batch of samples
 * it stores, and how a raw stack joins a model (symbolized on the way).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct symbolize_ctx;

struct export_sample {
	const char *host;       /* the sensor's node name (host.name) */
	const char *host_id;    /* its machine-id (host.id); may be NULL */
	uint32_t pid, tid;
	uint64_t start;         /* the process's start time, clock ticks after boot; 0: unknown */
	const char *thread_name;/* comm of the thread */
	const char *comm;       /* of the process; may be NULL */
	const char *exe_path;   /* may be NULL */
	const char *container_id; /* may be NULL */
	const char *pod_uid;    /* Kubernetes pod UID; may be NULL */
	const char *command_line; /* may be NULL (not sent unless the sensor opted in) */
	const void *raw;        /* rawstack.h */
	size_t raw_len;
	uint64_t count;
	uint32_t profile;       /* enum pm_profile: the exporter builds one model per type */
	uint64_t weight;        /* sum of the samples' weights (ns, bytes); 0 for CPU */
	const uint8_t *span;    /* trace ID (16 bytes) + span ID (8), or NULL */
	uint64_t first_ns, last_ns; /* unix ns; 0: unknown */
	uint32_t frequency_hz;  /* of the sensor; 0: unknown */
};

/* Symbolizes s's stack (functions, lines, inline chains where the file's
 * index is ready; basename+0xOFFSET otherwise: symbolize.h, through sc,
 * borrowed for the call) and adds it to m as one
 * pm_sample. Returns 0, -EBADMSG (a damaged raw stack: nothing added) or
 * -ENOMEM. */
int pm_add_export_sample(struct pmodel *m, const struct symbolize_ctx *sc,
			 const struct export_sample *s);
