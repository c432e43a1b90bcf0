/* sample.h - the records and counters that bpf/sample.bpf.c and the sensor
 * agree on. Included by BPF code (after vmlinux.h) and by user space (which gets
 * <linux/types.h>), so only fixed-width fields, explicit padding and a size check
 * on every struct that crosses the boundary. No pointers, bool or enums
 * inside the structs: enums below only name the values.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SONDE_COMM_LEN 16
/* bpf_get_stack() wants a multiple of 8 bytes; 64 kernel frames cover
 * every sane kernel stack (perf's default limit is 127). */
#define SONDE_MAX_KERNEL_FRAMES 64
/* Must stay a power of two: the walker masks its index with it. */
#define SONDE_MAX_USER_FRAMES 128

/* Record types: the first u32 of every ring buffer record. */
enum sonde_record_type {
	SONDE_REC_SAMPLE = 1,
	SONDE_REC_EXEC = 2, /* a process called execve: new mappings */
	SONDE_REC_EXIT = 3, /* a thread-group leader exited */
	SONDE_REC_FORK = 4, /* a new process (not a thread) was created */
	SONDE_REC_INTERP = 5, /* an interpreter walker's record (bpf/interp.h) */
	SONDE_REC_MMAP = 6, /* a process in its first second after exec mapped code */
};

/* Same numbers as sonde.v1.StackOutcome; 0 = no user stack (kernel thread,
 * or the sample is idle). */
enum sonde_stack_outcome {
	SONDE_OUTCOME_NONE = 0,
	SONDE_OUTCOME_COMPLETE = 1,  /* reached fp 0 / return address 0 */
	SONDE_OUTCOME_TRUNCATED = 2, /* SONDE_MAX_USER_FRAMES frames and more */
	SONDE_OUTCOME_NO_TABLE = 3,  /* a frame without a table, where the frame
				      * pointer fallback failed too */
	SONDE_OUTCOME_READ_ERROR = 4,/* a frame could not be read, or a bad chain */
};

/* What a sample measures (sonde_sample.profile; the same numbers as
 * SampleCount.profile on the wire and the queries' profile field). */
enum sonde_profile {
	SONDE_PROFILE_CPU = 0,     /* a cpu-clock tick: weight 0, one sampling period */
	SONDE_PROFILE_OFF_CPU = 1, /* a task back from blocking: weight = ns off the CPU */
	SONDE_PROFILE_MEMORY = 2,  /* address-space growth: weight = bytes */
};
#define SONDE_PROFILE_COUNT 3

/* sonde_sample.flags */
/* user[0] is the interrupted pc itself; user[1..] are return addresses, so
 * whoever symbolizes them must look up (address - 1) for those. Always set
 * today; a flag so that a future unwinder that starts mid-frame can say so. */
#define SONDE_SAMPLE_USER_PC0 0x1u
/* The sample interrupted user mode (else the kernel, user regs from pt_regs). */
#define SONDE_SAMPLE_IN_USER 0x2u
/* Some frame had no unwind table (no LPM entry, or an UNSUPPORTED row) and
 * was unwound with its frame pointer. */
#define SONDE_SAMPLE_FP_FALLBACK 0x4u
/* The process has an interpreter config (bpf/interp.h): its walker of
 * kind interp_kind ran, n_interp says how many frames it found. */
#define SONDE_SAMPLE_INTERP 0x8u

struct sonde_sample {
	__u32 type; /* SONDE_REC_SAMPLE */
	__u32 pid;  /* tgid */
	__u32 tid;
	__u32 cpu;
	__u64 ktime_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 cgroup_id;
	__u8 comm[SONDE_COMM_LEN]; /* thread name */
	__u32 flags;
	__u16 n_kernel;
	__u16 n_user;
	__u8 outcome; /* enum sonde_stack_outcome */
	__u8 n_interp;    /* interpreter frames after the user frames */
	__u8 interp_kind; /* enum sonde_interp_kind of the walker that found them */
	__u8 profile;     /* enum sonde_profile */
	__u8 pad[4];
	/* What the sample weighs, in its profile's unit: off-CPU ns, memory
	 * bytes; 0 for CPU (one sampling period). */
	__u64 weight;
	/* Go probes (docs/go-probes.md): the span the sampled goroutine was
	 * serving, from go_spans; all zeros when none. */
	__u8 trace_id[16];
	__u8 span_id[8];
	/* n_kernel kernel frames, then n_user user frames, then n_interp
	 * interpreter frames (one word each, as the kind's walker encodes
	 * it: SONDE_CPYTHON_FRAME, ...), each leaf first.
	 * Only these go on the ring: a record is SONDE_SAMPLE_SIZE(n_kernel,
	 * n_user) bytes (typical stacks are a tenth of the maximum). */
	__u64 frames[SONDE_MAX_KERNEL_FRAMES + SONDE_MAX_USER_FRAMES];
};
#define SONDE_SAMPLE_HEADER 96
#define SONDE_SAMPLE_SIZE(n_kernel, n_user) (SONDE_SAMPLE_HEADER + 8u * ((n_kernel) + (n_user)))
_Static_assert(__builtin_offsetof(struct sonde_sample, frames) == SONDE_SAMPLE_HEADER,
	       "sonde_sample layout");
_Static_assert(sizeof(struct sonde_sample) ==
		       SONDE_SAMPLE_SIZE(SONDE_MAX_KERNEL_FRAMES, SONDE_MAX_USER_FRAMES),
	       "sonde_sample layout");

/* SONDE_REC_EXEC, SONDE_REC_EXIT, SONDE_REC_FORK */
struct sonde_proc_event {
	__u32 type;
	__u32 pid;  /* tgid of the process the event is about */
	__u32 ppid; /* SONDE_REC_FORK: the parent's tgid; else 0 */
	__u32 pad;
	__u64 ktime_ns;
	/* SONDE_REC_FORK: the child's start, as /proc/PID/stat's starttime
	 * counts it (clock ticks since boot); else 0. */
	__u64 start_ticks;
	__u8 comm[SONDE_COMM_LEN];
};
_Static_assert(sizeof(struct sonde_proc_event) == 48, "sonde_proc_event layout");

/* Why the BPF side lost something: index of the per-CPU `errors` array. */
enum sonde_bpf_err {
	SONDE_ERR_RINGBUF_FULL = 0,    /* sample record could not be reserved: sample lost */
	SONDE_ERR_RINGBUF_FULL_EVENT,  /* process event could not be reserved */
	SONDE_ERR_KERNEL_STACK,        /* bpf_get_stack() failed */
	SONDE_ERR_USER_READ,           /* bpf_probe_read_user() of a frame failed */
	SONDE_ERR_USER_BAD_FP,         /* frame pointer misaligned or not growing */
	SONDE_ERR_USER_TRUNCATED,      /* more than SONDE_MAX_USER_FRAMES frames */
	SONDE_ERR_NO_USER_REGS,        /* no user registers for a user task */
	SONDE_ERR_SCRATCH,             /* per-CPU scratch lookup failed */
	SONDE_ERR_LOOP,                /* bpf_loop() refused to run */
	SONDE_ERR_TGID_MAP_FULL,       /* child of an allowed tgid not added */
	/* The table unwinder (bpf/unwind.h). */
	SONDE_ERR_UNWIND_OFFSET,       /* pc - bias is no 32-bit file offset: frame pointers */
	SONDE_ERR_UNWIND_ROW_LOOKUP,   /* a row index outside unwind_rows: frame pointers */
	SONDE_ERR_UNWIND_NO_ROW,       /* pc before the first row of its table: frame pointers */
	SONDE_ERR_UNWIND_BAD_RULE,     /* unknown cfa_kind (the sensor checks them) */
	SONDE_ERR_UNWIND_BAD_CFA,      /* the CFA did not grow above rsp */
	SONDE_ERR_UNWIND_READ_RA,      /* the return address at CFA - 8 could not be read */
	SONDE_ERR_UNWIND_READ_FP,      /* the saved rbp at CFA + fp_off could not be read */
	SONDE_ERR_UNWIND_SIGNAL,       /* the signal frame's sigcontext could not be read */
	SONDE_ERR_UNWIND_FP_FALLBACK,  /* the frame pointer step failed in a frame without a table */
	SONDE_ERR_UNWIND_INDEX,        /* a page index entry missing or out of order: whole-table search */
	SONDE_ERR_REDIRECT_FULL,       /* fork or exec not noted in lpm_redirect */
	SONDE_ERR_UNWIND_GO_SWITCH,    /* at a Go stack switch, no goroutine to go on with */
	SONDE_ERR_MEMORY_COUNTER,      /* a task's fault countdown could not be made: fault not counted */
	SONDE_ERR_MEMORY_VMA,          /* a sampled fault's mapping could not be looked up: sample lost */
	SONDE_ERR_MID_EXEC,            /* a task inside execve(), its new image not set up: no user stack */
	SONDE_ERR__COUNT,
};

#define SONDE_ERR_NAMES                                                       \
	{                                                                     \
		"ringbuf_full", "ringbuf_full_event", "kernel_stack",         \
			"user_read", "user_bad_fp", "user_truncated",         \
			"no_user_regs", "scratch", "loop", "tgid_map_full",   \
			"unwind_offset", "unwind_row_lookup", "unwind_no_row", \
			"unwind_bad_rule", "unwind_bad_cfa", "unwind_read_ra", \
			"unwind_read_fp", "unwind_signal", "unwind_fp_fallback", \
			"unwind_index", "redirect_full", "unwind_go_switch",  \
			"memory_counter", "memory_vma", "mid_exec",           \
	}
