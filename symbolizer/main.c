/* main.c - sonde-symbolizer: flags, privilege drop, and the rpc server.
 *
 * Order matters: the listening sockets are bound (and the cache directory
 * prepared) as root, then the process becomes --user for good before the
 * server accepts a connection or the cache database is opened, so no
 * sensor byte and no cache byte is ever handled with privileges. Then the
 * sandbox (sandbox.c) closes everything else before the first connection:
 * the bounding set is emptied while still root, the rest once the
 * databases are open and the debug directories known.
 *
 * Who may call what (rpc_admission.c enforces it, this file decides): on Unix
 * sockets by the peer's credentials, on TCP by its client certificate
 * (mutual TLS; plaintext TCP only with --insecure).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "parse.h"
#include "rpc_server.h"
#include "cache.h"
#include "api/fd_upload.h"
#include "service.h"
#include "fd_upload_wire.h"
#include "malloc_tuning.h"
#include "sandbox.h"
#include "otlp_exporter.h"
#include "interp_ops.h"
#include "debuginfo_fetch.h"

#define MAX_LISTEN 16
#define MAX_DEBUG_DIRS 16
#define MAX_IDS 32
/* Defaults for the token buckets: far above what a sensor sends (one
 * batch per flush plus one answer per ReadRange) or a CLI asks. */
#define DEFAULT_RATE_INGEST 2000 /* messages per second per stream */
#define DEFAULT_RATE_SYMBOLS 200 /* calls per second per connection */

static struct env {
	const char *listen[MAX_LISTEN];
	size_t n_listen;
	const char *cache;
	const char *profiles; /* NULL: in the cache database */
	const char *debug_dirs[MAX_DEBUG_DIRS + 1];
	size_t n_debug_dirs;
	const char *user;
	unsigned retention_minutes;
	const char *interpreters; /* --interpreters, parsed into interp_kinds */
	/* --debuginfod (else $DEBUGINFOD_URLS), their ports for the sandbox */
	const char *debuginfod[DEBUGINFO_FETCH_MAX_URLS];
	size_t n_debuginfod;
	uint16_t debuginfod_ports[DEBUGINFO_FETCH_MAX_URLS];
	char *debuginfod_env; /* $DEBUGINFOD_URLS, copied: the URLs point into it */
	const char *debuginfod_ca; /* https: the CAs trusted (default: the system's) */
	uint32_t debuginfod_timeout_s;
	uint64_t debuginfod_max_size;
	uint32_t interp_kinds;
	bool verbose;
	/* sandbox */
	bool allow_unsandboxed, sandbox_log, print_policy, selftest;
	const char *selftest_file;
	uint64_t max_memory, max_open_files;
	/* peers */
	uint32_t sensor_uids[MAX_IDS];
	size_t n_sensor_uids;
	const char *client_groups[MAX_IDS];
	gid_t client_gids[MAX_IDS];
	size_t n_client_groups;
	const char *admin_groups[MAX_IDS];
	gid_t admin_gids[MAX_IDS];
	size_t n_admin_groups;
	const char *admin_names[MAX_IDS];
	size_t n_admin_names;
	uid_t service_uid;
	const char *tls_cert, *tls_key, *tls_client_ca;
	const char *sensor_names[MAX_IDS];
	size_t n_sensor_names;
	bool insecure;
	uint32_t rate_ingest, rate_symbols;
	/* OTLP export */
	const char *otlp_endpoint;
	uint32_t otlp_interval_s;
	bool otlp_insecure;
	const char *otlp_ca, *otlp_cert, *otlp_key, *otlp_server_name;
	enum otlp_layout otlp_layout;
	const char *otlp_layout_arg; /* NULL: the default layout */
	char otlp_target[300];  /* tcp:IP:PORT, resolved before the sandbox */
	char otlp_host[256];
	uint16_t otlp_port;
} env = {
	.otlp_interval_s = 10,
	.cache = "/var/cache/sonde/symbolizer/cache.db",
	.user = "sonde",
	.retention_minutes = 60,
	.interpreters = "all",
	.debuginfod_timeout_s = 10,
	.debuginfod_max_size = 1ull << 30,
	.max_memory = 8ull << 30,
	.max_open_files = 16384,
	.rate_ingest = DEFAULT_RATE_INGEST,
	.rate_symbols = DEFAULT_RATE_SYMBOLS,
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: sonde-symbolizer [OPTION]...\n"
		"The sonde symbolizer: analyses files for sensors, stores profiles, answers\n"
		"the Symbols API. Runs unprivileged; started as root it drops to --user.\n\n"
		"  --listen unix:PATH|tcp:HOST:PORT  listen here (repeatable;\n"
		"                                    default unix:/run/sonde/symbolizer.sock)\n"
		"  --cache PATH           SQLite cache and profile store\n"
		"                         (default /var/cache/sonde/symbolizer/cache.db)\n"
		"  --profiles PATH        keep profiles in this database instead (e.g. one\n"
		"                         job's private store, as sonde record uses)\n"
		"  --debug-dir DIR        separate debug files (repeatable; default /usr/lib/debug)\n"
		"  --user NAME            user to run as when started as root (default sonde)\n"
		"  --retention-minutes N  keep profiles this long (default 60)\n"
		"  --interpreters LIST    runtimes whose frames sensors walk: names\n"
		"                         (cpython,...), all (default) or none\n"
		"  --debuginfod URL       fetch debug files that no --debug-dir has by GNU\n"
		"                         build ID from this debuginfod server (repeatable, at\n"
		"                         most 8; default: $DEBUGINFOD_URLS if set, else off).\n"
		"                         URL is http[s]://HOST[:PORT][/PATH]; a host name is\n"
		"                         resolved once, at start (the sandbox allows no DNS:\n"
		"                         a new address needs a restart; docs/security.md)\n"
		"  --debuginfod-ca FILE   https: trust the CAs in this PEM file instead of\n"
		"                         " DEBUGINFO_FETCH_SYSTEM_CA "\n"
		"                         (read at start; certificates are always verified)\n"
		"  --debuginfod-timeout SECONDS  each request, connect included (default 10)\n"
		"  --debuginfod-max-size BYTES   largest debug file fetched (default 1G)\n"
		"\nWho may connect (docs/security.md):\n"
		"  --sensor-uid UID       Unix peers with this uid may stream sensor data\n"
		"                         (repeatable; root and the user sonde-sensor, which\n"
		"                         the sensor runs as after set-up, always may)\n"
		"  --client-group GROUP   members may use the Symbols API on Unix sockets\n"
		"                         (repeatable; root and --user always may); they see\n"
		"                         only their own processes' data\n"
		"  --admin-group GROUP    members may use the Symbols API and see every\n"
		"                         user's data, like root and --user (repeatable)\n"
		"  --tls-cert FILE --tls-key FILE --tls-client-ca FILE\n"
		"                         mutual TLS for tcp: listeners (required for tcp:)\n"
		"  --tls-sensor-name NAME certificates with this CN or SAN are sensors\n"
		"                         (repeatable; default sonde-sensor); other valid\n"
		"                         client certificates may only read\n"
		"  --tls-admin-name NAME  certificates with this CN or SAN see every user's\n"
		"                         data (repeatable); other readers see no process's\n"
		"                         data, only files they could read (docs/security.md)\n"
		"  --insecure             allow plaintext tcp: listeners (anyone is a sensor)\n"
		"  --rate-ingest N        sensor messages per second per stream (default 2000)\n"
		"  --rate-symbols N       Symbols calls per second per connection (default 200)\n"
		"\nOTLP profiles export (docs/exports.md):\n"
		"  --otlp-endpoint HOST:PORT  send profiles to this OTLP gRPC receiver; HOST is\n"
		"                         resolved once, at start (before the sandbox)\n"
		"  --otlp-interval SECONDS  one request per interval (default 10, 1..3600)\n"
		"  --otlp-ca FILE         TLS: CA that signed the receiver's certificate\n"
		"  --otlp-cert FILE --otlp-key FILE  TLS client certificate (optional)\n"
		"  --otlp-server-name NAME  name to check in the receiver's certificate\n"
		"                         (default: HOST)\n"
		"  --otlp-insecure        plaintext instead of TLS (one of the two is required)\n"
		"  --otlp-profiles-layout VERSION  the opentelemetry-proto release whose profiles\n"
		"                         layout to write: 1.10 (default; also 1.11) or 1.5.0\n"
		"                         (for receivers built on v1.5.0)\n"
		"\nSandbox:\n"
		"  --max-memory BYTES     RLIMIT_DATA (K/M/G suffix; default 8G; 0: none)\n"
		"  --max-open-files N     RLIMIT_NOFILE (default 16384)\n"
		"  --allow-unsandboxed    run even if Landlock is unavailable (default: refuse)\n"
		"  --sandbox-log          seccomp logs instead of killing (debugging)\n"
		"  --print-policy         print the sandbox policy and exit\n"
		"  --verbose              debug logging\n"
		"  --help                 this text\n");
}

static int parse_size(const char *s, uint64_t *ret);

/* --otlp-*: HOST:PORT syntax and the TLS/plaintext choice. */
static int otlp_check_args(void)
{
	const char *ep = env.otlp_endpoint, *colon;
	size_t host_len;
	uint32_t port;

	if (!ep) {
		if (env.otlp_insecure || env.otlp_ca || env.otlp_cert || env.otlp_key ||
		    env.otlp_server_name || env.otlp_layout_arg) {
			fprintf(stderr, "sonde-symbolizer: --otlp-* options need --otlp-endpoint\n");
			return -EINVAL;
		}
		return 0;
	}
	colon = strrchr(ep, ':');
	if (!colon || colon == ep || parse_u32(colon + 1, 10, &port) < 0 || port == 0 ||
	    port > 65535) {
		fprintf(stderr, "sonde-symbolizer: --otlp-endpoint wants HOST:PORT, not '%s'\n", ep);
		return -EINVAL;
	}
	host_len = (size_t)(colon - ep);
	if (ep[0] == '[') {
		if (host_len < 3 || ep[host_len - 1] != ']') {
			fprintf(stderr, "sonde-symbolizer: bad IPv6 host in --otlp-endpoint '%s'\n", ep);
			return -EINVAL;
		}
		ep++;
		host_len -= 2;
	}
	if (host_len >= sizeof(env.otlp_host)) {
		fprintf(stderr, "sonde-symbolizer: --otlp-endpoint host too long\n");
		return -EINVAL;
	}
	memcpy(env.otlp_host, ep, host_len);
	env.otlp_host[host_len] = '\0';
	env.otlp_port = (uint16_t)port;
	if (env.otlp_insecure == (env.otlp_ca != NULL)) {
		fprintf(stderr, "sonde-symbolizer: --otlp-endpoint needs TLS (--otlp-ca FILE) or, explicitly, --otlp-insecure (one of them)\n");
		return -EINVAL;
	}
	if ((!env.otlp_cert) != (!env.otlp_key)) {
		fprintf(stderr, "sonde-symbolizer: --otlp-cert and --otlp-key go together\n");
		return -EINVAL;
	}
	if (env.otlp_insecure && (env.otlp_cert || env.otlp_server_name)) {
		fprintf(stderr, "sonde-symbolizer: --otlp-cert/--otlp-server-name are TLS options; drop --otlp-insecure\n");
		return -EINVAL;
	}
	return 0;
}

/* --debuginfod, else $DEBUGINFOD_URLS (whitespace-separated; URLs this
 * symbolizer cannot use are left out with a warning there, refused here). */
static int debuginfod_check_args(void)
{
	const char *ev = getenv("DEBUGINFOD_URLS");
	bool https = false;

	if (!env.n_debuginfod && ev && *ev) {
		char *save = NULL, *tok;

		env.debuginfod_env = strdup(ev);
		if (!env.debuginfod_env)
			return -ENOMEM;
		for (tok = strtok_r(env.debuginfod_env, " \t\n", &save); tok;
		     tok = strtok_r(NULL, " \t\n", &save)) {
			if (debuginfo_fetch_check_url(tok) < 0) {
				fprintf(stderr, "sonde-symbolizer: DEBUGINFOD_URLS: '%.200s' is not an http:// or https:// URL with a host, ignoring it\n",
					tok);
				continue;
			}
			if (env.n_debuginfod == DEBUGINFO_FETCH_MAX_URLS) {
				fprintf(stderr, "sonde-symbolizer: DEBUGINFOD_URLS: more than %d URLs, ignoring the rest\n",
					DEBUGINFO_FETCH_MAX_URLS);
				break;
			}
			env.debuginfod[env.n_debuginfod++] = tok;
		}
	}
	for (size_t i = 0; i < env.n_debuginfod; i++) {
		int port = debuginfo_fetch_check_url(env.debuginfod[i]);

		if (port < 0) {
			fprintf(stderr, "sonde-symbolizer: --debuginfod wants http[s]://HOST[:PORT][/PATH] (no user, query or fragment), not '%.200s'\n",
				env.debuginfod[i]);
			return -EINVAL;
		}
		env.debuginfod_ports[i] = (uint16_t)port;
		https = https || strncmp(env.debuginfod[i], "https:", 6) == 0;
	}
	if (env.debuginfod_ca && !https) {
		fprintf(stderr, "sonde-symbolizer: --debuginfod-ca needs an https:// debuginfod URL\n");
		return -EINVAL;
	}
	return 0;
}

/* The debuginfod servers, before any thread exists and before the
 * sandbox: their names resolved, the CA file read. The fetched files are
 * kept in a directory next to the SQLite cache (inside the Landlock
 * rules). Servers from $DEBUGINFOD_URLS whose names do not resolve are
 * left out, so the ports are taken again from those kept. */
static int debuginfod_configure(const char *cache_dir)
{
	char dir[PATH_MAX + 16];
	struct debuginfo_fetch_opts o = {
		.urls = env.debuginfod,
		.n_urls = env.n_debuginfod,
		.lenient = env.debuginfod_env != NULL,
		.cache_dir = dir,
		.ca_file = env.debuginfod_ca,
		.timeout_s = env.debuginfod_timeout_s,
		.max_size = env.debuginfod_max_size,
		.verbose = env.verbose,
	};
	int r;

	if (!env.n_debuginfod)
		return 0;
	snprintf(dir, sizeof(dir), "%s/debuginfod", cache_dir);
	r = debuginfo_fetch_configure(&o);
	if (r < 0) {
		log_error_errno(r, "cannot configure the debuginfod client");
		return r;
	}
	env.n_debuginfod = debuginfo_fetch_ports(env.debuginfod_ports, DEBUGINFO_FETCH_MAX_URLS);
	if (env.n_debuginfod)
		log_info("debuginfod: %zu server%s, %u s per request, files up to %llu bytes, cached in %s",
			 env.n_debuginfod, env.n_debuginfod > 1 ? "s" : "", env.debuginfod_timeout_s,
			 (unsigned long long)env.debuginfod_max_size, dir);
	else
		log_warn("debuginfod: no server left, fetching is off");
	return 0;
}

/* Resolves the OTLP host once, before the sandbox (which allows no DNS:
 * no files outside its rules, no UDP). The first address wins. */
static int otlp_resolve(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	char ip[INET6_ADDRSTRLEN];
	const void *addr;
	int r;

	r = getaddrinfo(env.otlp_host, NULL, &hints, &res);
	if (r != 0 || !res) {
		log_error("cannot resolve the --otlp-endpoint host '%s': %s", env.otlp_host,
			  gai_strerror(r));
		return -EHOSTUNREACH;
	}
	if (res->ai_family == AF_INET6)
		addr = &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
	else
		addr = &((struct sockaddr_in *)res->ai_addr)->sin_addr;
	if (!inet_ntop(res->ai_family, addr, ip, sizeof(ip))) {
		freeaddrinfo(res);
		return -EINVAL;
	}
	snprintf(env.otlp_target, sizeof(env.otlp_target),
		 res->ai_family == AF_INET6 ? "tcp:[%s]:%u" : "tcp:%s:%u", ip, env.otlp_port);
	freeaddrinfo(res);
	return 0;
}

static int parse_args(int argc, char **argv)
{
	enum { OPT_LISTEN = 256, OPT_CACHE, OPT_PROFILES, OPT_DEBUG_DIR, OPT_USER, OPT_RETENTION, OPT_VERBOSE,
	       OPT_HELP, OPT_SENSOR_UID, OPT_CLIENT_GROUP, OPT_TLS_CERT, OPT_TLS_KEY, OPT_TLS_CA,
	       OPT_SENSOR_NAME, OPT_ADMIN_GROUP, OPT_ADMIN_NAME, OPT_INSECURE, OPT_RATE_INGEST, OPT_RATE_SYMBOLS, OPT_MAX_MEMORY,
	       OPT_MAX_FILES, OPT_REQUIRE_SANDBOX, OPT_ALLOW_UNSANDBOXED, OPT_SANDBOX_LOG, OPT_PRINT_POLICY, OPT_SELFTEST,
	       OPT_OTLP_ENDPOINT, OPT_OTLP_INTERVAL, OPT_OTLP_INSECURE, OPT_OTLP_CA, OPT_OTLP_CERT,
	       OPT_OTLP_KEY, OPT_OTLP_SERVER_NAME, OPT_OTLP_PROFILES_LAYOUT, OPT_INTERPRETERS, OPT_DEBUGINFOD,
	       OPT_DEBUGINFOD_TIMEOUT, OPT_DEBUGINFOD_MAX_SIZE, OPT_DEBUGINFOD_CA };
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, OPT_LISTEN },
		{ "cache", required_argument, NULL, OPT_CACHE },
		{ "profiles", required_argument, NULL, OPT_PROFILES },
		{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
		{ "user", required_argument, NULL, OPT_USER },
		{ "retention-minutes", required_argument, NULL, OPT_RETENTION },
		{ "interpreters", required_argument, NULL, OPT_INTERPRETERS },
		{ "debuginfod", required_argument, NULL, OPT_DEBUGINFOD },
		{ "debuginfod-timeout", required_argument, NULL, OPT_DEBUGINFOD_TIMEOUT },
		{ "debuginfod-max-size", required_argument, NULL, OPT_DEBUGINFOD_MAX_SIZE },
		{ "debuginfod-ca", required_argument, NULL, OPT_DEBUGINFOD_CA },
		{ "verbose", no_argument, NULL, OPT_VERBOSE },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "sensor-uid", required_argument, NULL, OPT_SENSOR_UID },
		{ "client-group", required_argument, NULL, OPT_CLIENT_GROUP },
		{ "admin-group", required_argument, NULL, OPT_ADMIN_GROUP },
		{ "tls-admin-name", required_argument, NULL, OPT_ADMIN_NAME },
		{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
		{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
		{ "tls-client-ca", required_argument, NULL, OPT_TLS_CA },
		{ "tls-sensor-name", required_argument, NULL, OPT_SENSOR_NAME },
		{ "insecure", no_argument, NULL, OPT_INSECURE },
		{ "rate-ingest", required_argument, NULL, OPT_RATE_INGEST },
		{ "rate-symbols", required_argument, NULL, OPT_RATE_SYMBOLS },
		{ "max-memory", required_argument, NULL, OPT_MAX_MEMORY },
		{ "max-open-files", required_argument, NULL, OPT_MAX_FILES },
		/* The old opt-in, now the default: accepted, does nothing. */
		{ "require-sandbox", no_argument, NULL, OPT_REQUIRE_SANDBOX },
		{ "allow-unsandboxed", no_argument, NULL, OPT_ALLOW_UNSANDBOXED },
		{ "sandbox-log", no_argument, NULL, OPT_SANDBOX_LOG },
		{ "print-policy", no_argument, NULL, OPT_PRINT_POLICY },
		{ "otlp-endpoint", required_argument, NULL, OPT_OTLP_ENDPOINT },
		{ "otlp-interval", required_argument, NULL, OPT_OTLP_INTERVAL },
		{ "otlp-insecure", no_argument, NULL, OPT_OTLP_INSECURE },
		{ "otlp-ca", required_argument, NULL, OPT_OTLP_CA },
		{ "otlp-cert", required_argument, NULL, OPT_OTLP_CERT },
		{ "otlp-key", required_argument, NULL, OPT_OTLP_KEY },
		{ "otlp-server-name", required_argument, NULL, OPT_OTLP_SERVER_NAME },
		{ "otlp-profiles-layout", required_argument, NULL, OPT_OTLP_PROFILES_LAYOUT },
		/* Hidden, for tests: apply the sandbox, try to escape, exit. */
		{ "sandbox-selftest", optional_argument, NULL, OPT_SELFTEST },
		{ 0 },
	};
	uint32_t v;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_LISTEN:
			if (env.n_listen == MAX_LISTEN) {
				fprintf(stderr, "sonde-symbolizer: at most %d --listen\n", MAX_LISTEN);
				return -EINVAL;
			}
			if (strncmp(optarg, "unix:/", 6) != 0 && strncmp(optarg, "tcp:", 4) != 0) {
				fprintf(stderr, "sonde-symbolizer: --listen wants unix:/ABS/PATH or tcp:HOST:PORT, not '%s'\n",
					optarg);
				return -EINVAL;
			}
			env.listen[env.n_listen++] = optarg;
			break;
		case OPT_CACHE:
			if (!*optarg) {
				fprintf(stderr, "sonde-symbolizer: --cache wants a path\n");
				return -EINVAL;
			}
			env.cache = optarg;
			break;
		case OPT_PROFILES:
			if (!*optarg) {
				fprintf(stderr, "sonde-symbolizer: --profiles wants a path\n");
				return -EINVAL;
			}
			env.profiles = optarg;
			break;
		case OPT_DEBUG_DIR:
			if (env.n_debug_dirs == MAX_DEBUG_DIRS) {
				fprintf(stderr, "sonde-symbolizer: at most %d --debug-dir\n",
					MAX_DEBUG_DIRS);
				return -EINVAL;
			}
			env.debug_dirs[env.n_debug_dirs++] = optarg;
			break;
		case OPT_USER:
			env.user = optarg;
			break;
		case OPT_RETENTION:
			if (parse_u32(optarg, 10, &v) < 0 || v == 0 || v > 60 * 24 * 366) {
				fprintf(stderr, "sonde-symbolizer: bad --retention-minutes '%s'\n", optarg);
				return -EINVAL;
			}
			env.retention_minutes = v;
			break;
		case OPT_INTERPRETERS:
			env.interpreters = optarg;
			break;
		case OPT_VERBOSE:
			env.verbose = true;
			break;
		case OPT_SENSOR_UID:
			if (env.n_sensor_uids == MAX_IDS || parse_u32(optarg, 10, &v) < 0 || v == UINT32_MAX) {
				fprintf(stderr, "sonde-symbolizer: bad --sensor-uid '%s'\n", optarg);
				return -EINVAL;
			}
			env.sensor_uids[env.n_sensor_uids++] = v;
			break;
		case OPT_CLIENT_GROUP: {
			struct group *gr = getgrnam(optarg);

			if (env.n_client_groups == MAX_IDS || !gr) {
				fprintf(stderr, "sonde-symbolizer: unknown --client-group '%s'\n", optarg);
				return -EINVAL;
			}
			env.client_groups[env.n_client_groups] = optarg;
			env.client_gids[env.n_client_groups++] = gr->gr_gid;
			break;
		}
		case OPT_ADMIN_GROUP: {
			struct group *gr = getgrnam(optarg);

			if (env.n_admin_groups == MAX_IDS || !gr) {
				fprintf(stderr, "sonde-symbolizer: unknown --admin-group '%s'\n", optarg);
				return -EINVAL;
			}
			env.admin_groups[env.n_admin_groups] = optarg;
			env.admin_gids[env.n_admin_groups++] = gr->gr_gid;
			break;
		}
		case OPT_ADMIN_NAME:
			if (env.n_admin_names == MAX_IDS || !*optarg) {
				fprintf(stderr, "sonde-symbolizer: bad --tls-admin-name '%s'\n", optarg);
				return -EINVAL;
			}
			env.admin_names[env.n_admin_names++] = optarg;
			break;
		case OPT_TLS_CERT:
			env.tls_cert = optarg;
			break;
		case OPT_TLS_KEY:
			env.tls_key = optarg;
			break;
		case OPT_TLS_CA:
			env.tls_client_ca = optarg;
			break;
		case OPT_SENSOR_NAME:
			if (env.n_sensor_names == MAX_IDS || !*optarg) {
				fprintf(stderr, "sonde-symbolizer: bad --tls-sensor-name '%s'\n", optarg);
				return -EINVAL;
			}
			env.sensor_names[env.n_sensor_names++] = optarg;
			break;
		case OPT_INSECURE:
			env.insecure = true;
			break;
		case OPT_RATE_INGEST:
		case OPT_RATE_SYMBOLS:
			if (parse_u32(optarg, 10, &v) < 0) {
				fprintf(stderr, "sonde-symbolizer: bad rate '%s'\n", optarg);
				return -EINVAL;
			}
			*(c == OPT_RATE_INGEST ? &env.rate_ingest : &env.rate_symbols) = v;
			break;
		case OPT_MAX_MEMORY:
			if (parse_size(optarg, &env.max_memory) < 0) {
				fprintf(stderr, "sonde-symbolizer: bad --max-memory '%s'\n", optarg);
				return -EINVAL;
			}
			break;
		case OPT_MAX_FILES:
			if (parse_u32(optarg, 10, &v) < 0 || (v != 0 && v < 64)) {
				fprintf(stderr, "sonde-symbolizer: bad --max-open-files '%s' (at least 64)\n",
					optarg);
				return -EINVAL;
			}
			env.max_open_files = v;
			break;
		case OPT_REQUIRE_SANDBOX:
			break;
		case OPT_ALLOW_UNSANDBOXED:
			env.allow_unsandboxed = true;
			break;
		case OPT_SANDBOX_LOG:
			env.sandbox_log = true;
			break;
		case OPT_PRINT_POLICY:
			env.print_policy = true;
			break;
		case OPT_SELFTEST:
			env.selftest = true;
			env.selftest_file = optarg;
			break;
		case OPT_OTLP_ENDPOINT:
			env.otlp_endpoint = optarg;
			break;
		case OPT_DEBUGINFOD:
			if (env.n_debuginfod == DEBUGINFO_FETCH_MAX_URLS) {
				fprintf(stderr, "sonde-symbolizer: at most %d --debuginfod\n",
					DEBUGINFO_FETCH_MAX_URLS);
				return -EINVAL;
			}
			env.debuginfod[env.n_debuginfod++] = optarg;
			break;
		case OPT_DEBUGINFOD_CA:
			env.debuginfod_ca = optarg;
			break;
		case OPT_DEBUGINFOD_TIMEOUT:
			if (parse_u32(optarg, 10, &v) < 0 || v == 0 || v > 300) {
				fprintf(stderr, "sonde-symbolizer: bad --debuginfod-timeout '%s' (1..300 seconds)\n",
					optarg);
				return -EINVAL;
			}
			env.debuginfod_timeout_s = v;
			break;
		case OPT_DEBUGINFOD_MAX_SIZE:
			if (parse_size(optarg, &env.debuginfod_max_size) < 0 ||
			    env.debuginfod_max_size == 0) {
				fprintf(stderr, "sonde-symbolizer: bad --debuginfod-max-size '%s'\n", optarg);
				return -EINVAL;
			}
			break;
		case OPT_OTLP_INTERVAL:
			if (parse_u32(optarg, 10, &v) < 0 || v == 0 || v > 3600) {
				fprintf(stderr, "sonde-symbolizer: bad --otlp-interval '%s' (1..3600 seconds)\n",
					optarg);
				return -EINVAL;
			}
			env.otlp_interval_s = v;
			break;
		case OPT_OTLP_INSECURE:
			env.otlp_insecure = true;
			break;
		case OPT_OTLP_CA:
			env.otlp_ca = optarg;
			break;
		case OPT_OTLP_CERT:
			env.otlp_cert = optarg;
			break;
		case OPT_OTLP_KEY:
			env.otlp_key = optarg;
			break;
		case OPT_OTLP_SERVER_NAME:
			env.otlp_server_name = optarg;
			break;
		case OPT_OTLP_PROFILES_LAYOUT:
			if (otlp_layout_parse(optarg, &env.otlp_layout) < 0) {
				fprintf(stderr, "sonde-symbolizer: bad --otlp-profiles-layout '%s' (1.10 or 1.5.0)\n",
					optarg);
				return -EINVAL;
			}
			env.otlp_layout_arg = optarg;
			break;
		case OPT_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sonde-symbolizer: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (env.n_listen == 0)
		env.listen[env.n_listen++] = "unix:/run/sonde/symbolizer.sock";
	if ((env.tls_cert || env.tls_key || env.tls_client_ca) &&
	    !(env.tls_cert && env.tls_key && env.tls_client_ca)) {
		fprintf(stderr, "sonde-symbolizer: --tls-cert, --tls-key and --tls-client-ca go together\n");
		return -EINVAL;
	}
	for (size_t i = 0; i < env.n_listen; i++) {
		if (strncmp(env.listen[i], "tcp:", 4) == 0 && !env.tls_cert && !env.insecure) {
			fprintf(stderr, "sonde-symbolizer: --listen %s needs mutual TLS (--tls-cert, --tls-key, --tls-client-ca) or, for testing only, --insecure\n",
				env.listen[i]);
			return -EINVAL;
		}
	}
	if (otlp_check_args() < 0 || debuginfod_check_args() < 0)
		return -EINVAL;
	if (interp_kinds_parse(env.interpreters, &env.interp_kinds) < 0) {
		fprintf(stderr, "sonde-symbolizer: bad --interpreters '%s' (kind names, all or none)\n",
			env.interpreters);
		return -EINVAL;
	}
	if (env.n_sensor_names == 0)
		env.sensor_names[env.n_sensor_names++] = "sonde-sensor";
	if (env.n_debug_dirs == 0)
		env.debug_dirs[env.n_debug_dirs++] = "/usr/lib/debug";
	env.debug_dirs[env.n_debug_dirs] = NULL;
	return 0;
}

static void dir_of(const char *path, char *dir, size_t size);

/* Creates the parent directories of path (the last one with mode), and
 * says in *ret_created whether the last one is new. */
static int make_parent(const char *path, mode_t mode, char *ret_dir, size_t size,
		       bool *ret_created)
{
	mode_t old_mask;
	char *slash;
	int r;

	*ret_created = false;
	if (snprintf(ret_dir, size, "%s", path) >= (int)size)
		return -ENAMETOOLONG;
	slash = strrchr(ret_dir, '/');
	if (!slash)
		return snprintf(ret_dir, size, ".") < 0 ? -EINVAL : 0;
	if (slash == ret_dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	/* The modes as given: main() set umask 077 for the files. */
	old_mask = umask(0);
	for (char *p = ret_dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(ret_dir, 0755) < 0 && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdir(ret_dir, mode) == 0)
		*ret_created = true;
	else if (errno != EEXIST)
		goto fail;
	umask(old_mask);
	return 0;
fail:
	r = -errno;
	umask(old_mask);
	return r;
}

/* As root: makes a database path usable by the service user. Only a
 * directory created here (mode 0700), or one the user owns already, is
 * handed over (owner): a --cache in /tmp must not give /tmp away. A
 * directory that is a symlink, or that belongs to neither root nor the
 * user, is refused. A root-owned one that exists already is left as it is
 * and must be writable by the user (cache_open says so if it is not).
 * Works with CAP_CHOWN alone (the systemd unit's bounding set): the
 * directory is opened O_PATH, which needs no permission on it; the files
 * in it are the user's business (db_private(), after the drop). */
static int prepare_db_for_user(const char *db, const struct passwd *pw)
{
	char dir[PATH_MAX];
	struct stat st;
	bool created;
	int dfd = -1, r;

	r = make_parent(db, 0700, dir, sizeof(dir), &created);
	if (r < 0) {
		log_error_errno(r, "cannot create the directory for %s", db);
		return r;
	}
	dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &st) < 0) {
		r = -errno;
		log_error_errno(r, "cannot open the directory %s%s", dir,
				r == -ELOOP || r == -ENOTDIR ? " (a symlink is refused)" : "");
		goto cleanup;
	}
	if (st.st_uid != 0 && st.st_uid != pw->pw_uid) {
		r = -EPERM;
		log_error("%s belongs to uid %u, neither root nor %s; refusing it as a database directory",
			  dir, (unsigned)st.st_uid, pw->pw_name);
		goto cleanup;
	}
	r = 0;
	if ((st.st_uid == 0 && !created) || (st.st_uid == pw->pw_uid && st.st_gid == pw->pw_gid))
		goto cleanup;
	/* Through the fd: the path could have been swapped meanwhile. */
	if (fchownat(dfd, "", pw->pw_uid, pw->pw_gid, AT_EMPTY_PATH) < 0) {
		r = -errno;
		log_error_errno(r, "cannot hand %s to %s", dir, pw->pw_name);
	}
cleanup:
	if (dfd >= 0)
		close(dfd);
	return r;
}

/* One database file (name in dfd), if it exists: made 0600. Opened
 * without following a symlink and only if a regular file of ours. */
static int db_file_private(int dfd, const char *dir, const char *name)
{
	struct stat st;
	int fd, r = 0;

	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		r = -errno;
		log_error_errno(r, "cannot open %s/%s%s", dir, name,
				r == -ELOOP ? " (a symlink: refusing)" : "");
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
	} else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		r = -EPERM;
		log_error("%s/%s is not a regular file of uid %u; refusing", dir, name,
			  (unsigned)geteuid());
	} else if ((st.st_mode & 0077) && fchmod(fd, 0600) < 0) {
		r = -errno;
		log_error_errno(r, "cannot make %s/%s private", dir, name);
	}
	close(fd);
	return r;
}

/* As the service user, before opening db: the store is private to it
 * (docs/security.md). Its directory, if the user's, becomes 0700, and
 * the database and its journals in it 0600 (a store an older symbolizer
 * left 0750/0644). A directory of root's (/tmp, or one an admin made) is
 * left as it is; the files the user creates there are 0600 by the umask
 * (main()). */
static int db_private(const char *db)
{
	static const char *const suffixes[] = { "", "-wal", "-shm", "-journal" };
	char dir[PATH_MAX], name[NAME_MAX + 16];
	const char *base = strrchr(db, '/');
	struct stat st;
	int dfd = -1, r;

	base = base ? base + 1 : db;
	if (!*base || strlen(base) > NAME_MAX) {
		log_error("%s does not name a database file", db);
		return -EINVAL;
	}
	dir_of(db, dir, sizeof(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 && errno == ENOENT)
		return 0; /* not ours to create: cache_open says what is missing */
	if (dfd < 0 || fstat(dfd, &st) < 0) {
		r = -errno;
		log_error_errno(r, "cannot open the directory %s%s", dir,
				r == -ELOOP || r == -ENOTDIR ? " (a symlink is refused)" : "");
		goto cleanup;
	}
	r = 0;
	if (st.st_uid != geteuid())
		goto cleanup;
	if ((st.st_mode & 0077) && fchmod(dfd, 0700) < 0) {
		r = -errno;
		log_error_errno(r, "cannot make %s private", dir);
		goto cleanup;
	}
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(name, sizeof(name), "%s%s", base, suffixes[i]);
		r = db_file_private(dfd, dir, name);
		if (r < 0)
			goto cleanup;
	}
cleanup:
	if (dfd >= 0)
		close(dfd);
	return r;
}

/* Opens a cache database (or a profile store, which has the same schema),
 * saying what to do about each failure. */
static int open_database(const char *path, struct cache **ret)
{
	int r = cache_open(path, NULL, ret);

	if (r == -EPROTONOSUPPORT)
		log_error("%s has a newer schema than this symbolizer (version %d); use a newer symbolizer or another --cache",
			  path, CACHE_SCHEMA_VERSION);
	else if (r == -EEXIST)
		log_error("%s is a database but not a sonde cache; refusing to touch it", path);
	else if (r == -EACCES || r == -EPERM || r == -EROFS)
		log_error_errno(r, "cannot open %s: its directory must be writable by the user the symbolizer runs as",
				path);
	else if (r < 0)
		log_error_errno(r, "cannot open %s", path);
	return r;
}

/* As root: gives the socket at path (bound here, mode 0660) the user's
 * group. Never follows a symlink: something else in its place (the
 * directory's owner may swap it) is refused, and the change applies to
 * the inode that was checked, through its O_PATH descriptor. */
static int socket_to_group(const char *path, const struct passwd *pw)
{
	struct stat st;
	int fd, r = 0;

	/* O_PATH|O_NOFOLLOW: a symlink swapped in is looked at, not followed;
	 * the group then goes to exactly the inode checked. */
	fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		log_error_errno(r, "cannot look at socket %s", path);
		goto out;
	}
	if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
		log_error("%s is no longer the socket bound there; refusing", path);
		r = -EEXIST;
		goto out;
	}
	if (fchownat(fd, "", 0, pw->pw_gid, AT_EMPTY_PATH) < 0) {
		r = -errno;
		log_error_errno(r, "cannot hand socket %s to group %u", path, (unsigned)pw->pw_gid);
	}
out:
	if (fd >= 0)
		close(fd);
	return r;
}

/* As root: hands the databases and the unix sockets to the service user. */
static int prepare_for_user(const struct passwd *pw)
{
	char fd_path[PATH_MAX];
	int r;

	r = prepare_db_for_user(env.cache, pw);
	if (r < 0)
		return r;
	if (env.profiles) {
		r = prepare_db_for_user(env.profiles, pw);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < env.n_listen; i++) {
		const char *path;

		if (strncmp(env.listen[i], "unix:", 5) != 0)
			continue;
		path = env.listen[i] + 5;
		/* rpc_server_listen gave it mode 0660: root and the group of
		 * the user (add sensors and clients to it) may connect. Owner
		 * root, not the user: connect() needs write permission on the
		 * file, and a sensor that dropped to its kept capabilities has
		 * no CAP_DAC_OVERRIDE (docs/security.md). The symbolizer never
		 * needs the file again: it accepts on the fd it holds. */
		r = socket_to_group(path, pw);
		if (r < 0)
			return r;
		/* Its descriptor socket (fd_upload.h): the same people. */
		if (fd_upload_socket_path(path, fd_path, sizeof(fd_path))) {
			r = socket_to_group(fd_path, pw);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int drop_privileges(const struct passwd *pw)
{
	int r;

	if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
	    setuid(pw->pw_uid) < 0) {
		r = -errno;
		log_error_errno(r, "cannot become user %s", pw->pw_name);
		return r;
	}
	if (setuid(0) == 0 || geteuid() == 0 || getuid() == 0) {
		log_error("still able to become root after dropping to %s, refusing to run",
			  pw->pw_name);
		return -EPERM;
	}
	return 0;
}

/* "123", "64K", "512M", "8G" -> bytes. */
static int parse_size(const char *s, uint64_t *ret)
{
	char num[32];
	size_t len = strlen(s);
	uint64_t mul = 1, v;

	if (len == 0 || len >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, len + 1);
	switch (num[len - 1]) {
	case 'K': case 'k': mul = 1ull << 10; break;
	case 'M': case 'm': mul = 1ull << 20; break;
	case 'G': case 'g': mul = 1ull << 30; break;
	default: break;
	}
	if (mul != 1)
		num[len - 1] = '\0';
	if (parse_u64(num, 10, &v) < 0 || v > UINT64_MAX / mul)
		return -EINVAL;
	*ret = v * mul;
	return 0;
}

static bool peer_in_groups(const struct rpc_peer *peer, const gid_t *gids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (peer->gid == gids[i])
			return true;
		for (size_t k = 0; k < peer->n_groups; k++)
			if (peer->groups[k] == gids[i])
				return true;
	}
	return false;
}

/* The sensor leaves uid 0 for its user sonde-sensor after set-up
 * (sensor/privileges.h): that uid streams sensor data like root. */
static void sensor_user_add(void)
{
	const struct passwd *pw = getpwnam("sonde-sensor");

	if (!pw || pw->pw_uid == 0 || env.n_sensor_uids == MAX_IDS)
		return;
	for (size_t i = 0; i < env.n_sensor_uids; i++)
		if (env.sensor_uids[i] == pw->pw_uid)
			return;
	env.sensor_uids[env.n_sensor_uids++] = (uint32_t)pw->pw_uid;
}

static bool peer_named(const struct rpc_peer *peer, const char *const *names, size_t n)
{
	for (size_t i = 0; i < peer->n_names; i++)
		for (size_t k = 0; k < n; k++)
			if (strcmp(peer->names[i], names[k]) == 0)
				return true;
	return false;
}

/* The peer policy rpc_admission.c asks before each call to a sensor or
 * client method, and once per call for RPC_ROLE_ADMIN: whether the peer sees
 * every user's data or only its own (core/access.c applies the scope). */
static bool authorize_peer(const struct rpc_peer *peer, enum rpc_role role, void *ctx)
{
	(void)ctx;
	switch (peer->transport) {
	case RPC_TRANSPORT_UNIX:
		if (peer->uid == 0)
			return true;
		switch (role) {
		case RPC_ROLE_SENSOR:
			for (size_t i = 0; i < env.n_sensor_uids; i++)
				if (peer->uid == env.sensor_uids[i])
					return true;
			return false;
		case RPC_ROLE_ADMIN:
			return peer->uid == env.service_uid ||
			       peer_in_groups(peer, env.admin_gids, env.n_admin_groups);
		case RPC_ROLE_CLIENT:
		case RPC_ROLE_ANY:
			return peer->uid == env.service_uid ||
			       peer_in_groups(peer, env.client_gids, env.n_client_groups) ||
			       peer_in_groups(peer, env.admin_gids, env.n_admin_groups);
		}
		return false;
	case RPC_TRANSPORT_TLS:
		/* Any certificate the client CA signed may read; sensors and
		 * admins are named. */
		if (role == RPC_ROLE_SENSOR)
			return peer_named(peer, env.sensor_names, env.n_sensor_names);
		if (role == RPC_ROLE_ADMIN)
			return peer_named(peer, env.admin_names, env.n_admin_names);
		return true;
	case RPC_TRANSPORT_INSECURE:
		return env.insecure;
	}
	return false;
}

/* The service's methods with the role each needs. A method this file does
 * not know is a startup error: nobody adds an unguarded method by accident. */
static int methods_with_roles(const struct rpc_method *in, size_t n, struct rpc_method **ret)
{
	struct rpc_method *out = calloc(n ? n : 1, sizeof(*out));

	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		out[i] = in[i];
		if (strncmp(in[i].path, "/sonde.v1.Ingest/", 17) == 0)
			out[i].role = RPC_ROLE_SENSOR;
		else if (strncmp(in[i].path, "/sonde.v1.Symbols/", 18) == 0)
			out[i].role = RPC_ROLE_CLIENT;
		else {
			log_error("method %s has no role in main.c; refusing to serve it", in[i].path);
			free(out);
			return -EINVAL;
		}
	}
	*ret = out;
	return 0;
}

/* Directory part of a database path (the Landlock read-write rule). */
static void dir_of(const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(dir, size, ".");
	else if (slash == path)
		snprintf(dir, size, "/");
	else
		snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

static void sandbox_policy_fill(struct sandbox_policy *p, char *cache_dir, char *profiles_dir,
				size_t size)
{
	memset(p, 0, sizeof(*p));
	dir_of(env.cache, cache_dir, size);
	p->rw_dirs[p->n_rw++] = cache_dir;
	if (env.profiles) {
		dir_of(env.profiles, profiles_dir, size);
		if (strcmp(profiles_dir, cache_dir) != 0)
			p->rw_dirs[p->n_rw++] = profiles_dir;
	}
	for (size_t i = 0; i < env.n_debug_dirs && p->n_ro < SANDBOX_MAX_DIRS; i++)
		p->ro_dirs[p->n_ro++] = env.debug_dirs[i];
	p->rw_make_dirs = env.n_debuginfod > 0;
	if (env.otlp_endpoint)
		p->connect_ports[p->n_connect_ports++] = env.otlp_port;
	for (size_t i = 0; i < env.n_debuginfod; i++) {
		bool seen = false;

		for (size_t k = 0; k < p->n_connect_ports; k++)
			seen = seen || p->connect_ports[k] == env.debuginfod_ports[i];
		if (!seen && p->n_connect_ports < SANDBOX_MAX_PORTS)
			p->connect_ports[p->n_connect_ports++] = env.debuginfod_ports[i];
	}
	p->max_memory = env.max_memory;
	p->max_open_files = env.max_open_files;
	p->allow_unsandboxed = env.allow_unsandboxed;
#ifdef NDEBUG
	p->seccomp_mode = SANDBOX_SECCOMP_KILL;
#else
	p->seccomp_mode = SANDBOX_SECCOMP_TRAP;
#endif
	if (env.sandbox_log)
		p->seccomp_mode = SANDBOX_SECCOMP_LOG;
	if (env.selftest)
		p->seccomp_mode = SANDBOX_SECCOMP_SELFTEST;
}

int main(int argc, char **argv)
{
	struct rpc_server *server = NULL;
	struct service *svc = NULL;
	struct cache *cache = NULL, *profiles = NULL;
	struct passwd *pw = NULL;
	struct service_opts sopts;
	struct sandbox_policy policy;
	struct rpc_method *methods = NULL;
	char cache_dir[PATH_MAX], profiles_dir[PATH_MAX];
	struct rpc_tls tls, otlp_tls;
	struct otlp_exporter_opts otlp_opts;
	size_t n_methods;
	sigset_t sigs;
	bool root = geteuid() == 0, rpc_up = false;
	char dir[PATH_MAX];
	int r, sig = 0;

	/* Everything the symbolizer creates (cache, profile store, their
	 * journals, directories) is the service user's alone, whatever umask
	 * it was started with; the sockets set their own mode at bind(). */
	umask(077);
	malloc_tuning_apply(argv);
	if (parse_args(argc, argv) < 0)
		return 2;
	sensor_user_add();
	tls = (struct rpc_tls){ .ca = env.tls_client_ca, .cert = env.tls_cert, .key = env.tls_key };
	log_init("sonde-symbolizer", env.verbose ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO);
	if (!malloc_tuning_active())
		log_info("malloc tunables not applied (GLIBC_TUNABLES set by the caller, "
			 "or no re-exec)");
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	/* Before any thread exists, so every thread inherits the mask. */
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (root) {
		errno = 0;
		pw = getpwnam(env.user);
		if (!pw) {
			log_error("user '%s' does not exist; create it with: useradd --system --no-create-home --shell /usr/sbin/nologin %s",
				  env.user, env.user);
			return 1;
		}
		if (pw->pw_uid == 0) {
			log_error("--user %s is root; a symbolizer never runs as root", env.user);
			return 1;
		}
	}
	env.service_uid = pw ? pw->pw_uid : getuid();
	sandbox_policy_fill(&policy, cache_dir, profiles_dir, sizeof(cache_dir));
	if (env.print_policy) {
		printf("user: %s (uid %u)\n", pw ? pw->pw_name : "(current)", (unsigned)env.service_uid);
		sandbox_print_policy(stdout, &policy);
		printf("peers: sensors = root%s", env.n_sensor_uids ? ", uid" : "");
		for (size_t i = 0; i < env.n_sensor_uids; i++)
			printf(" %u", (unsigned)env.sensor_uids[i]);
		for (size_t i = 0; i < env.n_sensor_names; i++)
			printf("%s%s", i ? ", " : "; TLS names ", env.sensor_names[i]);
		printf("; clients = root, uid %u", (unsigned)env.service_uid);
		for (size_t i = 0; i < env.n_client_groups; i++)
			printf(", group %s", env.client_groups[i]);
		for (size_t i = 0; i < env.n_admin_groups; i++)
			printf(", group %s", env.admin_groups[i]);
		printf(", any TLS certificate from the client CA\n");
		printf("admins (every user's data): root, uid %u", (unsigned)env.service_uid);
		for (size_t i = 0; i < env.n_admin_groups; i++)
			printf(", group %s", env.admin_groups[i]);
		for (size_t i = 0; i < env.n_admin_names; i++)
			printf("%s%s", i ? ", " : "; TLS names ", env.admin_names[i]);
		printf("; other clients see their own uid's processes only\n");
		printf("rates: %u ingest messages/s per stream, %u Symbols calls/s per connection\n",
		       env.rate_ingest, env.rate_symbols);
		for (size_t i = 0; i < env.n_debuginfod; i++)
			printf("debuginfod: %s (TCP port %u%s%s)\n", env.debuginfod[i],
			       (unsigned)env.debuginfod_ports[i],
			       strncmp(env.debuginfod[i], "https:", 6) != 0 ? "" : ", TLS with the CAs of ",
			       strncmp(env.debuginfod[i], "https:", 6) != 0 ? ""
			       : env.debuginfod_ca ? env.debuginfod_ca : DEBUGINFO_FETCH_SYSTEM_CA);
		if (env.otlp_endpoint)
			printf("otlp: export to %s every %u s, %s, profiles in the v%s layout\n",
			       env.otlp_endpoint, env.otlp_interval_s, env.otlp_ca ? "TLS" : "plaintext",
			       otlp_layout_name(env.otlp_layout));
		return 0;
	}

	if (env.otlp_endpoint) {
		r = otlp_resolve();
		if (r < 0)
			return 1;
	}

	r = debuginfod_configure(cache_dir);
	if (r < 0)
		return 1;
	sandbox_policy_fill(&policy, cache_dir, profiles_dir, sizeof(cache_dir));

	rpc_global_init();
	rpc_up = true;
	/* rpc_server_new wants its handlers' context now; the service gets
	 * its cache (opened as the user, below) before the server starts. */
	sopts.debug_dirs = env.debug_dirs;
	sopts.retention_minutes = env.retention_minutes;
	sopts.interp_kinds = env.interp_kinds;
	sopts.otlp = NULL;
	if (env.otlp_endpoint) {
		struct in6_addr a6;
		bool literal = inet_pton(AF_INET, env.otlp_host, &a6) == 1 ||
			       inet_pton(AF_INET6, env.otlp_host, &a6) == 1;

		/* A name is checked against the certificate, not the address
		 * it resolved to. */
		otlp_tls = (struct rpc_tls){ .ca = env.otlp_ca, .cert = env.otlp_cert,
					     .key = env.otlp_key,
					     .server_name = env.otlp_server_name ? env.otlp_server_name
						     : literal ? NULL : env.otlp_host };
		otlp_opts = (struct otlp_exporter_opts){
			.target = env.otlp_target,
			.tls = env.otlp_ca ? &otlp_tls : NULL,
			.interval_ms = env.otlp_interval_s * 1000u,
			.layout = env.otlp_layout,
		};
		sopts.otlp = &otlp_opts;
		log_info("OTLP profiles export to %s (%s, %s) every %u s, v%s layout", env.otlp_endpoint,
			 env.otlp_target + 4, env.otlp_ca ? "TLS" : "plaintext", env.otlp_interval_s,
			 otlp_layout_name(env.otlp_layout));
	}
	svc = service_new(&sopts);
	if (!svc) {
		log_error("cannot create the service");
		r = -ENOMEM;
		goto cleanup;
	}
	{
		const struct rpc_method *base = service_methods(&n_methods);

		r = methods_with_roles(base, n_methods, &methods);
		if (r < 0)
			goto cleanup;
	}
	server = rpc_server_new(methods, n_methods, svc,
				&(struct rpc_server_opts){
					.max_message_bytes = SERVICE_MAX_MESSAGE,
					.tls = env.tls_cert ? &tls : NULL,
					.authorize = authorize_peer,
					.stream_msgs_per_s = env.rate_ingest,
					.stream_burst = 2 * env.rate_ingest,
					.unary_calls_per_s = env.rate_symbols,
					.unary_burst = 2 * env.rate_symbols,
				});
	r = -EIO;
	if (!server)
		goto cleanup;
	for (size_t i = 0; i < env.n_listen; i++) {
		if (strncmp(env.listen[i], "unix:", 5) == 0) {
			const char *path = env.listen[i] + 5;

			if (root) {
				bool created;

				r = make_parent(path, 0755, dir, sizeof(dir), &created);
				if (r < 0) {
					log_error_errno(r, "cannot create the directory of %s", path);
					goto cleanup;
				}
			}
			if (unlink(path) < 0 && errno != ENOENT) {
				r = -errno;
				log_error_errno(r, "cannot remove stale socket %s", path);
				goto cleanup;
			}
		}
		r = rpc_server_listen(server, env.listen[i], NULL);
		if (r < 0) {
			log_error_errno(r, "cannot listen on %s", env.listen[i]);
			goto cleanup;
		}
		if (strncmp(env.listen[i], "unix:", 5) == 0) {
			r = fd_upload_listen(env.listen[i] + 5);
			if (r < 0) {
				log_error_errno(r, "cannot listen on the descriptor socket of %s",
						env.listen[i]);
				goto cleanup;
			}
		}
	}
	if (root) {
		r = prepare_for_user(pw);
		if (r < 0)
			goto cleanup;
		/* Needs CAP_SETPCAP, which the uid drop takes away. */
		r = sandbox_drop_bounding();
		if (r < 0) {
			log_error_errno(r, "cannot empty the capability bounding set");
			goto cleanup;
		}
		r = drop_privileges(pw);
		if (r < 0)
			goto cleanup;
		log_info("running as %s (uid %u)", pw->pw_name, (unsigned)pw->pw_uid);
	} else if (getuid() == 0 || geteuid() == 0) {
		log_error("running with uid 0 but not as root; refusing");
		r = -EPERM;
		goto cleanup;
	}

	r = db_private(env.cache);
	if (r == 0 && env.profiles)
		r = db_private(env.profiles);
	if (r < 0)
		goto cleanup;
	r = open_database(env.cache, &cache);
	if (r < 0)
		goto cleanup;
	if (env.profiles) {
		r = open_database(env.profiles, &profiles);
		if (r < 0)
			goto cleanup;
	}
	r = service_attach(svc, server, cache, profiles ? profiles : cache);
	if (r < 0) {
		log_error_errno(r, "cannot set up the service");
		goto cleanup;
	}
	/* SQLite's temporary files (big sorts) go where Landlock lets it
	 * write, not to /tmp. */
	setenv("SQLITE_TMPDIR", cache_dir, 1);
	/* As the user (its cache directory is the user's), before the
	 * sandbox (curl's handle). */
	r = debuginfo_fetch_init();
	if (r < 0) {
		log_error_errno(r, "cannot set up the debuginfod client");
		goto cleanup;
	}
	r = sandbox_apply(&policy);
	if (r < 0) {
		log_error_errno(r, "cannot apply the sandbox, refusing to run");
		goto cleanup;
	}
	if (env.selftest) {
		int allowed = sandbox_selftest(stdout, env.selftest_file);

		printf("selftest: %d allowed\n", allowed);
		fflush(stdout);
		/* Skip the cleanup: the filter would trap its syscalls. */
		_exit(allowed ? 1 : 0);
	}
	r = rpc_server_start(server);
	if (r < 0) {
		log_error_errno(r, "cannot start the server");
		goto cleanup;
	}
	r = fd_upload_start(authorize_peer);
	if (r < 0) {
		log_error_errno(r, "cannot start the descriptor socket");
		goto cleanup;
	}
	log_info("sonde-symbolizer %s listening on %s%s, cache %s", SONDE_VERSION, env.listen[0],
		 env.n_listen > 1 ? " and more" : "", env.cache);
	if (sigwait(&sigs, &sig) != 0)
		sig = SIGTERM;
	log_info("got %s, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
	rpc_server_stop(server, 2000);
	r = 0;
cleanup:
	fd_upload_stop();
	rpc_server_free(server);
	free(methods);
	service_free(svc);
	cache_close(profiles);
	cache_close(cache);
	if (rpc_up)
		rpc_global_shutdown();
	return r < 0 ? 1 : 0;
}
