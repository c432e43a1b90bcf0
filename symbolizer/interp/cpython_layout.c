/* cpython_layout.c - CPython layouts (see cpython_layout.h). */
#include <errno.h>
#include <stddef.h>
#include <string.h>

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
