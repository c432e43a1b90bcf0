/* elf_section.c - see elf_section.h. */
#include <stdlib.h>
#include <string.h>

#include "elf_section.h"
#include "pclntab.h"
#include "relative.h"

Elf_Scn *elf_section_by_name(Elf *e, const char *name, GElf_Shdr *ret_sh)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(e, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(e, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, ret_sh))
			continue;
		n = elf_strptr(e, shstrndx, ret_sh->sh_name);
		if (n && strcmp(n, name) == 0)
			return scn;
	}
	return NULL;
}

/* The raw bytes of section name, which must have some in the file. */
static Elf_Data *raw_bytes(Elf *e, const char *name, GElf_Shdr *ret_sh)
{
	Elf_Scn *scn = elf_section_by_name(e, name, ret_sh);
	Elf_Data *d;

	if (!scn || ret_sh->sh_type == SHT_NOBITS || (ret_sh->sh_flags & SHF_COMPRESSED))
		return NULL;
	d = elf_rawdata(scn, NULL);
	return d && d->d_buf && d->d_size ? d : NULL;
}

bool elf_go_table(Elf *e, struct elf_go_table *ret)
{
	Elf_Data *tab, *rela;
	GElf_Shdr sh, rsh;
	size_t off;

	memset(ret, 0, sizeof(*ret));
	if (raw_bytes(e, ".text", &sh))
		ret->text = sh.sh_addr;
	tab = raw_bytes(e, PCLNTAB_SECTION, &sh);
	if (!tab)
		tab = raw_bytes(e, PCLNTAB_SECTION_PIE, &sh);
	if (tab) {
		ret->data = tab->d_buf;
		ret->size = tab->d_size;
		ret->addr = sh.sh_addr;
		return true;
	}
	/* Only a Go binary's .data.rel.ro is searched. */
	if (!elf_section_by_name(e, ".go.buildinfo", &sh) ||
	    !(tab = raw_bytes(e, ".data.rel.ro", &sh)) || !(rela = raw_bytes(e, ".rela.dyn", &rsh)) ||
	    pclntab_locate_relocated(tab->d_buf, tab->d_size, sh.sh_addr, rela->d_buf,
				     rela->d_size, &off, &ret->text) < 0)
		return false;
	ret->data = (const uint8_t *)tab->d_buf + off;
	ret->size = tab->d_size - off;
	ret->addr = sh.sh_addr + off;
	return true;
}

uint8_t *elf_section_relocated(Elf *e, const char *name, GElf_Shdr *ret_sh)
{
	Elf_Data *d = raw_bytes(e, name, ret_sh), *rela;
	GElf_Shdr rsh;
	uint8_t *copy;

	if (!d || !(copy = malloc(d->d_size)))
		return NULL;
	memcpy(copy, d->d_buf, d->d_size);
	rela = raw_bytes(e, ".rela.dyn", &rsh);
	if (rela)
		relative_apply(copy, d->d_size, ret_sh->sh_addr, rela->d_buf, rela->d_size);
	return copy;
}
