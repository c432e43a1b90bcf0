/* php.h - what the BPF PHP walker needs per process, shared by the
 * symbolizer (which computes it, symbolizer/interp/php/), the sensor
 * (which checks it against the limits below and copies it into the
 * interp_procs map without interpreting it) and BPF.
 * docs/interpreters.md ("PHP") describes the design.
 *
 * The root is the Zend engine's executor_globals (non-ZTS builds only);
 * the offsets come from the symbolizer's table for the engine's version
 * (php_layout.c). A wrong table can only make a wrong stack: BPF reads
 * target memory with probe_read_user.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "interp.h"

#define SONDE_PHP_FORMAT_VERSION 1

/* sonde_php_offsets.flags */
/* The hybrid VM keeps the current zend_execute_data in r14 and the
 * current opline in r15 (GCC x86-64 builds' global registers), and stores
 * the opline into the frame only before calls: when the sampled thread's
 * r14 is the leaf frame and its r15 one of that function's oplines, the
 * leaf's line comes from r15. */
#define SONDE_PHP_VM_REGS 0x1

/* Zend constants the walker uses (checked against 8.2's headers by
 * test_php_frames.py). */
#define SONDE_PHP_CALL_TOP (1u << 17) /* ZEND_CALL_TOP: the frame began a C call of the VM */
#define SONDE_PHP_USER_CODE(type) (((type) & 1) == 0) /* ZEND_USER_CODE(): user or eval code */
#define SONDE_PHP_OP_SIZE 32                          /* sizeof(zend_op) on 64-bit */

struct sonde_php_offsets {
	__u8 major, minor;
	__u16 eg_current_execute_data; /* in zend_executor_globals (the root) */
	/* zend_execute_data */
	__u16 ex_opline, ex_func, ex_call_info, ex_prev;
	/* zend_function (common part, then zend_op_array) */
	__u16 fn_type, fn_flags, fn_name, fn_scope;
	__u16 op_filename, op_line_start, op_opcodes, op_last;
	/* zend_class_entry, zend_string, zend_op */
	__u16 ce_name, str_len, str_val, op_lineno;
	__u16 flags; /* SONDE_PHP_* above */
	__u16 pad;
};
_Static_assert(sizeof(struct sonde_php_offsets) == 40, "sonde_php_offsets layout");

/* The walker's view of its interp_procs value (struct sonde_interp_proc of
 * kind SONDE_INTERP_PHP): where this process's executor_globals is. */
struct sonde_php_proc {
	__u64 runtime_addr;
	struct sonde_php_offsets off;
	__u8 pad[SONDE_INTERP_CONFIG_MAX - sizeof(struct sonde_php_offsets)];
	__u32 kind;
	__u32 config_len;
};
_Static_assert(sizeof(struct sonde_php_proc) == sizeof(struct sonde_interp_proc),
	       "sonde_php_proc layout");
_Static_assert(__builtin_offsetof(struct sonde_php_proc, off) ==
		       __builtin_offsetof(struct sonde_interp_proc, config),
	       "sonde_php_proc layout");

/* ---- what the BPF walker records (bpf/php_walk.h) ---- */

#define SONDE_PHP_MAX_FRAMES 64 /* PHP frames per sample */

/* One PHP frame in sonde_sample.frames (an InterpFrame's first word on the
 * wire; a second word, when present, is a function checksum to match, 0
 * or absent: any): the zend_function's address in the low 47 bits, bit 47
 * set for a user function's frame that began a C call of the VM
 * (ZEND_CALL_TOP: it ends a run of the splice), its current line in the
 * high 16 (0: none, as for internal functions; clamped to 0xffff). */
#define SONDE_PHP_FRAME_TOP (1ull << 47)
#define SONDE_PHP_LINE_MAX 0xffffu
#define SONDE_PHP_FRAME(func, line, top)                                                 \
	((((__u64)(line) > SONDE_PHP_LINE_MAX ? (__u64)SONDE_PHP_LINE_MAX : (__u64)(line)) \
	  << 48) |                                                                        \
	 ((top) ? SONDE_PHP_FRAME_TOP : 0) | ((func) & 0x7fffffffffffull))
#define SONDE_PHP_FRAME_FUNC(f) ((f) & 0x7fffffffffffull)
#define SONDE_PHP_FRAME_LINE(f) ((__u32)((f) >> 48))

/* A function's names, copied by BPF the first time a (process, function,
 * checksum) is seen, so frames stay nameable after the process exits.
 * Fixed size, little-endian; every length is what was copied into its
 * slot. The symbolizer's decoder (symbolizer/interp/php/php_func.c) checks
 * all of it: these bytes come from the target's memory. */
#define SONDE_PHP_META_VERSION 1
#define SONDE_PHP_META_NAME_CUT 0x1
#define SONDE_PHP_META_CLASS_CUT 0x2
#define SONDE_PHP_META_FILE_CUT 0x4
struct sonde_php_meta {
	__u16 size;    /* sizeof(struct sonde_php_meta) */
	__u8 version;  /* SONDE_PHP_META_VERSION */
	__u8 type;     /* zend_function.type: 1 internal, 2 user, 4 eval code */
	__u32 fn_flags; /* ZEND_ACC_*: closures */
	__u64 func_addr;
	__u64 checksum; /* of the name, scope and file pointers and first line: reuse */
	__u32 line_start;
	__u16 name_len, class_len, file_len;
	__u8 flags;    /* SONDE_PHP_META_*_CUT */
	__u8 pad[5];
	char name[128];
	char class_name[128];
	char file[256];
};
_Static_assert(sizeof(struct sonde_php_meta) == 552, "sonde_php_meta layout");

/* On the ring: a SONDE_REC_INTERP record of kind SONDE_INTERP_PHP. */
struct sonde_php_meta_rec {
	struct sonde_interp_rec h; /* len = sizeof(struct sonde_php_meta) */
	struct sonde_php_meta meta;
};
_Static_assert(sizeof(struct sonde_php_meta_rec) == 568, "sonde_php_meta_rec layout");
_Static_assert(sizeof(struct sonde_php_meta) <= SONDE_INTERP_REC_MAX, "sonde_php_meta size");

/* Key of the LRU map that says which functions were already sent. */
struct sonde_php_func_key {
	__u32 tgid;
	__u32 pad;
	__u64 func_addr;
};

#ifndef __VMLINUX_H__
/* The sensor's bounds on a PHP config (bpf/interp_kinds.h lists them):
 * - eg_current_execute_data is an offset in zend_executor_globals (1800
 *   bytes in 8.2; 488 is the field): under 4 KiB, and the first read
 *   (8 bytes there) inside the file's image;
 * - every other offset is a field of an execute_data, a function, a class
 *   entry, a string or an opline (the largest, 8.2's op_array.filename, is
 *   152): under 1 KiB;
 * - major.minor is 8.2, the one version the symbolizer has a layout for;
 * - flags: SONDE_PHP_VM_REGS only decides whether the walker reads a
 *   line at the sampled r15, and only when r15 lies inside the leaf
 *   function's opcodes;
 * - runtime_offset (executor_globals, in .bss of the file) at most the
 *   file's size plus 2 MiB (as CPython's: the .bss lies past the file's
 *   bytes by up to its own size, and executor_globals is 1.8 KiB);
 * The copies BPF makes have lengths fixed in BPF (sonde_php_meta's slots),
 * so no length comes from the symbolizer. */
#define SONDE_PHP_ROOT_OFF_MAX 4096
#define SONDE_PHP_FIELD_OFF_MAX 1024
#define SONDE_PHP_IMAGE_SLACK (2u << 20)
#define SONDE_PHP_KNOWN_FLAGS SONDE_PHP_VM_REGS

static inline const struct sonde_interp_limits *sonde_php_limits(void)
{
#define SONDE_PHP_FIELD(f, rule, lo, hi, why)                                          \
	{ __builtin_offsetof(struct sonde_php_offsets, f),                              \
	  sizeof(((struct sonde_php_offsets *)0)->f), rule, lo, hi, why }
#define SONDE_PHP_OFF(f)                                                                \
	SONDE_PHP_FIELD(f, SONDE_INTERP_RANGE, 0, SONDE_PHP_FIELD_OFF_MAX - 1,          \
			"an execute_data, function, class, string or opline offset out of bounds")
	static const char version[] = "not a PHP 8.2 layout";
	static const struct sonde_interp_field fields[] = {
		SONDE_PHP_FIELD(major, SONDE_INTERP_RANGE, 8, 8, version),
		SONDE_PHP_FIELD(minor, SONDE_INTERP_RANGE, 2, 2, version),
		SONDE_PHP_FIELD(eg_current_execute_data, SONDE_INTERP_ROOT, 0,
				SONDE_PHP_ROOT_OFF_MAX - 1, "an executor globals offset out of bounds"),
		SONDE_PHP_OFF(ex_opline), SONDE_PHP_OFF(ex_func), SONDE_PHP_OFF(ex_call_info),
		SONDE_PHP_OFF(ex_prev), SONDE_PHP_OFF(fn_type), SONDE_PHP_OFF(fn_flags),
		SONDE_PHP_OFF(fn_name), SONDE_PHP_OFF(fn_scope), SONDE_PHP_OFF(op_filename),
		SONDE_PHP_OFF(op_line_start), SONDE_PHP_OFF(op_opcodes), SONDE_PHP_OFF(op_last),
		SONDE_PHP_OFF(ce_name), SONDE_PHP_OFF(str_len), SONDE_PHP_OFF(str_val),
		SONDE_PHP_OFF(op_lineno),
		SONDE_PHP_FIELD(flags, SONDE_INTERP_BITS, 0, SONDE_PHP_KNOWN_FLAGS,
				"unknown layout flags"),
		SONDE_PHP_FIELD(pad, SONDE_INTERP_RANGE, 0, 0, "layout padding not zero"),
	};
	static const struct sonde_interp_limits limits = {
		.kind = SONDE_INTERP_PHP,
		.format_version = SONDE_PHP_FORMAT_VERSION,
		.config_size = sizeof(struct sonde_php_offsets),
		.image_slack = SONDE_PHP_IMAGE_SLACK,
		.n_fields = sizeof(fields) / sizeof(fields[0]),
		.fields = fields,
	};
#undef SONDE_PHP_OFF
#undef SONDE_PHP_FIELD
	return &limits;
}
#endif
