/* index_worker.h - the worker thread that builds source indexes
 * (line_index.h) off the rpc loop (index_worker.c). Every function but the
 * worker itself runs on the loop thread; the state is global (one worker
 * per process).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "fileid.h"
#include "file_image.h"
#include "registry.h"

struct line_index;

/* index_worker_submit flags. */
#define INDEX_TASK_SPARSE 1u /* symbols only (LINE_INDEX_SYMBOLS_ONLY) */
/* Also the unwind table, after the index, stored when collected: an
 * upload's client waits for its answers, not for a table that only a
 * sensor mapping the file would load. */
#define INDEX_TASK_UNWIND 2u
/* Queues the source index of id for the worker thread; takes img, dimg
 * (the debug file) and aimg (its DWZ alternate file; both may be NULL) in
 * any case. name is copied. hold_until_ms (clock_now_ms() time, 0: none):
 * keep the task off the queue until then or until a first answer is asked
 * of it. Returns 0 or a negative errno. */
int index_worker_submit(const struct fileid *id, struct file_image *img, struct file_image *dimg,
			struct file_image *aimg, unsigned flags, const char *name,
			int64_t hold_until_ms);
/* When id's index is held or queued (not yet being built), builds an
 * index of only the units that hold addrs (vaddrs) into *ret (owned) and
 * queues the task first. -ENOENT: no such task (building, or none);
 * -E2BIG: the addresses need too much of the DWARF; -ENOMEM, -EBADMSG as
 * line_index_build. *ret_units: the units read. */
int index_worker_first_answer(const struct fileid *id, const uint64_t *addrs, size_t n,
			      struct line_index **ret, size_t *ret_units);
/* A query waits for id's whole index: its task (held or queued) goes to
 * the queue's head. */
void index_worker_hurry(const struct fileid *id);
/* Queues the held tasks whose time is up at now_ms. */
void index_worker_release_held(int64_t now_ms);
/* Whether the index of id is queued, being built or not collected yet. */
bool index_worker_pending(const struct fileid *id);
/* Whether a task is queued, running or waits to be collected. */
bool index_worker_busy(void);
/* Stores finished indexes (and unwind tables) in cache, then tells reg's
 * subscribers of each file whose unwind table came with its index (an
 * upload's). Returns the number of tasks collected: when not 0, queries
 * waiting for an index may be answered now. */
size_t index_worker_collect(struct cache *cache, struct registry *reg);
/* Joins the worker (after the task it is on), stores what it finished
 * (index_worker_collect) and drops what is left. */
void index_worker_stop(struct cache *cache, struct registry *reg);
