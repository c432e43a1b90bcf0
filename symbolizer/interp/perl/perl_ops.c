/* perl_ops.c - Perl's entry of the interpreter ops table (perl_ops.h). */
#include <errno.h>
#include <string.h>

#include "interp_loader.h"
#include "interp_records.h"
#include "perl5.h"
#include "perl_layout.h"
#include "perl_meta.h"
#include "perl_ops.h"

/* The op loop's native frame: each one runs one run of Perl frames. */
#define PERL_RUNOPS_SYMBOL "Perl_runops_standard"
#define PERL_ROOT_SYMBOL "PL_curinterp"

static bool perl_wants(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strcmp(base, "perl") || !strncmp(base, "perl5.", 6) ||
	       !strncmp(base, "libperl.so", 10);
}

static int perl_analyse(const struct file_image *img, const char *path, struct interp_data *ret,
			const char **reason)
{
	unsigned major = 0, minor = 0;
	uint64_t offset;
	int r;

	*reason = "not a known interpreter file name";
	if (!perl_wants(path))
		return -ENOENT;
	/* Without PL_curinterp (an unthreaded build, or no perl) there is
	 * no root to start from. */
	r = interp_loader_find_root(img, PERL_ROOT_SYMBOL, NULL, &offset, reason);
	if (r < 0)
		return r;
	r = perl_layout_version(img, &major, &minor, reason);
	if (r < 0)
		return r;
	*ret = (struct interp_data){ .kind = SONDE_INTERP_PERL, .major = (uint8_t)major,
				     .minor = (uint8_t)minor, .runtime_offset = offset };
	return 0;
}

static int perl_config(const struct interp_data *d, struct interp_config *ret)
{
	const struct sonde_perl_offsets *off = perl_layout_for(d->major, d->minor);

	_Static_assert(sizeof(*off) <= INTERP_CONFIG_MAX, "Perl config size");
	if (!off)
		return -EPROTONOSUPPORT;
	*ret = (struct interp_config){ .kind = SONDE_INTERP_PERL,
				       .format_version = SONDE_PERL_FORMAT_VERSION,
				       .runtime_offset = d->runtime_offset,
				       .layout_len = sizeof(*off) };
	memcpy(ret->layout, off, sizeof(*off));
	return 0;
}

static void *perl_instance_new(void)
{
	return perl_metas_new();
}

static void perl_instance_free(void *inst)
{
	interp_records_free(inst);
}

static int perl_record_put(void *inst, uint32_t pid, const void *data, size_t len)
{
	return interp_records_put(inst, pid, data, len);
}

static bool perl_frame_ends_run(const struct interp_frame *f)
{
	return (f->words[0] & SONDE_PERL_FRAME_ENTRY) != 0;
}

static size_t perl_frame_name(const void *inst, uint32_t pid, const struct interp_frame *f,
			      char *buf, size_t len)
{
	const struct perl_meta *m = inst ? perl_metas_get(inst, pid, f->words[0], f->words[1])
					 : NULL;

	return perl_meta_frame_name(m, f->words[0], buf, len);
}

const struct interp_ops perl_ops = {
	.kind = SONDE_INTERP_PERL,
	.name = "Perl",
	.splice_symbol = PERL_RUNOPS_SYMBOL,
	.wants = perl_wants,
	.analyse = perl_analyse,
	.config = perl_config,
	.instance_new = perl_instance_new,
	.instance_free = perl_instance_free,
	.record_put = perl_record_put,
	.frame_ends_run = perl_frame_ends_run,
	.frame_name = perl_frame_name,
};
