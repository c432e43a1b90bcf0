/* sample.bpf.c - the sampler: a perf_event program that records pid/tid,
 * comm, cpu, time, the kernel stack and a user stack walked by our own
 * unwinder, plus sched tracepoints that tell the sensor about new, exec'ing
 * and exiting processes and let a --pid filter follow children.
 *
 * The user walk uses the unwind tables the sensor loads (bpf/unwind.h):
 * (tgid, pc) -> file table through the `unwind_lpm` trie, then a bounded
 * binary search in `unwind_rows`; frames without a table fall back to the
 * frame pointer.
 *
 * The walk runs in bpf_loop() (5.17+). Kernels without it (5.10-5.16)
 * get the same walk as a chain of tail calls: sonde_sample_tail starts
 * it, sonde_walk_tail walks WALK_FRAMES_PER_CALL frames a call with the
 * state kept in the per-CPU scratch, and the last call sends the record.
 * The sensor loads one path or the other (sensor/main.c).
 *
 * Off-CPU (--off-cpu): when a profiled thread blocks, sched_switch walks
 * its stacks (the kernel's shows what it waits on) and keeps the sample
 * in offcpu_blocked; when the thread is switched in again, the sample
 * goes out weighed by the ns it was off the CPU, if at least
 * offcpu_min_ns (profile SONDE_PROFILE_OFF_CPU).
 *
 * Everything goes out through one ring buffer (`events`); the first u32 of
 * each record is its type (bpf/sample.h). Every failure path counts one
 * enum sonde_bpf_err in the per-CPU `errors` array.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "sample.h"
#include "unwind.h"
#include "probes/go_spans_map.h"
#include "interp.h"
#include "interp_span.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the sensor between open and load. */
const volatile __u8 filter_enabled = 0; /* any of the filters below */
const volatile __u8 filter_tgids = 0;   /* only tgids in allowed_tgids */
const volatile __u64 filter_cgroup_id = 0; /* 0: none; else cgroup v2 id */
const volatile __u32 filter_cgroup_level = 0; /* its depth below the root */
const volatile __u8 keep_idle = 0;      /* keep pid 0 samples */
/* Samples wake the sensor only once this much data waits in the ring
 * buffer; otherwise it drains on its own timer. A wakeup per sample
 * (hundreds a second) sends reschedule IPIs to the CPUs being profiled,
 * which shows up in the profile itself as samples taken on the way back
 * to user mode. 0: wake on every record. */
const volatile __u64 wakeup_bytes = 0;
/* The kernel stack size (THREAD_SIZE; 16 KiB on x86-64, more with KASAN):
 * without bpf_task_pt_regs() (5.15) a task's user registers are found at
 * its top. */
const volatile __u32 thread_size = 16384;
/* --off-cpu: blocks shorter than this are not recorded. */
const volatile __u64 offcpu_min_ns = 1000000;
/* The unwind maps' generation: the sensor adds 1 after each change to
 * unwind_lpm or the rows (struct rule_cache_entry). */
volatile __u64 unwind_gen = 0;
/* The symbolizer connection's generation: the sensor adds 1 for each new
 * one, after emptying the walkers' "already sent" maps; a walker's cache
 * of what it sent holds for one generation (bpf/hotspot_walk.h,
 * struct interp_seen_slot). */
volatile __u64 interp_conn_gen = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* the sensor sets the real size */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SONDE_ERR__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} errors SEC(".maps");

/* tgid -> which interpreter walker runs for it, where its runtime is and
 * the walker's config (bpf/interp.h). Filled by the sensor from the
 * symbolizer's InterpreterConfig (sensor/interp_maps.c). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct sonde_interp_proc);
} interp_procs SEC(".maps");

/* tgid -> 1. Filled by the sensor for --pid, extended on fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} allowed_tgids SEC(".maps");

/* tgid -> the tgid whose unwind_lpm (and interp_procs) entries it uses
 * until the sensor gives it its own; 0: none are valid (frame pointers).
 * A fork's child has its parent's address space, so it unwinds with the
 * parent's entries from its first instruction, and the sensor reads
 * nothing for children that exec or exit within the next flush (most
 * do). An exec makes the old entries wrong until the sensor's first scan
 * of the new image. Deleted at exit, and by the sensor when it binds the
 * process, so only processes younger than that are here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} lpm_redirect SEC(".maps");

/* The tgid whose unwind entries tgid uses (see lpm_redirect). */
static __always_inline __u32 lpm_tgid(__u32 tgid)
{
	__u32 *r = bpf_map_lookup_elem(&lpm_redirect, &tgid);

	return r ? *r : tgid;
}

/* The record is built here, then copied onto the ring with its frames
 * only (bpf_ringbuf_output): bpf_loop() callbacks cannot carry a ring
 * buffer reservation, and reserving the maximum would copy and send
 * mostly unused frames. */
struct user_walk {
	__u64 pc;
	__u64 sp;
	__u64 fp;
	__u64 g;       /* r14 at the sample: Go's g register (Go 1.17+) */
	__u64 r9;      /* r9 at the sample: V8's bytecode offset register (x86-64) */
	__u32 n;       /* frames written */
	__u32 base;    /* where they go: rec.frames[base + i] (after the kernel's) */
	__u32 tgid;
	__u8 outcome;  /* set when the walk stops early */
	__u8 last;     /* write the current pc, then stop */
	__u8 exact_pc; /* pc is where the frame is (frame 0, after a signal),
			* not a return address just past a call */
	__u8 used_fp;  /* some frame had no table */
	__u8 have_map; /* map holds the trie's answer for the last pc looked up */
	__u8 slot;     /* the scratch entry the walk writes (SCRATCH_*) */
	__u8 pad[2];
	/* Consecutive frames are mostly in one file (a library calling
	 * itself, recursion): the trie's answer is kept and reused while the
	 * pc stays inside its mapping. */
	struct sonde_unwind_lpm_value map;
};

/* The rules of the pcs walked lately on this CPU, direct-mapped: a
 * CPU-bound process unwinds the same return addresses sample after
 * sample. An entry is what unwind_find answered for (pc, tgid, exact_pc)
 * while the maps were at generation gen (unwind_gen); a stale one is
 * never used. */
#define RULE_CACHE_SIZE 256
struct rule_cache_entry {
	__u64 pc;
	__u32 tgid;
	__u32 gen;
	__u32 exact_pc;
	__u32 method;
	__u32 x;
	struct sonde_unwind_row row;
};

/* How one frame is unwound (unwind_one; the walker is below). */
enum unwind_method {
	UNWIND_FRAME_POINTER = 1,
	UNWIND_TABLE = 2, /* rule.row: CFA = sp/fp + delta, RA and FP at CFA offsets */
};

struct walk_rule {
	__u32 method; /* enum unwind_method */
	__u32 x;      /* UNWIND_TABLE: the file offset that was looked up */
	struct sonde_unwind_row row;
};

struct unwind_scratch {
	struct sonde_sample rec;
	/* The tail-call walker's state between calls. */
	struct user_walk walk;
	__u32 flags, n_kernel, calls;
	/* Room past rec.frames for an index masked with 0xff: the
	 * interpreter walkers' bound the verifier can follow (never written). */
	__u64 interp_slack[64];
	/* The sampled process's interp_procs entry (kind 0: none) and, for
	 * a JIT kind, the walk's JIT state (bpf/interp_walk.h). */
	struct sonde_interp_proc proc;
	struct sonde_interp_jit jit;
	/* A tracepoint program's go_spans key: its own stack is small
	 * (walk_user_event). */
	struct sonde_go_span_key span_key;
	struct rule_cache_entry rule_cache[RULE_CACHE_SIZE];
	/* The rule of the frame being stepped (unwind_one). */
	struct walk_rule rule;
	/* A JIT kind's step: words read at once (bpf/v8_walk.h), kept off
	 * the BPF stack (the tail walk's calls share 512 bytes). */
	__u64 jit_words[20];
	/* A walker's span of target memory read at once (bpf/interp_span.h):
	 * several fields or entries for one probe read, kept off the BPF
	 * stack. INTERP_SPAN_SLACK bytes past the span keep a masked 8-byte
	 * access inside for the verifier. */
	__u8 span[INTERP_SPAN_BYTES + INTERP_SPAN_SLACK];
	/* What the last walks on this CPU found, by position (interp_span.h). */
	struct interp_seen_slot seen[INTERP_SEEN_SLOTS];
};

/* Two entries a CPU: perf events (hard interrupts) sample into
 * SCRATCH_SAMPLE, and so may interrupt a tracepoint program halfway, which
 * therefore has SCRATCH_EVENT to itself. */
enum { SCRATCH_SAMPLE = 0, SCRATCH_EVENT = 1 };
/* SCRATCH_EVENT as a lookup key off the stack: a tracepoint program's
 * stack counts against the walk's callbacks (walk_user_event). */
static const __u32 scratch_event_key = SCRATCH_EVENT;
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct unwind_scratch);
} scratch SEC(".maps");

/* Every loaded table's rows, in buckets of 8 (bpf/unwind.h). The sensor
 * sets the size (--unwind-rows) and places each file's table in a slice. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sonde_unwind_bucket);
} unwind_rows SEC(".maps");

/* Row i of unwind_rows, or NULL past its end. */
static __always_inline const struct sonde_unwind_row *unwind_row(__u32 i)
{
	__u32 b = i / SONDE_UNWIND_ROWS_PER_BUCKET;
	struct sonde_unwind_bucket *v = bpf_map_lookup_elem(&unwind_rows, &b);

	if (!v)
		return NULL;
	return &v->rows[i & (SONDE_UNWIND_ROWS_PER_BUCKET - 1)];
}

/* Each table's page index (bpf/unwind.h), in buckets of 16 entries. The
 * sensor sets the size with the row array's. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sonde_unwind_index_bucket);
} unwind_index SEC(".maps");

/* Entry i of unwind_index, or -1 past its end. */
static __always_inline __s64 unwind_index_entry(__u32 i)
{
	__u32 b = i / SONDE_UNWIND_INDEX_PER_BUCKET;
	struct sonde_unwind_index_bucket *v = bpf_map_lookup_elem(&unwind_index, &b);

	if (!v)
		return -1;
	return v->first_row[i & (SONDE_UNWIND_INDEX_PER_BUCKET - 1)];
}

/* (tgid, address) -> the table of the file mapped there. Not
 * preallocated: a trie node per prefix the sensor inserts. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 262144);
	__type(key, struct sonde_unwind_lpm_key);
	__type(value, struct sonde_unwind_lpm_value);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} unwind_lpm SEC(".maps");

static __always_inline void count_err(__u32 err)
{
	__u64 *v = bpf_map_lookup_elem(&errors, &err);

	if (v)
		*v += 1; /* per-CPU slot: no atomics needed */
}

/* Does the current task pass the configured filters? */
#include "interp_walk.h"

static __always_inline bool task_allowed(__u32 tgid)
{
	if (!filter_enabled)
		return true;
	if (filter_tgids && !bpf_map_lookup_elem(&allowed_tgids, &tgid))
		return false;
	if (filter_cgroup_id &&
	    bpf_get_current_ancestor_cgroup_id(filter_cgroup_level) != filter_cgroup_id)
		return false;
	return true;
}

/* ---- user stack walker ----
 *
 * Per frame: find how to unwind this pc (unwind_find: a table row, or the
 * frame pointer when the file has no table), then do that unwind step.
 */
/* The kernel's x86-64 signal frame (arch/x86/kernel/signal_64.c): when the
 * handler returns into __restore_rt, rsp points at the struct ucontext
 * after the popped pretcode. These are user ABI and never change, so they
 * are plain constants, checked here against the kernel's own types. */
#define UC_MCONTEXT_OFF 40
#define SIGCONTEXT_BP_OFF 80
#define SIGCONTEXT_SP_OFF 120
#define SIGCONTEXT_IP_OFF 128
_Static_assert(__builtin_offsetof(struct ucontext, uc_mcontext) == UC_MCONTEXT_OFF, "ucontext");
_Static_assert(__builtin_offsetof(struct sigcontext_64, bp) == SIGCONTEXT_BP_OFF, "sigcontext bp");
_Static_assert(__builtin_offsetof(struct sigcontext_64, sp) == SIGCONTEXT_SP_OFF, "sigcontext sp");
_Static_assert(__builtin_offsetof(struct sigcontext_64, ip) == SIGCONTEXT_IP_OFF, "sigcontext ip");

/* The table of the file mapped at st->pc: the last frame's, when the pc is
 * still inside that mapping, else the trie's. NULL: no table. */
static __always_inline const struct sonde_unwind_lpm_value *unwind_mapping(struct user_walk *st)
{
	struct sonde_unwind_lpm_key key = {};
	struct sonde_unwind_lpm_value *v;

	if (st->have_map && st->pc >= st->map.map_start && st->pc < st->map.map_end)
		return &st->map;
	key.prefixlen = SONDE_UNWIND_LPM_PID_BITS + 64;
	key.pid = st->tgid;
	key.addr_be = bpf_cpu_to_be64(st->pc);
	v = bpf_map_lookup_elem(&unwind_lpm, &key);
	if (!v) {
		st->have_map = 0;
		return NULL;
	}
	st->map = *v;
	st->have_map = 1;
	return &st->map;
}

/* Narrows the search for file offset x to [*lo, *lo + *len) with the
 * table's page index; leaves the whole table when it has none or an entry
 * is bad. */
static __always_inline void unwind_narrow(const struct sonde_unwind_lpm_value *v, __u64 x,
					  __u32 *lo, __u32 *len)
{
	__u64 page = x >> (v->page_shift & 63), p;
	__s64 first, last;

	if (v->page_count == 0)
		return;
	if (page < v->page_base) {
		/* Before the first row's page: row 0 says "no row". */
		*len = 1;
		return;
	}
	p = page - v->page_base;
	if (p >= v->page_count)
		p = v->page_count - 1;
	first = unwind_index_entry(v->index_start + (__u32)p);
	last = p + 1 < v->page_count ? unwind_index_entry(v->index_start + (__u32)p + 1)
				     : (__s64)v->row_count - 1;
	if (first < 0 || last < first || last >= v->row_count) {
		count_err(SONDE_ERR_UNWIND_INDEX);
		return;
	}
	*lo = first;
	*len = last - first + 1;
}

/* One step of the binary search, as a bpf_loop() callback: the verifier
 * checks it once, where the same loop written out costs it every
 * iteration's states (most of the sensor's start-up: half a second). */
struct search_state {
	__u32 start, lo, len, x;
	__u32 failed;
};

static long search_step(__u64 index, void *ctx)
{
	struct search_state *ss = ctx;
	const struct sonde_unwind_row *r;
	__u32 half;

	if (ss->len <= 1)
		return 1;
	half = ss->len / 2;
	r = unwind_row(ss->start + ss->lo + half);
	if (!r) {
		ss->failed = 1;
		return 1;
	}
	if (r->pc <= ss->x)
		ss->lo += half;
	ss->len -= half;
	return 0;
}

/* Returns 1 to stop the walk (outcome set), else 0 with rule filled.
 * helper_loop: search with bpf_loop() (a constant: the tail-call walker
 * is for kernels without it). */
static __always_inline int unwind_find(struct user_walk *st, struct walk_rule *rule,
				       bool helper_loop)
{
	const struct sonde_unwind_lpm_value *v;
	const struct sonde_unwind_row *r;
	__u32 start, count, lo = 0, len, idx;
	__u64 x;

	rule->method = UNWIND_FRAME_POINTER;
	v = unwind_mapping(st);
	if (!v)
		return 0;
	x = st->pc - v->bias;
	if (st->pc < v->bias || x > 0xffffffffull) {
		count_err(SONDE_ERR_UNWIND_OFFSET);
		return 0;
	}
	/* A return address is just past the call; the call is what the
	 * caller's row describes (the callee may be noreturn, the call the
	 * last instruction of a function). */
	if (!st->exact_pc && x > 0)
		x--;
	start = v->row_start;
	count = v->row_count;
	if (count == 0)
		return 0;
	len = count;
	unwind_narrow(v, x, &lo, &len);
	/* The last row with pc <= x. The answer stays in [lo, lo + len);
	 * len halves (rounding up) each time: 23 steps cover 2^23 rows; with
	 * the page index it is a few rows, found in two or three steps. */
	if (helper_loop) {
		struct search_state ss = { .start = start, .lo = lo, .len = len, .x = (__u32)x };

		bpf_loop(SONDE_UNWIND_SEARCH_STEPS, search_step, &ss, 0);
		if (ss.failed) {
			count_err(SONDE_ERR_UNWIND_ROW_LOOKUP);
			return 0;
		}
		lo = ss.lo;
		len = 1;
	}
	for (int i = 0; i < SONDE_UNWIND_SEARCH_STEPS; i++) {
		__u32 half;

		if (len <= 1)
			break;
		half = len / 2;
		idx = start + lo + half;
		r = unwind_row(idx);
		if (!r) {
			count_err(SONDE_ERR_UNWIND_ROW_LOOKUP);
			return 0;
		}
		if (r->pc <= x)
			lo += half;
		len -= half;
	}
	idx = start + lo;
	r = unwind_row(idx);
	if (!r) {
		count_err(SONDE_ERR_UNWIND_ROW_LOOKUP);
		return 0;
	}
	if (r->pc > x) {
		count_err(SONDE_ERR_UNWIND_NO_ROW);
		return 0;
	}
	rule->row = *r;
	rule->x = x;
	rule->method = r->cfa_kind == SONDE_CFA_UNSUPPORTED ? UNWIND_FRAME_POINTER : UNWIND_TABLE;
	return 0;
}

/* The frame-pointer step's checks before its read: 1 to stop the walk
 * (the root, or an fp no frame can have; outcome set), else 0. */
static __always_inline int unwind_fp_check(struct user_walk *st)
{
	if (st->fp == 0) {
		st->outcome = SONDE_OUTCOME_COMPLETE;
		return 1;
	}
	/* The x86-64 ABI keeps rbp 16-aligned at a call, so a saved-rbp slot
	 * is 8-aligned at least; and callers' frames are above ours. */
	if ((st->fp & 7) || st->fp < st->sp) {
		count_err(SONDE_ERR_USER_BAD_FP);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	return 0;
}

/* The frame-pointer step from the two words at fp (saved fp, return
 * address): unwind_step_fp's after its read. */
static __always_inline int unwind_fp_apply(struct user_walk *st, const __u64 *frame)
{
	if (frame[1] == 0) {
		/* _start/clone push a zero return address: the root. */
		st->outcome = SONDE_OUTCOME_COMPLETE;
		return 1;
	}
	st->pc = frame[1];
	st->sp = st->fp + 16;
	st->exact_pc = 0;
	if (frame[0] != 0 && frame[0] <= st->fp) {
		count_err(SONDE_ERR_USER_BAD_FP);
		/* The return address is good, the chain above it is not:
		 * keep this frame, stop after it. */
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		st->last = 1;
		return 0;
	}
	st->fp = frame[0];
	return 0;
}

/* Returns 1 to stop the walk (outcome set), 0 to go on with the caller. */
static __always_inline int unwind_step_fp(struct user_walk *st)
{
	__u64 frame[2]; /* saved fp, return address */

	if (unwind_fp_check(st))
		return 1;
	if (bpf_probe_read_user(frame, sizeof(frame), (const void *)st->fp)) {
		count_err(SONDE_ERR_USER_READ);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	return unwind_fp_apply(st, frame);
}

/* __restore_rt: the interrupted registers are in the ucontext at rsp. */
static __always_inline int unwind_step_signal(struct user_walk *st)
{
	/* sigcontext bp .. ip: bp, bx, dx, ax, cx, sp, ip */
	__u64 regs[(SIGCONTEXT_IP_OFF - SIGCONTEXT_BP_OFF) / 8 + 1];

	if (bpf_probe_read_user(regs, sizeof(regs),
				(const void *)(st->sp + UC_MCONTEXT_OFF + SIGCONTEXT_BP_OFF))) {
		count_err(SONDE_ERR_UNWIND_SIGNAL);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	st->fp = regs[0];
	st->sp = regs[(SIGCONTEXT_SP_OFF - SIGCONTEXT_BP_OFF) / 8];
	st->pc = regs[(SIGCONTEXT_IP_OFF - SIGCONTEXT_BP_OFF) / 8];
	if (st->pc == 0) {
		count_err(SONDE_ERR_UNWIND_SIGNAL);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	/* The interrupted instruction itself, not a return address. */
	st->exact_pc = 1;
	return 0;
}

/* Finds the goroutine a Go stack switch left, for a frame in
 * runtime.systemstack or runtime.asmcgocall after the switch to the
 * thread's g0 stack (a return address in it: the switch is done): its g,
 * and the SP the switching function had on the goroutine's stack.
 *  - systemstack: g is the m's curg (the row's off), m from g0, which r14
 *    (Go's g register) holds in Go code; m.g0 must be r14. The SP is the
 *    one it saved in curg.sched.
 *  - asmcgocall: g is at rsp + off on the g0 stack, below it the depth of
 *    the SP under g.stack.hi (the stack may have moved during a callback,
 *    so not the SP itself), which must fall inside g's stack.
 * Returns 0 with *ret_g, *ret_sp, else 1. */
static __always_inline int go_switched_from(const struct user_walk *st, __s32 kind, __s32 off,
					    __u64 *ret_g, __u64 *ret_sp)
{
	__u64 m, g0, g, depth, lo, hi;

	if (kind == SONDE_CFA_GO_SYSTEMSTACK) {
		if (!st->g ||
		    bpf_probe_read_user(&m, sizeof(m), (const void *)(st->g + SONDE_GO_G_M)) ||
		    bpf_probe_read_user(&g0, sizeof(g0), (const void *)(m + SONDE_GO_M_G0)) ||
		    g0 != st->g ||
		    bpf_probe_read_user(&g, sizeof(g), (const void *)(m + (__s64)off)) || !g ||
		    g == g0 ||
		    bpf_probe_read_user(ret_sp, sizeof(*ret_sp),
					(const void *)(g + SONDE_GO_G_SCHED + SONDE_GO_GOBUF_SP)))
			return 1;
		*ret_g = g;
		return 0;
	}
	if (off < 8 ||
	    bpf_probe_read_user(&g, sizeof(g), (const void *)(st->sp + off)) || !g ||
	    bpf_probe_read_user(&depth, sizeof(depth), (const void *)(st->sp + off - 8)) ||
	    bpf_probe_read_user(&lo, sizeof(lo), (const void *)(g + SONDE_GO_G_STACK_LO)) ||
	    bpf_probe_read_user(&hi, sizeof(hi), (const void *)(g + SONDE_GO_G_STACK_HI)) ||
	    depth == 0 || depth > hi - lo)
		return 1;
	*ret_g = g;
	*ret_sp = hi - depth;
	return 0;
}

/* A frame in runtime.systemstack or asmcgocall after its stack switch:
 * the walk goes on with the goroutine it came from (go_switched_from),
 * as Go's own profiler does for systemstack. Where that fails (r14 not g,
 * the leaf is the switching function itself, before the switch) the
 * stack ends here, complete, as it did before switches were followed.
 * kind, off, frame: the row's cfa_kind, cfa_off and fp_off
 * (bpf/unwind.h). Returns 1 to stop the walk, else 0.
 *
 * A global function, verified once on its own: inlined, its reads
 * multiplied the walk loop's states past the verifier's budget. */
__noinline int go_switch_step(struct user_walk *st, __s32 kind, __s32 off, __s32 frame)
{
	__u64 g, sp, bp, ra;

	if (!st)
		return 1;
	if (st->exact_pc || frame < 0 || frame > SONDE_GO_MAX_SWITCH_FRAME ||
	    go_switched_from(st, kind, off, &g, &sp) || !sp ||
	    bpf_probe_read_user(&bp, sizeof(bp),
				(const void *)(g + SONDE_GO_G_SCHED + SONDE_GO_GOBUF_BP)) ||
	    bpf_probe_read_user(&ra, sizeof(ra), (const void *)(sp + frame)) || !ra ||
	    (frame > 0 && bpf_probe_read_user(&bp, sizeof(bp), (const void *)(sp + frame - 8)))) {
		count_err(SONDE_ERR_UNWIND_GO_SWITCH);
		st->outcome = SONDE_OUTCOME_COMPLETE;
		return 1;
	}
	/* sp is the switching function's SP on the goroutine's stack. */
	st->pc = ra;
	st->sp = sp + frame + 8;
	st->fp = bp;
	st->exact_pc = 0;
	return 0;
}

/* Applies a table row. Returns 1 to stop the walk (outcome set), else 0. */
static __always_inline int unwind_step_table(struct user_walk *st, const struct walk_rule *rule)
{
	__u64 cfa, ra, fp;

	switch (rule->row.cfa_kind) {
	case SONDE_CFA_SP:
		cfa = st->sp + (__s64)rule->row.cfa_off;
		break;
	case SONDE_CFA_FP:
		cfa = st->fp + (__s64)rule->row.cfa_off;
		break;
	case SONDE_CFA_PLT:
		/* ld's .plt entries: jmp *GOT (6 bytes), push $n (5), jmp
		 * PLT0 (5); after the push (byte 11 on) 8 more bytes are on
		 * the stack. File offsets and vaddrs agree mod 16. */
		cfa = st->sp + 8 + ((rule->x & 15) >= 11 ? 8 : 0);
		break;
	case SONDE_CFA_SIGNAL:
		return unwind_step_signal(st);
	case SONDE_CFA_STOP:
		st->outcome = SONDE_OUTCOME_COMPLETE;
		return 1;
	case SONDE_CFA_GO_SYSTEMSTACK:
	case SONDE_CFA_GO_ASMCGOCALL:
		/* (a global function's result is any number to the verifier) */
		return go_switch_step(st, rule->row.cfa_kind, rule->row.cfa_off, rule->row.fp_off) ?
			       1 : 0;
	default:
		count_err(SONDE_ERR_UNWIND_BAD_RULE);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	if (cfa <= st->sp) {
		count_err(SONDE_ERR_UNWIND_BAD_CFA);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	if (bpf_probe_read_user(&ra, sizeof(ra), (const void *)(cfa - 8))) {
		count_err(SONDE_ERR_UNWIND_READ_RA);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	if (rule->row.fp_kind == SONDE_FP_AT_CFA) {
		if (bpf_probe_read_user(&fp, sizeof(fp),
					(const void *)(cfa + (__s64)rule->row.fp_off))) {
			count_err(SONDE_ERR_UNWIND_READ_FP);
			st->outcome = SONDE_OUTCOME_READ_ERROR;
			return 1;
		}
		st->fp = fp;
	}
	if (ra == 0) {
		st->outcome = SONDE_OUTCOME_COMPLETE;
		return 1;
	}
	st->pc = ra;
	st->sp = cfa;
	st->exact_pc = 0;
	return 0;
}

/* unwind_find through this CPU's rule cache: a hit skips the trie, the
 * page index and the binary search (half of a sample's BPF time with a
 * CPU-bound process, docs/unwind-tables.md). The generation is read before
 * the trie is: an entry stored under generation g holds what the trie
 * said at or after g, and the sensor bumps it after each change. */
static __always_inline int unwind_rule(struct unwind_scratch *s, struct user_walk *st,
				       struct walk_rule *rule, bool helper_loop)
{
	__u32 slot = (__u32)(st->pc ^ (st->pc >> 12) ^ st->tgid) & (RULE_CACHE_SIZE - 1);
	struct rule_cache_entry *e = &s->rule_cache[slot];
	__u32 gen = (__u32)unwind_gen;

	if (e->pc == st->pc && e->tgid == st->tgid && e->gen == gen &&
	    e->exact_pc == st->exact_pc) {
		rule->method = e->method;
		rule->x = e->x;
		rule->row = e->row;
		return 0;
	}
	if (unwind_find(st, rule, helper_loop))
		return 1;
	e->pc = st->pc;
	e->tgid = st->tgid;
	e->gen = gen;
	e->exact_pc = st->exact_pc;
	e->method = rule->method;
	e->x = rule->x;
	e->row = rule->row;
	return 0;
}

/* One frame: records st->pc, then steps to the caller. Returns 1 when the
 * walk is over (outcome set), 0 to go on. */
static __always_inline long unwind_one(struct user_walk *st, bool helper_loop)
{
	struct unwind_scratch *s;
	struct walk_rule *rule;
	__u32 slot = st->slot;
	__u32 n = st->n, at = st->base + st->n;
	int r;

	s = bpf_map_lookup_elem(&scratch, &slot);
	if (!s) {
		count_err(SONDE_ERR_SCRATCH);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	if (n >= SONDE_MAX_USER_FRAMES) {
		count_err(SONDE_ERR_USER_TRUNCATED);
		st->outcome = SONDE_OUTCOME_TRUNCATED;
		return 1;
	}
	if (at >= SONDE_MAX_KERNEL_FRAMES + SONDE_MAX_USER_FRAMES) {
		count_err(SONDE_ERR_SCRATCH); /* cannot happen: base <= the kernel maximum */
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	s->rec.frames[at] = st->pc;
	st->n = n + 1;
	if (st->last)
		return 1;
	/* Whole (it may be stored in the cache), in the scratch: every
	 * walk's per-frame callback has this frame on its stack. */
	rule = &s->rule;
	__builtin_memset(rule, 0, sizeof(*rule));

	/* A JIT runtime's frame (bpf/interp_walk.h): its kind steps it. */
	if (s->jit.kind) {
		r = interp_jit_step(s, st, n, 0);
		/* (a global function's result is any number to the verifier) */
		if (r >= 0)
			return r ? 1 : 0;
	}
	if (unwind_rule(s, st, rule, helper_loop))
		return 1;
	switch (rule->method) {
	case UNWIND_TABLE:
		return unwind_step_table(st, rule);
	case UNWIND_FRAME_POINTER:
		if (s->jit.kind) {
			r = interp_jit_step(s, st, n, 1);
			if (r >= 0)
				return r ? 1 : 0;
		}
		st->used_fp = 1;
		r = unwind_step_fp(st);
		/* No table, and no frame pointer either: say so, rather than
		 * blame the stack. */
		if (st->outcome == SONDE_OUTCOME_READ_ERROR) {
			count_err(SONDE_ERR_UNWIND_FP_FALLBACK);
			st->outcome = SONDE_OUTCOME_NO_TABLE;
		}
		return r;
	default:
		st->outcome = SONDE_OUTCOME_NO_TABLE;
		return 1;
	}
}

static long unwind_frame(__u64 index, void *ctx)
{
	return unwind_one(ctx, true);
}

/* Did the sample interrupt user mode? The perf_event context is the UAPI
 * pt_regs, where cs is a whole unsigned long (vmlinux.h's is a u16 in a
 * union), and the verifier allows only 8-byte loads of it. Bits 0-1 are
 * the privilege level. */
static __always_inline bool sample_in_user(struct bpf_perf_event_data *ctx)
{
	return *(__u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs)) & 3;
}

/* walk_init()'s "st is ready: walk it" (no enum sonde_stack_outcome). */
#define WALK_READY 0xff

/* Is the current task inside execve() with its new address space
 * installed but not yet set up? Its saved user registers are then the
 * old image's, whose stack is gone: a walk would read nothing (a
 * read_error) or, through the parent's unwind entries, garbage. The new
 * mm's env_end stays 0 (mm_alloc() zeroes it) until create_elf_tables()
 * sets it, just before the registers are set for the new image's entry
 * (arg_start is set sooner, by setup_arg_pages()). in_execve covers a
 * whole execve(), a failed
 * one (a shell's PATH search) included, whose mm is still the old one
 * and whose stack is walked. Not inlined: its reads' stack would count
 * in every program's deepest chain (sonde_sys_exit's is at 512 bytes). */
static __noinline bool task_mid_exec(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	if (!bpf_core_field_exists(task->in_execve) ||
	    !BPF_CORE_READ_BITFIELD_PROBED(task, in_execve))
		return false;
	return BPF_CORE_READ(task, mm, env_end) == 0;
}

/* Sets up st for a walk from the user registers: the sample's own when it
 * interrupted user mode, else those saved at kernel entry (task_regs).
 * Returns WALK_READY with st ready (the caller walks), or the outcome of
 * a stack that is not walked: SONDE_OUTCOME_NONE (no user stack) for a
 * task between two images (task_mid_exec). */
static __always_inline __u8 walk_init(struct bpf_perf_event_data *ctx, bool in_user,
				      struct pt_regs *task_regs, __u32 tgid, __u32 base,
				      __u32 *flags, struct user_walk *st)
{
	__builtin_memset(st, 0, sizeof(*st));
	if (in_user) {
		st->pc = ctx->regs.ip;
		st->sp = ctx->regs.sp;
		st->fp = ctx->regs.bp;
		st->g = ctx->regs.r14;
		st->r9 = ctx->regs.r9;
		*flags |= SONDE_SAMPLE_IN_USER;
	} else {
		if (task_mid_exec()) {
			count_err(SONDE_ERR_MID_EXEC);
			return SONDE_OUTCOME_NONE;
		}
		if (!task_regs) {
			count_err(SONDE_ERR_NO_USER_REGS);
			return SONDE_OUTCOME_READ_ERROR;
		}
		st->pc = BPF_CORE_READ(task_regs, ip);
		st->sp = BPF_CORE_READ(task_regs, sp);
		st->fp = BPF_CORE_READ(task_regs, bp);
		st->g = BPF_CORE_READ(task_regs, r14);
		st->r9 = BPF_CORE_READ(task_regs, r9);
	}
	if (st->pc == 0) {
		count_err(SONDE_ERR_NO_USER_REGS);
		return SONDE_OUTCOME_READ_ERROR;
	}
	st->tgid = lpm_tgid(tgid);
	st->base = base;
	st->exact_pc = 1;
	st->outcome = SONDE_OUTCOME_TRUNCATED; /* unless the walk says otherwise */
	*flags |= SONDE_SAMPLE_USER_PC0;
	return WALK_READY;
}

/* Walks the user stack into the scratch record's frames from base on.
 * Returns the outcome. */
static __always_inline __u8 walk_user(struct bpf_perf_event_data *ctx, bool in_user, __u32 tgid,
				      __u32 base, __u32 *flags, __u32 *ret_n)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct user_walk st;
	__u8 outcome;

	*ret_n = 0;
	if (!task->mm)
		return SONDE_OUTCOME_NONE; /* kernel thread */
	outcome = walk_init(ctx, in_user, in_user ? NULL : (struct pt_regs *)bpf_task_pt_regs(task),
			    tgid, base, flags, &st);
	if (outcome != WALK_READY)
		return outcome;
#ifdef SONDE_HOTSPOT_COUNT_READS
	{
		struct hs_phase *ph = hs_ph();

		if (ph)
			ph->t_walk0 = bpf_ktime_get_ns();
	}
#endif
	/* One extra iteration: it notices "more than the maximum". */
	if (bpf_loop(SONDE_MAX_USER_FRAMES + 1, unwind_frame, &st, 0) < 0) {
		count_err(SONDE_ERR_LOOP);
		return SONDE_OUTCOME_READ_ERROR;
	}
#ifdef SONDE_HOTSPOT_COUNT_READS
	{
		struct hs_phase *ph = hs_ph();

		if (ph)
			ph->t_walk1 = bpf_ktime_get_ns();
	}
#endif
	*ret_n = st.n;
	if (st.used_fp)
		*flags |= SONDE_SAMPLE_FP_FALLBACK;
	return st.outcome;
}

/* A tracepoint's walk: its state is the SCRATCH_EVENT entry's walk (a
 * tracepoint program's own stack is its caller's budget: the walk's
 * callbacks nest up to five calls deep). */
static long unwind_frame_event(__u64 index, void *ctx)
{
	struct unwind_scratch *s = bpf_map_lookup_elem(&scratch, &scratch_event_key);

	if (!s) {
		count_err(SONDE_ERR_SCRATCH);
		return 1;
	}
	return unwind_one(&s->walk, true);
}

/* walk_user() for a tracepoint program, from the given user registers
 * (trusted or probe-read), into the SCRATCH_EVENT entry s; in_user: they
 * are the event's own (it happened in user mode). Returns the outcome. */
static __always_inline __u8 walk_user_event(struct unwind_scratch *s, struct pt_regs *regs,
					    bool in_user, __u32 tgid, __u32 base, __u32 *flags,
					    __u32 *ret_n)
{
	__u8 outcome;

	*ret_n = 0;
	outcome = walk_init(NULL, false, regs, tgid, base, flags, &s->walk);
	if (outcome != WALK_READY)
		return outcome;
	if (in_user)
		*flags |= SONDE_SAMPLE_IN_USER;
	s->walk.slot = SCRATCH_EVENT;
	if (bpf_loop(SONDE_MAX_USER_FRAMES + 1, unwind_frame_event, NULL, 0) < 0) {
		count_err(SONDE_ERR_LOOP);
		return SONDE_OUTCOME_READ_ERROR;
	}
	*ret_n = s->walk.n;
	if (s->walk.used_fp)
		*flags |= SONDE_SAMPLE_FP_FALLBACK;
	return s->walk.outcome;
}

static __always_inline __u64 sample_wakeup_flags(void)
{
	if (!wakeup_bytes)
		return 0;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									      : BPF_RB_NO_WAKEUP;
}

static __always_inline struct pt_regs *task_user_regs(struct task_struct *task);

/* Go probes (docs/go-probes.md): a sample of a goroutine serving a traced
 * request carries its span. Under Go's register ABI r14 holds the
 * goroutine (g) in user code, and go_spans is keyed by (tgid, g); a
 * thread interrupted in the kernel has its user r14 saved at entry. */
static __always_inline void tag_go_span_g(__u32 tgid, __u64 goroutine, struct sonde_sample *rec)
{
	struct sonde_go_span_key key = { .pid = tgid, .goroutine = goroutine };
	struct sonde_go_span_ctx *sc;

	__builtin_memset(rec->trace_id, 0, sizeof(rec->trace_id));
	__builtin_memset(rec->span_id, 0, sizeof(rec->span_id));
	if (tgid == 0 || !goroutine)
		return;
	sc = bpf_map_lookup_elem(&go_spans, &key);
	if (!sc)
		return;
	__builtin_memcpy(rec->trace_id, sc->trace_id, sizeof(rec->trace_id));
	__builtin_memcpy(rec->span_id, sc->span_id, sizeof(rec->span_id));
}

/* tag_go_span_g() with its key in the scratch entry s. */
static __always_inline void tag_go_span_event(struct unwind_scratch *s, __u32 tgid, __u64 goroutine)
{
	struct sonde_sample *rec = &s->rec;
	struct sonde_go_span_ctx *sc;

	__builtin_memset(rec->trace_id, 0, sizeof(rec->trace_id));
	__builtin_memset(rec->span_id, 0, sizeof(rec->span_id));
	if (!goroutine)
		return;
	__builtin_memset(&s->span_key, 0, sizeof(s->span_key));
	s->span_key.pid = tgid;
	s->span_key.goroutine = goroutine;
	sc = bpf_map_lookup_elem(&go_spans, &s->span_key);
	if (!sc)
		return;
	__builtin_memcpy(rec->trace_id, sc->trace_id, sizeof(rec->trace_id));
	__builtin_memcpy(rec->span_id, sc->span_id, sizeof(rec->span_id));
}

static __always_inline void tag_go_span(struct bpf_perf_event_data *ctx, __u32 tgid,
					struct sonde_sample *rec)
{
	struct pt_regs *regs;
	__u64 g = 0;

	if (tgid == 0)
		g = 0;
	else if (sample_in_user(ctx))
		g = ctx->regs.r14;
	else if ((regs = task_user_regs((struct task_struct *)bpf_get_current_task())))
		g = BPF_CORE_READ(regs, r14);
	tag_go_span_g(tgid, g, rec);
}

/* The common start of a sample: filters, the scratch record and the
 * kernel stack. NULL: no sample. */
static __always_inline struct unwind_scratch *sample_begin(struct bpf_perf_event_data *ctx,
							   __u32 tgid, __u32 *ret_n_kernel)
{
	struct unwind_scratch *s;
	__u32 zero = 0;
	long n;

	if (tgid == 0 && !keep_idle)
		return NULL;
	if (!task_allowed(tgid))
		return NULL;
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s) {
		count_err(SONDE_ERR_SCRATCH);
		return NULL;
	}
	/* Called for user-mode samples too, although their kernel stack is
	 * empty: skipping it (1 µs a sample) made perf record --call-graph
	 * dwarf, run beside us in test_unwind.py, see the workload's chains
	 * 5-6 points differently, reproducibly, for reasons not understood
	 * yet; until they are, keep the cost rather than the doubt. */
	n = bpf_get_stack(ctx, s->rec.frames, SONDE_MAX_KERNEL_FRAMES * sizeof(__u64), 0);
	if (n < 0) {
		count_err(SONDE_ERR_KERNEL_STACK);
		n = 0;
	}
	n /= sizeof(__u64);
	*ret_n_kernel = n > SONDE_MAX_KERNEL_FRAMES ? SONDE_MAX_KERNEL_FRAMES : (__u32)n;
	tag_go_span(ctx, tgid, &s->rec);
#ifdef SONDE_HOTSPOT_COUNT_READS
	{
		__u64 tb = bpf_ktime_get_ns();

		interp_jit_begin(s, tgid, SCRATCH_SAMPLE);
		struct hs_phase *ph = hs_ph();
		if (ph && ph->claimed)
			interp_measure_add(26, bpf_ktime_get_ns() - tb);
	}
#else
	interp_jit_begin(s, tgid, SCRATCH_SAMPLE);
#endif
	s->rec.profile = SONDE_PROFILE_CPU;
	s->rec.weight = 0;
	return s;
}

/* Fills the record's header, walks the interpreter frames, and returns
 * the record's size with its frames only. The caller has set
 * rec.profile and rec.weight (sample_begin: CPU, 0). */
static __always_inline __u64 sample_fill(struct unwind_scratch *s, __u64 id, __u32 n_kernel,
					 __u32 n_user, __u8 outcome, __u32 flags)
{
	struct sonde_sample *rec = &s->rec;
	__u32 n_interp;
	int found;
	__u64 size;

	if (n_user > SONDE_MAX_USER_FRAMES)
		n_user = SONDE_MAX_USER_FRAMES;
	if (n_kernel > SONDE_MAX_KERNEL_FRAMES)
		n_kernel = SONDE_MAX_KERNEL_FRAMES;
	rec->outcome = outcome;
	rec->type = SONDE_REC_SAMPLE;
	rec->pid = id >> 32;
	rec->tid = (__u32)id;
	rec->cpu = bpf_get_smp_processor_id();
	rec->ktime_ns = bpf_ktime_get_ns();
	rec->cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
	rec->flags = flags;
	rec->n_kernel = n_kernel;
	rec->n_user = n_user;
	__builtin_memset(rec->pad, 0, sizeof(rec->pad));
	rec->interp_kind = SONDE_INTERP_NONE;
	found = interp_walk(s, id >> 32, (__u32)id, n_kernel + n_user);
	if (found >= 0)
		rec->flags |= SONDE_SAMPLE_INTERP;
	n_interp = found > 0 ? (__u32)found : 0;
	rec->n_interp = n_interp;

	size = SONDE_SAMPLE_SIZE(n_kernel, n_user + n_interp);
	if (size > sizeof(*rec)) /* cannot happen; a bound for the verifier */
		size = sizeof(*rec);
	return size;
}

/* Fills the record's header and sends it with its frames only. */
static __always_inline void sample_send(struct unwind_scratch *s, __u64 id, __u32 n_kernel,
					__u32 n_user, __u8 outcome, __u32 flags)
{
	__u64 size = sample_fill(s, id, n_kernel, n_user, outcome, flags);

	if (bpf_ringbuf_output(&events, &s->rec, size, sample_wakeup_flags()))
		count_err(SONDE_ERR_RINGBUF_FULL);
}

SEC("perf_event")
int sonde_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 flags = 0, n_user = 0, n_kernel = 0;
	struct unwind_scratch *s;
	__u8 outcome;

#ifdef SONDE_HOTSPOT_COUNT_READS
	struct hs_phase *ph = hs_ph();
	__u64 tp = bpf_ktime_get_ns();

	if (ph) {
		ph->claimed = 0;
		ph->t_prog = tp;
	}
#endif
	s = sample_begin(ctx, id >> 32, &n_kernel);
	if (!s)
		return 0;
#ifdef SONDE_HOTSPOT_COUNT_READS
	if (ph)
		ph->t_begin_end = bpf_ktime_get_ns();
#endif
	outcome = walk_user(ctx, sample_in_user(ctx), id >> 32, n_kernel, &flags, &n_user);
	sample_send(s, id, n_kernel, n_user, outcome, flags);
#ifdef SONDE_HOTSPOT_COUNT_READS
	ph = hs_ph();
	if (ph && ph->claimed) {
		__u64 now = bpf_ktime_get_ns();

		interp_measure_add(4, now - ph->t_prog);
		interp_measure_add(5, ph->t_begin_end - ph->t_prog);
		if (ph->steps) {
			interp_measure_add(6, ph->t_first - ph->t_walk0);
			interp_measure_add(7, ph->t_last - ph->t_first);
			interp_measure_add(8, ph->t_walk1 - ph->t_last);
			interp_measure_add(10, ph->first_n);
			interp_measure_add(11, n_user - ph->last_n - 1);
			interp_measure_add(13, ph->t_step_sum);
			interp_measure_add(14, 1);
		}
		interp_measure_add(9, now - ph->t_walk1);
		interp_measure_add(12, n_user);
		interp_measure_add(15, n_kernel);
	} else if (ph) {
		/* a walked sample not claimed (a native-only sensor's) */
		interp_measure_add(45, bpf_ktime_get_ns() - ph->t_prog);
		interp_measure_add(46, 1);
		interp_measure_add(47, n_user);
	}
#endif
	return 0;
}

/* ---- the same walk without bpf_loop(): tail calls ---- */

/* Frames a call; 17 calls cover SONDE_MAX_USER_FRAMES + 1 (the kernel
 * allows 33 tail calls in a chain). */
#define WALK_FRAMES_PER_CALL 8
#define WALK_MAX_CALLS ((SONDE_MAX_USER_FRAMES + 1 + WALK_FRAMES_PER_CALL - 1) / WALK_FRAMES_PER_CALL)

/* Slot 0: sonde_walk_tail, put there by the sensor when it uses this path. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} walk_progs SEC(".maps");

/* Ends a tail-call walk: sends what the scratch holds. */
static __always_inline void walk_tail_send(struct unwind_scratch *s, __u64 id)
{
	__u32 flags = s->flags;

	if (s->walk.used_fp)
		flags |= SONDE_SAMPLE_FP_FALLBACK;
	sample_send(s, id, s->n_kernel, s->walk.n, s->walk.outcome, flags);
}

SEC("perf_event")
int sonde_walk_tail(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct unwind_scratch *s;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s) {
		count_err(SONDE_ERR_SCRATCH);
		return 0;
	}
	for (int i = 0; i < WALK_FRAMES_PER_CALL; i++) {
		if (unwind_one(&s->walk, false)) {
			walk_tail_send(s, id);
			return 0;
		}
	}
	if (s->calls < WALK_MAX_CALLS) {
		s->calls++;
		bpf_tail_call(ctx, &walk_progs, 0);
	}
	/* Out of calls (cannot happen: the walk stops at the maximum), or
	 * the tail call failed. */
	count_err(SONDE_ERR_LOOP);
	s->walk.outcome = SONDE_OUTCOME_TRUNCATED;
	walk_tail_send(s, id);
	return 0;
}

/* task_pt_regs() without bpf_task_pt_regs(): the user registers sit at
 * the top of the task's kernel stack (x86-64), below 16 bytes of padding
 * on kernels with FRED (6.9+). The right place is the one whose saved cs
 * is a user segment (privilege level 3). NULL: neither. */
static __always_inline struct pt_regs *task_user_regs(struct task_struct *task)
{
	char *top = (char *)BPF_CORE_READ(task, stack);
	struct pt_regs *r;

	if (!top)
		return NULL;
	top += thread_size;
	r = (struct pt_regs *)top - 1;
	if ((BPF_CORE_READ(r, cs) & 3) == 3)
		return r;
	r = (struct pt_regs *)(top - 16) - 1;
	if ((BPF_CORE_READ(r, cs) & 3) == 3)
		return r;
	return NULL;
}

SEC("perf_event")
int sonde_sample_tail(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct pt_regs *regs = NULL;
	struct unwind_scratch *s;
	__u32 n_kernel = 0;
	bool in_user;
	__u8 outcome;

	s = sample_begin(ctx, id >> 32, &n_kernel);
	if (!s)
		return 0;
	s->n_kernel = n_kernel;
	s->flags = 0;
	s->calls = 0;
	if (!BPF_CORE_READ(task, mm)) {
		/* A kernel thread. */
		sample_send(s, id, n_kernel, 0, SONDE_OUTCOME_NONE, 0);
		return 0;
	}
	in_user = sample_in_user(ctx);
	if (!in_user)
		regs = task_user_regs(task);
	outcome = walk_init(ctx, in_user, regs, id >> 32, n_kernel, &s->flags, &s->walk);
	if (outcome != WALK_READY) {
		sample_send(s, id, n_kernel, 0, outcome, s->flags);
		return 0;
	}
	bpf_tail_call(ctx, &walk_progs, 0);
	count_err(SONDE_ERR_LOOP);
	sample_send(s, id, n_kernel, 0, SONDE_OUTCOME_READ_ERROR, s->flags);
	return 0;
}

static __always_inline void send_proc_event(__u32 type, __u32 pid, __u32 ppid,
					    __u64 start_ticks, __u64 wake)
{
	struct sonde_proc_event *ev;

	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		count_err(SONDE_ERR_RINGBUF_FULL_EVENT);
		return;
	}
	ev->type = type;
	ev->pid = pid;
	ev->ppid = ppid;
	ev->pad = 0;
	ev->ktime_ns = bpf_ktime_get_ns();
	ev->start_ticks = start_ticks;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	bpf_ringbuf_submit(ev, wake);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sonde_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, redirect;
	__u8 one = 1;
	__u64 start;

	if (ptgid == ctgid)
		return 0; /* a new thread, not a new process */
	hotspot_proc_forget(ctgid);
	/* Follow children: the child of an allowed tgid is allowed. The
	 * cgroup filter follows by itself (children inherit the cgroup). */
	if (filter_enabled && filter_tgids) {
		if (!bpf_map_lookup_elem(&allowed_tgids, &ptgid))
			return 0;
		if (bpf_map_update_elem(&allowed_tgids, &ctgid, &one, BPF_ANY))
			count_err(SONDE_ERR_TGID_MAP_FULL);
	}
	if (!task_allowed(ptgid))
		return 0;
	/* The child unwinds with what its parent unwinds with. */
	redirect = lpm_tgid(ptgid);
	if (bpf_map_update_elem(&lpm_redirect, &ctgid, &redirect, BPF_ANY))
		count_err(SONDE_ERR_REDIRECT_FULL);
	/* /proc/PID/stat's starttime: start_boottime in USER_HZ (100) ticks. */
	start = BPF_CORE_READ(child, start_boottime) / 10000000ull;
	/* No wakeup: the sensor needs nothing from /proc for a fork (the
	 * child is a copy of its parent), and it sees the event before the
	 * child's samples, which follow it in the ring. */
	send_proc_event(SONDE_REC_FORK, ctgid, ptgid, start, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Processes in their first second after an exec -> the executable pages
 * their mm had at the last wakeup (mm->exec_vm). */
struct young_exec {
	__u64 exec_ns;
	__u64 exec_vm;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct young_exec);
} young_execs SEC(".maps");

#define YOUNG_EXEC_NS 1000000000ull

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sonde_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, none = 0;
	struct young_exec young;

	hotspot_proc_forget(tgid);
	if (!task_allowed(tgid))
		return 0;
	/* The old image's entries are wrong now: frame pointers until the
	 * sensor has scanned the new one. */
	if (bpf_map_update_elem(&lpm_redirect, &tgid, &none, BPF_ANY))
		count_err(SONDE_ERR_REDIRECT_FULL);
	/* Wake the sensor: samples do not (wakeup_bytes), so it is usually
	 * behind, and the default (wake only a caught-up consumer) would
	 * leave the new image unscanned until the next timed drain. */
	send_proc_event(SONDE_REC_EXEC, tgid, 0, 0, BPF_RB_FORCE_WAKEUP);
	/* Its libraries, mapped next, wake the sensor (sonde_mmap_released):
	 * what the kernel mapped (the executable, ld.so) is counted now and
	 * scanned at this event. */
	young.exec_ns = bpf_ktime_get_ns();
	young.exec_vm = BPF_CORE_READ(p, mm, exec_vm);
	bpf_map_update_elem(&young_execs, &tgid, &young, BPF_ANY);
	return 0;
}

/* Code mapped by ld.so in a process's first milliseconds (libc and the
 * other libraries) wakes the sensor, whose rescan of the maps puts the
 * files' unwind entries in BPF before most of that code has run: until
 * then their frames have no table, and ld.so's and libc's have no frame
 * pointers either. The young steps (2 ms after the exec, then 10, 40 and
 * 150) remain for a kernel without this tracepoint. mmap(2), mprotect(2)
 * and munmap(2) take mmap_lock for writing; at its release the mapping is
 * in place, and a change of the mm's executable pages (exec_vm) says code
 * was mapped. Neither kprobes nor fentry can be counted on here (some
 * kernels refuse tracing programs), raw tracepoints can; read releases
 * (most of them) return at the first test. Loaded only where the
 * tracepoint is (mm, write): see loader_configure. */
SEC("tp_btf/mmap_lock_released")
int BPF_PROG(sonde_mmap_released, struct mm_struct *mm, bool write)
{
	struct task_struct *task;
	struct young_exec *y;
	__u32 tgid;
	__u64 vm;

	if (!write)
		return 0;
	task = bpf_get_current_task_btf();
	if (task->mm != mm)
		return 0; /* another process's lock (e.g. a /proc reader) */
	tgid = bpf_get_current_pid_tgid() >> 32;
	y = bpf_map_lookup_elem(&young_execs, &tgid);
	if (!y)
		return 0;
	if (bpf_ktime_get_ns() - y->exec_ns > YOUNG_EXEC_NS) {
		bpf_map_delete_elem(&young_execs, &tgid);
		return 0;
	}
	vm = mm->exec_vm;
	if (vm <= y->exec_vm)
		return 0;
	y->exec_vm = vm;
	send_proc_event(SONDE_REC_MMAP, tgid, 0, 0, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/* The group_dead argument exists only since 6.x kernels; the leader test
 * below works everywhere and is what we mean: the process is going away
 * when its leader exits (its other threads are reaped with it). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sonde_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	if ((__u32)id != tgid)
		return 0; /* not the leader */
	hotspot_proc_forget(tgid);
	if (!task_allowed(tgid))
		return 0;
	if (filter_enabled && filter_tgids)
		bpf_map_delete_elem(&allowed_tgids, &tgid);
	bpf_map_delete_elem(&lpm_redirect, &tgid);
	bpf_map_delete_elem(&young_execs, &tgid);
	/* No wakeup: an exit is handled at the next drain, in ring order. */
	send_proc_event(SONDE_REC_EXIT, tgid, 0, 0, BPF_RB_NO_WAKEUP);
	return 0;
}

/* ---- off-CPU ---- */

/* tid -> the sample of a profiled thread that blocked, stacks walked when
 * it left the CPU (ktime_ns: when), waiting for it to run again. LRU: a
 * thread that blocks and exits never runs again, and its entry is the one
 * to go. 2048 threads blocked at once at 1.6 KiB each. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2048);
	__type(key, __u32);
	__type(value, struct sonde_sample);
} offcpu_blocked SEC(".maps");

/* bpf_loop()'s step for the off-CPU walk, whose state is the scratch's
 * (as the tail-call walker's): on the program's stack it passed the
 * verifier's 512 bytes with the walk's own frames on top. */
static long offcpu_unwind_frame(__u64 index, void *ctx)
{
	struct unwind_scratch *s;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s) {
		count_err(SONDE_ERR_SCRATCH);
		return 1;
	}
	return unwind_one(&s->walk, true);
}

/* The user stack of the current task, in the kernel, into the scratch
 * record's frames from base on; s->flags and s->walk say how it went.
 * Returns the outcome. */
static __always_inline __u8 offcpu_walk_user(struct unwind_scratch *s, __u32 tgid, __u32 base)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u8 outcome;

	s->flags = 0;
	s->walk.n = 0;
	if (!task->mm)
		return SONDE_OUTCOME_NONE; /* kernel thread */
	outcome = walk_init(NULL, false, (struct pt_regs *)bpf_task_pt_regs(task), tgid, base,
			    &s->flags, &s->walk);
	if (outcome != WALK_READY)
		return outcome;
	if (bpf_loop(SONDE_MAX_USER_FRAMES + 1, offcpu_unwind_frame, NULL, 0) < 0) {
		count_err(SONDE_ERR_LOOP);
		s->walk.n = 0;
		return SONDE_OUTCOME_READ_ERROR;
	}
	if (s->walk.used_fp)
		s->flags |= SONDE_SAMPLE_FP_FALLBACK;
	return s->walk.outcome;
}

/* next runs again: if it blocked long enough, its sample goes out,
 * weighed by the time it was off the CPU. */
static __always_inline void offcpu_switch_in(struct task_struct *next)
{
	__u32 tid = next->pid;
	struct sonde_sample *rec = bpf_map_lookup_elem(&offcpu_blocked, &tid);
	__u64 now, size;

	if (!rec)
		return;
	now = bpf_ktime_get_ns();
	rec->weight = now > rec->ktime_ns ? now - rec->ktime_ns : 0;
	if (rec->weight >= offcpu_min_ns) {
		size = SONDE_SAMPLE_SIZE(rec->n_kernel, rec->n_user + rec->n_interp);
		if (size > sizeof(*rec))
			size = sizeof(*rec);
		if (bpf_ringbuf_output(&events, rec, size, sample_wakeup_flags()))
			count_err(SONDE_ERR_RINGBUF_FULL);
	}
	bpf_map_delete_elem(&offcpu_blocked, &tid);
}

/* The current task (prev) blocks: its stacks are walked now, while its
 * address space is the current one and its kernel stack shows what it
 * waits on, and kept until it runs again. */
static __always_inline void offcpu_switch_out(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32, n_kernel, zero = 0;
	struct unwind_scratch *s;
	__u8 outcome;
	__u64 size;
	long n;

	if (!task_allowed(tgid))
		return;
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s) {
		count_err(SONDE_ERR_SCRATCH);
		return;
	}
	/* The first two frames are this program and bpf_trace_run4(): the
	 * stack starts at __schedule(). */
	n = bpf_get_stack(ctx, s->rec.frames, SONDE_MAX_KERNEL_FRAMES * sizeof(__u64),
			  2 & BPF_F_SKIP_FIELD_MASK);
	if (n < 0) {
		count_err(SONDE_ERR_KERNEL_STACK);
		n = 0;
	}
	n /= sizeof(__u64);
	n_kernel = n > SONDE_MAX_KERNEL_FRAMES ? SONDE_MAX_KERNEL_FRAMES : (__u32)n;
	/* No Go span: go_spans is keyed by the goroutine in r14, and a
	 * blocked Go thread is parked in the runtime, not in the request's
	 * goroutine. */
	__builtin_memset(s->rec.trace_id, 0, sizeof(s->rec.trace_id));
	__builtin_memset(s->rec.span_id, 0, sizeof(s->rec.span_id));
	interp_jit_begin(s, tgid, SCRATCH_SAMPLE);
	s->rec.profile = SONDE_PROFILE_OFF_CPU;
	s->rec.weight = 0;
	outcome = offcpu_walk_user(s, tgid, n_kernel);
	size = sample_fill(s, id, n_kernel, s->walk.n, outcome, s->flags);
	(void)size;
	bpf_map_update_elem(&offcpu_blocked, &tid, &s->rec, BPF_ANY);
}

/* Off-CPU (--off-cpu). sched_switch runs in prev's context with
 * interrupts off (so the CPU sampler cannot reuse the per-CPU scratch
 * meanwhile). Only voluntary switches count: a preempted thread (or one
 * that yields while runnable) waits for a CPU, not for an event, and
 * the CPU profile shows what it ran. */
SEC("tp_btf/sched_switch")
int BPF_PROG(sonde_offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	offcpu_switch_in(next);
	if (preempt || prev->tgid == 0 || BPF_CORE_READ(prev, __state) == 0)
		return 0;
	offcpu_switch_out(ctx);
	return 0;
}

/* ---- the memory profile (docs/memory.md) ----
 *
 * A task's first touches of anonymous memory: the page faults on pages not
 * present (error code without X86_PF_PROT), in user mode and in the kernel
 * on a user address (read() into a fresh buffer). One fault in
 * memory_every of each task is sampled, weighted memory_every pages, and
 * kept when the address is in an anonymous mapping (no file: the heap,
 * private anonymous maps, stacks).
 *
 * Or, with --memory-reserved, the address space a process reserves: brk
 * growth and private writable anonymous mmaps, every one, weighted by
 * their bytes (the fault programs are then not loaded). */

/* One fault in this many; 0: memory profile off (the programs are not
 * loaded). With --memory-reserved: 0. */
const volatile __u32 memory_every = 0;

#define MEMORY_PF_PROT 0x1ul /* x86 page fault error code: the page was present */
#define MEMORY_PAGE 4096ull
#define MEMORY_EBUSY 16 /* bpf_find_vma(): the mmap lock was taken */

/* Per task. left: its faults until its next sample; 0 in a new task,
 * which starts at a random point of the period so that many short tasks
 * are not all sampled at their first fault. brk: the break when its brk()
 * call began (--memory-reserved). */
struct memory_task {
	__u32 left;
	__u32 pad;
	__u64 brk;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct memory_task);
} memory_tasks SEC(".maps");

static long memory_vma_anon(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	*(__u8 *)data = vma->vm_file == NULL;
	return 0;
}

/* Is this fault the task's memory_every-th? */
static __always_inline bool memory_fault_due(struct task_struct *task)
{
	struct memory_task *mt;
	__u32 *left;

	mt = bpf_task_storage_get(&memory_tasks, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!mt) {
		count_err(SONDE_ERR_MEMORY_COUNTER);
		return false;
	}
	left = &mt->left;
	if (*left == 0 || *left > memory_every)
		*left = 1 + bpf_get_prandom_u32() % memory_every;
	if (--*left)
		return false;
	*left = memory_every;
	return true;
}

/* Sends a memory sample of weight bytes for the current task with its
 * user stack from user_regs (NULL: the registers saved at kernel entry;
 * in_user: they are the event's own, in user mode). No kernel stack: a
 * user-mode fault's is the fault entry, a syscall's the syscall, and
 * bpf_get_stack() in the program that handles faults in the kernel put
 * the walk's call chain over the verifier's 512 bytes. */
static __always_inline void memory_send(__u64 id, struct pt_regs *user_regs, bool in_user,
					__u64 weight)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = id >> 32, flags = 0, n_user = 0;
	struct unwind_scratch *s;
	struct pt_regs *regs;
	__u8 outcome;

	s = bpf_map_lookup_elem(&scratch, &scratch_event_key);
	if (!s) {
		count_err(SONDE_ERR_SCRATCH);
		return;
	}
	regs = user_regs ? user_regs : (struct pt_regs *)bpf_task_pt_regs(task);
	tag_go_span_event(s, tgid, BPF_CORE_READ(regs, r14));
	interp_jit_begin(s, tgid, SCRATCH_EVENT);
	outcome = walk_user_event(s, regs, in_user, tgid, 0, &flags, &n_user);
	s->rec.profile = SONDE_PROFILE_MEMORY;
	s->rec.weight = weight;
	sample_send(s, id, 0, n_user, outcome, flags);
}

/* user_regs: the fault's own registers when in_user, else NULL (the
 * task's user registers are those saved at kernel entry). */
static __always_inline void memory_fault(unsigned long address,
					 struct pt_regs *user_regs, unsigned long error_code,
					 bool in_user)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	__u8 anon = 0;
	long n;

	if (memory_every == 0 || (error_code & MEMORY_PF_PROT) || tgid == 0)
		return;
	if (!task_allowed(tgid) || !memory_fault_due(task))
		return;
	n = bpf_find_vma(task, address, memory_vma_anon, &anon, 0);
	if (n == -MEMORY_EBUSY)
		count_err(SONDE_ERR_MEMORY_VMA);
	if (n || !anon)
		return;
	memory_send(id, in_user ? user_regs : NULL, in_user, (__u64)memory_every * MEMORY_PAGE);
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(sonde_fault_user, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	memory_fault(address, regs, error_code, true);
	return 0;
}

SEC("tp_btf/page_fault_kernel")
int BPF_PROG(sonde_fault_kernel, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	/* Faults on kernel addresses, and kernel threads, are no one's
	 * memory growth. */
	if (address >> 63 || !bpf_get_current_task_btf()->mm)
		return 0;
	memory_fault(address, NULL, error_code, false);
	return 0;
}

/* ---- --memory-reserved: brk and mmap ---- */

#define MEMORY_PROT_WRITE 0x2ul
#define MEMORY_MAP_TYPE 0x0ful   /* MAP_SHARED 1, MAP_PRIVATE 2, MAP_SHARED_VALIDATE 3 */
#define MEMORY_MAP_PRIVATE 0x02ul
#define MEMORY_MAP_ANONYMOUS 0x20ul
#define MEMORY_MAX_ERRNO 4095ul

#define MEMORY_NR_MMAP 9 /* x86-64 syscall numbers */
#define MEMORY_NR_BRK 12

/* Every syscall of the machine runs these two (raw syscall tracepoints:
 * fentry on __x64_sys_brk is refused on some kernels); all but brk and
 * mmap return at the number check. */
SEC("tp_btf/sys_enter")
int BPF_PROG(sonde_sys_enter, struct pt_regs *regs, long id)
{
	struct task_struct *task;
	struct memory_task *mt;

	if (id != MEMORY_NR_BRK || !task_allowed(bpf_get_current_pid_tgid() >> 32))
		return 0;
	task = bpf_get_current_task_btf();
	if (!task->mm)
		return 0;
	/* The break as brk() begins: the exit's new break minus this is the
	 * growth. */
	mt = bpf_task_storage_get(&memory_tasks, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!mt) {
		count_err(SONDE_ERR_MEMORY_COUNTER);
		return 0;
	}
	mt->brk = task->mm->brk;
	return 0;
}

/* brk() returns the new break (the old one when it failed); mmap() the
 * address or -errno. A map counts when private, writable and anonymous,
 * its length in whole pages. */
SEC("tp_btf/sys_exit")
int BPF_PROG(sonde_sys_exit, struct pt_regs *regs, long ret)
{
	__u64 nr = BPF_CORE_READ(regs, orig_ax), before, len, prot, mflags;
	struct task_struct *task;
	struct memory_task *mt;

	if (nr == MEMORY_NR_BRK) {
		task = bpf_get_current_task_btf();
		mt = bpf_task_storage_get(&memory_tasks, task, NULL, 0);
		if (!mt || !mt->brk)
			return 0;
		before = mt->brk;
		mt->brk = 0;
		if ((__u64)ret > before)
			memory_send(bpf_get_current_pid_tgid(), regs, false, (__u64)ret - before);
		return 0;
	}
	if (nr != MEMORY_NR_MMAP || (__u64)ret >= (__u64)-MEMORY_MAX_ERRNO)
		return 0;
	len = BPF_CORE_READ(regs, si);
	prot = BPF_CORE_READ(regs, dx);
	mflags = BPF_CORE_READ(regs, r10);
	if (!(prot & MEMORY_PROT_WRITE) || !(mflags & MEMORY_MAP_ANONYMOUS) ||
	    (mflags & MEMORY_MAP_TYPE) != MEMORY_MAP_PRIVATE)
		return 0;
	if (!task_allowed(bpf_get_current_pid_tgid() >> 32))
		return 0;
	memory_send(bpf_get_current_pid_tgid(), regs, false, (len + MEMORY_PAGE - 1) & ~(MEMORY_PAGE - 1));
	return 0;
}
