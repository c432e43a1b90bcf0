/* elf_section.h - a section of a libelf handle, found by name. One loop
 * for every reader (symbols, source index, Go probe plans, DWZ links), so
 * they agree on what a damaged section table yields: nothing. And where
 * Go's function table is, for the readers that use libelf. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <gelf.h>

/* The first section called name, of any type (SHT_NOBITS included: a
 * caller that wants bytes checks sh_type), its header in *ret_sh. NULL if
 * there is none or the section names cannot be read. */
Elf_Scn *elf_section_by_name(Elf *e, const char *name, GElf_Shdr *ret_sh);
/* Go's function table: its bytes, address and text start. */
struct elf_go_table {
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	uint64_t text; /* for a header whose text start is 0 in the file */
};

/* Finds Go's function table: .gopclntab, or .data.rel.ro.gopclntab in PIE
 * builds (the linker puts it among the data that relocations fill), or in
 * a cgo PIE linked by the system linker, which gives it no section, inside
 * .data.rel.ro (relative.h). False if there is none. */
bool elf_go_table(Elf *e, struct elf_go_table *ret);

/* A copy of section name's bytes (ret_sh: its header) with the
 * R_X86_64_RELATIVE relocations of .rela.dyn applied, for pointers a PIE's
 * dynamic linker fills; the caller frees it. NULL without the section
 * (or its bytes) or memory. */
uint8_t *elf_section_relocated(Elf *e, const char *name, GElf_Shdr *ret_sh);
