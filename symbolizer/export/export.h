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
	const char *host;       /* the sensor's host name */
	uint32_t pid, tid;
	const char *thread_name;/* comm of the thread */
	const char *comm;       /* of the process; may be NULL */
	const char *exe_path;   /* may be NULL */
	const char *container_id; /* may be NULL */
	const void *raw;        /* rawstack.h */
	size_t raw_len;
	uint64_t count;
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

/* The container ID in a /proc/PID/cgroup text (docker, containerd,
 * cri-o, podman: 64 hex digits in the last path element), into out
 * (65 bytes). Returns whether one was found. */
bool export_container_id(const char *cgroup, char out[65]);
