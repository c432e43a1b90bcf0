/* main.c - the sonde command: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "command.h"
#include "log.h"
#include "rpc.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "record", cmd_record, "profile a command, a process or the whole host" },
	{ "top", cmd_top, "show the top functions stored by a running symbolizer" },
	{ "folded", cmd_folded, "write stored stacks in folded format" },
	{ "flamegraph", cmd_flamegraph, "write stored stacks as an HTML flame graph" },
	{ "pprof", cmd_pprof, "write stored samples as a gzipped pprof profile" },
	{ "symbolize", cmd_symbolize, "turn addresses of a file into function names" },
	{ "status", cmd_status, "show a running symbolizer's counters" },
	{ "spans", cmd_spans, "list recent spans of the Go probes" },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: sonde COMMAND [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n'sonde COMMAND --help' describes each command.\n"
		     "Commands that query a running symbolizer use --symbolizer ADDR, else\n"
		     "$SONDE_SYMBOLIZER, else " COMMAND_DEFAULT_SYMBOLIZER ".\n"
		     "A tcp: symbolizer needs mutual TLS: $SONDE_TLS_CA, $SONDE_TLS_CERT,\n"
		     "$SONDE_TLS_KEY (and $SONDE_TLS_SERVER_NAME), or SONDE_INSECURE=1.\n");
}

int main(int argc, char **argv)
{
	log_init("sonde", LOG_LEVEL_WARN);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("sonde %s\n", SONDE_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(argv[1], commands[i].name)) {
			int rc;

			rpc_global_init();
			rc = commands[i].fn(argc - 1, argv + 1);
			rpc_global_shutdown();
			return rc;
		}
	}
	fprintf(stderr, "sonde: unknown command '%.64s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
