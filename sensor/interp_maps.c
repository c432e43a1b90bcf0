/* interp_maps.c - interpreter configs into BPF entries (interp_maps.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "interp_maps.h"

struct config {
	uint8_t file_id[16];
	uint64_t runtime_offset;
	struct sonde_cpython_offsets off;
};

struct interp_maps {
	pthread_mutex_t lock;
	const struct interp_map_ops *ops;
	void *ctx;
	struct config configs[INTERP_MAPS_MAX_CONFIGS];
	size_t n_configs;
	bool pending;
	struct interp_maps_stats stats;
};

struct interp_maps *interp_maps_new(const struct interp_map_ops *ops, void *ctx)
{
	struct interp_maps *im = calloc(1, sizeof(*im));

	if (!im)
		return NULL;
	pthread_mutex_init(&im->lock, NULL);
	im->ops = ops;
	im->ctx = ctx;
	return im;
}

void interp_maps_free(struct interp_maps *im)
{
	if (!im)
		return;
	pthread_mutex_destroy(&im->lock);
	free(im);
}

static struct config *find_config(struct interp_maps *im, const uint8_t id[16])
{
	for (size_t i = 0; i < im->n_configs; i++)
		if (!memcmp(im->configs[i].file_id, id, 16))
			return &im->configs[i];
	return NULL;
}

int interp_maps_add_config(struct interp_maps *im, const uint8_t file_id[16], uint32_t format_version,
			   uint64_t runtime_offset, const void *layout, size_t layout_len)
{
	struct config *c;
	int r = 0;

	pthread_mutex_lock(&im->lock);
	if (format_version != SONDE_CPYTHON_FORMAT_VERSION ||
	    layout_len != sizeof(struct sonde_cpython_offsets)) {
		r = -EBADMSG;
		goto out;
	}
	c = find_config(im, file_id);
	if (!c) {
		if (im->n_configs == INTERP_MAPS_MAX_CONFIGS) {
			r = -EBADMSG;
			goto out;
		}
		c = &im->configs[im->n_configs++];
		memcpy(c->file_id, file_id, 16);
	}
	c->runtime_offset = runtime_offset;
	memcpy(&c->off, layout, sizeof(c->off));
	im->pending = true;
out:
	if (r < 0)
		im->stats.rejected++;
	pthread_mutex_unlock(&im->lock);
	return r;
}

bool interp_maps_take_pending(struct interp_maps *im)
{
	bool p;

	pthread_mutex_lock(&im->lock);
	p = im->pending;
	im->pending = false;
	pthread_mutex_unlock(&im->lock);
	return p;
}

void interp_maps_set_process(struct interp_maps *im, uint32_t pid, const struct interp_mapping *maps,
			     size_t n)
{
	struct sonde_cpython_proc v;
	const struct config *c = NULL;

	pthread_mutex_lock(&im->lock);
	if (!im->n_configs)
		goto out;
	/* The first mapping (lowest start) of the first configured file: an
	 * interpreter has one executable mapping per file. */
	for (size_t i = 0; i < n && !c; i++) {
		c = find_config(im, maps[i].file_id);
		if (c)
			v = (struct sonde_cpython_proc){
				.runtime_addr = maps[i].start - maps[i].offset + c->runtime_offset,
				.off = c->off,
			};
	}
	if (!c) {
		im->ops->remove(im->ctx, pid);
		goto out;
	}
	if (im->ops->update(im->ctx, pid, &v) < 0)
		im->stats.failures++;
	else
		im->stats.entries++;
out:
	pthread_mutex_unlock(&im->lock);
}

void interp_maps_remove_process(struct interp_maps *im, uint32_t pid)
{
	pthread_mutex_lock(&im->lock);
	if (im->n_configs)
		im->ops->remove(im->ctx, pid);
	pthread_mutex_unlock(&im->lock);
}

void interp_maps_get_stats(struct interp_maps *im, struct interp_maps_stats *ret)
{
	pthread_mutex_lock(&im->lock);
	*ret = im->stats;
	ret->configs = im->n_configs;
	pthread_mutex_unlock(&im->lock);
}
