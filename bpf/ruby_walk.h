/* ruby_walk.h - the Ruby (MRI/YARV) frame walker of sample.bpf.c
 * (docs/interpreters.md). For a tgid whose interp_procs entry is of kind
 * SONDE_INTERP_RUBY (interp_walk.h dispatches): from ruby_current_vm_ptr
 * to the main ractor's running execution context (the GVL holder; when
 * that is not the sampled thread, no Ruby frames), then its control
 * frames from the current one towards the stack's end (at most
 * SONDE_RUBY_MAX_FRAMES looked at): iseq frames and cfunc frames are
 * recorded after the native frames, dummy and ifunc frames skipped. The
 * first time an iseq or a cfunc's method entry is seen in a process, what
 * names it goes out as a SONDE_REC_INTERP record of kind
 * SONDE_INTERP_RUBY.
 *
 * Everything is read with bpf_probe_read_user at offsets the symbolizer
 * chose for the version: a wrong offset or a racing VM gives a wrong or
 * short Ruby stack, never more. Included by interp_walk.h after
 * sample.bpf.c's maps (events, interp_procs) and count_err().
 */
#pragma once

/* What ruby_frame_word found besides the word: the frame's env and the
 * checksum ruby_note keys its record by. */
struct ruby_frame {
	__u64 ep;
	__u64 sum;
};

/* Words read at once: a control frame's first (pc, sp, iseq, self, ep,
 * block_code in 3.1), an iseq body's first (through label and
 * first_lineno: 96 bytes in 3.1), a method entry (an RVALUE, 40 bytes). */
#define RUBY_CFP_WORDS 6
#define RUBY_BODY_WORDS 12
#define RUBY_ME_WORDS 5

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sonde_ruby_key);
	__type(value, __u64); /* checksum */
} ruby_seen SEC(".maps");

/* The word at off of a structure at base of which buf holds the first
 * words (read in one go: one probe read instead of one per field); a
 * field outside them or not 8-byte aligned is read on its own. buf has
 * one word more than words (the verifier bounds the byte offset, not the
 * word index: the spare word keeps its last read inside the array). */
static __always_inline __u64 rb_field(const __u64 *buf, __u32 words, __u64 base, __u32 off)
{
	__u32 i = off >> 3;

	if (!(off & 7) && i < words)
		return buf[i];
	return interp_read_u64(base + off);
}

/* Element i of Array ary, or 0. */
static __always_inline __u64 rb_ary_at(const struct sonde_ruby_proc *p, __u64 ary, __u64 i)
{
	__u64 flags = ary ? interp_read_u64(ary) : 0;

	if ((flags & SONDE_RUBY_T_MASK) != SONDE_RUBY_T_ARRAY)
		return 0;
	if (flags & SONDE_RUBY_ARY_EMBED)
		return i < SONDE_RUBY_ARY_EMBED_LEN(flags)
			       ? interp_read_u64(ary + p->off.ary_embed + i * 8)
			       : 0;
	if (i >= interp_read_u64(ary + p->off.ary_heap_len))
		return 0;
	return interp_read_u64(interp_read_u64(ary + p->off.ary_heap_ptr) + i * 8);
}

/* String str's bytes into dst (size: the slot); returns the length
 * copied, *flags |= cut when the string was longer than the slot. */
static __always_inline __u16 rb_str(const struct sonde_ruby_proc *p, char *dst, __u32 size,
				    __u64 str, __u8 *flags, __u8 cut)
{
	__u64 hdr = str ? interp_read_u64(str) : 0, len, data;
	long n;

	if ((hdr & SONDE_RUBY_T_MASK) != SONDE_RUBY_T_STRING)
		return 0;
	if (hdr & SONDE_RUBY_STR_NOEMBED) {
		len = interp_read_u64(str + p->off.str_heap_len);
		data = interp_read_u64(str + p->off.str_heap_ptr);
	} else {
		len = SONDE_RUBY_STR_EMBED_LEN(hdr);
		data = str + p->off.str_embed;
	}
	n = bpf_probe_read_user_str(dst, size, (const void *)data);
	if (n <= 0)
		return 0;
	n--;
	if (len >= size)
		*flags |= cut;
	if ((__u64)n > len)
		n = (long)len;
	return (__u16)n;
}

/* Ivar id of class klass (its st_table, at most 16 entries scanned), or 0. */
static __always_inline __u64 rb_class_ivar(const struct sonde_ruby_proc *p, __u64 klass, __u64 id)
{
	__u64 tbl = interp_read_u64(interp_read_u64(klass + p->off.class_ext) + p->off.ext_iv_tbl);
	__u64 start, bound, ents;
	__u32 i;

	if (!tbl)
		return 0;
	start = interp_read_u64(tbl + p->off.st_entries_start);
	bound = interp_read_u64(tbl + p->off.st_entries_bound);
	ents = interp_read_u64(tbl + p->off.st_entries);
	for (i = 0; i < 16; i++) {
		__u64 e = ents + (start + i) * 24; /* st_table_entry {hash, key, record} */

		if (start + i >= bound)
			break;
		if (interp_read_u64(e + 8) == id)
			return interp_read_u64(e + 16);
	}
	return 0;
}

/* The method entry of the frame whose env is ep (an iseq frame: up the
 * env chain to the method's local env, at most 8 steps), or 0. */
static __always_inline __u64 rb_frame_me(__u64 ep)
{
	__u32 i;

	for (i = 0; i < 8 && ep; i++) {
		/* ep[ME_CREF] */
		__u64 m = interp_read_u64(ep - 16), flags = m ? interp_read_u64(m) : 0;
		__u64 env = interp_read_u64(ep);

		if ((flags & SONDE_RUBY_T_MASK) == SONDE_RUBY_T_IMEMO) {
			if (SONDE_RUBY_IMEMO_TYPE(flags) == SONDE_RUBY_IMEMO_SVAR) {
				m = interp_read_u64(m + 8); /* svar->cref_or_me */
				flags = m ? interp_read_u64(m) : 0;
			}
			if ((flags & SONDE_RUBY_T_MASK) == SONDE_RUBY_T_IMEMO &&
			    SONDE_RUBY_IMEMO_TYPE(flags) == SONDE_RUBY_IMEMO_MENT)
				return m;
		}
		if (env & SONDE_RUBY_ENV_FLAG_LOCAL)
			return 0;
		ep = interp_read_u64(ep - 8) & ~3ull; /* ep[SPECVAL]: the previous env */
	}
	return 0;
}

/* me's owner's class path into m->klass (a singleton class: its attached
 * class's, flagged). */
static __always_inline void rb_owner_name(const struct sonde_ruby_proc *p, __u64 me,
					  struct sonde_ruby_meta *m)
{
	__u64 owner = me ? interp_read_u64(me + p->off.me_owner) : 0;
	__u64 flags = owner ? interp_read_u64(owner) : 0;

	if ((flags & SONDE_RUBY_T_MASK) != SONDE_RUBY_T_CLASS &&
	    (flags & SONDE_RUBY_T_MASK) != SONDE_RUBY_T_MODULE)
		return;
	if (flags & SONDE_RUBY_FL_SINGLETON) {
		__u64 att = rb_class_ivar(p, owner, p->off.id_attached);
		__u64 t = att ? interp_read_u64(att) & SONDE_RUBY_T_MASK : 0;

		if (t != SONDE_RUBY_T_CLASS && t != SONDE_RUBY_T_MODULE)
			return;
		owner = att;
		m->flags |= SONDE_RUBY_META_SINGLETON;
	}
	m->class_len = rb_str(p, m->klass, sizeof(m->klass),
			      rb_class_ivar(p, owner, p->off.id_classpath), &m->flags,
			      SONDE_RUBY_META_CLASS_CUT);
}

/* The name of ID id (global_symbols.ids: chunks of 512 (str, sym) pairs),
 * into m->label. */
static __always_inline void rb_id_name(const struct sonde_ruby_proc *p, __u64 vm, __u64 id,
				       struct sonde_ruby_meta *m)
{
	__u64 marks = interp_read_u64(vm + p->off.vm_mark_object_ary);
	__u64 ids = rb_ary_at(p, rb_ary_at(p, marks, 0), p->off.ids_index);
	__u64 serial = id > SONDE_RUBY_LAST_OP_ID ? id >> SONDE_RUBY_ID_SCOPE_SHIFT : id;
	__u64 chunk = rb_ary_at(p, ids, serial / SONDE_RUBY_ID_ENTRY_UNIT);

	m->label_len = rb_str(p, m->label, sizeof(m->label),
			      rb_ary_at(p, chunk, (serial % SONDE_RUBY_ID_ENTRY_UNIT) * 2),
			      &m->flags, SONDE_RUBY_META_LABEL_CUT);
}

static __always_inline struct sonde_ruby_meta_rec *rb_rec_new(__u32 tgid, __u8 type, __u64 addr,
							      __u64 sum)
{
	struct sonde_ruby_meta_rec *r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_RUBY);

	if (!r)
		return NULL;
	__builtin_memset(&r->meta, 0, 64); /* the header; slots carry lengths */
	r->meta.size = sizeof(r->meta);
	r->meta.version = SONDE_RUBY_META_VERSION;
	r->meta.type = type;
	r->meta.addr = addr;
	r->meta.checksum = sum;
	return r;
}

/* A cfunc's method entry's record: its name and owner. (The record
 * makers and ruby_note are global functions: the verifier checks each
 * once, not once per frame of the walk.) */
__noinline int ruby_emit_cfunc(__u32 tgid, __u64 me, __u64 sum, __u64 vm,
				      const struct sonde_ruby_proc *p)
{
	struct sonde_ruby_meta_rec *r;

	if (!p)
		return -1;
	r = rb_rec_new(tgid, SONDE_RUBY_META_CFUNC, me, sum);
	if (!r)
		return -1;
	rb_id_name(p, vm,
		   interp_read_u64(interp_read_u64(me + p->off.me_def) + p->off.def_original_id),
		   &r->meta);
	rb_owner_name(p, me, &r->meta);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* An iseq's record: names, path, first line and line table; the owner of
 * the method entry of the frame (env ep) it runs in. */
__noinline int ruby_emit_iseq(__u32 tgid, __u64 iseq, __u64 sum, __u64 ep,
				     const struct sonde_ruby_proc *p)
{
	struct sonde_ruby_meta_rec *r;
	struct sonde_ruby_meta *m;
	__u64 body, path, table, n, cnt, isz;
	__u32 size = 0;

	if (!p)
		return -1;
	r = rb_rec_new(tgid, SONDE_RUBY_META_ISEQ, iseq, sum);
	if (!r)
		return -1;
	m = &r->meta;
	body = interp_read_u64(iseq + p->off.iseq_body);
	/* a Fixnum */
	m->first_lineno = (__u32)(interp_read_u64(body + p->off.body_first_lineno) >> 1);
	bpf_probe_read_user(&m->iseq_size, 4, (const void *)(body + p->off.body_iseq_size));
	bpf_probe_read_user(&size, 4, (const void *)(body + p->off.body_insns_size));
	m->insns_size = size;
	m->label_len = rb_str(p, m->label, sizeof(m->label),
			      interp_read_u64(body + p->off.body_label), &m->flags,
			      SONDE_RUBY_META_LABEL_CUT);
	m->base_len = rb_str(p, m->base, sizeof(m->base),
			     interp_read_u64(body + p->off.body_base_label), &m->flags,
			     SONDE_RUBY_META_LABEL_CUT);
	path = interp_read_u64(body + p->off.body_path);
	if ((interp_read_u64(path) & SONDE_RUBY_T_MASK) == SONDE_RUBY_T_ARRAY)
		path = rb_ary_at(p, path, 0); /* [path, realpath] */
	m->path_len = rb_str(p, m->path, sizeof(m->path), path, &m->flags,
			     SONDE_RUBY_META_PATH_CUT);
	rb_owner_name(p, rb_frame_me(ep), m);
	/* The line table: insns_info entries, and the succinct index table
	 * that maps an instruction position to one (48 bytes, then 80 per
	 * 512 positions past the first 54). */
	isz = p->off.insn_info_size;
	cnt = size;
	if (isz && cnt * isz > sizeof(m->lines)) {
		cnt = sizeof(m->lines) / isz;
		m->flags |= SONDE_RUBY_META_LINES_CUT;
	}
	n = cnt * isz;
	/* One unsigned bound the verifier follows (a size of 0 reads
	 * nothing). */
	if (n > sizeof(m->lines) ||
	    bpf_probe_read_user(m->lines, n,
				(const void *)interp_read_u64(body + p->off.body_insns_body)))
		n = 0;
	m->lines_len = (__u16)n;
	m->insn_info_size = (__u8)isz;
	table = interp_read_u64(body + p->off.body_succ);
	n = m->iseq_size > 54 ? 48 + 80 * (((__u64)m->iseq_size - 54 + 511) / 512) : 48;
	if (n > sizeof(m->succ)) {
		n = sizeof(m->succ);
		m->flags |= SONDE_RUBY_META_LINES_CUT;
	}
	if (!table || n > sizeof(m->succ) || bpf_probe_read_user(m->succ, n, (const void *)table))
		n = 0;
	m->succ_len = (__u16)n;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Sends what names word, the walk's frame i (an iseq, or a cfunc's method
 * entry), unless this process's copy, with f's checksum, was sent
 * already. The frame this CPU's last walk found at i with the same
 * checksum needs no map lookup (interp_span.h). A global function: the
 * verifier checks it once. */
__noinline int ruby_note(struct unwind_scratch *s, __u32 i, __u32 tgid, __u64 word,
			 const struct ruby_frame *f)
{
	struct sonde_ruby_key key = { .tgid = tgid, .addr = SONDE_RUBY_FRAME_ADDR(word) };
	__u32 gen = (__u32)interp_conn_gen;
	const struct sonde_ruby_proc *p;
	struct interp_seen_slot *e;
	__u64 sum, *seen, a = key.addr;

	if (!s || !f)
		return 0;
	p = (const struct sonde_ruby_proc *)&s->proc;
	sum = f->sum;
	e = interp_seen_at(s->seen, i);
	if (interp_seen_match(e, tgid, a, gen) && e->val == sum)
		return 0;
	seen = bpf_map_lookup_elem(&ruby_seen, &key);
	if (!(seen && *seen == sum)) {
		/* (the VM, for a cfunc's names: read only to send them) */
		if (SONDE_RUBY_FRAME_IS_CFUNC(word)
			    ? ruby_emit_cfunc(tgid, a, sum,
					      interp_read_u64(p->runtime_addr + p->off.vm_ptr_off), p)
			    : ruby_emit_iseq(tgid, a, sum, f->ep, p))
			return 0;
		bpf_map_update_elem(&ruby_seen, &key, &sum, BPF_ANY);
	}
	interp_seen_store(e, tgid, a, gen, sum);
	return 0;
}

/* The frame word of control frame cfp (0: not one to record); in *f its
 * env and the checksum of what names it (a freed and reused iseq or
 * method entry has other names). A global function: the verifier checks
 * it once, not once per frame of the walk. Each structure is read in one
 * probe read (the control frame, the env's three words, the iseq body's
 * head, the method entry): they are most of the walk's cost. */
__noinline __u64 ruby_frame_word(const struct sonde_ruby_proc *p, __u64 cfp, struct ruby_frame *f)
{
	/* One buffer for the control frame, then the method entry or the
	 * body (the sample program's call chain has 512 bytes of stack). */
	__u64 w[RUBY_BODY_WORDS + 1], e[3], pc, iseq, body, env, flags, enc, idx = 0;
	__u64 finish;

	if (!p || !f)
		return 0;
	f->ep = 0;
	f->sum = 0;
	bpf_probe_read_user(w, RUBY_CFP_WORDS * 8, (const void *)cfp);
	env = rb_field(w, RUBY_CFP_WORDS, cfp, p->off.cfp_ep);
	pc = rb_field(w, RUBY_CFP_WORDS, cfp, p->off.cfp_pc);
	iseq = rb_field(w, RUBY_CFP_WORDS, cfp, p->off.cfp_iseq);
	if (!env)
		return 0;
	f->ep = env;
	bpf_probe_read_user(e, sizeof(e), (const void *)(env - 16)); /* ep[-2..0] */
	flags = e[2]; /* ep[FLAGS] */
	finish = flags & SONDE_RUBY_FRAME_FLAG_FINISH;
	if ((flags & SONDE_RUBY_FRAME_MAGIC_MASK) == SONDE_RUBY_FRAME_MAGIC_CFUNC) {
		__u64 me = e[0]; /* ep[ME_CREF] */

		w[0] = 0;
		if (me)
			bpf_probe_read_user(w, RUBY_ME_WORDS * 8, (const void *)me);
		if ((w[0] & SONDE_RUBY_T_MASK) != SONDE_RUBY_T_IMEMO ||
		    SONDE_RUBY_IMEMO_TYPE(w[0]) != SONDE_RUBY_IMEMO_MENT || (me & 7))
			return 0;
		f->sum = rb_field(w, RUBY_ME_WORDS, me, p->off.me_def) ^
			 (rb_field(w, RUBY_ME_WORDS, me, p->off.me_owner) << 1);
		return SONDE_RUBY_FRAME(me | SONDE_RUBY_FRAME_CFUNC, 0, finish);
	}
	if ((flags & SONDE_RUBY_FRAME_FLAG_CFRAME) ||
	    (flags & SONDE_RUBY_FRAME_MAGIC_MASK) == SONDE_RUBY_FRAME_MAGIC_DUMMY)
		return 0; /* a dummy or ifunc frame */
	if (!pc || !iseq || (iseq & 7))
		return 0;
	body = interp_read_u64(iseq + p->off.iseq_body);
	if (!body)
		return 0;
	bpf_probe_read_user(w, RUBY_BODY_WORDS * 8, (const void *)body);
	enc = rb_field(w, RUBY_BODY_WORDS, body, p->off.body_iseq_encoded);
	f->sum = body ^ (rb_field(w, RUBY_BODY_WORDS, body, p->off.body_label) << 1) ^
		 (rb_field(w, RUBY_BODY_WORDS, body, p->off.body_path) << 2);
	if (pc >= enc)
		idx = (pc - enc) / 8;
	return SONDE_RUBY_FRAME(iseq, idx, finish);
}

/* 1 when w is not 0, computed without a branch (the compiler would make
 * (w | -w) >> 63 one), so the verifier sees a range, not two values. */
static __always_inline __u32 ruby_nonzero(__u64 w)
{
	__u64 t;

	asm volatile("%[t] = %[w]\n\t"
		     "%[t] = -%[t]\n\t"
		     "%[t] |= %[w]\n\t"
		     "%[t] >>= 63"
		     : [t] "=&r"(t)
		     : [w] "r"(w));
	return (__u32)t;
}

/* Records the Ruby frames of thread tid of tgid at s->rec.frames[at..],
 * with s->proc its interp_procs entry (of kind SONDE_INTERP_RUBY). Returns how
 * many. A global function: verified once, whatever the state of the
 * sample program that calls it. */
__noinline int ruby_walk(struct unwind_scratch *s, __u32 tgid, __u32 tid, __u32 at)
{
	const struct sonde_ruby_proc *p;
	__u64 vm, ec, cfp, end;
	__u32 n = 0, i;
	__s32 th_tid = 0;

	if (!s)
		return 0;
	p = (const struct sonde_ruby_proc *)&s->proc;
	vm = interp_read_u64(p->runtime_addr + p->off.vm_ptr_off);
	if (!vm)
		return 0;
	ec = interp_read_u64(interp_read_u64(vm + p->off.vm_main_ractor) +
			     p->off.ractor_running_ec);
	if (!ec)
		return 0;
	/* Only the GVL holder's frames are the running ones. (The context
	 * is read field by field: once a sample, and a buffer here would
	 * push the call chain's stack past 512 bytes.) */
	bpf_probe_read_user(&th_tid, sizeof(th_tid),
			    (const void *)(interp_read_u64(ec + p->off.ec_thread) +
					   p->off.thread_tid));
	if ((__u32)th_tid != tid)
		return 0;
	cfp = interp_read_u64(ec + p->off.ec_cfp);
	end = interp_read_u64(ec + p->off.ec_vm_stack) +
	      interp_read_u64(ec + p->off.ec_vm_stack_size) * 8;
	for (i = 0; i < SONDE_RUBY_MAX_FRAMES && cfp && cfp < end; i++) {
		struct ruby_frame f = {};
		__u64 word = ruby_frame_word(p, cfp, &f);
		__u32 idx = at + n;

		cfp += p->off.cfp_size;
		if (idx >= SONDE_MAX_KERNEL_FRAMES + SONDE_MAX_USER_FRAMES)
			break;
		/* A frame not recorded (word 0) is overwritten by the
		 * next one: n counts without a branch, so the verifier
		 * follows one path per frame, not one per count of
		 * recorded frames. */
		s->rec.frames[idx] = word;
		if (word)
			ruby_note(s, i, tgid, word, &f);
		n += ruby_nonzero(word);
	}
	return n;
}
