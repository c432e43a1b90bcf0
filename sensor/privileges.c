/* privileges.c - what the sensor keeps after set-up (see privileges.h).
 *
 * The kept set was found by running the reduced sensor on kernel 6.18
 * against processes of other users (tests/integration/test_security.py
 * checks CapEff is exactly this set):
 *   CAP_SYS_PTRACE        /proc/PID/maps, /proc/PID/exe and /proc/PID/root
 *                         of other users' processes (ptrace_may_access,
 *                         PTRACE_MODE_READ_FSCREDS).
 *   CAP_CHECKPOINT_RESTORE  /proc/PID/map_files/ (the mapped inode itself,
 *                         which survives deletion and other mount
 *                         namespaces): proc_map_files_lookup() wants it
 *                         (or CAP_SYS_ADMIN); without it only root/PATH.
 *   CAP_DAC_READ_SEARCH   open for reading, hashing and serving ranges of
 *                         files whatever their owner and mode (a 0700
 *                         binary of another user). Read only: no
 *                         CAP_DAC_OVERRIDE.
 *   CAP_SYSLOG            real addresses in /proc/kallsyms, read again at
 *                         each (re)connect: kallsyms_show_value() checks
 *                         the opener for it (unless kptr_restrict=0 and
 *                         perf_event_paranoid <= 1).
 *   CAP_BPF               bpf() on its maps after set-up: the unwind
 *                         tables the symbolizer sends are loaded into
 *                         (inner) maps while running, which may create
 *                         maps.
 *   CAP_PERFMON           with CAP_BPF, for the tracing program types'
 *                         map and link operations and loading the Go
 *                         probes' uprobe programs after set-up.
 * --go-probes also keeps CAP_SYS_ADMIN: creating a uprobe perf event wants
 * it (perf_uprobe_event_init(); CAP_PERFMON is refused with EACCES on
 * 6.18), and Go probes attach to processes that start later.
 * Not kept: CAP_SYS_ADMIN, CAP_SYS_RESOURCE (memlock: memcg accounting
 * since 5.11), CAP_NET_*, CAP_SETUID/SETGID, CAP_DAC_OVERRIDE, CAP_KILL...
 *
 * The uid stays 0, so root-owned files stay writable by their owner bits:
 * the seccomp filter allows openat only without O_WRONLY/O_RDWR/O_CREAT/
 * O_TRUNC/O_APPEND, and none of unlink/rename/chmod/chown/truncate/mount.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <linux/prctl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
	const char *name, *why;
} kept[] = {
	{ CAP_SYS_PTRACE, "CAP_SYS_PTRACE", "/proc/PID/{maps,exe,root} of other users' processes" },
	{ CAP_CHECKPOINT_RESTORE, "CAP_CHECKPOINT_RESTORE", "/proc/PID/map_files: the mapped inode" },
	{ CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH", "read mapped files of any owner and mode" },
	{ CAP_SYSLOG, "CAP_SYSLOG", "kernel addresses in /proc/kallsyms" },
	{ CAP_BPF, "CAP_BPF", "map updates after set-up (unwind tables)" },
	{ CAP_PERFMON, "CAP_PERFMON", "tracing maps/links, loading Go probe programs" },
};

uint64_t privileges_kept(void)
{
	uint64_t m = 0;

	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		m |= 1ull << kept[i].cap;
	return m;
}

void privileges_print(FILE *f)
{
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		fprintf(f, "  %-24s %s\n", kept[i].name, kept[i].why);
}

struct drop_job {
	uint64_t keep;
	int last_cap;
};

/* On every thread, in a signal handler: raw system calls only. */
static int drop_thread(void *arg)
{
	const struct drop_job *job = arg;
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	/* Bounding first: dropping from it needs CAP_SETPCAP, which goes
	 * with the capset below. */
	for (int cap = 0; cap <= job->last_cap; cap++)
		if (!(job->keep & (1ull << cap)) &&
		    syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return -errno;
	memset(data, 0, sizeof(data));
	data[0].effective = data[0].permitted = (uint32_t)job->keep;
	data[1].effective = data[1].permitted = (uint32_t)(job->keep >> 32);
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* System calls the running sensor makes (main loop, uplink thread, gRPC
 * client threads), found with strace -f under the integration tests. */
static const char *const allowed[] = {
	/* files: reads only (openat is filtered on its flags below) */
	"read", "pread64", "readv", "write", "writev", "close", "fstat", "newfstatat", "statx",
	"lseek", "readlink", "readlinkat", "getdents64", "fcntl", "faccessat", "faccessat2",
	/* BPF maps and the ring buffer; perf events for late uprobes (Go
	 * probes), whose objects libbpf loads after set-up: it dups the
	 * shared maps' fds (bpf_map__reuse_fd) with dup3 */
	"bpf", "perf_event_open", "dup3",
	/* memory */
	"mmap", "munmap", "mprotect", "madvise", "mremap", "brk",
	/* threads and signals */
	"futex", "set_robust_list", "rseq", "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler", "gettid", "getpid",
	"exit", "exit_group", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	"restart_syscall", "tgkill",
	/* time and the main loop */
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "getrandom",
	"poll", "ppoll", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"eventfd2", "pipe2", "timerfd_create", "timerfd_settime", "timerfd_gettime", "signalfd4",
	/* the uplink (gRPC client): reconnects create sockets */
	"connect", "recvmsg", "sendmsg", "recvfrom", "sendto", "shutdown", "getsockopt",
	"setsockopt", "getsockname", "getpeername", "bind",
	/* identity, limits */
	"getuid", "geteuid", "getgid", "getegid", "uname", "sysinfo", "getrusage", "getrlimit",
	"prlimit64", "umask", "membarrier",
};

static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
		const struct scmp_arg_cmp *args)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return 0;
	return seccomp_rule_add_array(ctx, action, nr, n, args);
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

static int load_seccomp(bool debug)
{
	const uint64_t writes = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
	scmp_filter_ctx ctx;
	int r = 0;

	if (debug) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigsys;
		sa.sa_flags = SA_SIGINFO;
		if (sigaction(SIGSYS, &sa, NULL) < 0)
			return -errno;
	}
	ctx = seccomp_init(debug ? SCMP_ACT_TRAP : SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return -ENOMEM;
	if (seccomp_arch_native() != SCMP_ARCH_X86_64) {
		r = -EOPNOTSUPP;
		goto out;
	}
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	for (size_t i = 0; r == 0 && i < sizeof(allowed) / sizeof(allowed[0]); i++)
		r = rule(ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL);
	/* openat: read-only opens; a write open is answered EACCES. */
	if (r == 0)
		r = rule(ctx, SCMP_ACT_ALLOW, "openat", 1,
			 (struct scmp_arg_cmp[]){ SCMP_A2(SCMP_CMP_MASKED_EQ, writes, 0) });
	/* socket: the families gRPC's client uses (Unix, TCP, c-ares UDP). */
	for (int fam = 0; r == 0 && fam < 3; fam++) {
		static const int fams[] = { AF_UNIX, AF_INET, AF_INET6 };

		r = rule(ctx, SCMP_ACT_ALLOW, "socket", 1,
			 (struct scmp_arg_cmp[]){ SCMP_A0(SCMP_CMP_EQ, (uint64_t)fams[fam]) });
	}
	/* clone: threads only. */
	if (r == 0)
		r = rule(ctx, SCMP_ACT_ALLOW, "clone", 1,
			 (struct scmp_arg_cmp[]){ SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD) });
	if (r == 0)
		r = rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
	/* ioctl: socket queries and the perf event controls libbpf uses when
	 * it detaches. */
	{
		static const unsigned long reqs[] = { FIONREAD, FIONBIO, PERF_EVENT_IOC_ENABLE,
						      PERF_EVENT_IOC_DISABLE, PERF_EVENT_IOC_SET_BPF };

		for (size_t i = 0; r == 0 && i < sizeof(reqs) / sizeof(reqs[0]); i++)
			r = rule(ctx, SCMP_ACT_ALLOW, "ioctl", 1,
				 (struct scmp_arg_cmp[]){ SCMP_A1(SCMP_CMP_EQ, reqs[i]) });
		if (r == 0)
			r = rule(ctx, SCMP_ACT_ERRNO(ENOTTY), "ioctl", 1,
				 (struct scmp_arg_cmp[]){ SCMP_A1(SCMP_CMP_EQ, 0x5401 /* TCGETS */) });
	}
	/* prctl: thread names only. */
	if (r == 0)
		r = rule(ctx, SCMP_ACT_ALLOW, "prctl", 1,
			 (struct scmp_arg_cmp[]){ SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME) });
	if (r == 0)
		r = rule(ctx, SCMP_ACT_ALLOW, "prctl", 1,
			 (struct scmp_arg_cmp[]){ SCMP_A0(SCMP_CMP_EQ, PR_GET_NAME) });
	if (r == 0)
		r = seccomp_load(ctx);
out:
	seccomp_release(ctx);
	return r;
}

static int drop(bool debug, uint64_t extra)
{
	struct drop_job job = { .keep = privileges_kept() | extra, .last_cap = CAP_LAST_CAP };
	int r;

	while (prctl(PR_CAPBSET_READ, job.last_cap + 1, 0, 0, 0) >= 0)
		job.last_cap++;
	r = allthreads_run(drop_thread, &job);
	if (r < 0) {
		log_error_errno(r, "cannot drop capabilities on every thread");
		return r;
	}
	r = load_seccomp(debug);
	if (r < 0) {
		log_error_errno(r, "cannot load the seccomp filter");
		return r;
	}
	log_info("privileges dropped: kept CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE, CAP_SYSLOG, CAP_PERFMON, CAP_BPF, CAP_CHECKPOINT_RESTORE%s; no_new_privs; seccomp allow-list",
		 extra ? ", CAP_SYS_ADMIN (--go-probes: uprobes)" : "");
	return 0;
}

int privileges_drop(bool debug)
{
	return drop(debug, 0);
}

int privileges_drop_keep_admin(bool debug)
{
	return drop(debug, 1ull << CAP_SYS_ADMIN);
}
