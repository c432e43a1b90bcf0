/* spans.c - `sonde spans`: the recent spans of the Go probes a running
 * symbolizer holds (docs/go-probes.md), newest first, as a table or as
 * JSON lines. */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "command.h"
#include "fileid.h"

static void hex(const ProtobufCBinaryData *b, char *out)
{
	if (b->len == 16 || b->len == 8)
		bytes_to_hex(b->data, b->len, out);
	else
		out[0] = '\0';
}

static void print_json(const Sonde__V1__SpanInfo *s)
{
	char trace[33], span[17], parent[17];

	hex(&s->trace_id, trace);
	hex(&s->span_id, span);
	hex(&s->parent_span_id, parent);
	printf("{\"trace_id\":\"%s\",\"span_id\":\"%s\",\"parent_span_id\":\"%s\",\"kind\":", trace,
	       span, parent);
	cli_json_string(stdout, s->kind);
	printf(",\"service\":");
	cli_json_string(stdout, s->service_name);
	printf(",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32 ",\"start_unix_ns\":%" PRIu64
	       ",\"end_unix_ns\":%" PRIu64 ",\"method\":",
	       s->pid, s->tid, s->start_unix_ns, s->end_unix_ns);
	cli_json_string(stdout, s->method);
	printf(",\"path\":");
	cli_json_string(stdout, s->path);
	printf(",\"server_address\":");
	cli_json_string(stdout, s->server_address);
	printf(",\"url_full\":");
	cli_json_string(stdout, s->url_full);
	printf(",\"status_code\":%d,\"remote_parent\":%s}\n", s->status_code,
	       s->remote_parent ? "true" : "false");
}

int cmd_spans(int argc, char **argv)
{
	static const char help[] =
		"usage: sonde spans [--json] [--pid PID] [--limit N] [--symbolizer ADDR]\n"
		"Lists the recent spans of the Go probes, newest first (default 100, at most\n"
		"10000): one line each, or one JSON object per line with --json.\n";
	Sonde__V1__SpansRequest req = SONDE__V1__SPANS_REQUEST__INIT;
	Sonde__V1__SpansResponse *r = NULL;
	const char *symbolizer = NULL;
	bool json = false;
	const struct command_opt opts[] = {
		{ "json", 'j', COMMAND_OPT_FLAG, &json },
		{ "pid", 'p', COMMAND_OPT_U32, &req.pid, .min = 1,
		  .bad = "sonde spans: --pid wants a process ID, not '%s'\n" },
		{ "limit", 'n', COMMAND_OPT_U32, &req.limit, .min = 1,
		  .bad = "sonde spans: --limit wants a positive number, not '%s'\n" },
	};
	const struct command_line cl = { help, opts, sizeof(opts) / sizeof(opts[0]), &symbolizer,
					 .operands = COMMAND_OPERANDS_IGNORED };
	int err = command_parse(&cl, argc, argv, NULL);

	if (err)
		return err > 0 ? 0 : 2;
	if (command_call(symbolizer, "/sonde.v1.Symbols/Spans", &req.base,
			 &sonde__v1__spans_response__descriptor, COMMAND_RPC_TIMEOUT_MS, false,
			 (ProtobufCMessage **)&r) < 0)
		return 1;
	for (size_t i = 0; i < r->n_spans; i++) {
		const Sonde__V1__SpanInfo *s = r->spans[i];
		char trace[33];

		if (json) {
			print_json(s);
			continue;
		}
		hex(&s->trace_id, trace);
		printf("%s %-6s %-16.16s pid %-7" PRIu32 " %3d %-7s %s  %.3f ms%s\n", trace, s->kind,
		       s->service_name, s->pid, s->status_code, s->method,
		       s->url_full[0] ? s->url_full : s->path,
		       (double)(s->end_unix_ns - s->start_unix_ns) / 1e6,
		       s->remote_parent ? "  (remote parent)" : "");
	}
	if (!json)
		fprintf(stderr, "%zu spans shown; %" PRIu64 " received, %" PRIu64
				" records rejected, %" PRIu64 " lost by sensors\n",
			r->n_spans, r->spans_received, r->records_rejected, r->records_lost);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	return 0;
}
