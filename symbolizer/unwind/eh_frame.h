/* eh_frame.h - a bounded parser and CFA interpreter for DWARF call frame
 * information (.eh_frame and .debug_frame) of x86-64 files, private to
 * symbolizer/unwind.
 *
 * cfi_parse() walks every CIE/FDE of one section, runs the call frame
 * instructions of each FDE and reports, through a callback, the virtual
 * address ranges of the FDE with the unwind rule (struct sonde_unwind_row,
 * pc unused) that holds there. The section is target-controlled bytes:
 * every length is checked against the section, and CIEs, FDEs,
 * instructions per FDE and the remember_state stack are capped, so a
 * hostile section costs bounded time and memory and never crashes.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind.h"

#define CFI_MAX_ENTRIES (4u << 20)       /* CIEs + FDEs per section */
#define CFI_MAX_INSNS_PER_FDE 100000u    /* CIE initial + FDE instructions */
#define CFI_MAX_STATE_DEPTH 64u          /* DW_CFA_remember_state nesting */
#define CFI_MAX_ROWS_PER_FDE 65536u

enum cfi_kind {
	CFI_EH_FRAME = 0,
	CFI_DEBUG_FRAME = 1,
};

struct cfi_section {
	const uint8_t *data; /* borrowed, size bytes */
	uint64_t size;
	uint64_t addr;       /* sh_addr: base of DW_EH_PE_pcrel */
	uint64_t text_addr;  /* base of DW_EH_PE_textrel; 0: unknown */
	uint64_t data_addr;  /* base of DW_EH_PE_datarel; 0: unknown */
	enum cfi_kind kind;
	unsigned addr_size;  /* 8 (ELF64) or 4 (ELF32) */
};

struct cfi_stats {
	uint64_t cies, fdes;       /* parsed */
	uint64_t bad_entries;      /* CIEs/FDEs skipped as malformed */
	uint64_t unsupported_rows; /* rows that became SONDE_CFA_UNSUPPORTED */
	const char *first_error;   /* static, or NULL */
};

/* Called for each range [start, end) (virtual addresses, start < end) of
 * each FDE, in the FDE's order. row->pc is 0. Return 0 to go on, or a
 * negative errno to stop the walk (cfi_parse returns it). */
typedef int (*cfi_emit_fn)(void *ctx, uint64_t start, uint64_t end,
			   const struct sonde_unwind_row *row);

/* Parses sec. Malformed entries whose length is sane are skipped (counted
 * in stats->bad_entries); a length that leaves the section ends the walk.
 * Returns 0 (maybe with skipped entries: a partial table), -EBADMSG if
 * the section held entries but none could be used (*reason says why), or
 * what emit returned. stats may be NULL. */
int cfi_parse(const struct cfi_section *sec, cfi_emit_fn emit, void *ctx,
	      struct cfi_stats *stats, const char **reason);

/* Decodes one pointer with DW_EH_PE encoding enc at sec->data + pos (for
 * .eh_frame_hdr). Returns 0 with *ret and *ret_next (the position after
 * it), or -EBADMSG (truncated, unknown or indirect encoding). */
int cfi_read_pointer(const struct cfi_section *sec, uint64_t pos, uint8_t enc, uint64_t *ret,
		     uint64_t *ret_next);
