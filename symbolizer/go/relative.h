/* relative.h - pointers that a PIE's dynamic linker fills in.
 *
 * In a PIE linked by the system linker (Go's -linkmode=external, which
 * cgo PIE builds use), every absolute address in data is 0 in the file
 * and comes from an R_X86_64_RELATIVE relocation in .rela.dyn: the Go
 * table's text start, moduledata's pointers. Go's own linker writes the
 * value into the file as well, so reading through the relocations gives
 * the right answer for both. Packed relocations (.relr.dyn) are not
 * read. Inputs are untrusted bytes; nothing is read outside them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The addend of the R_X86_64_RELATIVE relocation of the 8 bytes at where,
 * from .rela.dyn's bytes (rela, size). */
bool relative_addend(const uint8_t *rela, size_t size, uint64_t where, uint64_t *ret);

/* Writes every R_X86_64_RELATIVE relocation's value that falls wholly
 * inside [addr, addr + size) into buf, a copy of those bytes. */
void relative_apply(uint8_t *buf, size_t size, uint64_t addr, const uint8_t *rela,
		    size_t rela_size);

/* Go's table inside relro (size bytes at relro_addr: a cgo PIE's
 * .data.rel.ro, where the table has no section of its own): its offset
 * there and its text start, which only the relocation of the header's
 * word 3 gives (.text begins with C start-up code). Returns 0, or -ENOENT. */
int pclntab_locate_relocated(const uint8_t *relro, size_t size, uint64_t relro_addr,
			     const uint8_t *rela, size_t rela_size, size_t *ret_off,
			     uint64_t *ret_text);
