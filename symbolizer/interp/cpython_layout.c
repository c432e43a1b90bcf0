/* cpython_layout.c - CPython layouts (see cpython_layout.h). */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "cpython.h"
#include "cpython_layout.h"

/* 3.11 on x86-64 (Include/internal/pycore_frame.h, pycore_interp.h,
 * pycore_runtime.h, cpython/pystate.h, cpython/code.h of 3.11). */
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

const struct cpython_layout *cpython_layout_for(unsigned major, unsigned minor)
{
	if (major == 3 && minor == 11)
		return &layout_311;
	return NULL;
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
	if (!digits || (*p && *p != '.' && *p != 'm' && *p != 'd' && *p != 't'))
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
	};
}
