/* spans.c - `sonde spans`: the recent spans of the Go probes a running
 * symbolizer holds (docs/go-probes.md), newest first, as a table or as
 * JSON lines. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "fileid.h"
#include "parse.h"

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
	static const struct option longopts[] = {
		{ "symbolizer", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "pid", required_argument, NULL, 'p' },
		{ "limit", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	Sonde__V1__SpansRequest req = SONDE__V1__SPANS_REQUEST__INIT;
	Sonde__V1__SpansResponse *r = NULL;
	const char *symbolizer = NULL;
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "s:jp:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			symbolizer = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'p':
			if (parse_u32(optarg, 10, &req.pid) < 0 || req.pid == 0) {
				fprintf(stderr, "sonde spans: --pid wants a process ID, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'n':
			if (parse_u32(optarg, 10, &req.limit) < 0 || req.limit == 0) {
				fprintf(stderr, "sonde spans: --limit wants a positive number, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			fputs(help, stdout);
			return 0;
		default:
			fputs(help, stderr);
			return 2;
		}
	}
	if (cli_call(cli_symbolizer_address(symbolizer), "/sonde.v1.Symbols/Spans", &req.base,
		     &sonde__v1__spans_response__descriptor, CLI_RPC_TIMEOUT_MS, false,
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
