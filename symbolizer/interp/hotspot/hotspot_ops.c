/* hotspot_ops.c - the HotSpot JVM's entry of the interpreter ops table
 * (hotspot_ops.h): libjvm.so is recognised by name, its Data is the
 * walker's config read from the file's own structure tables
 * (hotspot_layout.c), records are Java methods (hotspot_method.c). */
#include <errno.h>
#include <string.h>

#include "hotspot.h"
#include "hotspot_layout.h"
#include "hotspot_method.h"
#include "hotspot_ops.h"
#include "interp_records.h"

#define HOTSPOT_LIBRARY "libjvm.so"

static bool hotspot_wants(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strcmp(base ? base + 1 : path, HOTSPOT_LIBRARY);
}

static int hotspot_need(const struct file_image *img, struct elf_need *need)
{
	const char *reason;

	return hotspot_layout_need(img, need, &reason) == -EAGAIN ? -EAGAIN : 0;
}

static int hotspot_analyse(const struct file_image *img, const char *path,
			   struct interp_data *ret, const char **reason)
{
	struct hotspot_layout l;
	int r;

	*reason = "not libjvm.so";
	if (!hotspot_wants(path))
		return -ENOENT;
	r = hotspot_layout_read(img, &l, reason);
	if (r == -ENOMEM)
		return -EBADMSG; /* the Loader's contract has no -ENOMEM: said as damaged */
	if (r < 0)
		return r;
	/* The config's format first: a cache row of another format is
	 * refused by config(), not misread. */
	_Static_assert(1 + sizeof(l.off) <= sizeof(ret->data), "HotSpot config size");
	*ret = (struct interp_data){ .kind = SONDE_INTERP_HOTSPOT, .major = (uint8_t)l.major,
				     .runtime_offset = l.root_offset,
				     .data_len = 1 + sizeof(l.off) };
	ret->data[0] = SONDE_HOTSPOT_FORMAT_VERSION;
	memcpy(ret->data + 1, &l.off, sizeof(l.off));
	return 0;
}

static int hotspot_config(const struct interp_data *d, struct interp_config *ret)
{
	_Static_assert(sizeof(struct sonde_hotspot_offsets) <= INTERP_CONFIG_MAX, "config size");
	if (d->data_len != 1 + sizeof(struct sonde_hotspot_offsets) ||
	    d->data[0] != SONDE_HOTSPOT_FORMAT_VERSION)
		return -EPROTONOSUPPORT;
	*ret = (struct interp_config){ .kind = SONDE_INTERP_HOTSPOT,
				       .format_version = SONDE_HOTSPOT_FORMAT_VERSION,
				       .runtime_offset = d->runtime_offset,
				       .layout_len = sizeof(struct sonde_hotspot_offsets) };
	memcpy(ret->layout, d->data + 1, sizeof(struct sonde_hotspot_offsets));
	return 0;
}

static void *hotspot_instance_new(void)
{
	return hotspot_methods_new();
}

static void hotspot_instance_free(void *inst)
{
	interp_records_free(inst);
}

static int hotspot_record_put(void *inst, uint32_t pid, const void *data, size_t len)
{
	return interp_records_put(inst, pid, data, len);
}

static bool hotspot_frame_ends_run(const struct interp_frame *f)
{
	(void)f;
	return false; /* frames are placed by their native position, not spliced */
}

static size_t hotspot_frame_name(const void *inst, uint32_t pid, const struct interp_frame *f,
				 char *buf, size_t len)
{
	const struct hotspot_method *m =
		inst ? hotspot_methods_get(inst, pid, SONDE_HOTSPOT_FRAME_METHOD(f->words[0]), 0)
		     : NULL;

	return hotspot_method_frame_name(
		m, f->n_words > 1 ? SONDE_HOTSPOT_FRAME_BCI(f->words[1]) : SONDE_HOTSPOT_BCI_UNKNOWN,
		buf, len);
}

/* "package.Class.method(descriptor)": the name JVM tools give a method,
 * overloads told apart. 0 without the method's record. */
static size_t hotspot_frame_system_name(const void *inst, uint32_t pid,
					const struct interp_frame *f, char *buf, size_t len)
{
	const struct hotspot_method *m =
		inst ? hotspot_methods_get(inst, pid, SONDE_HOTSPOT_FRAME_METHOD(f->words[0]), 0)
		     : NULL;

	if (!m) {
		buf[0] = '\0';
		return 0;
	}
	return hotspot_method_system_name(m, buf, len);
}

const struct interp_ops hotspot_ops = {
	.kind = SONDE_INTERP_HOTSPOT,
	.name = "HotSpot",
	.splice_symbol = NULL,
	.jit = true,
	.wants = hotspot_wants,
	.need = hotspot_need,
	.analyse = hotspot_analyse,
	.config = hotspot_config,
	.instance_new = hotspot_instance_new,
	.instance_free = hotspot_instance_free,
	.record_put = hotspot_record_put,
	.frame_ends_run = hotspot_frame_ends_run,
	.frame_name = hotspot_frame_name,
	.frame_system_name = hotspot_frame_system_name,
};
