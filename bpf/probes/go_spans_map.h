/* go_spans_map.h - the map `go_spans`, (tgid, goroutine) -> the span that
 * goroutine serves (bpf/probes/go_http.h). Declared alike in the sampler
 * (bpf/sample.bpf.c, which owns it) and in every probe object; the sensor
 * gives the probes the sampler's fd (docs/go-probes.md). */
#pragma once

#include "go_http.h"

#define SONDE_GO_SPANS_MAX 65536

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SONDE_GO_SPANS_MAX);
	__type(key, struct sonde_go_span_key);
	__type(value, struct sonde_go_span_ctx);
} go_spans SEC(".maps");
