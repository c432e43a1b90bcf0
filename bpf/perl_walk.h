/* perl_walk.h - the Perl frame walker of sample.bpf.c
 * (docs/interpreters.md, "Perl"). For a tgid whose interp_procs entry is
 * of kind SONDE_INTERP_PERL (interp_walk.h dispatches), on the process's
 * main thread: from PL_curinterp's current stackinfo, walk the context
 * stack top down (at most SONDE_PERL_MAX_CONTEXTS contexts, through at
 * most SONDE_PERL_MAX_STACKS stackinfos) and record one word per sub,
 * format and eval frame, then the main program's, after the native
 * frames. A frame's line is that of the COP current in it: PL_curcop for
 * the leaf, the saved blk_oldcop of the frame above it for a caller. The
 * first time a CV or COP is seen in a process, what names it goes out as
 * a SONDE_REC_INTERP record of kind SONDE_INTERP_PERL.
 *
 * Only the main thread is walked: PL_curinterp is the first interpreter,
 * and an ithread runs a clone of its own, which this walker cannot find.
 *
 * Everything is read with bpf_probe_read_user at offsets the symbolizer
 * chose for the version: a wrong offset or a racing interpreter gives a
 * wrong or short Perl stack, never more. Included by interp_walk.h after
 * sample.bpf.c's maps (events, interp_procs) and count_err().
 */
#pragma once

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sonde_perl_seen_key);
	__type(value, __u64); /* checksum */
} perl_seen SEC(".maps");

/* A context's first bytes read at once (5.36: cx_type, blk_oldcop,
 * blk_sub.retop and blk_sub.cv are in its first 80): one probe read per
 * context instead of four; a field past them is read on its own. */
#define PERL_CX_WORDS 10

/* The word at off of a context at cx of which buf holds the first
 * PERL_CX_WORDS words. buf has a spare word: the verifier bounds the
 * byte offset, and the spare keeps an unaligned last read inside. */
static __always_inline __u64 perl_cx_word(const __u64 *buf, __u64 cx, __u32 off)
{
	if (off <= (PERL_CX_WORDS - 1) * 8) {
		__u64 v;

		__builtin_memcpy(&v, (const __u8 *)buf + off, 8);
		return v;
	}
	return interp_read_u64(cx + off);
}

/* A NUL-terminated string at addr into dst; returns the length copied. */
static __always_inline __u16 perl_str(char *dst, __u32 size, __u64 addr, __u8 *flags, __u8 cut)
{
	long n;

	if (!addr)
		return 0;
	n = bpf_probe_read_user_str(dst, size, (const void *)addr);
	if (n <= 0)
		return 0;
	if (n == size)
		*flags |= cut; /* filled the slot: maybe cut */
	return (__u16)(n - 1);
}

/* The name HEK's key of a stash (HvNAME_HEK), or 0. */
static __always_inline __u64 perl_stash_name(const struct sonde_perl_proc *p, __u64 stash)
{
	__u64 body, name;

	if (!stash)
		return 0;
	body = interp_read_u64(stash + p->off.sv_any);
	if (!body)
		return 0;
	name = interp_read_u64(body + p->off.hv_aux_name);
	if (name && interp_read_u32(body + p->off.hv_aux_name_count))
		name = interp_read_u64(name); /* names[0] */
	return name ? name + p->off.hek_key : 0;
}

/* (BPF functions take 5 arguments: the names are read again here; this
 * runs once per CV or COP.) */
static __noinline int perl_emit_meta(__u32 tgid, __u64 addr, __u64 sum, __u32 type,
				     const struct sonde_perl_proc *p)
{
	struct sonde_perl_meta_rec *r;
	struct sonde_perl_meta *m;
	__u64 body, gv, hek = 0, stash = 0, file;

	r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_PERL);
	if (!r)
		return -1;
	m = &r->meta;
	m->size = sizeof(*m);
	m->version = SONDE_PERL_META_VERSION;
	m->pad0 = 0;
	m->addr = addr;
	m->checksum = sum;
	m->flags = 0;
	m->pad1 = 0;
	m->name_len = 0;
	m->package_len = 0;
	if (type == SONDE_PERL_FRAME_SUB) {
		m->type = SONDE_PERL_META_SUB;
		body = interp_read_u64(addr + p->off.sv_any);
		gv = body ? interp_read_u64(body + p->off.xcv_gv) : 0;
		if (body && (interp_read_u32(body + p->off.xcv_flags) & p->off.cvf_named)) {
			/* A lexical sub: a HEK of its own, the stash it was
			 * compiled in. */
			hek = gv;
			stash = interp_read_u64(body + p->off.xcv_stash);
		} else if (gv) {
			__u64 gbody = interp_read_u64(gv + p->off.sv_any);

			if (gbody) {
				hek = interp_read_u64(gbody + p->off.xgv_namehek);
				stash = interp_read_u64(gbody + p->off.xgv_stash);
			}
		}
		m->name_len = perl_str(m->name, sizeof(m->name), hek ? hek + p->off.hek_key : 0,
				       &m->flags, SONDE_PERL_META_NAME_CUT);
		m->package_len = perl_str(m->package, sizeof(m->package),
					  perl_stash_name(p, stash), &m->flags,
					  SONDE_PERL_META_PACKAGE_CUT);
		file = body ? interp_read_u64(body + p->off.xcv_file) : 0;
	} else {
		m->type = SONDE_PERL_META_COP;
		file = interp_read_u64(addr + p->off.cop_file);
	}
	m->file_len = perl_str(m->file, sizeof(m->file), file, &m->flags, SONDE_PERL_META_FILE_CUT);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Sends what names word's CV or COP unless this process's copy was sent
 * already. */
static __always_inline void perl_note(__u32 tgid, __u64 word, const struct sonde_perl_proc *p)
{
	__u64 addr = SONDE_PERL_FRAME_ADDR(word), sum, *seen;
	__u32 type = SONDE_PERL_FRAME_TYPE(word);
	struct sonde_perl_seen_key key = { .tgid = tgid, .addr = addr | type };

	/* A freed and reused CV has another body or GV; a COP another
	 * file name. */
	if (type == SONDE_PERL_FRAME_SUB) {
		__u64 body = interp_read_u64(addr + p->off.sv_any);

		sum = body ^ (interp_read_u64(body + p->off.xcv_gv) << 1);
	} else {
		sum = interp_read_u64(addr + p->off.cop_file);
	}
	seen = bpf_map_lookup_elem(&perl_seen, &key);
	if (seen && *seen == sum)
		return;
	if (perl_emit_meta(tgid, addr, sum, type, p) == 0)
		bpf_map_update_elem(&perl_seen, &key, &sum, BPF_ANY);
}

/* Where the walk is: the stackinfo and context it looks at next, and
 * the COP current in the next frame it finds. */
struct perl_walk_state {
	__u64 si;
	__u64 cxstack;
	__u64 cop;
	__s32 ix;        /* the next context's index; < 0: this stackinfo's end */
	__u32 done;
	__u32 stacks;    /* stackinfos entered below the first */
	__u32 sub_entry; /* the last frame found was a sub a C call pushed */
	__u32 budget;    /* contexts left to look at */
	/* PL_op is NULL: C code runs between two runs of the op loop. If
	 * the top frame is a sub a C call pushed, it is a sort's or a
	 * MULTICALL's block between two calls, not running: skipped. */
	__u32 leaf_idle;
};

static __always_inline __u32 perl_line(const struct sonde_perl_proc *p, __u64 cop)
{
	return cop ? interp_read_u32(cop + p->off.cop_line) : 0;
}

/* One step of the walk: one context, or the move to the stackinfo
 * below. Returns the frame word it found, or 0 (none here, or done). */
static __always_inline __u64 perl_step(const struct sonde_perl_proc *p,
				       struct perl_walk_state *w)
{
	__u64 cx, cv, retop, word = 0, buf[PERL_CX_WORDS + 1] = {};
	__u32 toff = p->off.cx_typeoff;
	__u8 type = 0;

	if (w->ix < 0) {
		__u64 prev = interp_read_u64(w->si + p->off.si_prev);

		if (!prev) {
			/* The bottom stackinfo's root is the main program
			 * (its file scope), the first frame of perl_run()'s
			 * run loop. */
			w->done = 1;
			if (!w->cop)
				return 0;
			return SONDE_PERL_FRAME(w->cop, SONDE_PERL_FRAME_MAIN,
						perl_line(p, w->cop), 1);
		}
		if (++w->stacks >= SONDE_PERL_MAX_STACKS) {
			w->done = 1;
			return 0;
		}
		w->si = prev;
		w->cxstack = interp_read_u64(prev + p->off.si_cxstack);
		w->ix = (__s32)interp_read_u32(prev + p->off.si_cxix);
		return 0;
	}
	cx = w->cxstack + (__u64)(__u32)w->ix * p->off.cx_size;
	w->ix--;
	bpf_probe_read_user(buf, PERL_CX_WORDS * 8, (const void *)cx);
	if (toff < PERL_CX_WORDS * 8)
		type = ((const __u8 *)buf)[toff];
	else
		bpf_probe_read_user(&type, 1, (const void *)(cx + toff));
	type &= SONDE_PERL_CXTYPEMASK;
	if (type == SONDE_PERL_CXT_SUB || type == SONDE_PERL_CXT_FORMAT) {
		cv = perl_cx_word(buf, cx, p->off.cx_sub_cv);
		/* No op to return to: a C call (call_sv, MULTICALL, sort)
		 * pushed this sub and runs its own loop for it. */
		retop = perl_cx_word(buf, cx, p->off.cx_retop);
		if (cv && !(w->leaf_idle && !retop))
			word = SONDE_PERL_FRAME(cv, SONDE_PERL_FRAME_SUB, perl_line(p, w->cop),
						!retop);
		w->sub_entry = word && !retop;
		w->leaf_idle = 0;
		w->cop = perl_cx_word(buf, cx, p->off.cx_oldcop);
	} else if (type == SONDE_PERL_CXT_EVAL) {
		/* An eval a C call pushed (eval_sv) starts a loop of its
		 * own, unless it only wraps the sub above it (call_sv with
		 * G_EVAL). */
		retop = perl_cx_word(buf, cx, p->off.cx_retop);
		if (w->cop)
			word = SONDE_PERL_FRAME(w->cop, SONDE_PERL_FRAME_EVAL,
						perl_line(p, w->cop), !retop && !w->sub_entry);
		w->sub_entry = 0;
		w->leaf_idle = 0;
		w->cop = perl_cx_word(buf, cx, p->off.cx_oldcop);
	}
	return word;
}

/* The next frame's word, or 0 when the walk is done or out of budget. A
 * global function: the verifier checks its steps once, not once per
 * frame of the walk. */
__noinline __u64 perl_next_frame(const struct sonde_perl_proc *p, struct perl_walk_state *w)
{
	__u32 k;

	if (!p || !w)
		return 0;
	for (k = 0; k < SONDE_PERL_MAX_CONTEXTS; k++) {
		__u64 word;

		if (w->done || !w->budget)
			return 0;
		w->budget--;
		word = perl_step(p, w);
		if (word)
			return word;
	}
	return 0;
}

/* Records the Perl frames of thread tid of tgid at rec->frames[at..],
 * with p its interp_procs entry (of kind SONDE_INTERP_PERL). Returns how
 * many. A global function: verified once, whatever the state of the
 * sample program that calls it. */
__noinline int perl_walk(struct sonde_sample *rec, const struct sonde_perl_proc *p,
				__u32 tgid, __u32 tid, __u32 at)
{
	struct perl_walk_state w = {};
	__u64 interp;
	__u32 n = 0, i;

	if (!rec || !p || tid != tgid)
		return 0;
	interp = interp_read_u64(p->runtime_addr);
	if (!interp)
		return 0;
	w.cop = interp_read_u64(interp + p->off.interp_curcop);
	w.si = interp_read_u64(interp + p->off.interp_curstackinfo);
	if (!w.si)
		return 0;
	w.cxstack = interp_read_u64(w.si + p->off.si_cxstack);
	w.ix = (__s32)interp_read_u32(w.si + p->off.si_cxix);
	w.budget = SONDE_PERL_MAX_CONTEXTS;
	w.leaf_idle = !interp_read_u64(interp + p->off.interp_op);
	for (i = 0; i < SONDE_PERL_MAX_FRAMES; i++) {
		__u64 word = perl_next_frame(p, &w);

		if (!interp_frame_put(rec, at, n, word))
			break;
		n++;
		perl_note(tgid, word, p);
	}
	return n;
}
