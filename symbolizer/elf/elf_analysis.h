/* elf_analysis.h - builds a symtab from an ELF file whose bytes arrive in
 * pieces.
 *
 * The analysis is resumable: elf_analysis_step() looks at what the image
 * holds, and either finishes, fails, or names the byte ranges it needs
 * next (ELF header, then program and section headers, then the symbol,
 * string and note sections). The caller fetches them (from the sensor),
 * puts them into the image and steps again. Every offset and size read
 * from the file is checked against the file size; a hostile file gives
 * -EBADMSG with a reason, never a crash or an unbounded loop.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "file_image.h"
#include "symtab.h"

#define ELF_ANALYSIS_MAX_RANGES 16
#define ELF_ANALYSIS_MAX_SYMBOLS (4u << 20)
#define ELF_ANALYSIS_MAX_SECTION (512u << 20)

struct elf_range {
	uint64_t offset;
	uint64_t length;
};

struct elf_need {
	size_t n;
	struct elf_range ranges[ELF_ANALYSIS_MAX_RANGES];
};

/* Returns:
 *   0        done: *ret_symtab is an owned symtab (maybe with 0 symbols);
 *   -EAGAIN  ranges in *need must be fetched and put into img first;
 *   -EBADMSG the file is not a valid ELF file;
 *   -ENOMEM  out of memory.
 * reason, if not NULL, receives a static human-readable string on
 * -EBADMSG. img is borrowed. */
int elf_analysis_step(const struct file_image *img, struct elf_need *need,
		      struct symtab **ret_symtab, const char **reason);

/* Merges the symbols of a separate debug file (analysed locally, whole)
 * into base: the debug file's .symtab wins where base had only .dynsym.
 * Returns a new owned symtab or NULL. The segments and build ID of base
 * are kept. */
struct symtab *symtab_merge_debug(const struct symtab *base, const struct symtab *debug);

/* Finds a separate debug file for build_id under each of dirs
 * (DIR/.build-id/xx/yyyy.debug), then by debuglink (DIR/NAME and
 * DIR/.build-id is not used for debuglink; CRC checked). Returns a malloc'd
 * path or NULL. dirs is a NULL-terminated list. */
char *elf_find_debug_file(const char *const *dirs, const uint8_t *build_id, size_t build_id_len,
			  const char *debuglink, uint32_t debuglink_crc);
