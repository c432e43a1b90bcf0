/* cpython_ops.c - CPython's entry of the interpreter ops table
 * (cpython_ops.h). */
#include <errno.h>
#include <string.h>

#include "cpython.h"
#include "cpython_code.h"
#include "cpython_layout.h"
#include "cpython_ops.h"
#include "interp_loader.h"
#include "interp_records.h"

/* The eval loop's native frame: each one runs the Python frames of one
 * run, which the splice puts in its place. */
#define CPYTHON_EVAL_SYMBOL "_PyEval_EvalFrameDefault"
#define CPYTHON_RUNTIME_SYMBOL "_PyRuntime"

static bool cpython_wants(const char *path)
{
	unsigned major, minor;

	return cpython_version_from_name(path, &major, &minor) == 0;
}

static int cpython_analyse(const struct file_image *img, const char *path, struct interp_data *ret,
			   const char **reason)
{
	unsigned major, minor;
	uint64_t offset;
	int r;

	*reason = "not a known interpreter file name";
	if (cpython_version_from_name(path, &major, &minor) < 0)
		return -ENOENT;
	r = interp_loader_find_root(img, CPYTHON_RUNTIME_SYMBOL,
				    cpython_layout_for(major, minor)
					    ? NULL
					    : "CPython version without a layout",
				    &offset, reason);
	if (r < 0)
		return r;
	*ret = (struct interp_data){ .kind = SONDE_INTERP_CPYTHON, .major = (uint8_t)major,
				     .minor = (uint8_t)minor, .runtime_offset = offset };
	return 0;
}

static int cpython_config(const struct interp_data *d, struct interp_config *ret)
{
	const struct cpython_layout *l = cpython_layout_for(d->major, d->minor);
	struct sonde_cpython_offsets off;

	_Static_assert(sizeof(off) <= INTERP_CONFIG_MAX, "CPython config size");
	if (!l)
		return -EPROTONOSUPPORT;
	cpython_layout_pack(l, &off);
	*ret = (struct interp_config){ .kind = SONDE_INTERP_CPYTHON,
				       .format_version = SONDE_CPYTHON_FORMAT_VERSION,
				       .runtime_offset = d->runtime_offset,
				       .layout_len = sizeof(off) };
	memcpy(ret->layout, &off, sizeof(off));
	return 0;
}

static void *cpython_instance_new(void)
{
	return cpython_codes_new();
}

static void cpython_instance_free(void *inst)
{
	interp_records_free(inst);
}

static int cpython_record_put(void *inst, uint32_t pid, const void *data, size_t len)
{
	return interp_records_put(inst, pid, data, len);
}

static bool cpython_frame_ends_run(const struct interp_frame *f)
{
	return (f->words[0] & SONDE_CPYTHON_FRAME_ENTRY) != 0;
}

static size_t cpython_frame_name(const void *inst, uint32_t pid, const struct interp_frame *f,
				 char *buf, size_t len)
{
	const struct cpython_code *c =
		inst ? cpython_codes_get(inst, pid, SONDE_CPYTHON_FRAME_CODE(f->words[0]),
					 f->words[1])
		     : NULL;

	return cpython_code_frame_name(c, (uint32_t)SONDE_CPYTHON_FRAME_INSTR(f->words[0]), buf,
				       len);
}

const struct interp_ops cpython_ops = {
	.kind = SONDE_INTERP_CPYTHON,
	.name = "CPython",
	.splice_symbol = CPYTHON_EVAL_SYMBOL,
	.wants = cpython_wants,
	.analyse = cpython_analyse,
	.config = cpython_config,
	.instance_new = cpython_instance_new,
	.instance_free = cpython_instance_free,
	.record_put = cpython_record_put,
	.frame_ends_run = cpython_frame_ends_run,
	.frame_name = cpython_frame_name,
};
