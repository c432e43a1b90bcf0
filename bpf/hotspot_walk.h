/* hotspot_walk.h - the HotSpot JVM's JIT-frame walker of sample.bpf.c
 * (docs/interpreters.md, "JIT frames" and "HotSpot"). For a tgid whose
 * interp_procs entry is of kind SONDE_INTERP_HOTSPOT:
 * - at the sample's start, hotspot_jit_begin() reads the CodeCache's
 *   bounds (CodeCache::_low_bound/_high_bound) and claims that range;
 * - for each frame whose pc is in it, hotspot_jit_step() finds the code
 *   blob holding the pc through its CodeHeap's segment map (the heaps read
 *   once per sample), and steps the frame by the JVM's own layout: the
 *   interpreter's frames by rbp (Method* and bcp in their slots, the
 *   caller's sp in the sender-sp slot), compiled ones (nmethods) and
 *   stubs with a frame size by sp + frame size, other stubs (the call
 *   stub that Java is entered by) by rbp. Each Java frame is buffered as
 *   a JIT frame standing for its native frame: the Method*, and the bci
 *   (interpreted) or unknown (compiled);
 * - the first time a (process, Method*) is seen (LRU map hotspot_methods,
 *   the ConstMethod* as the value: a reused Method* has another), the
 *   method's class name, name, signature and source file symbols and its
 *   line number table go out as a SONDE_REC_INTERP record, so names survive
 *   the JVM's exit and class unloading.
 *
 * Everything is read with bpf_probe_read_user at offsets from the file's
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

#define HOTSPOT_MAX_HEAPS 4     /* CodeHeaps: JDK 17 has 3 (segmented cache) */
#define HOTSPOT_SEGMAP_HOPS 32  /* segment map hops back to a blob's start */
#define HOTSPOT_BLOB_BUF 512    /* bytes of a blob's header read at once */
#define HOTSPOT_FRAME_WORDS 12  /* interpreter frame words read: fp - 80 .. fp + 16 */
#define HOTSPOT_MAX_FRAME_SIZE (1u << 16) /* words: a compiled frame beyond is damage */
#define HOTSPOT_MAX_INLINE 16   /* scopes per compiled frame: C2 inlines 15 deep (MaxInlineLevel) */
#define HOTSPOT_SCOPE_BUF 16    /* bytes read at a scope: its 3 header numbers */

struct hotspot_heap {
	__u64 low, high; /* committed code: [low, high) */
	__u64 segmap;    /* segment map: one byte per segment */
	__u32 log2_segment, pad;
};

/* Per-CPU, per sample: the heaps (read at the first Java frame) and the
 * blob header buffer. */
struct hotspot_scratch {
	struct hotspot_heap heaps[HOTSPOT_MAX_HEAPS];
	__u32 n_heaps, filled;
	__u8 blob[HOTSPOT_BLOB_BUF];
	__u64 frame[HOTSPOT_FRAME_WORDS];
	__u8 scope[HOTSPOT_SCOPE_BUF];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hotspot_scratch);
} hotspot_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, struct sonde_hotspot_method_key);
	__type(value, __u64); /* ConstMethod* */
} hotspot_methods SEC(".maps");

static __always_inline __u64 hs_ptr(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

static __always_inline __u32 hs_u32(__u64 addr)
{
	__u32 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)addr);
	return v;
}

static __always_inline __u16 hs_u16(__u64 addr)
{
	__u16 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)addr);
	return v;
}

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

/* Claims the CodeCache for this sample's walk. */
static __always_inline void hotspot_jit_begin(struct sonde_interp_jit *j,
					      const struct sonde_interp_proc *p)
{
	const struct sonde_hotspot_proc *h = (const struct sonde_hotspot_proc *)p;
	__u64 lo = hs_ptr(h->runtime_addr + h->off.codecache_low_static);
	__u64 hi = hs_ptr(h->runtime_addr + h->off.codecache_high_static);
	struct hotspot_scratch *x;
	__u32 zero = 0;

	if (!lo || hi <= lo)
		return; /* not started yet */
	x = bpf_map_lookup_elem(&hotspot_scratch, &zero);
	if (!x)
		return;
	x->filled = 0;
	j->kind = SONDE_INTERP_HOTSPOT;
	j->anon = 0;
	j->n_ranges = 1;
	j->lo[0] = lo;
	j->hi[0] = hi;
}

static __always_inline void hs_fill_heaps(struct hotspot_scratch *x,
					  const struct sonde_hotspot_proc *h)
{
	__u64 arr = hs_ptr(h->runtime_addr + h->off.codecache_heaps_static), data;
	__u32 len;

	x->filled = 1;
	x->n_heaps = 0;
	if (!arr)
		return;
	len = hs_u32(arr + h->off.growable_len);
	data = hs_ptr(arr + h->off.growable_data);
	for (__u32 i = 0; i < HOTSPOT_MAX_HEAPS; i++) {
		struct hotspot_heap *e = &x->heaps[i];
		__u64 heap;

		if (i >= len || !data)
			break;
		heap = hs_ptr(data + i * 8);
		if (!heap)
			break;
		e->low = hs_ptr(heap + h->off.heap_memory + h->off.vs_low);
		e->high = hs_ptr(heap + h->off.heap_memory + h->off.vs_high);
		e->segmap = hs_ptr(heap + h->off.heap_segmap + h->off.vs_low);
		e->log2_segment = hs_u32(heap + h->off.heap_log2_segment);
		x->n_heaps = i + 1;
	}
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
		if (i < x->n_heaps && pc >= x->heaps[i].low && pc < x->heaps[i].high) {
			e = &x->heaps[i];
			break;
		}
	}
	if (!e || !e->segmap || e->log2_segment > 20)
		return 0;
	idx = (pc - e->low) >> e->log2_segment;
	for (__u32 k = 0; k < HOTSPOT_SEGMAP_HOPS; k++) {
		__u8 b = 0xff;

		if (bpf_probe_read_user(&b, 1, (const void *)(e->segmap + idx)) || b == 0xff)
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

	if (!sym || bpf_probe_read_user(&len, sizeof(len), (const void *)(sym + h->off.symbol_length)))
		return 0;
	n = len;
	if (n > size) {
		n = size;
		*flags |= cut;
	}
	if (n == 0 || bpf_probe_read_user(dst, n, (const void *)(sym + h->off.symbol_body)))
		return 0;
	return (__u16)n;
}

/* The constant pool's Symbol at index idx (a Utf8 entry's slot). */
static __always_inline __u64 hs_cp_symbol(__u64 cpool, __u16 idx,
					  const struct sonde_hotspot_proc *h)
{
	if (!cpool || !idx)
		return 0;
	return hs_ptr(cpool + h->off.cpool_size + (__u64)idx * 8);
}

/* (BPF functions take 5 arguments; this runs once per method.) */
static __noinline int hotspot_emit_method(__u32 tgid, __u64 method, __u64 cm,
					  const struct sonde_hotspot_proc *h)
{
	__u64 cpool = hs_ptr(cm + h->off.cmethod_constants);
	__u64 holder = cpool ? hs_ptr(cpool + h->off.cpool_holder) : 0;
	struct sonde_hotspot_method_rec *r;
	struct sonde_hotspot_method *m;
	__u16 flags, code_size;

	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_err(SONDE_ERR_RINGBUF_FULL_EVENT);
		return -1;
	}
	r->h.type = SONDE_REC_INTERP;
	r->h.pid = tgid;
	r->h.kind = SONDE_INTERP_HOTSPOT;
	r->h.len = sizeof(r->m);
	m = &r->m;
	m->size = sizeof(*m);
	m->version = SONDE_HOTSPOT_METHOD_VERSION;
	m->flags = 0;
	m->pad = 0;
	m->pad2[0] = m->pad2[1] = m->pad2[2] = 0;
	m->method = method;
	m->const_method = cm;
	code_size = hs_u16(cm + h->off.cmethod_code_size);
	m->code_size = code_size;
	m->klass_len = hs_symbol(m->klass, sizeof(m->klass),
				 holder ? hs_ptr(holder + h->off.klass_name) : 0, h, &m->flags,
				 SONDE_HOTSPOT_METHOD_KLASS_CUT);
	m->name_len = hs_symbol(m->name, sizeof(m->name),
				hs_cp_symbol(cpool, hs_u16(cm + h->off.cmethod_name_index), h), h,
				&m->flags, SONDE_HOTSPOT_METHOD_NAME_CUT);
	m->sig_len = hs_symbol(m->sig, sizeof(m->sig),
			       hs_cp_symbol(cpool, hs_u16(cm + h->off.cmethod_sig_index), h), h,
			       &m->flags, SONDE_HOTSPOT_METHOD_SIG_CUT);
	m->source_len = hs_symbol(m->source, sizeof(m->source),
				  hs_cp_symbol(cpool, hs_u16(cpool + h->off.cpool_source_index), h),
				  h, &m->flags, SONDE_HOTSPOT_METHOD_SOURCE_CUT);
	m->linetable_len = 0;
	flags = hs_u16(cm + h->off.cmethod_flags);
	if (flags & h->off.cmethod_has_lines) {
		/* The compressed table follows the bytecodes; it ends with a 0
		 * the decoder stops at. A table near the end of a mapping: a
		 * shorter read. */
		__u64 at = cm + h->off.cmethod_size + code_size;

		if (!bpf_probe_read_user(m->linetable, sizeof(m->linetable), (const void *)at)) {
			m->linetable_len = sizeof(m->linetable);
			m->flags |= SONDE_HOTSPOT_METHOD_HAS_LINES;
		} else if (!bpf_probe_read_user(m->linetable, 64, (const void *)at)) {
			m->linetable_len = 64;
			m->flags |= SONDE_HOTSPOT_METHOD_HAS_LINES;
		}
	}
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Sends method's record unless this process's copy was sent already. */
static __always_inline __u64 hotspot_note_method(__u32 tgid, __u64 method,
						 const struct sonde_hotspot_proc *h)
{
	struct sonde_hotspot_method_key key = { .tgid = tgid, .method = method };
	__u64 cm = hs_ptr(method + h->off.method_const), *seen;

	if (!cm)
		return 0;
	seen = bpf_map_lookup_elem(&hotspot_methods, &key);
	if (seen && *seen == cm)
		return cm;
	if (hotspot_emit_method(tgid, method, cm, h) == 0)
		bpf_map_update_elem(&hotspot_methods, &key, &cm, BPF_ANY);
	return cm;
}

/* Steps an interpreted frame: rbp is its frame pointer. */
static __always_inline int hs_step_interpreted(struct sonde_interp_jit *j,
					       struct hotspot_scratch *x, struct user_walk *st,
					       __u32 native, const struct sonde_hotspot_proc *h)
{
	__u64 fp = st->fp, method, bcp, cm, bci = SONDE_HOTSPOT_BCI_UNKNOWN, sender_sp;
	__u32 ms = h->off.frame_method_slot, bs = h->off.frame_bcp_slot,
	      ss = h->off.frame_sender_sp_slot;

	if (!fp || (fp & 7) || fp < st->sp || ms > 10 || bs > 10 || ss > 10 ||
	    bpf_probe_read_user(x->frame, sizeof(x->frame), (const void *)(fp - 80))) {
		count_err(SONDE_ERR_USER_BAD_FP);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	method = x->frame[10 - ms];
	bcp = x->frame[10 - bs];
	sender_sp = x->frame[10 - ss];
	/* A Method* whose ConstMethod cannot be read is no method (a frame
	 * sampled before the interpreter built it): the frame stays native. */
	cm = method ? hotspot_note_method(st->tgid, method, h) : 0;
	if (cm) {
		if (bcp >= cm + h->off.cmethod_size &&
		    bcp - (cm + h->off.cmethod_size) < SONDE_HOTSPOT_BCI_UNKNOWN)
			bci = bcp - (cm + h->off.cmethod_size);
		interp_jit_push(j, native, SONDE_HOTSPOT_WORD0(method, 0), SONDE_HOTSPOT_WORD1(bci));
	}
	st->pc = x->frame[11];
	st->fp = x->frame[10];
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
static __always_inline int hs_step_sized(struct user_walk *st, __u64 words)
{
	__u64 sender_sp = st->sp + words * 8, frame[2];

	if (bpf_probe_read_user(frame, sizeof(frame), (const void *)(sender_sp - 16))) {
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

/* The 3 numbers a scope starts with (CompressedReadStream: a byte below
 * 192 ends a number, each further byte weighs 6 bits more, at most 5):
 * the sender scope's offset, the method's metadata index, bci + 1. */
static __always_inline int hs_scope_header(const __u8 *b, __u32 *sender, __u32 *midx,
					   __u32 *bci1)
{
	__u32 sum = 0, shift = 0, nb = 0, vi = 0;

	for (__u32 i = 0; i < HOTSPOT_SCOPE_BUF; i++) {
		__u32 v = b[i];

		sum += v << shift;
		nb++;
		if (v >= 192 && nb < 5) {
			shift += 6;
			continue;
		}
		if (vi == 0)
			*sender = sum;
		else if (vi == 1)
			*midx = sum;
		else
			*bci1 = sum;
		if (++vi == 3)
			return 0;
		sum = shift = nb = 0;
	}
	return -1;
}

/* A compiled frame's Java frames, leaf first: the scope chain of the
 * PcDesc at pc (a return address's own, the next one after a sampled pc),
 * inlined methods included.
 * Returns how many were buffered. */
static __always_inline __u32 hs_compiled_frames(struct sonde_interp_jit *j,
						struct hotspot_scratch *x, __u64 blob, __u64 pc,
						bool exact, __u32 native, __u32 tgid,
						const struct sonde_hotspot_proc *h)
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
		if (bpf_probe_read_user(&v, sizeof(v),
					(const void *)(pcs + (__u64)mid * SONDE_HOTSPOT_PCDESC_SIZE +
						       SONDE_HOTSPOT_PCDESC_PC)))
			return 0;
		if (v < target)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= n || bpf_probe_read_user(desc, sizeof(desc),
					   (const void *)(pcs + (__u64)lo * SONDE_HOTSPOT_PCDESC_SIZE)))
		return 0;
	for (__u32 depth = 0, decode = (__u32)desc[1]; depth < HOTSPOT_MAX_INLINE; depth++) {
		__u32 sender = 0, midx = 0, bci1 = 0;
		__u64 method, bci;

		/* 0 is the recorder's "no scope": the end of the chain. */
		if (!decode || decode > (1u << 24) ||
		    bpf_probe_read_user(x->scope, sizeof(x->scope), (const void *)(scopes + decode)) ||
		    hs_scope_header(x->scope, &sender, &midx, &bci1) < 0 || !midx || midx > 65536)
			break;
		method = hs_ptr(blob + meta + (__u64)(midx - 1) * 8);
		if (!method || !hotspot_note_method(tgid, method, h))
			break;
		bci = bci1 ? bci1 - 1 : 0; /* bci1 0: the method's entry */
		if (!interp_jit_push(j, native, SONDE_HOTSPOT_WORD0(method, 1),
				     SONDE_HOTSPOT_WORD1(bci)))
			break;
		pushed++;
		decode = sender;
	}
	return pushed;
}

/* Steps a frame sampled before its prologue built it: the return address
 * on top of the stack, rbp untouched. */
static __always_inline int hs_step_prologue(struct user_walk *st)
{
	__u64 ret = 0;

	if (bpf_probe_read_user(&ret, sizeof(ret), (const void *)st->sp)) {
		count_err(SONDE_ERR_USER_READ);
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	st->pc = ret;
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
static __always_inline int hs_blob_kind(__u64 name)
{
	char s[8] = {};

	if (!name || bpf_probe_read_user(s, sizeof(s), (const void *)name))
		return HS_BLOB_OTHER;
	/* "nmethod" and "native nmethod" (a JNI wrapper), "Interpreter". */
	if ((s[0] == 'n' && s[1] == 'm' && s[2] == 'e' && s[3] == 't' && s[4] == 'h' &&
	     s[5] == 'o' && s[6] == 'd' && s[7] == 0) ||
	    (s[0] == 'n' && s[1] == 'a' && s[2] == 't' && s[3] == 'i' && s[4] == 'v' &&
	     s[5] == 'e' && s[6] == ' ' && s[7] == 'n'))
		return HS_BLOB_NMETHOD;
	if (s[0] == 'I' && s[1] == 'n' && s[2] == 't' && s[3] == 'e' && s[4] == 'r' &&
	    s[5] == 'p' && s[6] == 'r' && s[7] == 'e')
		return HS_BLOB_INTERPRETER;
	return HS_BLOB_OTHER;
}

/* interp_jit_step's HotSpot case: -1 (not a blob: the usual rule), or
 * unwind_one's 0 (go on) / 1 (stop). A global function: the verifier
 * checks it once, not at each of the walk's steps. */
__noinline int hotspot_jit_step(struct sonde_interp_jit *j, const struct sonde_interp_proc *p,
				struct user_walk *st, __u32 native)
{
	const struct sonde_hotspot_proc *h = (const struct sonde_hotspot_proc *)p;
	struct hotspot_scratch *x;
	__u32 zero = 0, fs, complete;
	__u64 blob, method, code_begin;
	int kind;

	if (!j || !p || !st)
		return -1;
	x = bpf_map_lookup_elem(&hotspot_scratch, &zero);
	if (!x)
		return -1;
	if (!x->filled)
		hs_fill_heaps(x, h);
	blob = hs_find_blob(x, h, st->pc);
	if (!blob || bpf_probe_read_user(x->blob, sizeof(x->blob), (const void *)blob))
		return -1;
	kind = hs_blob_kind(hs_blob64(x, h->off.blob_name));
	if (kind == HS_BLOB_INTERPRETER)
		return hs_step_interpreted(j, x, st, native, h);
	fs = hs_blob32(x, h->off.blob_frame_size);
	if (fs >= HOTSPOT_MAX_FRAME_SIZE) {
		st->outcome = SONDE_OUTCOME_READ_ERROR;
		return 1;
	}
	if (kind == HS_BLOB_NMETHOD) {
		method = hs_blob64(x, h->off.nmethod_method);
		if (!hs_compiled_frames(j, x, blob, st->pc, st->exact_pc, native, st->tgid, h) &&
		    method && hotspot_note_method(st->tgid, method, h)) {
			interp_jit_push(j, native, SONDE_HOTSPOT_WORD0(method, 1),
					SONDE_HOTSPOT_WORD1(SONDE_HOTSPOT_BCI_UNKNOWN));
		}
		code_begin = hs_blob64(x, h->off.blob_code_begin);
		complete = hs_blob32(x, h->off.blob_frame_complete);
		/* Sampled in the prologue, before the frame is built: the
		 * return address is still on top, rbp still the caller's. */
		if (st->exact_pc && st->pc >= code_begin && complete < (1u << 20) &&
		    st->pc - code_begin < complete)
			return hs_step_prologue(st);
		return hs_step_sized(st, fs);
	}
	if (fs)
		return hs_step_sized(st, fs);
	/* A stub without a frame size (the call stub Java is entered by,
	 * StubRoutines): rbp-framed. */
	return -1;
}
