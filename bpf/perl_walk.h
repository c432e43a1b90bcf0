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

/* What perl_seen holds of a CV or COP whose record was sent: the
 * checksum the record carries, and when it was last read again. */
struct perl_seen_val {
	__u64 sum;
	__u64 checked_ns;
};

/* How often a seen CV's or COP's checksum is read again: reading it
 * (two probe reads for a CV) at every frame was a third of the walk's
 * reads, and a CV freed and reused for another sub within this time of
 * its last check keeps the old sub's name until the next one. */
#define PERL_RECHECK_NS 1000000000ull

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sonde_perl_seen_key);
	__type(value, struct perl_seen_val);
} perl_seen SEC(".maps");

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

/* Sends what names word, the walk's frame i, unless this process's copy
 * was sent already: at most every PERL_RECHECK_NS (now: the sample's
 * time) the checksum is read again, and a changed one sends the record
 * again. The frame this CPU's last walk found at i needs no map lookup
 * while its last check is that recent. */
static __always_inline void perl_note(struct unwind_scratch *s, __u32 i, __u32 tgid, __u64 word,
				      __u32 gen)
{
	const struct sonde_perl_proc *p = (const struct sonde_perl_proc *)&s->proc;
	__u64 addr = SONDE_PERL_FRAME_ADDR(word), sum, now = s->rec.ktime_ns;
	__u32 type = SONDE_PERL_FRAME_TYPE(word);
	struct sonde_perl_seen_key key = { .tgid = tgid, .addr = addr | type };
	struct interp_seen_slot *e = interp_seen_at(s->seen, i);
	struct perl_seen_val *seen, val;

	if (interp_seen_match(e, tgid, key.addr, gen) && now - e->val < PERL_RECHECK_NS)
		return;
	seen = bpf_map_lookup_elem(&perl_seen, &key);
	if (seen && now - seen->checked_ns < PERL_RECHECK_NS) {
		interp_seen_store(e, tgid, key.addr, gen, seen->checked_ns);
		return;
	}
	/* A freed and reused CV has another body or GV; a COP another
	 * file name. */
	if (type == SONDE_PERL_FRAME_SUB) {
		__u64 body = interp_read_u64(addr + p->off.sv_any);

		sum = body ^ (interp_read_u64(body + p->off.xcv_gv) << 1);
	} else {
		sum = interp_read_u64(addr + p->off.cop_file);
	}
	if (seen && seen->sum == sum) {
		seen->checked_ns = now;
		interp_seen_store(e, tgid, key.addr, gen, now);
		return;
	}
	if (perl_emit_meta(tgid, addr, sum, type, p) == 0) {
		val.sum = sum;
		val.checked_ns = now;
		bpf_map_update_elem(&perl_seen, &key, &val, BPF_ANY);
		interp_seen_store(e, tgid, key.addr, gen, now);
	}
}

/* Where the walk is: the stackinfo and context it looks at next, and
 * the COP current in the next frame it finds. */
struct perl_walk_state {
	__u64 si;
	__u64 cxstack;
	__u64 prev;      /* the stackinfo below si (0: si is the bottom one) */
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
	/* The contexts cx_lo .. cx_lo + cx_n - 1 of si are in the span. */
	__s32 cx_lo;
	__u32 cx_n;
};

static __always_inline __u32 perl_line(const struct sonde_perl_proc *p, __u64 cop)
{
	return cop ? interp_read_u32(cop + p->off.cop_line) : 0;
}

static __always_inline __u32 perl_max(__u32 a, __u32 b)
{
	return a > b ? a : b;
}

/* Enters stackinfo si: its context array, top index and the stackinfo
 * below it, in one read of its first fields. */
static __always_inline void perl_enter_si(__u8 *span, const struct sonde_perl_proc *p,
					  struct perl_walk_state *w, __u64 si)
{
	__u32 n = interp_span_read(span, si,
				   perl_max(perl_max(p->off.si_cxstack, p->off.si_prev) + 8,
					    p->off.si_cxix + 4));

	w->si = si;
	w->cxstack = interp_span_field(span, n, si, p->off.si_cxstack, 8);
	w->prev = interp_span_field(span, n, si, p->off.si_prev, 8);
	w->ix = (__s32)interp_span_field(span, n, si, p->off.si_cxix, 4);
	w->cx_n = 0;
}

/* Brings context w->ix into the span, with as many of the contexts below
 * it as fit (all of a usual stack's in one or two reads instead of one
 * each). Returns the span's length (0: nothing read). */
static __always_inline __u32 perl_fill_cx(__u8 *span, const struct sonde_perl_proc *p,
					  struct perl_walk_state *w)
{
	__u32 size = p->off.cx_size, per, n;
	__s32 lo;

	if (!size)
		return 0;
	per = INTERP_SPAN_BYTES / size;
	lo = w->ix - (__s32)per + 1;
	if (lo < 0)
		lo = 0;
	n = (__u32)(w->ix - lo + 1);
	if (!interp_span_read(span, w->cxstack + (__u64)(__u32)lo * size, n * size))
		return 0;
	w->cx_lo = lo;
	w->cx_n = n;
	return n * size;
}

/* One step of the walk: one context, or the move to the stackinfo
 * below. Returns the frame word it found, or 0 (none here, or done). A
 * global function: each field's two ways (in the span or read alone)
 * are verified once, not in every state of the walk's loop. */
__noinline __u64 perl_step(struct unwind_scratch *s, struct perl_walk_state *w)
{
	const struct sonde_perl_proc *p;
	__u64 cx, cv, retop, word = 0;
	__u32 size, n, at;
	__u8 *span, type;

	if (!s || !w)
		return 0;
	p = (const struct sonde_perl_proc *)&s->proc;
	span = s->span;
	size = p->off.cx_size;
	if (w->ix < 0) {
		if (!w->prev) {
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
		perl_enter_si(span, p, w, w->prev);
		return 0;
	}
	cx = w->cxstack + (__u64)(__u32)w->ix * size;
	if (w->ix >= w->cx_lo && w->ix < w->cx_lo + (__s32)w->cx_n)
		n = w->cx_n * size;
	else
		n = perl_fill_cx(span, p, w);
	/* The context's fields as offsets into the span, whose n bytes
	 * start at context cx_lo (a field past n is read alone). */
	at = (__u32)(w->ix - w->cx_lo) * size;
	if (!n)
		at = 0;
	w->ix--;
	type = (__u8)interp_span_field(span, n, cx - at, at + p->off.cx_typeoff, 1);
	type &= SONDE_PERL_CXTYPEMASK;
	if (type == SONDE_PERL_CXT_SUB || type == SONDE_PERL_CXT_FORMAT) {
		cv = interp_span_field(span, n, cx - at, at + p->off.cx_sub_cv, 8);
		/* No op to return to: a C call (call_sv, MULTICALL, sort)
		 * pushed this sub and runs its own loop for it. */
		retop = interp_span_field(span, n, cx - at, at + p->off.cx_retop, 8);
		if (cv && !(w->leaf_idle && !retop))
			word = SONDE_PERL_FRAME(cv, SONDE_PERL_FRAME_SUB, perl_line(p, w->cop),
						!retop);
		w->sub_entry = word && !retop;
		w->leaf_idle = 0;
		w->cop = interp_span_field(span, n, cx - at, at + p->off.cx_oldcop, 8);
	} else if (type == SONDE_PERL_CXT_EVAL) {
		/* An eval a C call pushed (eval_sv) starts a loop of its
		 * own, unless it only wraps the sub above it (call_sv with
		 * G_EVAL). */
		retop = interp_span_field(span, n, cx - at, at + p->off.cx_retop, 8);
		if (w->cop)
			word = SONDE_PERL_FRAME(w->cop, SONDE_PERL_FRAME_EVAL,
						perl_line(p, w->cop), !retop && !w->sub_entry);
		w->sub_entry = 0;
		w->leaf_idle = 0;
		w->cop = interp_span_field(span, n, cx - at, at + p->off.cx_oldcop, 8);
	}
	return word;
}

/* The next frame's word, or 0 when the walk is done or out of budget. A
 * global function: the verifier checks its steps once, not once per
 * frame of the walk. */
__noinline __u64 perl_next_frame(struct unwind_scratch *s, struct perl_walk_state *w)
{
	__u32 k;

	if (!s || !w)
		return 0;
	for (k = 0; k < SONDE_PERL_MAX_CONTEXTS; k++) {
		__u64 word;

		if (w->done || !w->budget)
			return 0;
		w->budget--;
		word = perl_step(s, w);
		if (word)
			return word;
	}
	return 0;
}

/* Starts the walk at PL_curinterp's current COP, op and stackinfo, read
 * in one span when they lie close (5.36: 8 to 232). False: no Perl
 * stack. */
static __always_inline bool perl_begin(__u8 *span, const struct sonde_perl_proc *p,
				       struct perl_walk_state *w)
{
	__u32 lo = p->off.interp_curcop, hi, n;
	__u64 interp = interp_read_u64(p->runtime_addr), base, si;

	if (!interp)
		return false;
	if (p->off.interp_curstackinfo < lo)
		lo = p->off.interp_curstackinfo;
	if (p->off.interp_op < lo)
		lo = p->off.interp_op;
	hi = perl_max(perl_max(p->off.interp_curcop, p->off.interp_curstackinfo),
		      p->off.interp_op) + 8;
	base = interp + lo;
	n = interp_span_read(span, base, hi - lo);
	w->cop = interp_span_field(span, n, base, p->off.interp_curcop - lo, 8);
	si = interp_span_field(span, n, base, p->off.interp_curstackinfo - lo, 8);
	w->leaf_idle = !interp_span_field(span, n, base, p->off.interp_op - lo, 8);
	if (!si)
		return false;
	perl_enter_si(span, p, w, si);
	w->budget = SONDE_PERL_MAX_CONTEXTS;
	return true;
}

/* Records the Perl frames of thread tid of tgid at s->rec.frames[at..],
 * with s->proc its interp_procs entry (of kind SONDE_INTERP_PERL).
 * Returns how many. A global function: verified once, whatever the state
 * of the sample program that calls it. */
__noinline int perl_walk(struct unwind_scratch *s, __u32 tgid, __u32 tid, __u32 at)
{
	const struct sonde_perl_proc *p;
	struct perl_walk_state w = {};
	__u32 n = 0, i, gen = (__u32)interp_conn_gen;

	if (!s || tid != tgid)
		return 0;
	p = (const struct sonde_perl_proc *)&s->proc;
	if (!perl_begin(s->span, p, &w))
		return 0;
	for (i = 0; i < SONDE_PERL_MAX_FRAMES; i++) {
		__u64 word = perl_next_frame(s, &w);

		if (!interp_frame_put(&s->rec, at, n, word))
			break;
		n++;
		perl_note(s, i, tgid, word, gen);
	}
	return n;
}
