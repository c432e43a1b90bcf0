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

/* The function's name, class name and file pointers, and first line. */
struct php_func_ids {
	__u64 name, ce, file;
	__u32 line_start;
	__u8 type;
};

static __always_inline void php_func_ids(const struct sonde_php_proc *p, __u64 func,
					 struct php_func_ids *ids)
{
	__u64 scope = interp_read_u64(func + p->off.fn_scope);

	ids->type = 0;
	bpf_probe_read_user(&ids->type, 1, (const void *)(func + p->off.fn_type));
	ids->name = interp_read_u64(func + p->off.fn_name);
	ids->ce = scope ? interp_read_u64(scope + p->off.ce_name) : 0;
	ids->file = 0;
	ids->line_start = 0;
	if (SONDE_PHP_USER_CODE(ids->type)) {
		ids->file = interp_read_u64(func + p->off.op_filename);
		ids->line_start = interp_read_u32(func + p->off.op_line_start);
	}
}

/* (BPF functions take 5 arguments: the names are read again; this runs
 * once per function.) */
__noinline int php_emit_meta(__u32 tgid, __u64 func, __u64 sum,
				    const struct sonde_php_proc *p)
{
	struct sonde_php_meta_rec *r;
	struct sonde_php_meta *m;
	struct php_func_ids ids;

	if (!p)
		return -1;
	php_func_ids(p, func, &ids);
	r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_PHP);
	if (!r)
		return -1;
	m = &r->meta;
	m->size = sizeof(*m);
	m->version = SONDE_PHP_META_VERSION;
	m->type = ids.type;
	m->fn_flags = interp_read_u32(func + p->off.fn_flags);
	m->func_addr = func;
	m->checksum = sum;
	m->line_start = ids.line_start;
	m->flags = 0;
	__builtin_memset(m->pad, 0, sizeof(m->pad));
	m->name_len = php_str(m->name, sizeof(m->name), ids.name, p->off.str_val, &m->flags,
			      SONDE_PHP_META_NAME_CUT);
	m->class_len = php_str(m->class_name, sizeof(m->class_name), ids.ce, p->off.str_val,
			       &m->flags, SONDE_PHP_META_CLASS_CUT);
	m->file_len = php_str(m->file, sizeof(m->file), ids.file, p->off.str_val, &m->flags,
			      SONDE_PHP_META_FILE_CUT);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Sends func's names unless this process's copy was sent already. A
 * global function, as php_frame_word. */
__noinline int php_note_func(__u32 tgid, __u64 func, const struct sonde_php_proc *p)
{
	struct sonde_php_func_key key = { .tgid = tgid, .func_addr = func };
	struct php_func_ids ids;
	__u64 sum, *seen;

	if (!p)
		return 0;
	php_func_ids(p, func, &ids);
	/* A freed and reused zend_function has other names or lines. */
	sum = ids.name ^ (ids.ce << 1) ^ (ids.file << 2) ^ ((__u64)ids.line_start << 32) ^ ids.type;
	seen = bpf_map_lookup_elem(&php_funcs, &key);
	if (seen && *seen == sum)
		return 0;
	if (php_emit_meta(tgid, func, sum, p) == 0)
		bpf_map_update_elem(&php_funcs, &key, &sum, BPF_ANY);
	return 0;
}

/* The line of opline, a zend_op of func, or 0 when it is not one (the
 * first to last opcode of func's op_array). */
static __always_inline __u32 php_opline_line(const struct sonde_php_proc *p, __u64 func,
					     __u64 opline)
{
	__u64 ops = interp_read_u64(func + p->off.op_opcodes);
	__u32 last = interp_read_u32(func + p->off.op_last);

	if (!opline || !ops || opline < ops || opline >= ops + (__u64)last * SONDE_PHP_OP_SIZE)
		return 0;
	return interp_read_u32(opline + p->off.op_lineno);
}

/* One frame as its SONDE_PHP_FRAME word (0: stop: no frame, or the dummy
 * frame without a function that a call from outside the VM starts with),
 * and in *next the frame below it. leaf_opline: the VM's opline register
 * when the sample is in the VM and ex is the frame it runs, else 0. A
 * global function: the verifier checks it once, not once per frame. */
__noinline __u64 php_frame_word(const struct sonde_php_proc *p, __u64 ex, __u64 leaf_opline,
				__u64 *next)
{
	__u64 func, opline;
	__u32 line = 0, info;
	__u8 type = 0;

	if (!p || !next)
		return 0;
	*next = 0;
	if (!ex)
		return 0;
	*next = interp_read_u64(ex + p->off.ex_prev);
	func = interp_read_u64(ex + p->off.ex_func);
	if (!func)
		return 0; /* a dummy frame: the bottom of the chain */
	bpf_probe_read_user(&type, 1, (const void *)(func + p->off.fn_type));
	info = interp_read_u32(ex + p->off.ex_call_info);
	if (!SONDE_PHP_USER_CODE(type))
		return SONDE_PHP_FRAME(func, 0, 0); /* internal: no opline of its own */
	if (leaf_opline)
		line = php_opline_line(p, func, leaf_opline);
	if (!line) {
		opline = interp_read_u64(ex + p->off.ex_opline);
		line = php_opline_line(p, func, opline);
	}
	return SONDE_PHP_FRAME(func, line, info & SONDE_PHP_CALL_TOP);
}

/* The VM's opline register if the sampled thread's frame register holds
 * ex (SONDE_PHP_VM_REGS): the sample is in the VM running ex, or in a C
 * function it called that kept both registers; php_opline_line() still
 * checks the opline is one of ex's function. 0: none. */
static __always_inline __u64 php_leaf_opline(const struct sonde_php_proc *p, __u64 ex)
{
	struct pt_regs *regs;

	if (!(p->off.flags & SONDE_PHP_VM_REGS))
		return 0;
	regs = task_user_regs((struct task_struct *)bpf_get_current_task());
	if (!regs || BPF_CORE_READ(regs, r14) != ex)
		return 0;
	return BPF_CORE_READ(regs, r15);
}

/* Records the PHP frames of tgid at rec->frames[at..], with p its
 * interp_procs entry (of kind SONDE_INTERP_PHP). Returns how many. A
 * global function: verified once, whatever the state of the sample
 * program that calls it. */
__noinline int php_walk(struct sonde_sample *rec, const struct sonde_php_proc *p,
			       __u32 tgid, __u32 tid, __u32 at)
{
	__u64 ex, leaf;
	__u32 n = 0, i;

	if (!rec || !p || tid != tgid)
		return 0;
	ex = interp_read_u64(p->runtime_addr + p->off.eg_current_execute_data);
	if (!ex)
		return 0;
	leaf = php_leaf_opline(p, ex);
	for (i = 0; i < SONDE_PHP_MAX_FRAMES && ex; i++) {
		__u64 next = 0, word = php_frame_word(p, ex, i == 0 ? leaf : 0, &next);

		if (!interp_frame_put(rec, at, n, word))
			break;
		n++;
		php_note_func(tgid, SONDE_PHP_FRAME_FUNC(word), p);
		ex = next;
	}
	return n;
}
