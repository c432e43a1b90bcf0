/* php_ops.c - PHP's entry of the interpreter ops table (php_ops.h). */
#include <errno.h>
#include <string.h>

#include "interp_loader.h"
#include "interp_records.h"
#include "php.h"
#include "php_func.h"
#include "php_layout.h"
#include "php_ops.h"

/* The VM's native frame: each one runs the PHP frames of one run (from a
 * ZEND_CALL_TOP frame up), which the splice puts in its place. */
#define PHP_VM_SYMBOL "execute_ex"
#define PHP_ROOT_SYMBOL "executor_globals"

static bool php_wants(const char *path)
{
	unsigned major, minor;

	return php_version_from_name(path, &major, &minor) == 0;
}

static int php_analyse(const struct file_image *img, const char *path, struct interp_data *ret,
		       const char **reason)
{
	unsigned major, minor;
	uint64_t offset;
	int r;

	*reason = "not a known interpreter file name";
	if (php_version_from_name(path, &major, &minor) < 0)
		return -ENOENT;
	/* A ZTS build has no executor_globals symbol (its globals are per
	 * thread): -ENOENT. */
	r = interp_loader_find_root(img, PHP_ROOT_SYMBOL,
				    php_layout_for(major, minor) ? NULL
								 : "PHP version without a layout",
				    &offset, reason);
	if (r < 0)
		return r;
	*ret = (struct interp_data){ .kind = SONDE_INTERP_PHP, .major = (uint8_t)major,
				     .minor = (uint8_t)minor, .runtime_offset = offset };
	return 0;
}

static int php_config(const struct interp_data *d, struct interp_config *ret)
{
	const struct sonde_php_offsets *off = php_layout_for(d->major, d->minor);

	_Static_assert(sizeof(*off) <= INTERP_CONFIG_MAX, "PHP config size");
	if (!off)
		return -EPROTONOSUPPORT;
	*ret = (struct interp_config){ .kind = SONDE_INTERP_PHP,
				       .format_version = SONDE_PHP_FORMAT_VERSION,
				       .runtime_offset = d->runtime_offset,
				       .layout_len = sizeof(*off) };
	memcpy(ret->layout, off, sizeof(*off));
	return 0;
}

static void *php_instance_new(void)
{
	return php_funcs_new();
}

static void php_instance_free(void *inst)
{
	interp_records_free(inst);
}

static int php_record_put(void *inst, uint32_t pid, const void *data, size_t len)
{
	return interp_records_put(inst, pid, data, len);
}

static bool php_frame_ends_run(const struct interp_frame *f)
{
	return (f->words[0] & SONDE_PHP_FRAME_TOP) != 0;
}

static size_t php_frame_name(const void *inst, uint32_t pid, const struct interp_frame *f,
			     char *buf, size_t len)
{
	const struct php_func *fn =
		inst ? php_funcs_get(inst, pid, SONDE_PHP_FRAME_FUNC(f->words[0]), f->words[1])
		     : NULL;
	uint32_t line = SONDE_PHP_FRAME_LINE(f->words[0]);

	/* A clamped line is no line. */
	return php_func_frame_name(fn, line == SONDE_PHP_LINE_MAX ? 0 : line, buf, len);
}

const struct interp_ops php_ops = {
	.kind = SONDE_INTERP_PHP,
	.name = "PHP",
	.splice_symbol = PHP_VM_SYMBOL,
	.wants = php_wants,
	.analyse = php_analyse,
	.config = php_config,
	.instance_new = php_instance_new,
	.instance_free = php_instance_free,
	.record_put = php_record_put,
	.frame_ends_run = php_frame_ends_run,
	.frame_name = php_frame_name,
};
