/* command.c - a subcommand's command line and its calls to the
 * symbolizer (see command.h): one getopt_long() loop driven by each
 * subcommand's option table, and the channel every call goes through.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "parse.h"

/* Options of one subcommand, --symbolizer and --help included. */
#define COMMAND_MAX_OPTS 16

/* --symbolizer, else $SONDE_SYMBOLIZER, else the default. Borrowed. */
static const char *symbolizer_address(const char *flag)
{
	const char *env = getenv("SONDE_SYMBOLIZER");

	if (flag && *flag)
		return flag;
	if (env && *env)
		return env;
	return COMMAND_DEFAULT_SYMBOLIZER;
}

struct rpc_channel *command_channel_open(const char *address)
{
	struct rpc_channel *ch;
	int err;

	if (strncmp(address, "tcp:", 4) == 0) {
		/* TCP is mutual TLS (docs/security.md); like SONDE_SYMBOLIZER,
		 * the material comes from the environment so every subcommand
		 * takes it. */
		struct rpc_tls tls = { .ca = getenv("SONDE_TLS_CA"), .cert = getenv("SONDE_TLS_CERT"),
				       .key = getenv("SONDE_TLS_KEY"),
				       .server_name = getenv("SONDE_TLS_SERVER_NAME") };
		const char *insecure = getenv("SONDE_INSECURE");

		if (tls.ca && *tls.ca) {
			err = rpc_client_set_tls(&tls);
			if (err < 0) {
				fprintf(stderr, "sonde: cannot use SONDE_TLS_CA/SONDE_TLS_CERT/SONDE_TLS_KEY: %s\n",
					strerror(-err));
				return NULL;
			}
		} else if (!insecure || strcmp(insecure, "1") != 0) {
			fprintf(stderr, "sonde: %.200s is TCP: set SONDE_TLS_CA, SONDE_TLS_CERT and SONDE_TLS_KEY (mutual TLS),\n"
					"  or SONDE_INSECURE=1 for a plaintext test symbolizer\n",
				address);
			return NULL;
		}
	}
	ch = rpc_channel_new(address, NULL);
	if (!ch)
		fprintf(stderr, "sonde: bad symbolizer address '%.200s' (use unix:/PATH or tcp:HOST:PORT)\n",
			address);
	return ch;
}

int command_call_on(struct rpc_channel *ch, const char *address, const char *method,
		    const ProtobufCMessage *req, const ProtobufCMessageDescriptor *reply_desc,
		    int timeout_ms, bool wait_for_ready, ProtobufCMessage **ret_reply,
		    struct rpc_error *ret_err)
{
	struct rpc_error rerr = { 0 };
	int err;

	err = rpc_unary(ch, method, req, reply_desc, timeout_ms, wait_for_ready, ret_reply, &rerr);
	if (ret_err)
		*ret_err = rerr;
	if (err == -ECONNREFUSED)
		fprintf(stderr,
			"sonde: cannot reach the symbolizer at %.200s: %.200s\n"
			"  start one (sonde-symbolizer --listen %.200s), or point --symbolizer or\n"
			"  SONDE_SYMBOLIZER at a running one\n",
			address, rerr.message, address);
	else if (err && !(ret_err && rerr.status == RPC_RESOURCE_EXHAUSTED))
		fprintf(stderr, "sonde: %s at %.200s failed: %.200s\n", method, address,
			rerr.message[0] ? rerr.message : strerror(-err));
	return err;
}

int command_call(const char *address, const char *method, const ProtobufCMessage *req,
		 const ProtobufCMessageDescriptor *reply_desc, int timeout_ms, bool wait_for_ready,
		 ProtobufCMessage **ret_reply)
{
	struct rpc_channel *ch = command_channel_open(address);
	int err;

	if (!ch)
		return -EINVAL;
	err = command_call_on(ch, address, method, req, reply_desc, timeout_ms, wait_for_ready,
			      ret_reply, NULL);
	rpc_channel_free(ch);
	return err;
}

/* The value getopt_long() returns for opts[i]: its short name, or one no
 * character has. */
static int opt_value(const struct command_opt *o, size_t i)
{
	return o->short_name ? (unsigned char)o->short_name : 256 + (int)i;
}

/* Stores arg (NULL for a flag) as o says. Returns 0 or -EINVAL. */
static int opt_store(const struct command_opt *o, const char *arg)
{
	uint32_t v;

	switch (o->kind) {
	case COMMAND_OPT_FLAG:
		*(bool *)o->target = true;
		return 0;
	case COMMAND_OPT_STRING:
		*(const char **)o->target = arg;
		return 0;
	case COMMAND_OPT_U32:
		if (parse_u32(arg, 10, &v) < 0 || v < o->min || v > (o->max ? o->max : UINT32_MAX))
			return -EINVAL;
		*(uint32_t *)o->target = v;
		return 0;
	case COMMAND_OPT_U64:
		return parse_u64(arg, 10, o->target) < 0 ? -EINVAL : 0;
	case COMMAND_OPT_CUSTOM:
		return o->parse(arg, o->target) < 0 ? -EINVAL : 0;
	}
	return -EINVAL;
}

/* getopt_long()'s tables for opts: shortopts (room for 3 * n + 2) and
 * longopts (room for n + 1). */
static void opts_tables(const struct command_opt *opts, size_t n, bool stop_at_operand,
			char *shortopts, struct option *longopts)
{
	char *p = shortopts;

	if (stop_at_operand)
		*p++ = '+';
	for (size_t i = 0; i < n; i++) {
		bool arg = opts[i].kind != COMMAND_OPT_FLAG;

		longopts[i] = (struct option){ opts[i].name, arg ? required_argument : no_argument,
					       NULL, opt_value(&opts[i], i) };
		if (opts[i].short_name) {
			*p++ = opts[i].short_name;
			if (arg)
				*p++ = ':';
		}
	}
	*p = '\0';
	longopts[n] = (struct option){ 0 };
}

int command_parse(const struct command_line *cl, int argc, char **argv, int *ret_first)
{
	struct command_opt opts[COMMAND_MAX_OPTS];
	struct option longopts[COMMAND_MAX_OPTS + 1];
	char shortopts[3 * COMMAND_MAX_OPTS + 2];
	const char *symbolizer = NULL;
	size_t n = 0;
	int c;

	assert(cl->n_opts <= COMMAND_MAX_OPTS - 2);
	/* In this order, as getopt_long() lists an ambiguous abbreviation's
	 * possibilities in it. */
	if (cl->symbolizer)
		opts[n++] = (struct command_opt){ "symbolizer", 's', COMMAND_OPT_STRING, &symbolizer };
	if (cl->n_opts)
		memcpy(opts + n, cl->opts, cl->n_opts * sizeof(opts[0]));
	n += cl->n_opts;
	opts[n++] = (struct command_opt){ "help", 'h', COMMAND_OPT_FLAG, NULL };
	opts_tables(opts, n, cl->stop_at_operand, shortopts, longopts);

	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		size_t i = 0;

		while (i < n && opt_value(&opts[i], i) != c)
			i++;
		if (i == n) {
			fputs(cl->help, stderr);
			return -EINVAL;
		}
		if (i == n - 1) { /* --help, the last entry */
			fputs(cl->help, stdout);
			return 1;
		}
		if (opt_store(&opts[i], optarg) < 0) {
			if (opts[i].bad)
				fprintf(stderr, opts[i].bad, optarg);
			return -EINVAL;
		}
	}
	if (cl->operands == COMMAND_OPERANDS_REFUSED && optind != argc) {
		fprintf(stderr, "sonde: unexpected argument '%.64s'\n", argv[optind]);
		return -EINVAL;
	}
	if (cl->symbolizer)
		*cl->symbolizer = symbolizer_address(symbolizer);
	if (ret_first)
		*ret_first = optind;
	return 0;
}

int command_status_quiet(const char *address, int timeout_ms, bool wait_for_ready,
			 Sonde__V1__StatusResponse **ret)
{
	Sonde__V1__StatusRequest req = SONDE__V1__STATUS_REQUEST__INIT;
	struct rpc_channel *ch = rpc_channel_new(address, NULL);
	struct rpc_error rerr;
	int err;

	if (!ch)
		return -EINVAL;
	err = rpc_unary(ch, "/sonde.v1.Symbols/Status", &req.base,
			&sonde__v1__status_response__descriptor, timeout_ms, wait_for_ready,
			(ProtobufCMessage **)ret, &rerr);
	rpc_channel_free(ch);
	return err;
}
