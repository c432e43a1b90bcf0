/* pprof.c - `sonde pprof`: the stored samples of a running symbolizer as
 * a gzipped pprof profile (the symbolizer encodes it: Symbols/Pprof), and
 * the file writer `sonde record -o FILE.pb.gz` shares. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "command.h"

/* Whether path names a pprof file (by suffix). */
bool cli_is_pprof_path(const char *path)
{
	static const char *const suffixes[] = { ".pb.gz", ".pprof" };
	size_t n = strlen(path);

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t m = strlen(suffixes[i]);

		if (n > m && !strcmp(path + n - m, suffixes[i]))
			return true;
	}
	return false;
}

struct bytes {
	const void *data;
	size_t len;
};

static int fill_bytes(FILE *f, const void *ctx)
{
	const struct bytes *b = ctx;

	return b->len && fwrite(b->data, 1, b->len, f) != b->len ? -EIO : 0;
}

int cli_write_bytes_file(const char *path, const void *data, size_t len)
{
	struct bytes b = { data, len };

	return cli_write_file_atomic(path, fill_bytes, &b);
}

int cli_fetch_pprof(const char *address, const Sonde__V1__ProfileQuery *q,
		    Sonde__V1__PprofResponse **ret)
{
	return command_call(address, "/sonde.v1.Symbols/Pprof", &q->base,
			    &sonde__v1__pprof_response__descriptor, COMMAND_RPC_TIMEOUT_MS, false,
			    (ProtobufCMessage **)ret);
}

int cmd_pprof(int argc, char **argv)
{
	static const char help[] =
		"usage: sonde pprof [--since SECONDS] [--node NAME] [--pid PID] [-F HZ] -o FILE.pb.gz\n"
		"                   [--type cpu|off-cpu|memory] [--symbolizer ADDR]\n"
		"Writes the samples stored by a running symbolizer as a gzipped pprof profile\n"
		"(profile.proto: functions, source lines, inlined frames, mappings with build IDs,\n"
		"pid/tid/comm labels), for go tool pprof, Pyroscope, Parca or Speedscope.\n"
		"  -F HZ   the sensors' sampling rate, for cpu time (default: the connected\n"
		"          sensors' rate; without one the profile has sample counts only)\n";
	struct cli_query_opts o = { .q = SONDE__V1__PROFILE_QUERY__INIT };
	Sonde__V1__PprofResponse *resp = NULL;
	int r, err;

	r = cli_parse_query_opts(argc, argv, help, &o);
	if (r)
		return r > 0 ? 0 : 2;
	if (!o.output) {
		fprintf(stderr, "sonde pprof: say where to write it: -o FILE.pb.gz\n");
		return 2;
	}
	if (cli_fetch_pprof(o.symbolizer, &o.q, &resp) < 0)
		return 1;
	err = cli_write_bytes_file(o.output, resp->profile.data, resp->profile.len);
	if (err)
		fprintf(stderr, "sonde pprof: writing %s: %s\n", o.output, strerror(-err));
	else if (resp->samples_dropped)
		fprintf(stderr, "sonde pprof: %llu samples left out (their stored stacks could not be read)\n",
			(unsigned long long)resp->samples_dropped);
	rpc_message_free(&resp->base);
	return err ? 1 : 0;
}
