/* v8_ops.c - V8's entry of the interpreter ops table (v8_ops.h): a JIT
 * kind, whose frames replace the native frames they stand for. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "v8.h"
#include "v8_lines.h"
#include "v8_loader.h"
#include "v8_ops.h"
#include "v8_sfi.h"

static int v8_need(const struct file_image *img, struct elf_need *need)
{
	return v8_loader_need(img, need);
}

static int v8_analyse(const struct file_image *img, const char *path, struct interp_data *ret,
		      const char **reason)
{
	(void)path;
	return v8_loader_analyse(img, ret, reason);
}

static int v8_config(const struct interp_data *d, struct interp_config *ret)
{
	_Static_assert(sizeof(struct sonde_v8_offsets) <= INTERP_CONFIG_MAX, "V8 config size");
	if (d->data_len != sizeof(struct sonde_v8_offsets))
		return -EPROTONOSUPPORT;
	*ret = (struct interp_config){ .kind = SONDE_INTERP_V8,
				       .format_version = SONDE_V8_FORMAT_VERSION,
				       .runtime_offset = d->runtime_offset,
				       .layout_len = sizeof(struct sonde_v8_offsets) };
	memcpy(ret->layout, d->data, sizeof(struct sonde_v8_offsets));
	return 0;
}

/* A session's V8 state: the SFIs' names, the Code objects' position
 * tables and the scripts' sources. */
struct v8_inst {
	struct interp_records *sfis;
	struct v8_lines *lines;
};

static void v8_instance_free(void *inst)
{
	struct v8_inst *v = inst;

	if (!v)
		return;
	interp_records_free(v->sfis);
	v8_lines_free(v->lines);
	free(v);
}

static void *v8_instance_new(void)
{
	struct v8_inst *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->sfis = v8_sfis_new();
	v->lines = v8_lines_new();
	if (!v->sfis || !v->lines) {
		v8_instance_free(v);
		return NULL;
	}
	return v;
}

static int v8_record_put(void *inst, uint32_t pid, const void *data, size_t len)
{
	struct v8_inst *v = inst;
	int r = v8_lines_put(v->lines, pid, data, len);

	return r == -ENOENT ? interp_records_put(v->sfis, pid, data, len) : r;
}

static bool v8_frame_ends_run(const struct interp_frame *f)
{
	(void)f;
	return false;
}

static size_t v8_frame_name(const void *inst, uint32_t pid, const struct interp_frame *f,
			    char *buf, size_t len)
{
	const struct v8_inst *v = inst;
	const struct v8_sfi *s = v ? v8_sfis_get(v->sfis, pid, SONDE_V8_SFI(f->words[0])) : NULL;
	uint32_t tier = SONDE_V8_TIER(f->words[0]);
	int32_t line = 0;
	int r = -ENOENT;

	/* Interpreted frames: by their BytecodeArray's table, at the current
	 * bytecode (the call's in a caller). Optimised frames: by their
	 * Code's, where the leaf-most native frame's pc is the sampled one
	 * and the others' return addresses. Baseline frames have none: their
	 * Code's table maps pcs to bytecode offsets. */
	if (s && tier == SONDE_V8_TIER_INTERPRETED)
		r = v8_lines_line(v->lines, pid, f->words[1], 1, &line);
	else if (s && tier == SONDE_V8_TIER_OPTIMIZED)
		r = v8_lines_line(v->lines, pid, f->words[1],
				  SONDE_INTERP_JIT_POS(f->words[0]) == 1, &line);
	if (r < 0)
		line = 0;
	return v8_sfi_frame_name(s, line, buf, len);
}

const struct interp_ops v8_ops = {
	.kind = SONDE_INTERP_V8,
	.name = "V8",
	.jit = true,
	.wants = v8_loader_wants,
	.need = v8_need,
	.analyse = v8_analyse,
	.config = v8_config,
	.instance_new = v8_instance_new,
	.instance_free = v8_instance_free,
	.record_put = v8_record_put,
	.frame_ends_run = v8_frame_ends_run,
	.frame_name = v8_frame_name,
};
