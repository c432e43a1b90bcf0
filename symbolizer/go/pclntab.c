/* pclntab.c - reads Go's function table (see pclntab.h).
 *
 * Layout (Go 1.18+, runtime/symtab.go pcHeader and _func), all offsets
 * from the start of the section unless said otherwise:
 *   header: u32 magic, u8 pad, u8 pad, u8 minLC, u8 ptrSize,
 *           then ptrSize-wide: nfunc, nfiles, textStart, funcnameOffset,
 *           cuOffset, filetabOffset, pctabOffset, pclnOffset
 *   functab at pclnOffset: nfunc+1 pairs (u32 entryoff, u32 funcoff);
 *           entryoff is from textStart, funcoff from pclnOffset; the last
 *           entryoff is the end of the text
 *   _func:  u32 entryoff, i32 nameoff (into funcnametab), i32 args,
 *           u32 deferreturn, u32 pcsp, u32 pcfile, u32 pcln, u32 npcdata,
 *           u32 cuOffset (index into cutab), ..., u8 funcID, u8 flag
 *           (byte 37; 41 in Go 1.20+: TOPFRAME 1, SPWRITE 2)
 *   pcvalue tables at pctabOffset + pcfile/pcln: pairs of varints
 *           (zigzag value delta, pc delta * minLC), the value starting at
 *           -1 and the pc at the function's entry; a value delta of 0
 *           after the first pair ends the table
 *   file names: cutab[cuOffset + file] is an offset into filetab, where
 *           the name is NUL-terminated
 * Go 1.20+ (magic 0xfffffff1) also has, in _func: i32 startLine at 36,
 * u8 nfuncdata at 43, then npcdata u32 pcdata offsets (into pctab) from
 * 44, then nfuncdata u32 funcdata offsets (from moduledata.gofunc;
 * 0xffffffff: none). pcdata[2] (PCDATA_InlTreeIndex) maps each pc to a
 * node of the inline tree at funcdata[3] (FUNCDATA_InlTree), or -1; a node
 * is 16 bytes: u8 funcID, 3 pad, i32 nameOff (into funcnametab), i32
 * parentPc (from the entry: an instruction at the call site, whose own
 * tree index is the node's parent and whose file:line is the call's),
 * i32 startLine. moduledata (runtime/symtab.go) starts with the pcHeader
 * pointer and the funcnametab slice; gofunc is its word 40 (byte 320).
 * Go 1.19 (magic 0xfffffff0): no startLine, so nfuncdata is at 39 and
 * pcdata starts at 40; a node is 20 bytes (i16 parent, u8 funcID, pad,
 * i32 file, i32 line, i32 nameOff at 12, i32 parentPc at 16); moduledata
 * has no coverage counters, so gofunc is word 38 (byte 304). The runtime
 * walks both the same way: name from the node, caller from parentPc.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pclntab.h"

#define HEADER_SIZE (8 + 8 * 8)
#define FUNC_MIN_SIZE 36
#define MAGIC_GO118 0xfffffff0u
#define MAGIC_GO120 0xfffffff1u
#define PCDATA_INLTREE 2
#define FUNCDATA_INLTREE 3
#define MODULEDATA_GOFUNC_GO119 304
#define MODULEDATA_GOFUNC_GO120 320
#define FLAG_GO118 37 /* _func.flag: after funcID */
#define FLAG_GO120 41
#define FUNCFLAG_ASM 4 /* written in assembly (Go 1.19+) */
#define SYSTEMSTACK "runtime.systemstack"
#define ASMCGOCALL "runtime.asmcgocall"

/* What differs between the layouts with inline trees read here. */
struct inline_layout {
	size_t func_size;  /* _func up to pcdata */
	size_t nfuncdata;  /* its byte */
	size_t node_size;
	size_t node_name;  /* nameOff in a node */
	size_t node_parent_pc;
};
static const struct inline_layout layout_go119 = { 40, 39, 20, 12, 16 };
static const struct inline_layout layout_go120 = { 44, 43, 16, 4, 8 };
#define MAX_PCDATA 1024u

struct tab {
	const uint8_t *p;
	size_t size;
	uint64_t text;
	uint8_t quantum;
	bool go120;
	uint64_t nfunc, funcname, cu, filetab, pctab, pcln;
	size_t steps;
	/* Inline trees: where they are (NULL: not read), the steps spent on
	 * them, and which nodes of the current function were reported
	 * (seen[i] == gen). */
	const struct pclntab_funcdata *fd;
	const struct inline_layout *layout;
	size_t inline_steps;
	uint32_t *seen, gen;
};

static uint32_t u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t u64(const uint8_t *p)
{
	return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32;
}

/* A NUL-terminated string at base + off inside the table; NULL if not. */
static const char *str_at(const struct tab *t, uint64_t base, uint64_t off, size_t *ret_len)
{
	const uint8_t *nul;

	if (base > t->size || off >= t->size - base)
		return NULL;
	nul = memchr(t->p + base + off, 0, t->size - base - off);
	if (!nul)
		return NULL;
	*ret_len = (size_t)(nul - (t->p + base + off));
	return (const char *)t->p + base + off;
}

struct pcv {
	const uint8_t *p, *end;
	uint64_t pc;
	int32_t val;
	bool first, done;
};

static bool varint(struct pcv *v, uint32_t *ret)
{
	uint32_t x = 0;

	for (unsigned shift = 0; shift < 35; shift += 7) {
		uint8_t b;

		if (v->p >= v->end)
			return false;
		b = *v->p++;
		x |= (uint32_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*ret = x;
			return true;
		}
	}
	return false;
}

/* One step: afterwards val holds for [*ret_from, v->pc). false at the
 * end or on damage (v->done). */
static bool step(struct tab *t, struct pcv *v, uint64_t *ret_from)
{
	uint32_t uvdelta, pcdelta;

	if (v->done || ++t->steps > PCLNTAB_MAX_STEPS)
		goto end;
	if (!varint(v, &uvdelta) || (uvdelta == 0 && !v->first))
		goto end;
	if (!varint(v, &pcdelta))
		goto end;
	v->first = false;
	/* Go adds in int32 and wraps; signed overflow is undefined in C,
	 * so add unsigned (a damaged table found it: fuzz corpus). */
	v->val = (int32_t)((uint32_t)v->val + (-(uvdelta & 1) ^ (uvdelta >> 1)));
	*ret_from = v->pc;
	v->pc += (uint64_t)pcdelta * t->quantum;
	return true;
end:
	v->done = true;
	return false;
}

static bool pcv_init(const struct tab *t, struct pcv *v, uint32_t off, uint64_t entry)
{
	memset(v, 0, sizeof(*v));
	if (off == 0 || t->pctab > t->size || off >= t->size - t->pctab)
		return false;
	v->p = t->p + t->pctab + off;
	v->end = t->p + t->size;
	v->pc = entry;
	v->val = -1;
	v->first = true;
	return true;
}

static const char *file_name(const struct tab *t, uint32_t cu_off, int32_t fileno, size_t *ret_len)
{
	uint64_t idx;

	if (fileno < 0)
		return NULL;
	idx = (uint64_t)cu_off + (uint64_t)fileno;
	if (t->cu > t->size || idx >= (t->size - t->cu) / 4)
		return NULL;
	return str_at(t, t->filetab, u32(t->p + t->cu + idx * 4), ret_len);
}

/* step(), counted as inline work, never against the rows' budget. */
static bool step_inline(struct tab *t, struct pcv *v, uint64_t *ret_from)
{
	size_t before = t->steps;
	bool more = step(t, v, ret_from);

	t->inline_steps += t->steps - before;
	t->steps = before;
	return more;
}

/* The value of table off (into pctab) at pc, in a function at entry:
 * *ret, or false if pc is not covered or the table is damaged. */
static bool value_at(struct tab *t, uint32_t off, uint64_t entry, uint64_t pc, int32_t *ret)
{
	uint64_t from;
	struct pcv v;

	if (!pcv_init(t, &v, off, entry))
		return false;
	while (step_inline(t, &v, &from)) {
		if (pc < from)
			return false;
		if (pc < v.pc) {
			*ret = v.val;
			return true;
		}
	}
	return false;
}

struct func_tables {
	uint64_t entry, end;
	uint32_t pcfile, pcln, cu_off, inltree_pc;
	uint64_t tree; /* offset of the inline tree in fd->data */
};

/* Reports node (its ancestors first) once per function. */
static int report_node(struct tab *t, const struct pclntab_sink *sink, const struct func_tables *ft,
		       int32_t node, unsigned depth)
{
	const char *name, *file = NULL;
	size_t name_len = 0, file_len = 0;
	int32_t parent = -1, fileno = -1, line = 0;
	uint64_t call_pc, at;
	const uint8_t *n;
	int r;

	if (node < 0 || (uint32_t)node >= PCLNTAB_MAX_INLINE_NODES || depth > PCLNTAB_MAX_INLINE_DEPTH)
		return -EBADMSG;
	if (t->seen[node] == t->gen)
		return 0;
	if (t->inline_steps > PCLNTAB_MAX_INLINE_STEPS)
		return -E2BIG;
	at = ft->tree + (uint64_t)node * t->layout->node_size;
	if (at > t->fd->size || t->layout->node_size > t->fd->size - at)
		return -EBADMSG;
	n = t->fd->data + at;
	name = str_at(t, t->funcname, u32(n + t->layout->node_name), &name_len);
	call_pc = ft->entry + (uint64_t)(int64_t)(int32_t)u32(n + t->layout->node_parent_pc);
	if (!name || !name_len || call_pc < ft->entry || call_pc >= ft->end)
		return -EBADMSG;
	if (!value_at(t, ft->inltree_pc, ft->entry, call_pc, &parent) || parent < 0)
		parent = -1;
	if (parent == node)
		return -EBADMSG;
	if (parent >= 0) {
		r = report_node(t, sink, ft, parent, depth + 1);
		if (r < 0)
			return r;
	}
	if (value_at(t, ft->pcfile, ft->entry, call_pc, &fileno))
		file = file_name(t, ft->cu_off, fileno, &file_len);
	if (!value_at(t, ft->pcln, ft->entry, call_pc, &line) || line < 0)
		line = 0;
	r = sink->inline_call(sink->ctx, node, parent, name, name_len, file, file_len,
			      (uint32_t)line);
	if (r < 0)
		return r;
	t->seen[node] = t->gen;
	return 0;
}

/* The inlined calls of one function f (avail bytes of the table from f
 * on, at least t->layout->func_size). -EBADMSG: its tree is damaged (the
 * caller drops only its inlined calls); -E2BIG past the step cap; or a
 * sink's error. */
static int func_inlines(struct tab *t, const struct pclntab_sink *sink, const uint8_t *f,
			size_t avail, const struct func_tables *ft0)
{
	const struct inline_layout *l = t->layout;
	struct func_tables ft = *ft0;
	uint32_t npcdata = u32(f + 28), nfuncdata = f[l->nfuncdata], fdoff;
	uint64_t from;
	struct pcv v;
	int r;

	if (npcdata <= PCDATA_INLTREE || nfuncdata <= FUNCDATA_INLTREE || npcdata > MAX_PCDATA ||
	    l->func_size + 4 * ((size_t)npcdata + nfuncdata) > avail)
		return 0;
	ft.inltree_pc = u32(f + l->func_size + 4 * PCDATA_INLTREE);
	fdoff = u32(f + l->func_size + 4 * (size_t)npcdata + 4 * FUNCDATA_INLTREE);
	if (ft.inltree_pc == 0 || fdoff == UINT32_MAX)
		return 0;
	if (t->fd->gofunc + fdoff < t->fd->addr || t->fd->gofunc + fdoff - t->fd->addr >= t->fd->size)
		return -EBADMSG;
	ft.tree = t->fd->gofunc + fdoff - t->fd->addr;
	if (++t->gen == 0) { /* wrapped: forget every old mark */
		memset(t->seen, 0, PCLNTAB_MAX_INLINE_NODES * sizeof(*t->seen));
		t->gen = 1;
	}
	if (!pcv_init(t, &v, ft.inltree_pc, ft.entry))
		return -EBADMSG;
	for (;;) {
		if (!step_inline(t, &v, &from) || from >= ft.end)
			break;
		if (v.val < 0 || v.pc <= from)
			continue;
		r = report_node(t, sink, &ft, v.val, 0);
		if (r < 0)
			return r;
		r = sink->inline_range(sink->ctx, from, v.pc < ft.end ? v.pc : ft.end, v.val);
		if (r < 0)
			return r;
		if (t->inline_steps > PCLNTAB_MAX_INLINE_STEPS)
			return -E2BIG;
	}
	return 0;
}

/* Rows of one function: merges its line and file tables, reporting a row
 * wherever either changes. */
static int func_rows(struct tab *t, const struct pclntab_sink *sink, uint64_t entry, uint64_t end,
		     uint32_t pcfile, uint32_t pcln, uint32_t cu_off)
{
	struct pcv lv, fv;
	uint64_t lfrom = 0, ffrom = 0, pc = entry;
	bool lok, fok;
	int r;

	if (!pcv_init(t, &lv, pcln, entry))
		return 0;
	fok = pcv_init(t, &fv, pcfile, entry) && step(t, &fv, &ffrom);
	lok = step(t, &lv, &lfrom);
	while (lok && pc < end) {
		size_t flen = 0;
		const char *file;

		/* The file table segment that holds pc. */
		while (fok && fv.pc <= pc)
			fok = step(t, &fv, &ffrom);
		file = fok && ffrom <= pc ? file_name(t, cu_off, fv.val, &flen) : NULL;
		r = sink->row(sink->ctx, pc, file, flen, lv.val < 0 ? 0 : (uint32_t)lv.val);
		if (r < 0)
			return r;
		/* Next change: the end of this line segment or of the file
		 * segment, whichever comes first. */
		{
			uint64_t next = lv.pc;

			if (fok && fv.pc < next)
				next = fv.pc;
			if (next <= pc)
				break; /* no progress: damaged */
			pc = next;
		}
		if (pc >= lv.pc)
			lok = step(t, &lv, &lfrom);
	}
	return sink->end(sink->ctx, end);
}

int pclntab_read(const uint8_t *data, size_t size, uint64_t text_addr,
		 const struct pclntab_sink *sink)
{
	return pclntab_read_inlined(data, size, text_addr, NULL, sink);
}

int pclntab_find_gofunc(const uint8_t *tab, size_t tab_size, uint64_t tab_addr,
			const uint8_t *data, size_t size, bool go119, uint64_t *ret)
{
	uint64_t funcnametab;
	size_t at;

	if (!tab || tab_size < HEADER_SIZE || !data)
		return -ENOENT;
	if (u32(tab) == MAGIC_GO120)
		at = MODULEDATA_GOFUNC_GO120;
	else if (u32(tab) == MAGIC_GO118 && go119)
		at = MODULEDATA_GOFUNC_GO119;
	else
		return -ENOENT;
	funcnametab = tab_addr + u64(tab + 32);
	for (size_t off = 0; off + at + 8 <= size; off += 8)
		if (u64(data + off) == tab_addr && u64(data + off + 8) == funcnametab) {
			*ret = u64(data + off + at);
			return 0;
		}
	return -ENOENT;
}

/* Checks the header and fills t's offsets (t->p and t->size set).
 * Returns 0, -EBADMSG or -E2BIG. */
static int tab_open(struct tab *t, uint64_t text_addr)
{
	const uint8_t *data = t->p;
	uint32_t magic;
	uint64_t functab_bytes;

	if (!data || t->size < HEADER_SIZE)
		return -EBADMSG;
	magic = u32(data);
	if ((magic != MAGIC_GO118 && magic != MAGIC_GO120) || data[4] || data[5] || data[7] != 8)
		return -EBADMSG;
	t->go120 = magic == MAGIC_GO120;
	t->quantum = data[6];
	if (t->quantum == 0 || t->quantum > 16)
		return -EBADMSG;
	t->nfunc = u64(data + 8);
	t->text = u64(data + 24);
	t->funcname = u64(data + 32);
	t->cu = u64(data + 40);
	t->filetab = u64(data + 48);
	t->pctab = u64(data + 56);
	t->pcln = u64(data + 64);
	if (!t->text)
		t->text = text_addr;
	if (t->nfunc > PCLNTAB_MAX_FUNCS)
		return -E2BIG;
	functab_bytes = (t->nfunc + 1) * 8;
	if (t->pcln > t->size || functab_bytes > t->size - t->pcln || t->funcname > t->size ||
	    t->cu > t->size || t->filetab > t->size || t->pctab > t->size)
		return -EBADMSG;
	return 0;
}

/* Function i of the function table: its _func (*ret_f, with *ret_avail
 * bytes of the table from it on) and range. Returns 0, 1 to skip it (out
 * of order, or a _func that does not match), or -EBADMSG. */
static int func_at(const struct tab *t, uint64_t i, const uint8_t **ret_f, size_t *ret_avail,
		   uint64_t *ret_entry, uint64_t *ret_end)
{
	const uint8_t *ft = t->p + t->pcln + i * 8;
	uint64_t entry = t->text + u32(ft), end = t->text + u32(ft + 8);
	uint64_t foff = u32(ft + 4);

	if (t->pcln + foff > t->size || FUNC_MIN_SIZE > t->size - t->pcln - foff)
		return -EBADMSG;
	*ret_f = t->p + t->pcln + foff;
	*ret_avail = t->size - t->pcln - foff;
	*ret_entry = entry;
	*ret_end = end;
	return end <= entry || t->text + u32(*ret_f) != entry ? 1 : 0;
}

int pclntab_read_inlined(const uint8_t *data, size_t size, uint64_t text_addr,
			 const struct pclntab_funcdata *fd, const struct pclntab_sink *sink)
{
	struct tab t = { .p = data, .size = size, .fd = fd };
	int r;

	r = tab_open(&t, text_addr);
	if (r < 0)
		return r;
	if (fd && t.go120)
		t.layout = &layout_go120;
	else if (fd && fd->go119)
		t.layout = &layout_go119;
	if (!t.layout || !fd->data || !sink->inline_call || !sink->inline_range)
		t.fd = NULL;
	if (t.fd && !(t.seen = calloc(PCLNTAB_MAX_INLINE_NODES, sizeof(*t.seen))))
		return -ENOMEM;
	for (uint64_t i = 0; i < t.nfunc; i++) {
		const uint8_t *f;
		const char *name;
		size_t name_len = 0, avail;
		uint64_t entry, end;

		r = func_at(&t, i, &f, &avail, &entry, &end);
		if (r < 0)
			goto out;
		if (r > 0)
			continue;
		name = str_at(&t, t.funcname, (uint32_t)u32(f + 4), &name_len);
		if (!name || !name_len)
			continue;
		r = sink->func(sink->ctx, entry, end, name, name_len);
		if (r < 0)
			goto out;
		if (!sink->row)
			continue; /* functions only */
		r = func_rows(&t, sink, entry, end, u32(f + 20), u32(f + 24), u32(f + 32));
		if (r < 0)
			goto out;
		if (t.steps > PCLNTAB_MAX_STEPS) {
			r = -E2BIG;
			goto out;
		}
		if (t.fd && avail >= t.layout->func_size) {
			struct func_tables ft = { .entry = entry, .end = end, .pcfile = u32(f + 20),
						  .pcln = u32(f + 24), .cu_off = u32(f + 32) };

			r = func_inlines(&t, sink, f, avail, &ft);
			if (r == -E2BIG)
				t.fd = NULL; /* the rest without inlined calls */
			else if (r < 0 && r != -EBADMSG)
				goto out;
		}
	}
	r = 0;
out:
	free(t.seen);
	return r;
}

int pclntab_locate(const uint8_t *data, size_t size, size_t *ret_off)
{
	for (size_t off = 0; size >= HEADER_SIZE && off <= size - HEADER_SIZE; off += 8) {
		const uint8_t *h = data + off;
		struct tab t = { .p = h, .size = size - off };
		const uint8_t *f;
		uint64_t entry, end;
		size_t avail;

		if ((u32(h) != MAGIC_GO118 && u32(h) != MAGIC_GO120) || h[4] || h[5] || h[7] != 8)
			continue;
		/* A header whose offsets fit, and whose first function's _func
		 * says the entry its function table entry says. */
		if (tab_open(&t, 1) == 0 && t.nfunc > 0 && func_at(&t, 0, &f, &avail, &entry, &end) == 0) {
			*ret_off = off;
			return 0;
		}
	}
	return -ENOENT;
}

/* Whether a table name (len bytes, NULL: unreadable) is want. */
static bool name_is(const char *name, size_t len, const char *want)
{
	return name && len == strlen(want) && memcmp(name, want, len) == 0;
}

int pclntab_read_frames(const uint8_t *data, size_t size, uint64_t text_addr,
			const struct pclntab_frame_sink *sink)
{
	struct tab t = { .p = data, .size = size };
	int r;

	r = tab_open(&t, text_addr);
	if (r < 0)
		return r;
	for (uint64_t i = 0; i < t.nfunc; i++) {
		size_t flag_at = t.go120 ? FLAG_GO120 : FLAG_GO118, avail;
		const uint8_t *f;
		uint64_t entry, end, from;
		unsigned flags;
		struct pcv v;

		r = func_at(&t, i, &f, &avail, &entry, &end);
		if (r < 0)
			return r;
		if (r > 0 || avail <= flag_at)
			continue;
		flags = f[flag_at] & (PCLNTAB_FUNC_TOPFRAME | PCLNTAB_FUNC_SPWRITE);
		/* By name, among assembly functions: asmcgocall's ABI
		 * wrapper, an ordinary Go function, has the same name. */
		if (f[flag_at] & FUNCFLAG_ASM) {
			size_t name_len;
			const char *name = str_at(&t, t.funcname, u32(f + 4), &name_len);

			if (name_is(name, name_len, SYSTEMSTACK))
				flags |= PCLNTAB_FUNC_SYSTEMSTACK;
			if (name_is(name, name_len, ASMCGOCALL))
				flags |= PCLNTAB_FUNC_ASMCGOCALL;
		}
		if (!pcv_init(&t, &v, u32(f + 16), entry))
			continue; /* no SP table: nothing known */
		while (step(&t, &v, &from) && from < end) {
			uint64_t hi = v.pc < end ? v.pc : end;

			if (hi <= from)
				continue;
			r = sink->frame(sink->ctx, from, hi, v.val, flags);
			if (r < 0)
				return r;
		}
		if (t.steps > PCLNTAB_MAX_STEPS)
			return -E2BIG;
	}
	return 0;
}
