/* relative.c - see relative.h. */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "pclntab.h"
#include "relative.h"

/* The header's text start: the fourth 8-byte word (pclntab.c). */
#define TEXT_START_AT 24u

/* The next R_X86_64_RELATIVE relocation of .rela.dyn's bytes from *at
 * on: true with *ret, *at past it; false at the end. */
static bool next_relative(const uint8_t *rela, size_t size, size_t *at, Elf64_Rela *ret)
{
	while (size >= sizeof(Elf64_Rela) && *at <= size - sizeof(Elf64_Rela)) {
		memcpy(ret, rela + *at, sizeof(*ret));
		*at += sizeof(Elf64_Rela);
		if (ELF64_R_TYPE(ret->r_info) == R_X86_64_RELATIVE)
			return true;
	}
	return false;
}

bool relative_addend(const uint8_t *rela, size_t size, uint64_t where, uint64_t *ret)
{
	size_t at = 0;
	Elf64_Rela r;

	while (next_relative(rela, size, &at, &r)) {
		if (r.r_offset == where) {
			*ret = (uint64_t)r.r_addend;
			return true;
		}
	}
	return false;
}

void relative_apply(uint8_t *buf, size_t size, uint64_t addr, const uint8_t *rela,
		    size_t rela_size)
{
	size_t at = 0;
	Elf64_Rela r;

	while (next_relative(rela, rela_size, &at, &r))
		if (r.r_offset >= addr && size >= 8 && r.r_offset - addr <= size - 8)
			memcpy(buf + (r.r_offset - addr), &r.r_addend, 8);
}

int pclntab_locate_relocated(const uint8_t *relro, size_t size, uint64_t relro_addr,
			     const uint8_t *rela, size_t rela_size, size_t *ret_off,
			     uint64_t *ret_text)
{
	size_t off;

	if (pclntab_locate(relro, size, &off) < 0 ||
	    !relative_addend(rela, rela_size, relro_addr + off + TEXT_START_AT, ret_text))
		return -ENOENT;
	*ret_off = off;
	return 0;
}
