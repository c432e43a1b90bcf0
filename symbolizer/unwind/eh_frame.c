/* eh_frame.c - DWARF call frame information (.eh_frame, .debug_frame) to
 * unwind rules (see eh_frame.h).
 *
 * Written from the DWARF 5 specification (section 6.4), the LSB
 * description of .eh_frame and the x86-64 psABI; no code of another
 * unwinder is used. Only what the BPF unwinder can use is tracked: the CFA
 * rule, the rule of rbp (DWARF register 6) and of the return address
 * column (16 on x86-64, taken from the CIE). Every other register's
 * instructions are decoded (their operands must be skipped) and ignored.
 *
 * A rule maps to a row kind like this (docs/unwind-tables.md):
 *   CIE augmentation 'S'                  -> SIGNAL for the whole FDE
 *   return address undefined              -> STOP (process/thread root)
 *   CFA = the gcc/ld PLT expression       -> PLT
 *   CFA = rsp + N / rbp + N (N fits s32)  -> SP / FP
 *   anything else for the CFA, a return address not at CFA - 8, rbp
 *   saved other than at CFA + N (N fits s16)  -> UNSUPPORTED
 *
 * Bounds: every read is checked against the end of its entry (which is
 * checked against the section); LEB128 numbers longer than 10 bytes are
 * malformed; at most CFI_MAX_ENTRIES entries, CFI_MAX_INSNS_PER_FDE
 * instructions (CIE's included), CFI_MAX_STATE_DEPTH remembered states,
 * CFI_MAX_ROWS_PER_FDE rows per FDE. Each loop advances its position by
 * at least one byte, so the walk ends.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "eh_frame.h"

/* Pointer encodings (LSB, .eh_frame). */
#define PE_OMIT 0xff
#define PE_ABSPTR 0x00
#define PE_ULEB128 0x01
#define PE_UDATA2 0x02
#define PE_UDATA4 0x03
#define PE_UDATA8 0x04
#define PE_SLEB128 0x09
#define PE_SDATA2 0x0a
#define PE_SDATA4 0x0b
#define PE_SDATA8 0x0c
#define PE_PCREL 0x10
#define PE_TEXTREL 0x20
#define PE_DATAREL 0x30
#define PE_FUNCREL 0x40
#define PE_ALIGNED 0x50
#define PE_INDIRECT 0x80

/* Call frame instructions (DWARF 5, 6.4.2). */
#define CFA_advance_loc 0x40
#define CFA_offset 0x80
#define CFA_restore 0xc0
#define CFA_nop 0x00
#define CFA_set_loc 0x01
#define CFA_advance_loc1 0x02
#define CFA_advance_loc2 0x03
#define CFA_advance_loc4 0x04
#define CFA_offset_extended 0x05
#define CFA_restore_extended 0x06
#define CFA_undefined 0x07
#define CFA_same_value 0x08
#define CFA_register 0x09
#define CFA_remember_state 0x0a
#define CFA_restore_state 0x0b
#define CFA_def_cfa 0x0c
#define CFA_def_cfa_register 0x0d
#define CFA_def_cfa_offset 0x0e
#define CFA_def_cfa_expression 0x0f
#define CFA_expression 0x10
#define CFA_offset_extended_sf 0x11
#define CFA_def_cfa_sf 0x12
#define CFA_def_cfa_offset_sf 0x13
#define CFA_val_offset 0x14
#define CFA_val_offset_sf 0x15
#define CFA_val_expression 0x16
#define CFA_GNU_args_size 0x2e
#define CFA_GNU_negative_offset_extended 0x2f

/* x86-64 DWARF register numbers (psABI, figure 3.36). */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RIP 16

#define CIE_CACHE_SIZE 64
#define MAX_AUGMENTATION 16

struct reader {
	const uint8_t *data;
	uint64_t pos, end;
	bool err;
};

static uint64_t rd_fixed(struct reader *r, unsigned n)
{
	uint64_t v = 0;

	if (r->err || n > r->end - r->pos) {
		r->err = true;
		return 0;
	}
	/* Little-endian: the only byte order of x86-64. */
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)r->data[r->pos + i] << (8 * i);
	r->pos += n;
	return v;
}

static uint8_t rd_u8(struct reader *r)
{
	return (uint8_t)rd_fixed(r, 1);
}

static uint64_t rd_uleb(struct reader *r)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 70; shift += 7) {
		uint8_t b;

		if (r->err || r->pos >= r->end)
			break;
		b = r->data[r->pos++];
		if (shift == 63 && (b & 0x7e))
			break; /* more than 64 bits */
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	r->err = true;
	return 0;
}

static int64_t rd_sleb(struct reader *r)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (shift < 70) {
		uint8_t b;

		if (r->err || r->pos >= r->end)
			break;
		b = r->data[r->pos++];
		if (shift == 63 && b != 0 && b != 0x7f)
			break;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= ~(uint64_t)0 << shift;
			return (int64_t)v;
		}
	}
	r->err = true;
	return 0;
}

static void rd_skip(struct reader *r, uint64_t n)
{
	if (r->err || n > r->end - r->pos) {
		r->err = true;
		return;
	}
	r->pos += n;
}

/* Reads a pointer with encoding enc. *ret_indirect says whether the value
 * is the address of the pointer (DW_EH_PE_indirect). Returns false if the
 * encoding is unknown or unusable (funcrel, textrel/datarel without a
 * base); r->err is set on a short read. */
static bool rd_pointer(const struct cfi_section *sec, struct reader *r, uint8_t enc,
		       uint64_t *ret, bool *ret_indirect)
{
	uint64_t base = 0, v;

	switch (enc & 0x70) {
	case PE_ABSPTR:
		break;
	case PE_PCREL:
		base = sec->addr + r->pos;
		break;
	case PE_TEXTREL:
		if (!sec->text_addr)
			return false;
		base = sec->text_addr;
		break;
	case PE_DATAREL:
		if (!sec->data_addr)
			return false;
		base = sec->data_addr;
		break;
	case PE_ALIGNED: {
		uint64_t a = sec->addr + r->pos, mis = a % sec->addr_size;

		if (mis)
			rd_skip(r, sec->addr_size - mis);
		break;
	}
	default: /* funcrel (only meaningful inside an FDE) and unknown */
		return false;
	}
	switch (enc & 0x0f) {
	case PE_ABSPTR:
		v = rd_fixed(r, sec->addr_size);
		break;
	case PE_ULEB128:
		v = rd_uleb(r);
		break;
	case PE_UDATA2:
		v = rd_fixed(r, 2);
		break;
	case PE_UDATA4:
		v = rd_fixed(r, 4);
		break;
	case PE_UDATA8:
		v = rd_fixed(r, 8);
		break;
	case PE_SLEB128:
		v = (uint64_t)rd_sleb(r);
		break;
	case PE_SDATA2:
		v = (uint64_t)(int64_t)(int16_t)rd_fixed(r, 2);
		break;
	case PE_SDATA4:
		v = (uint64_t)(int64_t)(int32_t)rd_fixed(r, 4);
		break;
	case PE_SDATA8:
		v = rd_fixed(r, 8);
		break;
	default:
		return false;
	}
	if (r->err)
		return false;
	v += base;
	if (sec->addr_size == 4)
		v &= 0xffffffffu;
	*ret = v;
	*ret_indirect = enc & PE_INDIRECT;
	return true;
}

/* Only the size-giving low nibble: an FDE's address range. */
static bool rd_range(const struct cfi_section *sec, struct reader *r, uint8_t enc, uint64_t *ret)
{
	struct cfi_section plain = *sec;
	bool indirect;

	plain.addr = 0;
	return rd_pointer(&plain, r, enc & 0x0f, ret, &indirect);
}

/* ---- CIEs ---- */

struct cie {
	bool valid;
	uint64_t offset;
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	bool has_z;
	bool signal;
	unsigned addr_size;
	uint64_t insn_pos, insn_end;
};

struct walk {
	const struct cfi_section *sec;
	cfi_emit_fn emit;
	void *ctx;
	struct cfi_stats st;
	struct cie cache[CIE_CACHE_SIZE];
	const char *last_error;
	int emit_err;
};

/* The header of the entry at pos: its end and where its id field is.
 * Returns false at a terminator or when the length leaves the section. */
static bool entry_header(const struct walk *w, uint64_t pos, uint64_t *ret_end, uint64_t *ret_id,
			 bool *ret_64, bool *ret_terminator)
{
	struct reader r = { w->sec->data, pos, w->sec->size, false };
	uint64_t len = rd_fixed(&r, 4);

	*ret_terminator = false;
	*ret_64 = false;
	if (!r.err && len == 0xffffffffu) {
		len = rd_fixed(&r, 8);
		*ret_64 = true;
	}
	if (r.err)
		return false;
	if (len == 0) {
		*ret_terminator = true;
		return false;
	}
	if (len > r.end - r.pos)
		return false;
	*ret_end = r.pos + len;
	*ret_id = r.pos;
	return true;
}

static bool is_cie_id(const struct walk *w, uint64_t id, bool is64)
{
	if (w->sec->kind == CFI_EH_FRAME)
		return id == 0;
	return is64 ? id == UINT64_MAX : id == 0xffffffffu;
}

/* The id field is 4 bytes in .eh_frame (also with 64-bit lengths) and
 * follows the length's width in .debug_frame. */
static unsigned id_size(const struct walk *w, bool is64)
{
	return w->sec->kind == CFI_DEBUG_FRAME && is64 ? 8 : 4;
}

static const char *parse_cie(struct walk *w, uint64_t pos, struct cie *c)
{
	const struct cfi_section *sec = w->sec;
	uint64_t end, id_pos, id;
	bool is64, term, indirect;
	struct reader r;
	char aug[MAX_AUGMENTATION + 1];
	size_t n = 0;
	uint8_t version;

	memset(c, 0, sizeof(*c));
	if (!entry_header(w, pos, &end, &id_pos, &is64, &term))
		return "CIE pointer to no valid entry";
	r = (struct reader){ sec->data, id_pos, end, false };
	id = rd_fixed(&r, id_size(w, is64));
	if (r.err || !is_cie_id(w, id, is64))
		return "CIE pointer to an entry that is not a CIE";
	version = rd_u8(&r);
	if (version != 1 && version != 3 && version != 4)
		return "unsupported CIE version";
	for (;;) {
		uint8_t ch = rd_u8(&r);

		if (r.err)
			return "truncated CIE augmentation";
		if (ch == 0)
			break;
		if (n == MAX_AUGMENTATION)
			return "CIE augmentation string too long";
		aug[n++] = (char)ch;
	}
	aug[n] = '\0';
	c->addr_size = sec->addr_size;
	if (version == 4) {
		uint8_t asz = rd_u8(&r), seg = rd_u8(&r);

		if (r.err || (asz != 4 && asz != 8) || seg != 0)
			return "unsupported CIE address or segment size";
		c->addr_size = asz;
	}
	if (aug[0] == 'e' && aug[1] == 'h')
		rd_skip(&r, c->addr_size); /* old GCC "eh": a pointer to EH data */
	c->code_align = rd_uleb(&r);
	c->data_align = rd_sleb(&r);
	c->ra_reg = version == 1 ? rd_u8(&r) : rd_uleb(&r);
	if (r.err)
		return "truncated CIE";
	if (c->code_align == 0 || c->code_align > 1024 || c->data_align < -1024 ||
	    c->data_align > 1024 || c->data_align == 0)
		return "implausible CIE alignment factors";
	c->fde_enc = PE_ABSPTR; /* .debug_frame, and .eh_frame without 'R' */
	if (aug[0] == 'z') {
		uint64_t aug_len = rd_uleb(&r), aug_end;

		if (r.err || aug_len > r.end - r.pos)
			return "CIE augmentation data past the entry";
		aug_end = r.pos + aug_len;
		c->has_z = true;
		for (size_t i = 1; i < n; i++) {
			struct reader a = { sec->data, r.pos, aug_end, false };
			uint64_t ignored;
			uint8_t enc;

			switch (aug[i]) {
			case 'R':
				c->fde_enc = rd_u8(&a);
				break;
			case 'L':
				rd_u8(&a); /* LSDA encoding: the LSDA is skipped by length */
				break;
			case 'P':
				/* The personality routine: not needed; an indirect
				 * one is only skipped, never followed. */
				enc = rd_u8(&a);
				if (!a.err && enc != PE_OMIT &&
				    !rd_pointer(sec, &a, enc, &ignored, &indirect))
					return "unusable CIE personality encoding";
				break;
			case 'S':
				c->signal = true;
				break;
			case 'B': /* AArch64 B key, MTE tagged frames: no data */
			case 'G':
				break;
			default:
				return "unknown CIE augmentation";
			}
			if (a.err)
				return "truncated CIE augmentation data";
			r.pos = a.pos;
		}
		r.pos = aug_end;
	} else if (n != 0 && strcmp(aug, "eh") != 0) {
		/* Without 'z' an unknown augmentation has unknown layout. */
		return "unknown CIE augmentation";
	}
	if (c->fde_enc == PE_OMIT)
		return "CIE with no FDE address encoding";
	c->insn_pos = r.pos;
	c->insn_end = end;
	c->offset = pos;
	c->valid = true;
	return NULL;
}

static const char *get_cie(struct walk *w, uint64_t pos, const struct cie **ret)
{
	struct cie *slot = &w->cache[(pos >> 2) % CIE_CACHE_SIZE];
	const char *err;

	if (slot->valid && slot->offset == pos) {
		*ret = slot;
		return NULL;
	}
	w->st.cies++;
	err = parse_cie(w, pos, slot);
	if (err) {
		slot->valid = false;
		return err;
	}
	*ret = slot;
	return NULL;
}

/* ---- the CFA interpreter ---- */

enum rule_how {
	R_UNSET = 0, /* never mentioned: same value for callee-saved rbp */
	R_UNDEF,
	R_SAME,
	R_OFFSET,   /* saved at CFA + off */
	R_OTHER,    /* val_offset, register, expression, val_expression */
};

enum cfa_how {
	CFA_UNSET = 0,
	CFA_REG,
	CFA_PLT,
	CFA_EXPR,
};

struct rule {
	uint8_t how;
	int64_t off;
};

struct state {
	uint8_t cfa_how;
	uint64_t cfa_reg;
	int64_t cfa_off;
	struct rule fp, ra;
};

struct emitter {
	struct walk *w;
	bool signal;
	bool have;
	uint64_t start, end;
	struct sonde_unwind_row row;
	unsigned n_rows;
};

/* The gcc/ld .plt CFA expression: rsp + 8 + ((rip & 15) >= 11) << 3
 * (lit10 in the variant whose push comes one byte earlier). */
static bool is_plt_expression(const uint8_t *p, uint64_t len)
{
	static const uint8_t head[] = { 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a };
	static const uint8_t tail[] = { 0x2a, 0x33, 0x24, 0x22 };

	return len == sizeof(head) + 1 + sizeof(tail) && memcmp(p, head, sizeof(head)) == 0 &&
	       (p[6] == 0x3b || p[6] == 0x3a) && memcmp(p + 7, tail, sizeof(tail)) == 0;
}

static struct sonde_unwind_row to_row(const struct state *s, bool signal)
{
	struct sonde_unwind_row row = { 0 };

	if (signal) {
		row.cfa_kind = SONDE_CFA_SIGNAL;
		return row;
	}
	if (s->ra.how == R_UNDEF) {
		row.cfa_kind = SONDE_CFA_STOP;
		return row;
	}
	if (s->cfa_how == CFA_PLT) {
		row.cfa_kind = SONDE_CFA_PLT;
		return row;
	}
	row.cfa_kind = SONDE_CFA_UNSUPPORTED;
	if (s->cfa_how != CFA_REG || (s->cfa_reg != REG_RSP && s->cfa_reg != REG_RBP) ||
	    s->cfa_off < INT32_MIN || s->cfa_off > INT32_MAX)
		return row;
	if (s->ra.how != R_OFFSET || s->ra.off != -8)
		return row;
	switch (s->fp.how) {
	case R_UNSET:
	case R_UNDEF:
	case R_SAME:
		row.fp_kind = SONDE_FP_SAME;
		break;
	case R_OFFSET:
		if (s->fp.off < INT16_MIN || s->fp.off > INT16_MAX)
			return row;
		row.fp_kind = SONDE_FP_AT_CFA;
		row.fp_off = (int16_t)s->fp.off;
		break;
	default:
		return row;
	}
	row.cfa_kind = s->cfa_reg == REG_RSP ? SONDE_CFA_SP : SONDE_CFA_FP;
	row.cfa_off = (int32_t)s->cfa_off;
	return row;
}

static int flush(struct emitter *e)
{
	int r;

	if (!e->have)
		return 0;
	e->have = false;
	if (e->row.cfa_kind == SONDE_CFA_UNSUPPORTED)
		e->w->st.unsupported_rows++;
	r = e->w->emit(e->w->ctx, e->start, e->end, &e->row);
	if (r < 0)
		e->w->emit_err = r;
	return r;
}

/* [start, end) follows the rule row; coalesces with the previous range. */
static int emit_range(struct emitter *e, uint64_t start, uint64_t end,
		      const struct sonde_unwind_row *row)
{
	if (start >= end)
		return 0;
	if (e->have && e->end == start && memcmp(&e->row, row, sizeof(*row)) == 0) {
		e->end = end;
		return 0;
	}
	if (flush(e) < 0)
		return e->w->emit_err;
	e->have = true;
	e->start = start;
	e->end = end;
	e->row = *row;
	e->n_rows++;
	return 0;
}

static struct rule *column(struct state *s, const struct cie *c, uint64_t reg, struct rule *scratch)
{
	if (reg == c->ra_reg)
		return &s->ra;
	if (reg == REG_RBP)
		return &s->fp;
	return scratch;
}

static bool factored(uint64_t v, int64_t factor, int64_t *ret)
{
	if (v > INT64_MAX)
		return false;
	return !__builtin_mul_overflow((int64_t)v, factor, ret);
}

struct interp {
	struct walk *w;
	const struct cie *cie;
	struct state st;
	const struct state *init; /* NULL while running the CIE's own */
	struct state stack[CFI_MAX_STATE_DEPTH];
	unsigned depth;
	unsigned n_insns;
	/* FDE only */
	struct emitter *em;
	uint64_t loc, end_pc;
};

/* Moves the location to new_loc (clamped to the FDE's end), emitting the
 * rows of [loc, new_loc). In a CIE locations mean nothing: ignored. */
static const char *advance(struct interp *in, uint64_t new_loc)
{
	struct sonde_unwind_row row;

	if (!in->em)
		return NULL;
	if (new_loc < in->loc)
		return "CFA location moved backwards";
	if (new_loc > in->end_pc)
		new_loc = in->end_pc;
	if (new_loc == in->loc)
		return NULL;
	if (in->em->n_rows >= CFI_MAX_ROWS_PER_FDE)
		return "too many rows in one FDE";
	row = to_row(&in->st, in->em->signal);
	if (emit_range(in->em, in->loc, new_loc, &row) < 0)
		return "stopped";
	in->loc = new_loc;
	return NULL;
}

static const char *advance_by(struct interp *in, uint64_t delta)
{
	uint64_t d;

	if (__builtin_mul_overflow(delta, in->cie->code_align, &d) || d > UINT64_MAX - in->loc)
		return "CFA advance overflows";
	return advance(in, in->loc + d);
}

static void set_reg(struct interp *in, uint64_t reg, uint8_t how, int64_t off)
{
	struct rule scratch, *ru = column(&in->st, in->cie, reg, &scratch);

	ru->how = how;
	ru->off = off;
	/* A column may be both rbp and the return address column. */
	if (reg == REG_RBP && ru != &in->st.fp)
		in->st.fp = *ru;
}

static void restore_reg(struct interp *in, uint64_t reg)
{
	struct rule unset = { R_UNSET, 0 };

	if (reg == in->cie->ra_reg)
		in->st.ra = in->init ? in->init->ra : unset;
	if (reg == REG_RBP)
		in->st.fp = in->init ? in->init->fp : unset;
}

/* Runs the instructions in [pos, end). NULL when they all ran, else why
 * they stopped (the caller marks the rest of the FDE unsupported). */
static const char *run(struct interp *in, uint64_t pos, uint64_t end)
{
	const struct cfi_section *sec = in->w->sec;
	const struct cie *c = in->cie;
	struct reader r = { sec->data, pos, end, false };
	const char *err = NULL;

	while (!err && r.pos < r.end) {
		uint8_t op = rd_u8(&r), low = op & 0x3f;
		uint64_t reg, u, len, loc;
		int64_t off;
		bool indirect;

		if (++in->n_insns > CFI_MAX_INSNS_PER_FDE)
			return "too many call frame instructions";
		switch (op & 0xc0) {
		case CFA_advance_loc:
			err = advance_by(in, low);
			continue;
		case CFA_offset:
			u = rd_uleb(&r);
			if (r.err)
				break;
			if (!factored(u, c->data_align, &off))
				return "CFA offset overflows";
			set_reg(in, low, R_OFFSET, off);
			continue;
		case CFA_restore:
			restore_reg(in, low);
			continue;
		default:
			break;
		}
		if (r.err)
			break;
		switch (op) {
		case CFA_nop:
			break;
		case CFA_set_loc:
			if (!rd_pointer(sec, &r, c->fde_enc, &loc, &indirect) || indirect)
				return r.err ? "truncated call frame instruction"
					     : "unusable DW_CFA_set_loc encoding";
			err = in->em ? advance(in, loc) : NULL;
			break;
		case CFA_advance_loc1:
			u = rd_fixed(&r, 1);
			if (!r.err)
				err = advance_by(in, u);
			break;
		case CFA_advance_loc2:
			u = rd_fixed(&r, 2);
			if (!r.err)
				err = advance_by(in, u);
			break;
		case CFA_advance_loc4:
			u = rd_fixed(&r, 4);
			if (!r.err)
				err = advance_by(in, u);
			break;
		case CFA_offset_extended:
		case CFA_GNU_negative_offset_extended:
			reg = rd_uleb(&r);
			u = rd_uleb(&r);
			if (r.err)
				break;
			if (!factored(u, c->data_align, &off))
				return "CFA offset overflows";
			set_reg(in, reg, R_OFFSET, op == CFA_offset_extended ? off : -off);
			break;
		case CFA_offset_extended_sf:
			reg = rd_uleb(&r);
			off = rd_sleb(&r);
			if (r.err)
				break;
			if (__builtin_mul_overflow(off, c->data_align, &off))
				return "CFA offset overflows";
			set_reg(in, reg, R_OFFSET, off);
			break;
		case CFA_restore_extended:
			reg = rd_uleb(&r);
			if (!r.err)
				restore_reg(in, reg);
			break;
		case CFA_undefined:
			reg = rd_uleb(&r);
			if (!r.err)
				set_reg(in, reg, R_UNDEF, 0);
			break;
		case CFA_same_value:
			reg = rd_uleb(&r);
			if (!r.err)
				set_reg(in, reg, R_SAME, 0);
			break;
		case CFA_register:
			reg = rd_uleb(&r);
			rd_uleb(&r);
			if (!r.err)
				set_reg(in, reg, R_OTHER, 0);
			break;
		case CFA_remember_state:
			if (in->depth >= CFI_MAX_STATE_DEPTH)
				return "DW_CFA_remember_state nested too deeply";
			in->stack[in->depth++] = in->st;
			break;
		case CFA_restore_state:
			if (in->depth == 0)
				return "DW_CFA_restore_state without a remembered state";
			in->st = in->stack[--in->depth];
			break;
		case CFA_def_cfa:
			reg = rd_uleb(&r);
			u = rd_uleb(&r);
			if (r.err)
				break;
			if (u > INT64_MAX)
				return "CFA offset overflows";
			in->st.cfa_how = CFA_REG;
			in->st.cfa_reg = reg;
			in->st.cfa_off = (int64_t)u;
			break;
		case CFA_def_cfa_sf:
			reg = rd_uleb(&r);
			off = rd_sleb(&r);
			if (r.err)
				break;
			if (__builtin_mul_overflow(off, c->data_align, &off))
				return "CFA offset overflows";
			in->st.cfa_how = CFA_REG;
			in->st.cfa_reg = reg;
			in->st.cfa_off = off;
			break;
		case CFA_def_cfa_register:
			reg = rd_uleb(&r);
			if (r.err)
				break;
			in->st.cfa_how = CFA_REG;
			in->st.cfa_reg = reg;
			break;
		case CFA_def_cfa_offset:
			u = rd_uleb(&r);
			if (r.err)
				break;
			if (u > INT64_MAX)
				return "CFA offset overflows";
			in->st.cfa_off = (int64_t)u;
			break;
		case CFA_def_cfa_offset_sf:
			off = rd_sleb(&r);
			if (r.err)
				break;
			if (__builtin_mul_overflow(off, c->data_align, &off))
				return "CFA offset overflows";
			in->st.cfa_off = off;
			break;
		case CFA_def_cfa_expression:
			len = rd_uleb(&r);
			if (r.err || len > r.end - r.pos) {
				r.err = true;
				break;
			}
			in->st.cfa_how = is_plt_expression(sec->data + r.pos, len) ? CFA_PLT
										    : CFA_EXPR;
			r.pos += len;
			break;
		case CFA_expression:
		case CFA_val_expression:
			reg = rd_uleb(&r);
			len = rd_uleb(&r);
			rd_skip(&r, len);
			if (!r.err)
				set_reg(in, reg, R_OTHER, 0);
			break;
		case CFA_val_offset:
			reg = rd_uleb(&r);
			rd_uleb(&r);
			if (!r.err)
				set_reg(in, reg, R_OTHER, 0);
			break;
		case CFA_val_offset_sf:
			reg = rd_uleb(&r);
			rd_sleb(&r);
			if (!r.err)
				set_reg(in, reg, R_OTHER, 0);
			break;
		case CFA_GNU_args_size:
			rd_uleb(&r);
			break;
		default:
			return "unknown call frame instruction";
		}
	}
	if (err)
		return err;
	return r.err ? "truncated call frame instruction" : NULL;
}

/* ---- FDEs ---- */

static const char *parse_fde(struct walk *w, uint64_t end, uint64_t id_pos, uint64_t id,
			     bool is64)
{
	const struct cfi_section *sec = w->sec;
	struct reader r = { sec->data, id_pos, end, false };
	const struct cie *c = NULL;
	struct state init;
	struct interp in;
	struct emitter em;
	uint64_t cie_pos, pc, range;
	bool indirect;
	const char *err;

	if (sec->kind == CFI_EH_FRAME) {
		/* Relative to the id field, backwards. */
		if (id > id_pos)
			return "CIE pointer before the section";
		cie_pos = id_pos - id;
		rd_skip(&r, 4);
	} else {
		cie_pos = id;
		rd_skip(&r, id_size(w, is64));
	}
	if (cie_pos >= sec->size)
		return "CIE pointer past the section";
	err = get_cie(w, cie_pos, &c);
	if (err)
		return err;
	if (!rd_pointer(sec, &r, c->fde_enc, &pc, &indirect))
		return r.err ? "truncated FDE" : "unusable FDE address encoding";
	if (indirect)
		return "indirect FDE address";
	if (!rd_range(sec, &r, c->fde_enc, &range))
		return "truncated FDE";
	if (c->has_z) {
		uint64_t aug_len = rd_uleb(&r);

		rd_skip(&r, aug_len);
	}
	if (r.err)
		return "truncated FDE";
	w->st.fdes++;
	/* Address 0 holds no code in a shared object or executable: such
	 * FDEs describe functions the linker discarded. */
	if (pc == 0 || range == 0)
		return NULL;
	if (range > UINT64_MAX - pc)
		return "FDE address range overflows";

	/* The CIE's initial instructions give the state at the FDE's start. */
	memset(&in, 0, sizeof(in));
	in.w = w;
	in.cie = c;
	err = run(&in, c->insn_pos, c->insn_end);
	if (err)
		return err;
	if (in.depth != 0)
		return "CIE leaves remembered states";
	init = in.st;
	in.init = &init;
	in.depth = 0;
	memset(&em, 0, sizeof(em));
	em.w = w;
	em.signal = c->signal;
	in.em = &em;
	in.loc = pc;
	in.end_pc = pc + range;
	err = run(&in, r.pos, end);
	if (w->emit_err)
		return "stopped";
	if (err) {
		/* The rest of the FDE is a rule we could not follow. */
		struct sonde_unwind_row row = { .cfa_kind = SONDE_CFA_UNSUPPORTED };

		w->last_error = err;
		if (emit_range(&em, in.loc, in.end_pc, &row) < 0 || flush(&em) < 0)
			return "stopped";
		return NULL;
	}
	if (advance(&in, in.end_pc) || flush(&em) < 0)
		return "stopped";
	return NULL;
}

int cfi_parse(const struct cfi_section *sec, cfi_emit_fn emit, void *ctx,
	      struct cfi_stats *stats, const char **reason)
{
	struct walk *w = NULL;
	uint64_t pos = 0, n_entries = 0;
	int ret = 0;

	if (sec->addr_size != 4 && sec->addr_size != 8)
		return -EINVAL;
	/* The CIE cache makes this too large for the stack of a fuzzer. */
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->sec = sec;
	w->emit = emit;
	w->ctx = ctx;
	while (pos < sec->size) {
		uint64_t end, id_pos, id;
		bool is64, term;
		struct reader r;
		const char *err;

		if (++n_entries > CFI_MAX_ENTRIES) {
			w->last_error = "too many CIEs and FDEs";
			break;
		}
		if (!entry_header(w, pos, &end, &id_pos, &is64, &term)) {
			if (!term) {
				w->st.bad_entries++;
				w->last_error = "CFI entry length past the end of the section";
			}
			break; /* a terminator, or nothing after it can be trusted */
		}
		r = (struct reader){ sec->data, id_pos, end, false };
		id = rd_fixed(&r, id_size(w, is64));
		if (r.err) {
			err = "CFI entry too short";
		} else if (is_cie_id(w, id, is64)) {
			const struct cie *c;

			/* Parsed here too, so a bad CIE is counted once. */
			err = get_cie(w, pos, &c);
		} else {
			err = parse_fde(w, end, id_pos, id, is64);
		}
		if (w->emit_err) {
			ret = w->emit_err;
			goto out;
		}
		if (err) {
			w->st.bad_entries++;
			w->last_error = err;
			if (!w->st.first_error)
				w->st.first_error = err;
		}
		pos = end;
	}
	if (!w->st.first_error)
		w->st.first_error = w->last_error;
	if (w->st.fdes == 0 && w->st.bad_entries > 0) {
		if (reason)
			*reason = w->st.first_error ? w->st.first_error : "malformed call frame information";
		ret = -EBADMSG;
	}
out:
	if (stats)
		*stats = w->st;
	free(w);
	return ret;
}

int cfi_read_pointer(const struct cfi_section *sec, uint64_t pos, uint8_t enc, uint64_t *ret,
		     uint64_t *ret_next)
{
	struct reader r = { sec->data, pos, sec->size, false };
	bool indirect;
	uint64_t v;

	if (pos > sec->size || (sec->addr_size != 4 && sec->addr_size != 8) || enc == PE_OMIT ||
	    !rd_pointer(sec, &r, enc, &v, &indirect) || indirect)
		return -EBADMSG;
	*ret = v;
	*ret_next = r.pos;
	return 0;
}
