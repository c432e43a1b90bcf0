/* hotspot_walk.h - the HotSpot JVM's JIT-frame walker of sample.bpf.c
 * (docs/interpreters.md, "JIT frames" and "HotSpot"). For a tgid whose
 * interp_procs entry is of kind SONDE_INTERP_HOTSPOT:
 * - at the sample's start, hotspot_jit_begin() claims the CodeCache's
 *   bounds (CodeCache::_low_bound/_high_bound), read once per process
 *   and CPU and kept in hotspot_procs with the CodeHeaps, the blob names
 *   seen and the interpreter's pc range (what a JVM keeps for its life;
 *   the CPU's scratch keeps the entry of the process it sampled last);
 * - for each frame whose pc is in it, hotspot_jit_step() finds the code
 *   blob holding the pc through its CodeHeap's segment map, and steps
 *   the frame by the JVM's own layout: the
 *   interpreter's frames by rbp (Method* and bcp in their slots, the
 *   caller's sp in the sender-sp slot), compiled ones (nmethods) and
 *   stubs with a frame size by sp + frame size, other stubs (the call
 *   stub that Java is entered by) by rbp. Each Java frame is buffered as
 *   a JIT frame standing for its native frame: the Method*, and the bci
 *   (interpreted) or unknown (compiled);
 * - a compiled frame's Java frames (its PcDesc's scope chain, inlined
 *   methods included) are kept in the LRU map hotspot_scopes by (process,
 *   nmethod, pc), checked against the nmethod's compile id and Method*
 *   (a recompiled or unloaded nmethod's new blob at the same address has
 *   another compile id): a hit costs no PcDesc search, scope or metadata
 *   read;
 * - a pc of compiled code or a stub stepped lately on this CPU (struct
 *   hotspot_pc_slot) is stepped from what was found there, after one read
 *   of the blob's header fields that say it is still the same blob: no
 *   segment map, header or scope cache;
 * - the first time a (process, Method*) is seen (LRU map hotspot_methods,
 *   the ConstMethod* as the value: a reused Method* has another; the
 *   methods seen lately also per CPU, valid for one symbolizer
 *   connection, interp_conn_gen), the
 *   method's class name, name, signature and source file symbols and its
 *   line number table go out as a SONDE_REC_INTERP record, so names survive
 *   the JVM's exit and class unloading.
 *
 * Everything is read with interp_probe_read at offsets from the file's
 * own vmStructs tables (the symbolizer's config); loops are bounded; a
 * wrong offset or a racing JVM gives a wrong or short stack, never more.
 * Included by interp_walk.h after sample.bpf.c's maps, scratch and
 * count_err().
 */
#pragma once

#include "hotspot.h"

/* interp_walk.h's, defined after the runtimes' headers. */
static __always_inline bool interp_jit_push(struct sonde_interp_jit *j, __u32 native, __u64 word0,
					    __u64 word1);
/* sample.bpf.c's frame-pointer step, defined after the walkers: its
 * checks, and the step from the words at fp. */
static __always_inline int unwind_fp_check(struct user_walk *st);
static __always_inline int unwind_fp_apply(struct user_walk *st, const __u64 *frame);

#define HOTSPOT_MAX_HEAPS 4     /* CodeHeaps: JDK 17 has 3 (segmented cache) */
#define HOTSPOT_SEGMAP_HOPS 32  /* segment map hops back to a blob's start */
#define HOTSPOT_BLOB_BUF 512    /* bytes of a blob's header read at once */
#define HOTSPOT_FRAME_WORDS 12  /* interpreter frame words read: fp - 80 .. fp + 16 */
#define HOTSPOT_STACK_WIN 1024  /* bytes of the sampled stack read at once (struct hotspot_scratch) */
#define HOTSPOT_STACK_WORDS (HOTSPOT_STACK_WIN / 8)
#define HOTSPOT_MAX_FRAME_SIZE (1u << 16) /* words: a compiled frame beyond is damage */
#define HOTSPOT_MAX_INLINE 16   /* scopes per compiled frame: C2 inlines 15 deep (MaxInlineLevel) */
#define HOTSPOT_SCOPE_BUF 16    /* bytes read at a scope: its 3 header numbers */
#define HOTSPOT_SCOPE_CACHE 16384 /* (process, nmethod, pc) scope chains kept */
#define HOTSPOT_PC_SLOTS 64       /* pcs stepped lately, per CPU (struct hotspot_pc_slot) */
#define HOTSPOT_PC_WAYS 4         /* ... in sets of 4 */
#define HOTSPOT_PC_SET_BITS 4     /* 16 sets */
#define HOTSPOT_PC_GRANULE 8      /* sampled pcs: a set per 256 bytes of code */
_Static_assert(HOTSPOT_PC_WAYS << HOTSPOT_PC_SET_BITS == HOTSPOT_PC_SLOTS, "pc cache shape");

/* A compiled frame's Java frames, as hs_compiled_frames() found them. */
struct hotspot_scope_key {
	__u32 tgid;
	__u32 pc_off; /* pc - nmethod; bit 31: a sampled pc (not a return address) */
	__u64 nmethod;
};

struct hotspot_scope_val {
	__s32 compile_id; /* nmethod::_compile_id when found */
	__u32 n;          /* frames in words, leaf first */
	__u64 method;     /* the nmethod's own Method* */
	__u64 gen;        /* interp_conn_gen when found: its methods' records were sent then */
	/* A sampled pc's: the pcs (from the nmethod's code begin) whose
	 * frames these are too, [range_lo, range_hi), those whose next PcDesc
	 * is the same, past the prologue; range_hi 0: the pc alone. */
	__u32 range_lo, range_hi;
	__u64 words[HOTSPOT_MAX_INLINE * SONDE_INTERP_JIT_WORDS]; /* word0 (no native), word1 */
};

/* The pcs stepped lately on this CPU (a hot loop's pcs and the return
 * addresses below it are the same sample after sample), in sets of
 * HOTSPOT_PC_WAYS: a return address by itself, a sampled pc of an
 * nmethod with the range of pcs whose Java frames are the same (its
 * next PcDesc's: a loop's pcs are one entry), in the set of its 256
 * bytes of code. The tags of a set are one cache line; struct
 * hotspot_pc_slot holds what stepping the pc needed: its blob and, for
 * an nmethod, its Java frames, so that the next sample there reads
 * neither the segment map nor the blob's header, only the header fields
 * that say the blob is still the one found (its _name, and an nmethod's
 * _method and compile id, which no other compilation in the JVM has; a
 * stub's frame size), and no scope cache either. Stored only in the
 * interp_conn_gen its methods' records were sent in (val.gen). */
#define HOTSPOT_PC_EXACT (1u << 31) /* hotspot_pc_tag.len: sampled pcs */
struct hotspot_pc_tag {
	__u64 pc;  /* a return address, or the first of a range of sampled pcs; 0: empty */
	__u32 len; /* HOTSPOT_PC_EXACT with the range's length (pc .. pc + len - 1), or 0 */
	__u32 tgid;
};

struct hotspot_pc_slot {
	__u64 blob;     /* the CodeBlob holding pc */
	__u64 name;     /* its _name */
	__u32 frame_size; /* words */
	__u8 kind;      /* HS_BLOB_NMETHOD or HS_BLOB_OTHER */
	__u8 prologue;  /* an nmethod's pc before its frame is complete */
	__u8 pad[2];
	struct hotspot_scope_val val; /* an nmethod's compile id, Method* and Java frames */
};

struct hotspot_heap {
	__u64 low, high; /* committed code: [low, high) */
	__u64 segmap;    /* segment map: one byte per segment */
	__u32 log2_segment, pad;
};

/* What a JVM keeps for its life, learnt once per process and CPU
 * (hotspot_procs): the CodeCache's reserved bounds and its CodeHeaps
 * (fixed once the CodeCache is set up; a heap's committed part only
 * grows: a pc beyond it reads them again), the blob names seen (the
 * _name of nmethods, native nmethods and the interpreter: pointers into
 * libjvm) and the range of pcs found in the interpreter's blob. */
struct hotspot_proc {
	__u64 root;            /* the interp_procs runtime_addr it was read at */
	__u64 low, high;       /* CodeCache::_low_bound, _high_bound */
	struct hotspot_heap heaps[HOTSPOT_MAX_HEAPS];
	__u32 n_heaps, pad;
	__u64 names[3];             /* nmethod, native nmethod, Interpreter _name */
	__u64 others[2];            /* two other blobs' _name (stubs a Java chain passes) */
	__u64 interp_lo, interp_hi; /* pcs found in the interpreter's blob: all between are */
};

/* tgid -> its struct hotspot_proc, per CPU (no CPU sees another's half
 * written entry). Emptied for a tgid at its fork, exec and exit
 * (hotspot_proc_forget): an entry is only ever its current image's.
 * 1,024 JVMs (about 250 bytes each per possible CPU: 16 MiB on 64 CPUs);
 * an evicted one is read again (2 reads, and the heaps at its next Java
 * frame). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct hotspot_proc);
} hotspot_procs SEC(".maps");

/* What hotspot_methods keeps of a method already sent. */
struct hotspot_method_seen {
	__u64 const_method; /* its ConstMethod*: a reused Method* has another */
	__u64 code_size;    /* its bytecodes' length */
};

/* A method seen lately on this CPU, direct-mapped by its Method* (the
 * methods of a hot loop's interpreted frames are the same sample after
 * sample): what hotspot_methods holds for it, while the connection is
 * the same (interp_conn_gen: a new one empties hotspot_methods, and the
 * records go out again). */
#define HOTSPOT_METHOD_SLOTS 32
struct hotspot_method_slot {
	__u64 method;
	__u64 gen; /* interp_conn_gen when seen */
	__u32 tgid, pad;
	struct hotspot_method_seen seen;
};

/* Per CPU: the sampled process's struct hotspot_proc, copied from
 * hotspot_procs at the sample's start (stored back when a step learns
 * something), and the buffers of one step. */
struct hotspot_scratch {
	struct hotspot_proc c;
	__u32 tgid;   /* the sampled tgid: c's key */
	__u32 fresh;  /* heaps read in this sample */
	__u64 procs_gen; /* hotspot_procs_gen when c was copied */
	/* A blob's header (HOTSPOT_BLOB_BUF bytes), or some of its fields at
	 * their offsets; twice the size so that a span read at a masked
	 * offset stays inside. */
	__u8 blob[2 * HOTSPOT_BLOB_BUF];
	/* The sampled thread's stack [win_lo, win_lo + win_len), read at
	 * the first of the sample's Java frames that needs it and again only
	 * past it: the Java frames' stack words (an interpreted frame's 12,
	 * a sized frame's return address and rbp) lie mostly within the
	 * HOTSPOT_STACK_WIN bytes above the first, so a walk reads the stack
	 * once or twice instead of once a frame. win_len 0: nothing yet
	 * (hotspot_jit_begin); HOTSPOT_FRAME_WORDS of slack keep a masked
	 * index plus a frame's words inside. */
	__u64 win_lo;
	__u32 win_len, win_pad;
	__u64 win[HOTSPOT_STACK_WORDS + HOTSPOT_FRAME_WORDS];
	__u8 scope[HOTSPOT_SCOPE_BUF];
	struct hotspot_scope_val val; /* what a miss stores in hotspot_scopes */
	/* Keys and a name's first bytes, here rather than on the stack: the
	 * walks' chains of calls (the tail-call walk's, off-CPU's bpf_loop
	 * callback's) are near the verifier's 512 bytes. */
	struct sonde_hotspot_method_key method_key;
	struct hotspot_scope_key scope_key;
	char blob_name[8];
	struct hotspot_method_slot methods[HOTSPOT_METHOD_SLOTS];
	struct hotspot_pc_tag pc_tags[HOTSPOT_PC_SLOTS]; /* by set */
	__u8 pc_victim[1 << HOTSPOT_PC_SET_BITS];        /* a set's next way to replace */
	struct hotspot_pc_slot pcs[HOTSPOT_PC_SLOTS];
};


struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); /* by the walk's scratch entry (sonde_interp_jit.slot) */
	__type(key, __u32);
	__type(value, struct hotspot_scratch);
} hotspot_scratch SEC(".maps");

/* hotspot_scratch's keys, off the stack: a perf event may interrupt a
 * tracepoint program's walk, so each walk keeps its own (j->slot). */
static const __u32 hs_key0 = 0, hs_key1 = 1;

static __always_inline struct hotspot_scratch *hs_scratch(const struct sonde_interp_jit *j)
{
	return bpf_map_lookup_elem(&hotspot_scratch, j->slot ? &hs_key1 : &hs_key0);
}

/* Bumped when a tgid's hotspot_procs entry is forgotten (fork, exec,
 * exit): a scratch's copy of an entry is void after. */
__u64 hotspot_procs_gen;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, struct sonde_hotspot_method_key);
	__type(value, struct hotspot_method_seen);
} hotspot_methods SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HOTSPOT_SCOPE_CACHE);
	__type(key, struct hotspot_scope_key);
	__type(value, struct hotspot_scope_val);
} hotspot_scopes SEC(".maps");

/* A measurement build (meson -Dbpf_measure=true, interp_read.h) also
 * counts in hotspot_reads per CPU the samples the walker claimed [1],
 * its steps [2] and interpreted frames [3], and times the phases of a
 * sample it claims (tests/bench/jvm_overhead.py prints them). */
#ifdef SONDE_HOTSPOT_COUNT_READS
#define hs_count(what) interp_measure_add(what, 1)
#define HS_T0() __u64 hs_t_ = bpf_ktime_get_ns()
#define HS_T(i) do { __u64 n_ = bpf_ktime_get_ns(); interp_measure_add(i, n_ - hs_t_); hs_t_ = n_; } while (0)
#define HS_KIND(k) do { struct hs_phase *ph_ = hs_ph(); if (ph_) ph_->kind = (k); } while (0)

/* PHASE: per-CPU timestamps of one sample */
struct hs_phase {
	__u64 t_prog, t_begin_end, t_walk0, t_first, t_last, t_walk1, t_step_sum;
	__u32 claimed, first_n, last_n, steps, kind;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hs_phase);
} hotspot_phase SEC(".maps");
static __always_inline struct hs_phase *hs_ph(void)
{
	__u32 z = 0;
	return bpf_map_lookup_elem(&hotspot_phase, &z);
}
#else
#define hs_count(what) ((void)0)
#define HS_KIND(k) ((void)0)
#define HS_T0() do {} while (0)
#define HS_T(i) do {} while (0)
#endif

/* A field of the blob header buffer at a config offset (0 beyond it). */
static __always_inline __u64 hs_blob64(const struct hotspot_scratch *x, __u32 off)
{
	__u64 v = 0;

	if (off + 8 <= HOTSPOT_BLOB_BUF)
		__builtin_memcpy(&v, &x->blob[off & (HOTSPOT_BLOB_BUF - 1)], 8);
	return v;
}

static __always_inline __u32 hs_blob32(const struct hotspot_scratch *x, __u32 off)
{
	__u32 v = 0;

	if (off + 4 <= HOTSPOT_BLOB_BUF)
		__builtin_memcpy(&v, &x->blob[off & (HOTSPOT_BLOB_BUF - 1)], 4);
	return v;
}

/* Forgets tgid's struct hotspot_proc: its image is new (exec), or its
 * number is (fork: a new process; exit: free for reuse). */
static __always_inline void hotspot_proc_forget(__u32 tgid)
{
	/* A CPU's scratch may hold the entry too (hotspot_jit_begin): it
	 * counts only in the generation it was copied in. */
	if (!bpf_map_delete_elem(&hotspot_procs, &tgid))
		__sync_fetch_and_add(&hotspot_procs_gen, 1);
}

/* Claims the CodeCache for this sample's walk: from the process's
 * hotspot_procs entry, or read (2 reads) and kept once the CodeCache is
 * set up. */
static __always_inline void hotspot_jit_begin(struct sonde_interp_jit *j,
					      const struct sonde_interp_proc *p, __u32 tgid)
{
	const struct sonde_hotspot_proc *h = (const struct sonde_hotspot_proc *)p;
	const struct hotspot_proc *e;
	struct hotspot_scratch *x;
	__u64 gen = hotspot_procs_gen;

	x = hs_scratch(j);
	if (!x)
		return;
	/* The process this CPU sampled last, still in the scratch: what
	 * hotspot_procs holds for it (kept alike), no lookup or copy. */
	if (x->tgid == tgid && x->c.root == h->runtime_addr && x->procs_gen == gen && x->c.low)
		goto claim;
	e = bpf_map_lookup_elem(&hotspot_procs, &tgid);
	if (e && e->root == h->runtime_addr) {
		x->c = *e;
	} else {
		__u64 lo = interp_read_u64(h->runtime_addr + h->off.codecache_low_static);
		__u64 hi = interp_read_u64(h->runtime_addr + h->off.codecache_high_static);

		if (!lo || hi <= lo)
			return; /* not started yet */
		__builtin_memset(&x->c, 0, sizeof(x->c));
		x->c.root = h->runtime_addr;
		x->c.low = lo;
		x->c.high = hi;
		bpf_map_update_elem(&hotspot_procs, &tgid, &x->c, BPF_ANY);
	}
	x->tgid = tgid;
	x->procs_gen = gen;
claim:
	x->fresh = 0;
	x->win_len = 0;
	hs_count(1);
#ifdef SONDE_HOTSPOT_COUNT_READS
	{
		struct hs_phase *ph = hs_ph();

		if (ph) {
			ph->claimed = 1;
			ph->steps = 0;
			ph->t_step_sum = 0;
		}
	}
#endif
	j->kind = SONDE_INTERP_HOTSPOT;
	j->anon = 0;
	j->n_ranges = 1;
	j->lo[0] = x->c.low;
	j->hi[0] = x->c.high;
}

/* Stores what x->c learnt back into hotspot_procs (this CPU's copy). */
static __always_inline void hs_proc_store(struct hotspot_scratch *x)
{
	bpf_map_update_elem(&hotspot_procs, &x->tgid, &x->c, BPF_ANY);
}

/* Reads the process's CodeHeaps into x->c (and keeps them). */
static __always_inline void hs_fill_heaps(struct hotspot_scratch *x,
					  const struct sonde_hotspot_proc *h)
{
	__u64 arr = interp_read_u64(h->runtime_addr + h->off.codecache_heaps_static), data;
	__u32 len;

	x->fresh = 1;
	x->c.n_heaps = 0;
	if (!arr)
		return;
	len = interp_read_u32(arr + h->off.growable_len);
	data = interp_read_u64(arr + h->off.growable_data);
	for (__u32 i = 0; i < HOTSPOT_MAX_HEAPS; i++) {
		struct hotspot_heap *e = &x->c.heaps[i];
		__u64 heap;

		if (i >= len || !data)
			break;
		heap = interp_read_u64(data + i * 8);
		if (!heap)
			break;
		e->low = interp_read_u64(heap + h->off.heap_memory + h->off.vs_low);
		e->high = interp_read_u64(heap + h->off.heap_memory + h->off.vs_high);
		e->segmap = interp_read_u64(heap + h->off.heap_segmap + h->off.vs_low);
		e->log2_segment = interp_read_u32(heap + h->off.heap_log2_segment);
		x->c.n_heaps = i + 1;
	}
	hs_proc_store(x);
}

/* Whether pc lies in one of x's heaps. */
static __always_inline bool hs_in_heaps(const struct hotspot_scratch *x, __u64 pc)
{
	for (__u32 i = 0; i < HOTSPOT_MAX_HEAPS; i++)
		if (i < x->c.n_heaps && pc >= x->c.heaps[i].low && pc < x->c.heaps[i].high)
			return true;
	return false;
}

/* The start of the blob holding pc (its CodeBlob), or 0: the segment map
 * holds, per segment, how many segments back the block goes on (0: its
 * first segment; 0xff: free). */
static __always_inline __u64 hs_find_blob(const struct hotspot_scratch *x,
					  const struct sonde_hotspot_proc *h, __u64 pc)
{
	const struct hotspot_heap *e = 0;
	__u64 idx;

	for (__u32 i = 0; i < HOTSPOT_MAX_HEAPS; i++) {
		if (i < x->c.n_heaps && pc >= x->c.heaps[i].low && pc < x->c.heaps[i].high) {
			e = &x->c.heaps[i];
			break;
		}
	}
	if (!e || !e->segmap || e->log2_segment > 20)
		return 0;
	idx = (pc - e->low) >> e->log2_segment;
	for (__u32 k = 0; k < HOTSPOT_SEGMAP_HOPS; k++) {
		__u8 b = 0xff;

		hs_count(30);
		if (interp_probe_read(&b, 1, (const void *)(e->segmap + idx)) || b == 0xff)
			return 0;
		if (b == 0)
			return e->low + (idx << e->log2_segment) + h->off.heapblock_size;
		if (b > idx)
			return 0;
		idx -= b;
	}
	return 0;
}

/* A Symbol's bytes into dst (at most size); returns the length copied. */
static __always_inline __u16 hs_symbol(char *dst, __u32 size, __u64 sym,
				       const struct sonde_hotspot_proc *h, __u8 *flags, __u8 cut)
{
	__u16 len = 0;
	__u32 n;

	if (!sym || interp_probe_read(&len, sizeof(len), (const void *)(sym + h->off.symbol_length)))
		return 0;
	n = len;
	if (n > size) {
		n = size;
		*flags |= cut;
	}
	if (n == 0 || interp_probe_read(dst, n, (const void *)(sym + h->off.symbol_body)))
		return 0;
	return (__u16)n;
}

/* The constant pool's Symbol at index idx (a Utf8 entry's slot). */
static __always_inline __u64 hs_cp_symbol(__u64 cpool, __u16 idx,
					  const struct sonde_hotspot_proc *h)
{
	if (!cpool || !idx)
		return 0;
	return interp_read_u64(cpool + h->off.cpool_size + (__u64)idx * 8);
}

/* The pool index of the source file's name: a u2 in the pool, or in its
 * holder class (bpf/hotspot.h, cpool_source_index). */
static __always_inline __u16 hs_source_index(__u64 cpool, __u64 holder,
					     const struct sonde_hotspot_proc *h)
{
	__u16 off = h->off.cpool_source_index;

	if (off < SONDE_HOTSPOT_SOURCE_IN_KLASS)
		return interp_read_u16(cpool + off);
	return holder ? interp_read_u16(holder + off - SONDE_HOTSPOT_SOURCE_IN_KLASS) : 0;
}

/* Runs once per method. Inlined: as a subprogram its frame made the
 * off-CPU walk's chain of calls (bpf_loop callback, interp_jit_step,
 * hotspot_jit_step, this) 16 bytes too deep for the verifier's 512. */
static __always_inline int hotspot_emit_method(__u32 tgid, __u64 method, __u64 cm,
					  const struct sonde_hotspot_proc *h)
{
	__u64 cpool = interp_read_u64(cm + h->off.cmethod_constants);
	__u64 holder = cpool ? interp_read_u64(cpool + h->off.cpool_holder) : 0;
	struct sonde_hotspot_method_rec *r;
	struct sonde_hotspot_method *m;
	__u16 flags, code_size;

	r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_HOTSPOT);
	if (!r)
		return -1;
	m = &r->m;
	m->size = sizeof(*m);
	m->version = SONDE_HOTSPOT_METHOD_VERSION;
	m->flags = 0;
	m->pad = 0;
	m->pad2[0] = m->pad2[1] = m->pad2[2] = 0;
	m->method = method;
	m->const_method = cm;
	code_size = interp_read_u16(cm + h->off.cmethod_code_size);
	m->code_size = code_size;
	m->klass_len = hs_symbol(m->klass, sizeof(m->klass),
				 holder ? interp_read_u64(holder + h->off.klass_name) : 0, h, &m->flags,
				 SONDE_HOTSPOT_METHOD_KLASS_CUT);
	m->name_len = hs_symbol(m->name, sizeof(m->name),
				hs_cp_symbol(cpool, interp_read_u16(cm + h->off.cmethod_name_index), h), h,
				&m->flags, SONDE_HOTSPOT_METHOD_NAME_CUT);
	m->sig_len = hs_symbol(m->sig, sizeof(m->sig),
			       hs_cp_symbol(cpool, interp_read_u16(cm + h->off.cmethod_sig_index), h), h,
			       &m->flags, SONDE_HOTSPOT_METHOD_SIG_CUT);
	m->source_len = hs_symbol(m->source, sizeof(m->source),
				  hs_cp_symbol(cpool, hs_source_index(cpool, holder, h), h),
				  h, &m->flags, SONDE_HOTSPOT_METHOD_SOURCE_CUT);
	m->linetable_len = 0;
	if (h->off.major >= SONDE_HOTSPOT_U5_X1_MAJOR)
		m->flags |= SONDE_HOTSPOT_METHOD_U5_X1;
	flags = interp_read_u16(cm + h->off.cmethod_flags);
	if (flags & h->off.cmethod_has_lines) {
		/* The compressed table follows the bytecodes; it ends with a 0
		 * the decoder stops at. A table near the end of a mapping: a
		 * shorter read. */
		__u64 at = cm + h->off.cmethod_size + code_size;

		if (!interp_probe_read(m->linetable, sizeof(m->linetable), (const void *)at)) {
			m->linetable_len = sizeof(m->linetable);
			m->flags |= SONDE_HOTSPOT_METHOD_HAS_LINES;
		} else if (!interp_probe_read(m->linetable, 64, (const void *)at)) {
			m->linetable_len = 64;
			m->flags |= SONDE_HOTSPOT_METHOD_HAS_LINES;
		}
	}
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Sends method's record unless this process's copy was sent already;
 * returns its ConstMethod* (0: none), and clears *sent when the record
 * could not be sent (the ring full). bcp (0: none), an interpreted
 * frame's bytecode pointer, inside the bytecodes of the ConstMethod seen
 * for method last time says the method is still that one without
 * reading it again: a Method* reused after class unloading has another
 * ConstMethod, whose bytecodes lie elsewhere unless it reuses the old
 * one's memory too (which the ConstMethod* compared alone would not see
 * either). */
static __always_inline __u64 hotspot_note_method(struct hotspot_scratch *x, __u32 tgid,
						 __u64 method, __u64 bcp,
						 const struct sonde_hotspot_proc *h, bool *sent)
{
	struct sonde_hotspot_method_key *key = &x->method_key;
	struct hotspot_method_slot *slot =
		&x->methods[(method >> 3) & (HOTSPOT_METHOD_SLOTS - 1)];
	struct hotspot_method_seen *seen;
	__u64 cm, gen = interp_conn_gen;

	key->tgid = tgid;
	key->pad = 0;
	key->method = method;
	if (slot->method == method && slot->tgid == tgid && slot->gen == gen) {
		seen = &slot->seen;
	} else {
		seen = bpf_map_lookup_elem(&hotspot_methods, key);
		if (seen) {
			slot->method = method;
			slot->tgid = tgid;
			slot->gen = gen;
			slot->seen = *seen;
			seen = &slot->seen;
		}
	}
	if (seen && bcp && bcp >= seen->const_method + h->off.cmethod_size &&
	    bcp < seen->const_method + h->off.cmethod_size + seen->code_size)
		return seen->const_method;
	cm = interp_read_u64(method + h->off.method_const);
	if (!cm)
		return 0;
	if (seen && seen->const_method == cm)
		return cm;
	if (hotspot_emit_method(tgid, method, cm, h) == 0) {
		slot->method = method;
		slot->tgid = tgid;
		slot->gen = gen;
		slot->seen.const_method = cm;
		slot->seen.code_size = interp_read_u16(cm + h->off.cmethod_code_size);
		bpf_map_update_elem(&hotspot_methods, key, &slot->seen, BPF_ANY);
	} else {
		*sent = false;
	}
	return cm;
}

/* Reads the stack window at addr: HOTSPOT_STACK_WIN bytes, or, where
 * they would cross into unmapped memory (the stack's top), up to the end
 * of addr's page, at least words of them. 0, or -1 when they cannot be
 * read. */
static __always_inline int hs_win_fill(struct hotspot_scratch *x, __u64 addr, __u32 words)
{
	__u64 n = 4096 - (addr & 4095);

	hs_count(31);
	x->win_len = 0;
	if (!interp_probe_read(x->win, HOTSPOT_STACK_WIN, (const void *)addr)) {
		n = HOTSPOT_STACK_WIN;
	} else {
		if (n > HOTSPOT_STACK_WIN)
			n = HOTSPOT_STACK_WIN;
		if (n < words * 8)
			n = words * 8;
		/* The bound is checked on the register passed. */
		asm volatile("" : "+r"(n));
		if (n > HOTSPOT_STACK_WIN || interp_probe_read(x->win, n, (const void *)addr))
			return -1;
	}
	x->win_lo = addr;
	x->win_len = (__u32)n;
	return 0;
}

/* The words (at most HOTSPOT_FRAME_WORDS) of the sampled stack at addr,
 * from the window (read there first when they lie outside it), or NULL
 * when they cannot be read. */
static __always_inline const __u64 *hs_stack(struct hotspot_scratch *x, __u64 addr, __u32 words)
{
	__u64 off = addr - x->win_lo;

	if (addr < x->win_lo || (off & 7) || off > x->win_len || x->win_len - off < words * 8) {
		if (hs_win_fill(x, addr, words))
			return NULL;
		off = 0;
	}
	return &x->win[(off >> 3) & (HOTSPOT_STACK_WORDS - 1)];
}

/* Steps an interpreted frame: rbp is its frame pointer. */
static __always_inline int hs_step_interpreted(struct sonde_interp_jit *j,
					       struct hotspot_scratch *x, struct user_walk *st,
					       __u32 native, const struct sonde_hotspot_proc *h)
{
	__u64 fp = st->fp, method, bcp, cm, bci = SONDE_HOTSPOT_BCI_UNKNOWN, sender_sp;
	__u32 ms = h->off.frame_method_slot, bs = h->off.frame_bcp_slot,
	      ss = h->off.frame_sender_sp_slot;
	const __u64 *f = 0;
	bool sent = true;

	if (!fp || (fp & 7) || fp < st->sp || ms > 10 || bs > 10 || ss > 10 ||
	    !(f = hs_stack(x, fp - 80, HOTSPOT_FRAME_WORDS))) {
		count_err(SONDE_ERR_USER_BAD_FP);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	method = f[10 - ms];
	bcp = f[10 - bs];
	sender_sp = f[10 - ss];
	/* A Method* whose ConstMethod cannot be read is no method (a frame
	 * sampled before the interpreter built it): the frame stays native. */
	cm = method ? hotspot_note_method(x, st->tgid, method, bcp, h, &sent) : 0;
	if (cm) {
		if (bcp >= cm + h->off.cmethod_size &&
		    bcp - (cm + h->off.cmethod_size) < SONDE_HOTSPOT_BCI_UNKNOWN)
			bci = bcp - (cm + h->off.cmethod_size);
		interp_jit_push(j, native, SONDE_HOTSPOT_WORD0(method, 0), SONDE_HOTSPOT_WORD1(bci));
	}
	st->pc = f[11];
	st->fp = f[10];
	st->sp = sender_sp > fp && sender_sp - fp < (1u << 20) ? sender_sp : fp + 16;
	st->exact_pc = 0;
	if (!st->pc) {
		st->outcome = SONDE_OUTCOME_COMPLETE;
		return 1;
	}
	return 0;
}

/* Steps a frame of known size (compiled code, runtime stubs): the return
 * address and the saved rbp sit just below sp + size. */
static __always_inline int hs_step_sized(struct hotspot_scratch *x, struct user_walk *st,
					 __u64 words)
{
	__u64 sender_sp = st->sp + words * 8;
	const __u64 *frame = hs_stack(x, sender_sp - 16, 2);

	if (!frame) {
		count_err(SONDE_ERR_USER_READ);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	st->pc = frame[1];
	st->fp = frame[0];
	st->sp = sender_sp;
	st->exact_pc = 0;
	if (!st->pc) {
		st->outcome = SONDE_OUTCOME_COMPLETE;
		return 1;
	}
	return 0;
}

/* One UNSIGNED5 number of b from *at on (bpf/hotspot.h: a byte below
 * 192 ends it, at most 5 bytes, each its digit plus x); *at moves past
 * it, *bad is set when a byte is below x. Without branches: the same
 * straight code for the verifier whatever the bytes (a loop that
 * branched on each byte made most of the sample program's verified
 * instructions). */
static __always_inline __u32 hs_u5(const __u8 *b, __u32 *at, __u32 x, __u32 *bad)
{
	__u32 p = *at, sum = 0, more = 1, n = 0;

#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < 5; i++) {
		__u32 v = b[(p + i) & (HOTSPOT_SCOPE_BUF - 1)], below;

		/* v < x (x 0 or 1: v is 0 and x 1) */
		below = x & (((v + 255) >> 8) ^ 1);
		/* opaque 0 / 1: the compiler would turn the masks into
		 * selects, which are branches in BPF */
		asm volatile("" : "+r"(more));
		*bad |= below & more;
		sum += ((v - x) << (6 * i)) & (0u - more);
		n += more;
		more &= (v + 64) >> 8; /* v >= 192: the number goes on */
	}
	*at = p + n;
	return sum;
}

/* The 3 numbers a scope starts with (UNSIGNED5, each byte its digit plus
 * x, 0 or 1 by the release): the sender scope's offset, the method's
 * metadata index, bci + 1. 0, or -1 on a byte below x. At most 15 of
 * the HOTSPOT_SCOPE_BUF bytes. */
static __always_inline int hs_scope_header(const __u8 *b, __u32 x, __u32 *sender, __u32 *midx,
					   __u32 *bci1)
{
	__u32 at = 0, bad = 0;

	*sender = hs_u5(b, &at, x, &bad);
	*midx = hs_u5(b, &at, x, &bad);
	*bci1 = hs_u5(b, &at, x, &bad);
	return bad ? -1 : 0;
}

/* Buffers a compiled frame's Java frame and keeps it in x->val for the
 * scope cache; false when the walk's buffer is full. */
static __always_inline bool hs_push_compiled(struct sonde_interp_jit *j, struct hotspot_scratch *x,
					     __u32 native, __u64 method, __u64 bci)
{
	__u32 at = x->val.n;
	__u64 w0 = SONDE_HOTSPOT_WORD0(method, 1), w1 = SONDE_HOTSPOT_WORD1(bci);

	if (!interp_jit_push(j, native, w0, w1))
		return false;
	if (at + SONDE_INTERP_JIT_WORDS <= HOTSPOT_MAX_INLINE * SONDE_INTERP_JIT_WORDS) {
		x->val.words[at & (HOTSPOT_MAX_INLINE * SONDE_INTERP_JIT_WORDS - 1)] = w0;
		x->val.words[(at + 1) & (HOTSPOT_MAX_INLINE * SONDE_INTERP_JIT_WORDS - 1)] = w1;
		x->val.n = at + SONDE_INTERP_JIT_WORDS;
	}
	return true;
}

/* A compiled frame's Java frames, leaf first: the scope chain of the
 * PcDesc at pc (a return address's own, the next one after a sampled pc),
 * inlined methods included, buffered and kept in x->val. Returns how many
 * were buffered; clears *whole when the chain was cut by a failed read, a
 * record not sent or the walk's buffer (x->val is then not to be kept). */
static __always_inline __u32 hs_compiled_frames(struct sonde_interp_jit *j,
						struct hotspot_scratch *x, __u64 blob, __u64 pc,
						bool exact, __u32 native, __u32 tgid,
						const struct sonde_hotspot_proc *h, bool *whole)
{
	__u64 code_begin = hs_blob64(x, h->off.blob_code_begin);
	__u64 scopes = hs_blob64(x, h->off.nmethod_scopes_data);
	__u32 meta = hs_blob32(x, h->off.nmethod_metadata);
	__u32 pcs_off = hs_blob32(x, h->off.nmethod_scopes_pcs);
	__u32 deps_off = hs_blob32(x, h->off.nmethod_dependencies);
	__u32 lo = 0, hi, n, pushed = 0;
	__s32 desc[2] = {};
	__s64 target;
	__u64 pcs = blob + pcs_off;

	if (pc < code_begin || pc - code_begin > 0x7fffffff || deps_off <= pcs_off ||
	    deps_off - pcs_off > (SONDE_HOTSPOT_PCDESC_SIZE << 16) || !scopes)
		return 0;
	/* The sampled pc takes the next PcDesc after it (as the JVM's own
	 * sampler does, pc_desc_near(pc + 1)); a return address its own. */
	target = (__s64)(pc - code_begin) + (exact ? 1 : 0);
	n = (deps_off - pcs_off) / SONDE_HOTSPOT_PCDESC_SIZE;
	hi = n;
	for (__u32 k = 0; k < 17; k++) {
		__u32 mid;
		__s32 v = 0;

		if (lo >= hi)
			break;
		mid = lo + (hi - lo) / 2;
		if (interp_probe_read(&v, sizeof(v),
					(const void *)(pcs + (__u64)mid * SONDE_HOTSPOT_PCDESC_SIZE +
						       SONDE_HOTSPOT_PCDESC_PC))) {
			*whole = false;
			return 0;
		}
		if (v < target)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= n || interp_probe_read(desc, sizeof(desc),
					   (const void *)(pcs + (__u64)lo * SONDE_HOTSPOT_PCDESC_SIZE))) {
		*whole = false;
		return 0;
	}
	/* A sampled pc's frames are those of every pc from the PcDesc
	 * before (the first is a sentinel at -1) up to this one. */
	x->val.range_lo = x->val.range_hi = 0;
	if (exact && desc[0] > 0) {
		__s32 prev = 0;

		if (lo > 0 &&
		    interp_probe_read(&prev, sizeof(prev),
				      (const void *)(pcs + (__u64)(lo - 1) * SONDE_HOTSPOT_PCDESC_SIZE +
						     SONDE_HOTSPOT_PCDESC_PC)))
			prev = desc[0]; /* unknown: no range */
		if (prev < 0)
			prev = 0;
		if (prev < desc[0]) {
			x->val.range_lo = (__u32)prev;
			x->val.range_hi = (__u32)desc[0];
		}
	}
	for (__u32 depth = 0, decode = (__u32)desc[1]; depth < HOTSPOT_MAX_INLINE; depth++) {
		__u32 sender = 0, midx = 0, bci1 = 0;
		__u64 method, bci;

		/* 0 is the recorder's "no scope": the end of the chain. */
		if (!decode)
			break;
		if (decode > (1u << 24) ||
		    interp_probe_read(x->scope, sizeof(x->scope), (const void *)(scopes + decode)) ||
		    hs_scope_header(x->scope, h->off.major >= SONDE_HOTSPOT_U5_X1_MAJOR, &sender,
				    &midx, &bci1) < 0 || !midx || midx > 65536) {
			*whole = false;
			break;
		}
		method = interp_read_u64(blob + meta + (__u64)(midx - 1) * 8);
		if (!method || !hotspot_note_method(x, tgid, method, 0, h, whole)) {
			*whole = false;
			break;
		}
		bci = bci1 ? bci1 - 1 : 0; /* bci1 0: the method's entry */
		if (!hs_push_compiled(j, x, native, method, bci)) {
			*whole = false;
			break;
		}
		pushed++;
		decode = sender;
	}
	return pushed;
}

/* The nmethod's compile id, from the blob header. */
static __always_inline __s32 hs_compile_id(const struct hotspot_scratch *x,
					   const struct sonde_hotspot_proc *h)
{
	__u32 off = h->off.nmethod_compile_id4 * 4u;

	/* Kept opaque: the compiler would drop hs_blob32's mask, knowing off
	 * under 1 KiB, and the verifier would lose the bound. */
	asm volatile("" : "+r"(off));
	return (__s32)hs_blob32(x, off);
}

/* The scope cache's key for a compiled frame at pc; false without one. */
static __always_inline bool hs_scope_key(struct hotspot_scope_key *k, __u32 tgid, __u64 blob,
					 __u64 pc, bool exact)
{
	if (pc < blob || pc - blob >= (1u << 31))
		return false;
	k->tgid = tgid;
	k->pc_off = (__u32)(pc - blob) | (exact ? (1u << 31) : 0);
	k->nmethod = blob;
	return true;
}

/* Buffers the Java frames kept in v (leaf first); false when the walk's
 * buffer filled. */
static __always_inline bool hs_push_words(struct sonde_interp_jit *j,
					  const struct hotspot_scope_val *v, __u32 native)
{
	for (__u32 i = 0; i < HOTSPOT_MAX_INLINE; i++) {
		__u32 at = i * SONDE_INTERP_JIT_WORDS;

		if (at >= v->n)
			break;
		if (!interp_jit_push(j, native,
				     v->words[at & (HOTSPOT_MAX_INLINE * SONDE_INTERP_JIT_WORDS - 1)],
				     v->words[(at + 1) &
					      (HOTSPOT_MAX_INLINE * SONDE_INTERP_JIT_WORDS - 1)]))
			return false;
	}
	return true;
}

/* Buffers a compiled frame's Java frames from the scope cache, and keeps
 * them in x->val; false on a miss (no entry, or one of another
 * compilation, method or connection). */
static __always_inline bool hs_cached_frames(struct sonde_interp_jit *j, struct hotspot_scratch *x,
					     const struct hotspot_scope_key *k, __u32 native,
					     const struct sonde_hotspot_proc *h)
{
	const struct hotspot_scope_val *m = bpf_map_lookup_elem(&hotspot_scopes, k);

	if (!m || m->gen != interp_conn_gen || m->compile_id != hs_compile_id(x, h) ||
	    m->method != hs_blob64(x, h->off.nmethod_method) || !m->n)
		return false;
	x->val = *m;
	hs_push_words(j, &x->val, native); /* a full buffer: the walk's frames end there */
	return true;
}

/* A compiled (nmethod) frame's Java frames: from the scope cache, or
 * decoded (then kept when whole), or, without a scope, the nmethod's own
 * method with no bci. Returns whether x->val holds them all (to be kept
 * in the per-CPU pcs). */
static __always_inline bool hs_nmethod_frames(struct sonde_interp_jit *j, struct hotspot_scratch *x,
					      __u64 blob, struct user_walk *st, __u32 native,
					      const struct sonde_hotspot_proc *h)
{
	__u64 method = hs_blob64(x, h->off.nmethod_method);
	struct hotspot_scope_key *k = &x->scope_key;
	bool whole = true, cache;

	cache = h->off.nmethod_compile_id4 &&
		hs_scope_key(k, st->tgid, blob, st->pc, st->exact_pc);
	if (cache && hs_cached_frames(j, x, k, native, h)) {
		hs_count(38);
		return true;
	}
	hs_count(39);
	x->val.n = 0;
	x->val.range_lo = x->val.range_hi = 0;
	if (!hs_compiled_frames(j, x, blob, st->pc, st->exact_pc, native, st->tgid, h, &whole) &&
	    (!method || !hotspot_note_method(x, st->tgid, method, 0, h, &whole) ||
	     !hs_push_compiled(j, x, native, method, SONDE_HOTSPOT_BCI_UNKNOWN)))
		whole = false;
	if (!cache || !whole || !x->val.n)
		return false;
	x->val.compile_id = hs_compile_id(x, h);
	x->val.method = method;
	x->val.gen = interp_conn_gen;
	bpf_map_update_elem(&hotspot_scopes, k, &x->val, BPF_ANY);
	return true;
}

/* Steps a frame sampled before its prologue built it: the return address
 * on top of the stack, rbp untouched. */
static __always_inline int hs_step_prologue(struct hotspot_scratch *x, struct user_walk *st)
{
	const __u64 *ret = hs_stack(x, st->sp, 1);

	if (!ret) {
		count_err(SONDE_ERR_USER_READ);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	st->pc = ret[0];
	st->sp += 8;
	st->exact_pc = 0;
	if (!st->pc) {
		st->outcome = SONDE_OUTCOME_COMPLETE;
		return 1;
	}
	return 0;
}

/* The name at a blob's _name: which kind of blob. */
#define HS_BLOB_OTHER 0
#define HS_BLOB_NMETHOD 1
#define HS_BLOB_INTERPRETER 2
static __always_inline int hs_blob_kind(struct hotspot_scratch *x, __u64 name)
{
	char *s = x->blob_name;

	if (!name)
		return HS_BLOB_OTHER;
	if (name == x->c.names[0] || name == x->c.names[1])
		return HS_BLOB_NMETHOD;
	if (name == x->c.names[2])
		return HS_BLOB_INTERPRETER;
	if (name == x->c.others[0] || name == x->c.others[1])
		return HS_BLOB_OTHER;
	if (interp_probe_read(s, sizeof(x->blob_name), (const void *)name))
		return HS_BLOB_OTHER;
	/* "nmethod" and "native nmethod" (a JNI wrapper), "Interpreter". */
	if (s[0] == 'n' && s[1] == 'm' && s[2] == 'e' && s[3] == 't' && s[4] == 'h' &&
	    s[5] == 'o' && s[6] == 'd' && s[7] == 0) {
		x->c.names[0] = name;
		hs_proc_store(x);
		return HS_BLOB_NMETHOD;
	}
	if (s[0] == 'n' && s[1] == 'a' && s[2] == 't' && s[3] == 'i' && s[4] == 'v' &&
	    s[5] == 'e' && s[6] == ' ' && s[7] == 'n') {
		x->c.names[1] = name;
		hs_proc_store(x);
		return HS_BLOB_NMETHOD;
	}
	if (s[0] == 'I' && s[1] == 'n' && s[2] == 't' && s[3] == 'e' && s[4] == 'r' &&
	    s[5] == 'p' && s[6] == 'r' && s[7] == 'e') {
		x->c.names[2] = name;
		hs_proc_store(x);
		return HS_BLOB_INTERPRETER;
	}
	if (!x->c.others[0] || !x->c.others[1]) {
		x->c.others[x->c.others[0] ? 1 : 0] = name;
		hs_proc_store(x);
	}
	return HS_BLOB_OTHER;
}

/* The first slot of pc's set (exact: a sampled pc, whose set is its
 * 256 bytes of code's, so that a range's pcs share it). */
static __always_inline __u32 hs_pc_set(__u64 pc, bool exact)
{
	__u64 k = exact ? (pc >> HOTSPOT_PC_GRANULE) * 2 + 1 : pc * 2;

	return (__u32)((k * 0x9e3779b97f4a7c15ull) >> (64 - HOTSPOT_PC_SET_BITS)) *
	       HOTSPOT_PC_WAYS;
}

/* The slot holding st->pc, or -1. */
static __always_inline int hs_pc_find(const struct hotspot_scratch *x, const struct user_walk *st)
{
	__u32 base = hs_pc_set(st->pc, st->exact_pc);

	for (__u32 w = 0; w < HOTSPOT_PC_WAYS; w++) {
		__u32 i = (base + w) & (HOTSPOT_PC_SLOTS - 1);
		const struct hotspot_pc_tag *t = &x->pc_tags[i];

		if (!t->pc || t->tgid != st->tgid)
			continue;
		if (st->exact_pc ? (t->len & HOTSPOT_PC_EXACT) &&
					   st->pc - t->pc < (t->len & ~HOTSPOT_PC_EXACT)
				 : !t->len && st->pc == t->pc)
			return (int)i;
	}
	return -1;
}

/* Reads bytes [lo, hi) of the blob's header into x->blob at the same
 * offsets: false when the span is empty, past the header buffer or not
 * readable. */
static __always_inline bool hs_head_span(struct hotspot_scratch *x, __u64 blob, __u32 lo, __u32 hi)
{
	__u64 n;

	if (lo >= hi || hi > HOTSPOT_BLOB_BUF)
		return false;
	n = hi - lo;
	lo &= HOTSPOT_BLOB_BUF - 1;
	/* The bound is checked on the register passed (x->blob has room for
	 * a masked offset plus HOTSPOT_BLOB_BUF). */
	asm volatile("" : "+r"(n));
	if (n > HOTSPOT_BLOB_BUF)
		return false;
	return !interp_probe_read(&x->blob[lo], n, (const void *)(blob + lo));
}

#define HS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Whether slot e's blob is still the one found: its _name and, for an
 * nmethod, its _method and compile id, else its frame size, read again
 * (the fields only, in one span). */
static __always_inline bool hs_pc_valid(struct hotspot_scratch *x, const struct hotspot_pc_slot *e,
					const struct sonde_hotspot_proc *h)
{
	__u32 name = h->off.blob_name, cid = h->off.nmethod_compile_id4 * 4u;

	asm volatile("" : "+r"(cid)); /* as hs_compile_id: keep the bound the verifier sees */
	if (e->kind == HS_BLOB_NMETHOD) {
		__u32 meth = h->off.nmethod_method;

		if (!hs_head_span(x, e->blob, HS_MIN(HS_MIN(name, meth), cid),
				  HS_MAX(HS_MAX(name + 8, meth + 8), cid + 4)))
			return false;
		return hs_blob64(x, name) == e->name && hs_blob64(x, meth) == e->val.method &&
		       hs_compile_id(x, h) == e->val.compile_id;
	}
	if (!hs_head_span(x, e->blob, HS_MIN(name, h->off.blob_frame_size),
			  HS_MAX(name + 8, h->off.blob_frame_size + 4u)))
		return false;
	return hs_blob64(x, name) == e->name && hs_blob32(x, h->off.blob_frame_size) == e->frame_size;
}

/* A stub without a frame size (the call stub Java is entered by,
 * StubRoutines) is rbp-framed: stepped here as the usual rule would
 * (sample.bpf.c's checks and step), its two words from the stack window,
 * rather than after an unwind table lookup that finds none in the
 * CodeCache's anonymous memory and a second step of this walker. */
static __always_inline int hs_step_rbp(struct hotspot_scratch *x, struct user_walk *st)
{
	const __u64 *frame;

	st->used_fp = 1;
	if (unwind_fp_check(st))
		return 1;
	frame = hs_stack(x, st->fp, 2);
	if (!frame) {
		count_err(SONDE_ERR_USER_READ);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	return unwind_fp_apply(st, frame);
}

/* Steps the frame at st->pc from its per-CPU slot: unwind_one's 0 / 1,
 * or -2 (no valid slot: the full step). */
static __always_inline int hs_pc_step(struct sonde_interp_jit *j, struct hotspot_scratch *x,
				      struct user_walk *st, __u32 native,
				      const struct sonde_hotspot_proc *h)
{
	struct hotspot_pc_slot *e;
	int i = hs_pc_find(x, st), r;

	HS_T0();
	if (i < 0) {
		hs_count(34);
		return -2;
	}
	e = &x->pcs[i & (HOTSPOT_PC_SLOTS - 1)];
	if (e->val.gen != interp_conn_gen || !hs_pc_valid(x, e, h)) {
		hs_count(e->val.gen != interp_conn_gen ? 36 : 37);
		x->pc_tags[i & (HOTSPOT_PC_SLOTS - 1)].pc = 0; /* the full step stores anew */
		return -2;
	}
	HS_T(40);
	if (e->kind == HS_BLOB_NMETHOD) {
		hs_count(43);
		hs_push_words(j, &e->val, native);
		HS_T(41);
		r = e->prologue ? hs_step_prologue(x, st) : hs_step_sized(x, st, e->frame_size);
		HS_T(42);
		return r;
	}
	hs_count(44);
	r = e->frame_size ? hs_step_sized(x, st, e->frame_size) : hs_step_rbp(x, st);
	HS_T(42);
	return r;
}

/* Keeps in st->pc's slot what the full step found: the blob at blob of
 * kind (an nmethod's Java frames in x->val), x->blob its header. */
static __always_inline void hs_pc_store(struct hotspot_scratch *x, const struct user_walk *st,
					__u64 blob, int kind, __u32 fs, bool prologue,
					const struct sonde_hotspot_proc *h)
{
	__u32 base = hs_pc_set(st->pc, st->exact_pc), set = base / HOTSPOT_PC_WAYS, i = 0;
	__u64 lo = st->pc, hi = st->pc + 1;
	struct hotspot_pc_slot *e;
	struct hotspot_pc_tag *t;
	bool free = false;

	/* An empty way, else the set's next in turn. */
	for (__u32 w = 0; w < HOTSPOT_PC_WAYS; w++) {
		if (!x->pc_tags[(base + w) & (HOTSPOT_PC_SLOTS - 1)].pc) {
			i = base + w;
			free = true;
			break;
		}
	}
	if (!free) {
		__u8 *v = &x->pc_victim[set & ((1 << HOTSPOT_PC_SET_BITS) - 1)];

		i = base + (*v & (HOTSPOT_PC_WAYS - 1));
		*v = *v + 1;
	}
	i &= HOTSPOT_PC_SLOTS - 1;
	t = &x->pc_tags[i];
	e = &x->pcs[i];
	/* A sampled pc past an nmethod's prologue: the pcs sharing its
	 * frames, those of them past the prologue. */
	if (kind == HS_BLOB_NMETHOD && st->exact_pc && !prologue && x->val.range_hi) {
		__u64 code_begin = hs_blob64(x, h->off.blob_code_begin);
		__u32 complete = hs_blob32(x, h->off.blob_frame_complete);
		__u32 rlo = x->val.range_lo;

		if (complete < (1u << 20) && rlo < complete)
			rlo = complete;
		if (rlo < x->val.range_hi && st->pc >= code_begin + rlo &&
		    st->pc < code_begin + x->val.range_hi) {
			lo = code_begin + rlo;
			hi = code_begin + x->val.range_hi;
		}
	}
	t->pc = lo;
	t->len = st->exact_pc ? HOTSPOT_PC_EXACT | (__u32)(hi - lo) : 0;
	t->tgid = st->tgid;
	e->blob = blob;
	e->name = hs_blob64(x, h->off.blob_name);
	e->frame_size = fs;
	e->kind = (__u8)kind;
	e->prologue = prologue ? 1 : 0;
	if (kind == HS_BLOB_NMETHOD) {
		e->val = x->val;
	} else {
		e->val.n = 0;
		e->val.gen = interp_conn_gen;
	}
}

/* interp_jit_step's HotSpot case: -1 (not a blob: the usual rule), or
 * unwind_one's 0 (go on) / 1 (stop). A global function: the verifier
 * checks it once, not at each of the walk's steps. */
static __always_inline int hs_step(struct sonde_interp_jit *j, const struct sonde_interp_proc *p,
				   struct user_walk *st, __u32 native)
{
	const struct sonde_hotspot_proc *h = (const struct sonde_hotspot_proc *)p;
	struct hotspot_scratch *x;
	__u32 fs, complete;
	__u64 blob, code_begin;
	bool prologue;
	int kind, r;

	if (!j || !p || !st)
		return -1;
	/* The key from rodata, not the stack: this function's frame is at
	 * the edge of the off-CPU walk's 512 bytes. */
	x = hs_scratch(j);
	if (!x)
		return -1;
	hs_count(2);
	HS_KIND(4);
	/* No heaps yet, or a pc past their committed part: they grew. */
	if (!x->fresh && (!x->c.n_heaps || !hs_in_heaps(x, st->pc)))
		hs_fill_heaps(x, h);
	/* The interpreter is one blob for the JVM's life: a pc between two
	 * found in it needs no segment map or header. */
	if (x->c.interp_lo && st->pc >= x->c.interp_lo && st->pc <= x->c.interp_hi) {
		hs_count(3);
		HS_KIND(0);
		return hs_step_interpreted(j, x, st, native, h);
	}
	/* A pc stepped lately: its blob's fields checked, nothing else read. */
	HS_KIND(5);
	r = hs_pc_step(j, x, st, native, h);
	if (r != -2)
		return r;
	HS_KIND(4);
	HS_T0();
	blob = hs_find_blob(x, h, st->pc);
	HS_T(27);
	if (!blob || interp_probe_read(x->blob, HOTSPOT_BLOB_BUF, (const void *)blob))
		return -1;
	HS_T(28);
	kind = hs_blob_kind(x, hs_blob64(x, h->off.blob_name));
	if (kind == HS_BLOB_INTERPRETER) {
		hs_count(3);
		HS_KIND(1);
		if (!x->c.interp_lo || st->pc < x->c.interp_lo || st->pc > x->c.interp_hi) {
			if (!x->c.interp_lo || st->pc < x->c.interp_lo)
				x->c.interp_lo = st->pc;
			if (st->pc > x->c.interp_hi)
				x->c.interp_hi = st->pc;
			hs_proc_store(x);
		}
		return hs_step_interpreted(j, x, st, native, h);
	}
	fs = hs_blob32(x, h->off.blob_frame_size);
	if (fs >= HOTSPOT_MAX_FRAME_SIZE) {
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	if (kind == HS_BLOB_NMETHOD) {
		HS_KIND(2);
		HS_T0();
		r = hs_nmethod_frames(j, x, blob, st, native, h);
		HS_T(29);
		code_begin = hs_blob64(x, h->off.blob_code_begin);
		complete = hs_blob32(x, h->off.blob_frame_complete);
		/* Sampled in the prologue, before the frame is built: the
		 * return address is still on top, rbp still the caller's. */
		prologue = st->exact_pc && st->pc >= code_begin && complete < (1u << 20) &&
			   st->pc - code_begin < complete;
		if (r)
			hs_pc_store(x, st, blob, kind, fs, prologue, h);
		return prologue ? hs_step_prologue(x, st) : hs_step_sized(x, st, fs);
	}
	HS_KIND(3);
	if (hs_blob64(x, h->off.blob_name))
		hs_pc_store(x, st, blob, kind, fs, false, h);
	return fs ? hs_step_sized(x, st, fs) : hs_step_rbp(x, st);
}

__noinline int hotspot_jit_step(struct sonde_interp_jit *j, const struct sonde_interp_proc *p,
				struct user_walk *st, __u32 native)
{
#ifdef SONDE_HOTSPOT_COUNT_READS
	__u64 t0 = bpf_ktime_get_ns(), t1;
	struct hs_phase *ph;
	int r = hs_step(j, p, st, native);

	t1 = bpf_ktime_get_ns();
	ph = hs_ph();
	if (ph) {
		/* kinds 0-4 at 16-25, a step from the per-CPU pcs (5) at 32 */
		__u32 at = ph->kind < 5 ? 16 + 2 * ph->kind : 32;

		interp_measure_add(at, t1 - t0);
		interp_measure_add(at + 1, 1);
	}
	if (ph && r >= 0) {
		if (!ph->steps) {
			ph->t_first = t0;
			ph->first_n = native;
		}
		ph->steps++;
		ph->t_last = t1;
		ph->last_n = native;
		ph->t_step_sum += t1 - t0;
	}
	return r;
#else
	return hs_step(j, p, st, native);
#endif
}
