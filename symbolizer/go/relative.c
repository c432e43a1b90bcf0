/* relative.c - see relative.h. */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "pclntab.h"
#include "relative.h"

/* The header's text start: the fourth 8-byte word (pclntab.c). */
#define TEXT_START_AT 24u

bool relative_addend(const uint8_t *rela, size_t size, uint64_t where, uint64_t *ret)
{
	for (size_t at = 0; size >= sizeof(Elf64_Rela) && at <= size - sizeof(Elf64_Rela);
	     at += sizeof(Elf64_Rela)) {
		Elf64_Rela r;

		memcpy(&r, rela + at, sizeof(r));
		if (r.r_offset == where && ELF64_R_TYPE(r.r_info) == R_X86_64_RELATIVE) {
			*ret = (uint64_t)r.r_addend;
			return true;
		}
	}
	return false;
}

void relative_apply(uint8_t *buf, size_t size, uint64_t addr, const uint8_t *rela,
		    size_t rela_size)
{
	for (size_t at = 0; rela_size >= sizeof(Elf64_Rela) && at <= rela_size - sizeof(Elf64_Rela);
	     at += sizeof(Elf64_Rela)) {
		Elf64_Rela r;

		memcpy(&r, rela + at, sizeof(r));
		if (ELF64_R_TYPE(r.r_info) != R_X86_64_RELATIVE || r.r_offset < addr ||
		    size < 8 || r.r_offset - addr > size - 8)
			continue;
		memcpy(buf + (r.r_offset - addr), &r.r_addend, 8);
	}
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
