/* v8_ops.c - V8's entry of the interpreter ops table (v8_ops.h): a JIT
 * kind, whose frames replace the native frames they stand for. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "v8.h"
#include "v8_baseline.h"
#include "v8_inline.h"
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
 * tables and inlining data, the scripts' sources, the baseline Codes'
 * offset tables and bytecodes, and each process's bytecode lengths. */
struct v8_inst {
	struct interp_records *sfis;
	struct v8_lines *lines;
	struct interp_records *inlines;
	struct interp_records *baselines;
	struct interp_records *sizes;
};

/* A frame the symbolizer made from an optimised frame (frame_expand):
 * word 0 as BPF's (an SFI, this tier, the native position), word 1 its
 * line (0: not known). BPF never records this tier. */
#define V8_TIER_EXPANDED 0xf

static void v8_instance_free(void *inst)
{
	struct v8_inst *v = inst;

	if (!v)
		return;
	interp_records_free(v->sfis);
	v8_lines_free(v->lines);
	interp_records_free(v->inlines);
	interp_records_free(v->baselines);
	interp_records_free(v->sizes);
	free(v);
}

static void *v8_instance_new(void)
{
	struct v8_inst *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->sfis = v8_sfis_new();
	v->lines = v8_lines_new();
	v->inlines = v8_inlines_new();
	v->baselines = v8_baselines_new();
	v->sizes = v8_sizes_new();
	if (!v->sfis || !v->lines || !v->inlines || !v->baselines || !v->sizes) {
		v8_instance_free(v);
		return NULL;
	}
	return v;
}

static int v8_record_put(void *inst, uint32_t pid, const void *data, size_t len)
{
	struct v8_inst *v = inst;
	int r;

	if (len == V8_INLINE_SIZE)
		return interp_records_put(v->inlines, pid, data, len);
	if (len == V8_BASELINE_SIZE)
		return interp_records_put(v->baselines, pid, data, len);
	if (len == V8_SIZES_SIZE)
		return interp_records_put(v->sizes, pid, data, len);
	r = v8_lines_put(v->lines, pid, data, len);
	return r == -ENOENT ? interp_records_put(v->sfis, pid, data, len) : r;
}

static bool v8_frame_ends_run(const struct interp_frame *f)
{
	(void)f;
	return false;
}

/* The frame for function sfi (0: f's own) at line (0: not known) that
 * stands for a part of optimised frame f. */
static struct interp_frame expanded(const struct interp_frame *f, uint64_t sfi, int32_t line)
{
	uint64_t w0 = f->words[0];

	return (struct interp_frame){
		.kind = f->kind,
		.n_words = 2,
		.words = { (w0 & ~SONDE_INTERP_JIT_KIND_MASK) |
				   SONDE_V8_WORD0(sfi ? sfi : SONDE_V8_SFI(w0), V8_TIER_EXPANDED),
			   line > 0 ? (uint32_t)line : 0 },
	};
}

/* An optimised frame whose position is in code TurboFan inlined: the
 * inlined function at the position's line, then each caller at its call's
 * line, the frame's own function last. Without the Code's inlining data
 * (not sent yet, or damaged), the frame's own function without a line:
 * the position's offset is in another function. */
static uint32_t v8_frame_expand(const void *inst, uint32_t pid, const struct interp_frame *f,
				struct interp_frame *out, uint32_t max)
{
	const struct v8_inst *v = inst;
	struct v8_inline_level lv[V8_INLINE_DEPTH];
	const struct v8_inline *in;
	int32_t offset, inlined, line;
	uint64_t script;
	int n;

	out[0] = *f;
	if (!v || SONDE_V8_TIER(f->words[0]) != SONDE_V8_TIER_OPTIMIZED ||
	    v8_lines_position(v->lines, pid, f->words[1], SONDE_INTERP_JIT_POS(f->words[0]) == 1,
			      &offset, &inlined, &script) < 0 ||
	    inlined < 0)
		return 1;
	in = v8_inlines_get(v->inlines, pid, (uint32_t)(f->words[1] >> 32));
	n = in ? v8_inline_chain(in, inlined, offset, lv, max < V8_INLINE_DEPTH ? max : V8_INLINE_DEPTH)
	       : -ENOENT;
	if (n <= 0) {
		out[0] = expanded(f, 0, 0);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		line = 0;
		if (v8_lines_script_line(v->lines, pid, lv[i].sfi ? lv[i].script : script,
					 lv[i].offset, &line) < 0)
			line = 0;
		out[i] = expanded(f, lv[i].sfi, line);
	}
	return (uint32_t)n;
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
	 * and the others' return addresses. Baseline frames: by their Code's
	 * offset table and bytecodes to a bytecode, then as interpreted. */
	if (s && tier == V8_TIER_EXPANDED) {
		line = (int32_t)(uint32_t)f->words[1];
		r = line > 0 ? 0 : -ENOENT;
	} else if (s && tier == SONDE_V8_TIER_INTERPRETED)
		r = v8_lines_line(v->lines, pid, f->words[1], 1, &line);
	else if (s && tier == SONDE_V8_TIER_BASELINE)
		r = v8_baseline_line(v->baselines, v->sizes, v->lines, pid, f->words[1],
				     SONDE_INTERP_JIT_POS(f->words[0]) == 1, &line);
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
	.frame_expand = v8_frame_expand,
	.frame_name = v8_frame_name,
};
