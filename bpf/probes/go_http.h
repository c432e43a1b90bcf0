/* go_http.h - the ring buffer record of the Go net/http probes
 * (bpf/probes/go_http_*.bpf.c), shared with the symbolizer's decoder
 * (symbolizer/probes/). The sensor forwards it as opaque bytes. Every string
 * is a bounded copy of target memory with its original length beside it:
 * the decoder trusts neither (docs/go-probes.md). Fixed-width fields only.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SONDE_GO_HTTP_RECORD_VERSION 1

enum sonde_go_http_kind {
	SONDE_GO_HTTP_SERVER = 1, /* net/http serverHandler.ServeHTTP */
	SONDE_GO_HTTP_CLIENT = 2, /* net/http (*Transport).roundTrip */
};

/* sonde_go_http_event.flags */
#define SONDE_GO_HTTP_HAS_PARENT 0x1u  /* parent_span_id is meaningful */
#define SONDE_GO_HTTP_SAMPLED 0x2u     /* W3C trace-flags sampled bit */
#define SONDE_GO_HTTP_REMOTE_PARENT 0x4u /* parent came from traceparent */

#define SONDE_GO_HTTP_METHOD_LEN 16
#define SONDE_GO_HTTP_PATH_LEN 128
#define SONDE_GO_HTTP_HOST_LEN 64
#define SONDE_GO_HTTP_SCHEME_LEN 8

struct sonde_go_http_event {
	__u32 version;      /* SONDE_GO_HTTP_RECORD_VERSION */
	__u32 kind;         /* enum sonde_go_http_kind */
	__u32 pid;          /* tgid */
	__u32 tid;
	__u64 goroutine;    /* the g pointer (r14 under the register ABI) */
	__u64 start_ns;     /* bpf_ktime_get_ns() at entry */
	__u64 end_ns;       /* at the RET that ended it */
	__u8 trace_id[16];
	__u8 span_id[8];
	__u8 parent_span_id[8];
	__u32 flags;        /* SONDE_GO_HTTP_* */
	__s32 status_code;  /* 0: unknown */
	/* Lengths as the target had them; the bytes copied are at most the
	 * array size. */
	__u32 method_len;
	__u32 path_len;
	__u32 host_len;
	__u32 scheme_len;
	char method[SONDE_GO_HTTP_METHOD_LEN];
	char path[SONDE_GO_HTTP_PATH_LEN];
	char host[SONDE_GO_HTTP_HOST_LEN];
	char scheme[SONDE_GO_HTTP_SCHEME_LEN];
};

_Static_assert(sizeof(struct sonde_go_http_event) == 312,
	       "sonde_go_http_event is shared with user space: fix the size");

/* The span a goroutine is serving, keyed by (tgid, goroutine): written by
 * the server probe at entry, deleted at its RET, read by the client probe
 * (parent) and by the CPU sampler (bpf/sample.bpf.c, which gets the map's
 * fd from the sensor) to tag samples. */
struct sonde_go_span_key {
	__u32 pid;
	__u32 pad;
	__u64 goroutine;
};

struct sonde_go_span_ctx {
	__u8 trace_id[16];
	__u8 span_id[8];
};
