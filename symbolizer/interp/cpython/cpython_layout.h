/* cpython_layout.h - where CPython keeps what a profiler reads: the
 * offsets BPF needs to find a thread's state, walk its interpreter frames
 * and copy a code object's name, file and line table. The symbolizer
 * picks the layout for a version (the interpreter's Loader) and
 * sends it packed (cpython_layout_pack) to the sensor, which hands it to
 * BPF without reading it.
 *
 * 3.10 to 3.13 are here (cpython_layout.c says where each table comes
 * from and which are checked against a real build); flags say how a
 * version's frame chain differs from 3.11's (SONDE_CPYTHON_* in
 * bpf/cpython.h).
 */
#pragma once

#include <stdint.h>

#include "cpython.h"

struct cpython_layout {
	uint8_t major, minor;
	uint16_t flags;                  /* SONDE_CPYTHON_* */
	/* _PyRuntime -> the first interpreter -> its threads */
	uint16_t runtime_interpreters_head;
	uint16_t interp_threads_head;
	/* PyThreadState */
	uint16_t tstate_next;
	uint16_t tstate_native_thread_id;
	uint16_t tstate_cframe;          /* 3.11-3.12: _PyCFrame *; else the frame */
	uint16_t cframe_current_frame;
	/* _PyInterpreterFrame */
	uint16_t frame_code;             /* f_code */
	uint16_t frame_previous;
	uint16_t frame_prev_instr;
	uint16_t frame_owner;            /* u8: 3 = owned by the C stack (an entry frame) */
	uint16_t frame_is_entry;         /* bool (3.11): the first frame of a C call */
	/* PyCodeObject */
	uint16_t code_qualname;
	uint16_t code_filename;
	uint16_t code_firstlineno;       /* int */
	uint16_t code_linetable;         /* bytes */
	uint16_t code_code_adaptive;     /* the bytecode, inline */
	/* strings and bytes */
	uint16_t ascii_data;             /* sizeof(PyASCIIObject): compact ASCII data */
	uint16_t bytes_data;             /* PyBytesObject.ob_sval */
	uint16_t var_size;               /* PyVarObject.ob_size */
};

/* The layout of CPython major.minor, or NULL if it is not known. */
const struct cpython_layout *cpython_layout_for(unsigned major, unsigned minor);

/* The version in an interpreter's file name: python3.11, libpython3.11.so,
 * libpython3.11.so.1.0 (basename or path). Returns 0 with major and minor
 * set, or -ENOENT. */
int cpython_version_from_name(const char *path, unsigned *major, unsigned *minor);

struct sonde_cpython_offsets;
/* l as the BPF walker's offsets (bpf/cpython.h). */
void cpython_layout_pack(const struct cpython_layout *l, struct sonde_cpython_offsets *ret);
