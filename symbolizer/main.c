/* main.c - sonde-symbolizer: flags, privilege drop, and the rpc server.
 *
 * Order matters: the listening sockets are bound (and the cache directory
 * prepared) as root, then the process becomes --user for good before the
 * server accepts a connection or the cache database is opened, so no
 * sensor byte and no cache byte is ever handled with privileges.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
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
#include "rpc.h"
#include "cache.h"
#include "api/service.h"

#define MAX_LISTEN 16
#define MAX_DEBUG_DIRS 16

static struct env {
	const char *listen[MAX_LISTEN];
	size_t n_listen;
	const char *cache;
	const char *profiles; /* NULL: in the cache database */
	const char *debug_dirs[MAX_DEBUG_DIRS + 1];
	size_t n_debug_dirs;
	const char *user;
	unsigned retention_minutes;
	bool verbose;
} env = {
	.cache = "/var/cache/sonde/cache.db",
	.user = "sonde",
	.retention_minutes = 60,
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
		"                         (default /var/cache/sonde/cache.db)\n"
		"  --profiles PATH        keep profiles in this database instead (e.g. one\n"
		"                         job's private store, as sonde record uses)\n"
		"  --debug-dir DIR        separate debug files (repeatable; default /usr/lib/debug)\n"
		"  --user NAME            user to run as when started as root (default sonde)\n"
		"  --retention-minutes N  keep profiles this long (default 60)\n"
		"  --verbose              debug logging\n"
		"  --help                 this text\n");
}

static int parse_args(int argc, char **argv)
{
	enum { OPT_LISTEN = 256, OPT_CACHE, OPT_PROFILES, OPT_DEBUG_DIR, OPT_USER, OPT_RETENTION, OPT_VERBOSE,
	       OPT_HELP };
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, OPT_LISTEN },
		{ "cache", required_argument, NULL, OPT_CACHE },
		{ "profiles", required_argument, NULL, OPT_PROFILES },
		{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
		{ "user", required_argument, NULL, OPT_USER },
		{ "retention-minutes", required_argument, NULL, OPT_RETENTION },
		{ "verbose", no_argument, NULL, OPT_VERBOSE },
		{ "help", no_argument, NULL, OPT_HELP },
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
		case OPT_VERBOSE:
			env.verbose = true;
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
	if (env.n_debug_dirs == 0)
		env.debug_dirs[env.n_debug_dirs++] = "/usr/lib/debug";
	env.debug_dirs[env.n_debug_dirs] = NULL;
	return 0;
}

/* mkdir -p for the parent directory of path (as root). */
/* Creates the parent directories of path (the last one with mode), and
 * says in *ret_created whether the last one is new. */
static int make_parent(const char *path, mode_t mode, char *ret_dir, size_t size,
		       bool *ret_created)
{
	char *slash;

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
	for (char *p = ret_dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(ret_dir, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(ret_dir, mode) == 0)
		*ret_created = true;
	else if (errno != EEXIST)
		return -errno;
	return 0;
}

/* As root: makes a database path usable by the service user. Only a
 * directory created here, or one the user owns already, is handed over
 * with the database files in it: a --cache in /tmp must not give /tmp
 * away. Any other directory must already be writable by the user
 * (cache_open says so if it is not). */
static int prepare_db_for_user(const char *db, const struct passwd *pw)
{
	static const char *const suffixes[] = { "", "-wal", "-shm" };
	char dir[PATH_MAX], side[PATH_MAX + 8];
	struct stat st;
	bool created;
	int r;

	r = make_parent(db, 0750, dir, sizeof(dir), &created);
	if (r < 0) {
		log_error_errno(r, "cannot create the directory for %s", db);
		return r;
	}
	if (created && chown(dir, pw->pw_uid, pw->pw_gid) < 0) {
		r = -errno;
		log_error_errno(r, "cannot chown %s to %s", dir, pw->pw_name);
		return r;
	}
	if (stat(dir, &st) < 0 || st.st_uid != pw->pw_uid)
		return 0;
	for (size_t i = 0; i < 3; i++) {
		snprintf(side, sizeof(side), "%s%s", db, suffixes[i]);
		if (chown(side, pw->pw_uid, pw->pw_gid) < 0 && errno != ENOENT) {
			r = -errno;
			log_error_errno(r, "cannot chown %s to %s", side, pw->pw_name);
			return r;
		}
	}
	return 0;
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

/* As root: hands the databases and the unix sockets to the service user. */
static int prepare_for_user(const struct passwd *pw)
{
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
		/* rpc_server_listen gave it mode 0660: the group of the user
		 * (add sensors and clients to it) may connect. */
		if (chown(path, pw->pw_uid, pw->pw_gid) < 0 || chmod(path, 0660) < 0) {
			r = -errno;
			log_error_errno(r, "cannot hand socket %s to %s", path, pw->pw_name);
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

int main(int argc, char **argv)
{
	struct rpc_server *server = NULL;
	struct service *svc = NULL;
	struct cache *cache = NULL, *profiles = NULL;
	struct passwd *pw = NULL;
	struct service_opts sopts;
	const struct rpc_method *methods;
	size_t n_methods;
	sigset_t sigs;
	bool root = geteuid() == 0, rpc_up = false;
	char dir[PATH_MAX];
	int r, sig = 0;

	if (parse_args(argc, argv) < 0)
		return 2;
	log_init("sonde-symbolizer", env.verbose ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO);
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

	rpc_global_init();
	rpc_up = true;
	/* rpc_server_new wants its handlers' context now; the service gets
	 * its cache (opened as the user, below) before the server starts. */
	sopts.debug_dirs = env.debug_dirs;
	sopts.retention_minutes = env.retention_minutes;
	svc = service_new(&sopts);
	if (!svc) {
		log_error("cannot create the service");
		r = -ENOMEM;
		goto cleanup;
	}
	methods = service_methods(&n_methods);
	server = rpc_server_new(methods, n_methods, svc,
				&(struct rpc_server_opts){ .max_message_bytes = SERVICE_MAX_MESSAGE });
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
	}
	if (root) {
		r = prepare_for_user(pw);
		if (r < 0)
			goto cleanup;
		r = drop_privileges(pw);
		if (r < 0)
			goto cleanup;
		log_info("running as %s (uid %u)", pw->pw_name, (unsigned)pw->pw_uid);
	} else if (getuid() == 0 || geteuid() == 0) {
		log_error("running with uid 0 but not as root; refusing");
		r = -EPERM;
		goto cleanup;
	}

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
	r = rpc_server_start(server);
	if (r < 0) {
		log_error_errno(r, "cannot start the server");
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
	rpc_server_free(server);
	service_free(svc);
	cache_close(profiles);
	cache_close(cache);
	if (rpc_up)
		rpc_global_shutdown();
	return r < 0 ? 1 : 0;
}
