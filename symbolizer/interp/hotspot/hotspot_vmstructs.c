/* hotspot_vmstructs.c - HotSpot's structure tables from the libjvm.so file
 * (hotspot_vmstructs.h). */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hotspot_vmstructs.h"

/* The entry layouts of vmStructs.hpp (x86-64). */
#define STRUCT_STRIDE 48 /* VMStructEntry */
#define STRUCT_TYPE 0
#define STRUCT_FIELD 8
#define STRUCT_STATIC 24
#define STRUCT_OFFSET 32
#define STRUCT_ADDRESS 40
#define TYPE_STRIDE 40 /* VMTypeEntry */
#define TYPE_NAME 0
#define TYPE_SIZE 32
#define CONST_STRIDE 16 /* VMIntConstantEntry, VMLongConstantEntry */
#define CONST_NAME 0
#define CONST_VALUE 8

/* How far past the last initializer .init_array names its code may run:
 * vmStructs.cpp's is about 8 KiB in JDK 17. */
#define INIT_TAIL (64u << 10)
/* `movq $imm32, disp32(%rip)`: REX.W C7 /0 with ModRM 05, then disp, imm. */
#define STORE_LEN 11

enum { SEC_DYNSYM, SEC_DYNSTR, SEC_RELA, SEC_INIT_ARRAY, SEC_DATA_REL_RO, SEC_DATA, SEC_RODATA,
       N_SECS };
static const char *const sec_names[N_SECS] = { ".dynsym", ".dynstr", ".rela.dyn", ".init_array",
					       ".data.rel.ro", ".data", ".rodata" };

struct reloc {
	uint64_t offset;
	uint64_t addend;
};

struct vm_file {
	const struct file_image *img;
	const uint8_t *data;
	struct elf_layout *layout;
	struct elf_section secs[N_SECS];
	struct reloc *rel; /* RELATIVE relocations, sorted by offset */
	size_t n_rel;
};

static void vm_file_free(struct vm_file *f)
{
	free(f->layout);
	free(f->rel);
}

/* Opens img's sections and layout. Returns 0, -EAGAIN (headers to fetch
 * into need), -ENOENT, -EPROTONOSUPPORT, -EBADMSG or -ENOMEM. */
static int vm_file_open(const struct file_image *img, struct elf_need *need, struct vm_file *f,
			const char **reason)
{
	struct elf_need scratch = { 0 };
	const char *why = NULL;
	int r;

	if (!need)
		need = &scratch;
	*f = (struct vm_file){ .img = img, .data = file_image_data(img) };
	*reason = "out of memory";
	if (!(f->layout = malloc(sizeof(*f->layout))))
		return -ENOMEM;
	r = elf_sections(img, need, sec_names, N_SECS, f->secs, f->layout, &why);
	if (r == -EAGAIN) {
		*reason = "ELF headers not fetched";
		return -EAGAIN;
	}
	if (r < 0) {
		*reason = why ? why : "bad ELF";
		return -EBADMSG;
	}
	*reason = "not a little-endian x86-64 ELF file";
	if (!f->layout->is64 || !f->layout->little_endian || f->layout->machine != EM_X86_64)
		return -EPROTONOSUPPORT;
	*reason = "no .dynsym/.dynstr/.rela.dyn/.init_array";
	if (!f->secs[SEC_DYNSYM].found || f->secs[SEC_DYNSYM].type != SHT_DYNSYM ||
	    !f->secs[SEC_DYNSTR].found || f->secs[SEC_DYNSTR].type != SHT_STRTAB ||
	    !f->secs[SEC_RELA].found || f->secs[SEC_RELA].type != SHT_RELA ||
	    !f->secs[SEC_INIT_ARRAY].found || f->secs[SEC_INIT_ARRAY].type != SHT_INIT_ARRAY)
		return -ENOENT;
	*reason = NULL;
	return 0;
}

/* Whether every section we read is in the image; adds the missing ones. */
static bool vm_file_sections_present(const struct vm_file *f, struct elf_need *need)
{
	bool all = true;

	for (int i = 0; i < N_SECS; i++) {
		const struct elf_section *s = &f->secs[i];

		if (!s->found || s->type == SHT_NOBITS || !s->size ||
		    file_image_has(f->img, s->offset, s->size))
			continue;
		if (need)
			elf_need_add(need, s->offset, s->size);
		all = false;
	}
	return all;
}

/* The file offset of [vaddr, vaddr+len) if it lies in one load segment's
 * file bytes (1: in its zero-filled tail, .bss; -1: in no segment). */
static int vm_offset(const struct vm_file *f, uint64_t vaddr, uint64_t len, uint64_t *ret)
{
	for (size_t i = 0; i < f->layout->n_segments; i++) {
		const struct elf_segment *g = &f->layout->segments[i];

		if (g->type != PT_LOAD || vaddr < g->vaddr || vaddr - g->vaddr >= g->memsz ||
		    len > g->memsz - (vaddr - g->vaddr))
			continue;
		if (vaddr - g->vaddr < g->filesz && len <= g->filesz - (vaddr - g->vaddr)) {
			*ret = g->offset + (vaddr - g->vaddr);
			return 0;
		}
		return vaddr - g->vaddr >= g->filesz ? 1 : -1;
	}
	return -1;
}

/* len (<= 8) bytes at vaddr: 0, or -EBADMSG (outside the file's segments
 * or not in the image). .bss reads as zeros. */
static int vm_read(const struct vm_file *f, uint64_t vaddr, void *out, size_t len)
{
	uint64_t off;
	int r = vm_offset(f, vaddr, len, &off);

	if (r == 1) {
		memset(out, 0, len);
		return 0;
	}
	if (r < 0 || !file_image_has(f->img, off, len))
		return -EBADMSG;
	memcpy(out, f->data + off, len);
	return 0;
}

static int cmp_reloc(const void *a, const void *b)
{
	const struct reloc *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The RELATIVE relocations of .rela.dyn, sorted (ld sorts them already:
 * then no sort). */
static int vm_load_relocs(struct vm_file *f, const char **reason)
{
	const struct elf_section *s = &f->secs[SEC_RELA];
	size_t n = s->size / sizeof(Elf64_Rela);
	bool sorted = true;

	*reason = ".rela.dyn not fetched";
	if (!file_image_has(f->img, s->offset, s->size))
		return -EBADMSG;
	if (n > HOTSPOT_VM_MAX_RELOCS)
		n = HOTSPOT_VM_MAX_RELOCS;
	*reason = "out of memory";
	if (!(f->rel = malloc((n ? n : 1) * sizeof(*f->rel))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		Elf64_Rela r;

		memcpy(&r, f->data + s->offset + i * sizeof(r), sizeof(r));
		if (ELF64_R_TYPE(r.r_info) != R_X86_64_RELATIVE)
			continue;
		if (f->n_rel && f->rel[f->n_rel - 1].offset > r.r_offset)
			sorted = false;
		f->rel[f->n_rel++] = (struct reloc){ r.r_offset, (uint64_t)r.r_addend };
	}
	if (!sorted)
		qsort(f->rel, f->n_rel, sizeof(*f->rel), cmp_reloc);
	*reason = NULL;
	return 0;
}

/* The pointer at vaddr as the dynamic loader leaves it (relocated against
 * a load address of 0: a file vaddr). */
static int vm_read_ptr(const struct vm_file *f, uint64_t vaddr, uint64_t *ret)
{
	size_t lo = 0, hi = f->n_rel;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->rel[mid].offset == vaddr) {
			*ret = f->rel[mid].addend;
			return 0;
		}
		if (f->rel[mid].offset < vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return vm_read(f, vaddr, ret, 8);
}

/* The NUL-terminated string at vaddr into buf (HOTSPOT_VM_MAX_NAME):
 * 0, or -EBADMSG (unterminated within the bound, outside, not present). */
static int vm_read_str(const struct vm_file *f, uint64_t vaddr, char *buf)
{
	for (size_t i = 0; i < HOTSPOT_VM_MAX_NAME; i++) {
		uint64_t off;

		if (vaddr + i < vaddr || vm_offset(f, vaddr + i, 1, &off) != 0 ||
		    !file_image_has(f->img, off, 1))
			return -EBADMSG;
		buf[i] = (char)f->data[off];
		if (!buf[i])
			return 0;
	}
	return -EBADMSG;
}

/* The value of dynamic symbol name, or 0 when absent. */
static uint64_t vm_dynsym(const struct vm_file *f, const char *name)
{
	const struct elf_section *sym = &f->secs[SEC_DYNSYM], *str = &f->secs[SEC_DYNSTR];
	size_t n = sym->size / sizeof(Elf64_Sym), len = strlen(name);

	if (!file_image_has(f->img, sym->offset, sym->size) ||
	    !file_image_has(f->img, str->offset, str->size))
		return 0;
	if (n > ELF_ANALYSIS_MAX_SYMBOLS)
		n = ELF_ANALYSIS_MAX_SYMBOLS;
	for (size_t i = 1; i < n; i++) {
		Elf64_Sym s;

		memcpy(&s, f->data + sym->offset + i * sizeof(s), sizeof(s));
		if (s.st_shndx == SHN_UNDEF || s.st_name >= str->size ||
		    str->size - s.st_name < len + 1)
			continue;
		if (!memcmp(f->data + str->offset + s.st_name, name, len + 1))
			return s.st_value;
	}
	return 0;
}

/* Where the static initializers' code is: from the lowest function
 * .init_array names to INIT_TAIL past the highest, inside one executable
 * segment and at most HOTSPOT_VM_MAX_INIT_CODE long. Returns 0 with the
 * file range, or -ENOENT. */
static int vm_init_code(const struct vm_file *f, uint64_t *ret_off, uint64_t *ret_len)
{
	const struct elf_section *s = &f->secs[SEC_INIT_ARRAY];
	uint64_t lo = UINT64_MAX, hi = 0;

	for (uint64_t i = 0; i < s->size / 8 && i < HOTSPOT_VM_MAX_ENTRIES; i++) {
		uint64_t fn;

		if (vm_read_ptr(f, s->addr + i * 8, &fn) < 0 || !fn || fn == UINT64_MAX)
			continue;
		if (fn < lo)
			lo = fn;
		if (fn > hi)
			hi = fn;
	}
	if (lo > hi)
		return -ENOENT;
	for (size_t i = 0; i < f->layout->n_segments; i++) {
		const struct elf_segment *g = &f->layout->segments[i];
		uint64_t end;

		if (g->type != PT_LOAD || !(g->flags & PF_X) || lo < g->vaddr ||
		    hi - g->vaddr >= g->filesz)
			continue;
		end = hi - g->vaddr + INIT_TAIL;
		if (end > g->filesz)
			end = g->filesz;
		if (end - (lo - g->vaddr) > HOTSPOT_VM_MAX_INIT_CODE)
			end = lo - g->vaddr + HOTSPOT_VM_MAX_INIT_CODE;
		*ret_off = g->offset + (lo - g->vaddr);
		*ret_len = end - (lo - g->vaddr);
		return 0;
	}
	return -ENOENT;
}

int hotspot_vm_need(const struct file_image *img, struct elf_need *need, const char **reason)
{
	struct vm_file f;
	uint64_t off, len;
	int r = vm_file_open(img, need, &f, reason);

	if (r < 0)
		goto out;
	r = -EAGAIN;
	*reason = "sections not fetched";
	if (!vm_file_sections_present(&f, need))
		goto out;
	r = -ENOENT;
	*reason = "no gHotSpotVMStructs: not a HotSpot JVM";
	if (!vm_dynsym(&f, "gHotSpotVMStructs"))
		goto out;
	if ((r = vm_load_relocs(&f, reason)) < 0)
		goto out;
	r = -ENOENT;
	*reason = "no static initializers";
	if (vm_init_code(&f, &off, &len) < 0)
		goto out;
	r = 0;
	*reason = NULL;
	if (!file_image_has(img, off, len)) {
		elf_need_add(need, off, len);
		*reason = "initializer code not fetched";
		r = -EAGAIN;
	}
out:
	vm_file_free(&f);
	return r;
}

/* Answers the queries of kind k whose type and name match. */
static void vm_answer(struct hotspot_vm_query *q, size_t n, int k, const char *type,
		      const char *name, int64_t value)
{
	for (size_t i = 0; i < n; i++) {
		if (q[i].kind != k || q[i].found || strcmp(q[i].name, name) ||
		    (type && (!q[i].type || strcmp(q[i].type, type))))
			continue;
		q[i].found = true;
		q[i].value = value;
	}
}

/* The entries of the table whose pointer is at symbol name, until the
 * NULL name that ends it: -EBADMSG if there is no end within the bound. */
static int vm_table(const struct vm_file *f, const char *name, size_t stride, uint64_t *ret_base,
		    size_t *ret_n)
{
	uint64_t sym = vm_dynsym(f, name), base, p;

	*ret_n = 0;
	if (!sym)
		return -ENOENT;
	if (vm_read_ptr(f, sym, &base) < 0 || !base)
		return -EBADMSG;
	for (size_t i = 0; i < HOTSPOT_VM_MAX_ENTRIES; i++) {
		if (vm_read_ptr(f, base + i * stride, &p) < 0)
			return -EBADMSG;
		if (!p) {
			*ret_base = base;
			*ret_n = i;
			return 0;
		}
	}
	return -EBADMSG;
}

/* offsets[i] (has[i]) from the stores into entry i's offset column. */
static void vm_scan_stores(const struct vm_file *f, uint64_t base, size_t n, int64_t *offsets,
			   bool *has)
{
	uint64_t off, len, vaddr = 0;
	const uint8_t *p;

	if (vm_init_code(f, &off, &len) < 0 || !file_image_has(f->img, off, len))
		return;
	for (size_t i = 0; i < f->layout->n_segments; i++) {
		const struct elf_segment *g = &f->layout->segments[i];

		if (g->type == PT_LOAD && off >= g->offset && off - g->offset < g->filesz)
			vaddr = g->vaddr + (off - g->offset);
	}
	p = f->data + off;
	for (uint64_t i = 0; i + STORE_LEN <= len; i++) {
		int32_t disp, imm;
		uint64_t target, col;

		if (p[i] != 0x48 || p[i + 1] != 0xc7 || p[i + 2] != 0x05)
			continue;
		memcpy(&disp, p + i + 3, 4);
		memcpy(&imm, p + i + 7, 4);
		target = vaddr + i + STORE_LEN + (uint64_t)(int64_t)disp;
		if (target < base || target - base >= (uint64_t)n * STRUCT_STRIDE)
			continue;
		col = (target - base) % STRUCT_STRIDE;
		if (col != STRUCT_OFFSET || imm < 0)
			continue;
		offsets[(target - base) / STRUCT_STRIDE] = imm;
		has[(target - base) / STRUCT_STRIDE] = true;
	}
}

/* Whether the table's offsets are the file's own (*ret): no store into
 * its offset column was found, and some non-static entry has a non-zero
 * offset in the file (Debian's JDK 11). A table filled by code (JDK 17,
 * 21) has only 0s in the file, which then read as "not found". */
static int vm_constant_table(const struct vm_file *f, uint64_t base, size_t n, const bool *has,
			     bool *ret)
{
	bool nonzero = false;

	*ret = false;
	for (size_t i = 0; i < n; i++) {
		uint64_t e = base + i * STRUCT_STRIDE, off;
		int32_t is_static;

		if (has[i])
			return 0;
		if (vm_read(f, e + STRUCT_STATIC, &is_static, 4) < 0 ||
		    vm_read(f, e + STRUCT_OFFSET, &off, 8) < 0)
			return -EBADMSG;
		if (!is_static && off)
			nonzero = true;
	}
	*ret = nonzero;
	return 0;
}

static int vm_read_structs(const struct vm_file *f, struct hotspot_vm_query *q, size_t nq,
			   const char **reason)
{
	char type[HOTSPOT_VM_MAX_NAME], field[HOTSPOT_VM_MAX_NAME];
	int64_t *offsets = NULL;
	bool *has = NULL, constant = false;
	uint64_t base;
	size_t n;
	int r = vm_table(f, "gHotSpotVMStructs", STRUCT_STRIDE, &base, &n);

	*reason = r == -ENOENT ? "no gHotSpotVMStructs: not a HotSpot JVM"
			       : "gHotSpotVMStructs damaged or not fetched";
	if (r < 0)
		return r;
	offsets = calloc(n ? n : 1, sizeof(*offsets));
	has = calloc(n ? n : 1, sizeof(*has));
	r = -ENOMEM;
	*reason = "out of memory";
	if (!offsets || !has)
		goto out;
	vm_scan_stores(f, base, n, offsets, has);
	if ((r = vm_constant_table(f, base, n, has, &constant)) < 0) {
		*reason = "a gHotSpotVMStructs entry is damaged or not fetched";
		goto out;
	}
	r = -EBADMSG;
	*reason = "a gHotSpotVMStructs entry is damaged or not fetched";
	for (size_t i = 0; i < n; i++) {
		uint64_t e = base + i * STRUCT_STRIDE, tp, fp, addr, off;
		int32_t is_static;

		if (vm_read_ptr(f, e + STRUCT_TYPE, &tp) < 0 ||
		    vm_read_ptr(f, e + STRUCT_FIELD, &fp) < 0 || !fp ||
		    vm_read(f, e + STRUCT_STATIC, &is_static, 4) < 0 ||
		    vm_read(f, e + STRUCT_OFFSET, &off, 8) < 0 ||
		    vm_read_ptr(f, e + STRUCT_ADDRESS, &addr) < 0 || vm_read_str(f, tp, type) < 0 ||
		    vm_read_str(f, fp, field) < 0)
			goto out;
		if (is_static && addr)
			vm_answer(q, nq, HOTSPOT_VM_ADDRESS, type, field, (int64_t)addr);
		else if (!is_static && (has[i] || ((off || constant) && off < INT32_MAX)))
			vm_answer(q, nq, HOTSPOT_VM_OFFSET, type, field,
				  has[i] ? offsets[i] : (int64_t)off);
	}
	r = 0;
	*reason = NULL;
out:
	free(offsets);
	free(has);
	return r;
}

/* The types' sizes and the constants (tables without stores to decode). */
static int vm_read_simple(const struct vm_file *f, const char *table, size_t stride,
			  size_t value_at, int kind, struct hotspot_vm_query *q, size_t nq)
{
	char name[HOTSPOT_VM_MAX_NAME];
	uint64_t base;
	size_t n;
	int r = vm_table(f, table, stride, &base, &n);

	if (r == -ENOENT)
		return 0; /* its queries stay unanswered */
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		uint64_t e = base + i * stride, np, v = 0;

		if (vm_read_ptr(f, e, &np) < 0 || vm_read_str(f, np, name) < 0 ||
		    vm_read(f, e + value_at, &v, kind == HOTSPOT_VM_INT ? 4 : 8) < 0)
			return -EBADMSG;
		vm_answer(q, nq, kind, NULL, name,
			  kind == HOTSPOT_VM_INT ? (int64_t)(int32_t)(uint32_t)v : (int64_t)v);
	}
	return 0;
}

int hotspot_vm_read(const struct file_image *img, struct hotspot_vm_query *q, size_t n,
		    const char **reason)
{
	struct vm_file f;
	int r = vm_file_open(img, NULL, &f, reason);

	for (size_t i = 0; i < n; i++)
		q[i].found = false;
	if (r == -EAGAIN)
		r = -EBADMSG;
	if (r < 0)
		goto out;
	r = -EBADMSG;
	*reason = "sections not fetched";
	if (!vm_file_sections_present(&f, NULL))
		goto out;
	if ((r = vm_load_relocs(&f, reason)) < 0 || (r = vm_read_structs(&f, q, n, reason)) < 0)
		goto out;
	*reason = "gHotSpotVMTypes or a constants table damaged or not fetched";
	if ((r = vm_read_simple(&f, "gHotSpotVMTypes", TYPE_STRIDE, TYPE_SIZE, HOTSPOT_VM_SIZE, q,
				n)) < 0 ||
	    (r = vm_read_simple(&f, "gHotSpotVMIntConstants", CONST_STRIDE, CONST_VALUE,
				HOTSPOT_VM_INT, q, n)) < 0 ||
	    (r = vm_read_simple(&f, "gHotSpotVMLongConstants", CONST_STRIDE, CONST_VALUE,
				HOTSPOT_VM_LONG, q, n)) < 0)
		goto out;
	*reason = NULL;
out:
	vm_file_free(&f);
	return r;
}

int hotspot_vm_read_static_int(const struct file_image *img, uint64_t vaddr, int32_t *ret)
{
	const char *reason;
	struct vm_file f;
	uint64_t off;
	int r = vm_file_open(img, NULL, &f, &reason);

	if (r < 0) {
		r = -EBADMSG;
		goto out;
	}
	r = vm_offset(&f, vaddr, 4, &off);
	if (r != 0 || !file_image_has(img, off, 4)) {
		r = r == 1 ? -ENOENT : -EBADMSG;
		goto out;
	}
	memcpy(ret, f.data + off, 4);
	r = 0;
out:
	vm_file_free(&f);
	return r;
}
