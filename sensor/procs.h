/* procs.h - the process table: what /proc says about each tracked process
 * (comm, exe, start time, cgroup, executable file mappings with their file
 * IDs), and address -> (file ID, file offset) resolution for stacks.c.
 *
 * Main thread only. Strings read from /proc that a target chose (comm,
 * paths) are kept bounded and opaque.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fileids.h"
#include "scanbudget.h"
#include "stacks.h"

struct proc_mapping {
	uint64_t start, end, offset;
	uint64_t dev, ino;         /* the maps line's (makedev(major, minor), inode) */
	struct fileid_entry *file; /* reference; NULL when no file ID */
	struct fileid_info info;   /* valid when file != NULL */
	/* file == NULL: why (a negative errno; -EDQUOT: over the process's
	 * PROCS_MAX_FILES). An identical mapping at the next scan is not
	 * tried again after -EDQUOT or -EBADFD (not a regular file). */
	int reg_err;
	char *path;                /* as /proc/PID/maps shows it */
	bool deleted;
};

/* A read-only view for the uplink. */
struct proc {
	uint32_t pid;
	uint32_t ppid;
	char comm[16];
	char *exe;    /* may be "" */
	char *cgroup; /* cgroup v2 path, may be "" */
	/* OTEL_SERVICE_NAME from its environment at exec, bounded, opaque;
	 * "" when unset (docs/go-probes.md). */
	char otel_service_name[128];
	/* /proc/PID/cmdline at exec, arguments joined by spaces, at most
	 * PROCS_MAX_CMDLINE bytes; NULL unless procs_set_command_line() */
	char *cmdline;
	uint64_t start_ticks;
	/* Owner (maps.h proc_parse_status_uid; 0 when unknown or mid uid
	 * change), read at each full scan (first scan, after an exec). */
	uint32_t uid;
	struct proc_mapping *maps; /* sorted by start, executable files (and the vDSO) */
	size_t n_maps;
	uint64_t last_scan_ns; /* CLOCK_MONOTONIC */
	uint64_t rescan_gap_ns; /* procs_rescan_limited's current interval */
	/* The maps bytes its rescans may still read (scanbudget.h); a fork
	 * inherits its parent's. */
	struct scan_budget budget;
	/* The last scan left some of its executable file mappings without a
	 * file ID (maps text, mapping count or path bytes over the bounds
	 * below, or more distinct files than PROCS_MAX_FILES): frames there
	 * keep raw addresses. Logged once per process. */
	bool over_bounds;
	bool over_bounds_logged;
	uint32_t maps_gen;     /* bumped whenever the mappings change */
	bool dirty;            /* not sent on this connection since it changed */
	/* A fork's copy of its parent (procs_fork), not read from /proc: it
	 * goes out at the next flush, not at once, and is forgotten quietly
	 * if it exits unsampled before that. Its unwind entries are its
	 * parent's (BPF lpm_redirect) until it is scanned. */
	bool cloned;
	bool exec_pending;     /* exec'd since the last scan: maps are the old image's */
	bool sampled;          /* a sample of it was resolved */
	bool exited;           /* kept until its exit was sent, then reaped */
	bool exit_sent;
};

struct procs;

/* Told about mapping changes, e.g. to keep BPF unwind entries in step
 * (unwind_maps.c). Called from inside procs_scan()/procs_exit(), on the
 * caller's thread; the callbacks must not call back into procs. */
struct procs_observer {
	/* A new process, or its executable mappings changed. pr: borrowed,
	 * valid during the call. */
	void (*maps_changed)(const struct proc *pr, void *ctx);
	/* The process exited, or its pid now belongs to another process. */
	void (*gone)(uint32_t pid, void *ctx);
};

/* What one process can make a scan read and keep (docs/security.md, "A
 * hostile profiled process"); a normal one is far below each (a JVM maps
 * about 15 executable files, a large desktop program a few hundred):
 * - PROCS_MAX_MAPS_BYTES of /proc/PID/maps text are read per scan (a
 *   process chooses up to vm.max_map_count lines of up to 4 KiB each);
 * - PROCS_MAX_MAPS executable file mappings are kept per process, and
 *   PROCS_MAX_PATH_BYTES of their paths (which go to the symbolizer in
 *   one ProcessUpdate, under its 16 MiB message limit);
 * - PROCS_MAX_FILES distinct files (device, inode) per process get a file
 *   ID: a map_files lookup, a stat and an 8 KiB hash each, and a slot of
 *   the sensor's file table. Further mappings of a file already seen in
 *   the scan take its registration without a lookup;
 * - rescans of a known process read at most what its scan budget allows
 *   (scanbudget.h): procs_rescan_maps() and procs_rescan_limited() refuse
 *   while it is empty. */
#define PROCS_MAX_MAPS_BYTES (16u << 20)
#define PROCS_MAX_MAPS 8192
#define PROCS_MAX_PATH_BYTES (1u << 20)
#define PROCS_MAX_FILES 512

/* fileids: borrowed, must outlive the table. max_procs bounds the table.
 * proc_root: "/proc" (tests may pass another directory). */
struct procs *procs_new(struct fileids *fileids, size_t max_procs, const char *proc_root);
void procs_free(struct procs *p);
#define PROCS_MAX_CMDLINE 4096
/* Whether to read each process's command line (--command-line: it can
 * hold secrets, so it is off unless asked for). */
void procs_set_command_line(struct procs *p, bool on);
/* The vDSO's registration (vdso.h; e: a reference that outlives p):
 * processes' [vdso] mappings that match it get its file ID. */
void procs_set_vdso(struct procs *p, struct fileid_entry *e, const struct fileid_info *info);
/* obs: borrowed, must outlive p (NULL: none). */
void procs_set_observer(struct procs *p, const struct procs_observer *obs, void *ctx);

/* (Re)reads /proc/PID and marks the process dirty when anything changed.
 * Returns 0, -ESRCH when it is gone, -ENOSPC when the table is full, or
 * another negative errno. */
int procs_scan(struct procs *p, uint32_t pid);
/* A rescan of a known process that reads only its stat and maps (comm,
 * exe, cgroup and environment are read by procs_scan at exec); an unknown
 * or exec'd one gets a full procs_scan(). Same returns, and -EAGAIN when
 * a known process's scan budget is empty (nothing read). */
int procs_rescan_maps(struct procs *p, uint32_t pid);
/* A fork: child gets a copy of parent's entry, without reading /proc
 * (fork copies the address space). start_ticks: the child's, as
 * /proc/PID/stat counts them. Returns 0, -ESRCH when the parent is not
 * known (scan the child instead), -EEXIST when the child already is,
 * -ENOSPC or -ENOMEM. */
int procs_fork(struct procs *p, uint32_t child, uint32_t parent, uint64_t start_ticks);
/* An exec: the entry's mappings are the old image's until the next
 * procs_scan(). Returns true if pid is known. */
bool procs_exec(struct procs *p, uint32_t pid);
/* Like procs_scan(), rate-limited per known pid: used when a sample hits
 * an address in no known mapping. The gap starts at min_interval_ns and
 * doubles (up to 64x) while rescans find no new mapping, and the scan
 * budget must allow it. Returns 1 if it rescanned, 0 if rate-limited, or
 * a negative errno. */
int procs_rescan_limited(struct procs *p, uint32_t pid, uint64_t min_interval_ns);
/* The process exited: it is kept (its mappings still resolve late
 * samples) until its update and exit were sent and procs_reap() runs. */
void procs_exit(struct procs *p, uint32_t pid);
/* Frees exited processes whose exit was sent. Call after the samples
 * that may refer to them were delivered. */
void procs_reap(struct procs *p);
/* A new connection: every process is dirty again, every exit unsent. */
void procs_reset_connection(struct procs *p);

struct proc *procs_find(struct procs *p, uint32_t pid);

/* Resolves a user address of pid into a frame. Returns 0 when it is in a
 * file mapping with a file ID, -ENOENT otherwise (the frame then carries
 * the raw address). */
int procs_resolve(struct procs *p, uint32_t pid, uint64_t addr, struct stack_frame *ret);

enum procs_select {
	PROCS_ALL,          /* every process, exited ones included */
	PROCS_DIRTY,        /* the dirty ones */
	PROCS_DIRTY_URGENT, /* the dirty ones that are not fork copies */
};
/* Calls fn for the selected processes, clearing their dirty mark when fn
 * returns 0. Stops at a non-zero return. */
int procs_foreach(struct procs *p, enum procs_select sel,
		  int (*fn)(const struct proc *pr, void *ctx), void *ctx);
/* Calls fn for every live process, changing nothing (no dirty marks).
 * Stops at a non-zero return. */
int procs_visit(struct procs *p, int (*fn)(const struct proc *pr, void *ctx), void *ctx);
/* Calls fn for every exit not sent yet, marking it sent when fn returns 0.
 * Stops at a non-zero return. */
int procs_foreach_exit(struct procs *p, int (*fn)(uint32_t pid, void *ctx), void *ctx);

/* Calls fn with the pid of every process in the proc root (known to the
 * table or not), in directory order; nothing of them is read. Stops at a
 * non-zero return of fn and returns it; 0 when all were visited, or a
 * negative errno when the proc root cannot be listed. */
int procs_list_pids(struct procs *p, int (*fn)(uint32_t pid, void *ctx), void *ctx);
/* The parent of any process, from its stat, without adding it to the
 * table. Returns 0 with *ret_ppid set, -ESRCH when it is gone, -EINVAL
 * when its stat does not parse, or another negative errno. */
int procs_read_ppid(struct procs *p, uint32_t pid, uint32_t *ret_ppid);
/* The cgroup v2 path of any process ("/a/b", as its /proc/PID/cgroup
 * shows it), without adding it to the table. Returns 0 with an owned
 * malloc'd *ret_path, -ENOENT when it is gone or has no cgroup v2 line,
 * -ENOMEM, or another negative errno. */
int procs_read_cgroup(struct procs *p, uint32_t pid, char **ret_path);

/* Live (not exited) processes. */
size_t procs_count(struct procs *p);
