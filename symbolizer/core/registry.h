/* registry.h - what the symbolizer knows of files apart from their
 * analyses: path <-> file ID (Symbolize by path, frame names), the byte
 * sources that can serve a file's bytes (each sensor session registers
 * one), and who is told when a file's analysis is done.
 *
 * Everything runs on the rpc loop thread, so nothing is locked.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fileid.h"

#define REGISTRY_MAX_PATHS 200000u /* path <-> file ID entries, each way */
#define REGISTRY_MAX_SUBSCRIBERS 4u
#define REGISTRY_MAX_PATH 4096u    /* longest path noted or looked up */

struct registry;

/* A byte source serves the bytes of the files it registered (a sensor
 * session serves those its processes map). Its owner embeds it, fills
 * ops, adds it to a registry while it can serve and removes it before it
 * is freed. */
struct byte_source;
struct byte_source_ops {
	/* Whether src registered id and can still serve it (its stream is
	 * not ending); if so, the size it registered goes to *ret_size
	 * (may be 0: an empty file). */
	bool (*has_file)(const struct byte_source *src, const struct fileid *id, uint64_t *ret_size);
	/* Asks src for length bytes of id at offset, answered later by
	 * analysis_on_file_range() under request_id. Returns 0, -EPIPE (src
	 * can no longer serve, or does not have id) or a negative errno. */
	int (*read_range)(struct byte_source *src, uint64_t request_id, const struct fileid *id,
			  uint64_t offset, uint32_t length);
};
struct byte_source {
	const struct byte_source_ops *ops;
	struct byte_source *next; /* the registry's list */
};

/* NULL on out of memory. */
struct registry *registry_new(void);
/* Accepts NULL. The byte sources still added are not touched. */
void registry_free(struct registry *reg);

/* Remembers path <-> id: path names id in frames (the first path seen
 * wins) and, when it is absolute, finds id (the newest file wins). */
void registry_note_path(struct registry *reg, const struct fileid *id, const char *path);
/* Remembers a display name for id (an upload's file name) if it has
 * none. name may be NULL. */
void registry_note_name(struct registry *reg, const struct fileid *id, const char *name);
/* The file ID last seen at an absolute path, or NULL. Borrowed until the
 * next registry_note_path. */
const struct fileid *registry_find_path(const struct registry *reg, const char *path);
/* The whole path (or name) id was first seen under, or NULL. Borrowed. */
const char *registry_file_path(const struct registry *reg, const struct fileid *id);
/* Its basename, or NULL. Borrowed. */
const char *registry_file_name(const struct registry *reg, const struct fileid *id);

/* Adds src (borrowed until registry_remove_source) at the head of the
 * list: the newest source is asked first. */
void registry_add_source(struct registry *reg, struct byte_source *src);
/* Removes src if it was added. */
void registry_remove_source(struct registry *reg, struct byte_source *src);
/* A source that can serve id, other than except (may be NULL); NULL if
 * none. Borrowed. */
struct byte_source *registry_source_with_file(const struct registry *reg, const struct fileid *id,
					      const struct byte_source *except);
/* src->ops->has_file / read_range (see above). */
bool byte_source_has_file(const struct byte_source *src, const struct fileid *id,
			  uint64_t *ret_size);
int byte_source_read_range(struct byte_source *src, uint64_t request_id, const struct fileid *id,
			   uint64_t offset, uint32_t length);

/* fn(ctx, id) is called, in the order subscribed, each time the analysis
 * of a file is done (either way) or its source index was stored. ctx is
 * borrowed for the registry's life. Returns 0 or -E2BIG (more than
 * REGISTRY_MAX_SUBSCRIBERS). */
int registry_subscribe(struct registry *reg, void (*fn)(void *ctx, const struct fileid *id),
		       void *ctx);
/* Tells the subscribers that id is done. Must not be called from a
 * subscriber. */
void registry_file_done(struct registry *reg, const struct fileid *id);
