/* interp_loader.c - the interpreter Loader (see interp_loader.h). */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elf_analysis.h"
#include "interp_loader.h"
#include "interp_ops.h"

int interp_loader_wants(const char *path)
{
	return interp_ops_for_path(path) != NULL;
}

int interp_loader_analyse(const struct file_image *img, const char *path, struct interp_data *ret,
			  const char **reason)
{
	const struct interp_ops *ops = interp_ops_for_path(path);

	if (!ops) {
		*reason = "not a known interpreter file name";
		return -ENOENT;
	}
	return ops->analyse(img, path, ret, reason);
}

int interp_loader_need(const struct file_image *img, const char *path, struct elf_need *need)
{
	const struct interp_ops *ops = interp_ops_for_path(path);

	if (!ops)
		return -ENOENT;
	return ops->need ? ops->need(img, need) : 0;
}

/* The dynamic symbol `name`'s value, scanning .dynsym (bounded by its
 * size and ELF_ANALYSIS_MAX_SYMBOLS). */
static int find_dynsym(const uint8_t *data, const struct elf_section *sym,
		       const struct elf_section *str, const char *name, uint64_t *ret)
{
	size_t n = sym->size / sizeof(Elf64_Sym), len = strlen(name);

	if (n > ELF_ANALYSIS_MAX_SYMBOLS)
		n = ELF_ANALYSIS_MAX_SYMBOLS;
	for (size_t i = 1; i < n; i++) {
		Elf64_Sym s;

		memcpy(&s, data + sym->offset + i * sizeof(s), sizeof(s));
		if (s.st_shndx == SHN_UNDEF || s.st_name >= str->size ||
		    str->size - s.st_name < len + 1)
			continue;
		if (!memcmp(data + str->offset + s.st_name, name, len + 1)) {
			*ret = s.st_value;
			return 0;
		}
	}
	return -ENOENT;
}

int interp_loader_find_root(const struct file_image *img, const char *symbol,
			    const char *unsupported, uint64_t *ret_offset, const char **reason)
{
	static const char *const names[] = { ".dynsym", ".dynstr" };
	struct elf_section secs[2];
	struct elf_layout *layout = NULL; /* large: 64 segments */
	struct elf_need need = { 0 };
	const char *why = NULL;
	uint64_t vaddr = 0;
	int r;

	layout = malloc(sizeof(*layout));
	*reason = "out of memory";
	r = -ENOMEM;
	if (!layout)
		goto out;
	r = elf_sections(img, &need, names, 2, secs, layout, &why);
	if (r < 0) {
		*reason = r == -EAGAIN ? "ELF headers not fetched" : (why ? why : "bad ELF");
		r = -EBADMSG;
		goto out;
	}
	r = -EPROTONOSUPPORT;
	*reason = "not a little-endian x86-64 ELF file";
	if (!layout->is64 || !layout->little_endian || layout->machine != EM_X86_64)
		goto out;
	r = -ENOENT;
	*reason = "no .dynsym/.dynstr";
	if (!secs[0].found || !secs[1].found || secs[0].type != SHT_DYNSYM ||
	    secs[1].type != SHT_STRTAB)
		goto out;
	r = -EBADMSG;
	*reason = ".dynsym/.dynstr not fetched";
	if (!file_image_has(img, secs[0].offset, secs[0].size) ||
	    !file_image_has(img, secs[1].offset, secs[1].size))
		goto out;
	r = -ENOENT;
	*reason = "no root symbol in the dynamic symbols";
	if (find_dynsym(file_image_data(img), &secs[0], &secs[1], symbol, &vaddr) < 0)
		goto out;
	r = -EPROTONOSUPPORT;
	*reason = unsupported;
	if (unsupported)
		goto out;
	/* The sensor knows only the executable mappings of a process, so the
	 * runtime's place is given in the executable segment's file
	 * coordinates: address = that mapping's start - its offset + this.
	 * The symbol itself must be in some load segment. */
	r = -EBADMSG;
	*reason = "the root symbol is not in a load segment";
	for (size_t i = 0; i < layout->n_segments; i++) {
		const struct elf_segment *g = &layout->segments[i];

		if (g->type == PT_LOAD && vaddr >= g->vaddr && vaddr - g->vaddr < g->memsz)
			r = 0;
	}
	if (r < 0)
		goto out;
	r = -EBADMSG;
	*reason = "no executable load segment";
	for (size_t i = 0; i < layout->n_segments; i++) {
		const struct elf_segment *g = &layout->segments[i];

		if (g->type != PT_LOAD || !(g->flags & PF_X))
			continue;
		if (vaddr - g->vaddr + g->offset < vaddr - g->vaddr) /* wrapped */
			break;
		*ret_offset = vaddr - g->vaddr + g->offset;
		*reason = NULL;
		r = 0;
		break;
	}
out:
	free(layout);
	return r;
}
