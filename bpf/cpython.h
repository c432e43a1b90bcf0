/* cpython.h - what the BPF CPython walker needs per process, shared by the
 * symbolizer (which computes it, symbolizer/interp/cpython/), the sensor
 * (which checks it against the limits below and copies it into the
 * interp_procs map without interpreting it) and BPF.
 * docs/interpreters.md describes the design.
 *
 * The offsets come from the symbolizer's table for the interpreter's
 * version (cpython_layout.c), little-endian on the wire
 * (sonde.v1.InterpreterConfig.layout) and in the map. A wrong table can
 * only make a wrong stack: BPF reads target memory with probe_read_user.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "interp.h"

#define SONDE_CPYTHON_FORMAT_VERSION 2

/* sonde_cpython_offsets.flags: how a version differs from 3.11's shape. */
/* tstate_cframe is the current frame itself (3.10 tstate->frame, 3.13
 * tstate->current_frame): no _PyCFrame in between. */
#define SONDE_CPYTHON_TSTATE_FRAME 0x1
/* An entry frame is the one below a shim frame whose owner byte is
 * FRAME_OWNED_BY_CSTACK (3.12, 3.13); the shim itself is not recorded. */
#define SONDE_CPYTHON_ENTRY_SHIM 0x2
/* Every frame is an entry frame: one eval call per frame (3.10). */
#define SONDE_CPYTHON_ENTRY_ALL 0x4
/* frame_prev_instr is an int, the index of the last instruction in code
 * units (3.10 f_lasti), not a pointer into the bytecode. */
#define SONDE_CPYTHON_LASTI_INDEX 0x8
/* tstate_native_thread_id holds pthread_self(), not the kernel's thread
 * id (3.10 has only thread_id): it is matched with the thread's fs base. */
#define SONDE_CPYTHON_PTHREAD_ID 0x10
#define SONDE_CPYTHON_OWNED_BY_CSTACK 3

struct sonde_cpython_offsets {
	__u8 major, minor;
	/* _PyRuntime -> the first interpreter -> its threads */
	__u16 runtime_interpreters_head;
	__u16 interp_threads_head;
	/* PyThreadState */
	__u16 tstate_next;
	__u16 tstate_native_thread_id;
	__u16 tstate_cframe;
	__u16 cframe_current_frame;
	/* _PyInterpreterFrame */
	__u16 frame_code;
	__u16 frame_previous;
	__u16 frame_prev_instr;
	__u16 frame_owner;
	/* PyCodeObject */
	__u16 code_qualname;
	__u16 code_filename;
	__u16 code_firstlineno;
	__u16 code_linetable;
	__u16 code_code_adaptive;
	/* strings and bytes */
	__u16 ascii_data;
	__u16 bytes_data;
	__u16 var_size;
	__u16 frame_is_entry;   /* bool: the first frame of a C-level call of the eval loop */
	__u16 flags;            /* SONDE_CPYTHON_* above */
	__u16 pad;
};
_Static_assert(sizeof(struct sonde_cpython_offsets) == 44, "sonde_cpython_offsets layout");

/* The walker's view of its interp_procs value (struct sonde_interp_proc of
 * kind SONDE_INTERP_CPYTHON): where this process's _PyRuntime is. */
struct sonde_cpython_proc {
	__u64 runtime_addr;
	struct sonde_cpython_offsets off;
	__u8 pad[SONDE_INTERP_CONFIG_MAX - sizeof(struct sonde_cpython_offsets)];
	__u32 kind;
	__u32 config_len;
};
_Static_assert(sizeof(struct sonde_cpython_proc) == sizeof(struct sonde_interp_proc),
	       "sonde_cpython_proc layout");
_Static_assert(__builtin_offsetof(struct sonde_cpython_proc, off) ==
		       __builtin_offsetof(struct sonde_interp_proc, config),
	       "sonde_cpython_proc layout");

/* ---- what the BPF walker records (bpf/cpython_walk.h) ---- */

#define SONDE_CPYTHON_MAX_FRAMES 32  /* interpreter frames per sample */
#define SONDE_CPYTHON_MAX_THREADS 32 /* thread states searched per sample */

/* One CPython frame in sonde_sample.frames (an InterpFrame's first word on
 * the wire; a second word, when present, is a code object checksum to
 * match, 0 or absent: any): the code object's address in
 * the low 47 bits (a user address), bit 47 set for an entry frame, the
 * byte offset of its last instruction in the bytecode in the high 16
 * (clamped). */
#define SONDE_CPYTHON_FRAME_ENTRY (1ull << 47)
#define SONDE_CPYTHON_FRAME(code, instr, entry)                                      \
	((((__u64)(instr) > 0xffff ? 0xffffull : (__u64)(instr)) << 48) |            \
	 ((entry) ? SONDE_CPYTHON_FRAME_ENTRY : 0) | ((code) & 0x7fffffffffffull))
#define SONDE_CPYTHON_FRAME_CODE(f) ((f) & 0x7fffffffffffull)
#define SONDE_CPYTHON_FRAME_INSTR(f) ((f) >> 48)

/* A code object's metadata, copied by BPF the first time a (process, code
 * object, checksum) is seen, so frames stay nameable after the process
 * exits. Fixed size, little-endian; every length is what was copied into
 * its slot. The symbolizer's decoder (symbolizer/interp/cpython/cpython_code.c)
 * checks all of it: these bytes come from the target's memory. */
#define SONDE_CPYTHON_META_VERSION 1
#define SONDE_CPYTHON_META_QUALNAME_CUT 0x1
#define SONDE_CPYTHON_META_FILENAME_CUT 0x2
#define SONDE_CPYTHON_META_LINETABLE_CUT 0x4
struct sonde_cpython_meta {
	__u16 size;      /* sizeof(struct sonde_cpython_meta) */
	__u8 version;    /* SONDE_CPYTHON_META_VERSION */
	__u8 minor;      /* 10..13: the line table's format */
	__u32 firstlineno;
	__u64 code_addr;
	__u64 checksum;  /* of the name and file pointers and first line: reuse */
	__u16 qualname_len, filename_len, linetable_len;
	__u8 flags;      /* SONDE_CPYTHON_META_*_CUT */
	__u8 pad;
	char qualname[128];
	char filename[256];
	__u8 linetable[1024];
};
_Static_assert(sizeof(struct sonde_cpython_meta) == 1440, "sonde_cpython_meta layout");

/* On the ring: a SONDE_REC_INTERP record of kind SONDE_INTERP_CPYTHON. */
struct sonde_cpython_meta_rec {
	struct sonde_interp_rec h; /* len = sizeof(struct sonde_cpython_meta) */
	struct sonde_cpython_meta meta;
};
_Static_assert(sizeof(struct sonde_cpython_meta_rec) == 1456, "sonde_cpython_meta_rec layout");
_Static_assert(sizeof(struct sonde_cpython_meta) <= SONDE_INTERP_REC_MAX, "sonde_cpython_meta size");

/* Key of the LRU map that says which code objects were already sent. */
struct sonde_cpython_code_key {
	__u32 tgid;
	__u32 pad;
	__u64 code_addr;
};

#ifndef __VMLINUX_H__
/* The sensor's bounds on a CPython config (bpf/interp_kinds.h lists them):
 * - runtime_interpreters_head and interp_threads_head are offsets in
 *   _PyRuntimeState and PyInterpreterState, which are large (3.13's
 *   threads.head is at 7344): under 32 KiB;
 * - every other offset is a field of a thread state, a frame, a code
 *   object or a str/bytes header (the largest, 3.13's
 *   code_code_adaptive, is 200): under 1 KiB;
 * - major.minor is one the symbolizer has layouts for (3.10-3.13,
 *   cpython_layout.c); BPF copies the minor into each code object record
 *   as the line table's format;
 * - runtime_offset (the _PyRuntime global, in .data of the file) at most
 *   the file's size plus 2 MiB (the image slack: up to one p_align of
 *   4 KiB on x86-64 today, 64 KiB on arm64, 2 MiB in older x86-64 links),
 *   and the first read at it (the interpreters list head, 8 bytes) inside
 *   that: so BPF's first read of a process is inside that file's image,
 *   which the process itself mapped.
 * The copies BPF makes with these offsets have lengths fixed in BPF
 * (sonde_cpython_meta's slots, the line table clamped to 1024 bytes), so
 * no length comes from the symbolizer. */
#define SONDE_CPYTHON_RUNTIME_OFF_MAX 32768
#define SONDE_CPYTHON_FIELD_OFF_MAX 1024
#define SONDE_CPYTHON_MINOR_MIN 10
#define SONDE_CPYTHON_MINOR_MAX 13
#define SONDE_CPYTHON_IMAGE_SLACK (2u << 20)
#define SONDE_CPYTHON_KNOWN_FLAGS                                                        \
	(SONDE_CPYTHON_TSTATE_FRAME | SONDE_CPYTHON_ENTRY_SHIM | SONDE_CPYTHON_ENTRY_ALL | \
	 SONDE_CPYTHON_LASTI_INDEX | SONDE_CPYTHON_PTHREAD_ID)

static inline const struct sonde_interp_limits *sonde_cpython_limits(void)
{
#define SONDE_CPY_FIELD(f, rule, lo, hi, why)                                         \
	{ __builtin_offsetof(struct sonde_cpython_offsets, f),                         \
	  sizeof(((struct sonde_cpython_offsets *)0)->f), rule, lo, hi, why }
#define SONDE_CPY_OFF(f)                                                               \
	SONDE_CPY_FIELD(f, SONDE_INTERP_RANGE, 0, SONDE_CPYTHON_FIELD_OFF_MAX - 1,    \
			"a thread, frame, code or string offset out of bounds")
	static const char version[] = "not a CPython 3.10-3.13 layout";
	static const char runtime[] = "a runtime or interpreter offset out of bounds";
	static const struct sonde_interp_field fields[] = {
		SONDE_CPY_FIELD(major, SONDE_INTERP_RANGE, 3, 3, version),
		SONDE_CPY_FIELD(minor, SONDE_INTERP_RANGE, SONDE_CPYTHON_MINOR_MIN,
				SONDE_CPYTHON_MINOR_MAX, version),
		SONDE_CPY_FIELD(runtime_interpreters_head, SONDE_INTERP_ROOT, 0,
				SONDE_CPYTHON_RUNTIME_OFF_MAX - 1, runtime),
		SONDE_CPY_FIELD(interp_threads_head, SONDE_INTERP_RANGE, 0,
				SONDE_CPYTHON_RUNTIME_OFF_MAX - 1, runtime),
		SONDE_CPY_OFF(tstate_next), SONDE_CPY_OFF(tstate_native_thread_id),
		SONDE_CPY_OFF(tstate_cframe), SONDE_CPY_OFF(cframe_current_frame),
		SONDE_CPY_OFF(frame_code), SONDE_CPY_OFF(frame_previous),
		SONDE_CPY_OFF(frame_prev_instr), SONDE_CPY_OFF(frame_owner),
		SONDE_CPY_OFF(code_qualname), SONDE_CPY_OFF(code_filename),
		SONDE_CPY_OFF(code_firstlineno), SONDE_CPY_OFF(code_linetable),
		SONDE_CPY_OFF(code_code_adaptive), SONDE_CPY_OFF(ascii_data),
		SONDE_CPY_OFF(bytes_data), SONDE_CPY_OFF(var_size),
		SONDE_CPY_OFF(frame_is_entry),
		SONDE_CPY_FIELD(flags, SONDE_INTERP_BITS, 0, SONDE_CPYTHON_KNOWN_FLAGS,
				"unknown layout flags"),
		SONDE_CPY_FIELD(pad, SONDE_INTERP_RANGE, 0, 0, "layout padding not zero"),
	};
	static const struct sonde_interp_limits limits = {
		.kind = SONDE_INTERP_CPYTHON,
		.format_version = SONDE_CPYTHON_FORMAT_VERSION,
		.config_size = sizeof(struct sonde_cpython_offsets),
		.image_slack = SONDE_CPYTHON_IMAGE_SLACK,
		.n_fields = sizeof(fields) / sizeof(fields[0]),
		.fields = fields,
	};
#undef SONDE_CPY_OFF
#undef SONDE_CPY_FIELD
	return &limits;
}
#endif
