/* ruby.h - what the BPF Ruby (MRI/YARV) walker needs per process, shared
 * by the symbolizer (which computes it, symbolizer/interp/ruby/), the
 * sensor (which checks it against the limits below and copies it into the
 * interp_procs map without interpreting it) and BPF.
 * docs/interpreters.md ("Ruby") describes the design.
 *
 * The runtime root is the exported global ruby_current_vm_ptr. From the VM
 * the walker goes to the main ractor's running execution context (the one
 * holding the GVL) and walks its control frames. The offsets come from the
 * symbolizer's table for the version (ruby_layout.c), little-endian on the
 * wire and in the map. A wrong table can only make a wrong stack: BPF
 * reads target memory with probe_read_user.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "interp.h"

#define SONDE_RUBY_FORMAT_VERSION 1

struct sonde_ruby_offsets {
	__u8 major, minor;
	/* rb_vm_t (the root's pointee) */
	__u8 vm_main_ractor;
	/* rb_execution_context_t */
	__u8 ec_vm_stack, ec_vm_stack_size, ec_cfp, ec_thread;
	/* rb_thread_t: the kernel thread id (int) */
	__u8 thread_tid;
	/* rb_control_frame_t */
	__u8 cfp_size, cfp_pc, cfp_iseq, cfp_ep;
	/* rb_iseq_t -> rb_iseq_constant_body */
	__u8 iseq_body;
	__u8 body_iseq_size, body_iseq_encoded, body_path, body_base_label, body_label;
	__u8 body_first_lineno, body_insns_body, body_insns_size, body_succ;
	__u8 insn_info_size; /* sizeof(struct iseq_insn_info_entry); line_no first */
	/* method entries, definitions, classes, st tables */
	__u8 me_def, me_owner, def_original_id, class_ext, ext_iv_tbl;
	__u8 st_entries_start, st_entries_bound, st_entries;
	/* RString and RArray */
	__u8 str_heap_len, str_heap_ptr, str_embed, ary_heap_ptr, ary_embed;
	/* global_symbols.ids is element ids_index of the first chunk of
	 * vm->mark_object_ary (registered by Init_sym, early and in a fixed
	 * order). */
	__u8 ids_index;
	__u8 ary_heap_len;
	__u16 vm_ptr_off;        /* the first read: runtime + this holds the rb_vm_t * */
	__u16 vm_mark_object_ary; /* rb_vm_t */
	__u16 ractor_running_ec;  /* rb_ractor_t: threads.running_ec */
	__u16 id_classpath;       /* the ID of the ivar __classpath__ */
	__u16 id_attached;        /* the ID of the ivar __attached__ (singleton classes) */
	__u16 pad;
};
_Static_assert(sizeof(struct sonde_ruby_offsets) == 50, "sonde_ruby_offsets layout");

/* The walker's view of its interp_procs value (struct sonde_interp_proc of
 * kind SONDE_INTERP_RUBY): where this process's ruby_current_vm_ptr is. */
struct sonde_ruby_proc {
	__u64 runtime_addr;
	struct sonde_ruby_offsets off;
	__u8 pad[SONDE_INTERP_CONFIG_MAX - sizeof(struct sonde_ruby_offsets)];
	__u32 kind;
	__u32 config_len;
};
_Static_assert(sizeof(struct sonde_ruby_proc) == sizeof(struct sonde_interp_proc),
	       "sonde_ruby_proc layout");
_Static_assert(__builtin_offsetof(struct sonde_ruby_proc, off) ==
		       __builtin_offsetof(struct sonde_interp_proc, config),
	       "sonde_ruby_proc layout");

/* Ruby's own constants the walker tests (the same in 3.0-3.3's headers:
 * ruby/internal/value_type.h, fl_type.h, vm_core.h, internal/imemo.h). */
#define SONDE_RUBY_T_MASK 0x1f
#define SONDE_RUBY_T_CLASS 0x02
#define SONDE_RUBY_T_MODULE 0x03
#define SONDE_RUBY_T_STRING 0x05
#define SONDE_RUBY_T_ARRAY 0x07
#define SONDE_RUBY_T_IMEMO 0x1a
#define SONDE_RUBY_FL_SINGLETON (1ull << 12) /* FL_USER0 */
#define SONDE_RUBY_STR_NOEMBED (1ull << 13)  /* RSTRING_NOEMBED (FL_USER1) */
#define SONDE_RUBY_ARY_EMBED (1ull << 13)    /* RARRAY_EMBED_FLAG (FL_USER1) */
#define SONDE_RUBY_STR_EMBED_LEN(flags) (((flags) >> 14) & 0x1f)
#define SONDE_RUBY_ARY_EMBED_LEN(flags) (((flags) >> 15) & 0x3)
#define SONDE_RUBY_IMEMO_TYPE(flags) (((flags) >> 12) & 0xf)
#define SONDE_RUBY_IMEMO_SVAR 2
#define SONDE_RUBY_IMEMO_MENT 6
#define SONDE_RUBY_FRAME_MAGIC_MASK 0x7fff0001ull
#define SONDE_RUBY_FRAME_MAGIC_CFUNC 0x55550001ull
#define SONDE_RUBY_FRAME_MAGIC_DUMMY 0x79990001ull /* the thread's root frame */
#define SONDE_RUBY_FRAME_FLAG_FINISH 0x20ull
#define SONDE_RUBY_FRAME_FLAG_CFRAME 0x80ull
#define SONDE_RUBY_ENV_FLAG_LOCAL 0x2ull
#define SONDE_RUBY_LAST_OP_ID 0xa9 /* IDs up to it are operators: serial = ID */
#define SONDE_RUBY_ID_SCOPE_SHIFT 4
#define SONDE_RUBY_ID_ENTRY_UNIT 512

/* ---- what the BPF walker records (bpf/ruby_walk.h) ---- */

#define SONDE_RUBY_MAX_FRAMES 48 /* control frames looked at per sample */

/* One Ruby frame in sonde_sample.frames (an InterpFrame's first word on
 * the wire; a second word, when present, is a checksum to match, 0 or
 * absent: any): the iseq's or (cfunc frames) the method entry's address
 * in the low 47 bits, bit 0 set for a cfunc frame (both are 8-aligned
 * heap objects), bit 47 set for a frame the VM entered from C (a
 * "finish" frame: the first of one native rb_vm_exec call), and for iseq
 * frames the pc's index in the iseq's encoded instructions (in words,
 * clamped) in the high 16. */
#define SONDE_RUBY_FRAME_FINISH (1ull << 47)
#define SONDE_RUBY_FRAME_CFUNC 1ull
#define SONDE_RUBY_FRAME(addr, pc, finish)                                          \
	((((__u64)(pc) > 0xffff ? 0xffffull : (__u64)(pc)) << 48) |                  \
	 ((finish) ? SONDE_RUBY_FRAME_FINISH : 0) | ((addr) & 0x7fffffffffffull))
#define SONDE_RUBY_FRAME_ADDR(f) ((f) & 0x7ffffffffffeull)
#define SONDE_RUBY_FRAME_IS_CFUNC(f) (((f) & SONDE_RUBY_FRAME_CFUNC) != 0)
#define SONDE_RUBY_FRAME_PC(f) ((f) >> 48)

/* What names an iseq or a cfunc, copied by BPF the first time a (process,
 * address, checksum) is seen, so frames stay nameable after the process
 * exits. Fixed size, little-endian; every length is what was copied into
 * its slot. The symbolizer's decoder (symbolizer/interp/ruby/ruby_meta.c)
 * checks all of it: these bytes come from the target's memory.
 * - iseq: label ("block in foo"), base label ("foo"), the owner's class
 *   path of the method the iseq belongs to (empty: none), path, first
 *   line, and the line table: the iseq's succinct index table of
 *   instruction positions (imm_part, then 80-byte blocks) and its
 *   insns_info entries (insn_info_size bytes each, line number first),
 *   both cut to their slots;
 * - cfunc: label = the method's name, class = its owner's class path. */
#define SONDE_RUBY_META_VERSION 1
#define SONDE_RUBY_META_ISEQ 1
#define SONDE_RUBY_META_CFUNC 2
#define SONDE_RUBY_META_SINGLETON 0x1 /* the owner is a singleton class: "Class.name" */
#define SONDE_RUBY_META_LABEL_CUT 0x2
#define SONDE_RUBY_META_CLASS_CUT 0x4
#define SONDE_RUBY_META_PATH_CUT 0x8
#define SONDE_RUBY_META_LINES_CUT 0x10
#define SONDE_RUBY_META_LABEL 96
#define SONDE_RUBY_META_BASE 64
#define SONDE_RUBY_META_CLASS 96
#define SONDE_RUBY_META_PATH 256
#define SONDE_RUBY_META_SUCC 208 /* imm_part (48) and two 80-byte blocks: 1,078 words */
#define SONDE_RUBY_META_LINES 1152 /* 96 entries of 12 bytes */
struct sonde_ruby_meta {
	__u16 size;    /* sizeof(struct sonde_ruby_meta) */
	__u8 version;  /* SONDE_RUBY_META_VERSION */
	__u8 type;     /* SONDE_RUBY_META_ISEQ or _CFUNC */
	__u32 first_lineno;
	__u64 addr;
	__u64 checksum; /* of the name pointers: reuse of the address */
	__u32 iseq_size;  /* words of encoded instructions */
	__u32 insns_size; /* insns_info entries of the iseq (not only those copied) */
	__u16 label_len, base_len, class_len, path_len;
	__u16 succ_len, lines_len; /* bytes copied */
	__u8 flags;               /* SONDE_RUBY_META_* */
	__u8 insn_info_size;
	__u8 pad[2];
	char label[SONDE_RUBY_META_LABEL];
	char base[SONDE_RUBY_META_BASE];
	char klass[SONDE_RUBY_META_CLASS];
	char path[SONDE_RUBY_META_PATH];
	__u8 succ[SONDE_RUBY_META_SUCC];
	__u8 lines[SONDE_RUBY_META_LINES];
};
_Static_assert(sizeof(struct sonde_ruby_meta) == 1920, "sonde_ruby_meta layout");
_Static_assert(sizeof(struct sonde_ruby_meta) <= SONDE_INTERP_REC_MAX, "sonde_ruby_meta size");

/* On the ring: a SONDE_REC_INTERP record of kind SONDE_INTERP_RUBY. */
struct sonde_ruby_meta_rec {
	struct sonde_interp_rec h; /* len = sizeof(struct sonde_ruby_meta) */
	struct sonde_ruby_meta meta;
};

/* Key of the LRU map that says which iseqs and cfuncs were already sent. */
struct sonde_ruby_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr;
};

#ifndef __VMLINUX_H__
/* The sensor's bounds on a Ruby config (bpf/interp_kinds.h lists them):
 * - major.minor is one the symbolizer has a layout for (3.1,
 *   ruby_layout.c);
 * - vm_ptr_off is the walker's first read, 8 bytes at the root plus it:
 *   0 in every layout, at most 4095, and that read inside the file's
 *   image (the image slack is CPython's, for the same reason: the global
 *   is in .bss, up to one p_align past the file's end);
 * - vm_mark_object_ary and ractor_running_ec are offsets in rb_vm_t and
 *   rb_ractor_t, which are large (3.1: 328 and 520): under 4 KiB;
 * - every one-byte field is an offset in a small structure (a control
 *   frame, an iseq body, a string header, ...) or a small count: a byte
 *   bounds it; insn_info_size is 8..16 and cfp_size 48..96 (the walker
 *   steps by it), ids_index under 16;
 * - the ivar IDs are predefined static IDs (3.1: 3841, 3089): non-zero.
 * The copies BPF makes with these offsets have lengths fixed in BPF (the
 * record's slots), so no length comes from the symbolizer. */
#define SONDE_RUBY_VM_OFF_MAX 4096
#define SONDE_RUBY_IMAGE_SLACK (2u << 20)

static inline const struct sonde_interp_limits *sonde_ruby_limits(void)
{
#define SONDE_RB_FIELD(f, rule, lo, hi, why)                                          \
	{ __builtin_offsetof(struct sonde_ruby_offsets, f),                            \
	  sizeof(((struct sonde_ruby_offsets *)0)->f), rule, lo, hi, why }
#define SONDE_RB_OFF(f)                                                                \
	SONDE_RB_FIELD(f, SONDE_INTERP_RANGE, 0, 255, "a structure offset out of bounds")
	static const char version[] = "not a Ruby 3.1 layout";
	static const char vm[] = "a VM or ractor offset out of bounds";
	static const struct sonde_interp_field fields[] = {
		SONDE_RB_FIELD(major, SONDE_INTERP_RANGE, 3, 3, version),
		SONDE_RB_FIELD(minor, SONDE_INTERP_RANGE, 1, 1, version),
		SONDE_RB_OFF(vm_main_ractor), SONDE_RB_OFF(ec_vm_stack),
		SONDE_RB_OFF(ec_vm_stack_size), SONDE_RB_OFF(ec_cfp), SONDE_RB_OFF(ec_thread),
		SONDE_RB_OFF(thread_tid),
		SONDE_RB_FIELD(cfp_size, SONDE_INTERP_RANGE, 48, 96,
			       "a control frame size out of bounds"),
		SONDE_RB_OFF(cfp_pc), SONDE_RB_OFF(cfp_iseq), SONDE_RB_OFF(cfp_ep),
		SONDE_RB_OFF(iseq_body), SONDE_RB_OFF(body_iseq_size),
		SONDE_RB_OFF(body_iseq_encoded), SONDE_RB_OFF(body_path),
		SONDE_RB_OFF(body_base_label), SONDE_RB_OFF(body_label),
		SONDE_RB_OFF(body_first_lineno), SONDE_RB_OFF(body_insns_body),
		SONDE_RB_OFF(body_insns_size), SONDE_RB_OFF(body_succ),
		SONDE_RB_FIELD(insn_info_size, SONDE_INTERP_RANGE, 8, 16,
			       "an insn_info entry size out of bounds"),
		SONDE_RB_OFF(me_def), SONDE_RB_OFF(me_owner), SONDE_RB_OFF(def_original_id),
		SONDE_RB_OFF(class_ext), SONDE_RB_OFF(ext_iv_tbl),
		SONDE_RB_OFF(st_entries_start), SONDE_RB_OFF(st_entries_bound),
		SONDE_RB_OFF(st_entries), SONDE_RB_OFF(str_heap_len), SONDE_RB_OFF(str_heap_ptr),
		SONDE_RB_OFF(str_embed), SONDE_RB_OFF(ary_heap_ptr), SONDE_RB_OFF(ary_embed),
		SONDE_RB_FIELD(ids_index, SONDE_INTERP_RANGE, 0, 15,
			       "the symbol table's index out of bounds"),
		SONDE_RB_OFF(ary_heap_len),
		SONDE_RB_FIELD(vm_ptr_off, SONDE_INTERP_ROOT, 0, SONDE_RUBY_VM_OFF_MAX - 1, vm),
		SONDE_RB_FIELD(vm_mark_object_ary, SONDE_INTERP_RANGE, 0,
			       SONDE_RUBY_VM_OFF_MAX - 1, vm),
		SONDE_RB_FIELD(ractor_running_ec, SONDE_INTERP_RANGE, 0,
			       SONDE_RUBY_VM_OFF_MAX - 1, vm),
		SONDE_RB_FIELD(id_classpath, SONDE_INTERP_RANGE, 1, 0xffff, "an ivar ID of 0"),
		SONDE_RB_FIELD(id_attached, SONDE_INTERP_RANGE, 1, 0xffff, "an ivar ID of 0"),
		SONDE_RB_FIELD(pad, SONDE_INTERP_RANGE, 0, 0, "layout padding not zero"),
	};
	static const struct sonde_interp_limits limits = {
		.kind = SONDE_INTERP_RUBY,
		.format_version = SONDE_RUBY_FORMAT_VERSION,
		.config_size = sizeof(struct sonde_ruby_offsets),
		.image_slack = SONDE_RUBY_IMAGE_SLACK,
		.n_fields = sizeof(fields) / sizeof(fields[0]),
		.fields = fields,
	};
#undef SONDE_RB_OFF
#undef SONDE_RB_FIELD
	return &limits;
}
#endif
