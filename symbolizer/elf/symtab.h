/* symtab.h - the per-file symbol table: sorted function ranges with names,
 * the load segments (to turn file offsets into virtual addresses), and the
 * file's identity notes (GNU build ID, .gnu_debuglink).
 *
 * A symtab is immutable once built. It serialises to one blob (the SQLite
 * cache stores it by file ID) and deserialises with full bounds checks,
 * since a cache file is outside input too.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct symtab;

struct symtab_lookup {
	const char *name; /* borrowed from the symtab; NULL: no symbol */
	uint64_t start;   /* virtual address of the symbol */
	uint64_t offset;  /* vaddr - start */
};

/* Virtual address for a file offset, using the PT_LOAD segments. Returns 0
 * or -ENOENT when no segment covers the offset. */
int symtab_offset_to_vaddr(const struct symtab *t, uint64_t file_offset, uint64_t *ret_vaddr);
/* The function containing vaddr: the symbol with the greatest start <=
 * vaddr that covers it (size 0 symbols cover up to the next symbol).
 * Returns 0 or -ENOENT. */
int symtab_lookup(const struct symtab *t, uint64_t vaddr, struct symtab_lookup *ret);

/* GNU build ID (raw bytes, len 0 if none) and .gnu_debuglink name ("" if
 * none) with its CRC (ret_crc may be NULL). Borrowed. */
const uint8_t *symtab_build_id(const struct symtab *t, size_t *ret_len);
const char *symtab_debuglink(const struct symtab *t, uint32_t *ret_crc);
size_t symtab_count(const struct symtab *t);
/* Every name of the function that starts exactly at start: the primary
 * name first, then its aliases. Writes up to max borrowed pointers into
 * names and returns how many names there are (0: no function there). */
size_t symtab_names(const struct symtab *t, uint64_t start, const char **names, size_t max);

/* Serialisation for the cache. symtab_serialize returns a malloc'd blob
 * (caller frees) or NULL; symtab_deserialize returns NULL on any
 * inconsistency (-EBADMSG semantics). */
void *symtab_serialize(const struct symtab *t, size_t *ret_size);
struct symtab *symtab_deserialize(const void *blob, size_t size);
void symtab_free(struct symtab *t);
