/* ruby_ops.c - Ruby's entry of the interpreter ops table (ruby_ops.h). */
#include <errno.h>
#include <string.h>

#include "interp_loader.h"
#include "interp_records.h"
#include "ruby.h"
#include "ruby_layout.h"
#include "ruby_meta.h"
#include "ruby_ops.h"

/* The VM's exported eval entry: each native call of it runs one run of
 * Ruby frames (vm_exec_core is inlined into it in Debian's build; the
 * splice puts the run in its place). */
#define RUBY_EVAL_SYMBOL "rb_vm_exec"
/* The root: an exported global pointing to the VM (the execution context
 * itself is a TLS variable, whose place the sensor cannot compute). */
#define RUBY_RUNTIME_SYMBOL "ruby_current_vm_ptr"

static bool ruby_wants(const char *path)
{
	unsigned major, minor;

	return ruby_version_from_name(path, &major, &minor) == 0;
}

static int ruby_analyse(const struct file_image *img, const char *path, struct interp_data *ret,
			const char **reason)
{
	unsigned major, minor;
	uint64_t offset;
	int r;

	*reason = "not a known interpreter file name";
	if (ruby_version_from_name(path, &major, &minor) < 0)
		return -ENOENT;
	r = interp_loader_find_root(img, RUBY_RUNTIME_SYMBOL,
				    ruby_layout_for(major, minor) ? NULL
								  : "Ruby version without a layout",
				    &offset, reason);
	if (r < 0)
		return r;
	*ret = (struct interp_data){ .kind = SONDE_INTERP_RUBY, .major = (uint8_t)major,
				     .minor = (uint8_t)minor, .runtime_offset = offset };
	return 0;
}

static int ruby_config(const struct interp_data *d, struct interp_config *ret)
{
	const struct sonde_ruby_offsets *l = ruby_layout_for(d->major, d->minor);

	_Static_assert(sizeof(*l) <= INTERP_CONFIG_MAX, "Ruby config size");
	if (!l)
		return -EPROTONOSUPPORT;
	*ret = (struct interp_config){ .kind = SONDE_INTERP_RUBY,
				       .format_version = SONDE_RUBY_FORMAT_VERSION,
				       .runtime_offset = d->runtime_offset,
				       .layout_len = sizeof(*l) };
	memcpy(ret->layout, l, sizeof(*l));
	return 0;
}

static void *ruby_instance_new(void)
{
	return ruby_metas_new();
}

static void ruby_instance_free(void *inst)
{
	interp_records_free(inst);
}

static int ruby_record_put(void *inst, uint32_t pid, const void *data, size_t len)
{
	return interp_records_put(inst, pid, data, len);
}

static bool ruby_frame_ends_run(const struct interp_frame *f)
{
	return (f->words[0] & SONDE_RUBY_FRAME_FINISH) != 0;
}

static size_t ruby_frame_name(const void *inst, uint32_t pid, const struct interp_frame *f,
			      char *buf, size_t len)
{
	const struct ruby_meta *m =
		inst ? ruby_metas_get(inst, pid, SONDE_RUBY_FRAME_ADDR(f->words[0]), f->words[1])
		     : NULL;

	return ruby_meta_frame_name(m, (uint32_t)SONDE_RUBY_FRAME_PC(f->words[0]), buf, len);
}

const struct interp_ops ruby_ops = {
	.kind = SONDE_INTERP_RUBY,
	.name = "Ruby",
	.splice_symbol = RUBY_EVAL_SYMBOL,
	.wants = ruby_wants,
	.analyse = ruby_analyse,
	.config = ruby_config,
	.instance_new = ruby_instance_new,
	.instance_free = ruby_instance_free,
	.record_put = ruby_record_put,
	.frame_ends_run = ruby_frame_ends_run,
	.frame_name = ruby_frame_name,
};
