/* query.c - the subcommands that query a running symbolizer: top, folded,
 * symbolize, status. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "command.h"
#include "local.h"
#include "fileid.h"
#include "parse.h"

int cli_parse_query_opts(int argc, char **argv, const char *help, struct cli_query_opts *o)
{
	uint64_t since = 0;
	const char *node = NULL;
	const struct command_opt opts[] = {
		{ "node", 'N', COMMAND_OPT_STRING, &node },
		{ "since", 'S', COMMAND_OPT_U64, &since,
		  .bad = "sonde: --since wants seconds, not '%.64s'\n" },
		{ "pid", 'p', COMMAND_OPT_U32, &o->q.pid,
		  .bad = "sonde: --pid wants a process ID, not '%.64s'\n" },
		{ "limit", 'n', COMMAND_OPT_U32, &o->limit, .min = 1,
		  .bad = "sonde: --limit wants a positive number\n" },
		{ "output", 'o', COMMAND_OPT_STRING, &o->output },
		{ "frequency", 'F', COMMAND_OPT_U32, &o->q.frequency_hz, .min = 1, .max = 10000,
		  .bad = "sonde: -F wants 1..10000 samples per second\n" },
		{ "type", 't', COMMAND_OPT_CUSTOM, &o->q.profile, .parse = cli_parse_profile_type,
		  .bad = "sonde: --type wants cpu, off-cpu or memory, not '%.64s'\n" },
	};
	const struct command_line cl = { help, opts, sizeof(opts) / sizeof(opts[0]),
					 &o->symbolizer, .operands = COMMAND_OPERANDS_REFUSED };
	int r = command_parse(&cl, argc, argv, NULL);

	if (r)
		return r;
	if (since)
		o->q.since_unix_s = (uint64_t)time(NULL) - since;
	if (node)
		o->q.node = (char *)node;
	return 0;
}

int cmd_top(int argc, char **argv)
{
	static const char help[] =
		"usage: sonde top [--since SECONDS] [--node NAME] [--pid PID] [--limit N]\n"
		"                [--type cpu|off-cpu|memory] [--symbolizer ADDR]\n"
		"Shows the functions with the most samples stored by a running symbolizer\n"
		"(over the last SECONDS, default everything it keeps), counted per node\n"
		"(the sensor's --node-name, else its host name; shown when there are\n"
		"several); --node: that node's only.\n";
	struct cli_query_opts o = { .q = SONDE__V1__PROFILE_QUERY__INIT, .limit = 25 };
	Sonde__V1__TopResponse *top = NULL;
	int r;

	r = cli_parse_query_opts(argc, argv, help, &o);
	if (r)
		return r > 0 ? 0 : 2;
	o.q.limit = o.limit;
	if (command_call(o.symbolizer, "/sonde.v1.Symbols/Top", &o.q.base,
			 &sonde__v1__top_response__descriptor, COMMAND_RPC_TIMEOUT_MS, false,
			 (ProtobufCMessage **)&top) < 0)
		return 1;
	cli_print_top(stdout, top, o.limit, o.q.profile);
	rpc_message_free(&top->base);
	return 0;
}

int cmd_folded(int argc, char **argv)
{
	static const char help[] =
		"usage: sonde folded [--since SECONDS] [--node NAME] [--pid PID] [-o FILE]\n"
		"                   [--type cpu|off-cpu|memory] [--symbolizer ADDR]\n"
		"Writes the stacks stored by a running symbolizer in folded format\n"
		"('comm;root;...;leaf COUNT'; 'node;comm;...' when several nodes have\n"
		"samples), to FILE or standard output. COUNT is samples for --type cpu\n"
		"(the default), ns off the CPU for off-cpu, bytes of growth for memory.\n";
	struct cli_query_opts o = { .q = SONDE__V1__PROFILE_QUERY__INIT };
	Sonde__V1__FoldedResponse *folded = NULL;
	int r, err;

	r = cli_parse_query_opts(argc, argv, help, &o);
	if (r)
		return r > 0 ? 0 : 2;
	if (command_call(o.symbolizer, "/sonde.v1.Symbols/Folded", &o.q.base,
			 &sonde__v1__folded_response__descriptor, COMMAND_RPC_TIMEOUT_MS, false,
			 (ProtobufCMessage **)&folded) < 0)
		return 1;
	err = o.output ? cli_write_folded_file(o.output, folded) : cli_write_folded(stdout, folded);
	if (err)
		fprintf(stderr, "sonde: writing %s: %s\n", o.output ? o.output : "standard output",
			strerror(-err));
	rpc_message_free(&folded->base);
	return err ? 1 : 0;
}

/* n bytes of s escaped for a JSON string into out (6 * n bytes at
 * most); returns the end. */
static char *json_escape_into(char *out, const char *s, size_t n)
{
	for (const char *end = s + n; s < end; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			*out++ = '\\';
			*out++ = (char)ch;
		} else if (ch < 0x20) {
			out += sprintf(out, "\\u%04x", ch);
		} else {
			*out++ = (char)ch;
		}
	}
	return out;
}

char *cli_json_quote_into(char *out, const char *s)
{
	*out++ = '"';
	if (s)
		out = json_escape_into(out, s, strlen(s));
	*out++ = '"';
	*out = '\0';
	return out;
}

void cli_json_string(FILE *out, const char *s)
{
	char buf[6 * 256];
	size_t len = s ? strlen(s) : 0;

	/* A few fwrites a string, not one a byte: this is the CLI's hot
	 * loop when it prints 100,000 frames. */
	fputc('"', out);
	for (size_t off = 0; off < len; off += 256) {
		size_t n = len - off < 256 ? len - off : 256;

		fwrite(buf, 1, (size_t)(json_escape_into(buf, s + off, n) - buf), out);
	}
	fputc('"', out);
}

/* --file-id: the file ID (32 hex digits) to look up. */
struct file_id_arg {
	struct fileid id;
	Sonde__V1__SymbolizeQuery *q;
};

static int parse_file_id(const char *arg, void *target)
{
	struct file_id_arg *f = target;

	if (fileid_from_hex(arg, &f->id) < 0)
		return -EINVAL;
	f->q->file_id.data = f->id.bytes;
	f->q->file_id.len = FILEID_LEN;
	return 0;
}

/* --file, through a private symbolizer (local.h) with --local or when
 * none answers at the default address. */
static int symbolize_file(struct cli_symbolize_opts *so, bool local, int n, char **addrs)
{
	struct local_symbolizer ls = { 0 };
	int rc;

	if (local || (strcmp(so->symbolizer, COMMAND_DEFAULT_SYMBOLIZER) == 0 &&
		      !local_reachable(so->symbolizer))) {
		if (local_symbolizer_start(&ls, false) < 0)
			return 1;
		so->symbolizer = ls.address;
	}
	rc = cli_symbolize_file(so, n, addrs);
	if (rc != 0)
		local_symbolizer_explain(&ls);
	local_symbolizer_stop(&ls);
	return rc;
}

int cmd_symbolize(int argc, char **argv)
{
	static const char help[] =
		"usage: sonde symbolize [--json] [--no-inlines] [--no-demangle] [--local] --file PATH\n"
		"                       [ADDRESS...]\n"
		"       sonde symbolize [--json] [--offsets] (--file-id HEX | --build-id HEX | --path PATH)\n"
		"                       [--symbolizer ADDR] ADDRESS...\n"
		"Names the functions at ADDRESSes (hex, ELF virtual addresses as nm prints\n"
		"them; file offsets with --offsets).\n"
		"--file: any ELF file you can read; it is uploaded if the symbolizer has not\n"
		"  seen it. Prints, per address, the source frames innermost (inlined) first:\n"
		"  llvm-symbolizer-like text, or with --json one object per line:\n"
		"  {\"address\":\"0x...\",\"frames\":[{\"function\":...,\"file\":...,\"line\":N},...]}.\n"
		"  Without ADDRESSes, reads them from standard input, one per line.\n"
		"  With no symbolizer at the default address (or with --local), starts a\n"
		"  private one for this command, sandboxed, with your cache\n"
		"  ($SONDE_CACHE, else ~/.cache/sonde/cache.db).\n"
		"--file-id/--build-id/--path: a file the symbolizer has seen; prints\n"
		"  function+offset (--json: one document).\n";
	struct cli_symbolize_opts so = { .inlines = true, .demangle = true };
	Sonde__V1__SymbolizeQuery q = SONDE__V1__SYMBOLIZE_QUERY__INIT;
	Sonde__V1__SymbolizeQuery *qs[1] = { &q };
	Sonde__V1__SymbolizeRequest req = SONDE__V1__SYMBOLIZE_REQUEST__INIT;
	Sonde__V1__SymbolizeResponse *resp = NULL;
	const char *symbolizer = NULL;
	struct file_id_arg fid = { .q = &q };
	uint64_t *addrs = NULL;
	bool json = false, offsets = false, no_inlines = false, no_demangle = false, local = false;
	const struct command_opt opts[] = {
		{ "file-id", 'f', COMMAND_OPT_CUSTOM, &fid, .parse = parse_file_id,
		  .bad = "sonde: --file-id wants 32 hex digits\n" },
		{ "build-id", 'b', COMMAND_OPT_STRING, &q.build_id },
		{ "path", 'P', COMMAND_OPT_STRING, &q.path },
		{ "offsets", 'O', COMMAND_OPT_FLAG, &offsets },
		{ "json", 'j', COMMAND_OPT_FLAG, &json },
		{ "file", 0, COMMAND_OPT_STRING, &so.file },
		{ "no-inlines", 0, COMMAND_OPT_FLAG, &no_inlines },
		{ "no-demangle", 0, COMMAND_OPT_FLAG, &no_demangle },
		{ "local", 0, COMMAND_OPT_FLAG, &local },
	};
	const struct command_line cl = { help, opts, sizeof(opts) / sizeof(opts[0]), &symbolizer,
					 .operands = COMMAND_OPERANDS_TAKEN };
	int first, rc;

	rc = command_parse(&cl, argc, argv, &first);
	if (rc)
		return rc > 0 ? 0 : 2;
	rc = 1;
	if (offsets)
		q.kind = SONDE__V1__ADDRESS_KIND__ADDRESS_KIND_FILE_OFFSET;
	so.inlines = !no_inlines;
	so.demangle = !no_demangle;
	if (so.file) {
		if (q.file_id.len || (q.build_id && *q.build_id) || (q.path && *q.path) || q.kind) {
			fprintf(stderr, "sonde: --file does not go with --file-id, --build-id, --path or --offsets\n");
			return 2;
		}
		so.symbolizer = symbolizer;
		so.json = json;
		return symbolize_file(&so, local, argc - first, argv + first);
	}
	if (local) {
		fprintf(stderr, "sonde: --local goes with --file\n");
		return 2;
	}
	if (!q.file_id.len && !q.build_id && !q.path) {
		fprintf(stderr, "sonde: name the file with --file, --file-id, --build-id or --path\n");
		return 2;
	}
	if (first == argc) {
		fprintf(stderr, "sonde: give at least one address\n");
		return 2;
	}
	addrs = calloc((size_t)(argc - first), sizeof(*addrs));
	if (!addrs)
		return 1;
	for (int i = first; i < argc; i++) {
		const char *a = argv[i];
		if (!strncmp(a, "0x", 2) || !strncmp(a, "0X", 2))
			a += 2;
		if (parse_u64(a, 16, &addrs[q.n_addresses++]) < 0) {
			fprintf(stderr, "sonde: '%.64s' is not a hex address\n", argv[i]);
			rc = 2;
			goto cleanup;
		}
	}
	q.addresses = addrs;
	req.n_queries = 1;
	req.queries = qs;
	if (command_call(symbolizer, "/sonde.v1.Symbols/Symbolize", &req.base,
			 &sonde__v1__symbolize_response__descriptor, COMMAND_RPC_TIMEOUT_MS, false,
			 (ProtobufCMessage **)&resp) < 0)
		goto cleanup;
	if (resp->n_results != 1) {
		fprintf(stderr, "sonde: the symbolizer answered %zu results for 1 query\n", resp->n_results);
		goto cleanup;
	}
	const Sonde__V1__SymbolizeResult *r = resp->results[0];
	if (r->error && *r->error && !json) {
		fprintf(stderr, "sonde: %s\n", r->error);
		goto cleanup;
	}
	if (json) {
		printf("{\"error\":");
		cli_json_string(stdout, r->error);
		printf(",\"symbols\":[");
	}
	for (size_t i = 0; i < r->n_symbols; i++) {
		const Sonde__V1__Symbol *s = r->symbols[i];
		if (json) {
			printf("%s{\"address\":\"0x%" PRIx64 "\",\"function\":", i ? "," : "", s->address);
			cli_json_string(stdout, s->function);
			printf(",\"offset\":%" PRIu64 ",\"file\":", s->offset);
			cli_json_string(stdout, s->file_name);
			printf("}");
		} else if (s->function && *s->function) {
			printf("0x%" PRIx64 " %s+0x%" PRIx64 "\n", s->address, s->function, s->offset);
		} else {
			printf("0x%" PRIx64 " %s+0x%" PRIx64 "\n", s->address,
			       s->file_name && *s->file_name ? s->file_name : "[unknown]", s->address);
		}
	}
	if (json)
		printf("]}\n");
	rc = 0;
cleanup:
	rpc_message_free(resp ? &resp->base : NULL);
	free(addrs);
	return rc;
}

static void print_outcomes_json(const Sonde__V1__OutcomeCounts *o)
{
	const Sonde__V1__OutcomeCounts zero = SONDE__V1__OUTCOME_COUNTS__INIT;

	if (!o)
		o = &zero;
	printf("{\"complete\":%" PRIu64 ",\"truncated\":%" PRIu64 ",\"no_table\":%" PRIu64
	       ",\"read_error\":%" PRIu64 ",\"no_user_stack\":%" PRIu64 "}",
	       o->complete, o->truncated, o->no_table, o->read_error, o->no_user_stack);
}

static void print_outcomes_row(const char *label, const Sonde__V1__OutcomeCounts *o)
{
	const Sonde__V1__OutcomeCounts zero = SONDE__V1__OUTCOME_COUNTS__INIT;

	if (!o)
		o = &zero;
	printf("%-23s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n",
	       label, o->complete, o->truncated, o->no_table, o->read_error, o->no_user_stack);
}

int cmd_status(int argc, char **argv)
{
	static const char help[] = "usage: sonde status [--json] [--node NAME] [--symbolizer ADDR]\n"
				   "Shows a running symbolizer's counters, its connected nodes and\n"
				   "the processes with the most samples (--node: that node's).\n";
	Sonde__V1__StatusRequest req = SONDE__V1__STATUS_REQUEST__INIT;
	Sonde__V1__StatusResponse *st = NULL;
	const char *symbolizer = NULL, *node = NULL;
	bool json = false;
	const struct command_opt opts[] = {
		{ "json", 'j', COMMAND_OPT_FLAG, &json },
		{ "node", 'N', COMMAND_OPT_STRING, &node },
	};
	const struct command_line cl = { help, opts, sizeof(opts) / sizeof(opts[0]), &symbolizer,
					 .operands = COMMAND_OPERANDS_IGNORED };
	int r = command_parse(&cl, argc, argv, NULL);

	if (r)
		return r > 0 ? 0 : 2;
	if (node)
		req.node = (char *)node;
	if (command_call(symbolizer, "/sonde.v1.Symbols/Status", &req.base,
			 &sonde__v1__status_response__descriptor, COMMAND_RPC_TIMEOUT_MS, false,
			 (ProtobufCMessage **)&st) < 0)
		return 1;
	/* One table drives both formats, so they cannot drift apart. */
	const struct {
		const char *key;
		uint64_t value;
	} rows[] = {
		{ "sensors_connected", st->sensors_connected },
		{ "stacks_received", st->stacks_received },
		{ "samples_received", st->samples_received },
		{ "samples_taken", st->samples_taken },
		{ "samples_lost", st->samples_lost },
		{ "samples_dropped", st->samples_dropped },
		/* docs/reliability.md: taken = stored + dropped, per session */
		{ "session_samples_taken", st->session_samples_taken },
		{ "samples_stored", st->samples_stored },
		{ "session_samples_dropped", st->session_samples_dropped },
		{ "samples_unconfirmed", st->samples_unconfirmed },
		{ "profiles_in_memory", st->profiles_in_memory },
		{ "cache_hits", st->cache_hits },
		{ "cache_misses", st->cache_misses },
		{ "files_analysed", st->files_analysed },
		{ "files_failed", st->files_failed },
		{ "unwind_tables_built", st->unwind_tables_built },
		{ "unwind_tables_loaded", st->unwind_tables_loaded },
		{ "unwind_rows_loaded", st->unwind_rows_loaded },
		{ "bpf_map_bytes", st->bpf_map_bytes },
		{ "go_probe_files", st->go_probe_files },
		{ "go_probe_links", st->go_probe_links },
		{ "go_probe_attach_failures", st->go_probe_attach_failures },
		{ "go_probe_records", st->go_probe_records },
		{ "go_probe_records_lost", st->go_probe_records_lost },
		/* what the sensors refused of this symbolizer's (sensor/validate.h) */
		{ "probe_plans_refused", st->probe_plans_refused },
		{ "interp_configs_refused", st->interpreter_configs_refused },
		{ "uptime_s", st->uptime_s },
	};
	const Sonde__V1__OtlpStatus *o = st->otlp;
	/* Only with --otlp-endpoint on the symbolizer. */
	const struct {
		const char *key;
		uint64_t value;
	} otlp_rows[] = {
		{ "requests", o ? o->requests : 0 },
		{ "samples", o ? o->samples : 0 },
		{ "failures", o ? o->failures : 0 },
		{ "dropped_samples", o ? o->dropped_samples : 0 },
		{ "dropped_requests", o ? o->dropped_requests : 0 },
		{ "backlog_requests", o ? o->backlog_requests : 0 },
		{ "backlog_bytes", o ? o->backlog_bytes : 0 },
		{ "spans", o ? o->spans : 0 },
		{ "dropped_spans", o ? o->dropped_spans : 0 },
	};
	const size_t n_otlp = o ? sizeof(otlp_rows) / sizeof(otlp_rows[0]) : 0;
	if (json) {
		printf("{\"version\":");
		cli_json_string(stdout, st->version);
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			printf(",\"%s\":%" PRIu64, rows[i].key, rows[i].value);
		printf(",\"outcomes\":");
		print_outcomes_json(st->outcomes);
		printf(",\"processes\":[");
		for (size_t i = 0; i < st->n_processes; i++) {
			const Sonde__V1__ProcessOutcomes *p = st->processes[i];
			printf("%s{\"pid\":%u,\"comm\":", i ? "," : "", p->pid);
			cli_json_string(stdout, p->comm);
			printf(",\"node\":");
			cli_json_string(stdout, p->node);
			printf(",\"outcomes\":");
			print_outcomes_json(p->outcomes);
			printf("}");
		}
		printf("],\"nodes\":[");
		for (size_t i = 0; i < st->n_nodes; i++) {
			const Sonde__V1__NodeInfo *nd = st->nodes[i];
			printf("%s{\"node\":", i ? "," : "");
			cli_json_string(stdout, nd->node);
			printf(",\"host_name\":");
			cli_json_string(stdout, nd->host_name);
			printf(",\"machine_id\":");
			cli_json_string(stdout, nd->machine_id);
			printf(",\"sensors\":%u}", nd->sensors);
		}
		printf("],\"scoped\":%s", st->scoped ? "true" : "false");
		for (size_t i = 0; i < n_otlp; i++)
			printf("%s\"%s\":%" PRIu64, i ? "," : ",\"otlp\":{", otlp_rows[i].key,
			       otlp_rows[i].value);
		printf("%s}\n", n_otlp ? "}" : "");
	} else {
		printf("%-24s %s\n", "version", st->version);
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			printf("%-24s %" PRIu64 "\n", rows[i].key, rows[i].value);
		printf("\nuser stacks (samples)   %10s %10s %10s %10s %10s\n", "complete", "truncated",
		       "no_table", "read_error", "none");
		print_outcomes_row("all processes", st->outcomes);
		for (size_t i = 0; i < st->n_processes; i++) {
			char label[80];
			if (st->n_nodes > 1)
				snprintf(label, sizeof(label), "%.20s %u %.16s", st->processes[i]->node,
					 st->processes[i]->pid, st->processes[i]->comm);
			else
				snprintf(label, sizeof(label), "%u %.16s", st->processes[i]->pid,
					 st->processes[i]->comm);
			print_outcomes_row(label, st->processes[i]->outcomes);
		}
		/* Not an admin: the symbolizer lists only the caller's own
		 * processes (docs/security.md, roles). */
		if (st->scoped)
			printf("(processes of your own uid only)\n");
		if (st->n_nodes > 1) {
			printf("\n%-24s %-24s %s\n", "node", "host name", "sensors");
			for (size_t i = 0; i < st->n_nodes; i++)
				printf("%-24.100s %-24.100s %u\n", st->nodes[i]->node,
				       st->nodes[i]->host_name, st->nodes[i]->sensors);
		}
		if (n_otlp)
			printf("\nOTLP export\n");
		for (size_t i = 0; i < n_otlp; i++)
			printf("%-24s %" PRIu64 "\n", otlp_rows[i].key, otlp_rows[i].value);
	}
	rpc_message_free(&st->base);
	return 0;
}
