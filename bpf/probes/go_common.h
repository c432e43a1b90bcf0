/* go_common.h - what the Go probes share: the event ring buffer, the span
 * map, and bounded reads of Go values under the register ABI
 * (docs/go-probes.md). Everything read here is target memory: copies are
 * bounded by the record's arrays and the original lengths go beside them
 * for the symbolizer to check. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "go_http.h"
#include "go_spans_map.h"

/* The probes' ring buffer, shared by every probe object (the sensor creates
 * it once and reuses its fd). Records wake the sensor only once this much
 * waits: it drains the ring on its own loop and flush timer. */
#define SONDE_GO_EVENTS_BYTES (1u << 20)
#define SONDE_GO_EVENTS_WAKEUP (SONDE_GO_EVENTS_BYTES / 4)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SONDE_GO_EVENTS_BYTES);
} go_events SEC(".maps");

/* Records the ring had no room for (one per-CPU counter, shared like the
 * ring). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} go_lost SEC(".maps");

static __always_inline void go_count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&go_lost, &zero);

	if (n)
		*n += 1;
}

/* Per-call state of one probe, keyed by (tgid, goroutine). */
struct go_call {
	__u64 start_ns;
	__u64 req;       /* *net/http.Request */
	__u64 response;  /* server: *net/http.response; client: 0 */
	struct sonde_go_span_ctx sc;
	__u8 parent_span_id[8];
	__u32 flags;
	__u32 pad;
};

/* The goroutine pointer: r14 under the register ABI. */
static __always_inline __u64 go_g(struct pt_regs *ctx)
{
	return BPF_CORE_READ(ctx, r14);
}

static __always_inline void go_random(__u8 *dst, int n)
{
	for (int i = 0; i + 4 <= n; i += 4) {
		__u32 r = bpf_get_prandom_u32();

		__builtin_memcpy(dst + i, &r, 4);
	}
}

/* A new span ID; never all zeros (W3C: invalid). */
static __always_inline void go_new_span_id(__u8 *id)
{
	go_random(id, 8);
	id[0] |= 1;
}

static __always_inline void go_new_trace_id(__u8 *id)
{
	go_random(id, 16);
	id[15] |= 1;
}

/* Reads the pointer at base + off; 0 when unreadable. */
static __always_inline __u64 go_read_ptr(__u64 base, __u64 off)
{
	__u64 v = 0;

	if (!base || bpf_probe_read_user(&v, sizeof(v), (void *)(base + off)) < 0)
		return 0;
	return v;
}

/* Copies the Go string (ptr, len) at base + off into dst (size bytes, a
 * power of two) and stores its original length in *ret_len. The copy is
 * min(len, size) bytes. */
#define GO_READ_STRING(base, off, dst, ret_len)                                        \
	do {                                                                           \
		struct { __u64 ptr; __s64 len; } s_ = {};                              \
		__u64 n_;                                                              \
		if ((base) &&                                                          \
		    bpf_probe_read_user(&s_, sizeof(s_), (void *)((base) + (off))) == 0 && \
		    s_.ptr && s_.len > 0) {                                            \
			*(ret_len) = s_.len > 0xffffffffll ? 0xffffffffu : (__u32)s_.len; \
			n_ = (__u64)s_.len;                                            \
			if (n_ > sizeof(dst))                                          \
				n_ = sizeof(dst);                                      \
			n_ &= sizeof(dst) * 2 - 1;                                     \
			if (n_ > 0 && n_ <= sizeof(dst))                               \
				bpf_probe_read_user((dst), n_, (void *)s_.ptr);        \
		}                                                                      \
	} while (0)

/* Submits e, waking the sensor only when a quarter of the ring waits. */
static __always_inline void go_submit(void *e)
{
	__u64 avail = bpf_ringbuf_query(&go_events, BPF_RB_AVAIL_DATA);

	bpf_ringbuf_submit(e, avail >= SONDE_GO_EVENTS_WAKEUP ? BPF_RB_FORCE_WAKEUP
							     : BPF_RB_NO_WAKEUP);
}

/* Fills the fields every record has. */
static __always_inline void go_event_init(struct sonde_go_http_event *e, __u32 kind, __u64 pid_tgid,
					  __u64 g, const struct go_call *c)
{
	e->version = SONDE_GO_HTTP_RECORD_VERSION;
	e->kind = kind;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->goroutine = g;
	e->start_ns = c->start_ns;
	e->end_ns = bpf_ktime_get_ns();
	__builtin_memcpy(e->trace_id, c->sc.trace_id, 16);
	__builtin_memcpy(e->span_id, c->sc.span_id, 8);
	__builtin_memcpy(e->parent_span_id, c->parent_span_id, 8);
	e->flags = c->flags;
}
