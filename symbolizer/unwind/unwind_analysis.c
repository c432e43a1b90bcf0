/* unwind_analysis.c - the resumable unwind table compiler over a sparse
 * file image (see unwind_analysis.h).
 *
 * Like elf_analysis.c the step is stateless: each call re-derives the
 * layout from the bytes present (elf_sections), asks for the CFI sections
 * it lacks, and compiles once they are all there. Files without section
 * headers find .eh_frame through PT_GNU_EH_FRAME (.eh_frame_hdr's
 * eh_frame_ptr); its size is then unknown, so the rest of the containing
 * PT_LOAD's file part is read and the parser stops at the terminator.
 * Compressed sections (SHF_COMPRESSED, zlib) are inflated up to
 * UNWIND_MAX_SECTION.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <elf.h>
#include <zlib.h>

#include "buildinfo.h"
#include "pclntab.h"
#include "relative.h"
#include "unwind_analysis.h"

enum {
	SEC_EH_FRAME,
	SEC_EH_FRAME_HDR,
	SEC_DEBUG_FRAME,
	SEC_PLT,
	SEC_PLT_SEC,
	SEC_PLT_GOT,
	SEC_TEXT,
	SEC_GOT,
	SEC_GOPCLNTAB,
	SEC_GOPCLNTAB_PIE,
	SEC_GO_BUILDINFO,
	SEC_DATA_REL_RO,
	SEC_RELA_DYN,
	N_SECTIONS,
};

static const char *const section_names[N_SECTIONS] = {
	".eh_frame", ".eh_frame_hdr", ".debug_frame", ".plt", ".plt.sec", ".plt.got", ".text", ".got",
	PCLNTAB_SECTION, PCLNTAB_SECTION_PIE, ".go.buildinfo", ".data.rel.ro", ".rela.dyn",
};

#define PLT_ENTRY 16
#define PLT0_PUSH_END 6 /* push GOT+8(%rip) is 6 bytes */

struct convert {
	struct unwind_builder *b;
	const struct elf_layout *layout;
	enum unwind_source src;
};

/* Adds [start, end) (vaddrs) as the parts that PT_LOAD file contents
 * cover, at their file offsets. */
static int add_vaddr_range(void *ctx, uint64_t start, uint64_t end,
			   const struct sonde_unwind_row *row)
{
	struct convert *cv = ctx;

	for (size_t i = 0; i < cv->layout->n_segments; i++) {
		const struct elf_segment *s = &cv->layout->segments[i];
		uint64_t lo, hi, off_lo, off_hi;
		int err;

		if (s->type != PT_LOAD || s->filesz == 0)
			continue;
		/* elf_sections checked that vaddr + memsz does not overflow. */
		lo = start > s->vaddr ? start : s->vaddr;
		hi = end < s->vaddr + s->filesz ? end : s->vaddr + s->filesz;
		if (lo >= hi)
			continue;
		off_lo = lo - s->vaddr + s->offset;
		off_hi = hi - s->vaddr + s->offset;
		if (off_lo >= (1ull << 32))
			continue;
		if (off_hi > (1ull << 32))
			off_hi = 1ull << 32;
		err = unwind_builder_add(cv->b, off_lo, off_hi, row, cv->src);
		if (err == -E2BIG || err == -ENOMEM)
			return err;
	}
	return 0;
}

/* File offset of vaddr inside a PT_LOAD's file part, and how many file
 * bytes of that segment follow it. */
static bool vaddr_to_offset(const struct elf_layout *l, uint64_t vaddr, uint64_t *ret_off,
			    uint64_t *ret_avail)
{
	for (size_t i = 0; i < l->n_segments; i++) {
		const struct elf_segment *s = &l->segments[i];

		if (s->type == PT_LOAD && vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz) {
			*ret_off = vaddr - s->vaddr + s->offset;
			*ret_avail = s->filesz - (vaddr - s->vaddr);
			return true;
		}
	}
	return false;
}

/* Where a CFI section's bytes are: a section, or (section-less files)
 * the range found through .eh_frame_hdr. */
struct source {
	bool present;
	uint64_t offset, size, addr;
	bool compressed;
};

static bool want(const struct file_image *img, struct elf_need *need, const struct source *s)
{
	if (!s->present || s->size == 0 || file_image_has(img, s->offset, s->size))
		return true;
	elf_need_add(need, s->offset, s->size);
	return false;
}

static void from_section(struct source *s, const struct elf_section *sec)
{
	memset(s, 0, sizeof(*s));
	if (!sec->found || sec->type == SHT_NOBITS || sec->size == 0 ||
	    sec->size > UNWIND_MAX_SECTION)
		return;
	*s = (struct source){ true, sec->offset, sec->size, sec->addr,
			      (sec->flags & SHF_COMPRESSED) != 0 };
}

/* Inflates a SHF_COMPRESSED (ELFCOMPRESS_ZLIB) section. NULL if it is
 * not one we can inflate within UNWIND_MAX_SECTION. */
static uint8_t *inflate_section(const uint8_t *p, uint64_t size, uint64_t *ret_size)
{
	uint32_t type;
	uint64_t out_size;
	uLongf dest_len;
	uint8_t *out;

	if (size < sizeof(Elf64_Chdr))
		return NULL;
	memcpy(&type, p, 4);
	memcpy(&out_size, p + 8, 8);
	if (type != ELFCOMPRESS_ZLIB || out_size == 0 || out_size > UNWIND_MAX_SECTION)
		return NULL;
	out = malloc(out_size);
	if (!out)
		return NULL;
	dest_len = (uLongf)out_size;
	if (uncompress(out, &dest_len, p + sizeof(Elf64_Chdr),
		       (uLong)(size - sizeof(Elf64_Chdr))) != Z_OK ||
	    dest_len != out_size) {
		free(out);
		return NULL;
	}
	*ret_size = out_size;
	return out;
}

static int parse_source(const uint8_t *data, const struct source *s, enum cfi_kind kind,
			const struct elf_section *secs, struct convert *cv,
			struct cfi_stats *stats)
{
	struct cfi_section sec = {
		.data = data + s->offset, .size = s->size, .addr = s->addr,
		.text_addr = secs[SEC_TEXT].found ? secs[SEC_TEXT].addr : 0,
		.data_addr = secs[SEC_GOT].found ? secs[SEC_GOT].addr : 0,
		.kind = kind, .addr_size = 8,
	};
	uint8_t *inflated = NULL;
	int err;

	if (s->compressed) {
		uint64_t n;

		inflated = inflate_section(sec.data, sec.size, &n);
		if (!inflated)
			return 0; /* unusable: as if absent */
		sec.data = inflated;
		sec.size = n;
	}
	err = cfi_parse(&sec, add_vaddr_range, cv, stats, NULL);
	free(inflated);
	/* A section with nothing usable only contributes nothing. */
	return err == -EBADMSG ? 0 : err;
}

struct go_convert {
	struct convert *cv;
	uint64_t n_spans;
	uint32_t curg_off; /* go_m_curg_offset(); 0: unknown */
	uint32_t g_slot;   /* go_asmcgocall_g_slot(); 0: unknown */
};

/* A Go function's frame at one point: the return address is at the
 * entry's SP, so CFA = SP + sp_delta + 8; a function with a frame saved
 * the caller's rbp just below the return address (Go's prologue, with
 * frame pointers on since Go 1.7). docs/unwind-tables.md has the cases
 * where that is not exact. */
static int add_go_frame(void *ctx, uint64_t lo, uint64_t hi, int32_t sp_delta, unsigned flags)
{
	struct sonde_unwind_row row = { .cfa_kind = SONDE_CFA_UNSUPPORTED };
	struct go_convert *gc = ctx;
	/* systemstack (m.curg's offset) and asmcgocall (g's slot) switch to
	 * g0; 0: this Go version's layout is unknown. */
	uint32_t switch_off = (flags & PCLNTAB_FUNC_SYSTEMSTACK) ? gc->curg_off :
			      (flags & PCLNTAB_FUNC_ASMCGOCALL)  ? gc->g_slot : 0;

	if (switch_off && sp_delta >= 0 && sp_delta <= SONDE_GO_MAX_SWITCH_FRAME) {
		/* The walk goes on with the goroutine that asked for the
		 * system stack or called C, as Go's own profiler does for
		 * systemstack. The SP table does not see the switch: its
		 * offset after it is the frame the function has on the
		 * goroutine's stack. */
		row.cfa_kind = (flags & PCLNTAB_FUNC_SYSTEMSTACK) ? SONDE_CFA_GO_SYSTEMSTACK :
								    SONDE_CFA_GO_ASMCGOCALL;
		row.cfa_off = (int32_t)switch_off;
		row.fp_off = (int16_t)sp_delta;
	} else if (flags & (PCLNTAB_FUNC_TOPFRAME | PCLNTAB_FUNC_SPWRITE)) {
		/* The outermost frame (runtime.goexit, mstart, rt0_go), or one
		 * that switched stacks (mcall and morestack, which never
		 * return to the goroutine's code, systemstack and asmcgocall
		 * in a Go version whose layout we do not know); Go's own
		 * profiler stops at those too. */
		row.cfa_kind = SONDE_CFA_STOP;
	} else if (sp_delta >= 0 && sp_delta < INT32_MAX - 8) {
		row.cfa_kind = SONDE_CFA_SP;
		row.cfa_off = sp_delta + 8;
		if (sp_delta > 0) {
			row.fp_kind = SONDE_FP_AT_CFA;
			row.fp_off = -16;
		}
	}
	gc->n_spans++;
	return add_vaddr_range(gc->cv, lo, hi, &row);
}

/* Go's table at p (size bytes, or the rest of a section holding it);
 * text: where Go's text starts when the header says 0 (PIE). */
static int read_go_frames(const uint8_t *p, uint64_t size, uint64_t text, const char *ver,
			  struct convert *cv, uint64_t *ret_spans)
{
	struct go_convert gc = { cv, 0, go_m_curg_offset(ver), go_asmcgocall_g_slot(ver) };
	struct pclntab_frame_sink sink = { add_go_frame, &gc };
	int err;

	cv->src = UNWIND_SRC_GOPCLNTAB;
	err = pclntab_read_frames(p, size, text, &sink);
	*ret_spans = gc.n_spans;
	/* A damaged table keeps what it gave before the damage. */
	return err == -EBADMSG ? 0 : err;
}

/* A cgo PIE linked by the system linker: the table lies inside
 * .data.rel.ro, its text start in a relocation (relative.h). */
static int parse_embedded_gopclntab(const uint8_t *data, const struct source *relro,
				    const struct source *rela, const char *ver,
				    struct convert *cv, uint64_t *ret_spans)
{
	uint64_t text;
	size_t off;

	if (relro->compressed || rela->compressed ||
	    pclntab_locate_relocated(data + relro->offset, relro->size, relro->addr,
				     data + rela->offset, rela->size, &off, &text) < 0)
		return 0;
	return read_go_frames(data + relro->offset + off, relro->size - off, text, ver, cv,
			      ret_spans);
}

/* .plt sections that no FDE describes (older or unusual linkers): the
 * classic lazy PLT is SONDE_CFA_PLT after PLT0, whose own rule is known;
 * .plt.sec/.plt.got entries are a single indirect jump. */
static int add_plt_rules(const struct elf_section *secs, struct convert *cv, uint64_t *n_spans)
{
	const struct elf_section *plt = &secs[SEC_PLT];
	struct sonde_unwind_row sp16 = { .cfa_kind = SONDE_CFA_SP, .cfa_off = 16 };
	struct sonde_unwind_row sp24 = { .cfa_kind = SONDE_CFA_SP, .cfa_off = 24 };
	struct sonde_unwind_row sp8 = { .cfa_kind = SONDE_CFA_SP, .cfa_off = 8 };
	struct sonde_unwind_row pltrow = { .cfa_kind = SONDE_CFA_PLT };
	int err = 0;

	cv->src = UNWIND_SRC_SYNTHETIC;
	if (plt->found && (plt->flags & SHF_EXECINSTR) && plt->size >= PLT_ENTRY &&
	    plt->addr <= UINT64_MAX - plt->size) {
		err = add_vaddr_range(cv, plt->addr, plt->addr + PLT0_PUSH_END, &sp16);
		if (!err)
			err = add_vaddr_range(cv, plt->addr + PLT0_PUSH_END, plt->addr + PLT_ENTRY,
					      &sp24);
		if (!err && plt->size > PLT_ENTRY)
			err = add_vaddr_range(cv, plt->addr + PLT_ENTRY, plt->addr + plt->size,
					      &pltrow);
		*n_spans += 3;
	}
	for (int k = SEC_PLT_SEC; !err && k <= SEC_PLT_GOT; k++) {
		const struct elf_section *s = &secs[k];

		if (!s->found || !(s->flags & SHF_EXECINSTR) || s->size == 0 ||
		    s->addr > UINT64_MAX - s->size)
			continue;
		err = add_vaddr_range(cv, s->addr, s->addr + s->size, &sp8);
		(*n_spans)++;
	}
	return err;
}

/* For a file without section headers: .eh_frame through PT_GNU_EH_FRAME.
 * Returns false while the header is missing (asked for in need). */
static bool find_by_eh_frame_hdr(const struct file_image *img, struct elf_need *need,
				 const struct elf_layout *l, struct source *hdr,
				 struct source *eh, uint64_t *ret_fdes)
{
	const uint8_t *data = file_image_data(img);

	memset(hdr, 0, sizeof(*hdr));
	memset(eh, 0, sizeof(*eh));
	for (size_t i = 0; i < l->n_segments; i++) {
		const struct elf_segment *s = &l->segments[i];

		if (s->type == PT_GNU_EH_FRAME && s->filesz >= 8 && s->filesz <= UNWIND_MAX_SECTION) {
			*hdr = (struct source){ true, s->offset, s->filesz, s->vaddr, false };
			break;
		}
	}
	if (!hdr->present)
		return true;
	if (!want(img, need, hdr))
		return false;
	{
		struct cfi_section sec = { .data = data + hdr->offset, .size = hdr->size,
					   .addr = hdr->addr, .data_addr = hdr->addr,
					   .kind = CFI_EH_FRAME, .addr_size = 8 };
		const uint8_t *h = sec.data;
		uint64_t ptr, next, count, off, avail;

		if (h[0] != 1 || cfi_read_pointer(&sec, 4, h[1], &ptr, &next) < 0)
			return true; /* unusable header: no .eh_frame */
		if (h[2] != 0xff && cfi_read_pointer(&sec, next, h[2], &count, &next) == 0)
			*ret_fdes = count;
		if (!vaddr_to_offset(l, ptr, &off, &avail))
			return true;
		if (avail > UNWIND_MAX_SECTION)
			avail = UNWIND_MAX_SECTION;
		*eh = (struct source){ true, off, avail, ptr, false };
	}
	return true;
}

static uint64_t hdr_fde_count(const uint8_t *data, const struct source *hdr)
{
	struct cfi_section sec = { .data = data + hdr->offset, .size = hdr->size,
				   .addr = hdr->addr, .data_addr = hdr->addr,
				   .kind = CFI_EH_FRAME, .addr_size = 8 };
	uint64_t ptr, next, count;

	if (hdr->size < 8 || sec.data[0] != 1 || sec.data[2] == 0xff ||
	    cfi_read_pointer(&sec, 4, sec.data[1], &ptr, &next) < 0 ||
	    cfi_read_pointer(&sec, next, sec.data[2], &count, &next) < 0)
		return 0;
	return count;
}

int unwind_analysis_step(const struct file_image *img, const struct file_image *debug_img,
			 struct elf_need *need, struct unwind_table **ret_table,
			 struct unwind_analysis_info *info, const char **reason)
{
	struct elf_section secs[N_SECTIONS], dsecs[N_SECTIONS];
	struct elf_layout *layout = NULL, *dlayout = NULL;
	struct unwind_analysis_info inf = { 0 };
	struct source eh, hdr, dbg, go, bi, relro = { 0 }, rela = { 0 };
	char ver[64] = "";
	struct unwind_builder *b = NULL;
	struct unwind_table *t = NULL;
	struct convert cv;
	const uint8_t *data = file_image_data(img);
	int err;

	layout = malloc(sizeof(*layout));
	dlayout = malloc(sizeof(*dlayout));
	if (!layout || !dlayout) {
		err = -ENOMEM;
		goto out;
	}
	err = elf_sections(img, need, section_names, N_SECTIONS, secs, layout, reason);
	if (err)
		goto out;
	if (!layout->is64 || !layout->little_endian || layout->machine != EM_X86_64) {
		if (reason)
			*reason = "unwind tables are compiled for x86-64 files only";
		err = -EBADMSG;
		goto out;
	}
	from_section(&eh, &secs[SEC_EH_FRAME]);
	from_section(&hdr, &secs[SEC_EH_FRAME_HDR]);
	from_section(&dbg, &secs[SEC_DEBUG_FRAME]);
	from_section(&go, &secs[SEC_GOPCLNTAB]);
	if (!go.present)
		from_section(&go, &secs[SEC_GOPCLNTAB_PIE]);
	from_section(&bi, &secs[SEC_GO_BUILDINFO]);
	if (!go.present && bi.present) {
		from_section(&relro, &secs[SEC_DATA_REL_RO]);
		from_section(&rela, &secs[SEC_RELA_DYN]);
	}
	if (!secs[SEC_EH_FRAME].found && !secs[SEC_EH_FRAME_HDR].found &&
	    !find_by_eh_frame_hdr(img, need, layout, &hdr, &eh, &inf.eh_frame_hdr_fdes)) {
		err = -EAGAIN;
		goto out;
	}
	want(img, need, &eh);
	want(img, need, &hdr);
	want(img, need, &dbg);
	want(img, need, &go);
	if (go.present || relro.present)
		want(img, need, &bi);
	want(img, need, &relro);
	want(img, need, &rela);
	if (need->n) {
		err = -EAGAIN;
		goto out;
	}
	inf.has_eh_frame = eh.present;
	inf.has_eh_frame_hdr = hdr.present;
	inf.has_debug_frame = dbg.present;
	if (hdr.present && !inf.eh_frame_hdr_fdes)
		inf.eh_frame_hdr_fdes = hdr_fde_count(data, &hdr);

	b = unwind_builder_new();
	if (!b) {
		err = -ENOMEM;
		goto out;
	}
	cv = (struct convert){ b, layout, UNWIND_SRC_EH_FRAME };
	if (eh.present) {
		err = parse_source(data, &eh, CFI_EH_FRAME, secs, &cv, &inf.eh_frame);
		if (err)
			goto out;
	}
	/* The version says where the runtime keeps the goroutine a stack
	 * switch left. */
	if ((go.present || relro.present) && bi.present && !bi.compressed &&
	    go_buildinfo_version(data + bi.offset, bi.size, ver, sizeof(ver)) < 0)
		ver[0] = '\0';
	if (go.present && !go.compressed)
		err = read_go_frames(data + go.offset, go.size,
				     secs[SEC_TEXT].found ? secs[SEC_TEXT].addr : 0, ver, &cv,
				     &inf.go_spans);
	else if (relro.present && rela.present)
		err = parse_embedded_gopclntab(data, &relro, &rela, ver, &cv, &inf.go_spans);
	if (err)
		goto out;
	cv.src = UNWIND_SRC_DEBUG_FRAME;
	if (dbg.present) {
		err = parse_source(data, &dbg, CFI_DEBUG_FRAME, secs, &cv, &inf.debug_frame);
		if (err)
			goto out;
	}
	if (debug_img) {
		struct elf_need dneed;
		struct source dsrc;

		/* A whole local image: no needs. Its segments are not used:
		 * addresses convert through the mapped file's. */
		if (elf_sections(debug_img, &dneed, section_names, N_SECTIONS, dsecs, dlayout,
				 NULL) == 0 &&
		    dlayout->machine == EM_X86_64) {
			from_section(&dsrc, &dsecs[SEC_DEBUG_FRAME]);
			if (dsrc.present) {
				inf.has_debug_file = true;
				err = parse_source(file_image_data(debug_img), &dsrc,
						   CFI_DEBUG_FRAME, dsecs, &cv, &inf.debug_file);
				if (err)
					goto out;
			}
		}
	}
	err = add_plt_rules(secs, &cv, &inf.synthetic_spans);
	if (err)
		goto out;
	err = unwind_builder_finish(b, &t);
	if (err)
		goto out;
	if (unwind_table_count(t) == 0) {
		if (reason)
			*reason = eh.present || dbg.present || go.present
					  ? "no usable call frame information"
					  : "no .eh_frame, .debug_frame or .gopclntab";
		err = -EBADMSG;
		goto out;
	}
	*ret_table = t;
	t = NULL;
out:
	if (info && err != -EAGAIN)
		*info = inf;
	if (err != -EAGAIN)
		need->n = 0;
	unwind_table_free(t);
	unwind_builder_free(b);
	free(layout);
	free(dlayout);
	return err;
}

int unwind_analysis_whole(const struct file_image *img, const struct file_image *debug_img,
			  struct unwind_table **ret_table, const char **reason)
{
	struct unwind_analysis_info info;
	struct unwind_table *t = NULL;
	struct elf_need need;
	int r;

	*ret_table = NULL;
	*reason = NULL;
	if (debug_img) {
		r = unwind_analysis_step(img, debug_img, &need, &t, &info, NULL);
		if (r == 0 && info.has_debug_file) {
			*ret_table = t;
			return 0;
		}
		unwind_table_free(t);
		t = NULL;
		if (r == -ENOMEM)
			return r;
	}
	r = unwind_analysis_step(img, NULL, &need, &t, NULL, reason);
	if (r == 0) {
		*ret_table = t;
		return 0;
	}
	if (r == -ENOMEM)
		return r;
	if (!*reason)
		*reason = r == -E2BIG ? "more unwind rows than a table may have"
				      : "no usable call frame information";
	return 0;
}
