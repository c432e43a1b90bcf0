/* analysis.h - file analysis jobs (analysis.c): one per file ID at a
 * time, fetching the bytes they need from the byte sources of a registry
 * (registry.h), storing every product (symtab, unwind table, interpreter
 * data, probe plan; the source index through index_worker.h) in the
 * cache, and telling the registry's subscribers when a file is done.
 *
 * Everything runs on the rpc loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "fileid.h"
#include "file_image.h"
#include "registry.h"

#define ANALYSIS_MAX_READ (4u << 20)           /* largest ReadRange */
#define ANALYSIS_MAX_FETCH (256ull << 20)      /* bytes fetched per file */
#define ANALYSIS_MAX_REQUESTS_PER_JOB 4096u
#define ANALYSIS_MAX_ACTIVE_JOBS 8u
#define ANALYSIS_MAX_QUEUED_JOBS 10000u
#define ANALYSIS_JOB_TIMEOUT_MS 60000
#define ANALYSIS_RETRY_AFTER_MS 60000          /* after a transient failure */
/* An upload's source index waits this long for the uploader's first
 * query before the worker builds it whole (index_worker_submit). */
#define UPLOAD_INDEX_HOLD_MS 250

struct analysis;
struct go_plan;

struct analysis_opts {
	/* Packs a probe plan for the cache (the wire form sessions send):
	 * 0 with *ret (malloc'd) and *ret_len, or -ENOMEM. NULL: no plans
	 * are stored. */
	int (*pack_plan)(const struct fileid *id, const struct go_plan *p, uint8_t **ret,
			 size_t *ret_len);
	/* Called after a handler's work may have left jobs for the timer
	 * (analysis_flush_done). May be NULL. */
	void (*poke)(void *ctx);
	void *ctx; /* for poke; borrowed */
};

/* cache, reg and debug_dirs (NULL-terminated; may be NULL) are borrowed
 * and must outlive the result; opts is copied (may be NULL). NULL on out
 * of memory. */
struct analysis *analysis_new(struct cache *cache, struct registry *reg,
			      const char *const *debug_dirs, const struct analysis_opts *opts);
/* Drops every job, running or queued, without telling anyone. Accepts
 * NULL. */
void analysis_free(struct analysis *an);

enum file_state {
	FILE_READY,   /* *ret_symtab (borrowed, see cache_lookup) */
	FILE_FAILED,  /* *ret_error (borrowed, static or cache-owned) */
	FILE_PENDING, /* an analysis job is running or queued */
	FILE_UNKNOWN, /* no source has it and it was never analysed */
};
/* Where a file stands; starts an analysis if a source has the file and
 * start is true. ret_symtab and ret_error may be NULL. */
enum file_state analysis_file_state(struct analysis *an, const struct fileid *id, bool start,
				    const struct symtab **ret_symtab, const char **ret_error);

/* Starts (or queues) an analysis of id, or does nothing if one runs.
 * Returns 0, -ENOENT if no source has the file, -E2BIG if the queue is
 * full, or -ENOMEM. */
int analysis_start(struct analysis *an, const struct fileid *id);
/* Whether a job for id runs or is queued. */
bool analysis_running(struct analysis *an, const struct fileid *id);
/* Whether any job runs or is queued. */
bool analysis_busy(const struct analysis *an);
/* Whether a job for id failed for a reason not the file's (sensor gone,
 * read error, timeout) less than ANALYSIS_RETRY_AFTER_MS ago. */
bool analysis_retry_later(struct analysis *an, const struct fileid *id);
/* An answer from src to a byte_source_read_range() (data and error are
 * borrowed for the call). Returns 0, or -EBADMSG for a protocol
 * violation (the caller ends the source's stream; *reason, static, says
 * why). */
int analysis_on_file_range(struct analysis *an, const struct byte_source *src,
			   uint64_t request_id, const uint8_t *file_id, size_t file_id_len,
			   uint64_t offset, const uint8_t *data, size_t len, const char *error,
			   const char **reason);
/* Analyses a whole local image (an upload; taken) of id in one go and
 * caches every product, like a job would; the source index is queued on
 * the worker, held UPLOAD_INDEX_HOLD_MS for the uploader's first query.
 * name is borrowed for the call. Returns 0 with *ret_error NULL
 * (analysed) or set (static or cache-owned: a property of the file,
 * cached), or -ENOMEM. */
int analysis_whole(struct analysis *an, const struct fileid *id, struct file_image *img,
		   const char *name, const char **ret_error);
/* src is going away (call before registry_remove_source): its jobs move
 * to another source or fail. */
void analysis_source_gone(struct analysis *an, const struct byte_source *src);
/* Whether a job currently fetches through src. */
bool analysis_uses_source(const struct analysis *an, const struct byte_source *src);
/* Ends jobs that ran over ANALYSIS_JOB_TIMEOUT_MS. */
void analysis_tick(struct analysis *an);
/* Tells the subscribers of jobs that ended and starts queued jobs, then
 * pokes (analysis_opts); call at the end of a handler that may have
 * started or ended a job. */
void analysis_flush_done(struct analysis *an);
