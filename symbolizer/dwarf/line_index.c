/* line_index.c - the immutable source index (line_index.h): blob checks,
 * lookups, serialisation. Layout in line_index_format.h.
 *
 * The index is its blob: deserialising copies it and checks it once, so
 * that lookups can index the arrays without further checks.
 *
 * Each sorted array also gets a bucket directory in memory (not in the
 * blob): a plain binary search over a few hundred thousand rows missed
 * the cache and the TLB at every step and was three quarters of a warm
 * Symbolize call's CPU time.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "line_index.h"
#include "line_index_format.h"

/* For each bucket of 2^shift bytes from base, the first element whose key
 * is at or above the bucket's start: a search for an address looks only
 * between its bucket's first element and the next bucket's. n == 0: no
 * directory (few elements, or no memory), search the whole array. */
struct bucket_dir {
	uint64_t base;
	unsigned shift;
	uint32_t n;
	uint32_t *first; /* n + 1 entries */
};

struct line_index {
	uint8_t *blob;
	size_t size;
	const struct lix_header *h;
	const struct lix_scope *scopes;
	const struct lix_seg *segs;
	const struct lix_row *rows;
	const struct lix_sym *syms;
	const uint32_t *files;
	const char *pool;
	struct bucket_dir seg_dir, row_dir, sym_dir;
};

/* About two elements a bucket. */
#define DIR_MIN_ELEMENTS 16

/* keys: count ascending u64 keys, one every stride bytes. */
static void dir_build(struct bucket_dir *d, const uint8_t *keys, size_t stride, uint32_t count)
{
	uint64_t lo, span;
	uint32_t j = 0;

#define KEY(i) (*(const uint64_t *)(keys + (size_t)(i) * stride))
	memset(d, 0, sizeof(*d));
	if (count < DIR_MIN_ELEMENTS)
		return;
	lo = KEY(0);
	span = KEY(count - 1) - lo;
	while (d->shift < 63 && (span >> d->shift) >= count / 2)
		d->shift++;
	d->n = (uint32_t)(span >> d->shift) + 1;
	d->first = malloc(((size_t)d->n + 1) * sizeof(*d->first));
	if (!d->first) {
		d->n = 0;
		return;
	}
	d->base = lo;
	for (uint32_t b = 0; b <= d->n; b++) {
		uint64_t start;

		/* Bucket b starts at lo + b * 2^shift; one that would start
		 * past 2^64 - 1 holds no address, so every key is below it. */
		if (b > (UINT64_MAX - lo) >> d->shift) {
			d->first[b] = count;
			continue;
		}
		start = lo + ((uint64_t)b << d->shift);
		while (j < count && KEY(j) < start)
			j++;
		d->first[b] = j;
	}
#undef KEY
}

/* The part of the array [*lo, *hi) where the last key <= addr is found,
 * or false if every key is above addr. */
static bool dir_range(const struct bucket_dir *d, uint64_t addr, uint32_t count, size_t *lo,
		      size_t *hi)
{
	uint64_t b;

	*lo = 0;
	*hi = count;
	if (!d->n)
		return true;
	if (addr < d->base)
		return false;
	b = (addr - d->base) >> d->shift;
	if (b < d->n) {
		*lo = d->first[b];
		*hi = d->first[b + 1];
	} else {
		*lo = d->first[d->n];
	}
	return true;
}

static void dirs_build(struct line_index *ix)
{
	dir_build(&ix->seg_dir, (const uint8_t *)ix->segs + offsetof(struct lix_seg, lo),
		  sizeof(struct lix_seg), ix->h->n_segs);
	dir_build(&ix->row_dir, (const uint8_t *)ix->rows + offsetof(struct lix_row, addr),
		  sizeof(struct lix_row), ix->h->n_rows);
	dir_build(&ix->sym_dir, (const uint8_t *)ix->syms + offsetof(struct lix_sym, addr),
		  sizeof(struct lix_sym), ix->h->n_syms);
}

static size_t dir_bytes(const struct bucket_dir *d)
{
	return d->n ? ((size_t)d->n + 1) * sizeof(*d->first) : 0;
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Byte size of a blob with these counts; 0 on overflow. All counts are
 * u32, so a size_t of 64 bits cannot overflow here. */
static size_t blob_size(const struct lix_header *h)
{
	size_t n = sizeof(*h);

	n += (size_t)h->n_scopes * sizeof(struct lix_scope);
	n += (size_t)h->n_segs * sizeof(struct lix_seg);
	n += (size_t)h->n_rows * sizeof(struct lix_row);
	n += (size_t)h->n_syms * sizeof(struct lix_sym);
	n += align8((size_t)h->n_files * sizeof(uint32_t));
	n += h->pool_size;
	return n;
}

static bool str_ok(const struct line_index *ix, uint32_t off, bool none_ok)
{
	if (off == LIX_NONE)
		return none_ok;
	return off < ix->h->pool_size;
}

/* Points the array pointers into ix->blob and checks every rule of
 * line_index_format.h. */
static int attach(struct line_index *ix)
{
	const struct lix_header *h = (const struct lix_header *)ix->blob;
	const uint8_t *p;

	if (ix->size < sizeof(*h))
		return -EBADMSG;
	if (h->magic != LIX_MAGIC || h->version != LINE_INDEX_VERSION || h->zero != 0 ||
	    (h->flags & ~LIX_FLAG_LINES))
		return -EBADMSG;
	if (blob_size(h) != ix->size || h->pool_size == 0)
		return -EBADMSG;
	ix->h = h;
	p = ix->blob + sizeof(*h);
	ix->scopes = (const struct lix_scope *)p;
	p += (size_t)h->n_scopes * sizeof(struct lix_scope);
	ix->segs = (const struct lix_seg *)p;
	p += (size_t)h->n_segs * sizeof(struct lix_seg);
	ix->rows = (const struct lix_row *)p;
	p += (size_t)h->n_rows * sizeof(struct lix_row);
	ix->syms = (const struct lix_sym *)p;
	p += (size_t)h->n_syms * sizeof(struct lix_sym);
	ix->files = (const uint32_t *)p;
	p += align8((size_t)h->n_files * sizeof(uint32_t));
	ix->pool = (const char *)p;
	if (ix->pool[h->pool_size - 1] != '\0')
		return -EBADMSG;
	for (uint32_t i = 0; i < h->n_files; i++)
		if (!str_ok(ix, ix->files[i], false))
			return -EBADMSG;
	for (uint32_t i = 0; i < h->n_scopes; i++) {
		const struct lix_scope *s = &ix->scopes[i];

		/* Parents come first, so a chain always ends. */
		if (!str_ok(ix, s->name, true) || !str_ok(ix, s->dname, true) ||
		    (s->parent != LIX_NONE && s->parent >= i) ||
		    (s->call_file != LIX_NONE && s->call_file >= h->n_files) || s->zero)
			return -EBADMSG;
	}
	for (uint32_t i = 0; i < h->n_segs; i++) {
		const struct lix_seg *s = &ix->segs[i];

		if (s->lo >= s->hi || s->scope >= h->n_scopes || s->zero ||
		    (i && s->lo < ix->segs[i - 1].hi))
			return -EBADMSG;
	}
	for (uint32_t i = 0; i < h->n_rows; i++) {
		const struct lix_row *r = &ix->rows[i];

		if ((r->file != LIX_NONE && r->file >= h->n_files) ||
		    (i && r->addr <= ix->rows[i - 1].addr))
			return -EBADMSG;
	}
	for (uint32_t i = 0; i < h->n_syms; i++) {
		const struct lix_sym *s = &ix->syms[i];

		if (!str_ok(ix, s->name, false) || !str_ok(ix, s->dname, false) ||
		    !str_ok(ix, s->file, true) || s->zero || (i && s->addr <= ix->syms[i - 1].addr))
			return -EBADMSG;
	}
	return 0;
}

struct line_index *line_index_deserialize(const void *blob, size_t size)
{
	struct line_index *ix;

	if (!blob || size < sizeof(struct lix_header))
		return NULL;
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return NULL;
	ix->blob = malloc(size);
	if (!ix->blob) {
		free(ix);
		return NULL;
	}
	memcpy(ix->blob, blob, size);
	ix->size = size;
	if (attach(ix) < 0) {
		line_index_free(ix);
		return NULL;
	}
	dirs_build(ix);
	return ix;
}

struct line_index *line_index_pack(uint32_t flags, const struct lix_scope *scopes, uint32_t n_scopes,
				   const struct lix_seg *segs, uint32_t n_segs,
				   const struct lix_row *rows, uint32_t n_rows,
				   const struct lix_sym *syms, uint32_t n_syms, const uint32_t *files,
				   uint32_t n_files, const char *pool, uint32_t pool_size)
{
	struct lix_header h = {
		.magic = LIX_MAGIC, .version = LINE_INDEX_VERSION, .flags = flags,
		.n_scopes = n_scopes, .n_segs = n_segs, .n_rows = n_rows, .n_syms = n_syms,
		.n_files = n_files, .pool_size = pool_size ? pool_size : 1,
	};
	struct line_index *ix = calloc(1, sizeof(*ix));
	uint8_t *p;

	if (!ix)
		return NULL;
	ix->size = blob_size(&h);
	ix->blob = calloc(1, ix->size);
	if (!ix->blob) {
		free(ix);
		return NULL;
	}
	p = ix->blob;
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
#define PUT(arr, n)                                      \
	do {                                             \
		if (n)                                   \
			memcpy(p, arr, (size_t)(n) * sizeof(*(arr))); \
		p += (size_t)(n) * sizeof(*(arr));       \
	} while (0)
	PUT(scopes, n_scopes);
	PUT(segs, n_segs);
	PUT(rows, n_rows);
	PUT(syms, n_syms);
	if (n_files)
		memcpy(p, files, (size_t)n_files * sizeof(*files));
	p += align8((size_t)n_files * sizeof(*files));
	if (pool_size)
		memcpy(p, pool, pool_size);
#undef PUT
	if (attach(ix) < 0) {
		line_index_free(ix);
		return NULL;
	}
	dirs_build(ix);
	return ix;
}

void line_index_free(struct line_index *ix)
{
	if (!ix)
		return;
	free(ix->seg_dir.first);
	free(ix->row_dir.first);
	free(ix->sym_dir.first);
	free(ix->blob);
	free(ix);
}

void *line_index_serialize(const struct line_index *ix, size_t *ret_size)
{
	void *b = malloc(ix->size);

	if (!b)
		return NULL;
	memcpy(b, ix->blob, ix->size);
	*ret_size = ix->size;
	return b;
}

bool line_index_has_lines(const struct line_index *ix)
{
	return ix->h->flags & LIX_FLAG_LINES;
}

size_t line_index_bytes(const struct line_index *ix)
{
	return ix->size + sizeof(*ix) + dir_bytes(&ix->seg_dir) + dir_bytes(&ix->row_dir) +
	       dir_bytes(&ix->sym_dir);
}

static const char *str(const struct line_index *ix, uint32_t off)
{
	return off == LIX_NONE ? NULL : ix->pool + off;
}

/* Index of the last element with key <= addr, or -1: a binary search in
 * the part of the array that the directory leaves. */
#define LAST_AT_OR_BELOW(dir, arr, n, field, addr, ret)            \
	do {                                                        \
		size_t lo_, hi_;                                    \
		if (!dir_range(&(dir), (addr), (n), &lo_, &hi_)) {  \
			(ret) = -1;                                 \
			break;                                      \
		}                                                   \
		while (lo_ < hi_) {                                 \
			size_t mid_ = lo_ + (hi_ - lo_) / 2;          \
			if ((arr)[mid_].field <= (addr))            \
				lo_ = mid_ + 1;                     \
			else                                        \
				hi_ = mid_;                         \
		}                                                   \
		(ret) = (long)lo_ - 1;                              \
	} while (0)

size_t line_index_lookup(const struct line_index *ix, uint64_t vaddr, struct line_frame *frames,
			 size_t max)
{
	const struct lix_header *h = ix->h;
	const char *file = NULL;
	uint32_t line = 0;
	size_t n = 0;
	long i;

	if (max == 0)
		return 0;
	LAST_AT_OR_BELOW(ix->row_dir, ix->rows, h->n_rows, addr, vaddr, i);
	if (i >= 0 && ix->rows[i].file != LIX_NONE) {
		file = str(ix, ix->files[ix->rows[i].file]);
		line = ix->rows[i].line;
	}
	LAST_AT_OR_BELOW(ix->seg_dir, ix->segs, h->n_segs, lo, vaddr, i);
	if (i >= 0 && vaddr < ix->segs[i].hi) {
		uint32_t s = ix->segs[i].scope;

		frames[n++] = (struct line_frame){ .function = str(ix, ix->scopes[s].dname),
						   .raw = str(ix, ix->scopes[s].name),
						   .file = file, .line = line };
		/* Each caller frame is at the call site of its callee. */
		while (ix->scopes[s].parent != LIX_NONE && n < max) {
			const struct lix_scope *c = &ix->scopes[s];

			s = c->parent;
			frames[n++] = (struct line_frame){
				.function = str(ix, ix->scopes[s].dname),
				.raw = str(ix, ix->scopes[s].name),
				.file = c->call_file == LIX_NONE ? NULL : str(ix, ix->files[c->call_file]),
				.line = c->call_line,
			};
		}
	} else if (file) {
		frames[n++] = (struct line_frame){ .file = file, .line = line };
	}
	LAST_AT_OR_BELOW(ix->sym_dir, ix->syms, h->n_syms, addr, vaddr, i);
	if (i >= 0 && (ix->syms[i].size == 0 || vaddr - ix->syms[i].addr < ix->syms[i].size)) {
		if (n == 0)
			frames[n++] = (struct line_frame){ 0 };
		frames[n - 1].function = str(ix, ix->syms[i].dname);
		frames[n - 1].raw = str(ix, ix->syms[i].name);
		/* Without line information, the file the symbol table says. */
		if (!frames[n - 1].file)
			frames[n - 1].file = str(ix, ix->syms[i].file);
	}
	return n;
}
