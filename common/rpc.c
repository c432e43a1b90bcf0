/* rpc.c - what every side of sonde's rpc shares (see rpc.h): a Unix
 * peer's credentials, TLS files, and the process-wide set-up of gRPC core
 * 1.51 (its log lines, Abseil's deadlock detection, grpc_init).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/support/log.h>

#include "log.h"
#include "rpc.h"

#define MAX_PEM_BYTES (1u << 20)

int rpc_pem_read(const char *path, char **ret)
{
	char *buf = NULL;
	size_t len = 0;
	ssize_t n;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	buf = malloc(MAX_PEM_BYTES + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (len < MAX_PEM_BYTES && (n = read(fd, buf + len, MAX_PEM_BYTES - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		len += (size_t)n;
	}
	close(fd);
	if (err == 0 && (len == 0 || len == MAX_PEM_BYTES))
		err = -EBADMSG;
	if (err < 0) {
		free(buf);
		return err;
	}
	buf[len] = '\0';
	*ret = buf;
	return 0;
}

int rpc_unix_peer(int fd, struct rpc_peer *ret)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[RPC_PEER_MAX_GROUPS];
	socklen_t glen = sizeof(groups);

	/* The kernel records the credentials at connect(): the peer cannot
	 * change them afterwards (a set-uid helper it execs included). */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	if (len != sizeof(cred))
		return -EINVAL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) < 0) {
		/* ERANGE: more groups than we keep; the primary gid still counts. */
		glen = 0;
	}
	*ret = (struct rpc_peer){ .transport = RPC_TRANSPORT_UNIX, .uid = cred.uid, .gid = cred.gid,
				  .pid = cred.pid, .n_groups = glen / sizeof(gid_t) };
	for (size_t i = 0; i < ret->n_groups; i++)
		ret->groups[i] = groups[i];
	return 0;
}


/* gRPC's log lines go through log.h. gRPC's errors are warnings to us:
 * the call results carry what matters, and gRPC logs some errors the
 * application recovers from (reconnects). */
static void grpc_log_bridge(gpr_log_func_args *args)
{
	enum log_level level =
		args->severity == GPR_LOG_SEVERITY_ERROR ? LOG_LEVEL_WARN : LOG_LEVEL_DEBUG;
	const char *file = args->file ? strrchr(args->file, '/') : NULL;

	log_at(level, 0, "grpc %s:%d: %s", file ? file + 1 : (args->file ? args->file : "?"),
	       args->line, args->message ? args->message : "");
}

/* Debian's Abseil is built without NDEBUG, so every absl::Mutex lock and
 * unlock inside gRPC runs Abseil's deadlock detection (a lock-order graph:
 * GraphCycles::GetId was ~6% of the sensor's CPU). It is switched off
 * through Abseil's own API, absl::SetMutexDeadlockDetectionMode(kIgnore),
 * looked up at run time: an Abseil without this symbol keeps its default. */
static void absl_deadlock_detection_off(void)
{
	static const char *const names[] = {
		"_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
		"_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void (*set_mode)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, names[i]);

		if (set_mode) {
			set_mode(0); /* OnDeadlockCycle::kIgnore */
			return;
		}
	}
}

void rpc_global_init(void)
{
	gpr_set_log_function(grpc_log_bridge);
	absl_deadlock_detection_off();
	grpc_init();
	/* After grpc_init(), which reads GRPC_VERBOSITY; an explicit setting
	 * in the environment wins. */
	if (!getenv("GRPC_VERBOSITY"))
		gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
}

void rpc_global_shutdown(void)
{
	grpc_shutdown();
}
