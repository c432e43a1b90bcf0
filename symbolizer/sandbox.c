/* sandbox.c - the symbolizer's sandbox (see sandbox.h and docs/security.md).
 *
 * The symbolizer parses ELF, DWARF and interpreter bytes that a hostile
 * process may have crafted, and HTTP/2 from any peer that can connect. If
 * one of those parsers is exploited, the attacker gets a process that:
 *   - runs as the service user, with every capability set empty (also
 *     inheritable, ambient and bounding) and no_new_privs, so no exec of a
 *     set-uid program or file capability can give anything back;
 *   - can open files only under its cache directory (read-write) and its
 *     debug directories (read-only): Landlock, checked on the resolved
 *     path, so a symlink in a debug directory cannot lead out of it; no
 *     TCP bind or connect and no abstract Unix sockets or signals to
 *     processes outside (Landlock ABI 4 and 6); with --otlp-endpoint or
 *     --debuginfod, TCP connect to those ports (the OTLP receiver, the
 *     debuginfod servers) and nothing else;
 *   - can make only the system calls gRPC's threads, SQLite and the
 *     analysis need: no socket(), connect() (but TCP ones with
 *     --otlp-endpoint or --debuginfod), bind(), execve(), ptrace(),
 *     fork (clone without CLONE_THREAD), mount, bpf or perf.
 * Order: capabilities and no_new_privs first (Landlock and seccomp need
 * no_new_privs), rlimits, Landlock (which needs open() to build its rules),
 * seccomp last (it would forbid the Landlock calls).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/prctl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <ucontext.h>
#include <unistd.h>
#include <netinet/in.h>

#include "allthreads.h"
#include "log.h"
#include "sandbox.h"

/* Landlock constants newer than Debian 12's <linux/landlock.h> (6.1). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#define SB_LL_NET_BIND_TCP (1ULL << 0)      /* ABI 4 */
#define SB_LL_NET_CONNECT_TCP (1ULL << 1)   /* ABI 4 */
#define SB_LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define SB_LL_SCOPE_SIGNAL (1ULL << 1)      /* ABI 6 */
#define SB_LL_RULE_NET_PORT 2               /* ABI 4 */

struct sb_net_port_attr {
	uint64_t allowed_access;
	uint64_t port;
};

/* The ABI 6 layout of struct landlock_ruleset_attr; older kernels get a
 * prefix of it (their size). */
struct sb_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

#define LL_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define LL_WRITE                                                                        \
	(LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_FILE |                 \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_TRUNCATE)
#define LL_DIRS (LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR)

/* ---- seccomp allow-list ---- */

enum sb_action {
	SB_ALLOW,
	SB_ERRNO, /* probe-style: answer with an errno, do not kill */
};

struct sb_rule {
	const char *name;
	enum sb_action action;
	int err;
	const char *why;
};

/* Every system call the symbolizer makes after the sandbox is on, found
 * with strace -f under the integration tests; keep "why" short. */
static const struct sb_rule sb_rules[] = {
	/* I/O on fds it already has or Landlock lets it open */
	{ "read", SB_ALLOW, 0, "sockets, eventfds, files" },
	{ "write", SB_ALLOW, 0, "sockets, eventfds, log" },
	{ "readv", SB_ALLOW, 0, "gRPC" },
	{ "writev", SB_ALLOW, 0, "gRPC, log" },
	{ "pread64", SB_ALLOW, 0, "SQLite, debug files" },
	{ "pwrite64", SB_ALLOW, 0, "SQLite" },
	{ "lseek", SB_ALLOW, 0, "SQLite, stdio" },
	{ "openat", SB_ALLOW, 0, "SQLite journals, debug files (Landlock decides)" },
	{ "close", SB_ALLOW, 0, "" },
	{ "fstat", SB_ALLOW, 0, "" },
	{ "newfstatat", SB_ALLOW, 0, "SQLite, debug file lookup" },
	{ "statx", SB_ALLOW, 0, "" },
	{ "faccessat", SB_ALLOW, 0, "SQLite" },
	{ "faccessat2", SB_ALLOW, 0, "SQLite" },
	{ "readlink", SB_ALLOW, 0, "SQLite path resolution" },
	{ "readlinkat", SB_ALLOW, 0, "SQLite path resolution" },
	{ "getcwd", SB_ALLOW, 0, "SQLite path resolution" },
	{ "fcntl", SB_ALLOW, 0, "SQLite locks, O_NONBLOCK" },
	{ "flock", SB_ALLOW, 0, "SQLite" },
	{ "fsync", SB_ALLOW, 0, "SQLite" },
	{ "fdatasync", SB_ALLOW, 0, "SQLite" },
	{ "ftruncate", SB_ALLOW, 0, "SQLite WAL" },
	{ "fallocate", SB_ALLOW, 0, "SQLite" },
	{ "unlink", SB_ALLOW, 0, "SQLite journals (Landlock decides)" },
	{ "unlinkat", SB_ALLOW, 0, "SQLite journals (Landlock decides)" },
	{ "getdents64", SB_ALLOW, 0, "" },
	/* memory */
	{ "mmap", SB_ALLOW, 0, "malloc, SQLite shm, thread stacks" },
	{ "munmap", SB_ALLOW, 0, "" },
	{ "mprotect", SB_ALLOW, 0, "malloc arenas, stack guards" },
	{ "madvise", SB_ALLOW, 0, "malloc, gRPC" },
	{ "mremap", SB_ALLOW, 0, "realloc" },
	{ "brk", SB_ALLOW, 0, "malloc" },
	/* threads (clone is allowed only with CLONE_THREAD, below) */
	{ "futex", SB_ALLOW, 0, "" },
	{ "set_robust_list", SB_ALLOW, 0, "new threads" },
	{ "rseq", SB_ALLOW, 0, "new threads" },
	{ "sched_yield", SB_ALLOW, 0, "gRPC" },
	{ "sched_getaffinity", SB_ALLOW, 0, "gRPC core count" },
	{ "sched_getparam", SB_ALLOW, 0, "pthread_create (gRPC threads at shutdown)" },
	{ "sched_getscheduler", SB_ALLOW, 0, "pthread_create" },
	{ "gettid", SB_ALLOW, 0, "" },
	{ "getpid", SB_ALLOW, 0, "" },
	{ "exit", SB_ALLOW, 0, "" },
	{ "exit_group", SB_ALLOW, 0, "" },
	{ "rt_sigaction", SB_ALLOW, 0, "" },
	{ "rt_sigprocmask", SB_ALLOW, 0, "" },
	{ "rt_sigreturn", SB_ALLOW, 0, "" },
	{ "rt_sigtimedwait", SB_ALLOW, 0, "sigwait in main" },
	{ "sigaltstack", SB_ALLOW, 0, "" },
	{ "restart_syscall", SB_ALLOW, 0, "" },
	{ "tgkill", SB_ALLOW, 0, "abort(), raise() (Landlock scopes signals)" },
	/* time */
	{ "clock_gettime", SB_ALLOW, 0, "" },
	{ "clock_getres", SB_ALLOW, 0, "" },
	{ "clock_nanosleep", SB_ALLOW, 0, "" },
	{ "nanosleep", SB_ALLOW, 0, "" },
	{ "gettimeofday", SB_ALLOW, 0, "" },
	{ "getrandom", SB_ALLOW, 0, "hash seeds, TLS" },
	/* polling */
	{ "epoll_create1", SB_ALLOW, 0, "gRPC poller" },
	{ "epoll_ctl", SB_ALLOW, 0, "gRPC poller" },
	{ "epoll_wait", SB_ALLOW, 0, "gRPC poller" },
	{ "epoll_pwait", SB_ALLOW, 0, "gRPC poller" },
	{ "epoll_pwait2", SB_ALLOW, 0, "gRPC poller" },
	{ "poll", SB_ALLOW, 0, "rpc accept thread" },
	{ "ppoll", SB_ALLOW, 0, "" },
	{ "eventfd2", SB_ALLOW, 0, "gRPC wakeup fds" },
	{ "pipe2", SB_ALLOW, 0, "gRPC wakeup fds (fallback)" },
	/* sockets it already has (accept: the listeners are bound) */
	{ "accept", SB_ALLOW, 0, "" },
	{ "accept4", SB_ALLOW, 0, "Unix and TCP listeners" },
	{ "recvmsg", SB_ALLOW, 0, "" },
	{ "sendmsg", SB_ALLOW, 0, "" },
	{ "recvfrom", SB_ALLOW, 0, "" },
	{ "sendto", SB_ALLOW, 0, "" },
	{ "shutdown", SB_ALLOW, 0, "" },
	{ "getsockopt", SB_ALLOW, 0, "SO_PEERCRED, SO_ERROR" },
	{ "setsockopt", SB_ALLOW, 0, "TCP_NODELAY, buffers" },
	{ "getsockname", SB_ALLOW, 0, "" },
	{ "getpeername", SB_ALLOW, 0, "" },
	/* identity and limits (reads only) */
	{ "getuid", SB_ALLOW, 0, "" },
	{ "geteuid", SB_ALLOW, 0, "" },
	{ "getgid", SB_ALLOW, 0, "" },
	{ "getegid", SB_ALLOW, 0, "" },
	{ "uname", SB_ALLOW, 0, "" },
	{ "sysinfo", SB_ALLOW, 0, "glibc, gRPC" },
	{ "getrusage", SB_ALLOW, 0, "" },
	{ "getrlimit", SB_ALLOW, 0, "" },
	{ "umask", SB_ALLOW, 0, "SQLite" },
	{ "fchmod", SB_ALLOW, 0, "SQLite journals get the db's mode (Landlock: own dirs)" },
	{ "fchown", SB_ALLOW, 0, "SQLite as root only: EPERM here" },
	{ "membarrier", SB_ALLOW, 0, "" },
	/* probe-style: answer, do not kill */
	{ "clone3", SB_ERRNO, ENOSYS, "its flags are in memory: glibc falls back to clone" },
	{ "socket", SB_ERRNO, EPERM, "no new sockets" },
	{ "socketpair", SB_ERRNO, EPERM, "" },
	{ "connect", SB_ERRNO, EPERM, "no outgoing connections" },
	{ "bind", SB_ERRNO, EPERM, "listeners are bound before" },
	{ "listen", SB_ERRNO, EPERM, "" },
	{ "prlimit64", SB_ERRNO, EPERM, "limits are fixed" },
	{ "setrlimit", SB_ERRNO, EPERM, "limits are fixed" },
	{ "sched_setaffinity", SB_ERRNO, EPERM, "" },
	{ "setpriority", SB_ERRNO, EPERM, "" },
	{ "io_uring_setup", SB_ERRNO, ENOSYS, "" },
	{ "userfaultfd", SB_ERRNO, ENOSYS, "" },
	{ "perf_event_open", SB_ERRNO, EACCES, "" },
	{ "mkdir", SB_ERRNO, EACCES, "" },
	{ "mkdirat", SB_ERRNO, EACCES, "" },
	{ "open", SB_ERRNO, ENOSYS, "glibc uses openat" },
	{ "stat", SB_ERRNO, ENOSYS, "glibc uses newfstatat" },
	{ "lstat", SB_ERRNO, ENOSYS, "glibc uses newfstatat" },
	{ "access", SB_ERRNO, ENOSYS, "glibc uses faccessat" },
};

/* Process-wide state for the SIGSYS handler. */
static volatile sig_atomic_t sb_trap_answer; /* 1: answer EPERM (selftest) */
static volatile sig_atomic_t sb_trapped;     /* last trapped syscall + 1 */

static void sb_write_num(char *p, long v)
{
	char tmp[24];
	int n = 0;

	if (v < 0) {
		*p++ = '-';
		v = -v;
	}
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v && n < (int)sizeof(tmp));
	while (n)
		*p++ = tmp[--n];
	*p = '\0';
}

static void sb_on_sigsys(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	char msg[96] = "sonde-symbolizer: seccomp: blocked system call ";

	(void)sig;
	sb_trapped = si->si_syscall + 1;
	if (sb_trap_answer) {
		uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
		return;
	}
	/* Debug builds: name the call (its number: ausyscall/scmp_sys_resolver
	 * turn it into a name) and stop, as the release build would. */
	sb_write_num(msg + strlen(msg), si->si_syscall);
	strcat(msg, " (add it to sandbox.c if it is needed)\n");
	if (write(STDERR_FILENO, msg, strlen(msg)) < 0) {
		/* nothing left to do */
	}
	_exit(159);
}

static uint32_t sb_default_action(enum sandbox_seccomp_mode mode)
{
	switch (mode) {
	case SANDBOX_SECCOMP_TRAP:
	case SANDBOX_SECCOMP_SELFTEST:
		return SCMP_ACT_TRAP;
	case SANDBOX_SECCOMP_LOG:
		return SCMP_ACT_LOG;
	default:
		return SCMP_ACT_KILL_PROCESS;
	}
}

static int sb_add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n_args,
		  const struct scmp_arg_cmp *args)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return 0; /* not on this arch */
	return seccomp_rule_add_array(ctx, action, nr, n_args, args);
}

/* --debuginfod: what debuginfo_fetch.c does in its cache (a directory per
 * build ID, files renamed into place, old entries removed by age), inside
 * the directories Landlock lets it write. */
static const struct sb_rule sb_rules_dirs[] = {
	{ "mkdir", SB_ALLOW, 0, "debuginfod cache (Landlock decides)" },
	{ "mkdirat", SB_ALLOW, 0, "debuginfod cache (Landlock decides)" },
	{ "rmdir", SB_ALLOW, 0, "debuginfod cache cleaning (Landlock decides)" },
	{ "rename", SB_ALLOW, 0, "debuginfod cache (Landlock decides)" },
	{ "renameat", SB_ALLOW, 0, "debuginfod cache (Landlock decides)" },
	{ "renameat2", SB_ALLOW, 0, "debuginfod cache (Landlock decides)" },
	{ "utimensat", SB_ALLOW, 0, "debuginfod cache: a fetched file marked as used" },
};

/* socket() and connect() are replaced by the rules of sb_seccomp_tcp()
 * when the policy allows an outgoing TCP connection; mkdir by
 * sb_rules_dirs when it may make directories. */
static bool sb_rule_skipped(const struct sb_rule *rule, bool connects, bool dirs)
{
	return (connects &&
		(strcmp(rule->name, "socket") == 0 || strcmp(rule->name, "connect") == 0)) ||
	       (dirs && (strcmp(rule->name, "mkdir") == 0 || strcmp(rule->name, "mkdirat") == 0));
}

/* --otlp-endpoint: TCP sockets of either family and connect() (Landlock
 * limits it to the one port); other socket() calls are answered EPERM
 * when they are Unix or datagram sockets, anything else is fatal. */
static int sb_seccomp_tcp(scmp_filter_ctx ctx)
{
	static const int fams[] = { AF_INET, AF_INET6 };
	int r = 0;

	for (size_t i = 0; r == 0 && i < 2; i++)
		r = sb_add(ctx, SCMP_ACT_ALLOW, "socket", 2,
			   (struct scmp_arg_cmp[]){ SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fams[i]),
						    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM) });
	if (r == 0)
		r = sb_add(ctx, SCMP_ACT_ERRNO(EPERM), "socket", 1,
			   (struct scmp_arg_cmp[]){ SCMP_A0(SCMP_CMP_EQ, AF_UNIX) });
	if (r == 0)
		r = sb_add(ctx, SCMP_ACT_ERRNO(EPERM), "socket", 1,
			   (struct scmp_arg_cmp[]){ SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_DGRAM) });
	if (r == 0)
		r = sb_add(ctx, SCMP_ACT_ALLOW, "connect", 0, NULL);
	return r;
}

static int sb_seccomp(enum sandbox_seccomp_mode mode, bool connects, bool dirs)
{
	scmp_filter_ctx ctx = NULL;
	struct sigaction sa;
	int r;

	if (mode == SANDBOX_SECCOMP_TRAP || mode == SANDBOX_SECCOMP_SELFTEST) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = sb_on_sigsys;
		sa.sa_flags = SA_SIGINFO;
		sb_trap_answer = mode == SANDBOX_SECCOMP_SELFTEST;
		if (sigaction(SIGSYS, &sa, NULL) < 0)
			return -errno;
	}
	/* seccomp_init() also makes the filter check the arch: a call made
	 * through another ABI (i386 int 0x80, x32) gets the default action. */
	ctx = seccomp_init(sb_default_action(mode));
	if (!ctx)
		return -ENOMEM;
	r = seccomp_arch_native() == SCMP_ARCH_X86_64 ? 0 : -EOPNOTSUPP;
	if (r < 0)
		goto out;
	/* Kill the whole process, never one thread: a half-dead gRPC would
	 * keep sockets open with nobody answering. */
	if (mode == SANDBOX_SECCOMP_KILL)
		seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < sizeof(sb_rules) / sizeof(sb_rules[0]); i++) {
		const struct sb_rule *rule = &sb_rules[i];

		if (sb_rule_skipped(rule, connects, dirs))
			continue;
		r = sb_add(ctx, rule->action == SB_ALLOW ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(rule->err),
			   rule->name, 0, NULL);
		if (r < 0 && r != -EEXIST) {
			log_debug("seccomp rule for %s: %d", rule->name, r);
			goto out;
		}
	}
	if (connects) {
		r = sb_seccomp_tcp(ctx);
		if (r < 0)
			goto out;
	}
	for (size_t i = 0; dirs && i < sizeof(sb_rules_dirs) / sizeof(sb_rules_dirs[0]); i++) {
		r = sb_add(ctx, SCMP_ACT_ALLOW, sb_rules_dirs[i].name, 0, NULL);
		if (r < 0 && r != -EEXIST)
			goto out;
	}
	/* clone: threads only (CLONE_THREAD set); a fork gets the default. */
	r = sb_add(ctx, SCMP_ACT_ALLOW, "clone", 1,
		   (struct scmp_arg_cmp[]){ SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD) });
	if (r < 0)
		goto out;
	/* ioctl: only the socket queries gRPC makes; TCGETS (isatty() in
	 * stdio) is answered "not a terminal"; anything else is fatal. */
	r = sb_add(ctx, SCMP_ACT_ALLOW, "ioctl", 1,
		   (struct scmp_arg_cmp[]){ SCMP_A1(SCMP_CMP_EQ, FIONREAD) });
	if (r == 0)
		r = sb_add(ctx, SCMP_ACT_ALLOW, "ioctl", 1,
			   (struct scmp_arg_cmp[]){ SCMP_A1(SCMP_CMP_EQ, FIONBIO) });
	if (r == 0)
		r = sb_add(ctx, SCMP_ACT_ERRNO(ENOTTY), "ioctl", 1,
			   (struct scmp_arg_cmp[]){ SCMP_A1(SCMP_CMP_EQ, TCGETS) });
	/* prctl: thread names only (pthread_setname_np, gRPC). */
	if (r == 0)
		r = sb_add(ctx, SCMP_ACT_ALLOW, "prctl", 1,
			   (struct scmp_arg_cmp[]){ SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME) });
	if (r == 0)
		r = sb_add(ctx, SCMP_ACT_ALLOW, "prctl", 1,
			   (struct scmp_arg_cmp[]){ SCMP_A0(SCMP_CMP_EQ, PR_GET_NAME) });
	if (r < 0)
		goto out;
	r = seccomp_load(ctx);
out:
	seccomp_release(ctx);
	return r;
}

/* ---- capabilities and no_new_privs, per thread (allthreads_run) ---- */

static int sb_last_cap(void)
{
	int cap = CAP_LAST_CAP;

	/* A newer kernel may know more capabilities than our headers. */
	while (prctl(PR_CAPBSET_READ, cap + 1, 0, 0, 0) >= 0)
		cap++;
	return cap;
}

static int sb_thread_drop_bounding(void *arg)
{
	int last = *(int *)arg;

	for (int cap = 0; cap <= last; cap++)
		if (syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	return 0;
}

int sandbox_drop_bounding(void)
{
	int last = sb_last_cap();

	return allthreads_run(sb_thread_drop_bounding, &last);
}

struct sb_thread_job {
	int ruleset_fd; /* -1: no Landlock */
};

/* Runs on every thread, in a signal handler: raw syscalls only. */
static int sb_thread_restrict(void *arg)
{
	const struct sb_thread_job *job = arg;
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return -errno;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (job->ruleset_fd >= 0 && syscall(SYS_landlock_restrict_self, job->ruleset_fd, 0) < 0)
		return -errno;
	return 0;
}

/* ---- Landlock ---- */

static int sb_landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return abi < 0 ? -errno : (int)abi;
}

static uint64_t sb_fs_handled(int abi)
{
	uint64_t fs = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */

	if (abi >= 2)
		fs |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return fs;
}

static int sb_add_path(int ruleset, const char *dir, uint64_t access, uint64_t handled)
{
	struct landlock_path_beneath_attr pb = { 0 };
	int fd, r = 0;

	fd = open(dir, O_PATH | O_CLOEXEC | O_DIRECTORY);
	if (fd < 0) {
		r = -errno;
		/* A debug directory that does not exist grants nothing. */
		if (r == -ENOENT)
			log_debug("sandbox: %s does not exist, no rule", dir);
		return r == -ENOENT ? 0 : r;
	}
	pb.allowed_access = access & handled;
	pb.parent_fd = fd;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* Builds the rule set. Returns its fd, -EOPNOTSUPP if Landlock is not
 * there, or another negative errno. */
static int sb_landlock_ruleset(const struct sandbox_policy *p, int abi)
{
	struct sb_ruleset_attr attr = { 0 };
	size_t size = sizeof(attr.handled_access_fs);
	int fd, r;

	attr.handled_access_fs = sb_fs_handled(abi);
	if (abi >= 4) {
		/* No TCP bind at all (the listeners are bound already), and
		 * connect only to the OTLP port, if any (rule below). */
		attr.handled_access_net = SB_LL_NET_BIND_TCP | SB_LL_NET_CONNECT_TCP;
		size = offsetof(struct sb_ruleset_attr, scoped);
	}
	if (abi >= 6) {
		attr.scoped = SB_LL_SCOPE_ABSTRACT_UNIX | SB_LL_SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (fd < 0)
		return errno == ENOSYS || errno == EOPNOTSUPP ? -EOPNOTSUPP : -errno;
	for (size_t i = 0; abi >= 4 && i < p->n_connect_ports; i++) {
		struct sb_net_port_attr np = { .allowed_access = SB_LL_NET_CONNECT_TCP,
					       .port = p->connect_ports[i] };

		if (syscall(SYS_landlock_add_rule, fd, SB_LL_RULE_NET_PORT, &np, 0) < 0) {
			r = -errno;
			log_error_errno(r, "sandbox: cannot add the TCP connect rule for port %u",
					(unsigned)p->connect_ports[i]);
			close(fd);
			return r;
		}
	}
	for (size_t i = 0; i < p->n_rw; i++) {
		r = sb_add_path(fd, p->rw_dirs[i],
				LL_READ | LL_WRITE | (p->rw_make_dirs ? LL_DIRS : 0),
				attr.handled_access_fs);
		if (r < 0) {
			log_error_errno(r, "sandbox: cannot add rule for %s", p->rw_dirs[i]);
			close(fd);
			return r;
		}
	}
	for (size_t i = 0; i < p->n_ro; i++) {
		r = sb_add_path(fd, p->ro_dirs[i], LL_READ, attr.handled_access_fs);
		if (r < 0) {
			log_error_errno(r, "sandbox: cannot add rule for %s", p->ro_dirs[i]);
			close(fd);
			return r;
		}
	}
	return fd;
}

/* ---- rlimits ---- */

static int sb_rlimits(const struct sandbox_policy *p)
{
	struct rlimit rl;

	/* No core dumps: they would hold other processes' file bytes. */
	rl.rlim_cur = rl.rlim_max = 0;
	if (setrlimit(RLIMIT_CORE, &rl) < 0)
		return -errno;
	if (p->max_memory) {
		/* RLIMIT_DATA, not RLIMIT_AS: gRPC threads reserve large
		 * address ranges (stacks, malloc arenas) they never touch. */
		rl.rlim_cur = rl.rlim_max = p->max_memory;
		if (setrlimit(RLIMIT_DATA, &rl) < 0)
			return -errno;
	}
	if (p->max_open_files && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		/* Only lower: the service user cannot raise the hard limit. */
		if (p->max_open_files < rl.rlim_max)
			rl.rlim_max = p->max_open_files;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			return -errno;
	}
	return 0;
}

int sandbox_apply(const struct sandbox_policy *p)
{
	struct sb_thread_job job = { .ruleset_fd = -1 };
	int abi, r;

	if (!p)
		return -EINVAL;
	if (geteuid() == 0 || getuid() == 0) {
		log_error("sandbox: still uid 0; the sandbox is for the service user");
		return -EPERM;
	}
	r = sb_rlimits(p);
	if (r < 0) {
		log_error_errno(r, "sandbox: cannot set resource limits");
		return r;
	}
	abi = sb_landlock_abi();
	if (abi < 0) {
		if (!p->allow_unsandboxed) {
			log_error_errno(abi, "sandbox: Landlock is not available (kernel without CONFIG_SECURITY_LANDLOCK, or lsm= without landlock); refusing to run without it (--allow-unsandboxed runs with the uid and seccomp only)");
			return -EOPNOTSUPP;
		}
		log_warn_errno(abi, "sandbox: Landlock is not available; --allow-unsandboxed: files are guarded by the uid and seccomp only");
	} else {
		if (abi < 4 && p->n_connect_ports)
			log_warn("sandbox: Landlock ABI %d has no network rules; TCP connect (for OTLP or debuginfod) is allowed to any port",
				 abi);
		else if (abi < 4)
			log_warn("sandbox: Landlock ABI %d has no network rules; TCP connect is blocked by seccomp only",
				 abi);
		job.ruleset_fd = sb_landlock_ruleset(p, abi);
		if (job.ruleset_fd < 0) {
			r = job.ruleset_fd;
			log_error_errno(r, "sandbox: cannot build the Landlock rule set");
			return r;
		}
	}
	r = allthreads_run(sb_thread_restrict, &job);
	if (job.ruleset_fd >= 0)
		close(job.ruleset_fd);
	if (r < 0) {
		log_error_errno(r, "sandbox: cannot restrict every thread");
		return r;
	}
	r = sb_seccomp(p->seccomp_mode, p->n_connect_ports > 0, p->rw_make_dirs);
	if (r < 0) {
		log_error_errno(r, "sandbox: cannot load the seccomp filter");
		return r;
	}
	log_info("sandbox on: no capabilities, no_new_privs, Landlock %s, seccomp %s",
		 abi > 0 ? "on" : "off",
		 p->seccomp_mode == SANDBOX_SECCOMP_KILL ? "allow-list (kill)"
		 : p->seccomp_mode == SANDBOX_SECCOMP_LOG ? "allow-list (log only)"
							 : "allow-list (trap)");
	return 0;
}

/* ---- --print-policy ---- */

void sandbox_print_policy(FILE *f, const struct sandbox_policy *p)
{
	int abi = sb_landlock_abi();

	fprintf(f, "uid: %u (gid %u)\n", (unsigned)getuid(), (unsigned)getgid());
	fprintf(f, "capabilities: none (effective, permitted, inheritable, ambient; bounding set emptied as root)\n");
	fprintf(f, "no_new_privs: 1\n");
	if (abi < 0)
		fprintf(f, "landlock: unavailable (%s)%s\n", strerror(-abi),
			p->allow_unsandboxed ? ", --allow-unsandboxed: degraded" : ", would refuse to start");
	else
	{
		char net[128] = "";

		if (abi >= 4 && p->n_connect_ports) {
			int n = snprintf(net, sizeof(net), ", TCP bind: none, TCP connect: port");

			for (size_t i = 0; i < p->n_connect_ports && n > 0 && (size_t)n < sizeof(net); i++)
				n += snprintf(net + n, sizeof(net) - (size_t)n, "%s %u", i ? "," : "",
					      (unsigned)p->connect_ports[i]);
			if (n > 0 && (size_t)n < sizeof(net))
				snprintf(net + n, sizeof(net) - (size_t)n, " only");
		}
		else if (abi >= 4)
			snprintf(net, sizeof(net), ", TCP bind/connect: none");
		fprintf(f, "landlock: ABI %d%s%s\n", abi, net,
			abi >= 6 ? ", scoped: abstract Unix sockets, signals" : "");
	}
	for (size_t i = 0; i < p->n_rw; i++)
		fprintf(f, "  read-write%s: %s\n", p->rw_make_dirs ? " (directories too)" : "",
			p->rw_dirs[i]);
	for (size_t i = 0; i < p->n_ro; i++)
		fprintf(f, "  read-only: %s\n", p->ro_dirs[i]);
	fprintf(f, "seccomp: x86_64 only, default action %s\n",
		p->seccomp_mode == SANDBOX_SECCOMP_KILL ? "kill process"
		: p->seccomp_mode == SANDBOX_SECCOMP_LOG ? "log"
							: "trap (SIGSYS, named, exit)");
	for (size_t i = 0; i < sizeof(sb_rules) / sizeof(sb_rules[0]); i++) {
		const struct sb_rule *r = &sb_rules[i];

		if (sb_rule_skipped(r, p->n_connect_ports > 0, p->rw_make_dirs))
			continue;
		if (r->action == SB_ALLOW)
			fprintf(f, "  allow %s%s%s\n", r->name, *r->why ? "  # " : "", r->why);
		else
			fprintf(f, "  errno %s %s%s%s\n", strerror(r->err), r->name,
				*r->why ? "  # " : "", r->why);
	}
	if (p->n_connect_ports) {
		fprintf(f, "  allow socket AF_INET/AF_INET6 SOCK_STREAM  # OTLP export, debuginfod\n");
		fprintf(f, "  errno %s socket AF_UNIX or SOCK_DGRAM; other socket() calls: default action\n",
			strerror(EPERM));
		fprintf(f, "  allow connect  # Landlock: TCP port%s", p->n_connect_ports > 1 ? "s" : "");
		for (size_t i = 0; i < p->n_connect_ports; i++)
			fprintf(f, "%s %u", i ? "," : "", (unsigned)p->connect_ports[i]);
		fprintf(f, " only%s\n",
			abi >= 4 ? "" : " (not enforced: this kernel's Landlock has no network rules)");
	}
	for (size_t i = 0; p->rw_make_dirs && i < sizeof(sb_rules_dirs) / sizeof(sb_rules_dirs[0]); i++)
		fprintf(f, "  allow %s  # %s\n", sb_rules_dirs[i].name, sb_rules_dirs[i].why);
	fprintf(f, "  allow clone if flags & CLONE_THREAD  # threads, not processes\n");
	fprintf(f, "  allow ioctl FIONREAD, FIONBIO; errno ENOTTY for TCGETS\n");
	fprintf(f, "  allow prctl PR_SET_NAME, PR_GET_NAME\n");
	fprintf(f, "rlimits: core 0");
	if (p->max_memory)
		fprintf(f, ", data %llu bytes", (unsigned long long)p->max_memory);
	if (p->max_open_files)
		fprintf(f, ", nofile %llu", (unsigned long long)p->max_open_files);
	fprintf(f, "\n");
}

/* ---- --sandbox-selftest ---- */

static void sb_report(FILE *f, int *allowed, const char *what, long rc, int err)
{
	bool trapped = sb_trapped != 0;

	if (rc >= 0) {
		fprintf(f, "ALLOWED %s\n", what);
		(*allowed)++;
	} else {
		fprintf(f, "denied %s: %s%s\n", what, strerror(err),
			trapped ? " (seccomp: would kill)" : "");
	}
	fflush(f);
	sb_trapped = 0;
}

int sandbox_selftest(FILE *f, const char *outside_file)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(22),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	int allowed = 0;
	long rc;
	int fd;

	sb_trapped = 0;
	errno = 0;
	rc = ptrace(PTRACE_ATTACH, 1, NULL, NULL);
	sb_report(f, &allowed, "ptrace(PTRACE_ATTACH, 1)", rc, errno);
	rc = fd = open("/proc/1/mem", O_RDONLY | O_CLOEXEC);
	sb_report(f, &allowed, "open /proc/1/mem", rc, errno);
	if (fd >= 0)
		close(fd);
	rc = fd = open("/etc/shadow", O_RDONLY | O_CLOEXEC);
	sb_report(f, &allowed, "open /etc/shadow", rc, errno);
	if (fd >= 0)
		close(fd);
	/* World-readable, so only Landlock stops it. */
	rc = fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	sb_report(f, &allowed, "open /etc/passwd", rc, errno);
	if (fd >= 0)
		close(fd);
	if (outside_file) {
		char what[300];

		snprintf(what, sizeof(what), "open %.250s", outside_file);
		rc = fd = open(outside_file, O_RDONLY | O_CLOEXEC);
		sb_report(f, &allowed, what, rc, errno);
		if (fd >= 0)
			close(fd);
	}
	rc = fd = open("/tmp/sonde-sandbox-selftest", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	sb_report(f, &allowed, "create /tmp/sonde-sandbox-selftest", rc, errno);
	if (fd >= 0) {
		close(fd);
		unlink("/tmp/sonde-sandbox-selftest");
	}
	rc = fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sb_report(f, &allowed, "socket(AF_INET)", rc, errno);
	if (fd >= 0) {
		rc = connect(fd, (struct sockaddr *)&in, sizeof(in));
		sb_report(f, &allowed, "connect 127.0.0.1:22", rc, errno);
		close(fd);
	}
	/* What a name lookup needs (DNS over UDP): never, not even with
	 * --debuginfod servers named by host name (resolved before). */
	rc = fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sb_report(f, &allowed, "socket(AF_INET, SOCK_DGRAM)", rc, errno);
	if (fd >= 0)
		close(fd);
	rc = fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sb_report(f, &allowed, "socket(AF_UNIX)", rc, errno);
	if (fd >= 0)
		close(fd);
	/* connect() on a socket it has (fd 0 is not a socket; a listener
	 * would be): the call itself is refused. */
	strcpy(un.sun_path, "/run/systemd/private");
	rc = connect(0, (struct sockaddr *)&un, sizeof(un));
	sb_report(f, &allowed, "connect(unix:/run/systemd/private)", rc, errno);
	rc = syscall(SYS_execve, "/bin/sh", (char *[]){ "sh", NULL }, (char *[]){ NULL });
	sb_report(f, &allowed, "execve /bin/sh", rc, errno);
	rc = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0); /* fork */
	if (rc == 0)
		_exit(0);
	sb_report(f, &allowed, "fork", rc, errno);
	rc = setuid(0);
	sb_report(f, &allowed, "setuid(0)", rc, errno);
	memset(data, 0, sizeof(data));
	data[0].effective = data[0].permitted = 1u << CAP_SYS_ADMIN;
	rc = syscall(SYS_capset, &hdr, data);
	sb_report(f, &allowed, "capset(CAP_SYS_ADMIN)", rc, errno);
	rc = syscall(SYS_bpf, 0, NULL, 0);
	sb_report(f, &allowed, "bpf()", rc, errno);
	rc = syscall(SYS_kill, 1, 0);
	sb_report(f, &allowed, "kill(1, 0)", rc, errno);
	return allowed;
}
