/* go_http_server.bpf.c - net/http server spans (docs/go-probes.md).
 *
 * server_enter at the entry of net/http.serverHandler.ServeHTTP(sh, rw,
 * req): under the register ABI sh (one pointer) is in RAX, the
 * ResponseWriter interface in RBX (itab) and RCX (data: the *response), req
 * in RDI. server_return at each of its RETs (Go moves goroutine stacks, so
 * no uretprobe) reads the status and sends one record.
 */
#include "go_common.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the sensor from the probe plan. */
const volatile __u64 req_method_off = 0;
const volatile __u64 req_url_off = 0;
const volatile __u64 req_host_off = 0;
const volatile __u64 req_header_off = 0;
const volatile __u64 url_path_off = 0;
const volatile __u64 response_status_off = 0;
const volatile __u64 header_lookup = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sonde_go_span_key);
	__type(value, struct go_call);
} server_calls SEC(".maps");

/* The classic Go map (runtime/map.go, Go < 1.24) behind Request.Header,
 * a map[string][]string: hmap.B at 9, hmap.buckets at 16; a bucket is 8
 * tophash bytes, 8 string keys, 8 []string values, an overflow pointer. */
#define HMAP_B_OFF 9
#define HMAP_BUCKETS_OFF 16
#define BUCKET_SLOTS 8
#define BUCKET_VALUES_OFF (8 + BUCKET_SLOTS * 16)
#define BUCKET_SIZE (BUCKET_VALUES_OFF + BUCKET_SLOTS * 24 + 8)
#define BUCKET_OVERFLOW_OFF (BUCKET_SIZE - 8)
#define MIN_TOPHASH 5     /* below: empty or evacuated */
#define MAX_BUCKETS 8     /* B <= 3; header maps are small */
#define TRACEPARENT_LEN 55 /* 00-<32 hex>-<16 hex>-<2 hex> */

struct go_bucket_head {
	__u8 tophash[BUCKET_SLOTS];
	struct { __u64 ptr; __s64 len; } keys[BUCKET_SLOTS];
};

static __always_inline int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decodes n bytes of hex at s into out; false on a non-hex digit. */
static __always_inline bool unhex(const char *s, __u8 *out, int n)
{
	for (int i = 0; i < n; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (__u8)(hi << 4 | lo);
	}
	return true;
}

/* The first value of the "Traceparent" key in slot i of the bucket at
 * bucket into c's trace ID and parent, when it is a valid version-00
 * traceparent. */
static __always_inline bool take_traceparent(__u64 bucket, int i, struct go_call *c)
{
	struct { __u64 ptr; __s64 len; __s64 cap; } vals;
	struct { __u64 ptr; __s64 len; } v;
	char tp[TRACEPARENT_LEN + 1];
	__u8 trace_id[16], parent[8], fl;

	if (bpf_probe_read_user(&vals, sizeof(vals), (void *)(bucket + BUCKET_VALUES_OFF + i * 24)) ||
	    vals.len < 1 || bpf_probe_read_user(&v, sizeof(v), (void *)vals.ptr) ||
	    v.len != TRACEPARENT_LEN || bpf_probe_read_user(tp, TRACEPARENT_LEN, (void *)v.ptr))
		return false;
	if (tp[0] != '0' || tp[1] != '0' || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' ||
	    !unhex(tp + 3, trace_id, 16) || !unhex(tp + 36, parent, 8) || !unhex(tp + 53, &fl, 1))
		return false;
	__builtin_memcpy(c->sc.trace_id, trace_id, 16);
	__builtin_memcpy(c->parent_span_id, parent, 8);
	c->flags = SONDE_GO_HTTP_HAS_PARENT | SONDE_GO_HTTP_REMOTE_PARENT |
		   (fl & 1 ? SONDE_GO_HTTP_SAMPLED : 0);
	return true;
}

static __always_inline bool is_traceparent(const char *k)
{
	static const char want[11] = "Traceparent";

	for (int i = 0; i < 11; i++)
		if (k[i] != want[i])
			return false;
	return true;
}

/* Looks for "Traceparent" (net/http canonicalises header keys) in every
 * bucket of the request's header map, and one overflow bucket of each. */
static __always_inline void read_traceparent(__u64 req, struct go_call *c)
{
	__u64 hmap = go_read_ptr(req, req_header_off), buckets, bucket;
	struct go_bucket_head h;
	__u8 b = 0;

	if (!hmap || bpf_probe_read_user(&b, 1, (void *)(hmap + HMAP_B_OFF)) || b > 3)
		return;
	buckets = go_read_ptr(hmap, HMAP_BUCKETS_OFF);
	if (!buckets)
		return;
	for (int n = 0; n < 2 * MAX_BUCKETS; n++) {
		int idx = n / 2;

		if (idx >= (1 << b))
			break;
		bucket = buckets + idx * BUCKET_SIZE;
		if (n & 1) { /* the overflow bucket of idx */
			bucket = go_read_ptr(bucket, BUCKET_OVERFLOW_OFF);
			if (!bucket)
				continue;
		}
		if (bpf_probe_read_user(&h, sizeof(h), (void *)bucket))
			return;
		for (int i = 0; i < BUCKET_SLOTS; i++) {
			char key[11];

			if (h.tophash[i] < MIN_TOPHASH || h.keys[i].len != 11 ||
			    bpf_probe_read_user(key, sizeof(key), (void *)h.keys[i].ptr))
				continue;
			if (!is_traceparent(key))
				continue;
			take_traceparent(bucket, i, c);
			return;
		}
	}
}

SEC("uprobe")
int server_enter(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct sonde_go_span_key key = { .pid = pid_tgid >> 32, .goroutine = go_g(ctx) };
	struct go_call c = {};

	c.start_ns = bpf_ktime_get_ns();
	c.response = BPF_CORE_READ(ctx, cx);
	c.req = BPF_CORE_READ(ctx, di);
	go_new_trace_id(c.sc.trace_id);
	go_new_span_id(c.sc.span_id);
	c.flags = SONDE_GO_HTTP_SAMPLED;
	/* Only the first entry's lookup counts; a second one is dropped
	 * below. */
	if (header_lookup)
		read_traceparent(c.req, &c);
	/* A second entry on this goroutine (stack growth re-runs the
	 * prologue) keeps the first call's state and span. */
	if (bpf_map_update_elem(&server_calls, &key, &c, BPF_NOEXIST) < 0)
		return 0;
	bpf_map_update_elem(&go_spans, &key, &c.sc, BPF_ANY);
	return 0;
}

SEC("uprobe")
int server_return(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct sonde_go_span_key key = { .pid = pid_tgid >> 32, .goroutine = go_g(ctx) };
	struct sonde_go_http_event *e;
	struct go_call *c;
	__u64 url;
	__s64 status = 0;

	c = bpf_map_lookup_elem(&server_calls, &key);
	if (!c)
		return 0;
	e = bpf_ringbuf_reserve(&go_events, sizeof(*e), 0);
	if (!e) {
		go_count_lost();
		goto out;
	}
	__builtin_memset(e, 0, sizeof(*e));
	go_event_init(e, SONDE_GO_HTTP_SERVER, pid_tgid, key.goroutine, c);
	if (c->response &&
	    bpf_probe_read_user(&status, sizeof(status), (void *)(c->response + response_status_off)) == 0)
		/* No WriteHeader yet: net/http sends 200 after ServeHTTP
		 * returns (finishRequest). */
		e->status_code = status == 0 ? 200 : (__s32)status;
	GO_READ_STRING(c->req, req_method_off, e->method, &e->method_len);
	GO_READ_STRING(c->req, req_host_off, e->host, &e->host_len);
	url = go_read_ptr(c->req, req_url_off);
	GO_READ_STRING(url, url_path_off, e->path, &e->path_len);
	go_submit(e);
out:
	bpf_map_delete_elem(&server_calls, &key);
	bpf_map_delete_elem(&go_spans, &key);
	return 0;
}
