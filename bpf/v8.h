/* v8.h - what the BPF V8 walker needs per process, shared by the
 * symbolizer (which reads it from the node binary's v8dbg_* constants,
 * symbolizer/interp/v8/), the sensor (which checks it against the limits
 * below and copies it into the interp_procs map) and BPF.
 * docs/interpreters.md ("V8") describes the design.
 *
 * V8 is a JIT kind (bpf/interp.h, "JIT frames"): its frames are found
 * inside the native walk, by the frame pointer chain V8 keeps in all its
 * code, and each JavaScript frame is recorded with the native frame it
 * stands for. A wrong table can only make a wrong stack: BPF reads target
 * memory with probe_read_user, at the offsets below.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "interp.h"

#define SONDE_V8_FORMAT_VERSION 2

/* The walker's config: where the embedded builtins are and the object
 * layout. Offsets below fp are positive (the frame slot is at fp - n);
 * object field offsets are from the object's start (a tagged pointer - 1).
 * Names are the v8dbg_* constants they come from, where V8 has one. */
struct sonde_v8_offsets {
	/* The embedded builtins' code starts at the runtime address (the
	 * symbol v8_Default_embedded_blob_code_) and is this long
	 * (v8_Default_embedded_blob_code_size_). */
	__u32 blob_size;
	__u8 fp_context;         /* off_fp_context_or_frame_type */
	__u8 fp_function;        /* off_fp_function */
	__u8 fp_bytecode_array;  /* off_fp_bytecode_array */
	__u8 fp_bytecode_offset; /* off_fp_bytecode_offset */
	__u8 map_instance_type;  /* class_Map__instance_type__uint16_t */
	__u8 fn_shared;          /* class_JSFunction__shared__SharedFunctionInfo */
	__u8 fn_code;            /* JSFunction's code: the slot after raw_feedback_cell */
	__u8 sfi_name;           /* class_SharedFunctionInfo__name_or_scope_info__Object */
	__u8 sfi_script;         /* class_SharedFunctionInfo__script_or_debug_info__HeapObject */
	__u8 script_name;        /* class_Script__name__Object */
	__u8 string_length;      /* class_String__length__int32_t */
	__u8 seq_chars;          /* class_SeqOneByteString__chars__char */
	__u8 thin_actual;        /* class_ThinString__actual__String */
	__u8 code_start;         /* Code: its instruction start (a raw pointer) */
	__u8 code_size;          /* Code: its instruction size (u32) */
	/* ScopeInfo (a function's name when its SFI has scope info): the
	 * first variable slot (8 * (1 + scopeinfo_idx_first_vars)), the most
	 * context local names kept inline (else one hash table slot), and the
	 * flags' function-variable bits and saved-class-variable bit (V8
	 * 10-11's ScopeFlags; no v8dbg constant). */
	__u8 scope_first_slot;
	__u8 scope_max_inlined;
	__u8 scope_fv_shift;
	__u8 scope_saved_class_bit;
	__u8 string_rep_mask;    /* StringRepresentationMask */
	__u8 string_seq_tag;     /* SeqStringTag */
	__u8 string_thin_tag;    /* ThinStringTag */
	__u8 string_onebyte;     /* OneByteStringTag (the encoding bit) */
	__u8 pad0;
	__u16 type_sfi;          /* type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE */
	__u16 type_scope_info;   /* type_ScopeInfo__SCOPE_INFO_TYPE */
	__u16 type_script;       /* type_Script__SCRIPT_TYPE */
	__u16 type_bytecode_array; /* type_BytecodeArray__BYTECODE_ARRAY_TYPE */
	__u16 type_code;         /* type_Code__CODE_TYPE */
	__u16 first_nonstring;   /* FirstNonstringType */
	__u8 major, minor;       /* V8's version, as far as the symbolizer knows it */
	__u8 code_table;         /* class_Code__source_position_table__ByteArray */
	__u8 array_length;       /* class_FixedArrayBase__length__SMI */
	__u8 array_data;         /* class_FixedArray__data__uintptr_t: a ByteArray's bytes too */
	__u8 script_source;      /* class_Script__source__Object */
	/* A BytecodeArray's source position table (no v8dbg constant: 11.x
	 * keeps it after the constant pool and the handler table, a ByteArray
	 * too) and its first bytecode (class_BytecodeArray__data__uintptr_t).
	 * 0: not known (a config analysed before they were read): no lines
	 * for interpreted frames. */
	__u8 bytecode_table;
	__u8 bytecode_data;
	/* An optimised Code's deoptimization data
	 * (class_Code__deoptimization_data__FixedArray) and, in that
	 * FixedArray, the indices of the inlined functions' count, the
	 * literal array (the inlined SharedFunctionInfos first) and the
	 * inlining positions (DeoptimizationData*Index). code_deopt 0: not
	 * known (node lacks the constants): optimised frames are not split
	 * into their inlined functions. */
	__u8 code_deopt;
	__u8 deopt_count;
	__u8 deopt_literals;
	__u8 deopt_inlining;
	/* The bytecodes' lengths (V8's
	 * interpreter::Bytecodes::kBytecodeSizes, in the file's read-only
	 * data: a table of n_bytecodes bytes for each operand scale, 1, 2
	 * and 4), as an offset from the runtime address; BPF copies it once
	 * per process for the lines of baseline frames. 0: not known (no
	 * such symbol, or before the embedded builtins in the file): baseline
	 * frames have no line. */
	__u32 bytecode_sizes;
	__u8 n_bytecodes;
	__u8 pad1;
	__u16 pad2;
};
_Static_assert(sizeof(struct sonde_v8_offsets) == 60, "sonde_v8_offsets layout");

/* The walker's view of its interp_procs value. */
struct sonde_v8_proc {
	__u64 runtime_addr; /* the embedded builtins' code */
	struct sonde_v8_offsets off;
	__u8 pad[SONDE_INTERP_CONFIG_MAX - sizeof(struct sonde_v8_offsets)];
	__u32 kind;
	__u32 config_len;
};
_Static_assert(sizeof(struct sonde_v8_proc) == sizeof(struct sonde_interp_proc),
	       "sonde_v8_proc layout");
_Static_assert(__builtin_offsetof(struct sonde_v8_proc, off) ==
		       __builtin_offsetof(struct sonde_interp_proc, config),
	       "sonde_v8_proc layout");

/* ---- what the walker records (bpf/v8_walk.h) ---- */

/* A V8 frame: SONDE_INTERP_JIT_WORDS words. Word 0: the
 * SharedFunctionInfo (a tagged pointer, low 48 bits), the frame's tier in
 * bits 48-51, the native position in the top byte (bpf/interp.h). Word 1:
 * the code position, in the low 32 bits (0xffffffff: not known) with the
 * address >> 3 of the object whose position table maps it in the high
 * 32 (a later record may describe it): for an interpreted frame the
 * bytecode offset in its BytecodeArray; for the others the pc's offset in
 * the function's current Code (0xffffffff: the pc is not in it). */
#define SONDE_V8_TIER_INTERPRETED 1
#define SONDE_V8_TIER_BASELINE 2
#define SONDE_V8_TIER_OPTIMIZED 3
#define SONDE_V8_WORD0(sfi, tier) (((sfi) & 0xffffffffffffull) | ((__u64)((tier) & 0xf) << 48))
#define SONDE_V8_SFI(w0) ((w0) & 0xffffffffffffull)
#define SONDE_V8_TIER(w0) ((__u32)((w0) >> 48) & 0xf)
#define SONDE_V8_NO_PC 0xffffffffu

/* A SharedFunctionInfo's names, copied by BPF the first time a (process,
 * SFI, checksum) is seen, so frames stay nameable after the process exits.
 * Fixed size, little-endian; every length is what was copied into its
 * slot (bytes: a two-byte string's are UTF-16LE). The symbolizer's
 * decoder (symbolizer/interp/v8/v8_sfi.c) checks all of it: these bytes
 * come from the target's memory. */
#define SONDE_V8_META_VERSION 1
#define SONDE_V8_META_NAME_CUT 0x1     /* the name filled its slot */
#define SONDE_V8_META_SCRIPT_CUT 0x2   /* the script name filled its slot */
#define SONDE_V8_META_NAME_TWO_BYTE 0x4
#define SONDE_V8_META_SCRIPT_TWO_BYTE 0x8
#define SONDE_V8_META_NO_NAME 0x10     /* a function without a name: (anonymous) */
#define SONDE_V8_META_NO_SCRIPT 0x20   /* no script (a builtin, native code) */
struct sonde_v8_meta {
	__u16 size;    /* sizeof(struct sonde_v8_meta) */
	__u8 version;  /* SONDE_V8_META_VERSION */
	__u8 flags;    /* SONDE_V8_META_* */
	__u16 name_len, script_len;
	__u64 sfi;
	__u64 checksum; /* of the name and script pointers: a reused SFI address */
	char name[128];
	char script[256];
};
_Static_assert(sizeof(struct sonde_v8_meta) == 408, "sonde_v8_meta layout");

/* On the ring: a SONDE_REC_INTERP record of kind SONDE_INTERP_V8. */
struct sonde_v8_meta_rec {
	struct sonde_interp_rec h; /* len = sizeof(struct sonde_v8_meta) */
	struct sonde_v8_meta meta;
};
_Static_assert(sizeof(struct sonde_v8_meta_rec) == 424, "sonde_v8_meta_rec layout");
_Static_assert(sizeof(struct sonde_v8_meta) <= SONDE_INTERP_REC_MAX, "sonde_v8_meta size");

/* A Code object's source position table (pc offset -> script offset),
 * or a BytecodeArray's (bytecode offset -> script offset; flag
 * SONDE_V8_CODE_BYTECODE), copied the first time a (process, object) is
 * seen, with the SFI and script it belongs to. The key is what a frame's
 * word 1 carries: the low 32 bits of the object's address >> 3. */
#define SONDE_V8_CODE_VERSION 1
#define SONDE_V8_CODE_TABLE_CUT 0x1
#define SONDE_V8_CODE_BYTECODE 0x2
#define SONDE_V8_CODE_TABLE_MAX 1024
struct sonde_v8_code {
	__u16 size;    /* sizeof(struct sonde_v8_code) */
	__u8 version;  /* SONDE_V8_CODE_VERSION */
	__u8 flags;    /* SONDE_V8_CODE_* */
	__u16 table_len;
	__u16 pad;
	__u64 code;
	__u64 sfi;
	__u64 script;
	__u8 table[SONDE_V8_CODE_TABLE_MAX];
};
_Static_assert(sizeof(struct sonde_v8_code) == 1056, "sonde_v8_code layout");

/* A baseline (Sparkplug) Code's bytecode offset table (its pc offsets
 * per bytecode: an unsigned VLQ for the prologue, then one per bytecode
 * of its BytecodeArray in order) and that BytecodeArray's bytecodes,
 * copied the first time a (process, Code) is seen: the symbolizer walks
 * the two together to find the bytecode a pc is in, then the line in the
 * BytecodeArray's own position table (struct sonde_v8_code, flag
 * SONDE_V8_CODE_BYTECODE). Past what was copied (a cut table or
 * bytecodes) a pc has no line. */
#define SONDE_V8_BASELINE_VERSION 1
#define SONDE_V8_BASELINE_TABLE_CUT 0x1
#define SONDE_V8_BASELINE_BYTECODES_CUT 0x2
#define SONDE_V8_BASELINE_TABLE_MAX 512
#define SONDE_V8_BASELINE_BYTECODES_MAX 1504
struct sonde_v8_baseline {
	__u16 size;    /* sizeof(struct sonde_v8_baseline) */
	__u8 version;  /* SONDE_V8_BASELINE_VERSION */
	__u8 flags;    /* SONDE_V8_BASELINE_* */
	__u16 table_len, bytecodes_len;
	__u64 code;           /* the baseline Code */
	__u64 bytecode_array; /* its BytecodeArray */
	__u64 pad;
	__u8 table[SONDE_V8_BASELINE_TABLE_MAX];
	__u8 bytecodes[SONDE_V8_BASELINE_BYTECODES_MAX];
};
_Static_assert(sizeof(struct sonde_v8_baseline) == 2048, "sonde_v8_baseline layout");
_Static_assert(sizeof(struct sonde_v8_baseline) <= SONDE_INTERP_REC_MAX, "sonde_v8_baseline size");

/* The process's bytecode lengths (the config's bytecode_sizes: 3 *
 * n_bytecodes bytes), copied once per process, before its first baseline
 * record. */
#define SONDE_V8_SIZES_VERSION 1
#define SONDE_V8_SIZES_MAX 768 /* 3 scales * 256 bytecodes */
struct sonde_v8_sizes {
	__u16 size;    /* sizeof(struct sonde_v8_sizes) */
	__u8 version;  /* SONDE_V8_SIZES_VERSION */
	__u8 pad;
	__u16 n_bytecodes;
	__u16 len;     /* bytes copied: 3 * n_bytecodes */
	__u8 sizes[SONDE_V8_SIZES_MAX];
};
_Static_assert(sizeof(struct sonde_v8_sizes) == 776, "sonde_v8_sizes layout");

struct sonde_v8_baseline_rec {
	struct sonde_interp_rec h;
	struct sonde_v8_baseline b;
};
struct sonde_v8_sizes_rec {
	struct sonde_interp_rec h;
	struct sonde_v8_sizes sz;
};

/* One chunk of a script's source (a sequential one-byte string), copied
 * the first time a (process, script) is seen: the symbolizer counts lines
 * in it. At most SONDE_V8_SOURCE_CHUNKS chunks a script. */
#define SONDE_V8_SOURCE_VERSION 1
#define SONDE_V8_SOURCE_CHUNK 1536
#define SONDE_V8_SOURCE_CHUNKS 32
struct sonde_v8_source {
	__u16 size;    /* sizeof(struct sonde_v8_source) */
	__u8 version;  /* SONDE_V8_SOURCE_VERSION */
	__u8 index;    /* the chunk's index: bytes [index * CHUNK, + len) */
	__u16 len;
	__u16 pad;
	__u32 total;   /* the source's length */
	__u32 pad2;
	__u64 script;
	char bytes[SONDE_V8_SOURCE_CHUNK];
};
_Static_assert(sizeof(struct sonde_v8_source) == 1560, "sonde_v8_source layout");

/* An optimised Code's inlining data (from its deoptimization data),
 * copied with its position table the first time a (process, Code) is
 * seen: the SharedFunctionInfos of the functions inlined into it (the
 * first n_fns entries of its literal array, the weak bit cleared) with
 * their scripts, and its InliningPositions (V8's PodArray: 16 bytes an
 * entry, the caller's SourcePosition and the inlined function's index in
 * fns, -1: the Code's own function), as BPF copied them. The symbolizer
 * splits a frame whose position has an inlining id into the chain of
 * functions it stands for (symbolizer/interp/v8/v8_inline.c). */
#define SONDE_V8_INLINE_VERSION 1
#define SONDE_V8_INLINE_FNS 16
#define SONDE_V8_INLINE_POS_MAX 1024
#define SONDE_V8_INLINE_FNS_CUT 0x1 /* more inlined functions than fns */
#define SONDE_V8_INLINE_POS_CUT 0x2 /* more positions than fit */
struct sonde_v8_inline {
	__u16 size;    /* sizeof(struct sonde_v8_inline) */
	__u8 version;  /* SONDE_V8_INLINE_VERSION */
	__u8 flags;    /* SONDE_V8_INLINE_* */
	__u16 n_fns;   /* entries of fns and scripts copied */
	__u16 pos_len; /* bytes of positions copied */
	__u64 code;
	__u64 fns[SONDE_V8_INLINE_FNS];
	__u64 scripts[SONDE_V8_INLINE_FNS];
	__u8 positions[SONDE_V8_INLINE_POS_MAX];
};
_Static_assert(sizeof(struct sonde_v8_inline) == 1296, "sonde_v8_inline layout");
_Static_assert(sizeof(struct sonde_v8_inline) <= SONDE_INTERP_REC_MAX, "sonde_v8_inline size");

struct sonde_v8_inline_rec {
	struct sonde_interp_rec h;
	struct sonde_v8_inline inl;
};

struct sonde_v8_code_rec {
	struct sonde_interp_rec h;
	struct sonde_v8_code code;
};
struct sonde_v8_source_rec {
	struct sonde_interp_rec h;
	struct sonde_v8_source src;
};

/* Key of the LRU maps that say which SFIs, Code objects and scripts were
 * already sent. */
struct sonde_v8_sfi_key {
	__u32 tgid;
	__u32 pad;
	__u64 sfi;
};

#ifndef __VMLINUX_H__
/* The sensor's bounds on a V8 config (bpf/interp_kinds.h lists them):
 * - blob_size: the embedded builtins (1.6 MiB in Node 20) under 64 MiB,
 *   and the range [runtime offset, + blob_size) inside the file's image
 *   (a ROOT field: the walker claims pcs there, and reads nothing);
 * - frame slots: V8's fixed frame slots are a few words below fp: under
 *   128 bytes, 8-aligned in V8 but only bounded here;
 * - object field offsets: V8's object headers are a few words: under
 *   256 (a byte); the ScopeInfo bits under 31 (a Smi's value);
 * - deoptimization data indices: V8 11's fixed entries are the first
 *   dozen of the FixedArray: under 32;
 * - instance types: V8's are under 4096 (11.3's largest is about 2200);
 * - string tags: representation mask and tags under 16, the encoding bit
 *   under 256;
 * - runtime_offset (the embedded code, in .text) at most the file's size
 *   plus 2 MiB (as CPython's: one p_align of slack);
 * - bytecode_sizes: a ROOT field whose whole copy (SONDE_V8_SIZES_MAX
 *   bytes) lies inside the file's image, n_bytecodes any byte: BPF copies
 *   3 * n_bytecodes bytes there, the only length a config sets.
 * The other copies BPF makes have lengths fixed in BPF (sonde_v8_meta's
 * slots, 1 KiB of a Code's position table, 16 inlined functions and 1 KiB
 * of inlining positions, 32 chunks of 1.5 KiB of a script's source, 512
 * bytes of a baseline Code's offset table and 1,504 of its bytecodes). */
#define SONDE_V8_BLOB_MAX (64u << 20)
#define SONDE_V8_IMAGE_SLACK (2u << 20)
#define SONDE_V8_SIZES_OFF_MAX (1u << 30)

static inline const struct sonde_interp_limits *sonde_v8_limits(void)
{
#define SONDE_V8_FIELD(f, rule, lo, hi, why)                                          \
	{ __builtin_offsetof(struct sonde_v8_offsets, f),                             \
	  sizeof(((struct sonde_v8_offsets *)0)->f), rule, lo, hi, why }
#define SONDE_V8_SLOT(f) SONDE_V8_FIELD(f, SONDE_INTERP_RANGE, 8, 127, "a frame slot out of bounds")
#define SONDE_V8_OFF(f) SONDE_V8_FIELD(f, SONDE_INTERP_RANGE, 0, 255, "an object offset out of bounds")
#define SONDE_V8_BIT(f) SONDE_V8_FIELD(f, SONDE_INTERP_RANGE, 0, 30, "a scope info bit out of bounds")
#define SONDE_V8_TYPE(f) SONDE_V8_FIELD(f, SONDE_INTERP_RANGE, 1, 4095, "an instance type out of bounds")
#define SONDE_V8_TAG(f) SONDE_V8_FIELD(f, SONDE_INTERP_RANGE, 0, 15, "a string tag out of bounds")
#define SONDE_V8_INDEX(f) \
	SONDE_V8_FIELD(f, SONDE_INTERP_RANGE, 0, 31, "a deoptimization data index out of bounds")
	static const struct sonde_interp_field fields[] = {
		SONDE_V8_FIELD(blob_size, SONDE_INTERP_ROOT, 1, SONDE_V8_BLOB_MAX,
			       "the embedded builtins' size out of bounds"),
		SONDE_V8_SLOT(fp_context), SONDE_V8_SLOT(fp_function),
		SONDE_V8_SLOT(fp_bytecode_array), SONDE_V8_SLOT(fp_bytecode_offset),
		SONDE_V8_OFF(map_instance_type), SONDE_V8_OFF(fn_shared), SONDE_V8_OFF(fn_code),
		SONDE_V8_OFF(sfi_name), SONDE_V8_OFF(sfi_script), SONDE_V8_OFF(script_name),
		SONDE_V8_OFF(string_length), SONDE_V8_OFF(seq_chars), SONDE_V8_OFF(thin_actual),
		SONDE_V8_OFF(code_start), SONDE_V8_OFF(code_size), SONDE_V8_OFF(scope_first_slot),
		SONDE_V8_OFF(scope_max_inlined), SONDE_V8_BIT(scope_fv_shift),
		SONDE_V8_BIT(scope_saved_class_bit), SONDE_V8_TAG(string_rep_mask),
		SONDE_V8_TAG(string_seq_tag), SONDE_V8_TAG(string_thin_tag),
		SONDE_V8_OFF(string_onebyte),
		SONDE_V8_FIELD(pad0, SONDE_INTERP_RANGE, 0, 0, "layout padding not zero"),
		SONDE_V8_FIELD(pad1, SONDE_INTERP_RANGE, 0, 0, "layout padding not zero"),
		SONDE_V8_FIELD(pad2, SONDE_INTERP_RANGE, 0, 0, "layout padding not zero"),
		SONDE_V8_FIELD(n_bytecodes, SONDE_INTERP_RANGE, 0, 255,
			       "a bytecode count out of bounds"),
		{ __builtin_offsetof(struct sonde_v8_offsets, bytecode_sizes), 4, SONDE_INTERP_ROOT, 0,
		  SONDE_V8_SIZES_OFF_MAX, "the bytecode lengths' offset out of bounds",
		  SONDE_V8_SIZES_MAX },
		SONDE_V8_TYPE(type_sfi),
		SONDE_V8_TYPE(type_scope_info), SONDE_V8_TYPE(type_script),
		SONDE_V8_TYPE(type_bytecode_array), SONDE_V8_TYPE(type_code),
		SONDE_V8_TYPE(first_nonstring),
		SONDE_V8_FIELD(major, SONDE_INTERP_RANGE, 0, 255, "a V8 version out of bounds"),
		SONDE_V8_FIELD(minor, SONDE_INTERP_RANGE, 0, 255, "a V8 version out of bounds"),
		SONDE_V8_OFF(code_table), SONDE_V8_OFF(array_length), SONDE_V8_OFF(array_data),
		SONDE_V8_OFF(script_source), SONDE_V8_OFF(bytecode_table),
		SONDE_V8_OFF(bytecode_data), SONDE_V8_OFF(code_deopt), SONDE_V8_INDEX(deopt_count),
		SONDE_V8_INDEX(deopt_literals), SONDE_V8_INDEX(deopt_inlining),
	};
	static const struct sonde_interp_limits limits = {
		.kind = SONDE_INTERP_V8,
		.format_version = SONDE_V8_FORMAT_VERSION,
		.config_size = sizeof(struct sonde_v8_offsets),
		.image_slack = SONDE_V8_IMAGE_SLACK,
		.n_fields = sizeof(fields) / sizeof(fields[0]),
		.fields = fields,
	};
#undef SONDE_V8_INDEX
#undef SONDE_V8_TAG
#undef SONDE_V8_TYPE
#undef SONDE_V8_BIT
#undef SONDE_V8_OFF
#undef SONDE_V8_SLOT
#undef SONDE_V8_FIELD
	return &limits;
}
#endif
