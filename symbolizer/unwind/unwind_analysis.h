/* unwind_analysis.h - compiles the unwind table of an ELF file whose bytes
 * arrive in pieces, the same resumable way as elf_analysis.h: each step
 * looks at what the image holds and either finishes, fails, or names the
 * byte ranges it needs next (ELF header, header tables, section names,
 * then .eh_frame, .eh_frame_hdr, .debug_frame and .gopclntab). A caller that also runs
 * elf_analysis_step() on the same image folds both needs into one request
 * list (elf_need_add), so the file is fetched once.
 *
 * Sources, by priority where they overlap: the mapped file's .eh_frame,
 * then Go's function table (.gopclntab: each function's SP offsets; Go
 * writes no .eh_frame, and its .debug_frame says nothing of rbp or of the
 * goroutine's outermost frame), then .debug_frame (the file's own, then that of a local separate debug
 * file), then rules synthesised for .plt/.plt.sec/.plt.got sections that
 * no FDE covers. FDE address ranges are turned into file offsets through
 * the mapped file's PT_LOAD segments; what lies outside every segment's
 * file part is dropped. Only x86-64 files are compiled.
 */
#pragma once

#include <stdint.h>

#include "elf_analysis.h"
#include "file_image.h"
#include "eh_frame.h"
#include "unwind_table.h"

/* Largest CFI section read (.eh_frame of the biggest binaries is tens of
 * MiB; the fetch budget of a job is 256 MiB). */
#define UNWIND_MAX_SECTION (128u << 20)

struct unwind_analysis_info {
	struct cfi_stats eh_frame, debug_frame, debug_file;
	bool has_eh_frame, has_eh_frame_hdr, has_debug_frame, has_debug_file;
	uint64_t eh_frame_hdr_fdes; /* fde_count of .eh_frame_hdr, 0 if none */
	uint64_t synthetic_spans;   /* .plt* ranges without FDEs */
	uint64_t go_spans;          /* ranges from Go's function table (0: none read) */
};

/* debug_img: an optional whole image of a separate debug file (borrowed,
 * NULL if none) whose .debug_frame also counts; its addresses are those of
 * the mapped file. info may be NULL. Returns:
 *   0        done: *ret_table is an owned table with at least one row;
 *   -EAGAIN  ranges in *need must be fetched and put into img first;
 *   -EBADMSG no usable table: not an x86-64 ELF file, or no call frame
 *            information that gives a row (*reason says which);
 *   -ENOMEM, -E2BIG (over the row cap).
 * img is borrowed. */
int unwind_analysis_step(const struct file_image *img, const struct file_image *debug_img,
			 struct elf_need *need, struct unwind_table **ret_table,
			 struct unwind_analysis_info *info, const char **reason);

/* For a whole image (every byte present, as an upload's): the table with
 * the debug file's .debug_frame where debug_img has one, else from img
 * alone; one computation, not both. No usable table is not an error:
 * *ret_table NULL and *reason says why. Returns 0 or -ENOMEM. */
int unwind_analysis_whole(const struct file_image *img, const struct file_image *debug_img,
			  struct unwind_table **ret_table, const char **reason);
