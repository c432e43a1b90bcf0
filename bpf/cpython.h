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

#define SONDE_CPYTHON_FORMAT_VERSION 1

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
	__u16 pad;
};
_Static_assert(sizeof(struct sonde_cpython_offsets) == 40, "sonde_cpython_offsets layout");

/* The value of the per-tgid map: where this process's _PyRuntime is. */
struct sonde_cpython_proc {
	__u64 runtime_addr;
	struct sonde_cpython_offsets off;
};
_Static_assert(sizeof(struct sonde_cpython_proc) == 48, "sonde_cpython_proc layout");
