/* cpython.h - what the BPF CPython walker needs per process, shared by the
 * symbolizer (which computes it, symbolizer/interp/), the sensor (which
 * copies it into a BPF map per tgid without interpreting it) and BPF.
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

/* The value of the per-tgid map: where this process's _PyRuntime is. */
struct sonde_cpython_proc {
	__u64 runtime_addr;
	struct sonde_cpython_offsets off;
	__u32 pad;
};
_Static_assert(sizeof(struct sonde_cpython_proc) == 56, "sonde_cpython_proc layout");

/* ---- what the BPF walker records (bpf/cpython_walk.h) ---- */

#define SONDE_CPYTHON_MAX_FRAMES 32  /* interpreter frames per sample */
#define SONDE_CPYTHON_MAX_THREADS 32 /* thread states searched per sample */

/* One CPython frame in sonde_sample.frames: the code object's address in
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
 * its slot. The symbolizer's decoder (symbolizer/interp/cpython_code.c)
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

/* SONDE_REC_CPYTHON_META on the ring. */
struct sonde_cpython_meta_rec {
	__u32 type;
	__u32 pid; /* tgid */
	struct sonde_cpython_meta meta;
};
_Static_assert(sizeof(struct sonde_cpython_meta_rec) == 1448, "sonde_cpython_meta_rec layout");

/* Key of the LRU map that says which code objects were already sent. */
struct sonde_cpython_code_key {
	__u32 tgid;
	__u32 pad;
	__u64 code_addr;
};
