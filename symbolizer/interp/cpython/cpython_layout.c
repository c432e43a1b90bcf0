/* cpython_layout.c - CPython layouts (see cpython_layout.h). */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "cpython.h"
#include "cpython_layout.h"

/* The tables are x86-64 (LP64) offsets written from each version's headers
 * (Include/cpython/pystate.h, code.h, frameobject.h or
 * internal/pycore_frame.h, pycore_interp.h, pycore_runtime.h). Which of
 * them a test checks against a real build is in docs/interpreters.md. */

/* 3.10: PyFrameObject chain (f_back); one _PyEval_EvalFrameDefault call per
 * frame; f_lasti counts code units; no native_thread_id, only
 * thread_id = pthread_self(); code objects have no co_qualname. */
static const struct cpython_layout layout_310 = {
	.major = 3,
	.minor = 10,
	.flags = SONDE_CPYTHON_TSTATE_FRAME | SONDE_CPYTHON_ENTRY_ALL |
		 SONDE_CPYTHON_LASTI_INDEX | SONDE_CPYTHON_PTHREAD_ID,
	.runtime_interpreters_head = 32, /* 4 ints, _finalizing, mutex */
	.interp_threads_head = 8,        /* next, tstate_head */
	.tstate_next = 8,
	.tstate_native_thread_id = 176,  /* thread_id */
	.tstate_cframe = 24,             /* frame */
	.frame_code = 32,                /* PyObject_VAR_HEAD, f_back, f_code */
	.frame_previous = 24,            /* f_back */
	.frame_prev_instr = 96,          /* int f_lasti */
	.code_qualname = 112,            /* co_name */
	.code_filename = 104,
	.code_firstlineno = 40,
	.code_linetable = 120,
	.ascii_data = 48,
	.bytes_data = 32,
	.var_size = 16,
};

/* 3.11: _PyInterpreterFrame reached through tstate->cframe; an entry frame
 * says so itself (is_entry). Checked against the DWARF of pyenv's build. */
static const struct cpython_layout layout_311 = {
	.major = 3,
	.minor = 11,
	.runtime_interpreters_head = 40,
	.interp_threads_head = 16,
	.tstate_next = 8,
	.tstate_native_thread_id = 160,
	.tstate_cframe = 56,
	.cframe_current_frame = 8,
	.frame_code = 32,
	.frame_previous = 48,
	.frame_prev_instr = 56,
	.frame_owner = 69,
	.frame_is_entry = 68, /* int stacktop at 64, then bool is_entry, then owner */
	.code_qualname = 128,
	.code_filename = 112,
	.code_firstlineno = 72,
	.code_linetable = 136,
	.code_code_adaptive = 184,
	.ascii_data = 48,
	.bytes_data = 32,
	.var_size = 16,
};

/* 3.12: f_code first in the frame, _PyCFrame is {current_frame, previous},
 * is_entry gone: each C call of the eval loop pushes a shim frame owned by
 * the C stack below its first frame. PyASCIIObject lost wstr. */
static const struct cpython_layout layout_312 = {
	.major = 3,
	.minor = 12,
	.flags = SONDE_CPYTHON_ENTRY_SHIM,
	.runtime_interpreters_head = 40,
	.interp_threads_head = 72, /* after monitoring and restart versions */
	.tstate_next = 8,
	.tstate_native_thread_id = 144,
	.tstate_cframe = 56,
	.cframe_current_frame = 0,
	.frame_code = 0,
	.frame_previous = 8,
	.frame_prev_instr = 56,
	.frame_owner = 70, /* int stacktop at 64, u16 return_offset, then owner */
	.code_qualname = 128,
	.code_filename = 112,
	.code_firstlineno = 68,
	.code_linetable = 136,
	.code_code_adaptive = 192,
	.ascii_data = 40,
	.bytes_data = 32,
	.var_size = 16,
};

/* 3.13: no _PyCFrame (tstate->current_frame), f_executable in place of
 * f_code, instr_ptr in place of prev_instr; the shim frames stay. These
 * are the values of the build's own _Py_DebugOffsets (at the start of
 * _PyRuntime), which a test reads from Debian's python3.13. */
static const struct cpython_layout layout_313 = {
	.major = 3,
	.minor = 13,
	.flags = SONDE_CPYTHON_TSTATE_FRAME | SONDE_CPYTHON_ENTRY_SHIM,
	.runtime_interpreters_head = 632,
	.interp_threads_head = 7344,
	.tstate_next = 8,
	.tstate_native_thread_id = 160,
	.tstate_cframe = 72, /* current_frame */
	.frame_code = 0,     /* f_executable */
	.frame_previous = 8,
	.frame_prev_instr = 56, /* instr_ptr */
	.frame_owner = 70,
	.code_qualname = 128,
	.code_filename = 112,
	.code_firstlineno = 68,
	.code_linetable = 136,
	.code_code_adaptive = 200,
	.ascii_data = 40,
	.bytes_data = 32,
	.var_size = 16,
};

const struct cpython_layout *cpython_layout_for(unsigned major, unsigned minor)
{
	if (major != 3)
		return NULL;
	switch (minor) {
	case 10:
		return &layout_310;
	case 11:
		return &layout_311;
	case 12:
		return &layout_312;
	case 13:
		return &layout_313;
	default:
		return NULL;
	}
}

int cpython_version_from_name(const char *path, unsigned *major, unsigned *minor)
{
	const char *base = path ? strrchr(path, '/') : NULL, *p;
	unsigned ma = 0, mi = 0;
	int digits = 0;

	base = base ? base + 1 : path;
	if (!base)
		return -ENOENT;
	if (!strncmp(base, "libpython", 9))
		p = base + 9;
	else if (!strncmp(base, "python", 6))
		p = base + 6;
	else
		return -ENOENT;
	/* "3.11" then the end, "m", ".so" or "-" (python3.11-config is not
	 * an interpreter, but it is not mapped executable either). */
	if (*p < '0' || *p > '9')
		return -ENOENT;
	while (*p >= '0' && *p <= '9' && digits++ < 2)
		ma = ma * 10 + (unsigned)(*p++ - '0');
	if (*p++ != '.')
		return -ENOENT;
	digits = 0;
	while (*p >= '0' && *p <= '9' && digits++ < 3)
		mi = mi * 10 + (unsigned)(*p++ - '0');
	/* A free-threaded build ("t": python3.13t, libpython3.13t.so) has
	 * another object header, so none of these tables: not an interpreter
	 * sonde knows. */
	if (!digits || (*p && *p != '.' && *p != 'm' && *p != 'd'))
		return -ENOENT;
	*major = ma;
	*minor = mi;
	return 0;
}

void cpython_layout_pack(const struct cpython_layout *l, struct sonde_cpython_offsets *ret)
{
	*ret = (struct sonde_cpython_offsets){
		.major = l->major,
		.minor = l->minor,
		.runtime_interpreters_head = l->runtime_interpreters_head,
		.interp_threads_head = l->interp_threads_head,
		.tstate_next = l->tstate_next,
		.tstate_native_thread_id = l->tstate_native_thread_id,
		.tstate_cframe = l->tstate_cframe,
		.cframe_current_frame = l->cframe_current_frame,
		.frame_code = l->frame_code,
		.frame_previous = l->frame_previous,
		.frame_prev_instr = l->frame_prev_instr,
		.frame_owner = l->frame_owner,
		.code_qualname = l->code_qualname,
		.code_filename = l->code_filename,
		.code_firstlineno = l->code_firstlineno,
		.code_linetable = l->code_linetable,
		.code_code_adaptive = l->code_code_adaptive,
		.ascii_data = l->ascii_data,
		.bytes_data = l->bytes_data,
		.var_size = l->var_size,
		.frame_is_entry = l->frame_is_entry,
		.flags = l->flags,
	};
}
