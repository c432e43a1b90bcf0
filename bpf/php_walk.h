/* php_walk.h - the PHP frame walker of sample.bpf.c
 * (docs/interpreters.md). For a tgid whose interp_procs entry is of kind
 * SONDE_INTERP_PHP (interp_walk.h dispatches): from executor_globals'
 * current_execute_data, walk the zend_execute_data chain (at most
 * SONDE_PHP_MAX_FRAMES) and record each frame's function and current line
 * after the native frames. The first time a function (with its checksum)
 * is seen in a process, its names go out as a SONDE_REC_INTERP record of
 * kind SONDE_INTERP_PHP.
 *
 * A non-ZTS PHP runs its VM on the process's main thread (CLI, FPM and
 * CGI workers, mod_php under prefork): only that thread's samples are
 * walked, as the globals are its own; other threads (a profiler's timer
 * thread, an extension's workers) get no PHP frames. Everything is read
 * with bpf_probe_read_user at offsets the symbolizer chose for the
 * version: a wrong offset or a racing VM gives a wrong or short PHP
 * stack, never more. Included by interp_walk.h after sample.bpf.c's maps
 * (events, interp_procs) and count_err().
 */
#pragma once

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sonde_php_func_key);
	__type(value, __u64); /* checksum */
} php_funcs SEC(".maps");

/* sample.bpf.c's: the task's user registers saved at kernel entry. */
static __always_inline struct pt_regs *task_user_regs(struct task_struct *task);

/* A zend_string's characters into dst; returns the length copied. */
static __always_inline __u16 php_str(char *dst, __u32 size, __u64 str, __u16 val_off, __u8 *flags,
				     __u8 cut)
{
	long n;

	dst[0] = 0;
	if (!str)
		return 0;
	n = bpf_probe_read_user_str(dst, size, (const void *)(str + val_off));
	if (n <= 0) {
		dst[0] = 0;
		return 0;
	}
	if (n == size)
		*flags |= cut; /* filled the slot: maybe cut */
	return (__u16)(n - 1);
}

/* The function's name, scope and file pointers, and first line. */
struct php_func_ids {
	__u64 name, scope, file;
	__u32 line_start;
	__u8 type;
};

static __always_inline __u32 php_max(__u32 a, __u32 b)
{
	return a > b ? a : b;
}

/* What the walk needs of the zend_function at func, in one read of its
 * first bytes (8.2: 168, from its type to op_array.line_start): its ids,
 * and for user code its opcodes and their count. */
static __always_inline void php_func_read(__u8 *span, const struct sonde_php_proc *p, __u64 func,
					  struct php_func_ids *ids, __u64 *ops, __u32 *last)
{
	const struct sonde_php_offsets *o = &p->off;
	__u32 hi = php_max(php_max(php_max(o->fn_type + 1, o->fn_name + 8), o->fn_scope + 8),
			   php_max(php_max(o->op_filename + 8, o->op_line_start + 4),
				   php_max(o->op_opcodes + 8, o->op_last + 4)));
	__u32 n = interp_span_read(span, func, hi);

	ids->type = (__u8)interp_span_field(span, n, func, o->fn_type, 1);
	ids->name = interp_span_field(span, n, func, o->fn_name, 8);
	ids->scope = interp_span_field(span, n, func, o->fn_scope, 8);
	ids->file = 0;
	ids->line_start = 0;
	*ops = 0;
	*last = 0;
	if (SONDE_PHP_USER_CODE(ids->type)) {
		ids->file = interp_span_field(span, n, func, o->op_filename, 8);
		ids->line_start = (__u32)interp_span_field(span, n, func, o->op_line_start, 4);
		*ops = interp_span_field(span, n, func, o->op_opcodes, 8);
		*last = (__u32)interp_span_field(span, n, func, o->op_last, 4);
	}
}

/* A freed and reused zend_function has other names, scope or lines. */
static __always_inline __u64 php_func_sum(const struct php_func_ids *ids)
{
	return ids->name ^ (ids->scope << 1) ^ (ids->file << 2) ^ ((__u64)ids->line_start << 32) ^
	       ids->type;
}

/* (BPF functions take 5 arguments: the names are read again; this runs
 * once per function.) */
__noinline int php_emit_meta(__u32 tgid, __u64 func, __u64 sum,
				    const struct sonde_php_proc *p)
{
	struct sonde_php_meta_rec *r;
	struct sonde_php_meta *m;
	__u64 name, scope, ce = 0, file = 0;
	__u32 line_start = 0;
	__u8 type = 0;

	if (!p)
		return -1;
	/* Read alone: the span holds the frame being walked. */
	bpf_probe_read_user(&type, 1, (const void *)(func + p->off.fn_type));
	name = interp_read_u64(func + p->off.fn_name);
	scope = interp_read_u64(func + p->off.fn_scope);
	ce = scope ? interp_read_u64(scope + p->off.ce_name) : 0;
	if (SONDE_PHP_USER_CODE(type)) {
		file = interp_read_u64(func + p->off.op_filename);
		line_start = interp_read_u32(func + p->off.op_line_start);
	}
	r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_PHP);
	if (!r)
		return -1;
	m = &r->meta;
	m->size = sizeof(*m);
	m->version = SONDE_PHP_META_VERSION;
	m->type = type;
	m->fn_flags = interp_read_u32(func + p->off.fn_flags);
	m->func_addr = func;
	m->checksum = sum;
	m->line_start = line_start;
	m->flags = 0;
	__builtin_memset(m->pad, 0, sizeof(m->pad));
	m->name_len = php_str(m->name, sizeof(m->name), name, p->off.str_val, &m->flags,
			      SONDE_PHP_META_NAME_CUT);
	m->class_len = php_str(m->class_name, sizeof(m->class_name), ce, p->off.str_val,
			       &m->flags, SONDE_PHP_META_CLASS_CUT);
	m->file_len = php_str(m->file, sizeof(m->file), file, p->off.str_val, &m->flags,
			      SONDE_PHP_META_FILE_CUT);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Sends func's names unless this process's copy (sum: its checksum)
 * was sent already. The function this CPU's last walk found at frame i
 * with the same checksum needs no map lookup. A global function, as
 * php_frame. */
__noinline int php_note_func(struct unwind_scratch *s, __u32 i, __u32 tgid, __u64 func, __u64 sum)
{
	struct sonde_php_func_key key = { .tgid = tgid, .func_addr = func };
	struct interp_seen_slot *e;
	__u32 gen = (__u32)interp_conn_gen;
	__u64 *seen;

	if (!s)
		return 0;
	e = interp_seen_at(s->seen, i);
	if (interp_seen_match(e, tgid, func, gen) && e->val == sum)
		return 0;
	seen = bpf_map_lookup_elem(&php_funcs, &key);
	if (!(seen && *seen == sum)) {
		if (php_emit_meta(tgid, func, sum, (const struct sonde_php_proc *)&s->proc))
			return 0;
		bpf_map_update_elem(&php_funcs, &key, &sum, BPF_ANY);
	}
	interp_seen_store(e, tgid, func, gen, sum);
	return 0;
}

/* The line of opline, a zend_op of the function whose last opcodes start
 * at ops, or 0 when it is not one of them. */
static __always_inline __u32 php_opline_line(const struct sonde_php_proc *p, __u64 ops, __u32 last,
					     __u64 opline)
{
	if (!opline || !ops || opline < ops || opline >= ops + (__u64)last * SONDE_PHP_OP_SIZE)
		return 0;
	return interp_read_u32(opline + p->off.op_lineno);
}

/* One frame, as php_frame() finds it. */
struct php_frame_out {
	__u64 word; /* its SONDE_PHP_FRAME word; 0: stop */
	__u64 next; /* the frame below it */
	__u64 sum;  /* its function's checksum (php_func_sum) */
};

/* One frame at ex into *o: its word (0: stop: no frame, or the dummy
 * frame without a function that a call from outside the VM starts with),
 * the frame below it and its function's checksum. The frame's fields
 * (opline, func, call info, prev: 8.2's first 56 bytes) are one read, the
 * function's another, its line a third. leaf_opline: the VM's opline
 * register when the sample is in the VM and ex is the frame it runs,
 * else 0. A global function: the verifier checks it once, not once per
 * frame. */
__noinline int php_frame(struct unwind_scratch *s, __u64 ex, __u64 leaf_opline,
			 struct php_frame_out *o)
{
	const struct sonde_php_proc *p;
	const struct sonde_php_offsets *off;
	struct php_func_ids ids;
	__u64 func, opline, ops;
	__u32 line = 0, info, last, lo, hi, n;

	if (!s || !o)
		return 0;
	o->word = 0;
	o->next = 0;
	o->sum = 0;
	if (!ex)
		return 0;
	p = (const struct sonde_php_proc *)&s->proc;
	off = &p->off;
	lo = off->ex_opline;
	if (off->ex_func < lo)
		lo = off->ex_func;
	if (off->ex_call_info < lo)
		lo = off->ex_call_info;
	if (off->ex_prev < lo)
		lo = off->ex_prev;
	hi = php_max(php_max(off->ex_opline + 8, off->ex_func + 8),
		     php_max(off->ex_call_info + 4, off->ex_prev + 8));
	n = interp_span_read(s->span, ex + lo, hi - lo);
	o->next = interp_span_field(s->span, n, ex + lo, off->ex_prev - lo, 8);
	func = interp_span_field(s->span, n, ex + lo, off->ex_func - lo, 8);
	if (!func)
		return 0; /* a dummy frame: the bottom of the chain */
	info = (__u32)interp_span_field(s->span, n, ex + lo, off->ex_call_info - lo, 4);
	opline = interp_span_field(s->span, n, ex + lo, off->ex_opline - lo, 8);
	php_func_read(s->span, p, func, &ids, &ops, &last);
	o->sum = php_func_sum(&ids);
	if (!SONDE_PHP_USER_CODE(ids.type)) {
		o->word = SONDE_PHP_FRAME(func, 0, 0); /* internal: no opline of its own */
		return 0;
	}
	if (leaf_opline)
		line = php_opline_line(p, ops, last, leaf_opline);
	if (!line)
		line = php_opline_line(p, ops, last, opline);
	o->word = SONDE_PHP_FRAME(func, line, info & SONDE_PHP_CALL_TOP);
	return 0;
}

/* The VM's opline register if the sampled thread's frame register holds
 * ex (SONDE_PHP_VM_REGS): the sample is in the VM running ex, or in a C
 * function it called that kept both registers; php_opline_line() still
 * checks the opline is one of ex's function. 0: none. Not inlined: its
 * 184 bytes of stack (the register reads) would sit in php_walk's frame,
 * under every call php_walk makes (the tail-call walk's chain of calls
 * is near the verifier's 512 bytes). */
static __noinline __u64 php_leaf_opline(const struct sonde_php_proc *p, __u64 ex)
{
	struct pt_regs *regs;

	if (!(p->off.flags & SONDE_PHP_VM_REGS))
		return 0;
	regs = task_user_regs((struct task_struct *)bpf_get_current_task());
	if (!regs || BPF_CORE_READ(regs, r14) != ex)
		return 0;
	return BPF_CORE_READ(regs, r15);
}

/* Records the PHP frames of tgid at s->rec.frames[at..], with s->proc
 * its interp_procs entry (of kind SONDE_INTERP_PHP). Returns how many. A
 * global function: verified once, whatever the state of the sample
 * program that calls it. */
__noinline int php_walk(struct unwind_scratch *s, __u32 tgid, __u32 tid, __u32 at)
{
	const struct sonde_php_proc *p;
	struct php_frame_out o;
	__u64 ex, leaf;
	__u32 n = 0, i;

	if (!s || tid != tgid)
		return 0;
	p = (const struct sonde_php_proc *)&s->proc;
	ex = interp_read_u64(p->runtime_addr + p->off.eg_current_execute_data);
	if (!ex)
		return 0;
	leaf = php_leaf_opline(p, ex);
	for (i = 0; i < SONDE_PHP_MAX_FRAMES && ex; i++) {
		php_frame(s, ex, i == 0 ? leaf : 0, &o);
		if (!interp_frame_put(&s->rec, at, n, o.word))
			break;
		n++;
		php_note_func(s, i, tgid, SONDE_PHP_FRAME_FUNC(o.word), o.sum);
		ex = o.next;
	}
	return n;
}
