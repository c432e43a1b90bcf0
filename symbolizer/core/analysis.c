/* analysis.c - file analysis jobs: one per file ID at a time, shared by
 * every byte source (a sensor session: registry.h). A job drives the
 * resumable ELF analysis (elf_analysis.h): step, ask a source that has
 * the file for the ranges it needs (a ReadRange to the sensor, at most
 * ANALYSIS_MAX_READ each), put the answers into the file image, step
 * again. The symbolizer only ever asks for files a
 * source registered, and bounds what one file may cost (bytes fetched,
 * requests, time).
 *
 * One job computes the products of a file from the same fetched image:
 * the symtab (elf_analysis.h), the unwind table (unwind_analysis.h) and the
 * source index (line_index.h, built on the worker thread of
 * index_worker.c). Each round steps the analyses and folds
 * their needs into one request list, so no byte is fetched twice. The
 * source index wants the file's debug sections (when it has them, up to
 * LINES_MAX_FETCH) or else a separate debug file found locally; a Go
 * binary without DWARF, the sections its .gopclntab reader uses.
 *
 * Uploaded files (api/upload.c) are whole from the start and go through
 * analysis_whole() instead: the same products, in one go.
 *
 * Results go into the cache: a symtab and an unwind table (each, or an
 * error that is a property of the file: not ELF, too large, no call frame
 * information) that is never retried. Failures that are
 * not the file's fault (sensor gone, read error, timeout) are remembered
 * in memory only, for ANALYSIS_RETRY_AFTER_MS.
 *
 * Completion is reported through a queue drained by analysis_drain(), so
 * waking waiters never re-enters the code that ended the job.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "elf_analysis.h"
#include "unwind_analysis.h"
#include "line_index.h"
#include "minidebug.h"
#include "go_plan.h"
#include "pclntab.h"
#include "interp_loader.h"
#include "interp_ops.h"
#include "analysis.h"
#include "clock.h"
#include "hmap.h"
#include "index_worker.h"

/* Debug sections fetched from a sensor for the source index, at most. */
#define LINES_MAX_FETCH (128ull << 20)
/* A Go executable is fetched whole for its probe plan, up to this size. */
#define PLAN_MAX_FETCH (192ull << 20)

static const char *const debug_section_names[] = {
	".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_line_str",
	".debug_ranges", ".debug_rnglists", ".debug_addr", ".debug_str_offsets",
	".gnu_debugdata", /* last: MiniDebugInfo, see merge_minidebug */
};
#define N_DEBUG_SECTIONS (sizeof(debug_section_names) / sizeof(debug_section_names[0]))
/* A Go binary without DWARF: lines and inlined calls from its function
 * table (first two: either name), the inline trees in .rodata found
 * through moduledata in .noptrdata, the version in .go.buildinfo. */
static const char *const go_section_names[] = {
	PCLNTAB_SECTION, PCLNTAB_SECTION_PIE, ".noptrdata", ".rodata", ".go.buildinfo",
};
#define N_GO_SECTIONS (sizeof(go_section_names) / sizeof(go_section_names[0]))

struct job {
	struct fileid id;
	uint64_t size;
	struct file_image *img;
	struct byte_source *src; /* serving source while active */
	bool active;
	size_t outstanding;
	uint64_t bytes_requested;
	unsigned n_requests, n_rounds;
	int64_t started_ms;
	struct job *qnext;
	/* Products finished in an earlier round (the steps are stateless
	 * and would rebuild them). */
	bool sym_done, unwind_done, lines_done, plan_done, interp_done;
	bool lines_sparse; /* the debug sections were not fetched */
	struct symtab *symtab;
	struct unwind_table *unwind;
	const char *unwind_error; /* static; set when unwind_done without a table */
};

struct range_req {
	uint64_t id;
	struct job *job;
	struct byte_source *src;
	uint64_t offset;
	uint32_t length;
};

struct analysis {
	struct analysis_opts opts;
	struct cache *cache;            /* borrowed */
	struct registry *reg;           /* borrowed */
	const char *const *debug_dirs;  /* borrowed */
	struct hmap *jobs;     /* fileid -> struct job */
	struct hmap *requests; /* request id (u64) -> struct range_req */
	uint64_t next_request_id;
	struct job *queue_head, *queue_tail; /* jobs waiting for a slot */
	size_t n_active, n_queued;
	struct hmap *retry;    /* fileid -> int64_t *: no new job before then */
};

/* Files whose job ended, waiting for analysis_drain. */
static struct fileid *done_ids;
static size_t n_done, cap_done;
static bool draining;

static void job_end(struct analysis *an, struct job *j, struct symtab *t, const char *error,
		    bool permanent);
static void job_step(struct analysis *an, struct job *j);

static void job_free(struct job *j)
{
	file_image_free(j->img);
	symtab_free(j->symtab);
	unwind_table_free(j->unwind);
	free(j);
}

struct analysis *analysis_new(struct cache *cache, struct registry *reg,
			      const char *const *debug_dirs, const struct analysis_opts *opts)
{
	struct analysis *an = calloc(1, sizeof(*an));

	if (!an)
		return NULL;
	an->cache = cache;
	an->reg = reg;
	an->debug_dirs = debug_dirs;
	if (opts)
		an->opts = *opts;
	an->next_request_id = 1;
	an->jobs = hmap_new();
	an->requests = hmap_new();
	an->retry = hmap_new();
	if (!an->jobs || !an->requests || !an->retry) {
		hmap_free(an->jobs, NULL);
		hmap_free(an->requests, NULL);
		hmap_free(an->retry, NULL);
		free(an);
		return NULL;
	}
	return an;
}

bool analysis_busy(const struct analysis *an)
{
	return an->n_active || an->n_queued;
}

bool analysis_retry_later(struct analysis *an, const struct fileid *id)
{
	int64_t *retry_at = hmap_get(an->retry, id, sizeof(*id));

	return retry_at && clock_now_ms() < *retry_at;
}

enum file_state analysis_file_state(struct analysis *an, const struct fileid *id, bool start,
				    const struct symtab **ret_symtab, const char **ret_error)
{
	int64_t *retry_at;

	if (analysis_running(an, id))
		return FILE_PENDING;
	switch (cache_lookup(an->cache, id, ret_symtab, ret_error)) {
	case CACHE_OK:
		return FILE_READY;
	case CACHE_ERROR:
		return FILE_FAILED;
	case CACHE_MISS:
		break;
	}
	retry_at = hmap_get(an->retry, id, sizeof(*id));
	if (retry_at) {
		if (clock_now_ms() < *retry_at) {
			if (ret_error)
				*ret_error = "file could not be read from the sensor";
			return FILE_FAILED;
		}
		free(hmap_remove(an->retry, id, sizeof(*id)));
	}
	if (!registry_source_with_file(an->reg, id, NULL))
		return FILE_UNKNOWN;
	if (!start)
		return FILE_PENDING;
	if (analysis_start(an, id) < 0) {
		if (ret_error)
			*ret_error = "too many files waiting for analysis";
		return FILE_FAILED;
	}
	return FILE_PENDING;
}

bool analysis_running(struct analysis *an, const struct fileid *id)
{
	return hmap_get(an->jobs, id, sizeof(*id)) != NULL;
}

/* Forgets the requests of job j, or (j NULL) those sent through src. */
static void drop_requests(struct analysis *an, const struct job *j, const struct byte_source *src)
{
	struct hmap_iter it;
	void *val;

	hmap_iter_init(an->requests, &it);
	while (hmap_next(an->requests, &it, NULL, NULL, &val)) {
		struct range_req *r = val;

		if (j ? r->job == j : r->src == src) {
			hmap_remove_u64(an->requests, r->id);
			free(r);
		}
	}
}

static void job_activate(struct analysis *an, struct job *j)
{
	j->active = true;
	an->n_active++;
	j->started_ms = clock_now_ms();
	j->src = registry_source_with_file(an->reg, &j->id, NULL);
	if (!j->src) {
		job_end(an, j, NULL, "sensor gone", false);
		return;
	}
	if (!j->size)
		byte_source_has_file(j->src, &j->id, &j->size);
	if (j->size > FILE_IMAGE_MAX_SIZE) {
		job_end(an, j, NULL, "file larger than 4 GiB, not analysed", true);
		return;
	}
	j->img = file_image_new(j->size);
	if (!j->img) {
		job_end(an, j, NULL, j->size ? "out of memory" : "empty file", j->size == 0);
		return;
	}
	job_step(an, j);
}

int analysis_start(struct analysis *an, const struct fileid *id)
{
	struct byte_source *s;
	struct job *j;

	if (analysis_running(an, id))
		return 0;
	s = registry_source_with_file(an->reg, id, NULL);
	if (!s)
		return -ENOENT;
	if (an->n_active >= ANALYSIS_MAX_ACTIVE_JOBS && an->n_queued >= ANALYSIS_MAX_QUEUED_JOBS)
		return -E2BIG;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->id = *id;
	byte_source_has_file(s, id, &j->size);
	if (hmap_put(an->jobs, id, sizeof(*id), j, NULL) < 0) {
		free(j);
		return -ENOMEM;
	}
	if (an->n_active < ANALYSIS_MAX_ACTIVE_JOBS) {
		job_activate(an, j);
	} else {
		if (an->queue_tail)
			an->queue_tail->qnext = j;
		else
			an->queue_head = j;
		an->queue_tail = j;
		an->n_queued++;
	}
	return 0;
}

static int issue(struct analysis *an, struct job *j, uint64_t off, uint32_t len)
{
	struct range_req *r;
	int err;

	if (j->bytes_requested + len > ANALYSIS_MAX_FETCH)
		return -EFBIG;
	if (j->n_requests >= ANALYSIS_MAX_REQUESTS_PER_JOB)
		return -ELOOP;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->id = an->next_request_id++;
	r->job = j;
	r->src = j->src;
	r->offset = off;
	r->length = len;
	if (hmap_put_u64(an->requests, r->id, r, NULL) < 0) {
		free(r);
		return -ENOMEM;
	}
	err = byte_source_read_range(j->src, r->id, &j->id, off, len);
	if (err < 0) {
		hmap_remove_u64(an->requests, r->id);
		free(r);
		return err;
	}
	j->bytes_requested += len;
	j->n_requests++;
	j->outstanding++;
	return 0;
}

static int request_ranges(struct analysis *an, struct job *j, const struct elf_need *need)
{
	size_t issued = 0;
	int r;

	for (size_t i = 0; i < need->n && i < ELF_ANALYSIS_MAX_RANGES; i++) {
		uint64_t off = need->ranges[i].offset, end;

		if (off >= j->size)
			continue;
		end = need->ranges[i].length > j->size - off ? j->size : off + need->ranges[i].length;
		while (off < end) {
			uint32_t len = end - off > ANALYSIS_MAX_READ ? ANALYSIS_MAX_READ
								    : (uint32_t)(end - off);

			if (!file_image_has(j->img, off, len)) {
				r = issue(an, j, off, len);
				if (r < 0)
					return r;
				issued++;
			}
			off += len;
		}
	}
	return issued ? 0 : -EDEADLK;
}

/* Moves j to another source that has the file; ends it if none. */
static void job_reroute(struct analysis *an, struct job *j)
{
	struct byte_source *other = registry_source_with_file(an->reg, &j->id, j->src);

	drop_requests(an, j, NULL);
	j->outstanding = 0;
	if (!other) {
		job_end(an, j, NULL, "sensor gone", false);
		return;
	}
	j->src = other;
	job_step(an, j);
}

/* elf_sections() with the layout it needs for itself. */
static int find_sections(const struct file_image *img, struct elf_need *need,
			 const char *const *names, size_t n, struct elf_section *secs)
{
	struct elf_layout *layout = malloc(sizeof(*layout));
	int r;

	if (!layout)
		return -ENOMEM;
	r = elf_sections(img, need, names, n, secs, layout, NULL);
	free(layout);
	return r;
}

/* A section that is there and has bytes in the file (not SHT_NOBITS). */
static bool has_bytes(const struct elf_section *sec)
{
	return sec->found && sec->type != 8 /* SHT_NOBITS */;
}

/* Asks for the sections of secs[0..n) not in img yet. */
static void need_sections(const struct file_image *img, const struct elf_section *secs, size_t n,
			  struct elf_need *need)
{
	for (size_t i = 0; i < n; i++)
		if (has_bytes(&secs[i]) && !file_image_has(img, secs[i].offset, secs[i].size))
			elf_need_add(need, secs[i].offset, secs[i].size);
}

/* Go's sections for a file without DWARF: 0 (there, or not a Go
 * binary: -ENOENT), -EAGAIN, -E2BIG. */
static int go_lines_step(const struct file_image *img, struct elf_need *need)
{
	struct elf_section secs[N_GO_SECTIONS];
	uint64_t total = 0;
	int r = find_sections(img, need, go_section_names, N_GO_SECTIONS, secs);

	if (r < 0)
		return r;
	if (!has_bytes(&secs[0]) && !has_bytes(&secs[1]))
		return -ENOENT;
	for (size_t i = 0; i < N_GO_SECTIONS; i++)
		if (has_bytes(&secs[i]))
			total += secs[i].size;
	if (total > LINES_MAX_FETCH)
		return -E2BIG;
	need_sections(img, secs, N_GO_SECTIONS, need);
	return need->n ? -EAGAIN : 0;
}

/* The debug sections the source index reads, if the file has them (or a
 * Go binary's). Returns 0 (all there, or none to fetch), -EAGAIN (*need
 * says what), -E2BIG (too large: the index gets symbol names only),
 * -ENOENT (nothing to read), -EBADMSG. */
static int lines_step(const struct file_image *img, struct elf_need *need)
{
	struct elf_section secs[N_DEBUG_SECTIONS];
	uint64_t total = 0;
	bool any = false;
	int r = find_sections(img, need, debug_section_names, N_DEBUG_SECTIONS, secs);

	if (r < 0)
		return r;
	for (size_t i = 0; i < N_DEBUG_SECTIONS; i++) {
		if (!has_bytes(&secs[i]))
			continue;
		any = i == 0 || i == N_DEBUG_SECTIONS - 1 || any;
		total += secs[i].size;
	}
	if (!any)
		return go_lines_step(img, need);
	if (total > LINES_MAX_FETCH)
		return -E2BIG;
	need_sections(img, secs, N_DEBUG_SECTIONS, need);
	return need->n ? -EAGAIN : 0;
}

/* The probe plan of a Go executable (docs/go-probes.md), computed from
 * the whole file (symbols, the hooked functions' code, DWARF) and stored
 * in the cache; sessions send it with the file's unwind table. Returns 0
 * (done: stored, or not a Go executable), -EAGAIN (*need says what),
 * -EBADMSG or -ENOMEM. */
static int plan_step(struct analysis *an, struct job *j, struct elf_need *need)
{
	static const char *const names[] = { ".go.buildinfo" };
	struct elf_section sec;
	struct go_plan *plan = NULL;
	uint8_t *copy = NULL, *packed = NULL;
	size_t len = 0;
	int r = find_sections(j->img, need, names, 1, &sec);

	if (r < 0)
		return r;
	if (!sec.found)
		return 0;
	if (j->size > PLAN_MAX_FETCH) {
		log_info("%s: a Go executable over %llu MiB, not planned for probes",
			 registry_file_name(an->reg, &j->id) ? registry_file_name(an->reg, &j->id) : "a file",
			 PLAN_MAX_FETCH >> 20);
		return 0;
	}
	if (!file_image_has(j->img, 0, j->size)) {
		elf_need_add(need, 0, j->size);
		return -EAGAIN;
	}
	/* libelf may decompress in place: plan a copy, not the shared image. */
	copy = malloc(j->size);
	plan = malloc(sizeof(*plan));
	r = -ENOMEM;
	if (!copy || !plan)
		goto cleanup;
	memcpy(copy, file_image_data(j->img), j->size);
	r = go_plan_build(copy, j->size, plan);
	if (r == -ENOENT || r == -EBADMSG) {
		r = 0; /* not one after all */
		goto cleanup;
	}
	if (r < 0)
		goto cleanup;
	r = an->opts.pack_plan ? an->opts.pack_plan(&j->id, plan, &packed, &len) : 0;
	if (r < 0)
		goto cleanup;
	r = cache_store_plan(an->cache, &j->id, packed, len, (int64_t)time(NULL));
	if (r < 0)
		log_warn_errno(r, "storing a probe plan failed");
	log_info("%s: Go %s, probe plan %s%s (offsets from %s)",
		 registry_file_name(an->reg, &j->id) ? registry_file_name(an->reg, &j->id) : "a file",
		 plan->go_version, plan->error ? "not made: " : "made",
		 plan->error ? plan->error : "", plan->offsets_from ? plan->offsets_from : "-");
	r = 0;
cleanup:
	free(packed);
	free(plan);
	free(copy);
	return r;
}

static void job_step(struct analysis *an, struct job *j)
{
	struct elf_need need = { 0 }, uneed = { 0 };
	struct symtab *t = NULL;
	struct unwind_table *ut = NULL;
	const char *reason = NULL, *ureason = NULL;
	int r;

	if (!j->sym_done) {
		r = elf_analysis_step(j->img, &need, &t, &reason);
		if (r == -EBADMSG) {
			job_end(an, j, NULL, reason ? reason : "not a valid ELF file", true);
			return;
		}
		if (r != 0 && r != -EAGAIN) {
			job_end(an, j, NULL, "analysis failed (out of memory)", false);
			return;
		}
		if (r == 0) {
			j->sym_done = true;
			j->symtab = t;
		}
	}
	if (!j->unwind_done) {
		r = unwind_analysis_step(j->img, NULL, &uneed, &ut, NULL, &ureason);
		switch (r) {
		case 0:
			j->unwind = ut;
			j->unwind_done = true;
			break;
		case -EAGAIN:
			for (size_t i = 0; i < uneed.n; i++)
				elf_need_add(&need, uneed.ranges[i].offset, uneed.ranges[i].length);
			break;
		case -EBADMSG:
			j->unwind_error = ureason ? ureason : "no usable call frame information";
			j->unwind_done = true;
			break;
		case -E2BIG:
			j->unwind_error = "unwind table over the row cap";
			j->unwind_done = true;
			break;
		default:
			job_end(an, j, NULL, "analysis failed (out of memory)", false);
			return;
		}
	}
	if (!j->lines_done) {
		struct elf_need lneed = { 0 };

		r = lines_step(j->img, &lneed);
		if (r == -EAGAIN) {
			for (size_t i = 0; i < lneed.n; i++)
				elf_need_add(&need, lneed.ranges[i].offset, lneed.ranges[i].length);
		} else {
			j->lines_done = true;
			j->lines_sparse = r != 0;
		}
	}
	if (j->sym_done && j->unwind_done && j->lines_done && !j->plan_done) {
		struct elf_need pneed = { 0 };

		r = plan_step(an, j, &pneed);
		if (r == -EAGAIN) {
			for (size_t i = 0; i < pneed.n; i++)
				elf_need_add(&need, pneed.ranges[i].offset, pneed.ranges[i].length);
		} else {
			if (r < 0)
				log_debug("probe plan: %d", r);
			j->plan_done = true;
		}
	}
	if (j->sym_done && !j->interp_done) {
		/* What the interpreter Loader reads beyond the symbols. */
		struct elf_need ineed = { 0 };
		const char *name = registry_file_name(an->reg, &j->id);

		r = name ? interp_loader_need(j->img, name, &ineed) : 0;
		if (r == -EAGAIN) {
			for (size_t i = 0; i < ineed.n; i++)
				elf_need_add(&need, ineed.ranges[i].offset, ineed.ranges[i].length);
		} else {
			j->interp_done = true;
		}
	}
	if (j->sym_done && j->unwind_done && j->lines_done && j->plan_done && j->interp_done) {
		t = j->symtab;
		j->symtab = NULL;
		job_end(an, j, t, NULL, true);
		return;
	}
	r = request_ranges(an, j, &need);
	switch (r) {
	case 0:
		return;
	case -EPIPE:
		job_reroute(an, j);
		return;
	case -EFBIG:
		job_end(an, j, NULL, "analysis needs more than 256 MiB of the file", true);
		return;
	case -ELOOP:
		job_end(an, j, NULL, "analysis needs too many reads", true);
		return;
	case -EDEADLK:
		job_end(an, j, NULL, "analysis asked for bytes it already has", true);
		return;
	default:
		/* Requests already sent are dropped with the job. */
		job_end(an, j, NULL, "cannot send read requests to the sensor", false);
		return;
	}
}

/* A separate debug file (by build ID or debuglink) in a configured
 * directory replaces .dynsym-only names with the full .symtab. Local and
 * whole, so the analysis completes in one go; reading it blocks the loop
 * briefly, which is accepted for a once-per-file event. */
static struct symtab *merge_debug_file(struct analysis *an, struct symtab *t,
				       struct file_image **ret_img)
{
	const uint8_t *bid;
	size_t bid_len;
	uint32_t crc = 0;
	const char *link;
	char *path = NULL;
	struct file_image *img = NULL;
	struct symtab *dt = NULL, *merged = NULL;
	struct elf_need need;
	const char *reason = NULL;
	int r;

	if (!an->debug_dirs || !an->debug_dirs[0])
		return t;
	bid = symtab_build_id(t, &bid_len);
	link = symtab_debuglink(t, &crc);
	if (!bid_len && (!link || !*link))
		return t;
	path = elf_find_debug_file(an->debug_dirs, bid, bid_len, link && *link ? link : NULL, crc);
	if (!path)
		return t;
	img = file_image_open(path);
	if (!img) {
		log_debug("cannot open debug file %s", path);
		goto cleanup;
	}
	r = elf_analysis_step(img, &need, &dt, &reason);
	if (r < 0) {
		log_warn("debug file %s: %s, ignoring", path, r == -EBADMSG && reason ? reason : "failed");
		goto cleanup;
	}
	merged = symtab_merge_debug(t, dt);
	if (merged) {
		log_debug("merged %zu symbols from %s", symtab_count(dt), path);
		symtab_free(t);
		t = merged;
	}
	/* Its .debug_frame may describe what .eh_frame leaves out. */
	*ret_img = img;
	img = NULL;
cleanup:
	symtab_free(dt);
	file_image_free(img);
	free(path);
	return t;
}

/* The DWZ alternate file of the DWARF the index will read (the debug
 * file's, else the file's own unless sparse), from a configured debug
 * directory; NULL when there is none. Local, like the debug file. */
static struct file_image *open_alt_file(struct analysis *an, struct file_image *img,
					struct file_image *dimg, bool sparse)
{
	struct file_image *src = dimg ? dimg : (sparse ? NULL : img);
	struct file_image *aimg = NULL;
	char *path;

	if (!src || !an->debug_dirs || !an->debug_dirs[0])
		return NULL;
	path = elf_find_alt_file(an->debug_dirs, (void *)file_image_data(src),
				 file_image_size(src));
	if (!path)
		return NULL;
	aimg = file_image_open(path);
	if (!aimg)
		log_debug("cannot open DWZ alternate file %s", path);
	else
		log_debug("DWZ alternate file %s", path);
	free(path);
	return aimg;
}

/* MiniDebugInfo: a stripped file's .gnu_debugdata (xz) holds a .symtab
 * of the functions .dynsym leaves out; its names join t like a debug
 * file's. Used when no separate debug file was found. */
static struct symtab *merge_minidebug(struct symtab *t, const struct file_image *img)
{
	static const char *const names[] = { ".gnu_debugdata" };
	struct elf_section sec;
	struct file_image *mimg = NULL;
	struct symtab *dt = NULL, *merged;
	struct elf_need need = { 0 };
	uint8_t *buf = NULL;
	size_t len = 0;
	int r = -EAGAIN;

	if (find_sections(img, &need, names, 1, &sec) < 0 || !has_bytes(&sec) ||
	    !file_image_has(img, sec.offset, sec.size) ||
	    minidebug_decompress(file_image_data(img) + sec.offset, sec.size, &buf, &len) < 0 ||
	    !(mimg = file_image_new(len)) || file_image_put(mimg, 0, buf, len) < 0)
		goto cleanup;
	for (int i = 0; i < 4 && r == -EAGAIN; i++)
		r = elf_analysis_step(mimg, &need, &dt, NULL);
	if (r == 0 && (merged = symtab_merge_debug(t, dt))) {
		log_debug("merged %zu MiniDebugInfo symbols", symtab_count(dt));
		symtab_free(t);
		t = merged;
	}
cleanup:
	symtab_free(dt);
	file_image_free(mimg);
	free(buf);
	return t;
}

static void queue_done(const struct fileid *id)
{
	if (n_done == cap_done) {
		size_t cap = cap_done ? cap_done * 2 : 64;
		struct fileid *p = realloc(done_ids, cap * sizeof(*p));

		if (!p)
			return; /* waiters then wake on their timeouts */
		done_ids = p;
		cap_done = cap;
	}
	done_ids[n_done++] = *id;
}

/* The interpreter Loader, for files named like interpreters: its Data or
 * why not, into the cache (img holds the dynamic symbols the symtab
 * analysis fetched). An unsupported version is said once, here. */
static void interp_analyse(struct analysis *an, const struct fileid *id,
			   const struct file_image *img, const char *name)
{
	struct interp_data d;
	const char *reason = NULL;
	int r;

	if (!interp_loader_wants(name))
		return;
	r = img ? interp_loader_analyse(img, name, &d, &reason) : -EBADMSG;
	if (r == 0) {
		log_info("%.100s is %s %u.%u, its runtime at file offset 0x%llx", name,
			 interp_ops_of(d.kind)->name, d.major, d.minor,
			 (unsigned long long)d.runtime_offset);
	} else if (r == -EPROTONOSUPPORT) {
		log_warn("%.100s: unsupported interpreter (%s); its frames stay native", name,
			 reason);
	} else {
		log_debug("%.100s is no interpreter: %s", name, reason ? reason : "?");
	}
	if (cache_store_interp(an->cache, id, r == 0 ? &d : NULL,
			       reason ? reason : "not an interpreter", (int64_t)time(NULL)) < 0)
		log_warn("cannot write the interpreter data of %.100s to the cache, ignoring",
			 name);
}

static void job_end(struct analysis *an, struct job *j, struct symtab *t, const char *error,
		    bool permanent)
{
	char hex[FILEID_HEX_LEN + 1];
	const char *name = registry_file_name(an->reg, &j->id);
	int64_t elapsed = clock_now_ms() - j->started_ms;

	fileid_to_hex(&j->id, hex);
	if (!name)
		name = hex;
	drop_requests(an, j, NULL);
	hmap_remove(an->jobs, &j->id, sizeof(j->id));
	if (j->active) {
		an->n_active--;
	} else {
		/* Ended while queued: unlink it. */
		for (struct job **pp = &an->queue_head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->qnext) {
			if (*pp == j) {
				*pp = j->qnext;
				if (an->queue_tail == j)
					an->queue_tail = prev;
				an->n_queued--;
				break;
			}
		}
	}
	if (t) {
		struct file_image *dimg = NULL;

		t = merge_debug_file(an, t, &dimg);
		if (!dimg)
			t = merge_minidebug(t, j->img);
		if (dimg) {
			struct unwind_table *ut = NULL;
			struct unwind_analysis_info info;
			struct elf_need need;

			/* The image is whole for what the table needs: this
			 * finishes at once, with the debug file's rows too. */
			if (unwind_analysis_step(j->img, dimg, &need, &ut, &info, NULL) == 0 &&
			    info.has_debug_file) {
				unwind_table_free(j->unwind);
				j->unwind = ut;
				j->unwind_error = NULL;
			} else {
				unwind_table_free(ut);
			}
		}
		interp_analyse(an, &j->id, j->img, name);
		/* The index is built on the worker thread (index_worker.c); it
		 * takes both images. */
		if (index_worker_submit(&j->id, j->img, dimg,
					open_alt_file(an, j->img, dimg, j->lines_sparse),
					j->lines_sparse ? INDEX_TASK_SPARSE : 0, name, 0) < 0)
			log_warn("cannot queue the source index of %.100s, ignoring", name);
		j->img = NULL;
		log_info("analysed %.100s (%s): %zu symbols, %zu unwind rows%s%s, %llu bytes in %u reads, %u round trips, %lld ms",
			 name, hex, symtab_count(t), j->unwind ? unwind_table_count(j->unwind) : 0,
			 j->unwind_error ? ": " : "", j->unwind_error ? j->unwind_error : "",
			 (unsigned long long)j->bytes_requested, j->n_requests, j->n_rounds,
			 (long long)elapsed);
		if (cache_store(an->cache, &j->id, t, NULL, (int64_t)time(NULL)) < 0)
			log_warn("cannot write the analysis of %.100s to the cache, ignoring", name);
		if (cache_store_unwind(an->cache, &j->id, j->unwind, j->unwind_error,
				       (int64_t)time(NULL)) < 0)
			log_warn("cannot write the unwind table of %.100s to the cache, ignoring",
				 name);
		j->unwind = NULL;
	} else if (permanent) {
		log_warn("analysis of %.100s (%s) failed: %s", name, hex, error);
		if (cache_store(an->cache, &j->id, NULL, error, (int64_t)time(NULL)) < 0)
			log_warn("cannot write the failure of %.100s to the cache, ignoring", name);
		if (cache_store_unwind(an->cache, &j->id, NULL, error, (int64_t)time(NULL)) < 0)
			log_warn("cannot write the failure of %.100s to the cache, ignoring", name);
		interp_analyse(an, &j->id, NULL, name);
	} else {
		int64_t *at = malloc(sizeof(*at)), *old = NULL;

		log_warn("analysis of %.100s (%s) failed: %s; will retry later", name, hex, error);
		if (at) {
			*at = clock_now_ms() + ANALYSIS_RETRY_AFTER_MS;
			if (hmap_put(an->retry, &j->id, sizeof(j->id), at, (void **)&old) < 0)
				free(at);
			free(old);
		}
	}
	queue_done(&j->id);
	job_free(j);
}

/* Wakes waiters of ended jobs and starts queued ones. Not re-entrant:
 * a nested call returns at once and the outer loop picks up the work. */
static void analysis_drain(struct analysis *an)
{
	if (draining)
		return;
	draining = true;
	for (;;) {
		while (an->n_active < ANALYSIS_MAX_ACTIVE_JOBS && an->queue_head) {
			struct job *j = an->queue_head;

			an->queue_head = j->qnext;
			if (!an->queue_head)
				an->queue_tail = NULL;
			j->qnext = NULL;
			an->n_queued--;
			job_activate(an, j);
		}
		if (n_done == 0)
			break;
		struct fileid id = done_ids[--n_done];

		registry_file_done(an->reg, &id);
	}
	draining = false;
}

int analysis_on_file_range(struct analysis *an, const struct byte_source *s, uint64_t request_id,
			   const uint8_t *file_id, size_t file_id_len, uint64_t offset,
			   const uint8_t *data, size_t len, const char *error, const char **reason)
{
	struct range_req *r = hmap_get_u64(an->requests, request_id);
	struct job *j;
	uint64_t want_off;
	uint32_t want_len;
	int err = 0;

	if (!r) {
		if (request_id == 0 || request_id >= an->next_request_id) {
			*reason = "FileRange for a request_id never sent";
			return -EBADMSG;
		}
		return 0; /* answer to a request whose job ended or moved */
	}
	if (r->src != s) {
		*reason = "FileRange for a request sent to another sensor";
		return -EBADMSG;
	}
	j = r->job;
	if (file_id_len != FILEID_LEN || memcmp(file_id, j->id.bytes, FILEID_LEN) != 0) {
		*reason = "FileRange file_id does not match the request";
		return -EBADMSG;
	}
	if (error && *error) {
		char msg[160];

		snprintf(msg, sizeof(msg), "sensor could not read the file: %.100s", error);
		job_end(an, j, NULL, msg, false);
		goto out;
	}
	if (offset != r->offset) {
		*reason = "FileRange offset does not match the request";
		return -EBADMSG;
	}
	if (len > r->length) {
		*reason = "FileRange carries more data than requested";
		return -EBADMSG;
	}
	want_off = r->offset;
	want_len = r->length;
	hmap_remove_u64(an->requests, request_id);
	free(r);
	j->outstanding--;
	if (len == 0) {
		job_end(an, j, NULL, "sensor returned no data (short file?)", false);
		goto out;
	}
	if (file_image_put(j->img, want_off, data, len) < 0) {
		job_end(an, j, NULL, "range outside the file", true);
		goto out;
	}
	if (len < want_len) {
		/* Short read: ask for the rest. */
		err = issue(an, j, want_off + len, want_len - (uint32_t)len);
		if (err == -EPIPE) {
			job_reroute(an, j);
			goto out;
		}
		if (err < 0) {
			job_end(an, j, NULL, "analysis needs too many reads", err != -ENOMEM);
			goto out;
		}
	}
	if (j->outstanding == 0) {
		j->n_rounds++;
		job_step(an, j);
	}
out:
	analysis_drain(an);
	return 0;
}

void analysis_source_gone(struct analysis *an, const struct byte_source *s)
{
	struct hmap_iter it;
	void *val;

	hmap_iter_init(an->jobs, &it);
	while (hmap_next(an->jobs, &it, NULL, NULL, &val)) {
		struct job *j = val;

		if (j->active && j->src == s)
			job_reroute(an, j);
	}
	/* Any request still naming s (cannot be, but must not dangle). */
	drop_requests(an, NULL, s);
	analysis_drain(an);
}

bool analysis_uses_source(const struct analysis *an, const struct byte_source *s)
{
	struct hmap_iter it;
	void *val;

	hmap_iter_init(an->jobs, &it);
	while (hmap_next(an->jobs, &it, NULL, NULL, &val)) {
		const struct job *j = val;

		if (j->active && j->src == s)
			return true;
	}
	return false;
}

void analysis_tick(struct analysis *an)
{
	int64_t now = clock_now_ms();
	struct hmap_iter it;
	void *val;

	hmap_iter_init(an->jobs, &it);
	while (hmap_next(an->jobs, &it, NULL, NULL, &val)) {
		struct job *j = val;

		if (j->active && now - j->started_ms > ANALYSIS_JOB_TIMEOUT_MS)
			job_end(an, j, NULL, "analysis timed out", false);
	}
	analysis_drain(an);
}

void analysis_free(struct analysis *an)
{
	struct hmap_iter it;
	void *val;

	if (!an)
		return;
	hmap_iter_init(an->jobs, &it);
	while (hmap_next(an->jobs, &it, NULL, NULL, &val)) {
		struct job *j = val;

		hmap_remove(an->jobs, &j->id, sizeof(j->id));
		job_free(j);
	}
	free(done_ids);
	done_ids = NULL;
	n_done = cap_done = 0;
	hmap_free(an->jobs, NULL);
	hmap_free(an->requests, free);
	hmap_free(an->retry, free);
	free(an);
}

/* Exposed for handlers that may end jobs outside a FileRange. Every
 * handler that can leave work for the timer ends here, so this is also
 * where the timer is told. */
void analysis_flush_done(struct analysis *an)
{
	analysis_drain(an);
	if (an->opts.poke)
		an->opts.poke(an->opts.ctx);
}

int analysis_whole(struct analysis *an, const struct fileid *id, struct file_image *img,
		   const char *name, const char **ret_error)
{
	struct symtab *t = NULL;
	struct file_image *dimg = NULL;
	struct elf_need need;
	const char *reason = NULL;
	int64_t t0 = clock_now_ms(), now = (int64_t)time(NULL);
	int r = -EAGAIN;

	/* All bytes are there, so each analysis finishes in one step; the
	 * bound only guards against a step that keeps asking. */
	for (int i = 0; i < 4 && r == -EAGAIN; i++)
		r = elf_analysis_step(img, &need, &t, &reason);
	if (r == -ENOMEM)
		goto fail;
	if (r < 0) {
		const char *error = reason ? reason : "not a valid ELF file";

		log_warn("analysis of uploaded %.100s failed: %s", name, error);
		cache_store(an->cache, id, NULL, error, now);
		cache_store_unwind(an->cache, id, NULL, error, now);
		cache_store_index(an->cache, id, NULL, error, now);
		*ret_error = error;
		file_image_free(img);
		goto done;
	}
	t = merge_debug_file(an, t, &dimg);
	if (!dimg)
		t = merge_minidebug(t, img);
	log_info("analysed uploaded %.100s: %zu symbols, %lld ms", name, symtab_count(t),
		 (long long)(clock_now_ms() - t0));
	if (cache_store(an->cache, id, t, NULL, now) < 0)
		log_warn("cannot write the analysis of %.100s to the cache, ignoring", name);
	/* The source index (the longest part: 80 ms for libasan's 6 MB of
	 * DWARF) is built on the worker; the client that uploaded asks next,
	 * and its first query is answered from the units it needs
	 * (index_worker_first_answer) while the worker builds the rest. The
	 * unwind table comes after the index, on the worker too. */
	if (index_worker_submit(id, img, dimg, open_alt_file(an, img, dimg, false),
				INDEX_TASK_UNWIND, name, clock_now_ms() + UPLOAD_INDEX_HOLD_MS) < 0)
		log_warn("cannot queue the source index of %.100s, ignoring", name);
	*ret_error = NULL;
done:
	queue_done(id);
	analysis_drain(an);
	return 0;
fail:
	file_image_free(dimg);
	file_image_free(img);
	return -ENOMEM;
}
