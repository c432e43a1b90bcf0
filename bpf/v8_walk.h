/* v8_walk.h - the V8 frame step of sample.bpf.c (docs/interpreters.md,
 * "V8"), a JIT kind: interp_jit_step() calls v8_jit_step() for a frame
 * whose pc is in the embedded builtins or in code without an unwind table
 * (V8's JIT code, in anonymous memory). A frame whose context slot holds
 * a heap object (not a frame-type marker, which is a Smi) and whose
 * function slot holds a JSFunction with a SharedFunctionInfo is a
 * JavaScript frame: it is recorded (SFI, tier, code position) for the
 * native frame it stands for, and the walk goes on with its caller by the
 * frame pointer. Any other frame is left to the native rule. The first
 * time an SFI is seen in a process its names go out as a
 * SONDE_REC_INTERP record of kind SONDE_INTERP_V8.
 *
 * Everything is read with bpf_probe_read_user at offsets the symbolizer
 * read from the binary: a wrong offset or a racing heap gives a wrong or
 * short stack, never more. Included by interp_walk.h after sample.bpf.c's
 * maps, scratch and count_err().
 */
#pragma once

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sonde_v8_sfi_key);
	__type(value, __u64); /* checksum */
} v8_sfis SEC(".maps");

/* Code objects and scripts already sent, per process (value: the SFI,
 * or the source's address: a reused address is sent again). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sonde_v8_sfi_key);
	__type(value, __u64);
} v8_codes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sonde_v8_sfi_key);
	__type(value, __u64);
} v8_scripts SEC(".maps");

/* The instance type of the heap object obj (a tagged pointer), or 0. */
static __always_inline __u16 v8_type(const struct sonde_v8_offsets *o, __u64 obj)
{
	__u64 map;
	__u16 t = 0;

	if (!(obj & 1))
		return 0;
	map = interp_read_u64(obj - 1);
	if (!(map & 1))
		return 0;
	bpf_probe_read_user(&t, sizeof(t), (const void *)(map - 1 + o->map_instance_type));
	return t;
}

/* A sequential string's characters (one hop through a thin string) into
 * dst; returns the bytes copied, flags set as SONDE_V8_META_*. */
static __always_inline __u16 v8_str(const struct sonde_v8_offsets *o, char *dst, __u32 size,
				    __u64 obj, __u8 *flags, __u8 cut, __u8 two_byte)
{
	__u16 t = v8_type(o, obj);
	__s32 len = 0;
	__u64 n, m;

	if (t && t < o->first_nonstring && (t & o->string_rep_mask) == o->string_thin_tag) {
		obj = interp_read_u64(obj - 1 + o->thin_actual);
		t = v8_type(o, obj);
	}
	if (!t || t >= o->first_nonstring || (t & o->string_rep_mask) != o->string_seq_tag)
		return 0;
	bpf_probe_read_user(&len, sizeof(len), (const void *)(obj - 1 + o->string_length));
	if (len <= 0)
		return 0;
	n = len > 0xffff ? 0x1ffff : (__u64)len;
	if (!(t & o->string_onebyte)) {
		*flags |= two_byte;
		n *= 2;
	}
	if (n > size) {
		n = size;
		*flags |= cut;
	}
	/* A bound the verifier sees on the register it is given (the
	 * compiler would fold it into the clamp above). */
	m = n - 1;
	asm volatile("" : "+r"(m));
	if (n == 0 || m >= size ||
	    bpf_probe_read_user(dst, m + 1, (const void *)(obj - 1 + o->seq_chars)))
		return 0;
	return (__u16)(m + 1);
}

/* The function name of sfi: its name_or_scope_info when that is a
 * string, else the ScopeInfo's function variable name (after the context
 * locals' names and infos and the saved class variable), or 0: none. */
static __always_inline __u64 v8_sfi_name(const struct sonde_v8_offsets *o, __u64 sfi)
{
	__u64 n = interp_read_u64(sfi - 1 + o->sfi_name), flags, locals, slot;
	__u16 t = v8_type(o, n);

	if (t && t < o->first_nonstring)
		return n;
	if (t != o->type_scope_info || o->scope_first_slot < 24)
		return 0;
	/* Header Smis: flags, parameter count, context local count. */
	flags = interp_read_u64(n - 1 + o->scope_first_slot - 24) >> 32;
	locals = interp_read_u64(n - 1 + o->scope_first_slot - 8) >> 32;
	if (((flags >> (o->scope_fv_shift & 31)) & 3) == 0 || locals > 4096)
		return 0;
	slot = (locals < o->scope_max_inlined ? locals : 1) + locals +
	       ((flags >> (o->scope_saved_class_bit & 31)) & 1);
	return interp_read_u64(n - 1 + o->scope_first_slot + 8 * slot);
}

/* (BPF functions take 5 arguments: the names are looked up again; this
 * runs once per SFI and process.) A global function: verified once. */
__noinline int v8_emit_meta(__u32 tgid, __u64 sfi, __u64 sum,
				   const struct sonde_v8_offsets *o)
{
	struct sonde_v8_meta_rec *r;
	struct sonde_v8_meta *m;
	__u64 script, name;

	if (!o)
		return -1;
	r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_V8);
	if (!r)
		return -1;
	m = &r->meta;
	m->size = sizeof(*m);
	m->version = SONDE_V8_META_VERSION;
	m->flags = 0;
	m->sfi = sfi;
	m->checksum = sum;
	name = v8_sfi_name(o, sfi);
	m->name_len = v8_str(o, m->name, sizeof(m->name), name, &m->flags, SONDE_V8_META_NAME_CUT,
			     SONDE_V8_META_NAME_TWO_BYTE);
	if (!m->name_len)
		m->flags |= SONDE_V8_META_NO_NAME;
	script = interp_read_u64(sfi - 1 + o->sfi_script);
	m->script_len = 0;
	if (v8_type(o, script) == o->type_script)
		m->script_len = v8_str(o, m->script, sizeof(m->script),
				       interp_read_u64(script - 1 + o->script_name), &m->flags,
				       SONDE_V8_META_SCRIPT_CUT, SONDE_V8_META_SCRIPT_TWO_BYTE);
	else
		m->flags |= SONDE_V8_META_NO_SCRIPT;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Sends sfi's names unless this process's copy was sent already; sum
 * is the checksum of its name and script pointers (a freed and reused
 * SFI has other names or another script). A global function: its key
 * and lookup off v8_jit_step's stack (the walk's calls share 512 bytes),
 * and v8_emit_meta's chain is shallower than the script source's. */
__noinline int v8_note_sfi(__u32 tgid, __u64 sfi, __u64 sum, const struct sonde_v8_offsets *o)
{
	struct sonde_v8_sfi_key key = { .tgid = tgid, .sfi = sfi };
	__u64 *seen = bpf_map_lookup_elem(&v8_sfis, &key);

	if (seen && *seen == sum)
		return 0;
	if (v8_emit_meta(tgid, sfi, sum, o) == 0)
		bpf_map_update_elem(&v8_sfis, &key, &sum, BPF_ANY);
	return 0;
}

/* One chunk of a script's source: bpf_loop()'s callback. */
struct v8_source_ctx {
	__u64 script, chars;
	__u32 tgid, total;
	__u32 failed;
};

static long v8_source_chunk(__u64 index, void *ctx)
{
	struct v8_source_ctx *c = ctx;
	struct sonde_v8_source_rec *r;
	__u64 off = index * SONDE_V8_SOURCE_CHUNK, n;

	if (off >= c->total)
		return 1;
	n = c->total - off;
	if (n > SONDE_V8_SOURCE_CHUNK)
		n = SONDE_V8_SOURCE_CHUNK;
	r = interp_rec_new(sizeof(*r), c->tgid, SONDE_INTERP_V8);
	if (!r) {
		c->failed = 1;
		return 1;
	}
	r->src.size = sizeof(r->src);
	r->src.version = SONDE_V8_SOURCE_VERSION;
	r->src.index = (__u8)index;
	r->src.pad = 0;
	r->src.pad2 = 0;
	r->src.total = c->total;
	r->src.script = c->script;
	asm volatile("" : "+r"(n));
	if (n == 0 || n > SONDE_V8_SOURCE_CHUNK ||
	    bpf_probe_read_user(r->src.bytes, n, (const void *)(c->chars + off)))
		n = 0;
	r->src.len = (__u16)n;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Sends script's source (a sequential one-byte string, in chunks) unless
 * this process's copy was sent already. A global function: verified once. */
__noinline int v8_note_script(__u32 tgid, __u64 script, const struct sonde_v8_offsets *o)
{
	struct sonde_v8_sfi_key key = { .tgid = tgid, .sfi = script };
	struct v8_source_ctx c = { .script = script, .tgid = tgid };
	__u64 src, *seen;
	__s32 len = 0;
	__u16 t;

	if (!o)
		return 0;
	src = interp_read_u64(script - 1 + o->script_source);
	seen = bpf_map_lookup_elem(&v8_scripts, &key);
	if (seen && *seen == src)
		return 0;
	t = v8_type(o, src);
	if (!t || t >= o->first_nonstring || (t & o->string_rep_mask) != o->string_seq_tag ||
	    !(t & o->string_onebyte))
		return 0;
	bpf_probe_read_user(&len, sizeof(len), (const void *)(src - 1 + o->string_length));
	if (len <= 0)
		return 0;
	c.total = (__u32)len;
	if (c.total > SONDE_V8_SOURCE_CHUNK * SONDE_V8_SOURCE_CHUNKS)
		c.total = SONDE_V8_SOURCE_CHUNK * SONDE_V8_SOURCE_CHUNKS;
	c.chars = src - 1 + o->seq_chars;
	bpf_loop(SONDE_V8_SOURCE_CHUNKS, v8_source_chunk, &c, 0);
	if (!c.failed)
		bpf_map_update_elem(&v8_scripts, &key, &src, BPF_ANY);
	return 0;
}

/* The source position table of code (a Code object) or, when bytecode
 * is set, of a BytecodeArray, whose tables are only set once V8 computed
 * them: 0 unless it is a ByteArray (as the handler table before it). */
static __always_inline __u64 v8_table_of(const struct sonde_v8_offsets *o, __u64 code,
					 __u32 bytecode)
{
	__u64 table;

	if (!bytecode)
		return interp_read_u64(code - 1 + o->code_table);
	if (o->bytecode_table < 8)
		return 0;
	table = interp_read_u64(code - 1 + o->bytecode_table);
	if (!(table & 1) ||
	    interp_read_u64(table - 1) !=
		    interp_read_u64(interp_read_u64(code - 1 + o->bytecode_table - 8) - 1))
		return 0;
	return table;
}

/* Sends the position table of code (a Code object, or a BytecodeArray
 * when bytecode is set) unless this process's copy was sent already.
 * Returns V8_NOTE_SENT when it did, with V8_NOTE_SCRIPT when its script
 * is a Script (the caller sends the source and the inlining data: one
 * call less deep on the BPF stack), else 0. A global function: verified
 * once. */
#define V8_NOTE_SENT 1
#define V8_NOTE_SCRIPT 2
__noinline int v8_note_code(__u32 tgid, __u64 code, __u64 sfi, const struct sonde_v8_offsets *o,
			    __u32 bytecode)
{
	struct sonde_v8_sfi_key key = { .tgid = tgid, .sfi = code };
	struct sonde_v8_code_rec *r;
	__u64 table, len, m, script, *seen;

	if (!o)
		return 0;
	seen = bpf_map_lookup_elem(&v8_codes, &key);
	if (seen && *seen == sfi)
		return 0;
	table = v8_table_of(o, code, bytecode);
	if (!table)
		return 0;
	r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_V8);
	if (!r)
		return 0;
	r->code.size = sizeof(r->code);
	r->code.version = SONDE_V8_CODE_VERSION;
	r->code.flags = bytecode ? SONDE_V8_CODE_BYTECODE : 0;
	r->code.pad = 0;
	r->code.code = code;
	r->code.sfi = sfi;
	r->code.script = interp_read_u64(sfi - 1 + o->sfi_script);
	len = interp_read_u64(table - 1 + o->array_length) >> 32; /* a Smi */
	if (len > SONDE_V8_CODE_TABLE_MAX) {
		len = SONDE_V8_CODE_TABLE_MAX;
		r->code.flags |= SONDE_V8_CODE_TABLE_CUT;
	}
	m = len - 1;
	asm volatile("" : "+r"(m));
	if (len == 0 || m >= SONDE_V8_CODE_TABLE_MAX || !(table & 1) ||
	    bpf_probe_read_user(r->code.table, m + 1, (const void *)(table - 1 + o->array_data)))
		m = (__u64)-1;
	r->code.table_len = (__u16)(m + 1);
	script = r->code.script;
	bpf_ringbuf_submit(r, 0);
	bpf_map_update_elem(&v8_codes, &key, &sfi, BPF_ANY);
	return V8_NOTE_SENT | (v8_type(o, script) == o->type_script ? V8_NOTE_SCRIPT : 0);
}

/* Sends the process's bytecode lengths (the config's bytecode_sizes,
 * 3 * n_bytecodes bytes at runtime + its offset: in the file's read-only
 * data, inside the image by the sensor's check) unless this process's
 * copy was sent already (key: SFI 0, never a heap object's address).
 * A global function: verified once. */
__noinline int v8_note_sizes(__u32 tgid, __u64 runtime, const struct sonde_v8_offsets *o)
{
	struct sonde_v8_sfi_key key = { .tgid = tgid, .sfi = 0 };
	struct sonde_v8_sizes_rec *r;
	__u64 addr, n, m, *seen;

	if (!o || !o->bytecode_sizes || !o->n_bytecodes)
		return 0;
	addr = runtime + o->bytecode_sizes;
	seen = bpf_map_lookup_elem(&v8_codes, &key);
	if (seen && *seen == addr)
		return 0;
	r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_V8);
	if (!r)
		return 0;
	r->sz.size = sizeof(r->sz);
	r->sz.version = SONDE_V8_SIZES_VERSION;
	r->sz.pad = 0;
	r->sz.n_bytecodes = o->n_bytecodes;
	n = 3 * (__u64)o->n_bytecodes;
	m = n - 1;
	asm volatile("" : "+r"(m));
	if (m >= SONDE_V8_SIZES_MAX ||
	    bpf_probe_read_user(r->sz.sizes, m + 1, (const void *)addr)) {
		bpf_ringbuf_discard(r, 0);
		return 0;
	}
	r->sz.len = (__u16)(m + 1);
	bpf_ringbuf_submit(r, 0);
	bpf_map_update_elem(&v8_codes, &key, &addr, BPF_ANY);
	return 0;
}

/* Sends code's bytecode offset table (a baseline Code: the same slot as
 * an optimised Code's position table) with the bytecodes of ba, its
 * BytecodeArray, unless this process's copy was sent already (the value:
 * ba). Returns 1 when it did, else 0. A global function: verified once. */
__noinline int v8_note_baseline(__u32 tgid, __u64 code, __u64 ba, const struct sonde_v8_offsets *o)
{
	struct sonde_v8_sfi_key key = { .tgid = tgid, .sfi = code };
	struct sonde_v8_baseline_rec *r;
	__u64 table, len, m, *seen;

	if (!o)
		return 0;
	seen = bpf_map_lookup_elem(&v8_codes, &key);
	if (seen && *seen == ba)
		return 0;
	table = interp_read_u64(code - 1 + o->code_table);
	if (!(table & 1) || !o->bytecode_data)
		return 0;
	r = interp_rec_new(sizeof(*r), tgid, SONDE_INTERP_V8);
	if (!r)
		return 0;
	r->b.size = sizeof(r->b);
	r->b.version = SONDE_V8_BASELINE_VERSION;
	r->b.flags = 0;
	r->b.code = code;
	r->b.bytecode_array = ba;
	r->b.pad = 0;
	len = interp_read_u64(table - 1 + o->array_length) >> 32; /* a Smi */
	if (len > SONDE_V8_BASELINE_TABLE_MAX) {
		len = SONDE_V8_BASELINE_TABLE_MAX;
		r->b.flags |= SONDE_V8_BASELINE_TABLE_CUT;
	}
	m = len - 1;
	asm volatile("" : "+r"(m));
	if (len == 0 || m >= SONDE_V8_BASELINE_TABLE_MAX ||
	    bpf_probe_read_user(r->b.table, m + 1, (const void *)(table - 1 + o->array_data)))
		m = (__u64)-1;
	r->b.table_len = (__u16)(m + 1);
	len = interp_read_u64(ba - 1 + o->array_length) >> 32; /* a Smi: the bytecodes */
	if (len > SONDE_V8_BASELINE_BYTECODES_MAX) {
		len = SONDE_V8_BASELINE_BYTECODES_MAX;
		r->b.flags |= SONDE_V8_BASELINE_BYTECODES_CUT;
	}
	m = len - 1;
	asm volatile("" : "+r"(m));
	if (len == 0 || m >= SONDE_V8_BASELINE_BYTECODES_MAX ||
	    bpf_probe_read_user(r->b.bytecodes, m + 1, (const void *)(ba - 1 + o->bytecode_data)))
		m = (__u64)-1;
	r->b.bytecodes_len = (__u16)(m + 1);
	bpf_ringbuf_submit(r, 0);
	bpf_map_update_elem(&v8_codes, &key, &ba, BPF_ANY);
	return 1;
}

/* Sends the names of sfi, a function inlined into an optimised Code, and
 * its script's source, unless this process's copies were sent already
 * (the same records and maps as a frame's own). Inlined into the step:
 * a global function here would make the call chain to the source's
 * bpf_loop callback one deeper than the 512 bytes of stack allow. */
static __always_inline void v8_note_inlined(__u32 tgid, __u64 sfi,
					    const struct sonde_v8_offsets *o)
{
	__u64 name, script;

	if (!(sfi & 1) || v8_type(o, sfi) != o->type_sfi)
		return;
	name = interp_read_u64(sfi - 1 + o->sfi_name);
	script = interp_read_u64(sfi - 1 + o->sfi_script);
	v8_note_sfi(tgid, sfi, name ^ (script << 1), o);
	if (v8_type(o, script) == o->type_script)
		v8_note_script(tgid, script, o);
}

/* Where v8_note_inlining() found a Code's inlined functions: the literal
 * array and how many lead it (0: none). */
struct v8_inlined {
	__u64 lits, n;
};

/* Element i of the FixedArray arr (a tagged pointer). */
static __always_inline __u64 v8_elem(const struct sonde_v8_offsets *o, __u64 arr, __u32 i)
{
	return interp_read_u64(arr - 1 + o->array_data + 8 * (i & 31));
}

/* Sends the inlining data of code, an optimised Code whose position table
 * was just sent (struct sonde_v8_inline), and says in *ret where its
 * inlined functions are (the caller sends their names and sources).
 * Nothing for a Code that inlined none. A global function: verified once. */
__noinline int v8_note_inlining(__u32 tgid, __u64 code, const struct sonde_v8_offsets *o,
				struct v8_inlined *ret)
{
	struct sonde_v8_inline_rec *r;
	__u64 deopt, len, n, m, lits, pos, sfi;

	if (!o || !ret)
		return 0;
	ret->n = 0;
	if (!o->code_deopt)
		return 0;
	deopt = interp_read_u64(code - 1 + o->code_deopt);
	if (!(deopt & 1))
		return 0;
	len = interp_read_u64(deopt - 1 + o->array_length) >> 32; /* a Smi */
	if (len <= o->deopt_count || len <= o->deopt_literals || len <= o->deopt_inlining)
		return 0;
	n = v8_elem(o, deopt, o->deopt_count) >> 32;
	lits = v8_elem(o, deopt, o->deopt_literals);
	pos = v8_elem(o, deopt, o->deopt_inlining);
	if (n == 0 || n > 0xffff || !(lits & 1) || !(pos & 1))
		return 0;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_err(SONDE_ERR_RINGBUF_FULL_EVENT);
		return 0;
	}
	r->h.type = SONDE_REC_INTERP;
	r->h.pid = tgid;
	r->h.kind = SONDE_INTERP_V8;
	r->h.len = sizeof(r->inl);
	r->inl.size = sizeof(r->inl);
	r->inl.version = SONDE_V8_INLINE_VERSION;
	r->inl.flags = 0;
	r->inl.code = code;
	if (n > SONDE_V8_INLINE_FNS) {
		n = SONDE_V8_INLINE_FNS;
		r->inl.flags |= SONDE_V8_INLINE_FNS_CUT;
	}
	m = n - 1;
	asm volatile("" : "+r"(m));
	if (m >= SONDE_V8_INLINE_FNS ||
	    bpf_probe_read_user(r->inl.fns, 8 * (m + 1), (const void *)(lits - 1 + o->array_data)))
		n = 0;
	for (__u32 i = 0; i < SONDE_V8_INLINE_FNS; i++) {
		/* A weak reference (tag 3) names the object as a strong one. */
		sfi = i < n ? r->inl.fns[i] & ~2ull : 0;
		r->inl.fns[i] = sfi;
		r->inl.scripts[i] = sfi & 1 ? interp_read_u64(sfi - 1 + o->sfi_script) : 0;
	}
	r->inl.n_fns = (__u16)n;
	len = interp_read_u64(pos - 1 + o->array_length) >> 32; /* bytes */
	if (len > SONDE_V8_INLINE_POS_MAX) {
		len = SONDE_V8_INLINE_POS_MAX;
		r->inl.flags |= SONDE_V8_INLINE_POS_CUT;
	}
	m = len - 1;
	asm volatile("" : "+r"(m));
	if (len == 0 || m >= SONDE_V8_INLINE_POS_MAX ||
	    bpf_probe_read_user(r->inl.positions, m + 1, (const void *)(pos - 1 + o->array_data)))
		m = (__u64)-1;
	r->inl.pos_len = (__u16)(m + 1);
	bpf_ringbuf_submit(r, 0);
	ret->lits = lits;
	ret->n = n;
	return 0;
}

/* Sets up the walk's JIT state: the embedded builtins, and code without
 * an unwind table. */
static __always_inline void v8_jit_begin(struct unwind_scratch *s)
{
	const struct sonde_v8_proc *p = (const struct sonde_v8_proc *)&s->proc;

	s->jit.kind = SONDE_INTERP_V8;
	s->jit.anon = 1;
	s->jit.n_ranges = 1;
	s->jit.lo[0] = p->runtime_addr;
	s->jit.hi[0] = p->runtime_addr + p->off.blob_size;
}

/* Words at sp v8_code_pos() looks at for a return address. */
#define V8_RA_SCAN 4

/* The code position of a frame that is not interpreted (word 1): the
 * pc's offset in fn's current code, and which code (*ret_code when the pc
 * is in it). sp (0: none) is the sampled frame's stack pointer: a pc
 * outside the code there is in a builtin the code called that made no
 * frame of its own (fp is still the function's), which left its return
 * address at sp or in the next few words (scan, V8_RA_SCAN words of
 * scratch): the first that points into the code gives the position, less
 * one (inside the call, as for a caller's return address). */
static __always_inline __u64 v8_code_pos(const struct sonde_v8_offsets *o, __u64 fn, __u64 pc,
					 __u64 *ret_code, __u64 *b, __u64 sp, __u64 *scan)
{
	__u64 code = interp_read_u64(fn - 1 + o->fn_code), start;
	__u32 size = 0, off = SONDE_V8_NO_PC;

	if (v8_type(o, code) != o->type_code)
		return SONDE_V8_NO_PC;
	/* Start and size are two words apart in 11.x: one read. */
	if (o->code_size == o->code_start + 16 &&
	    !bpf_probe_read_user(b, 3 * 8, (const void *)(code - 1 + o->code_start))) {
		start = b[0];
		size = (__u32)b[2];
	} else {
		start = interp_read_u64(code - 1 + o->code_start);
		bpf_probe_read_user(&size, sizeof(size), (const void *)(code - 1 + o->code_size));
	}
	if (pc >= start && pc - start < size) {
		off = (__u32)(pc - start);
		*ret_code = code;
	} else if (sp && !bpf_probe_read_user(scan, V8_RA_SCAN * 8, (const void *)sp)) {
		for (__u32 i = 0; i < V8_RA_SCAN; i++) {
			if (scan[i] > start && scan[i] - start <= size) {
				off = (__u32)(scan[i] - 1 - start);
				*ret_code = code;
				break;
			}
		}
	}
	return ((code >> 3) << 32) | off;
}

/* The instance type of a map (a tagged pointer), or 0. */
static __always_inline __u16 v8_map_type(const struct sonde_v8_offsets *o, __u64 map)
{
	__u16 t = 0;

	if (!(map & 1))
		return 0;
	bpf_probe_read_user(&t, sizeof(t), (const void *)(map - 1 + o->map_instance_type));
	return t;
}

/* The word at obj + off (an object field): from h, obj's first 5 words
 * (NULL: not read), when it is there, else read alone. */
static __always_inline __u64 v8_field(const __u64 *h, __u64 obj, __u32 off)
{
	if (h && off <= 32 && !(off & 7))
		return h[(off / 8) & 7];
	return interp_read_u64(obj - 1 + off);
}

/* The frame's words from fp - V8_WIN_BELOW to fp + 16 (its fixed slots,
 * saved fp and return address), read at once into the scratch's
 * jit_words[0..7]: a JS frame needs six of them, and one read costs about
 * what one word's does. */
#define V8_WIN_BELOW 48
#define V8_WIN_WORDS (V8_WIN_BELOW / 8 + 2)

/* The word at fp - off (a config slot, 8..127): from the window w (NULL:
 * not read) when it is there, else read alone. */
static __always_inline __u64 v8_slot(const __u64 *w, __u64 fp, __u32 off)
{
	if (w && off <= V8_WIN_BELOW && !(off & 7))
		return w[((V8_WIN_BELOW - off) / 8) & (V8_WIN_WORDS - 1)];
	return interp_read_u64(fp - off);
}

/* The frame at st (native frame `native` of the walk) if it is a
 * JavaScript frame: recorded, and st set to its caller. Returns -1 (not
 * one: the native rule applies), 0 (go on) or 1 (stop). A global
 * function: the verifier checks it once, not in the walk loop's states. */
__noinline int v8_jit_step(struct unwind_scratch *s, struct user_walk *st, __u32 native)
{
	const struct sonde_v8_offsets *o;
	__u64 fp, ctx, fn, sfi, saved, ra, pos, bo, ba, code = 0;
	__u32 tier, bytecode = 0;
	__u64 *w, *h, name, script;
	int ret;

	if (!s || !st)
		return -1;
	o = &((const struct sonde_v8_proc *)&s->proc)->off;
	fp = st->fp;
	if (!fp || (fp & 7) || fp < st->sp)
		return -1;
	w = s->jit_words;
	if (bpf_probe_read_user(w, V8_WIN_WORDS * 8, (const void *)(fp - V8_WIN_BELOW)))
		w = NULL;
	ctx = v8_slot(w, fp, o->fp_context);
	fn = v8_slot(w, fp, o->fp_function);
	/* A frame-type marker (a Smi) in the context slot: no JS frame. */
	if (!(ctx & 1) || !(fn & 1))
		return -1;
	sfi = interp_read_u64(fn - 1 + o->fn_shared);
	/* The SFI's first 5 words (its map, name and script in 11.x) at
	 * once, into jit_words[8..12]. */
	h = &s->jit_words[8];
	if (!(sfi & 1) || bpf_probe_read_user(h, 5 * 8, (const void *)(sfi - 1)))
		h = NULL;
	if (v8_map_type(o, h ? h[0] : interp_read_u64(sfi - 1)) != o->type_sfi)
		return -1;
	name = v8_field(h, sfi, o->sfi_name);
	script = v8_field(h, sfi, o->sfi_script);
	ba = v8_slot(w, fp, o->fp_bytecode_array);
	/* Ignition keeps the offset as a Smi (+ the header - the tag) in the
	 * slot after the BytecodeArray; Sparkplug the feedback vector. */
	tier = SONDE_V8_TIER_OPTIMIZED;
	bo = 0;
	if (v8_type(o, ba) == o->type_bytecode_array) {
		bo = v8_slot(w, fp, o->fp_bytecode_offset);
		tier = bo & 1 ? SONDE_V8_TIER_BASELINE : SONDE_V8_TIER_INTERPRETED;
	}
	if (tier == SONDE_V8_TIER_INTERPRETED) {
		bo >>= 32;
		/* The sampled frame in a bytecode handler: the current
		 * bytecode is in the offset register (the slot is only
		 * written before calls), when inside the array. */
		if (native == 0 && st->exact_pc && o->bytecode_data &&
		    st->pc - s->jit.lo[0] < s->jit.hi[0] - s->jit.lo[0] &&
		    st->r9 >= o->bytecode_data - 1u &&
		    st->r9 - (o->bytecode_data - 1u) <
			    (interp_read_u64(ba - 1 + o->array_length) >> 32))
			bo = st->r9;
		pos = SONDE_V8_NO_PC;
		if (o->bytecode_data && bo >= o->bytecode_data - 1u &&
		    bo - (o->bytecode_data - 1u) < SONDE_V8_NO_PC) {
			pos = ((ba >> 3) << 32) | (bo - (o->bytecode_data - 1u));
			code = ba;
			bytecode = 1;
		}
	} else {
		/* The sampled frame: a pc outside the function's code is in a
		 * builtin without a frame of its own. */
		pos = v8_code_pos(o, fn, st->pc, &code, &s->jit_words[13],
				  native == 0 && st->exact_pc ? st->sp : 0, &s->jit_words[16]);
	}
	if (!interp_jit_push(&s->jit, native, SONDE_V8_WORD0(sfi, tier), pos))
		count_err(SONDE_ERR_USER_TRUNCATED);
	/* The caller, by V8's frame pointer chain: before the records, so
	 * that fewer values live across their calls (the BPF stack). */
	saved = w ? w[V8_WIN_WORDS - 2] : interp_read_u64(fp);
	ra = w ? w[V8_WIN_WORDS - 1] : interp_read_u64(fp + 8);
	ret = 0;
	if (!ra) {
		st->outcome = SONDE_OUTCOME_COMPLETE;
		ret = 1;
	} else {
		st->pc = ra;
		st->sp = fp + 16;
		st->exact_pc = 0;
		if (saved != 0 && saved <= fp) {
			count_err(SONDE_ERR_USER_BAD_FP);
			st->outcome = SONDE_OUTCOME_READ_ERROR;
			st->last = 1;
		} else {
			st->fp = saved;
		}
	}
	v8_note_sfi(bpf_get_current_pid_tgid() >> 32, sfi, name ^ (script << 1), o);
	/* A baseline Code's table maps pcs to bytecodes: sent with the
	 * bytecodes (and the lengths, once), then the BytecodeArray's
	 * position table as an interpreted frame's. */
	if (tier == SONDE_V8_TIER_BASELINE && code) {
		if (v8_note_baseline(bpf_get_current_pid_tgid() >> 32, code, ba, o))
			v8_note_sizes(bpf_get_current_pid_tgid() >> 32,
				      ((const struct sonde_v8_proc *)&s->proc)->runtime_addr, o);
		code = ba;
		bytecode = 1;
	}
	if (code) {
		int sent = v8_note_code(bpf_get_current_pid_tgid() >> 32, code, sfi, o, bytecode);

		if (sent & V8_NOTE_SCRIPT)
			v8_note_script(bpf_get_current_pid_tgid() >> 32, script, o);
		if ((sent & V8_NOTE_SENT) && !bytecode) {
			struct v8_inlined *in = (struct v8_inlined *)&s->jit_words[14];

			v8_note_inlining(bpf_get_current_pid_tgid() >> 32, code, o, in);
			for (__u32 i = 0; i < SONDE_V8_INLINE_FNS && i < in->n; i++)
				v8_note_inlined(bpf_get_current_pid_tgid() >> 32,
						v8_elem(o, in->lits, i) & ~2ull, o);
		}
	}
	return ret;
}
