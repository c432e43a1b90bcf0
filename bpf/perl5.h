/* perl5.h - what the BPF Perl walker needs per process, shared by the
 * symbolizer (which computes it, symbolizer/interp/perl/), the sensor
 * (which checks it against the limits below and copies it into the
 * interp_procs map without interpreting it) and BPF.
 * docs/interpreters.md ("Perl") describes the design.
 *
 * The runtime address is PL_curinterp's: the main interpreter of a
 * threaded (MULTIPLICITY) perl. The offsets are the symbolizer's table for
 * the version (perl_layout.c), little-endian on the wire and in the map.
 * A wrong table can only make a wrong stack: BPF reads target memory with
 * probe_read_user.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "interp.h"

#define SONDE_PERL_FORMAT_VERSION 1

/* Context types (cop.h: cx_type & CXTYPEMASK) the walker names. */
#define SONDE_PERL_CXTYPEMASK 0xf
#define SONDE_PERL_CXT_SUB 9
#define SONDE_PERL_CXT_FORMAT 10
#define SONDE_PERL_CXT_EVAL 11

struct sonde_perl_offsets {
	__u8 major, minor;
	/* struct interpreter (PL_curinterp points to one) */
	__u16 interp_curcop;       /* PL_curcop: the leaf frame's current COP */
	__u16 interp_curstackinfo; /* PL_curstackinfo */
	/* struct stackinfo */
	__u16 si_cxstack;
	__u16 si_prev;
	__u16 si_cxix;             /* I32: the top context's index, -1: none */
	/* PERL_CONTEXT (an array of cx_size-byte entries) */
	__u16 cx_size;
	__u16 cx_typeoff;          /* cx_type, a U8 */
	__u16 cx_oldcop;           /* blk_oldcop: the caller's COP at the push */
	__u16 cx_sub_cv;           /* blk_sub.cv (also blk_format.cv) */
	__u16 cx_retop;            /* blk_sub.retop (also format's, eval's): NULL
				    * when a C call (call_sv, MULTICALL) pushed it */
	/* COP */
	__u16 cop_line;            /* line_t (U32) */
	__u16 cop_file;            /* char * (threaded builds) */
	/* SV head, XPVCV, XPVGV, the stash's XPVHV aux, HEK */
	__u16 sv_any;
	__u16 xcv_stash;
	__u16 xcv_gv;              /* xcv_gv_u: the GV, or a HEK when CvNAMED */
	__u16 xcv_file;
	__u16 xcv_flags;           /* U32 */
	__u16 xgv_namehek;
	__u16 xgv_stash;
	__u16 hv_aux_name;         /* in the stash's body: xhv_aux.xhv_name_u */
	__u16 hv_aux_name_count;   /* I32: non-zero: the name is names[0] */
	__u16 hek_len;             /* I32 */
	__u16 hek_key;
	__u16 cvf_named;           /* CVf_NAMED: xcv_gv is a HEK */
	__u16 interp_op;           /* PL_op: NULL between two runs of a sort's
				    * or MULTICALL's block (see perl_walk.h) */
	__u16 pad;
};
_Static_assert(sizeof(struct sonde_perl_offsets) == 54, "sonde_perl_offsets layout");

/* The walker's view of its interp_procs value (struct sonde_interp_proc
 * of kind SONDE_INTERP_PERL): where this process's PL_curinterp is. */
struct sonde_perl_proc {
	__u64 runtime_addr;
	struct sonde_perl_offsets off;
	__u8 pad[SONDE_INTERP_CONFIG_MAX - sizeof(struct sonde_perl_offsets)];
	__u32 kind;
	__u32 config_len;
};
_Static_assert(sizeof(struct sonde_perl_proc) == sizeof(struct sonde_interp_proc),
	       "sonde_perl_proc layout");
_Static_assert(__builtin_offsetof(struct sonde_perl_proc, off) ==
		       __builtin_offsetof(struct sonde_interp_proc, config),
	       "sonde_perl_proc layout");

/* ---- what the BPF walker records (bpf/perl_walk.h) ---- */

#define SONDE_PERL_MAX_FRAMES 32    /* Perl frames per sample */
#define SONDE_PERL_MAX_CONTEXTS 128 /* contexts (and stack switches) looked at */
#define SONDE_PERL_MAX_STACKS 8     /* stackinfos (sort, magic, signal) followed */

/* One Perl frame in sonde_sample.frames (an InterpFrame's word): what
 * names it in the low 47 bits, its low 3 bits the frame's type (CVs and
 * COPs are 8-byte aligned); bit 47 set for the first frame a C-level call
 * of the run loop ran (call_sv, MULTICALL, and the main program); the
 * line of the COP current in the frame in the high 16 (clamped). */
#define SONDE_PERL_FRAME_SUB 0  /* address: the CV (a sub or a format) */
#define SONDE_PERL_FRAME_MAIN 1 /* address: the COP; the main program's file scope */
#define SONDE_PERL_FRAME_EVAL 2 /* address: the COP current in the eval */
#define SONDE_PERL_FRAME_ENTRY (1ull << 47)
#define SONDE_PERL_FRAME(addr, type, line, entry)                                    \
	((((__u64)(line) > 0xffff ? 0xffffull : (__u64)(line)) << 48) |              \
	 ((entry) ? SONDE_PERL_FRAME_ENTRY : 0) | ((addr) & 0x7ffffffffff8ull) |     \
	 ((__u64)(type) & 7))
#define SONDE_PERL_FRAME_ADDR(f) ((f) & 0x7ffffffffff8ull)
#define SONDE_PERL_FRAME_TYPE(f) ((__u32)((f) & 7))
#define SONDE_PERL_FRAME_LINE(f) ((__u32)((f) >> 48))

/* What names a frame, copied by BPF the first time a (process, CV or
 * COP) is seen, so frames stay nameable after the process exits. A sub's
 * record has its name, package and file (CvFILE); a COP's (for the main
 * program's and evals' frames) only the file. Fixed size, little-endian;
 * every length is what was copied into its slot. The symbolizer's decoder
 * (symbolizer/interp/perl/perl_meta.c) checks all of it: these bytes come
 * from the target's memory. */
#define SONDE_PERL_META_VERSION 1
#define SONDE_PERL_META_SUB 1
#define SONDE_PERL_META_COP 2
#define SONDE_PERL_META_NAME_CUT 0x1
#define SONDE_PERL_META_PACKAGE_CUT 0x2
#define SONDE_PERL_META_FILE_CUT 0x4
struct sonde_perl_meta {
	__u16 size;     /* sizeof(struct sonde_perl_meta) */
	__u8 version;   /* SONDE_PERL_META_VERSION */
	__u8 type;      /* SONDE_PERL_META_SUB or _COP */
	__u32 pad0;
	__u64 addr;     /* the CV or COP */
	__u64 checksum; /* as the walker's dedup map holds it: reuse */
	__u16 name_len, package_len, file_len;
	__u8 flags;     /* SONDE_PERL_META_*_CUT */
	__u8 pad1;
	char name[128];
	char package[128];
	char file[256];
};
_Static_assert(sizeof(struct sonde_perl_meta) == 544, "sonde_perl_meta layout");
_Static_assert(sizeof(struct sonde_perl_meta) <= SONDE_INTERP_REC_MAX, "sonde_perl_meta size");

/* On the ring: a SONDE_REC_INTERP record of kind SONDE_INTERP_PERL. */
struct sonde_perl_meta_rec {
	struct sonde_interp_rec h; /* len = sizeof(struct sonde_perl_meta) */
	struct sonde_perl_meta meta;
};
_Static_assert(sizeof(struct sonde_perl_meta_rec) == 560, "sonde_perl_meta_rec layout");

/* Key of the LRU map that says which CVs and COPs were already sent. */
struct sonde_perl_seen_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr; /* the frame word's address and type bits */
};

#ifndef __VMLINUX_H__
/* The sensor's bounds on a Perl config (bpf/interp_kinds.h lists them):
 * - major.minor is one the symbolizer has a layout for (5.36,
 *   perl_layout.c);
 * - the interpreter's fields are offsets in struct interpreter (3,768
 *   bytes in 5.36, PL_curstackinfo at 224): under 8 KiB;
 * - cx_size is one PERL_CONTEXT (104 bytes in 5.36): 16 to 256, and every
 *   other offset is a field of a stackinfo, a context, a COP, an SV head
 *   or body or a HEK (the largest, xcv_flags, is 92): under 256;
 * - cvf_named is one flag bit (CVf_NAMED, 0x8000 in 5.36);
 * - runtime_offset (PL_curinterp, in .bss of the file) at most the file's
 *   size plus 2 MiB (as CPython's: one p_align of slack), and the first
 *   read at it (8 bytes) inside that, so BPF's first read of a process is
 *   inside that file's image.
 * The copies BPF makes have lengths fixed in BPF (sonde_perl_meta's
 * slots), so no length comes from the symbolizer. */
#define SONDE_PERL_INTERP_OFF_MAX 8192
#define SONDE_PERL_FIELD_OFF_MAX 256
#define SONDE_PERL_IMAGE_SLACK (2u << 20)

static inline const struct sonde_interp_limits *sonde_perl_limits(void)
{
#define SONDE_PERL_FIELD(f, rule, lo, hi, why)                                        \
	{ __builtin_offsetof(struct sonde_perl_offsets, f),                            \
	  sizeof(((struct sonde_perl_offsets *)0)->f), rule, lo, hi, why }
#define SONDE_PERL_OFF(f)                                                              \
	SONDE_PERL_FIELD(f, SONDE_INTERP_RANGE, 0, SONDE_PERL_FIELD_OFF_MAX - 1,      \
			 "a stack, context, COP, SV or HEK offset out of bounds")
	static const char version[] = "not a Perl 5.36 layout";
	static const char interp[] = "an interpreter offset out of bounds";
	static const struct sonde_interp_field fields[] = {
		SONDE_PERL_FIELD(major, SONDE_INTERP_RANGE, 5, 5, version),
		SONDE_PERL_FIELD(minor, SONDE_INTERP_RANGE, 36, 36, version),
		/* No SONDE_INTERP_ROOT field: the first read is PL_curinterp
		 * itself, 8 bytes at runtime_offset, which the validator
		 * checks without one. */
		SONDE_PERL_FIELD(interp_curcop, SONDE_INTERP_RANGE, 0,
				 SONDE_PERL_INTERP_OFF_MAX - 1, interp),
		SONDE_PERL_FIELD(interp_curstackinfo, SONDE_INTERP_RANGE, 0,
				 SONDE_PERL_INTERP_OFF_MAX - 1, interp),
		SONDE_PERL_OFF(si_cxstack), SONDE_PERL_OFF(si_prev), SONDE_PERL_OFF(si_cxix),
		SONDE_PERL_FIELD(cx_size, SONDE_INTERP_RANGE, 16, 256,
				 "a context size out of bounds"),
		SONDE_PERL_OFF(cx_typeoff), SONDE_PERL_OFF(cx_oldcop), SONDE_PERL_OFF(cx_sub_cv),
		SONDE_PERL_OFF(cx_retop), SONDE_PERL_OFF(cop_line), SONDE_PERL_OFF(cop_file),
		SONDE_PERL_OFF(sv_any), SONDE_PERL_OFF(xcv_stash), SONDE_PERL_OFF(xcv_gv),
		SONDE_PERL_OFF(xcv_file), SONDE_PERL_OFF(xcv_flags), SONDE_PERL_OFF(xgv_namehek),
		SONDE_PERL_OFF(xgv_stash), SONDE_PERL_OFF(hv_aux_name),
		SONDE_PERL_OFF(hv_aux_name_count), SONDE_PERL_OFF(hek_len),
		SONDE_PERL_OFF(hek_key),
		SONDE_PERL_FIELD(cvf_named, SONDE_INTERP_BITS, 0, 0x8000,
				 "CVf_NAMED not the known flag bit"),
		SONDE_PERL_FIELD(interp_op, SONDE_INTERP_RANGE, 0, SONDE_PERL_INTERP_OFF_MAX - 1,
				 interp),
		SONDE_PERL_FIELD(pad, SONDE_INTERP_RANGE, 0, 0, "layout padding not zero"),
	};
	static const struct sonde_interp_limits limits = {
		.kind = SONDE_INTERP_PERL,
		.format_version = SONDE_PERL_FORMAT_VERSION,
		.config_size = sizeof(struct sonde_perl_offsets),
		.image_slack = SONDE_PERL_IMAGE_SLACK,
		.n_fields = sizeof(fields) / sizeof(fields[0]),
		.fields = fields,
	};
#undef SONDE_PERL_OFF
#undef SONDE_PERL_FIELD
	return &limits;
}
#endif
