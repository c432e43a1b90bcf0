/* debug_line.h - a bounded reader of one DWARF 2-5 line program
 * (.debug_line), private to symbolizer/dwarf.
 *
 * libdw reads line tables too, but it normalises file paths, and the
 * index must name files exactly as llvm-symbolizer does (the compilation
 * directory, include directory and file name joined without
 * normalisation), so the program is read here. Every read is checked
 * against the section; a malformed program gives -EBADMSG and whatever
 * rows came before the damage are dropped by the caller.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEBUG_LINE_MAX_FILES 1000000u
#define DEBUG_LINE_MAX_PATH 4096u

struct debug_line_sections {
	const uint8_t *line, *str, *line_str; /* .debug_line, .debug_str, .debug_line_str */
	size_t line_size, str_size, line_str_size;
};

struct debug_line_row {
	uint64_t addr;
	uint32_t file; /* index into the program's file list; UINT32_MAX: none */
	uint32_t line;
	bool end_sequence;
};

struct debug_line_table {
	uint16_t version;
	char **files;   /* full paths, malloc'd; NULL entries: no name */
	size_t n_files; /* file index as the program and DW_AT_call_file use it */
	struct debug_line_row *rows;
	size_t n_rows;
};

/* Reads the program at offset of secs->line for a unit whose
 * DW_AT_comp_dir is comp_dir (may be NULL). At most max_rows rows are kept
 * (-E2BIG beyond). Returns 0, -EBADMSG, -E2BIG or -ENOMEM; *t is filled
 * in any case (free it with debug_line_table_done). */
int debug_line_read(const struct debug_line_sections *secs, uint64_t offset, const char *comp_dir,
		    size_t max_rows, struct debug_line_table *t);
/* The same, keeping only the sequences [lo, hi) (hi: the end_sequence
 * row's address) for which keep says so, and in them the first row, the
 * end row and the rows whose span up to the next row keep wants: a
 * partial index reads only the code it was asked about, and the last row
 * at or below such an address is the same as in the whole table. A
 * sequence whose addresses go back is dropped, as a whole index drops it.
 * keep NULL: all rows. */
int debug_line_read_some(const struct debug_line_sections *secs, uint64_t offset,
			 const char *comp_dir, size_t max_rows,
			 bool (*keep)(uint64_t lo, uint64_t hi, void *ctx), void *ctx,
			 struct debug_line_table *t);
void debug_line_table_done(struct debug_line_table *t);
