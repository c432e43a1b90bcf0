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
