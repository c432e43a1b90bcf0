/* elf_analysis.c - resumable ELF symbol analysis over a sparse file image
 * (see elf_analysis.h).
 *
 * The step is stateless: every call re-derives what it knows from the
 * bytes present in the image, in this order, and stops at the first layer
 * that is missing, asking for all of that layer's ranges at once:
 *   1. the ELF header;
 *   2. the program and section header tables (and section 0 first when
 *      the header uses extended numbering);
 *   3. the section-name strings, .symtab/.strtab, .dynsym/.dynstr and the
 *      note sections (PT_NOTE segments when there are no note sections);
 *   4. .gnu_debuglink, which can only be found by name, and, in a file
 *      without .symtab, Go's function table (.gopclntab, or
 *      .data.rel.ro.gopclntab in PIE builds; in a cgo PIE linked by the
 *      system linker it has no section: it is found inside .data.rel.ro,
 *      its text start in .rela.dyn): a stripped Go binary's functions are
 *      named from it, as the Go runtime names them.
 * A typical library needs 4-5 round trips and a few hundred KB.
 *
 * Structures are walked by hand, because libelf's elf_memory() wants a
 * writable image, may convert it in place, and reads whole tables of a
 * sparse image; byte order and ELF32/ELF64 layouts are left to libelf's
 * elf32_xlatetom()/elf64_xlatetom(), one record at a time, from a bounded
 * copy. Every offset and size read from the file is checked against the
 * file size and the caps before it is used.
 *
 * Symbols kept: STT_FUNC and STT_GNU_IFUNC, plus STT_NOTYPE in executable
 * sections (hand-written assembly), that are defined in a real section and
 * have a nonzero value. Symbols whose name offset is outside the string
 * table are skipped (the rest of the table is still used). Primary name
 * rank (lower wins, see symtab_build.h): FUNC/IFUNC before NOTYPE, then
 * GLOBAL before WEAK before LOCAL.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <gelf.h>
#include <libelf.h>

#include "elf_analysis.h"
#include "pclntab.h"
#include "relative.h"
#include "symtab_build.h"

#define ELF_MAX_PHNUM 65536u
#define ELF_MAX_SHNUM (1u << 20)
#define ELF_MAX_NOTES 32
#define ELF_MAX_NOTE_SIZE (64u << 10)
/* 255-byte name, NUL, padding to 4, CRC: nothing past this is read. */
#define ELF_DEBUGLINK_WINDOW 260u
/* Ranges closer than this are fetched as one. */
#define ELF_NEED_GAP 4096u
/* Go's function table, read only to name functions: 1 GiB is far above
 * any real binary's. */
#define ELF_MAX_PCLNTAB (1ull << 30)

struct elf_ctx {
	const struct file_image *img;
	const uint8_t *data;
	uint64_t size;
	struct elf_need *need;
	bool missing;
	bool is64;
	unsigned encoding;
	GElf_Ehdr eh;
	uint64_t phnum;
	uint64_t shnum;
	uint64_t shstrndx;
	const char *reason;
};

/* What stage 3 decided to read; stage 4 uses it. */
struct elf_plan {
	bool has_table[2]; /* [0] .symtab, [1] .dynsym */
	GElf_Shdr table[2];
	GElf_Shdr strings[2];
	bool has_names;
	GElf_Shdr shstr;
	size_t n_notes;
	struct elf_range notes[ELF_MAX_NOTES];
	uint64_t note_align[ELF_MAX_NOTES];
	bool has_debuglink;
	struct elf_range debuglink;
	bool has_pclntab;
	struct elf_range pclntab;
	uint64_t text_addr; /* .text's, for a table whose textStart is 0 (PIE) */
	/* A Go binary (.go.buildinfo) whose table may lie inside .data.rel.ro. */
	bool is_go, has_relro, has_rela, embedded_pclntab;
	struct elf_range relro, rela;
	uint64_t relro_addr;
};

static int bad(struct elf_ctx *c, const char *reason)
{
	c->reason = reason;
	return -EBADMSG;
}

/* ---- needs ---- */

void elf_need_add(struct elf_need *need, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	bool merged;

	/* Fold every range within ELF_NEED_GAP into [off, end); at most
	 * ELF_ANALYSIS_MAX_RANGES passes, as each pass removes one range. */
	do {
		merged = false;
		for (size_t i = 0; i < need->n; i++) {
			struct elf_range *r = &need->ranges[i];
			uint64_t r_end = r->offset + r->length;

			if (off > r_end + ELF_NEED_GAP || r->offset > end + ELF_NEED_GAP)
				continue;
			if (r->offset < off)
				off = r->offset;
			if (r_end > end)
				end = r_end;
			need->ranges[i] = need->ranges[--need->n];
			merged = true;
			break;
		}
	} while (merged);
	/* A full list is fine: what does not fit is asked for next step. */
	if (need->n < ELF_ANALYSIS_MAX_RANGES)
		need->ranges[need->n++] = (struct elf_range){ off, end - off };
}

/* Whether [off, off+len) is present; if not, asks for it. The caller has
 * checked the range against the file size. */
static bool want(struct elf_ctx *c, uint64_t off, uint64_t len)
{
	if (file_image_has(c->img, off, len))
		return true;
	c->missing = true;
	elf_need_add(c->need, off, len);
	return false;
}

static bool in_file(const struct elf_ctx *c, uint64_t off, uint64_t len)
{
	return off <= c->size && len <= c->size - off;
}

/* ---- records ---- */

/* Converts one record of fsize bytes at file offset off (present and in
 * the file) into dst, in host byte order. */
static int xlate(const struct elf_ctx *c, Elf_Type type, uint64_t off, size_t fsize, void *dst,
		 size_t msize)
{
	_Alignas(8) uint8_t buf[64];
	Elf_Data in = { .d_buf = buf, .d_type = type, .d_size = fsize, .d_version = EV_CURRENT };
	Elf_Data out = { .d_buf = dst, .d_type = type, .d_size = msize, .d_version = EV_CURRENT };
	Elf_Data *ok;

	if (fsize > sizeof(buf) || !in_file(c, off, fsize))
		return -EBADMSG;
	memcpy(buf, c->data + off, fsize);
	if (c->is64)
		ok = elf64_xlatetom(&out, &in, c->encoding);
	else
		ok = elf32_xlatetom(&out, &in, c->encoding);
	return ok ? 0 : -EBADMSG;
}

static int read_word(const struct elf_ctx *c, uint64_t off, uint32_t *ret)
{
	return xlate(c, ELF_T_WORD, off, 4, ret, 4);
}

static size_t shdr_size(const struct elf_ctx *c)
{
	return c->is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
}

static size_t phdr_size(const struct elf_ctx *c)
{
	return c->is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
}

static size_t sym_size(const struct elf_ctx *c)
{
	return c->is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
}

static int read_ehdr(struct elf_ctx *c)
{
	Elf32_Ehdr e32;
	int err;

	if (c->is64)
		return xlate(c, ELF_T_EHDR, 0, sizeof(Elf64_Ehdr), &c->eh, sizeof(c->eh));
	err = xlate(c, ELF_T_EHDR, 0, sizeof(e32), &e32, sizeof(e32));
	if (err)
		return err;
	memcpy(c->eh.e_ident, e32.e_ident, EI_NIDENT);
	c->eh.e_type = e32.e_type;
	c->eh.e_machine = e32.e_machine;
	c->eh.e_version = e32.e_version;
	c->eh.e_entry = e32.e_entry;
	c->eh.e_phoff = e32.e_phoff;
	c->eh.e_shoff = e32.e_shoff;
	c->eh.e_flags = e32.e_flags;
	c->eh.e_ehsize = e32.e_ehsize;
	c->eh.e_phentsize = e32.e_phentsize;
	c->eh.e_phnum = e32.e_phnum;
	c->eh.e_shentsize = e32.e_shentsize;
	c->eh.e_shnum = e32.e_shnum;
	c->eh.e_shstrndx = e32.e_shstrndx;
	return 0;
}

/* Section header idx; the table has been checked to be in the file. */
static int read_shdr(const struct elf_ctx *c, uint64_t idx, GElf_Shdr *ret)
{
	uint64_t off = c->eh.e_shoff + idx * shdr_size(c);
	Elf32_Shdr s;
	int err;

	if (c->is64)
		return xlate(c, ELF_T_SHDR, off, sizeof(Elf64_Shdr), ret, sizeof(*ret));
	err = xlate(c, ELF_T_SHDR, off, sizeof(s), &s, sizeof(s));
	if (err)
		return err;
	*ret = (GElf_Shdr){ .sh_name = s.sh_name, .sh_type = s.sh_type, .sh_flags = s.sh_flags,
			    .sh_addr = s.sh_addr, .sh_offset = s.sh_offset, .sh_size = s.sh_size,
			    .sh_link = s.sh_link, .sh_info = s.sh_info,
			    .sh_addralign = s.sh_addralign, .sh_entsize = s.sh_entsize };
	return 0;
}

static int read_phdr(const struct elf_ctx *c, uint64_t idx, GElf_Phdr *ret)
{
	uint64_t off = c->eh.e_phoff + idx * phdr_size(c);
	Elf32_Phdr p;
	int err;

	if (c->is64)
		return xlate(c, ELF_T_PHDR, off, sizeof(Elf64_Phdr), ret, sizeof(*ret));
	err = xlate(c, ELF_T_PHDR, off, sizeof(p), &p, sizeof(p));
	if (err)
		return err;
	*ret = (GElf_Phdr){ .p_type = p.p_type, .p_flags = p.p_flags, .p_offset = p.p_offset,
			    .p_vaddr = p.p_vaddr, .p_paddr = p.p_paddr, .p_filesz = p.p_filesz,
			    .p_memsz = p.p_memsz, .p_align = p.p_align };
	return 0;
}

static int read_sym(const struct elf_ctx *c, uint64_t off, GElf_Sym *ret)
{
	Elf32_Sym s;
	int err;

	if (c->is64)
		return xlate(c, ELF_T_SYM, off, sizeof(Elf64_Sym), ret, sizeof(*ret));
	err = xlate(c, ELF_T_SYM, off, sizeof(s), &s, sizeof(s));
	if (err)
		return err;
	*ret = (GElf_Sym){ .st_name = s.st_name, .st_info = s.st_info, .st_other = s.st_other,
			   .st_shndx = s.st_shndx, .st_value = s.st_value, .st_size = s.st_size };
	return 0;
}

/* ---- stage 1 and 2: headers ---- */

static int stage_ehdr(struct elf_ctx *c)
{
	const uint8_t *id = c->data;
	size_t ehsize;

	if (!want(c, 0, c->size < sizeof(Elf64_Ehdr) ? c->size : sizeof(Elf64_Ehdr)))
		return -EAGAIN;
	if (c->size < EI_NIDENT)
		return bad(c, "file shorter than the ELF identification");
	if (memcmp(id, ELFMAG, SELFMAG) != 0)
		return bad(c, "no ELF magic");
	if (id[EI_CLASS] != ELFCLASS32 && id[EI_CLASS] != ELFCLASS64)
		return bad(c, "unknown ELF class");
	if (id[EI_DATA] != ELFDATA2LSB && id[EI_DATA] != ELFDATA2MSB)
		return bad(c, "unknown ELF byte order");
	if (id[EI_VERSION] != EV_CURRENT)
		return bad(c, "unknown ELF version");
	c->is64 = id[EI_CLASS] == ELFCLASS64;
	c->encoding = id[EI_DATA];
	ehsize = c->is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	if (c->size < ehsize)
		return bad(c, "file shorter than the ELF header");
	if (read_ehdr(c))
		return bad(c, "unreadable ELF header");
	return 0;
}

static int stage_tables(struct elf_ctx *c)
{
	const GElf_Ehdr *eh = &c->eh;
	bool xnum_sh = false, xnum_ph = false;
	uint64_t len;

	c->shnum = eh->e_shnum;
	c->shstrndx = eh->e_shstrndx;
	c->phnum = eh->e_phnum;
	if (eh->e_shoff == 0) {
		/* No section headers: no extended numbering either. */
		c->shnum = 0;
		c->shstrndx = SHN_UNDEF;
	} else {
		if (eh->e_shentsize != shdr_size(c))
			return bad(c, "unexpected section header size");
		if (!in_file(c, eh->e_shoff, shdr_size(c)))
			return bad(c, "section header table past the end of the file");
		/* Extended numbering keeps the real counts in section 0. */
		if (eh->e_shnum == 0 || eh->e_shstrndx == SHN_XINDEX || eh->e_phnum == PN_XNUM) {
			GElf_Shdr sh0;

			if (!want(c, eh->e_shoff, shdr_size(c))) {
				xnum_sh = eh->e_shnum == 0;
				xnum_ph = eh->e_phnum == PN_XNUM;
			} else {
				if (read_shdr(c, 0, &sh0))
					return bad(c, "unreadable section header 0");
				if (eh->e_shnum == 0)
					c->shnum = sh0.sh_size;
				if (eh->e_shstrndx == SHN_XINDEX)
					c->shstrndx = sh0.sh_link;
				if (eh->e_phnum == PN_XNUM && sh0.sh_info != 0)
					c->phnum = sh0.sh_info;
			}
		}
	}
	if (c->phnum && !xnum_ph) {
		if (eh->e_phentsize != phdr_size(c))
			return bad(c, "unexpected program header size");
		if (c->phnum > ELF_MAX_PHNUM)
			return bad(c, "too many program headers");
		len = c->phnum * phdr_size(c);
		if (!in_file(c, eh->e_phoff, len))
			return bad(c, "program header table past the end of the file");
		want(c, eh->e_phoff, len);
	}
	if (c->shnum && !xnum_sh) {
		if (c->shnum > ELF_MAX_SHNUM)
			return bad(c, "too many sections");
		len = c->shnum * shdr_size(c);
		if (len > ELF_ANALYSIS_MAX_SECTION || !in_file(c, eh->e_shoff, len))
			return bad(c, "section header table past the end of the file");
		want(c, eh->e_shoff, len);
	}
	return c->missing ? -EAGAIN : 0;
}

/* ---- stage 3 and 4: section contents ---- */

/* A section whose bytes we read: it must have them, inside the file, and
 * not more than the cap. */
static int check_data(struct elf_ctx *c, const GElf_Shdr *sh, const char *reason)
{
	if (sh->sh_type == SHT_NOBITS || !in_file(c, sh->sh_offset, sh->sh_size) ||
	    sh->sh_size > ELF_ANALYSIS_MAX_SECTION)
		return bad(c, reason);
	return 0;
}

/* A section read only if it is sound; a damaged one is left out. */
static bool optional_data(struct elf_ctx *c, const GElf_Shdr *sh)
{
	return sh->sh_size > 0 && sh->sh_size <= ELF_MAX_PCLNTAB &&
	       in_file(c, sh->sh_offset, sh->sh_size);
}

/* Section name of sh, or NULL if names are unknown or it is malformed. */
static const char *section_name(const struct elf_ctx *c, const struct elf_plan *plan,
				const GElf_Shdr *sh)
{
	const char *s;

	if (!plan->has_names || sh->sh_name >= plan->shstr.sh_size)
		return NULL;
	s = (const char *)c->data + plan->shstr.sh_offset + sh->sh_name;
	if (!memchr(s, '\0', plan->shstr.sh_size - sh->sh_name))
		return NULL;
	return s;
}

static void plan_note(struct elf_plan *plan, uint64_t off, uint64_t len, uint64_t align)
{
	if (plan->n_notes >= ELF_MAX_NOTES || len == 0 || len > ELF_MAX_NOTE_SIZE)
		return;
	plan->notes[plan->n_notes] = (struct elf_range){ off, len };
	plan->note_align[plan->n_notes] = align == 8 ? 8 : 4;
	plan->n_notes++;
}

static int plan_table(struct elf_ctx *c, struct elf_plan *plan, int which, const GElf_Shdr *sh)
{
	int err;

	if (plan->has_table[which])
		return 0; /* the first table of each kind is used */
	err = check_data(c, sh, "symbol table past the end of the file");
	if (err)
		return err;
	if (sh->sh_link == SHN_UNDEF || sh->sh_link >= c->shnum)
		return bad(c, "symbol table's string table index out of range");
	if (read_shdr(c, sh->sh_link, &plan->strings[which]))
		return bad(c, "unreadable section header");
	err = check_data(c, &plan->strings[which], "string table past the end of the file");
	if (err)
		return err;
	if (sh->sh_entsize != 0 && sh->sh_entsize != sym_size(c))
		return bad(c, "unexpected symbol entry size");
	if (sh->sh_size / sym_size(c) > ELF_ANALYSIS_MAX_SYMBOLS)
		return bad(c, "too many symbols");
	plan->table[which] = *sh;
	plan->has_table[which] = true;
	return 0;
}

static int stage_sections(struct elf_ctx *c, struct elf_plan *plan)
{
	GElf_Shdr sh;
	int err;

	memset(plan, 0, sizeof(*plan));
	if (c->shstrndx != SHN_UNDEF && c->shstrndx < c->shnum) {
		if (read_shdr(c, c->shstrndx, &plan->shstr))
			return bad(c, "unreadable section header");
		err = check_data(c, &plan->shstr, "section name table past the end of the file");
		if (err)
			return err;
		plan->has_names = plan->shstr.sh_size > 0 &&
				  want(c, plan->shstr.sh_offset, plan->shstr.sh_size);
	}
	for (uint64_t i = 1; i < c->shnum; i++) {
		const char *name;

		if (read_shdr(c, i, &sh))
			return bad(c, "unreadable section header");
		switch (sh.sh_type) {
		case SHT_SYMTAB:
		case SHT_DYNSYM:
			err = plan_table(c, plan, sh.sh_type == SHT_SYMTAB ? 0 : 1, &sh);
			if (err)
				return err;
			break;
		case SHT_NOTE:
			err = check_data(c, &sh, "note section past the end of the file");
			if (err)
				return err;
			plan_note(plan, sh.sh_offset, sh.sh_size, sh.sh_addralign);
			break;
		case SHT_RELA:
			name = section_name(c, plan, &sh);
			if (name && strcmp(name, ".rela.dyn") == 0 && optional_data(c, &sh)) {
				plan->has_rela = true;
				plan->rela = (struct elf_range){ sh.sh_offset, sh.sh_size };
			}
			break;
		case SHT_PROGBITS:
			name = section_name(c, plan, &sh);
			if (name && strcmp(name, ".text") == 0)
				plan->text_addr = sh.sh_addr;
			if (name && strcmp(name, ".go.buildinfo") == 0)
				plan->is_go = true;
			if (name && strcmp(name, ".data.rel.ro") == 0 && optional_data(c, &sh)) {
				plan->has_relro = true;
				plan->relro = (struct elf_range){ sh.sh_offset, sh.sh_size };
				plan->relro_addr = sh.sh_addr;
			}
			if (name && !plan->has_pclntab && (strcmp(name, PCLNTAB_SECTION) == 0 ||
							   strcmp(name, PCLNTAB_SECTION_PIE) == 0)) {
				err = check_data(c, &sh, "Go function table past the end of the file");
				if (err)
					return err;
				plan->has_pclntab = sh.sh_size > 0 && sh.sh_size <= ELF_MAX_PCLNTAB;
				plan->pclntab = (struct elf_range){ sh.sh_offset, sh.sh_size };
				break;
			}
			if (plan->has_debuglink || !name || strcmp(name, ".gnu_debuglink") != 0)
				break;
			err = check_data(c, &sh, "debuglink section past the end of the file");
			if (err)
				return err;
			plan->debuglink = (struct elf_range){
				sh.sh_offset,
				sh.sh_size < ELF_DEBUGLINK_WINDOW ? sh.sh_size : ELF_DEBUGLINK_WINDOW
			};
			plan->has_debuglink = true;
			break;
		default:
			break;
		}
	}
	/* Without note sections (no section headers), the build ID is in a
	 * PT_NOTE segment. Malformed segments are skipped: we need none. */
	for (uint64_t i = 0; plan->n_notes == 0 && i < c->phnum; i++) {
		GElf_Phdr ph;

		if (read_phdr(c, i, &ph))
			return bad(c, "unreadable program header");
		if (ph.p_type == PT_NOTE && in_file(c, ph.p_offset, ph.p_filesz))
			plan_note(plan, ph.p_offset, ph.p_filesz, ph.p_align);
	}
	for (int k = 0; k < 2; k++) {
		if (!plan->has_table[k])
			continue;
		want(c, plan->table[k].sh_offset, plan->table[k].sh_size);
		want(c, plan->strings[k].sh_offset, plan->strings[k].sh_size);
	}
	for (size_t k = 0; k < plan->n_notes; k++)
		want(c, plan->notes[k].offset, plan->notes[k].length);
	if (plan->has_debuglink)
		want(c, plan->debuglink.offset, plan->debuglink.length);
	/* A symbol table names functions better (and has the ABI suffixes
	 * perf shows); Go's table is the fallback for stripped binaries. */
	if (plan->has_table[0])
		plan->has_pclntab = false;
	if (plan->has_pclntab)
		want(c, plan->pclntab.offset, plan->pclntab.length);
	plan->embedded_pclntab = !plan->has_table[0] && !plan->has_pclntab && plan->is_go &&
				 plan->has_relro && plan->has_rela;
	if (plan->embedded_pclntab) {
		want(c, plan->relro.offset, plan->relro.length);
		want(c, plan->rela.offset, plan->rela.length);
	}
	return c->missing ? -EAGAIN : 0;
}

/* Lower is a better primary name (see symtab_build.h). */
static unsigned symbol_rank(unsigned type, unsigned bind)
{
	unsigned r = type == STT_NOTYPE ? 4 : 0;

	switch (bind) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return r;
	case STB_WEAK:
		return r + 1;
	case STB_LOCAL:
		return r + 2;
	default:
		return r + 3;
	}
}

static bool in_exec_section(const struct elf_ctx *c, uint64_t shndx)
{
	GElf_Shdr sh;

	if (shndx >= c->shnum || read_shdr(c, shndx, &sh))
		return false;
	return sh.sh_flags & SHF_EXECINSTR;
}

static int add_symbols(struct elf_ctx *c, struct symtab_builder *b, const GElf_Shdr *table,
		       const GElf_Shdr *strings)
{
	const char *str = (const char *)c->data + strings->sh_offset;
	uint64_t n = table->sh_size / sym_size(c);
	GElf_Sym s;
	int err;

	/* Entry 0 is the reserved null symbol. */
	for (uint64_t i = 1; i < n; i++) {
		unsigned type, bind;
		size_t len;

		if (read_sym(c, table->sh_offset + i * sym_size(c), &s))
			return bad(c, "unreadable symbol");
		type = GELF_ST_TYPE(s.st_info);
		bind = GELF_ST_BIND(s.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
			continue;
		/* Defined in a section: not undefined, absolute or common. */
		if (s.st_shndx == SHN_UNDEF ||
		    (s.st_shndx >= SHN_LORESERVE && s.st_shndx != SHN_XINDEX))
			continue;
		if (s.st_value == 0)
			continue;
		if (type == STT_NOTYPE && !in_exec_section(c, s.st_shndx))
			continue;
		if (s.st_name == 0 || s.st_name >= strings->sh_size)
			continue;
		len = strnlen(str + s.st_name, strings->sh_size - s.st_name);
		if (len == strings->sh_size - s.st_name)
			continue; /* not terminated inside the table */
		err = symtab_builder_add(b, s.st_value, s.st_size, str + s.st_name, len,
					 symbol_rank(type, bind));
		if (err == -E2BIG)
			return bad(c, "symbols over the cap");
		if (err)
			return err;
	}
	return 0;
}

static int add_go_func(void *ctx, uint64_t lo, uint64_t hi, const char *name, size_t name_len)
{
	int err = symtab_builder_add(ctx, lo, hi - lo, name, name_len,
				     symbol_rank(STT_FUNC, STB_GLOBAL));

	/* Over the symtab's cap, told apart from the table's own. */
	return err == -E2BIG ? -EOVERFLOW : err;
}

/* Functions of a stripped Go binary, from its table. A damaged table (or
 * one over the reader's caps) keeps the functions read before; a cgo PIE
 * whose table is not found inside .data.rel.ro has none. */
static int add_go_functions(struct elf_ctx *c, struct symtab_builder *b, const struct elf_plan *plan)
{
	struct pclntab_sink sink = { .func = add_go_func, .ctx = b };
	const uint8_t *tab = c->data + plan->pclntab.offset;
	uint64_t size = plan->pclntab.length, text = plan->text_addr;
	size_t off;
	int err;

	if (plan->embedded_pclntab) {
		if (pclntab_locate_relocated(c->data + plan->relro.offset, plan->relro.length,
					     plan->relro_addr, c->data + plan->rela.offset,
					     plan->rela.length, &off, &text) < 0)
			return 0;
		tab = c->data + plan->relro.offset + off;
		size = plan->relro.length - off;
	}
	err = pclntab_read(tab, size, text, &sink);
	if (err == -EOVERFLOW)
		return bad(c, "symbols over the cap");
	return err == -ENOMEM ? err : 0;
}

static void add_segments(struct elf_ctx *c, struct symtab_builder *b)
{
	GElf_Phdr ph;

	for (uint64_t i = 0; i < c->phnum; i++) {
		if (read_phdr(c, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		/* A segment we cannot trust is left out, not fatal. */
		if (!in_file(c, ph.p_offset, ph.p_filesz) || ph.p_memsz < ph.p_filesz)
			continue;
		symtab_builder_add_segment(b, ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz);
	}
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Looks for the GNU build ID note in [off, off+len), entries aligned to
 * align (4 or 8). Each entry advances by at least 12 bytes. */
static void find_build_id(struct elf_ctx *c, struct symtab_builder *b, uint64_t off, uint64_t len,
			  uint64_t align)
{
	uint64_t pos = 0;

	while (len - pos >= 12) {
		uint32_t namesz, descsz, type;
		uint64_t name_off, desc_off;

		if (read_word(c, off + pos, &namesz) || read_word(c, off + pos + 4, &descsz) ||
		    read_word(c, off + pos + 8, &type))
			return;
		name_off = pos + 12;
		if (namesz > len - name_off)
			return;
		desc_off = align_up(name_off + namesz, align);
		if (desc_off > len || descsz > len - desc_off)
			return;
		if (namesz == 4 && memcmp(c->data + off + name_off, "GNU", 4) == 0 &&
		    type == NT_GNU_BUILD_ID && descsz > 0 && descsz <= SYMTAB_MAX_BUILD_ID) {
			symtab_builder_set_build_id(b, c->data + off + desc_off, descsz);
			return;
		}
		pos = align_up(desc_off + descsz, align);
	}
}

/* .gnu_debuglink: a NUL-terminated file name, zero padding to 4 bytes,
 * then the CRC-32 of the debug file in the file's byte order. A malformed
 * one is ignored. */
static void find_debuglink(struct elf_ctx *c, struct symtab_builder *b, const struct elf_range *r)
{
	const char *name = (const char *)c->data + r->offset;
	size_t len = strnlen(name, r->length);
	uint64_t crc_off = align_up((uint64_t)len + 1, 4);
	uint32_t crc;

	if (len == 0 || len == r->length || len > SYMTAB_MAX_DEBUGLINK || crc_off + 4 > r->length)
		return;
	if (read_word(c, r->offset + crc_off, &crc))
		return;
	symtab_builder_set_debuglink(b, name, len, crc);
}

static int stage_build(struct elf_ctx *c, const struct elf_plan *plan, struct symtab **ret)
{
	struct symtab_builder *b = NULL;
	int err;

	b = symtab_builder_new();
	if (!b) {
		err = -ENOMEM;
		goto cleanup;
	}
	add_segments(c, b);
	for (int k = 0; k < 2; k++) {
		if (!plan->has_table[k])
			continue;
		err = add_symbols(c, b, &plan->table[k], &plan->strings[k]);
		if (err)
			goto cleanup;
	}
	if (plan->has_pclntab || plan->embedded_pclntab) {
		err = add_go_functions(c, b, plan);
		if (err)
			goto cleanup;
	}
	for (size_t k = 0; k < plan->n_notes; k++)
		find_build_id(c, b, plan->notes[k].offset, plan->notes[k].length,
			      plan->note_align[k]);
	if (plan->has_debuglink)
		find_debuglink(c, b, &plan->debuglink);
	err = symtab_builder_finish(b, ret);
	if (err == -E2BIG)
		err = bad(c, "symbols over the cap");
cleanup:
	symtab_builder_free(b);
	return err;
}

static pthread_once_t libelf_once = PTHREAD_ONCE_INIT;

static void libelf_init(void)
{
	elf_version(EV_CURRENT);
}

int elf_analysis_step(const struct file_image *img, struct elf_need *need,
		      struct symtab **ret_symtab, const char **reason)
{
	struct elf_ctx c = {
		.img = img,
		.data = file_image_data(img),
		.size = file_image_size(img),
		.need = need,
	};
	struct elf_plan plan;
	int err;

	need->n = 0;
	/* libelf wants its version set once per process; the translation
	 * functions we use need no Elf handle. */
	pthread_once(&libelf_once, libelf_init);
	err = stage_ehdr(&c);
	if (!err)
		err = stage_tables(&c);
	if (!err)
		err = stage_sections(&c, &plan);
	if (!err)
		err = stage_build(&c, &plan, ret_symtab);
	if (err == -EBADMSG && reason)
		*reason = c.reason ? c.reason : "malformed ELF file";
	if (err != -EAGAIN)
		need->n = 0;
	return err;
}

/* ---- section lookup for other analyses (elf_sections) ---- */

int elf_sections(const struct file_image *img, struct elf_need *need, const char *const *names,
		 size_t n, struct elf_section *ret_sections, struct elf_layout *ret_layout,
		 const char **reason)
{
	struct elf_ctx c = {
		.img = img,
		.data = file_image_data(img),
		.size = file_image_size(img),
		.need = need,
	};
	struct elf_plan plan = { 0 };
	struct elf_layout layout = { 0 };
	struct elf_section *found = NULL;
	GElf_Shdr sh;
	GElf_Phdr ph;
	int err;

	need->n = 0;
	pthread_once(&libelf_once, libelf_init);
	err = stage_ehdr(&c);
	if (!err)
		err = stage_tables(&c);
	if (!err && c.shstrndx != SHN_UNDEF && c.shstrndx < c.shnum) {
		if (read_shdr(&c, c.shstrndx, &plan.shstr))
			err = bad(&c, "unreadable section header");
		else
			err = check_data(&c, &plan.shstr, "section name table past the end of the file");
		if (!err) {
			plan.has_names = plan.shstr.sh_size > 0 &&
					 want(&c, plan.shstr.sh_offset, plan.shstr.sh_size);
			if (c.missing)
				err = -EAGAIN;
		}
	}
	if (err)
		goto out;
	found = calloc(n ? n : 1, sizeof(*found));
	if (!found) {
		err = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 1; plan.has_names && i < c.shnum; i++) {
		const char *name;

		if (read_shdr(&c, i, &sh)) {
			err = bad(&c, "unreadable section header");
			goto out;
		}
		name = section_name(&c, &plan, &sh);
		for (size_t k = 0; name && k < n; k++) {
			if (found[k].found || strcmp(name, names[k]) != 0)
				continue;
			if (sh.sh_type != SHT_NOBITS &&
			    (!in_file(&c, sh.sh_offset, sh.sh_size) ||
			     sh.sh_size > ELF_ANALYSIS_MAX_SECTION)) {
				err = bad(&c, "section past the end of the file");
				goto out;
			}
			found[k] = (struct elf_section){ .found = true, .type = sh.sh_type,
							 .flags = sh.sh_flags,
							 .offset = sh.sh_offset,
							 .size = sh.sh_size, .addr = sh.sh_addr };
		}
	}
	layout.is64 = c.is64;
	layout.little_endian = c.encoding == ELFDATA2LSB;
	layout.machine = c.eh.e_machine;
	layout.type = c.eh.e_type;
	for (uint64_t i = 0; i < c.phnum && layout.n_segments < ELF_LAYOUT_MAX_SEGMENTS; i++) {
		if (read_phdr(&c, i, &ph)) {
			err = bad(&c, "unreadable program header");
			goto out;
		}
		if (ph.p_type != PT_LOAD && ph.p_type != PT_GNU_EH_FRAME)
			continue;
		/* As for the symtab: a segment we cannot trust is left out. */
		if (!in_file(&c, ph.p_offset, ph.p_filesz) || ph.p_memsz < ph.p_filesz ||
		    ph.p_vaddr > UINT64_MAX - ph.p_memsz)
			continue;
		layout.segments[layout.n_segments++] = (struct elf_segment){
			.type = ph.p_type, .flags = ph.p_flags, .offset = ph.p_offset,
			.vaddr = ph.p_vaddr, .filesz = ph.p_filesz, .memsz = ph.p_memsz
		};
	}
	memcpy(ret_sections, found, n * sizeof(*found));
	*ret_layout = layout;
out:
	free(found);
	if (err == -EBADMSG && reason)
		*reason = c.reason ? c.reason : "malformed ELF file";
	if (err != -EAGAIN)
		need->n = 0;
	return err;
}
