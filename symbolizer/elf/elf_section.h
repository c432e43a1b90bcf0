/* elf_section.h - a section of a libelf handle, found by name. One loop
 * for every reader (symbols, source index, Go probe plans, DWZ links), so
 * they agree on what a damaged section table yields: nothing. */
#pragma once

#include <gelf.h>

/* The first section called name, of any type (SHT_NOBITS included: a
 * caller that wants bytes checks sh_type), its header in *ret_sh. NULL if
 * there is none or the section names cannot be read. */
Elf_Scn *elf_section_by_name(Elf *e, const char *name, GElf_Shdr *ret_sh);
/* Go's function table: .gopclntab, or .data.rel.ro.gopclntab in PIE
 * builds (the linker puts it among the data that relocations fill). */
Elf_Scn *elf_section_gopclntab(Elf *e, GElf_Shdr *ret_sh);
