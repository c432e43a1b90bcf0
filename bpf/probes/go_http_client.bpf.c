/* go_http_client.bpf.c - net/http client spans (docs/go-probes.md).
 *
 * client_enter at the entry of net/http.(*Transport).roundTrip(t, req):
 * t in RAX, req in RBX under the register ABI. Its parent is the span the
 * goroutine serves (go_spans), if any. client_return at each RET reads the
 * *Response result from RAX (nil on error) and sends one record.
 */
#include "go_common.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the sensor from the probe plan. */
const volatile __u64 req_method_off = 0;
const volatile __u64 req_url_off = 0;
const volatile __u64 req_host_off = 0;
const volatile __u64 url_path_off = 0;
const volatile __u64 url_host_off = 0;
const volatile __u64 url_scheme_off = 0;
const volatile __u64 resp_status_code_off = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sonde_go_span_key);
	__type(value, struct go_call);
} client_calls SEC(".maps");

SEC("uprobe")
int client_enter(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct sonde_go_span_key key = { .pid = pid_tgid >> 32, .goroutine = go_g(ctx) };
	struct sonde_go_span_ctx *parent;
	struct go_call c = {};

	c.start_ns = bpf_ktime_get_ns();
	c.req = BPF_CORE_READ(ctx, bx);
	parent = bpf_map_lookup_elem(&go_spans, &key);
	if (parent) {
		__builtin_memcpy(c.sc.trace_id, parent->trace_id, 16);
		__builtin_memcpy(c.parent_span_id, parent->span_id, 8);
		c.flags = SONDE_GO_HTTP_HAS_PARENT;
	} else {
		go_new_trace_id(c.sc.trace_id);
	}
	go_new_span_id(c.sc.span_id);
	c.flags |= SONDE_GO_HTTP_SAMPLED;
	/* Stack growth re-runs the prologue: keep the first entry. */
	bpf_map_update_elem(&client_calls, &key, &c, BPF_NOEXIST);
	return 0;
}

SEC("uprobe")
int client_return(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct sonde_go_span_key key = { .pid = pid_tgid >> 32, .goroutine = go_g(ctx) };
	struct sonde_go_http_event *e;
	struct go_call *c;
	__u64 resp, url;
	__s64 status = 0;

	c = bpf_map_lookup_elem(&client_calls, &key);
	if (!c)
		return 0;
	e = bpf_ringbuf_reserve(&go_events, sizeof(*e), 0);
	if (!e) {
		go_count_lost();
		goto out;
	}
	__builtin_memset(e, 0, sizeof(*e));
	go_event_init(e, SONDE_GO_HTTP_CLIENT, pid_tgid, key.goroutine, c);
	resp = BPF_CORE_READ(ctx, ax);
	if (resp &&
	    bpf_probe_read_user(&status, sizeof(status), (void *)(resp + resp_status_code_off)) == 0)
		e->status_code = (__s32)status;
	GO_READ_STRING(c->req, req_method_off, e->method, &e->method_len);
	url = go_read_ptr(c->req, req_url_off);
	GO_READ_STRING(url, url_path_off, e->path, &e->path_len);
	GO_READ_STRING(url, url_scheme_off, e->scheme, &e->scheme_len);
	/* Request.Host overrides URL.Host when set (net/http.Request.Host). */
	GO_READ_STRING(c->req, req_host_off, e->host, &e->host_len);
	if (!e->host_len)
		GO_READ_STRING(url, url_host_off, e->host, &e->host_len);
	go_submit(e);
out:
	bpf_map_delete_elem(&client_calls, &key);
	return 0;
}
