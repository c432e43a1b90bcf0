/* go_http_decode.h - one ring record of the Go net/http probes
 * (bpf/probes/go_http.h) into checked fields. The record is bytes a
 * target process controlled (copied from its memory by BPF): every size
 * and length is checked, strings become valid UTF-8 without control
 * characters, and nothing is trusted to be terminated.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probes/go_http.h"

struct go_http_fields {
	uint32_t kind; /* SONDE_GO_HTTP_SERVER or _CLIENT */
	uint32_t pid, tid;
	uint64_t goroutine;
	uint64_t start_ns, end_ns; /* the sensor's CLOCK_MONOTONIC */
	uint8_t trace_id[16], span_id[8], parent_span_id[8];
	bool has_parent, sampled, remote_parent;
	int32_t status_code;      /* 0: unknown */
	/* NUL-terminated; "" when empty. A string cut short by BPF's bound
	 * (the target's was longer) ends in "..." */
	char method[SONDE_GO_HTTP_METHOD_LEN * 3 + 4];
	char path[SONDE_GO_HTTP_PATH_LEN * 3 + 4];
	char host[SONDE_GO_HTTP_HOST_LEN * 3 + 4];
	char scheme[SONDE_GO_HTTP_SCHEME_LEN * 3 + 4];
};

/* Returns 0, or -EBADMSG with *why set (a static string) for a record that
 * is not one: wrong size, version or kind, end before start, an all-zero
 * trace or span ID. */
int go_http_decode(const void *rec, size_t len, struct go_http_fields *out, const char **why);

/* Copies n bytes of src as valid UTF-8 into dst (cap bytes, cap >= 4):
 * control characters and invalid sequences become '?'; stops before
 * overflowing; always terminates. Returns the length written. */
size_t go_http_text(char *dst, size_t cap, const uint8_t *src, size_t n);
