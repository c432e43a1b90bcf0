/* unwind.h - the unwind table format that the symbolizer compiles from
 * .eh_frame/.debug_frame, the sensor loads into BPF maps, and the BPF
 * unwinder (sample.bpf.c) searches. One header for all three, so there is
 * one definition of a row. Described in docs/unwind-tables.md.
 *
 * A table belongs to one file (by file ID) and is a sorted array of rows.
 * A row covers file offsets [row.pc, next row.pc): it is keyed by *file
 * offset*, not virtual address, because the sensor (which parses no ELF)
 * knows only /proc/PID/maps: file offset = address - mapping start +
 * mapping page offset. The symbolizer does the vaddr -> offset conversion
 * with the PT_LOAD headers when it compiles the table.
 *
 * Rows are little-endian on the wire (sonde.v1.UnwindTable.rows) and in
 * the maps. Fixed-width fields only; sizes are checked below.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SONDE_UNWIND_FORMAT_VERSION 1

/* How to find the canonical frame address (CFA) of a frame: the value of
 * the stack pointer in the caller just before the call instruction. */
enum sonde_cfa_kind {
	SONDE_CFA_SP = 1,          /* CFA = rsp + cfa_off */
	SONDE_CFA_FP = 2,          /* CFA = rbp + cfa_off */
	SONDE_CFA_PLT = 3,         /* PLT stub: CFA = rsp + 8, + 8 more when
				    * ((pc & 15) >= 11) (the gcc/ld rule for
				    * .plt entries; cfa_off unused) */
	SONDE_CFA_SIGNAL = 4,      /* the signal trampoline (__restore_rt):
				    * rsp points at the kernel's ucontext;
				    * the interrupted rip/rsp/rbp are read
				    * from its sigcontext (see unwind docs) */
	SONDE_CFA_STOP = 5,        /* the outermost frame of a process or
				    * thread (return address undefined):
				    * the stack is complete here */
	SONDE_CFA_UNSUPPORTED = 6, /* a rule the table cannot express: the
				    * unwinder tries frame pointers */
	SONDE_CFA_GO_SYSTEMSTACK = 7, /* Go's runtime.systemstack, after it
				       * moved to the thread's g0 stack: its
				       * SP and BP on the goroutine's stack
				       * are in m.curg.sched, found from g
				       * (r14 at the sample). cfa_off: m.curg's
				       * offset (SONDE_GO_* below); fp_off:
				       * systemstack's own frame there (0, or
				       * 8 where the assembler saved rbp: Go
				       * 1.21+), so CFA = sched.sp + fp_off +
				       * 8, and the caller's rbp is at CFA - 16
				       * if fp_off > 0, else sched.bp */
	SONDE_CFA_GO_ASMCGOCALL = 8,   /* Go's runtime.asmcgocall, after it
					  * moved to g0 to call C: the
					  * goroutine's g is at rsp + cfa_off
					  * (this frame's rsp, on the g0
					  * stack), the depth of asmcgocall's
					  * SP below g.stack.hi 8 bytes below
					  * that; fp_off as above */
};
#define SONDE_CFA_MAX SONDE_CFA_GO_ASMCGOCALL

/* Go's runtime structures (Go 1.19-1.23, from their DWARF): g.stack (lo,
 * hi), g.m, g.sched (a gobuf: sp, pc, g, ctxt, ret, lr, bp) and m.g0.
 * Only a row says where m.curg is, or where asmcgocall keeps g, for the Go
 * versions the symbolizer knows. */
#define SONDE_GO_G_STACK_LO 0
#define SONDE_GO_G_STACK_HI 8
#define SONDE_GO_G_M 48
#define SONDE_GO_G_SCHED 56
#define SONDE_GO_GOBUF_SP 0
#define SONDE_GO_GOBUF_BP 48
#define SONDE_GO_M_G0 0
/* The largest frame a switching function has on the goroutine's stack
 * (fp_off of those rows: 0, or 8 for a saved rbp); the symbolizer writes
 * no larger, the walker follows no larger. */
#define SONDE_GO_MAX_SWITCH_FRAME 64

/* Where the caller's rbp is. The return address is always at CFA - 8 on
 * x86-64 (a rule that says otherwise makes the row UNSUPPORTED). */
enum sonde_fp_kind {
	SONDE_FP_SAME = 0,   /* rbp unchanged in this frame */
	SONDE_FP_AT_CFA = 1, /* saved at CFA + fp_off */
};

struct sonde_unwind_row {
	__u32 pc;      /* first file offset this row covers */
	__u8 cfa_kind; /* enum sonde_cfa_kind */
	__u8 fp_kind;  /* enum sonde_fp_kind */
	__s16 fp_off;  /* SONDE_FP_AT_CFA: rbp saved at CFA + fp_off */
	__s32 cfa_off; /* SONDE_CFA_SP/FP: CFA = reg + cfa_off */
};
_Static_assert(sizeof(struct sonde_unwind_row) == 12, "sonde_unwind_row layout");

/* Limits the sensor enforces on what it is sent. */
#define SONDE_UNWIND_MAX_ROWS_PER_FILE (4u << 20)

/* ---- how the sensor loads tables into BPF maps (sample.bpf.c) ----
 *
 * `unwind_rows`: one BPF_MAP_TYPE_ARRAY for all files, whose elements are
 * buckets of SONDE_UNWIND_ROWS_PER_BUCKET rows (array elements are padded
 * to 8 bytes: 12-byte elements would waste a third). Row i is
 * bucket[i / 8].rows[i % 8]. Each loaded table is a contiguous slice
 * [row_start, row_start + row_count) of rows, sorted by pc, starting on a
 * bucket boundary (the sensor's allocator places it), so no bucket holds
 * rows of two tables; rows past row_count in the last bucket are zero.
 *
 * `unwind_lpm`: a BPF_MAP_TYPE_LPM_TRIE from (tgid, address) to the table
 * of the file mapped there. An executable mapping [start, end) is inserted
 * as the minimal set of aligned prefixes that covers it exactly. The trie
 * compares key bytes in order, so the address is big-endian; the tgid is
 * always matched in full (prefixlen >= 32), its byte order is host order.
 */
#define SONDE_UNWIND_ROWS_PER_BUCKET 8
struct sonde_unwind_bucket {
	struct sonde_unwind_row rows[SONDE_UNWIND_ROWS_PER_BUCKET];
};
_Static_assert(sizeof(struct sonde_unwind_bucket) == 96, "sonde_unwind_bucket layout");

#define SONDE_UNWIND_LPM_PID_BITS 32
struct sonde_unwind_lpm_key {
	__u32 prefixlen; /* 32 + number of leading address bits that must match */
	__u32 pid;       /* tgid, host order */
	__u64 addr_be;   /* address, big-endian */
};
_Static_assert(sizeof(struct sonde_unwind_lpm_key) == 16, "sonde_unwind_lpm_key layout");

struct sonde_unwind_lpm_value {
	__u64 bias;      /* mapping start - mapping page offset: file offset = pc - bias */
	__u64 map_start; /* the whole mapping [map_start, map_end), in every one */
	__u64 map_end;   /* of its prefixes: the walk reuses this value for the
			  * next frame when its pc falls inside, skipping the trie */
	__u32 row_start; /* first row of the file's table in unwind_rows */
	__u32 row_count; /* > 0 */
	__u32 index_start; /* first entry of the table's page index in unwind_index */
	__u32 page_base;   /* rows[0].pc >> page_shift */
	__u32 page_count;  /* entries in the page index; 0: none, search all rows */
	__u32 page_shift;  /* log2 of the bytes of file offsets one entry covers */
};
_Static_assert(sizeof(struct sonde_unwind_lpm_value) == 48, "sonde_unwind_lpm_value layout");

/* `unwind_index`: a page index per table, so a lookup binary-searches a
 * handful of rows instead of the whole table (a cache miss per halving is
 * what a frame's search cost). Entry p of a table is the last row whose pc
 * <= (page_base + p) << page_shift: the row for x is among rows
 * [entry p, entry p + 1] (the last page: [entry p, row_count - 1]) where
 * p = (x >> page_shift) - page_base. The sensor computes it from the rows
 * it was sent (unwind_index_build() in sensor/unwind_maps.c), choosing the
 * smallest page_shift >= SONDE_UNWIND_PAGE_SHIFT_MIN that keeps the index
 * within half an entry per row. Tables without room for an index go
 * without (page_count = 0). */
#define SONDE_UNWIND_PAGE_SHIFT_MIN 8
#define SONDE_UNWIND_PAGE_SHIFT_MAX 31
#define SONDE_UNWIND_INDEX_PER_BUCKET 16
struct sonde_unwind_index_bucket {
	__u32 first_row[SONDE_UNWIND_INDEX_PER_BUCKET]; /* row numbers within the table */
};
_Static_assert(sizeof(struct sonde_unwind_index_bucket) == 64, "sonde_unwind_index_bucket layout");

/* The BPF binary search halves the candidate range at most this many
 * times (a fixed bound for the verifier): enough for 2^23 rows. */
#define SONDE_UNWIND_SEARCH_STEPS 23
_Static_assert((1u << SONDE_UNWIND_SEARCH_STEPS) >= SONDE_UNWIND_MAX_ROWS_PER_FILE,
	       "binary search bound covers the largest table");
