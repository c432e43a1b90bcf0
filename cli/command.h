/* command.h - what every sonde subcommand does with its command line and
 * its symbolizer: parse the options from one table (--help and
 * --symbolizer are shared), and call the symbolizer the options name.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc_client.h"
#include "symbols.pb-c.h"

#define COMMAND_DEFAULT_SYMBOLIZER "unix:/run/sonde/symbolizer.sock"
#define COMMAND_RPC_TIMEOUT_MS 30000

enum command_opt_kind {
	COMMAND_OPT_FLAG,   /* no argument: sets *(bool *)target */
	COMMAND_OPT_STRING, /* *(const char **)target = the argument (borrowed from argv) */
	COMMAND_OPT_U32,    /* *(uint32_t *)target = a decimal number in [min, max] */
	COMMAND_OPT_U64,    /* *(uint64_t *)target = a decimal number */
	COMMAND_OPT_CUSTOM, /* parse(argument, target) */
};

/* One option of a subcommand. */
struct command_opt {
	const char *name; /* the long name, "pid" for --pid */
	char short_name;  /* 'p' for -p; 0: long only */
	enum command_opt_kind kind;
	void *target; /* borrowed: what the option fills */
	uint32_t min, max; /* COMMAND_OPT_U32 (max 0: UINT32_MAX) */
	/* COMMAND_OPT_CUSTOM: 0, or a negative errno for a value it refuses
	 * (then bad is printed, or if bad is NULL parse printed why). */
	int (*parse)(const char *arg, void *target);
	/* Printed on standard error for a value that does not parse, with
	 * the argument as its one (optional) %s. */
	const char *bad;
};

/* A subcommand's command line. */
struct command_line {
	const char *help; /* --help prints it on standard output; a bad option on standard error */
	const struct command_opt *opts;
	size_t n_opts;
	/* Not NULL: --symbolizer/-s ADDR is an option, and after a parse
	 * *symbolizer is the address to call (the option, else
	 * $SONDE_SYMBOLIZER, else COMMAND_DEFAULT_SYMBOLIZER; borrowed). */
	const char **symbolizer;
	bool stop_at_operand; /* options end at the first operand (CMD ARGS...) */
	enum {
		COMMAND_OPERANDS_REFUSED, /* "unexpected argument" */
		COMMAND_OPERANDS_IGNORED,
		COMMAND_OPERANDS_TAKEN, /* *ret_first says where they start */
	} operands;
};

/* Parses argv[1..argc) (argv[0] is the subcommand's name) against cl.
 * Returns 0 with the targets filled and *ret_first (may be NULL) the
 * index of the first operand (argc: none); 1 after --help (printed on
 * standard output); -EINVAL for a bad command line (reported on standard
 * error). Uses getopt_long(): once per process. */
int command_parse(const struct command_line *cl, int argc, char **argv, int *ret_first);

/* A channel to the symbolizer at address (borrowed), with the mutual TLS
 * material of $SONDE_TLS_CA/CERT/KEY/SERVER_NAME for a tcp: address
 * (refused without it unless SONDE_INSECURE=1). Returns an owned channel
 * (rpc_channel_free()) or NULL, reported on standard error. */
struct rpc_channel *command_channel_open(const char *address);

/* Unary call to the Symbols service on ch, with a message that names what
 * failed and how to fix it (address names the symbolizer there). Returns
 * 0 with an owned *ret_reply (rpc_message_free()), or a negative errno
 * (reported on standard error). ret_err (may be NULL) receives the
 * status; RESOURCE_EXHAUSTED is then left for the caller to report. */
int command_call_on(struct rpc_channel *ch, const char *address, const char *method,
		    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_desc,
		    int timeout_ms, bool wait_for_ready, ProtobufCMessage **ret_reply,
		    struct rpc_error *ret_err);

/* command_call_on() on a channel of its own (command_channel_open()).
 * Same returns (-EINVAL if the channel could not be made). */
int command_call(const char *address, const char *method, const ProtobufCMessage *req,
		 const ProtobufCMessageDescriptor *reply_desc, int timeout_ms, bool wait_for_ready,
		 ProtobufCMessage **ret_reply);

/* Status on a plain channel of its own, reporting nothing (for polling:
 * start-up waits, the progress line). Returns 0 with an owned *ret
 * (rpc_message_free()), -EINVAL for an address that makes no channel, or
 * the negative errno of rpc_unary(). */
int command_status_quiet(const char *address, int timeout_ms, bool wait_for_ready,
			 Sonde__V1__StatusResponse **ret);
