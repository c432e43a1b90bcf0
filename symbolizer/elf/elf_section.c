/* elf_section.c - see elf_section.h. */
#include <string.h>

#include "elf_section.h"
#include "pclntab.h"

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

Elf_Scn *elf_section_gopclntab(Elf *e, GElf_Shdr *ret_sh)
{
	Elf_Scn *scn = elf_section_by_name(e, PCLNTAB_SECTION, ret_sh);

	return scn ? scn : elf_section_by_name(e, PCLNTAB_SECTION_PIE, ret_sh);
}
