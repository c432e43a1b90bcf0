/* symbols.c - the public Symbols service: Symbolize, Status, Top and
 * Folded (Upload is upload.c). Every reply is built in a per-call arena.
 *
 * Symbolize names each file by file ID, GNU build ID (of an analysed
 * file) or a path a sensor reported. A file a connected sensor has but
 * that is not analysed yet is analysed first: the call is deferred until
 * its jobs end, at most SYMBOLS_TIMEOUT_MS.
 *
 * Each address gets the symbol-table name (function, offset) and, from
 * the file's source index (line_index.h), its source frames: innermost
 * inlined call first, each with function, file and line. Strings are
 * copied into the arena, since a later cache lookup in the same call may
 * evict the index they come from. A query whose file's index is still
 * queued (a new upload, or a sensor's file behind others) is answered from
 * an index of only the units its addresses fall in (first_answer) instead
 * of waiting for the whole one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "access_scope.h"
#include "arena.h"
#include "clock.h"
#include "hmap.h"
#include "index_worker.h"
#include "sort_order.h"
#include "otlp_exporter.h"
#include "line_index.h"
#include "symbols.h"
#include "symbols.pb-c.h"
#include "utf8.h"

#define SYMBOLIZE_MAX_QUERIES 1000u
#define SYMBOLIZE_MAX_ADDRESSES 100000u
/* Queries up to this many addresses may get a first answer (the CLI's
 * batch); the DIE budget in index_worker.c bounds its cost. */
#define FIRST_ANSWER_MAX_ADDRESSES 20000u
#define TOP_DEFAULT_LIMIT 50u
#define FOLDED_DEFAULT_LIMIT 100000u
#define REPLY_MAX_BYTES (12u << 20) /* under the 16 MiB message limit */

struct sym_query {
	struct fileid id;
	bool known;
	bool file_offset;
	const char *file_name; /* arena */
	const uint64_t *addrs; /* arena */
	size_t n;
	struct line_index *first; /* owned: first_answer's index */
	bool first_tried;
};

struct sym_opts {
	bool lines, inlines, demangle, compact;
};

#define SYMBOLS_TIMEOUT_MS 10000     /* a deferred Symbolize call, at most */
#define SYMBOLS_STATUS_PROCESSES 50u /* in a Status answer */
#define SYMBOLS_STATUS_NODES 256u    /* connected nodes listed in a Status answer */

struct symbols {
	const struct api_core *core;
	struct sym_wait *waits; /* deferred Symbolize calls */
};

struct sym_wait {
	struct sym_wait *next;
	struct sym_opts opts;
	struct rpc_call *call;
	struct arena *arena;
	struct sym_query *q;
	size_t n;
	int64_t deadline_ms;
};

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int parse_build_id(const char *hex, uint8_t *out, size_t max, size_t *ret_len)
{
	size_t n = strlen(hex);

	if (n == 0 || n % 2 || n / 2 > max)
		return -EINVAL;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	*ret_len = n / 2;
	return 0;
}

/* An arena copy of s (a name or path from a target's file) that is valid
 * UTF-8, as protobuf string fields must be (common/utf8.h). NULL on out
 * of memory. */
static char *text_dup(struct arena *a, const char *s)
{
	size_t n = strlen(s), len;
	char *d;

	if (utf8_valid(s, n))
		return arena_strdup(a, s);
	len = utf8_escaped_len(s, n);
	d = arena_alloc(a, len + 1);
	if (d)
		utf8_escape(d, len + 1, s, n);
	return d;
}

static char *dup_or_empty(struct arena *a, const char *s)
{
	char *d;

	if (!s || !*s)
		return (char *)"";
	d = text_dup(a, s);
	return d ? d : (char *)"";
}

/* Source frames of one address (sy) into sym. Returns 0 or -ENOMEM. */
static int fill_frames(struct arena *a, const struct symbolized *sy, const struct sym_opts *o,
		       Sonde__V1__Symbol *sym)
{
	const struct line_frame *fr = sy->frames;
	Sonde__V1__SourceFrame *frames;
	size_t n = sy->n_frames, first = 0;

	if (n == 0)
		return 0;
	/* Without inlines: only the function the code is in (outermost). */
	if (!o->inlines)
		first = n - 1;
	frames = arena_alloc(a, (n - first) * sizeof(*frames));
	sym->frames = arena_alloc(a, (n - first) * sizeof(*sym->frames));
	if (!frames || !sym->frames)
		return -ENOMEM;
	for (size_t k = first; k < n; k++) {
		Sonde__V1__SourceFrame *f = &frames[k - first];

		sonde__v1__source_frame__init(f);
		f->raw_function = dup_or_empty(a, fr[k].raw);
		f->function = o->demangle ? dup_or_empty(a, fr[k].function) : f->raw_function;
		if (o->lines) {
			f->file = dup_or_empty(a, fr[k].file);
			f->line = fr[k].line;
		}
		sym->frames[k - first] = f;
	}
	sym->n_frames = n - first;
	return 0;
}

/* options.compact: the frames of all addresses as columns, each distinct
 * string once. Strings are deduplicated by pointer: the index interns
 * them, so equal strings of one index share one pointer. */
struct strtab {
	const char **keys; /* open addressing, cap a power of two */
	uint32_t *vals;
	size_t n, cap;
	char **strings;    /* arena copies, index 0 is "" */
	size_t n_strings, cap_strings;
};

static void strtab_done(struct strtab *st)
{
	free(st->keys);
	free(st->vals);
	free(st->strings);
}

static int strtab_grow(struct strtab *st)
{
	size_t cap = st->cap ? st->cap * 2 : 1024;
	const char **keys = calloc(cap, sizeof(*keys));
	uint32_t *vals = calloc(cap, sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < st->cap; i++) {
		size_t k;

		if (!st->keys[i])
			continue;
		for (k = ((uintptr_t)st->keys[i] >> 3) * 11400714819323198485ull >> 20 & (cap - 1);
		     keys[k]; k = (k + 1) & (cap - 1))
			;
		keys[k] = st->keys[i];
		vals[k] = st->vals[i];
	}
	free(st->keys);
	free(st->vals);
	st->keys = keys;
	st->vals = vals;
	st->cap = cap;
	return 0;
}

/* Index of s in the table (0 for NULL or ""); UINT32_MAX on failure. */
static uint32_t strtab_index(struct strtab *st, struct arena *a, const char *s)
{
	size_t k;

	if (!s || !*s)
		return 0;
	if ((st->n + 1) * 2 > st->cap && strtab_grow(st) < 0)
		return UINT32_MAX;
	for (k = ((uintptr_t)s >> 3) * 11400714819323198485ull >> 20 & (st->cap - 1); st->keys[k];
	     k = (k + 1) & (st->cap - 1))
		if (st->keys[k] == s)
			return st->vals[k];
	if (st->n_strings == st->cap_strings) {
		size_t cap = st->cap_strings ? st->cap_strings * 2 : 1024;
		char **p = realloc(st->strings, cap * sizeof(*p));

		if (!p)
			return UINT32_MAX;
		st->strings = p;
		st->cap_strings = cap;
		if (st->n_strings == 0)
			st->strings[st->n_strings++] = (char *)"";
	}
	st->strings[st->n_strings] = text_dup(a, s);
	if (!st->strings[st->n_strings])
		return UINT32_MAX;
	st->keys[k] = s;
	st->vals[k] = (uint32_t)st->n_strings;
	st->n++;
	return (uint32_t)st->n_strings++;
}

/* Columns of res are malloc'd (listed in *cols for the caller to free
 * after the reply is packed); strings are arena copies. */
struct columns {
	uint32_t *counts, *functions, *files, *lines;
	char **strings;
};

static void columns_free(struct columns *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(c[i].counts);
		free(c[i].functions);
		free(c[i].files);
		free(c[i].lines);
		free(c[i].strings);
	}
}

/* One looked-up frame as the compact columns hold it. */
struct frame_ref {
	uint32_t function, file, line;
};

/* The addresses are looked up in address order (sort_order.h), which
 * walks the index forward, and the columns are then written in the
 * query's order. */
static int fill_compact(struct arena *a, const struct sym_query *q, const struct symtab *t,
			const struct line_index *ix, const struct sym_opts *o,
			Sonde__V1__SymbolizeResult *res, struct columns *cols)
{
	struct strtab st = { 0 };
	uint64_t *vas = NULL;
	uint32_t *order = NULL, *start = NULL;
	struct frame_ref *refs = NULL;
	size_t n_refs = 0, cap_refs = 0, n_f = 0;
	int err = -ENOMEM;

	vas = malloc((q->n + 1) * sizeof(*vas));
	order = malloc((q->n + 1) * sizeof(*order));
	start = malloc((q->n + 1) * sizeof(*start));
	cols->counts = calloc(q->n + 1, sizeof(*cols->counts));
	if (!vas || !order || !start || !cols->counts)
		goto out;
	for (size_t i = 0; i < q->n; i++) {
		vas[i] = q->addrs[i];
		/* No vaddr for this file offset: no frames (UINT64_MAX is in no
		 * index's ranges). */
		if (!ix || symbolize_vaddr(t, q->addrs[i], q->file_offset ? SYMBOLIZE_FILE_OFFSET : 0,
					   &vas[i]) < 0)
			vas[i] = UINT64_MAX;
	}
	if (sort_order(vas, q->n, order) == -E2BIG)
		goto out;
	for (size_t j = 0; j < q->n; j++) {
		struct line_frame fr[LINE_INDEX_MAX_FRAMES];
		uint32_t i = order[j];
		size_t n = 0, first = 0;

		if (vas[i] != UINT64_MAX)
			n = line_index_lookup(ix, vas[i], fr, LINE_INDEX_MAX_FRAMES);
		if (n && !o->inlines)
			first = n - 1;
		start[i] = (uint32_t)n_refs;
		cols->counts[i] = (uint32_t)(n - first);
		if (n_refs + LINE_INDEX_MAX_FRAMES > cap_refs) {
			size_t cap = cap_refs ? cap_refs * 2 : 4 * q->n + LINE_INDEX_MAX_FRAMES;
			struct frame_ref *p = realloc(refs, cap * sizeof(*p));

			if (!p)
				goto out;
			refs = p;
			cap_refs = cap;
		}
		for (size_t k = first; k < n; k++) {
			struct frame_ref *r = &refs[n_refs++];

			r->function = strtab_index(&st, a, o->demangle ? fr[k].function : fr[k].raw);
			r->file = o->lines ? strtab_index(&st, a, fr[k].file) : 0;
			r->line = o->lines ? fr[k].line : 0;
			if (r->function == UINT32_MAX || r->file == UINT32_MAX)
				goto out;
		}
	}
	cols->functions = malloc((n_refs + 1) * sizeof(*cols->functions));
	cols->files = malloc((n_refs + 1) * sizeof(*cols->files));
	cols->lines = malloc((n_refs + 1) * sizeof(*cols->lines));
	if (!cols->functions || !cols->files || !cols->lines)
		goto out;
	for (size_t i = 0; i < q->n; i++) {
		for (uint32_t k = 0; k < cols->counts[i]; k++, n_f++) {
			const struct frame_ref *r = &refs[start[i] + k];

			cols->functions[n_f] = r->function;
			cols->files[n_f] = r->file;
			cols->lines[n_f] = r->line;
		}
	}
	res->frame_counts = cols->counts;
	res->n_frame_counts = q->n;
	res->frame_functions = cols->functions;
	res->n_frame_functions = n_f;
	res->frame_files = cols->files;
	res->n_frame_files = n_f;
	res->frame_lines = cols->lines;
	res->n_frame_lines = n_f;
	cols->strings = st.strings;
	st.strings = NULL;
	res->strings = cols->strings;
	res->n_strings = st.n_strings;
	err = 0;
out:
	free(vas);
	free(order);
	free(start);
	free(refs);
	strtab_done(&st);
	return err;
}

static int fill_symbols(struct arena *a, const struct sym_query *q, const struct symtab *t,
			const struct line_index *ix, const struct sym_opts *o,
			Sonde__V1__SymbolizeResult *res)
{
	struct symbolize_file sf = { .symtab = t, .index = ix };
	struct symbolized sy;

	for (size_t i = 0; i < q->n; i++) {
		Sonde__V1__Symbol *sym = res->symbols[i];

		symbolize_addr(&sf, q->addrs[i],
			       (q->file_offset ? SYMBOLIZE_FILE_OFFSET : 0) | SYMBOLIZE_LINES, &sy);
		if (sy.has_symbol && sy.symbol.name) {
			sym->function = text_dup(a, sy.symbol.name);
			if (!sym->function)
				sym->function = (char *)"";
			sym->offset = sy.symbol.offset;
		}
		if (fill_frames(a, &sy, o, sym) < 0)
			return -ENOMEM;
	}
	return 0;
}

static void answer(struct symbols *sy, struct sym_wait *w)
{
	struct arena *a = w->arena;
	Sonde__V1__SymbolizeResponse resp = SONDE__V1__SYMBOLIZE_RESPONSE__INIT;
	struct columns *cols = calloc(w->n + 1, sizeof(*cols));

	resp.results = arena_alloc(a, (w->n + 1) * sizeof(*resp.results));
	if (!resp.results || !cols)
		goto nomem;
	resp.n_results = w->n;
	for (size_t i = 0; i < w->n; i++) {
		const struct sym_query *q = &w->q[i];
		Sonde__V1__SymbolizeResult *res = arena_alloc(a, sizeof(*res));
		Sonde__V1__Symbol *syms;
		size_t n_syms;
		const struct symtab *t = NULL;
		const char *error = NULL;

		if (!res)
			goto nomem;
		sonde__v1__symbolize_result__init(res);
		resp.results[i] = res;
		/* Compact replies carry columns instead of Symbol messages. */
		n_syms = w->opts.compact ? 0 : q->n;
		res->symbols = arena_alloc(a, (n_syms + 1) * sizeof(*res->symbols));
		syms = arena_alloc(a, (n_syms + 1) * sizeof(*syms));
		if (!res->symbols || !syms)
			goto nomem;
		res->n_symbols = n_syms;
		for (size_t j = 0; j < n_syms; j++) {
			sonde__v1__symbol__init(&syms[j]);
			syms[j].address = q->addrs[j];
			syms[j].file_name = (char *)(q->file_name ? q->file_name : "");
			res->symbols[j] = &syms[j];
		}
		if (!q->known) {
			res->error = (char *)"unknown file";
			res->unknown_file = true;
			continue;
		}
		res->file_id.data = (uint8_t *)q->id.bytes;
		res->file_id.len = FILEID_LEN;
		switch (analysis_file_state(sy->core->analysis, &q->id, false, &t, &error)) {
		case FILE_READY: {
			const struct line_index *ix = q->first;

			/* After the symtab: see cache.h on what a lookup keeps. */
			if (!ix && cache_lookup_index(sy->core->cache, &q->id, &ix, NULL) != CACHE_OK)
				ix = NULL;
			if (w->opts.compact) {
				if (fill_compact(a, q, t, ix, &w->opts, res, &cols[i]) < 0)
					goto nomem;
			} else if (fill_symbols(a, q, t, ix, &w->opts, res) < 0) {
				goto nomem;
			}
			break;
		}
		case FILE_FAILED:
			res->error = arena_strdup(a, error ? error : "analysis failed");
			break;
		case FILE_PENDING:
			res->error = (char *)"analysis not finished in time";
			break;
		case FILE_UNKNOWN:
			res->error = (char *)"unknown file";
			res->unknown_file = true;
			break;
		}
	}
	rpc_call_finish(w->call, RPC_OK, NULL, &resp.base);
	goto cleanup;
nomem:
	rpc_call_finish(w->call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
cleanup:
	if (cols)
		columns_free(cols, w->n);
	free(cols);
}

static void wait_free(struct sym_wait *w)
{
	if (!w)
		return;
	for (size_t i = 0; w->q && i < w->n; i++)
		line_index_free(w->q[i].first);
	arena_free(w->arena);
	free(w);
}

/* Tries once to answer q from an index of only the units its addresses
 * fall in, built now from its file's queued index task (index_worker.c):
 * a few milliseconds where the whole index takes 80 ms (libasan) to
 * seconds. Returns whether q->first is set. */
static bool first_answer(struct symbols *sy, struct sym_query *q)
{
	const struct symtab *t = NULL;
	uint64_t *va;
	size_t n = 0, units = 0;
	int64_t t0 = clock_now_ms();
	int err;

	if (q->first_tried)
		return false;
	q->first_tried = true;
	if (q->n == 0 || q->n > FIRST_ANSWER_MAX_ADDRESSES ||
	    analysis_file_state(sy->core->analysis, &q->id, false, &t, NULL) != FILE_READY || !t) {
		index_worker_hurry(&q->id);
		return false;
	}
	va = malloc(q->n * sizeof(*va));
	if (!va) {
		index_worker_hurry(&q->id);
		return false;
	}
	for (size_t i = 0; i < q->n; i++) {
		if (!q->file_offset)
			va[n++] = q->addrs[i];
		else if (symbolize_vaddr(t, q->addrs[i], SYMBOLIZE_FILE_OFFSET, &va[n]) == 0)
			n++;
	}
	err = index_worker_first_answer(&q->id, va, n, &q->first, &units);
	free(va);
	if (err < 0) {
		if (err != -ENOENT)
			log_debug("no first answer for %.100s: %s", q->file_name ? q->file_name : "?",
				  strerror(-err));
		return false;
	}
	log_info("first answer for %.100s: %zu addresses from %zu units in %lld ms",
		  q->file_name ? q->file_name : "?", q->n, units, (long long)(clock_now_ms() - t0));
	return true;
}

void symbols_wake(struct symbols *sy, bool force)
{
	int64_t now = clock_now_ms();

	for (struct sym_wait **pp = &sy->waits; *pp;) {
		struct sym_wait *w = *pp;
		bool ready = force || now >= w->deadline_ms;

		for (size_t i = 0; i < w->n && !ready; i++) {
			struct sym_query *q = &w->q[i];

			if (q->known && !q->first &&
			    (analysis_running(sy->core->analysis, &q->id) ||
			     (index_worker_pending(&q->id) && !first_answer(sy, q))))
				break;
			if (i == w->n - 1)
				ready = true;
		}
		if (w->n == 0)
			ready = true;
		if (!ready) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		answer(sy, w);
		wait_free(w);
	}
}

void symbols_file_done(void *ctx, const struct fileid *id)
{
	(void)id;
	symbols_wake(ctx, false);
}

struct symbols *symbols_new(const struct api_core *core)
{
	struct symbols *sy = calloc(1, sizeof(*sy));

	if (sy)
		sy->core = core;
	return sy;
}

void symbols_free(struct symbols *sy)
{
	if (!sy)
		return;
	symbols_wake(sy, true);
	free(sy);
}

bool symbols_waiting(const struct symbols *sy)
{
	return sy->waits != NULL;
}

void symbols_symbolize(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	struct symbols *sy = ctx;
	const Sonde__V1__SymbolizeRequest *req = (const Sonde__V1__SymbolizeRequest *)msg;
	struct sym_wait *w = NULL;
	size_t total = 0;
	const char *bad = NULL;
	struct access_scope scope;

	if (req->n_queries > SYMBOLIZE_MAX_QUERIES) {
		rpc_call_finish(call, RPC_INVALID_ARGUMENT, "more than 1000 queries", NULL);
		return;
	}
	for (size_t i = 0; i < req->n_queries; i++)
		total += req->queries[i]->n_addresses;
	if (total > SYMBOLIZE_MAX_ADDRESSES) {
		rpc_call_finish(call, RPC_INVALID_ARGUMENT, "more than 100000 addresses", NULL);
		return;
	}
	access_scope_of(call, &scope);
	w = calloc(1, sizeof(*w));
	if (!w || !(w->arena = arena_new()))
		goto nomem;
	w->call = call;
	w->n = req->n_queries;
	w->opts = (struct sym_opts){ true, true, true, false };
	if (req->options)
		w->opts = (struct sym_opts){ req->options->lines, req->options->inlines,
					     req->options->demangle, req->options->compact };
	w->q = arena_alloc(w->arena, (w->n + 1) * sizeof(*w->q));
	if (!w->q)
		goto nomem;
	for (size_t i = 0; i < req->n_queries; i++) {
		const Sonde__V1__SymbolizeQuery *qq = req->queries[i];
		struct sym_query *q = &w->q[i];
		uint64_t *addrs;

		if (qq->file_id.len) {
			if (qq->file_id.len != FILEID_LEN) {
				bad = "file_id must be 16 bytes";
				goto invalid;
			}
			memcpy(q->id.bytes, qq->file_id.data, FILEID_LEN);
			q->known = true;
		} else if (qq->build_id && *qq->build_id) {
			uint8_t bid[64];
			size_t len;

			if (parse_build_id(qq->build_id, bid, sizeof(bid), &len) < 0) {
				bad = "build_id must be hex";
				goto invalid;
			}
			q->known = cache_find_build_id(sy->core->cache, bid, len, &q->id) == 0;
		} else if (qq->path && *qq->path) {
			const struct fileid *id;
			const char *slash = strrchr(qq->path, '/');

			if (strnlen(qq->path, REGISTRY_MAX_PATH + 1) > REGISTRY_MAX_PATH) {
				bad = "path longer than 4096 bytes";
				goto invalid;
			}
			id = registry_find_path(sy->core->reg, qq->path);
			if (id) {
				q->id = *id;
				q->known = true;
			}
			q->file_name = arena_strdup(w->arena, slash ? slash + 1 : qq->path);
		} else {
			bad = "a query must name a file (file_id, build_id or path)";
			goto invalid;
		}
		/* A file the caller could not read itself is answered as one
		 * the symbolizer does not know: the same reply whether or not
		 * it exists, and the client may upload a copy it holds. */
		if (q->known && !access_may_read_file(sy->core->access, &scope, &q->id))
			q->known = false;
		if (q->known && !q->file_name) {
			const char *name = registry_file_name(sy->core->reg, &q->id);

			q->file_name = name ? arena_strdup(w->arena, name) : NULL;
		}
		q->file_offset = qq->kind == SONDE__V1__ADDRESS_KIND__ADDRESS_KIND_FILE_OFFSET;
		q->n = qq->n_addresses;
		addrs = arena_alloc(w->arena, (q->n + 1) * sizeof(*addrs));
		if (!addrs)
			goto nomem;
		if (q->n)
			memcpy(addrs, qq->addresses, q->n * sizeof(*addrs));
		q->addrs = addrs;
		/* A source index that does not load forgets the file's
		 * analysis (cache.h): finding out now lets this query analyse
		 * the file again (or the client upload it) instead of being
		 * answered without lines. */
		if (q->known)
			cache_lookup_index(sy->core->cache, &q->id, NULL, NULL);
		/* Starts the analysis of files a sensor has but nobody asked for yet. */
		if (q->known &&
		    analysis_file_state(sy->core->analysis, &q->id, true, NULL, NULL) == FILE_UNKNOWN)
			q->known = false;
	}
	w->deadline_ms = clock_now_ms() + SYMBOLS_TIMEOUT_MS;
	w->next = sy->waits;
	sy->waits = w;
	analysis_flush_done(sy->core->analysis);
	symbols_wake(sy, false);
	return;
invalid:
	rpc_call_finish(call, RPC_INVALID_ARGUMENT, bad, NULL);
	wait_free(w);
	return;
nomem:
	rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
	wait_free(w);
}

/* Index of struct outcome_counts: the sonde.v1.StackOutcome numbers. */
enum { UNSPECIFIED = 0, COMPLETE = 1, TRUNCATED = 2, NO_TABLE = 3, READ_ERROR = 4 };

static void to_outcomes(const struct outcome_counts *c, Sonde__V1__OutcomeCounts *ret)
{
	sonde__v1__outcome_counts__init(ret);
	ret->no_user_stack = c->n[UNSPECIFIED];
	ret->complete = c->n[COMPLETE];
	ret->truncated = c->n[TRUNCATED];
	ret->no_table = c->n[NO_TABLE];
	ret->read_error = c->n[READ_ERROR];
}

/* Most samples first, then by pid. */
static int cmp_proc_outcome(const void *a, const void *b)
{
	const struct proc_outcome *x = *(struct proc_outcome *const *)a;
	const struct proc_outcome *y = *(struct proc_outcome *const *)b;

	if (x->c.total != y->c.total)
		return x->c.total > y->c.total ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Inserts po into top (*n entries, most samples first), keeping the first
 * SYMBOLS_STATUS_PROCESSES: Status may be polled often (sonde-load: every
 * 10 ms) while every sensor's processes are in the map, so a comparison
 * or two per process rather than sorting them all. */
static void top_insert(struct proc_outcome **top, size_t *n, struct proc_outcome *po)
{
	size_t i = *n;

	if (i == SYMBOLS_STATUS_PROCESSES) {
		if (cmp_proc_outcome(&po, &top[i - 1]) >= 0)
			return;
		i--;
	} else {
		(*n)++;
	}
	for (; i > 0 && cmp_proc_outcome(&po, &top[i - 1]) < 0; i--)
		top[i] = top[i - 1];
	top[i] = po;
}

/* The connected sensors' nodes into r (the arrays, SYMBOLS_STATUS_NODES
 * each, hold them). Node names and host names are the fleet's layout, not
 * a process's: every caller sees them, like the host's counters. Machine
 * IDs only admins: machine-id(5) asks to keep them from untrusted eyes. */
static void status_nodes(struct symbols *sy, const struct access_scope *scope,
			 Sonde__V1__StatusResponse *r, struct sensor_node *nodes,
			 Sonde__V1__NodeInfo *infos, Sonde__V1__NodeInfo **ptrs)
{
	const struct sensor_stats_live *live = &sy->core->stats->live;
	size_t n = live->nodes ? live->nodes(live->ctx, nodes, SYMBOLS_STATUS_NODES) : 0;

	for (size_t i = 0; i < n; i++) {
		sonde__v1__node_info__init(&infos[i]);
		infos[i].node = (char *)nodes[i].node;
		infos[i].host_name = (char *)nodes[i].host_name;
		infos[i].machine_id = scope->all ? (char *)nodes[i].machine_id : (char *)"";
		infos[i].sensors = nodes[i].sensors;
		ptrs[i] = &infos[i];
	}
	r->nodes = ptrs;
	r->n_nodes = n;
}

/* Whether po is of node (NULL or "": every node). */
static bool of_node(const struct proc_outcome *po, const char *node)
{
	return !node || !*node || (po->node && !strcmp(po->node, node));
}

void symbols_status(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	const Sonde__V1__StatusRequest *req = (const Sonde__V1__StatusRequest *)msg;
	struct symbols *sy = ctx;
	Sonde__V1__StatusResponse r = SONDE__V1__STATUS_RESPONSE__INIT;
	Sonde__V1__OutcomeCounts overall, proc_counts[SYMBOLS_STATUS_PROCESSES];
	Sonde__V1__ProcessOutcomes procs[SYMBOLS_STATUS_PROCESSES];
	Sonde__V1__ProcessOutcomes *proc_ptrs[SYMBOLS_STATUS_PROCESSES];
	struct proc_outcome *top[SYMBOLS_STATUS_PROCESSES];
	struct hmap_iter it;
	void *val;
	struct sensor_node nodes[SYMBOLS_STATUS_NODES];
	Sonde__V1__NodeInfo node_infos[SYMBOLS_STATUS_NODES], *node_ptrs[SYMBOLS_STATUS_NODES];
	struct cache_stats cs;
	struct sensor_counters sc;
	Sonde__V1__OtlpStatus otlp = SONDE__V1__OTLP_STATUS__INIT;
	struct otlp_counters oc;
	uint64_t added, dropped;
	struct access_scope scope;
	size_t n;

	access_scope_of(call, &scope);
	cache_get_stats(sy->core->cache, &cs);
	sensor_stats_sum(sy->core->stats, &sc);
	r.version = (char *)SONDE_VERSION;
	r.sensors_connected = sy->core->stats->sensors_connected;
	r.stacks_received = sy->core->stats->stacks_received;
	r.samples_received = sy->core->stats->samples_received;
	r.samples_lost = sc.samples_lost;
	r.samples_dropped = sc.samples_dropped;
	r.samples_taken = sc.samples_taken;
	r.session_samples_taken = sc.session_taken;
	r.session_samples_dropped = sc.session_dropped;
	r.samples_unconfirmed = sc.samples_unconfirmed;
	r.profiles_in_memory = profile_in_memory(sy->core->profile);
	r.cache_hits = cs.mem_hits + cs.db_hits;
	r.cache_misses = cs.misses;
	r.files_analysed = cs.files_ok;
	r.files_failed = cs.files_failed;
	r.uptime_s = (uint64_t)(clock_now_ms() - sy->core->start_ms) / 1000;
	r.unwind_tables_built = cs.unwind_ok;
	r.unwind_tables_loaded = sc.unwind_tables_loaded;
	r.unwind_rows_loaded = sc.unwind_rows_loaded;
	r.bpf_map_bytes = sc.bpf_map_bytes;
	r.go_probe_files = sc.go_files;
	r.go_probe_links = sc.go_links;
	r.go_probe_attach_failures = sc.go_attach_failures;
	r.go_probe_records = sc.go_records;
	r.go_probe_records_lost = sc.go_records_lost;
	r.probe_plans_refused = sc.plans_refused;
	r.interpreter_configs_refused = sc.configs_refused;
	if (sy->core->otlp) {
		otlp_exporter_counters(sy->core->otlp, &oc);
		otlp.requests = oc.requests;
		otlp.samples = oc.samples;
		otlp.failures = oc.failures;
		otlp.dropped_samples = oc.dropped_samples;
		otlp.dropped_requests = oc.dropped_requests;
		otlp.backlog_requests = oc.backlog_requests;
		otlp.backlog_bytes = oc.backlog_bytes;
		otlp.spans = oc.spans;
		otlp.dropped_spans = oc.dropped_spans;
		r.otlp = &otlp;
	}
	profile_counts(sy->core->profile, &added, &dropped);
	r.samples_stored = added - dropped;
	r.samples_waiting = sc.samples_waiting;
	r.sensor_processes = sc.processes;
	r.samples_store_failed = dropped + sy->core->stats->samples_not_stored;
	to_outcomes(&sy->core->stats->outcomes, &overall);
	r.outcomes = &overall;
	/* The counters above are the host's totals, for every client; the
	 * process list is the caller's own processes unless it is an admin. */
	r.scoped = !scope.all;
	/* The processes with the most samples. */
	n = 0;
	hmap_iter_init(sy->core->stats->proc_outcomes, &it);
	while (hmap_next(sy->core->stats->proc_outcomes, &it, NULL, NULL, &val))
		if (access_sees_uid(&scope, ((struct proc_outcome *)val)->uid) &&
		    of_node(val, req->node))
			top_insert(top, &n, val);
	for (size_t i = 0; i < n; i++) {
		sonde__v1__process_outcomes__init(&procs[i]);
		procs[i].pid = top[i]->pid;
		procs[i].comm = top[i]->comm;
		procs[i].node = (char *)(top[i]->node ? top[i]->node : "");
		to_outcomes(&top[i]->c, &proc_counts[i]);
		procs[i].outcomes = &proc_counts[i];
		proc_ptrs[i] = &procs[i];
	}
	r.processes = proc_ptrs;
	r.n_processes = n;
	status_nodes(sy, &scope, &r, nodes, node_infos, node_ptrs);
	rpc_call_finish(call, RPC_OK, NULL, &r.base);
}

static void to_query(struct rpc_call *call, const Sonde__V1__ProfileQuery *pq,
		     uint32_t def_limit, struct profile_query *q)
{
	struct access_scope scope;

	memset(q, 0, sizeof(*q));
	access_scope_of(call, &scope);
	access_profile_query(&scope, q);
	q->since_s = pq->since_unix_s;
	q->until_s = pq->until_unix_s;
	q->pid = pq->pid;
	q->node = pq->node;
	q->profile = pq->profile;
	q->limit = pq->limit ? pq->limit : def_limit;
	if (q->limit > FOLDED_DEFAULT_LIMIT)
		q->limit = FOLDED_DEFAULT_LIMIT;
}

void symbols_top(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	struct symbols *sy = ctx;
	Sonde__V1__TopResponse r = SONDE__V1__TOP_RESPONSE__INIT;
	struct arena *a = arena_new();
	struct profile_query q;
	struct profile_top_entry *e = NULL;
	Sonde__V1__TopEntry *entries;
	size_t n = 0;
	uint64_t total = 0;
	int err;

	if (!a)
		goto nomem;
	to_query(call, (const Sonde__V1__ProfileQuery *)msg, TOP_DEFAULT_LIMIT, &q);
	err = profile_top(sy->core->profile, &q, a, &e, &n, &total);
	if (err < 0) {
		log_warn_errno(err, "Top query failed");
		rpc_call_finish(call, RPC_INTERNAL, "profile query failed", NULL);
		goto cleanup;
	}
	r.total_samples = total;
	r.entries = arena_alloc(a, (n + 1) * sizeof(*r.entries));
	entries = arena_alloc(a, (n + 1) * sizeof(*entries));
	if (!r.entries || !entries)
		goto nomem;
	r.n_entries = n;
	for (size_t i = 0; i < n; i++) {
		sonde__v1__top_entry__init(&entries[i]);
		entries[i].function = (char *)e[i].function;
		entries[i].self = e[i].self;
		entries[i].total = e[i].total;
		entries[i].node = (char *)e[i].node;
		r.entries[i] = &entries[i];
	}
	rpc_call_finish(call, RPC_OK, NULL, &r.base);
	goto cleanup;
nomem:
	rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
cleanup:
	arena_free(a);
}

void symbols_folded(struct rpc_call *call, const ProtobufCMessage *msg, void *ctx)
{
	struct symbols *sy = ctx;
	Sonde__V1__FoldedResponse r = SONDE__V1__FOLDED_RESPONSE__INIT;
	struct arena *a = arena_new();
	struct profile_query q;
	struct profile_stack *st = NULL;
	Sonde__V1__FoldedStack *stacks;
	size_t n = 0, bytes = 0;
	uint64_t total = 0;
	int err;

	if (!a)
		goto nomem;
	to_query(call, (const Sonde__V1__ProfileQuery *)msg, FOLDED_DEFAULT_LIMIT, &q);
	err = profile_folded(sy->core->profile, &q, a, &st, &n, &total);
	if (err < 0) {
		log_warn_errno(err, "Folded query failed");
		rpc_call_finish(call, RPC_INTERNAL, "profile query failed", NULL);
		goto cleanup;
	}
	r.total_samples = total;
	r.stacks = arena_alloc(a, (n + 1) * sizeof(*r.stacks));
	stacks = arena_alloc(a, (n + 1) * sizeof(*stacks));
	if (!r.stacks || !stacks)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		Sonde__V1__FoldedStack *fs = &stacks[i];
		char *text = (char *)st[i].text, *save = NULL, *tok;
		size_t nf = 1, k = 0;

		/* The largest stacks come first; a reply over the limit drops
		 * the rarest ones rather than failing. */
		bytes += strlen(text) + 16;
		if (bytes > REPLY_MAX_BYTES)
			break;
		for (const char *p = text; *p; p++)
			nf += *p == ';';
		sonde__v1__folded_stack__init(fs);
		fs->frames = arena_alloc(a, nf * sizeof(*fs->frames));
		if (!fs->frames)
			goto nomem;
		tok = strtok_r(text, ";", &save);
		fs->comm = tok ? tok : (char *)"";
		while ((tok = strtok_r(NULL, ";", &save)) && k < nf)
			fs->frames[k++] = tok;
		fs->n_frames = k;
		fs->count = st[i].count;
		fs->pid = st[i].pid;
		fs->node = (char *)st[i].node;
		r.stacks[r.n_stacks++] = fs;
	}
	rpc_call_finish(call, RPC_OK, NULL, &r.base);
	goto cleanup;
nomem:
	rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
cleanup:
	arena_free(a);
}
