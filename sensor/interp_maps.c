/* interp_maps.c - interpreter configs into BPF entries (interp_maps.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "interp_kinds.h"
#include "interp_maps.h"

struct config {
	uint8_t file_id[16];
	uint64_t runtime_offset;
	uint32_t kind, len;
	uint8_t layout[SONDE_INTERP_CONFIG_MAX];
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

int interp_maps_add_config(struct interp_maps *im, const uint8_t file_id[16], uint32_t kind,
			   uint32_t format_version, uint64_t runtime_offset, const void *layout,
			   size_t layout_len)
{
	const struct sonde_interp_limits *lim = sonde_interp_limits_of(kind);
	struct config *c;
	int r = 0;

	pthread_mutex_lock(&im->lock);
	if (!lim || format_version != lim->format_version || layout_len != lim->config_size ||
	    layout_len > SONDE_INTERP_CONFIG_MAX) {
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
	c->kind = kind;
	c->len = (uint32_t)layout_len;
	memset(c->layout, 0, sizeof(c->layout));
	memcpy(c->layout, layout, layout_len);
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
	struct sonde_interp_proc v;
	const struct config *c = NULL;

	pthread_mutex_lock(&im->lock);
	if (!im->n_configs)
		goto out;
	/* The first mapping (lowest start) of the first configured file: an
	 * interpreter has one executable mapping per file. */
	for (size_t i = 0; i < n && !c; i++) {
		c = find_config(im, maps[i].file_id);
		if (c) {
			v = (struct sonde_interp_proc){
				.runtime_addr = maps[i].start - maps[i].offset + c->runtime_offset,
				.kind = c->kind,
				.config_len = c->len,
			};
			memcpy(v.config, c->layout, sizeof(v.config));
		}
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
