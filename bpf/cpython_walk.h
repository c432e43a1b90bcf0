/* cpython_walk.h - the CPython frame walker of sample.bpf.c
 * (docs/interpreters.md). For a tgid whose interp_procs entry is of kind
 * SONDE_INTERP_CPYTHON (interp_walk.h dispatches): find the
 * sampled thread's PyThreadState (bounded walk of the interpreter's thread
 * list, matching native_thread_id), walk its _PyInterpreterFrame chain
 * (at most SONDE_CPYTHON_MAX_FRAMES) and record each frame's code object
 * and instruction offset after the native frames. The first time a code
 * object (with its checksum) is seen in a process, its metadata goes out
 * as a SONDE_REC_INTERP record of kind SONDE_INTERP_CPYTHON.
 *
 * Everything is read with bpf_probe_read_user at offsets the symbolizer
 * chose for the version: a wrong offset or a racing interpreter gives a
 * wrong or short Python stack, never more. Included by interp_walk.h after
 * sample.bpf.c's maps (events, interp_procs) and count_err().
 */
#pragma once

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sonde_cpython_code_key);
	__type(value, __u64); /* checksum */
} cpython_codes SEC(".maps");

/* A compact ASCII str's characters into dst; returns the length copied. */
static __always_inline __u16 cpy_str(char *dst, __u32 size, __u64 obj, __u16 data_off,
				     __u8 *flags, __u8 cut)
{
	long n;

	if (!obj)
		return 0;
	n = bpf_probe_read_user_str(dst, size, (const void *)(obj + data_off));
	if (n <= 0)
		return 0;
	if (n == size)
		*flags |= cut; /* filled the slot: maybe cut */
	return (__u16)(n - 1);
}

/* (BPF functions take 5 arguments: the names and line are read again;
 * this runs once per code object.) */
static __noinline int cpython_emit_meta(__u32 tgid, __u64 code, __u64 sum,
					const struct sonde_cpython_proc *p)
{
	__u64 qualname = interp_read_u64(code + p->off.code_qualname);
	__u64 filename = interp_read_u64(code + p->off.code_filename);
	struct sonde_cpython_meta_rec *r;
	struct sonde_cpython_meta *m;
	__u32 firstlineno = 0;
	__u64 lt;
	__s64 len = 0;
	__u32 n;

	r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_CPYTHON);
	if (!r)
		return -1;
	m = &r->meta;
	m->size = sizeof(*m);
	m->version = SONDE_CPYTHON_META_VERSION;
	m->minor = p->off.minor;
	bpf_probe_read_user(&firstlineno, sizeof(firstlineno),
			    (const void *)(code + p->off.code_firstlineno));
	m->firstlineno = firstlineno;
	m->code_addr = code;
	m->checksum = sum;
	m->flags = 0;
	m->pad = 0;
	m->qualname_len = cpy_str(m->qualname, sizeof(m->qualname), qualname, p->off.ascii_data,
				  &m->flags, SONDE_CPYTHON_META_QUALNAME_CUT);
	m->filename_len = cpy_str(m->filename, sizeof(m->filename), filename, p->off.ascii_data,
				  &m->flags, SONDE_CPYTHON_META_FILENAME_CUT);
	lt = interp_read_u64(code + p->off.code_linetable);
	if (lt)
		len = (__s64)interp_read_u64(lt + p->off.var_size);
	if (len < 0)
		len = 0;
	if (len > (__s64)sizeof(m->linetable)) {
		len = sizeof(m->linetable);
		m->flags |= SONDE_CPYTHON_META_LINETABLE_CUT;
	}
	n = (__u32)len;
	if (n > 0 && n <= sizeof(m->linetable) &&
	    bpf_probe_read_user(m->linetable, n, (const void *)(lt + p->off.bytes_data)))
		n = 0;
	m->linetable_len = (__u16)n;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Sends code's metadata unless this process's copy was sent already
 * (its checksum: a freed and reused code object has other names or
 * lines). The three fields come from one span read of the code object's
 * head; the code object this CPU's last walk found at frame i with the
 * same checksum needs no map lookup (interp_span.h). A global function:
 * its stack is not the walk's. */
__noinline int cpython_note_code(struct unwind_scratch *s, __u32 i, __u32 tgid, __u64 code)
{
	struct sonde_cpython_code_key key = { .tgid = tgid, .code_addr = code };
	__u32 len, n, gen = (__u32)interp_conn_gen;
	const struct sonde_cpython_proc *p;
	struct interp_seen_slot *e;
	__u64 sum, *seen;

	if (!s)
		return 0;
	p = (const struct sonde_cpython_proc *)&s->proc;
	e = interp_seen_at(s->seen, i);
	len = p->off.code_qualname;

	if (p->off.code_filename > len)
		len = p->off.code_filename;
	if (p->off.code_firstlineno > len)
		len = p->off.code_firstlineno;
	n = interp_span_read(s->span, code, len + 8);
	sum = interp_span_field(s->span, n, code, p->off.code_qualname, 8) ^
	      (interp_span_field(s->span, n, code, p->off.code_filename, 8) << 1) ^
	      (interp_span_field(s->span, n, code, p->off.code_firstlineno, 4) << 32);
	if (interp_seen_match(e, tgid, code, gen) && e->val == sum)
		return 0;
	seen = bpf_map_lookup_elem(&cpython_codes, &key);
	if (!(seen && *seen == sum)) {
		if (cpython_emit_meta(tgid, code, sum, p))
			return 0;
		bpf_map_update_elem(&cpython_codes, &key, &sum, BPF_ANY);
	}
	interp_seen_store(e, tgid, code, gen, sum);
	return 0;
}

/* The sampled thread's PyThreadState in p's interpreter, or 0. */
static __always_inline __u64 cpython_tstate(const struct sonde_cpython_proc *p, __u32 tid)
{
	__u64 want = tid, ts;
	__u32 i;

	if (p->off.flags & SONDE_CPYTHON_PTHREAD_ID) {
		/* pthread_self() is the thread's TCB, which is its fs base. */
		struct task_struct *task = bpf_get_current_task_btf();

		want = BPF_CORE_READ(task, thread.fsbase);
	}
	ts = interp_read_u64(p->runtime_addr + p->off.runtime_interpreters_head);
	if (!ts)
		return 0;
	ts = interp_read_u64(ts + p->off.interp_threads_head);
	for (i = 0; i < SONDE_CPYTHON_MAX_THREADS && ts; i++) {
		if (interp_read_u64(ts + p->off.tstate_native_thread_id) == want)
			return ts;
		ts = interp_read_u64(ts + p->off.tstate_next);
	}
	return 0;
}

/* Whether frame is a 3.12+ shim frame: one per C call of the eval loop,
 * owned by the C stack, below the first frame that call runs. */
static __always_inline int cpython_is_shim(const struct sonde_cpython_proc *p, __u64 frame)
{
	__u8 owner = 0;

	if (!(p->off.flags & SONDE_CPYTHON_ENTRY_SHIM) || !frame)
		return 0;
	bpf_probe_read_user(&owner, 1, (const void *)(frame + p->off.frame_owner));
	return owner == SONDE_CPYTHON_OWNED_BY_CSTACK;
}

/* One frame (not a shim) as its SONDE_CPYTHON_FRAME word (0: stop), and in
 * *next the frame below it, a shim below it stepped over (the frame above
 * a shim is an entry frame). A global function: the verifier checks it
 * once, not once per frame of the walk (with every version's branches
 * inline, the walk passed a million instructions). */
__noinline __u64 cpython_frame_word(const struct sonde_cpython_proc *p, __u64 frame, __u64 *next)
{
	__u64 code, prev, instr = 0;
	__u8 entry = 0;
	__u16 flags;

	if (!p || !next)
		return 0;
	*next = 0;
	if (!frame)
		return 0;
	flags = p->off.flags;
	code = interp_read_u64(frame + p->off.frame_code);
	if (!code)
		return 0;
	if (flags & SONDE_CPYTHON_LASTI_INDEX) {
		__s32 lasti = 0;

		/* 3.10 f_lasti counts code units; -1 before the first. */
		bpf_probe_read_user(&lasti, sizeof(lasti),
				    (const void *)(frame + p->off.frame_prev_instr));
		if (lasti > 0)
			instr = (__u64)lasti * 2;
	} else {
		__u64 last = interp_read_u64(frame + p->off.frame_prev_instr);
		__u64 start = code + p->off.code_code_adaptive;

		if (last >= start)
			instr = last - start;
	}
	prev = interp_read_u64(frame + p->off.frame_previous);
	if (flags & SONDE_CPYTHON_ENTRY_ALL) {
		entry = 1;
	} else if (flags & SONDE_CPYTHON_ENTRY_SHIM) {
		if (cpython_is_shim(p, prev)) {
			entry = 1;
			prev = interp_read_u64(prev + p->off.frame_previous);
		}
	} else {
		bpf_probe_read_user(&entry, 1, (const void *)(frame + p->off.frame_is_entry));
	}
	*next = prev;
	return SONDE_CPYTHON_FRAME(code, instr, entry);
}

/* Records the Python frames of thread tid of tgid at s->rec.frames[at..],
 * with s->proc its interp_procs entry (of kind SONDE_INTERP_CPYTHON).
 * Returns how many. A global function: verified once, whatever the state
 * of the sample program that calls it. */
__noinline int cpython_walk(struct unwind_scratch *s, __u32 tgid, __u32 tid, __u32 at)
{
	const struct sonde_cpython_proc *p;
	__u64 ts, frame;
	__u32 n = 0, i;

	if (!s)
		return 0;
	p = (const struct sonde_cpython_proc *)&s->proc;
	ts = cpython_tstate(p, tid);
	if (!ts)
		return 0;
	frame = interp_read_u64(ts + p->off.tstate_cframe);
	if (!frame)
		return 0;
	if (!(p->off.flags & SONDE_CPYTHON_TSTATE_FRAME))
		frame = interp_read_u64(frame + p->off.cframe_current_frame);
	/* Only the innermost frame can be a shim not yet stepped over (a C
	 * call of the eval loop that has not pushed its first frame yet);
	 * cpython_frame_word steps over every shim below a frame. */
	if (cpython_is_shim(p, frame))
		frame = interp_read_u64(frame + p->off.frame_previous);
	for (i = 0; i < SONDE_CPYTHON_MAX_FRAMES && frame; i++) {
		__u64 next = 0, word = cpython_frame_word(p, frame, &next);

		if (!interp_frame_put(&s->rec, at, n, word))
			break;
		n++;
		cpython_note_code(s, i, tgid, SONDE_CPYTHON_FRAME_CODE(word));
		frame = next;
	}
	return n;
}
