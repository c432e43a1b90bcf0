/* cli.h - what the sonde subcommands share: the query helpers and the
 * output writers (their command lines and calls: command.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "symbols.pb-c.h"

/* sonde symbolize --file (symbolize.c). */
struct cli_symbolize_opts {
	const char *symbolizer;
	const char *file;
	bool json, inlines, demangle;
};
/* addrs: n hex strings, or none to read standard input. Returns the exit
 * code. */
int cli_symbolize_file(const struct cli_symbolize_opts *o, int n, char **addrs);
/* Writes s as a JSON string (quoted, escaped). */
void cli_json_string(FILE *out, const char *s);
/* The same into out, which holds 6 * strlen(s) + 3 bytes (s NULL: "");
 * NUL-terminated. Returns the end (at the NUL). */
char *cli_json_quote_into(char *out, const char *s);

/* Prints the top table (at most limit rows). */
/* profile: the ProfileQuery.profile the reply answers (the heading
 * names its unit). */
void cli_print_top(FILE *out, const Sonde__V1__TopResponse *top, unsigned limit, uint32_t profile);
/* --type: "cpu", "off-cpu" or "memory" into *(uint32_t *)target (the
 * ProfileQuery.profile numbers). Returns 0 or -EINVAL. */
int cli_parse_profile_type(const char *arg, void *target);
/* The --type name of a profile number; "unknown" out of range. */
const char *cli_profile_type_name(uint32_t profile);
/* Writes folded stacks, one "frame;frame;... COUNT" line per stack.
 * Returns 0 or a negative errno. */
int cli_write_folded(FILE *out, const Sonde__V1__FoldedResponse *folded);
/* Writes path atomically: fill writes a temp file beside it, which is
 * renamed over path if fill returned 0, else removed. Returns fill's
 * error, or a negative errno of the file operations. */
int cli_write_file_atomic(const char *path, int (*fill)(FILE *f, const void *ctx),
			  const void *ctx);
/* Writes folded stacks to path (atomically: temp file + rename). */
int cli_write_folded_file(const char *path, const Sonde__V1__FoldedResponse *folded);

/* Options of the commands that query stored profiles (top, folded,
 * flamegraph). */
struct cli_query_opts {
	const char *symbolizer; /* the address to call (after parsing) */
	Sonde__V1__ProfileQuery q;
	unsigned limit;
	const char *output;
};
/* Parses --symbolizer, --since, --node, --pid, --limit, -o, -F (--frequency:
 * only Pprof uses it) with command_parse(). Returns 0, 1 for
 * --help (printed), or -EINVAL (reported). */
int cli_parse_query_opts(int argc, char **argv, const char *help, struct cli_query_opts *o);

/* "WHAT: off-CPU time (ns)" and the like: the flame graph's title for a
 * profile type. Static storage, overwritten by the next call. */
const char *cli_flamegraph_title(uint32_t profile, const char *what);

/* Writes a self-contained HTML flame graph of the stacks to path
 * (atomically). Returns 0 or a negative errno. */
int cli_write_flamegraph_file(const char *path, const Sonde__V1__FoldedResponse *folded,
			      const char *title);

/* A long `sonde record`'s progress line on a terminal (progress.c):
 * start, then tick as often as convenient (it redraws once a second, from
 * the symbolizer's Status), then end (erases the line). No-ops when
 * standard error is not a terminal. */
void cli_progress_start(void);
void cli_progress_tick(const char *address);
void cli_progress_end(void);

/* pprof.c: whether path ends in .pb.gz or .pprof. */
bool cli_is_pprof_path(const char *path);
/* Writes len bytes to path atomically (temp file + rename). Returns 0 or
 * a negative errno. */
int cli_write_bytes_file(const char *path, const void *data, size_t len);
/* Calls Symbols/Pprof. Returns 0 with an owned *ret, or a negative errno
 * (reported). */
int cli_fetch_pprof(const char *address, const Sonde__V1__ProfileQuery *q,
		    Sonde__V1__PprofResponse **ret);

int cmd_record(int argc, char **argv);
int cmd_pprof(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_folded(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_spans(int argc, char **argv);
