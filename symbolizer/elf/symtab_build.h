/* symtab_build.h - private to symbolizer/elf: how elf_analysis.c and
 * symtab_merge_debug() build a symtab.
 *
 * A builder collects (address, size, name, rank) entries in any order;
 * symtab_builder_finish() sorts them, groups them by address and picks one
 * primary name per address: the lowest rank, then the fewest leading
 * underscores, then the shorter name, then the smaller by strcmp. The
 * other distinct names at that address are kept as aliases. The size of an
 * address is the largest size among its entries (0: unsized, covers up to
 * the next address).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "symtab.h"

/* Longest name kept; longer names are skipped (they also bound how much a
 * hostile string table can make us copy). */
#define SYMTAB_MAX_NAME 8192
/* At most this many bytes of names in one symtab. */
#define SYMTAB_MAX_POOL (512u << 20)
/* At most this many addresses/aliases in one symtab (a merge of two
 * ELF_ANALYSIS_MAX_SYMBOLS tables fits). */
#define SYMTAB_MAX_ENTRIES (16u << 20)
#define SYMTAB_MAX_BUILD_ID 64
#define SYMTAB_MAX_DEBUGLINK 255
#define SYMTAB_MAX_SEGMENTS 65536

struct symtab_builder;

struct symtab_builder *symtab_builder_new(void);
void symtab_builder_free(struct symtab_builder *b);

/* name need not be NUL-terminated (name_len bytes are copied). Returns 0,
 * -E2BIG over a cap, or -ENOMEM. Names that are empty or longer than
 * SYMTAB_MAX_NAME are ignored (returns 0). */
int symtab_builder_add(struct symtab_builder *b, uint64_t start, uint64_t size, const char *name,
		       size_t name_len, unsigned rank);
/* A PT_LOAD segment. -E2BIG over SYMTAB_MAX_SEGMENTS, -EINVAL if its
 * bounds overflow, -ENOMEM. */
int symtab_builder_add_segment(struct symtab_builder *b, uint64_t offset, uint64_t vaddr,
			       uint64_t filesz, uint64_t memsz);
/* First call wins; later ones are ignored. -EINVAL if too long. */
int symtab_builder_set_build_id(struct symtab_builder *b, const uint8_t *id, size_t len);
int symtab_builder_set_debuglink(struct symtab_builder *b, const char *name, size_t len,
				 uint32_t crc);
/* Builds the symtab; b stays owned by the caller (free it after). Returns
 * 0 or -ENOMEM/-E2BIG. */
int symtab_builder_finish(struct symtab_builder *b, struct symtab **ret);
