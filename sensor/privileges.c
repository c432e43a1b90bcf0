/* privileges.c - what the sensor keeps after set-up (see privileges.h).
 *
 * The kept sets were found by running the reduced sensor on kernel 6.18
 * against processes of other users (tests/integration/test_security.py
 * checks CapEff is exactly the set of the mode):
 *
 *   capability              default  --go-probes  why
 *   CAP_SYS_PTRACE          yes      yes          /proc/PID/{maps,exe,environ}
 *                                                 of other users' processes
 *                                                 (ptrace_may_access,
 *                                                 PTRACE_MODE_READ_FSCREDS)
 *   CAP_CHECKPOINT_RESTORE  yes      yes          /proc/PID/map_files/ (the
 *                                                 mapped inode itself, also
 *                                                 deleted or in another mount
 *                                                 namespace): proc_map_files_
 *                                                 get_link() wants it (or
 *                                                 CAP_SYS_ADMIN)
 *   CAP_DAC_READ_SEARCH     yes      yes          reopen for reading, hash and
 *                                                 serve ranges of mapped files
 *                                                 whatever their owner and
 *                                                 mode. Read only: no
 *                                                 CAP_DAC_OVERRIDE
 *   CAP_SYSLOG              yes      yes          real addresses in
 *                                                 /proc/kallsyms, read again at
 *                                                 each (re)connect
 *   CAP_BPF                 no       yes          loading the Go probes'
 *                                                 programs (and their .rodata
 *                                                 maps) at run time
 *   CAP_PERFMON             no       yes          with CAP_BPF, tracing
 *                                                 program types
 *   CAP_SYS_ADMIN           no       yes          creating a uprobe perf event
 *                                                 (perf_uprobe_event_init();
 *                                                 CAP_PERFMON is refused with
 *                                                 EACCES on 6.18)
 * Without --go-probes the running sensor only looks up, updates, deletes
 * and walks the keys of maps it holds fds of: the kernel checks no
 * capability for those (6.18 checks bpf_capable() in map and program
 * creation, not in fd-based map operations). Never kept: CAP_SYS_RESOURCE
 * (memlock: memcg accounting since 5.11), CAP_NET_*, CAP_SETUID/SETGID,
 * CAP_DAC_OVERRIDE, CAP_KILL...
 *
 * Every thread then leaves uid 0 for the sensor's user (privileges.h):
 * root-owned Unix sockets (the system bus, docker.sock) refuse its
 * connect() with EACCES, root's processes its F_SETOWN signals, and it
 * keeps only the symbolizer socket's group for its uplink. The kept
 * capabilities do the rest as before: they do not depend on the uid, and
 * /proc/self/fd reopens work on the now non-dumpable (root-owned)
 * /proc/self because the kernel lets a process look at its own fds and
 * CAP_DAC_READ_SEARCH searches the directory.
 *
 * The seccomp filter allows openat only without O_WRONLY/O_RDWR/O_CREAT/
 * O_TRUNC/O_APPEND, and none of unlink/rename/chmod/chown/truncate/mount;
 * fcntl only for fd flags, status flags without O_ASYNC and
 * F_DUPFD_CLOEXEC (F_SETOWN/F_SETSIG would signal other processes). It
 * narrows bpf() to the commands of the mode, sockets to the symbolizer's
 * family, signals and prlimit64 to the sensor itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <linux/prctl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <pwd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "allthreads.h"
#include "log.h"
#include "privileges.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

static const struct {
	int cap;
	unsigned modes; /* 0: every mode; else kept only in these */
	const char *name, *why;
} kept[] = {
	{ CAP_SYS_PTRACE, 0, "CAP_SYS_PTRACE", "/proc/PID/{maps,exe,environ} of other users' processes" },
	{ CAP_CHECKPOINT_RESTORE, 0, "CAP_CHECKPOINT_RESTORE", "/proc/PID/map_files: the mapped inode" },
	{ CAP_DAC_READ_SEARCH, 0, "CAP_DAC_READ_SEARCH", "read mapped files of any owner and mode" },
	{ CAP_SYSLOG, 0, "CAP_SYSLOG", "kernel addresses in /proc/kallsyms" },
	{ CAP_BPF, PRIVILEGES_GO_PROBES, "CAP_BPF", "loading Go probe programs at run time" },
	{ CAP_PERFMON, PRIVILEGES_GO_PROBES, "CAP_PERFMON", "with CAP_BPF, tracing program types" },
	{ CAP_SYS_ADMIN, PRIVILEGES_GO_PROBES, "CAP_SYS_ADMIN", "creating uprobe perf events (Go probes)" },
};

static bool kept_in(size_t i, unsigned mode)
{
	return !kept[i].modes || (kept[i].modes & mode);
}

uint64_t privileges_kept(unsigned mode)
{
	uint64_t m = 0;

	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (kept_in(i, mode))
			m |= 1ull << kept[i].cap;
	return m;
}

void privileges_print(FILE *f, unsigned mode)
{
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (kept_in(i, mode))
			fprintf(f, "  %-24s %s\n", kept[i].name, kept[i].why);
}

int privileges_resolve(const char *user, const char *symbolizer_user,
		       struct privileges_user *ret)
{
	const char *sym = symbolizer_user ? symbolizer_user : "sonde";
	const struct passwd *pw = getpwnam(user);
	char *end;
	unsigned long n;

	memset(ret, 0, sizeof(*ret));
	errno = 0;
	n = strtoul(user, &end, 10);
	if (pw) {
		ret->uid = (uint32_t)pw->pw_uid;
		ret->gid = (uint32_t)pw->pw_gid;
	} else if (*user && !*end && errno == 0 && n < UINT32_MAX) {
		/* A number with no passwd entry (a container image): that uid
		 * and the same gid. */
		ret->uid = ret->gid = (uint32_t)n;
	} else {
		return -ENOENT;
	}
	if (ret->uid == 0 || ret->gid == 0)
		return -EINVAL;
	/* The symbolizer gives its socket its user's primary group. */
	errno = 0;
	n = strtoul(sym, &end, 10);
	if (symbolizer_user && *sym && !*end && errno == 0)
		pw = getpwuid((uid_t)n);
	else
		pw = getpwnam(sym);
	if (!pw)
		return symbolizer_user ? -ENOENT : 0; /* no user sonde: no group */
	if (pw->pw_gid != 0) {
		ret->group = (uint32_t)pw->pw_gid;
		ret->has_group = 1;
	}
	return 0;
}

struct drop_job {
	uint64_t keep;
	int last_cap;
	struct privileges_user user;
};

/* On every thread, in a signal handler: raw system calls only (glibc's
 * setuid() and setgroups() would broadcast to every thread themselves).
 * Keeps the permitted set across the uid change, sets the groups before
 * the uid (setgroups needs CAP_SETGID), then the kept set. */
static int switch_user(const struct drop_job *job)
{
	gid_t groups[1] = { (gid_t)job->user.group };
	uint32_t u = job->user.uid, g = job->user.gid;

	if (syscall(SYS_prctl, PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_setgroups, job->user.has_group ? 1 : 0, groups) < 0)
		return -errno;
	if (syscall(SYS_setresgid, g, g, g) < 0)
		return -errno;
	if (syscall(SYS_setresuid, u, u, u) < 0)
		return -errno;
	return 0;
}

/* On every thread, in a signal handler: raw system calls only. */
static int drop_thread(void *arg)
{
	const struct drop_job *job = arg;
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	int r;

	/* Bounding first: dropping from it needs CAP_SETPCAP, which goes
	 * with the capset below. */
	for (int cap = 0; cap <= job->last_cap; cap++)
		if (!(job->keep & (1ull << cap)) &&
		    syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return -errno;
	r = switch_user(job);
	if (r < 0)
		return r;
	memset(data, 0, sizeof(data));
	data[0].effective = data[0].permitted = (uint32_t)job->keep;
	data[1].effective = data[1].permitted = (uint32_t)(job->keep >> 32);
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	if (syscall(SYS_prctl, PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* System calls the running sensor makes (main loop, uplink thread, gRPC
 * client threads), found with strace -f under the integration tests.
 * Those with an argument filter are added in load_seccomp(). */
static const char *const allowed[] = {
	/* files: reads only (openat is filtered on its flags below) */
	"read", "pread64", "readv", "write", "writev", "close", "fstat", "fstatfs", "newfstatat",
	"statx", "lseek", "readlink", "readlinkat", "getdents64", "faccessat", "faccessat2",
	"dup3",
	/* memory */
	"mmap", "munmap", "mprotect", "madvise", "mremap", "brk",
	/* threads and signals (tgkill below) */
	"futex", "set_robust_list", "rseq", "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler", "gettid", "getpid",
	"exit", "exit_group", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	"restart_syscall",
	/* time and the main loop */
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "getrandom",
	"poll", "ppoll", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"eventfd2", "pipe2", "timerfd_create", "timerfd_settime", "timerfd_gettime", "signalfd4",
	/* the uplink (gRPC client): reconnects create sockets (socket below) */
	"connect", "recvmsg", "sendmsg", "recvfrom", "sendto", "shutdown", "getsockopt",
	"setsockopt", "getsockname", "getpeername",
	/* identity, limits (prlimit64 below) */
	"getuid", "geteuid", "getgid", "getegid", "uname", "sysinfo", "getrusage", "getrlimit",
	"umask", "membarrier",
};

/* bpf() commands on maps the sensor holds fds of: every mode (strace -f
 * of the running sensor under the integration tests: lookups, updates,
 * deletes, key walks, the unwind tables' batch updates). */
static const int bpf_map_cmds[] = {
	BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM, BPF_MAP_DELETE_ELEM, BPF_MAP_GET_NEXT_KEY,
	BPF_MAP_UPDATE_BATCH,
};
/* --go-probes: libbpf loads each probe object at run time (BTF, its
 * .rodata map, frozen, programs bound to it) and attaches uprobes as perf
 * links: what strace showed under tests/integration/test_go_probes.py. */
static const int bpf_load_cmds[] = {
	BPF_PROG_LOAD, BPF_MAP_CREATE, BPF_BTF_LOAD, BPF_MAP_FREEZE, BPF_PROG_BIND_MAP,
	BPF_OBJ_GET_INFO_BY_FD, BPF_LINK_CREATE,
};

static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
		const struct scmp_arg_cmp *args)
{
	int nr = seccomp_syscall_resolve_name(name), r;

	if (nr == __NR_SCMP_ERROR)
		return 0;
	r = seccomp_rule_add_array(ctx, action, nr, n, args);
	/* -EACCES: the default action already (EPERM, in the selftest). */
	return r == -EACCES ? 0 : r;
}

static int rule1(scmp_filter_ctx ctx, uint32_t action, const char *name, struct scmp_arg_cmp a)
{
	return rule(ctx, action, name, 1, &a);
}

static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	char msg[] = "sonde-sensor: seccomp: blocked system call 000\n";
	int nr = si->si_syscall;

	(void)sig;
	(void)uc;
	msg[sizeof(msg) - 5] = (char)('0' + nr / 100 % 10);
	msg[sizeof(msg) - 4] = (char)('0' + nr / 10 % 10);
	msg[sizeof(msg) - 3] = (char)('0' + nr % 10);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* nothing left to do */
	}
	_exit(159);
}

/* What the filter does with a call it does not allow. */
static uint32_t default_action(unsigned mode)
{
	if (mode & PRIVILEGES_SELFTEST)
		return SCMP_ACT_ERRNO(EPERM);
	return (mode & PRIVILEGES_DEBUG) ? SCMP_ACT_TRAP : SCMP_ACT_KILL_PROCESS;
}

/* The calls allowed only with some arguments, per mode. */
static int add_argument_rules(scmp_filter_ctx ctx, unsigned mode)
{
	const uint64_t writes = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
	const uint64_t self = (uint64_t)getpid();
	bool go = mode & PRIVILEGES_GO_PROBES;
	int r = 0;

	for (size_t i = 0; r == 0 && i < sizeof(bpf_map_cmds) / sizeof(bpf_map_cmds[0]); i++)
		r = rule1(ctx, SCMP_ACT_ALLOW, "bpf", SCMP_A0(SCMP_CMP_EQ, (uint64_t)bpf_map_cmds[i]));
	for (size_t i = 0; go && r == 0 && i < sizeof(bpf_load_cmds) / sizeof(bpf_load_cmds[0]); i++)
		r = rule1(ctx, SCMP_ACT_ALLOW, "bpf", SCMP_A0(SCMP_CMP_EQ, (uint64_t)bpf_load_cmds[i]));
	/* Go probes: late uprobes are perf events (attached by a perf link;
	 * SET_BPF where the kernel has no perf links). */
	if (r == 0 && go)
		r = rule(ctx, SCMP_ACT_ALLOW, "perf_event_open", 0, NULL);
	if (r == 0 && go)
		r = rule1(ctx, SCMP_ACT_ALLOW, "ioctl", SCMP_A1(SCMP_CMP_EQ, PERF_EVENT_IOC_SET_BPF));
	/* ioctl: socket queries, and the perf event controls libbpf uses
	 * when it detaches. fcntl: fd and status flags (F_SETFL below, not
	 * O_ASYNC: with F_SETOWN it signals), duplicates; never
	 * F_SETOWN/F_SETSIG/leases/locks. */
	static const struct {
		const char *name;
		unsigned long arg1;
	} by_arg1[] = {
		{ "ioctl", FIONREAD },		    { "ioctl", FIONBIO },
		{ "ioctl", PERF_EVENT_IOC_ENABLE }, { "ioctl", PERF_EVENT_IOC_DISABLE },
		{ "fcntl", F_GETFD },		    { "fcntl", F_SETFD },
		{ "fcntl", F_GETFL },		    { "fcntl", F_DUPFD_CLOEXEC },
	};
	for (size_t i = 0; r == 0 && i < sizeof(by_arg1) / sizeof(by_arg1[0]); i++)
		r = rule1(ctx, SCMP_ACT_ALLOW, by_arg1[i].name,
			  SCMP_A1(SCMP_CMP_EQ, by_arg1[i].arg1));
	if (r == 0)
		r = rule1(ctx, SCMP_ACT_ERRNO(ENOTTY), "ioctl", SCMP_A1(SCMP_CMP_EQ, 0x5401 /* TCGETS */));
	if (r == 0) {
		struct scmp_arg_cmp setfl[] = {
			SCMP_A1(SCMP_CMP_EQ, F_SETFL),
			SCMP_A2(SCMP_CMP_MASKED_EQ, O_ASYNC, 0),
		};
		r = rule(ctx, SCMP_ACT_ALLOW, "fcntl", 2, setfl);
	}
	/* openat: read-only opens. */
	if (r == 0)
		r = rule1(ctx, SCMP_ACT_ALLOW, "openat", SCMP_A2(SCMP_CMP_MASKED_EQ, writes, 0));
	/* socket: the symbolizer's family (gRPC's client, c-ares' UDP for a
	 * tcp: name). */
	if (r == 0 && !(mode & PRIVILEGES_TCP))
		r = rule1(ctx, SCMP_ACT_ALLOW, "socket", SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	if (r == 0 && (mode & PRIVILEGES_TCP))
		r = rule1(ctx, SCMP_ACT_ALLOW, "socket", SCMP_A0(SCMP_CMP_EQ, AF_INET));
	if (r == 0 && (mode & PRIVILEGES_TCP))
		r = rule1(ctx, SCMP_ACT_ALLOW, "socket", SCMP_A0(SCMP_CMP_EQ, AF_INET6));
	/* The families a resolver may try (glibc's nscd client over
	 * AF_UNIX, getaddrinfo's AF_NETLINK address check): refused with an
	 * error it falls back from, not killed. */
	if (r == 0 && (mode & PRIVILEGES_TCP))
		r = rule1(ctx, SCMP_ACT_ERRNO(EPERM), "socket", SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	if (r == 0 && !(mode & PRIVILEGES_TCP))
		r = rule1(ctx, SCMP_ACT_ERRNO(EPERM), "socket", SCMP_A0(SCMP_CMP_EQ, AF_INET));
	if (r == 0 && !(mode & PRIVILEGES_TCP))
		r = rule1(ctx, SCMP_ACT_ERRNO(EPERM), "socket", SCMP_A0(SCMP_CMP_EQ, AF_INET6));
	if (r == 0)
		r = rule1(ctx, SCMP_ACT_ERRNO(EPERM), "socket", SCMP_A0(SCMP_CMP_EQ, AF_NETLINK));
	/* bind: gRPC probes once whether ::1 can be bound (to choose
	 * dual-stack sockets); refused, it assumes no IPv6 loopback. */
	if (r == 0)
		r = rule(ctx, SCMP_ACT_ERRNO(EPERM), "bind", 0, NULL);
	/* Signals to its own threads only (glibc's raise and abort); limits
	 * of itself only (glibc's getrlimit is prlimit64(0, ...)). */
	if (r == 0)
		r = rule1(ctx, SCMP_ACT_ALLOW, "tgkill", SCMP_A0(SCMP_CMP_EQ, self));
	if (r == 0)
		r = rule1(ctx, SCMP_ACT_ALLOW, "prlimit64", SCMP_A0(SCMP_CMP_EQ, 0));
	if (r == 0)
		r = rule1(ctx, SCMP_ACT_ALLOW, "prlimit64", SCMP_A0(SCMP_CMP_EQ, self));
	/* clone: threads only. */
	if (r == 0)
		r = rule1(ctx, SCMP_ACT_ALLOW, "clone",
			  SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	if (r == 0)
		r = rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
	/* prctl: thread names only. */
	if (r == 0)
		r = rule1(ctx, SCMP_ACT_ALLOW, "prctl", SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME));
	if (r == 0)
		r = rule1(ctx, SCMP_ACT_ALLOW, "prctl", SCMP_A0(SCMP_CMP_EQ, PR_GET_NAME));
	return r;
}

static int load_seccomp(unsigned mode)
{
	scmp_filter_ctx ctx;
	int r = 0;

	if ((mode & PRIVILEGES_DEBUG) && !(mode & PRIVILEGES_SELFTEST)) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigsys;
		sa.sa_flags = SA_SIGINFO;
		if (sigaction(SIGSYS, &sa, NULL) < 0)
			return -errno;
	}
	ctx = seccomp_init(default_action(mode));
	if (!ctx)
		return -ENOMEM;
	if (seccomp_arch_native() != SCMP_ARCH_X86_64) {
		r = -EOPNOTSUPP;
		goto out;
	}
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	for (size_t i = 0; r == 0 && i < sizeof(allowed) / sizeof(allowed[0]); i++)
		r = rule(ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL);
	if (r == 0)
		r = add_argument_rules(ctx, mode);
	if (r == 0)
		r = seccomp_load(ctx);
out:
	seccomp_release(ctx);
	return r;
}

int privileges_drop(unsigned mode, const struct privileges_user *user)
{
	struct drop_job job = { .keep = privileges_kept(mode), .last_cap = CAP_LAST_CAP,
				.user = *user };
	char names[256] = "";
	int r;

	while (prctl(PR_CAPBSET_READ, job.last_cap + 1, 0, 0, 0) >= 0)
		job.last_cap++;
	r = allthreads_run(drop_thread, &job);
	if (r < 0) {
		log_error_errno(r, "cannot drop capabilities on every thread");
		return r;
	}
	r = load_seccomp(mode);
	if (r < 0) {
		log_error_errno(r, "cannot load the seccomp filter");
		return r;
	}
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (kept_in(i, mode))
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 names[0] ? ", " : "", kept[i].name);
	log_info("privileges dropped: uid %" PRIu32 " gid %" PRIu32 " groups %s%" PRIu32 "; kept %s; "
		 "no_new_privs; seccomp allow-list (%s%s)", user->uid, user->gid,
		 user->has_group ? "" : "none ", user->has_group ? user->group : 0, names,
		 mode & PRIVILEGES_GO_PROBES ? "Go probes: program loads, uprobes" : "maps only",
		 mode & PRIVILEGES_TCP ? ", INET sockets" : ", Unix sockets");
	return 0;
}

/* ---- --sandbox-selftest ---- */

/* Denied: EPERM (the filter), or also EACCES (the kernel) if access. */
static int report_as(FILE *f, const char *what, long rc, int err, bool access)
{
	bool denied = rc < 0 && (err == EPERM || (access && err == EACCES));

	if (rc < 0)
		fprintf(f, "%s %s: %s\n", denied ? "denied" : "ALLOWED", what, strerror(err));
	else
		fprintf(f, "ALLOWED %s: succeeded\n", what);
	fflush(f);
	return denied ? 0 : 1;
}

static int report(FILE *f, const char *what, long rc, int err)
{
	return report_as(f, what, rc, err, false);
}

/* connect() to a Unix socket owned by root, mode 0600 (the test's
 * stand-in for the system bus): the kernel must refuse the sensor's
 * user. */
static long selftest_connect(const char *path)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int fd, e;
	long rc;

	if (strlen(path) >= sizeof(un.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(un.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	rc = connect(fd, (struct sockaddr *)&un, sizeof(un));
	e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* fcntl on a pipe of its own: F_SETOWN to pid 1, then O_ASYNC (which
 * with an owner signals it). Harmless if allowed: nothing is written. */
static int selftest_fcntl(FILE *f)
{
	int p[2], allowed = 0;
	long rc;

	if (pipe2(p, O_CLOEXEC) < 0)
		return report(f, "pipe2 for the fcntl attempts", -1, ENOTSUP);
	rc = fcntl(p[1], F_SETOWN, 1);
	allowed += report(f, "fcntl(F_SETOWN, 1)", rc, errno);
	rc = fcntl(p[1], F_SETSIG, SIGKILL);
	allowed += report(f, "fcntl(F_SETSIG)", rc, errno);
	rc = fcntl(p[1], F_SETFL, O_ASYNC | O_NONBLOCK);
	allowed += report(f, "fcntl(F_SETFL, O_ASYNC)", rc, errno);
	close(p[0]);
	close(p[1]);
	return allowed;
}

/* bind() on a socket of the family the mode allows: an abstract Unix
 * name or 127.0.0.1:0, nothing on disk even if allowed. */
static long selftest_bind(unsigned mode)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	bool tcp = mode & PRIVILEGES_TCP;
	int fd = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), e;
	long rc;

	if (fd < 0)
		return fd;
	snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1, "sonde-sensor-selftest-%d", (int)getpid());
	rc = tcp ? bind(fd, (struct sockaddr *)&in, sizeof(in))
		 : bind(fd, (struct sockaddr *)&un, sizeof(un));
	e = errno;
	close(fd);
	errno = e;
	return rc;
}

int privileges_selftest(FILE *f, unsigned mode, const char *socket_path)
{
	union bpf_attr attr;
	struct rlimit64 rl;
	int allowed = 0, fd;
	long rc;

	/* Arguments the kernel itself refuses with other errors than EPERM
	 * (an empty program, a NULL attr, bad fds), so that EPERM is the
	 * filter's answer and an allowed call changes nothing. */
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	rc = syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
	allowed += report(f, "bpf(BPF_PROG_LOAD)", rc, errno);
	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = -1;
	attr.link_create.target_fd = -1;
	rc = syscall(SYS_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	allowed += report(f, "bpf(BPF_LINK_CREATE)", rc, errno);
	rc = syscall(SYS_perf_event_open, NULL, -1, 0, -1, 0);
	allowed += report(f, "perf_event_open", rc, errno);
	rc = selftest_bind(mode);
	allowed += report(f, "bind", rc, errno);
	rc = fd = socket((mode & PRIVILEGES_TCP) ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	allowed += report(f, (mode & PRIVILEGES_TCP) ? "socket(AF_UNIX) for a tcp: symbolizer"
						    : "socket(AF_INET) for a unix: symbolizer",
			  rc, errno);
	if (fd >= 0)
		close(fd);
	rc = syscall(SYS_tgkill, 1, 1, 0);
	allowed += report(f, "tgkill(1, 1, 0)", rc, errno);
	rc = kill(1, 0);
	allowed += report(f, "kill(1, 0)", rc, errno);
	rc = syscall(SYS_prlimit64, 1, RLIMIT_NOFILE, NULL, &rl);
	allowed += report(f, "prlimit64(1)", rc, errno);
	/* O_APPEND and nothing written: harmless even if allowed. */
	rc = fd = open("/etc/passwd", O_WRONLY | O_APPEND | O_CLOEXEC);
	allowed += report(f, "open /etc/passwd for writing", rc, errno);
	if (fd >= 0)
		close(fd);
	rc = execve("/nonexistent/sonde-selftest", (char *[]){ NULL }, (char *[]){ NULL });
	allowed += report(f, "execve", rc, errno);
	allowed += selftest_fcntl(f);
	if (socket_path) {
		rc = selftest_connect(socket_path);
		allowed += report_as(f, "connect to a root-owned 0600 Unix socket", rc, errno, true);
	}
	return allowed;
}
