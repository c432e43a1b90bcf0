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

#include <stdbool.h>
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

/* Adds [off, off+len) to need, folding it into ranges closer than 4 KiB.
 * When need is full the range is left out: a resumable step asks for it
 * again next time. Lets a caller combine the needs of two analyses of the
 * same image into one request list. */
void elf_need_add(struct elf_need *need, uint64_t off, uint64_t len);

/* ---- section and segment lookup (for other analyses of the image) ---- */

#define ELF_LAYOUT_MAX_SEGMENTS 64

struct elf_section {
	bool found;
	uint32_t type;   /* SHT_* */
	uint64_t flags;  /* SHF_* */
	uint64_t offset; /* checked: inside the file unless type is SHT_NOBITS */
	uint64_t size;
	uint64_t addr;   /* sh_addr */
};

struct elf_segment {
	uint32_t type;   /* PT_LOAD or PT_GNU_EH_FRAME */
	uint32_t flags;  /* PF_* */
	uint64_t offset; /* checked: [offset, offset+filesz) is inside the file */
	uint64_t vaddr;
	uint64_t filesz;
	uint64_t memsz;
};

struct elf_layout {
	bool is64;
	bool little_endian;
	uint16_t machine; /* e_machine */
	uint16_t type;    /* e_type */
	size_t n_segments; /* the first ELF_LAYOUT_MAX_SEGMENTS PT_LOAD and
			    * PT_GNU_EH_FRAME headers that are inside the file */
	struct elf_segment segments[ELF_LAYOUT_MAX_SEGMENTS];
};

/* Finds the sections named names[0..n) (first of each name wins) and the
 * load segments, once the ELF header, the header tables and the section
 * name table are in img. Section contents are not fetched: the caller asks
 * for what it wants with elf_need_add. Returns:
 *   0        ret_sections[i] describes names[i] (found false if absent, or
 *            if the file has no section headers), *ret_layout is filled;
 *   -EAGAIN  ranges in *need must be fetched first;
 *   -EBADMSG not a valid ELF file (*reason, if not NULL, says why).
 * img is borrowed; ret_sections and ret_layout untouched unless 0. */
int elf_sections(const struct file_image *img, struct elf_need *need, const char *const *names,
		 size_t n, struct elf_section *ret_sections, struct elf_layout *ret_layout,
		 const char **reason);

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

/* The DWZ alternate file named by the .gnu_debugaltlink of the ELF image
 * at data (size bytes; read, not changed): by its build ID under dirs,
 * else by the link's absolute name when inside one of dirs (debug.c).
 * Returns a malloc'd path, or NULL (no link, or no such file). The caller
 * checks the file's build ID against the link before using it. */
char *elf_find_alt_file(const char *const *dirs, void *data, size_t size);
