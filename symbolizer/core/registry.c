/* registry.c - see registry.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "registry.h"

struct subscriber {
	void (*fn)(void *ctx, const struct fileid *id);
	void *ctx;
};

struct registry {
	struct hmap *paths; /* path -> struct fileid */
	struct hmap *names; /* fileid -> char *path (first path seen) */
	struct byte_source *sources;
	struct subscriber subs[REGISTRY_MAX_SUBSCRIBERS];
	size_t n_subs;
};

struct registry *registry_new(void)
{
	struct registry *reg = calloc(1, sizeof(*reg));

	if (!reg)
		return NULL;
	reg->paths = hmap_new();
	reg->names = hmap_new();
	if (!reg->paths || !reg->names) {
		registry_free(reg);
		return NULL;
	}
	return reg;
}

void registry_free(struct registry *reg)
{
	if (!reg)
		return;
	hmap_free(reg->paths, free);
	hmap_free(reg->names, free);
	free(reg);
}

static void note_name(struct registry *reg, const struct fileid *id, const char *name)
{
	char *p;

	if (hmap_get(reg->names, id, sizeof(*id)) || hmap_count(reg->names) >= REGISTRY_MAX_PATHS)
		return;
	p = strdup(name);
	if (p && hmap_put(reg->names, id, sizeof(*id), p, NULL) < 0)
		free(p);
}

void registry_note_path(struct registry *reg, const struct fileid *id, const char *path)
{
	size_t len = strlen(path);
	struct fileid *old = NULL, *copy;

	if (len == 0)
		return;
	/* A file with a name that is no path (the kernel's "[vdso]", which
	 * sensors serve: sensor/vdso.h) is named by it in frames, but cannot
	 * be looked up by it. */
	if (path[0] != '/')
		goto name;
	copy = hmap_get(reg->paths, path, len);
	if (copy && memcmp(copy, id, sizeof(*id)) == 0)
		goto name;
	if (!copy && hmap_count(reg->paths) >= REGISTRY_MAX_PATHS)
		goto name;
	copy = malloc(sizeof(*copy));
	if (!copy)
		return;
	*copy = *id;
	/* A path now names a new file (the library was upgraded): newest wins. */
	if (hmap_put(reg->paths, path, len, copy, (void **)&old) < 0)
		free(copy);
	free(old);
name:
	note_name(reg, id, path);
}

void registry_note_name(struct registry *reg, const struct fileid *id, const char *name)
{
	if (name && *name)
		note_name(reg, id, name);
}

const struct fileid *registry_find_path(const struct registry *reg, const char *path)
{
	return hmap_get(reg->paths, path, strlen(path));
}

const char *registry_file_path(const struct registry *reg, const struct fileid *id)
{
	return hmap_get(reg->names, id, sizeof(*id));
}

const char *registry_file_name(const struct registry *reg, const struct fileid *id)
{
	const char *p = registry_file_path(reg, id);
	const char *slash;

	if (!p)
		return NULL;
	slash = strrchr(p, '/');
	return slash ? slash + 1 : p;
}

void registry_add_source(struct registry *reg, struct byte_source *src)
{
	src->next = reg->sources;
	reg->sources = src;
}

void registry_remove_source(struct registry *reg, struct byte_source *src)
{
	for (struct byte_source **pp = &reg->sources; *pp; pp = &(*pp)->next) {
		if (*pp == src) {
			*pp = src->next;
			src->next = NULL;
			return;
		}
	}
}

struct byte_source *registry_source_with_file(const struct registry *reg, const struct fileid *id,
					      const struct byte_source *except)
{
	for (struct byte_source *s = reg->sources; s; s = s->next) {
		uint64_t size;

		if (s != except && byte_source_has_file(s, id, &size))
			return s;
	}
	return NULL;
}

bool byte_source_has_file(const struct byte_source *src, const struct fileid *id,
			  uint64_t *ret_size)
{
	return src->ops->has_file(src, id, ret_size);
}

int byte_source_read_range(struct byte_source *src, uint64_t request_id, const struct fileid *id,
			   uint64_t offset, uint32_t length)
{
	return src->ops->read_range(src, request_id, id, offset, length);
}

int registry_subscribe(struct registry *reg, void (*fn)(void *ctx, const struct fileid *id),
		       void *ctx)
{
	if (reg->n_subs >= REGISTRY_MAX_SUBSCRIBERS)
		return -E2BIG;
	reg->subs[reg->n_subs++] = (struct subscriber){ .fn = fn, .ctx = ctx };
	return 0;
}

void registry_file_done(struct registry *reg, const struct fileid *id)
{
	for (size_t i = 0; i < reg->n_subs; i++)
		reg->subs[i].fn(reg->subs[i].ctx, id);
}
