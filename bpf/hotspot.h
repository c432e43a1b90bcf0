/* hotspot.h - what the BPF HotSpot walker needs per process, shared by the
 * symbolizer (which reads it from libjvm.so's own structure tables,
 * symbolizer/interp/hotspot/), the sensor (which checks it against the
 * limits below and copies it into the interp_procs map without
 * interpreting it) and BPF. docs/interpreters.md describes the design.
 *
 * Every offset comes from the JVM's vmStructs tables of the very libjvm.so
 * the process maps (no per-build table in sonde); little-endian on the
 * wire (sonde.v1.InterpreterConfig.layout) and in the map. A wrong table
 * can only make a wrong stack: BPF reads target memory with
 * probe_read_user, and every copy's length is fixed in BPF.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "interp.h"

#define SONDE_HOTSPOT_FORMAT_VERSION 1

/* The config: runtime_addr (interp_procs) is the lowest of the CodeCache
 * statics read at sample time; the *_static fields are their distances
 * from it. Offsets are in bytes into the named HotSpot type; sizes are
 * sizeof() of the type as the JVM's table gives it; frame slots are in
 * words below the interpreter frame's fp (x86-64 frame layout). */
struct sonde_hotspot_offsets {
	__u8 major;            /* the JDK feature release, 11..21 */
	/* statics, from runtime_addr */
	__u8 codecache_low_static;   /* CodeCache::_low_bound */
	__u8 codecache_high_static;  /* CodeCache::_high_bound */
	__u8 codecache_heaps_static; /* CodeCache::_heaps */
	/* GrowableArray<CodeHeap*> */
	__u16 growable_len;  /* GrowableArrayBase::_len */
	__u16 growable_data; /* GrowableArray<int>::_data */
	/* CodeHeap and its VirtualSpaces */
	__u16 heap_memory;           /* CodeHeap::_memory */
	__u16 heap_segmap;           /* CodeHeap::_segmap */
	__u16 heap_log2_segment;     /* CodeHeap::_log2_segment_size */
	__u16 vs_low;                /* VirtualSpace::_low */
	__u16 vs_high;               /* VirtualSpace::_high */
	/* CodeBlob / nmethod */
	__u16 blob_name;             /* CodeBlob::_name */
	__u16 blob_frame_size;       /* CodeBlob::_frame_size (words) */
	__u16 blob_frame_complete;   /* CodeBlob::_frame_complete_offset */
	__u16 blob_code_begin;       /* CodeBlob::_code_begin */
	__u16 nmethod_method;        /* CompiledMethod::_method */
	__u16 nmethod_scopes_data;   /* CompiledMethod::_scopes_data_begin */
	__u16 nmethod_metadata;      /* nmethod::_metadata_offset */
	__u16 nmethod_scopes_pcs;    /* nmethod::_scopes_pcs_offset */
	__u16 nmethod_dependencies;  /* nmethod::_dependencies_offset: the PcDescs' end */
	/* Method, ConstMethod, ConstantPool, Klass, Symbol */
	__u16 method_const;          /* Method::_constMethod */
	__u16 cmethod_constants;     /* ConstMethod::_constants */
	__u16 cmethod_flags;         /* ConstMethod::_flags */
	__u16 cmethod_code_size;     /* ConstMethod::_code_size */
	__u16 cmethod_name_index;    /* ConstMethod::_name_index */
	__u16 cmethod_sig_index;     /* ConstMethod::_signature_index */
	__u16 cpool_holder;          /* ConstantPool::_pool_holder */
	/* ConstantPool::_source_file_name_index; SONDE_HOTSPOT_SOURCE_IN_KLASS
	 * plus InstanceKlass::_source_file_name_index where the index is the
	 * class's (JDK 11): the offset of the u2 index of the source file's
	 * name in the pool. */
	__u16 cpool_source_index;
	__u16 klass_name;            /* Klass::_name */
	__u8 symbol_length;          /* Symbol::_length (u2) */
	__u8 symbol_body;            /* Symbol::_body */
	__u8 heapblock_size;         /* sizeof(HeapBlock): header before a blob */
	__u8 cmethod_size;           /* sizeof(ConstMethod): bytecodes follow */
	__u8 cpool_size;             /* sizeof(ConstantPool): its slots follow */
	/* the has-line-number-table bit of ConstMethod::_flags (read as a u2:
	 * JDK 21's ConstMethodFlags is a u4 whose low bits these are) */
	__u8 cmethod_has_lines;
	__u8 frame_method_slot;      /* Method* at fp - this * 8 */
	__u8 frame_bcp_slot;         /* bcp at fp - this * 8 */
	__u8 frame_sender_sp_slot;   /* caller's sp at fp - this * 8 */
	/* nmethod::_compile_id / 4, unique per compilation in a JVM: the key
	 * check of the walker's scope cache; 0: no cache (every compiled
	 * frame's scopes decoded at each sample). Within the blob header BPF
	 * reads (HOTSPOT_BLOB_BUF). */
	__u8 nmethod_compile_id4;
};
_Static_assert(sizeof(struct sonde_hotspot_offsets) == 64, "sonde_hotspot_offsets layout");
/* cpool_source_index at or above this: less this, an offset into the
 * pool's holder (an InstanceKlass), not into the pool. */
#define SONDE_HOTSPOT_SOURCE_IN_KLASS 1024
_Static_assert(sizeof(struct sonde_hotspot_offsets) <= SONDE_INTERP_CONFIG_MAX,
	       "sonde_hotspot_offsets size");

/* The walker's view of its interp_procs value (struct sonde_interp_proc of
 * kind SONDE_INTERP_HOTSPOT): where this process's CodeCache statics are. */
struct sonde_hotspot_proc {
	__u64 runtime_addr;
	struct sonde_hotspot_offsets off;
	__u32 kind;
	__u32 config_len;
};
_Static_assert(sizeof(struct sonde_hotspot_proc) == sizeof(struct sonde_interp_proc),
	       "sonde_hotspot_proc layout");
_Static_assert(__builtin_offsetof(struct sonde_hotspot_proc, off) ==
		       __builtin_offsetof(struct sonde_interp_proc, config),
	       "sonde_hotspot_proc layout");

/* HotSpot's compressed numbers (CompressedReadStream's UNSIGNED5: the
 * scopes of compiled code, the line number table's escaped pairs): a
 * byte below 192 ends a number, each further byte weighs 6 bits more, at
 * most 5 bytes. From JDK 20 (unsigned5.hpp) no byte is 0: each is its
 * digit plus 1 (X = 1; X = 0 before), where the 192 boundary stays. The
 * JDK release (the config's major) says which: no table names it. */
#define SONDE_HOTSPOT_U5_X1_MAJOR 20

/* A compiled method's PcDesc (pcDesc.hpp, the same JDK 8 to 21; the
 * symbolizer refuses a file whose tables say otherwise): sorted by
 * pc_offset between the nmethod's scopes_pcs and dependencies offsets. */
#define SONDE_HOTSPOT_PCDESC_SIZE 16
#define SONDE_HOTSPOT_PCDESC_PC 0    /* int: pc - code_begin */
#define SONDE_HOTSPOT_PCDESC_SCOPE 4 /* int: the scope's offset in the scopes data */

/* ---- what the BPF walker records ---- */

/* One Java frame: SONDE_INTERP_JIT_WORDS words (bpf/interp.h; word 0's
 * top byte is the framework's native position). Word 0's low 56 bits:
 * the Method* in the low 47 (a user address), bit 47 set for a compiled
 * frame (an nmethod's, inlined ones included). Word 1: the bytecode index
 * in the low 16 bits (0xffff: unknown). Several frames with one native
 * position are a compiled frame's inlined methods, leaf first. */
#define SONDE_HOTSPOT_FRAME_COMPILED (1ull << 47)
#define SONDE_HOTSPOT_BCI_UNKNOWN 0xffffu
#define SONDE_HOTSPOT_WORD0(method, compiled)                                          \
	(((method) & 0x7fffffffffffull) | ((compiled) ? SONDE_HOTSPOT_FRAME_COMPILED : 0))
#define SONDE_HOTSPOT_WORD1(bci) ((__u64)((bci) > 0xffff ? 0xffff : (bci)))
#define SONDE_HOTSPOT_FRAME_METHOD(w0) ((w0) & 0x7fffffffffffull)
#define SONDE_HOTSPOT_FRAME_BCI(w1) ((__u32)((w1) & 0xffff))

/* A method's names and line table, copied by BPF the first time a
 * (process, Method*, ConstMethod*) is seen, so frames stay nameable after
 * the JVM exits or unloads the class. Fixed size, little-endian; every
 * length is what was copied into its slot. The symbolizer's decoder
 * (symbolizer/interp/hotspot/hotspot_method.c) checks all of it: these
 * bytes come from the target's memory. Symbols are HotSpot's modified
 * UTF-8, made valid UTF-8 by the decoder. */
#define SONDE_HOTSPOT_METHOD_VERSION 1
#define SONDE_HOTSPOT_METHOD_KLASS_CUT 0x1
#define SONDE_HOTSPOT_METHOD_NAME_CUT 0x2
#define SONDE_HOTSPOT_METHOD_SIG_CUT 0x4
#define SONDE_HOTSPOT_METHOD_SOURCE_CUT 0x8
#define SONDE_HOTSPOT_METHOD_LINES_CUT 0x10
#define SONDE_HOTSPOT_METHOD_HAS_LINES 0x20 /* linetable holds the line number table */
#define SONDE_HOTSPOT_METHOD_U5_X1 0x40 /* its numbers exclude the zero byte (JDK 20+) */
#define SONDE_HOTSPOT_METHOD_KNOWN                                                        \
	(SONDE_HOTSPOT_METHOD_KLASS_CUT | SONDE_HOTSPOT_METHOD_NAME_CUT |                 \
	 SONDE_HOTSPOT_METHOD_SIG_CUT | SONDE_HOTSPOT_METHOD_SOURCE_CUT |                 \
	 SONDE_HOTSPOT_METHOD_LINES_CUT | SONDE_HOTSPOT_METHOD_HAS_LINES |                \
	 SONDE_HOTSPOT_METHOD_U5_X1)
struct sonde_hotspot_method {
	__u16 size;      /* sizeof(struct sonde_hotspot_method) */
	__u8 version;    /* SONDE_HOTSPOT_METHOD_VERSION */
	__u8 flags;      /* SONDE_HOTSPOT_METHOD_* */
	__u16 code_size; /* bytes of bytecode: bcis are below it */
	__u16 pad;
	__u64 method;       /* the Method* */
	__u64 const_method; /* its ConstMethod*: a reused Method* address has another */
	__u16 klass_len, name_len, sig_len, source_len, linetable_len;
	__u16 pad2[3];
	char klass[256];  /* "java/lang/String" */
	char name[128];   /* "indexOf" */
	char sig[256];    /* "(II)I" */
	char source[64];  /* "String.java" */
	__u8 linetable[512]; /* the compressed line number table, from its start */
};
_Static_assert(sizeof(struct sonde_hotspot_method) == 1256, "sonde_hotspot_method layout");
_Static_assert(sizeof(struct sonde_hotspot_method) <= SONDE_INTERP_REC_MAX,
	       "sonde_hotspot_method size");

/* On the ring: a SONDE_REC_INTERP record of kind SONDE_INTERP_HOTSPOT. */
struct sonde_hotspot_method_rec {
	struct sonde_interp_rec h; /* len = sizeof(struct sonde_hotspot_method) */
	struct sonde_hotspot_method m;
};

/* Key of the LRU map of methods already sent (value: the ConstMethod*). */
struct sonde_hotspot_method_key {
	__u32 tgid;
	__u32 pad;
	__u64 method;
};

#ifndef __VMLINUX_H__
/* The sensor's bounds on a HotSpot config (bpf/interp_kinds.h lists them):
 * - major: a JDK whose tables the symbolizer reads (11..21);
 * - the statics are distances between CodeCache's static fields, which
 *   sit next to each other in libjvm's .bss (within 32 bytes in JDK 17):
 *   under 256 by their u8 type; each is also a first read that must lie
 *   in the file's image (the ROOT rule);
 * - offsets into Method, ConstMethod, ConstantPool, Klass, CodeBlob,
 *   nmethod, CodeHeap and GrowableArray: under 1 KiB (the largest in JDK
 *   17, nmethod's, are under 400); the source file index's, into the
 *   pool or its class, under 2 KiB with the class's flag;
 * - Symbol's fields, HeapBlock, ConstMethod and ConstantPool sizes: under
 *   256 by their u8 type; frame slots 1..16 words below fp (x86-64's
 *   interpreter frame has 10 slots);
 * - the compile id's offset (in 4-byte units, 0: none) inside the 512
 *   bytes of blob header BPF reads;
 * - runtime_offset at most the file's size plus 2 MiB (as CPython's: the
 *   image slack of one p_align).
 * The copies BPF makes have lengths fixed in BPF (the record's slots), so
 * no length comes from the symbolizer. */
#define SONDE_HOTSPOT_STATIC_MAX 256
#define SONDE_HOTSPOT_FIELD_OFF_MAX 1024
#define SONDE_HOTSPOT_MAJOR_MIN 11
#define SONDE_HOTSPOT_MAJOR_MAX 21
#define SONDE_HOTSPOT_IMAGE_SLACK (2u << 20)
#define SONDE_HOTSPOT_COMPILE_ID4_MAX 127 /* 4 bytes at most 508: in BPF's 512-byte blob header */

static inline const struct sonde_interp_limits *sonde_hotspot_limits(void)
{
#define SONDE_HS_FIELD(f, rule, lo, hi, why)                                          \
	{ __builtin_offsetof(struct sonde_hotspot_offsets, f),                         \
	  sizeof(((struct sonde_hotspot_offsets *)0)->f), rule, lo, hi, why }
#define SONDE_HS_OFF(f)                                                                \
	SONDE_HS_FIELD(f, SONDE_INTERP_RANGE, 0, SONDE_HOTSPOT_FIELD_OFF_MAX - 1,      \
		       "a HotSpot structure offset out of bounds")
#define SONDE_HS_STATIC(f)                                                             \
	SONDE_HS_FIELD(f, SONDE_INTERP_ROOT, 0, SONDE_HOTSPOT_STATIC_MAX - 1,          \
		       "a CodeCache static out of bounds")
#define SONDE_HS_SLOT(f)                                                               \
	SONDE_HS_FIELD(f, SONDE_INTERP_RANGE, 1, 16, "an interpreter frame slot out of bounds")
	static const struct sonde_interp_field fields[] = {
		SONDE_HS_FIELD(major, SONDE_INTERP_RANGE, SONDE_HOTSPOT_MAJOR_MIN,
			       SONDE_HOTSPOT_MAJOR_MAX, "not a JDK 11-21 layout"),
		SONDE_HS_STATIC(codecache_low_static), SONDE_HS_STATIC(codecache_high_static),
		SONDE_HS_STATIC(codecache_heaps_static),
		SONDE_HS_OFF(growable_len), SONDE_HS_OFF(growable_data),
		SONDE_HS_OFF(heap_memory), SONDE_HS_OFF(heap_segmap),
		SONDE_HS_OFF(heap_log2_segment), SONDE_HS_OFF(vs_low), SONDE_HS_OFF(vs_high),
		SONDE_HS_OFF(blob_name), SONDE_HS_OFF(blob_frame_size),
		SONDE_HS_OFF(blob_frame_complete), SONDE_HS_OFF(blob_code_begin),
		SONDE_HS_OFF(nmethod_method), SONDE_HS_OFF(nmethod_scopes_data),
		SONDE_HS_OFF(nmethod_metadata), SONDE_HS_OFF(nmethod_scopes_pcs),
		SONDE_HS_OFF(nmethod_dependencies), SONDE_HS_OFF(method_const),
		SONDE_HS_OFF(cmethod_constants), SONDE_HS_OFF(cmethod_flags),
		SONDE_HS_OFF(cmethod_code_size), SONDE_HS_OFF(cmethod_name_index),
		SONDE_HS_OFF(cmethod_sig_index), SONDE_HS_OFF(cpool_holder),
		SONDE_HS_FIELD(cpool_source_index, SONDE_INTERP_RANGE, 0,
			       SONDE_HOTSPOT_SOURCE_IN_KLASS + SONDE_HOTSPOT_FIELD_OFF_MAX - 1,
			       "a HotSpot structure offset out of bounds"),
		SONDE_HS_OFF(klass_name),
		SONDE_HS_OFF(symbol_length), SONDE_HS_OFF(symbol_body),
		SONDE_HS_OFF(heapblock_size), SONDE_HS_OFF(cmethod_size),
		SONDE_HS_OFF(cpool_size),
		SONDE_HS_FIELD(cmethod_has_lines, SONDE_INTERP_RANGE, 1, 0x80,
			       "a ConstMethod flag out of bounds"),
		SONDE_HS_SLOT(frame_method_slot), SONDE_HS_SLOT(frame_bcp_slot),
		SONDE_HS_SLOT(frame_sender_sp_slot),
		SONDE_HS_FIELD(nmethod_compile_id4, SONDE_INTERP_RANGE, 0,
			       SONDE_HOTSPOT_COMPILE_ID4_MAX,
			       "nmethod's compile id out of the blob header"),
	};
	static const struct sonde_interp_limits limits = {
		.kind = SONDE_INTERP_HOTSPOT,
		.format_version = SONDE_HOTSPOT_FORMAT_VERSION,
		.config_size = sizeof(struct sonde_hotspot_offsets),
		.image_slack = SONDE_HOTSPOT_IMAGE_SLACK,
		.n_fields = sizeof(fields) / sizeof(fields[0]),
		.fields = fields,
	};
#undef SONDE_HS_SLOT
#undef SONDE_HS_STATIC
#undef SONDE_HS_OFF
#undef SONDE_HS_FIELD
	return &limits;
}
#endif
