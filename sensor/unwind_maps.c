/* unwind_maps.c - unwind table loading: chunk assembly and validation, a
 * first-fit allocator over the row array, per-file reference counts across
 * processes, eviction of unused tables, and the per-PID LPM prefixes.
 * See unwind_maps.h for the contract. */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "unwind_maps.h"

#define UNWIND_FILE_BUCKETS 1024
#define UNWIND_PROC_BUCKETS 4096
/* Tables being received at once; each buffers at most
 * SONDE_UNWIND_MAX_ROWS_PER_FILE rows (48 MiB) until its last chunk. */
#define UNWIND_MAX_ASSEMBLIES 4
/* Bookkeeping records for files (mapped, or with a table loaded). */
#define UNWIND_MAX_FILES 65536

_Static_assert(sizeof(struct sonde_unwind_row) == 12, "row size on the wire");

const char *const unwind_reject_names[UNWIND_REJECT__COUNT] = {
	[UNWIND_REJECT_UNKNOWN_FILE] = "unknown file",
	[UNWIND_REJECT_VERSION] = "format version",
	[UNWIND_REJECT_TOO_BIG] = "too many rows",
	[UNWIND_REJECT_NO_SPACE] = "no space",
	[UNWIND_REJECT_CHUNK_SIZE] = "chunk size",
	[UNWIND_REJECT_ROW_COUNT] = "row count",
	[UNWIND_REJECT_UNSORTED] = "unsorted rows",
	[UNWIND_REJECT_BAD_KIND] = "bad rule kind",
	[UNWIND_REJECT_SEQUENCE] = "chunk sequence",
	[UNWIND_REJECT_MAP_WRITE] = "map write",
};

/* ---- row allocator ---- */

struct extent {
	uint32_t start, len;
};

struct row_alloc {
	uint32_t capacity;
	struct extent *free; /* sorted by start, never adjacent, len > 0 */
	size_t n, cap;
};

struct row_alloc *row_alloc_new(uint32_t capacity)
{
	struct row_alloc *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->capacity = capacity;
	if (capacity > 0) {
		a->free = malloc(sizeof(*a->free));
		if (!a->free) {
			free(a);
			return NULL;
		}
		a->free[0] = (struct extent){0, capacity};
		a->n = a->cap = 1;
	}
	return a;
}

void row_alloc_free(struct row_alloc *a)
{
	if (!a)
		return;
	free(a->free);
	free(a);
}

int row_alloc_take(struct row_alloc *a, uint32_t n, uint32_t *ret_start)
{
	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; i < a->n; i++) {
		struct extent *e = &a->free[i];

		if (e->len < n)
			continue;
		*ret_start = e->start;
		e->start += n;
		e->len -= n;
		if (e->len == 0) {
			memmove(e, e + 1, (a->n - i - 1) * sizeof(*e));
			a->n--;
		}
		return 0;
	}
	return -ENOSPC;
}

void row_alloc_release(struct row_alloc *a, uint32_t start, uint32_t n)
{
	size_t i = 0;
	bool merge_prev, merge_next;

	if (n == 0)
		return;
	while (i < a->n && a->free[i].start < start)
		i++;
	merge_prev = i > 0 && a->free[i - 1].start + a->free[i - 1].len == start;
	merge_next = i < a->n && start + n == a->free[i].start;
	if (merge_prev && merge_next) {
		a->free[i - 1].len += n + a->free[i].len;
		memmove(&a->free[i], &a->free[i + 1], (a->n - i - 1) * sizeof(*a->free));
		a->n--;
	} else if (merge_prev) {
		a->free[i - 1].len += n;
	} else if (merge_next) {
		a->free[i].start = start;
		a->free[i].len += n;
	} else {
		if (a->n == a->cap) {
			size_t ncap = a->cap ? 2 * a->cap : 8;
			struct extent *nf = realloc(a->free, ncap * sizeof(*nf));

			/* Dropping the range would only lose capacity: it
			 * cannot corrupt what is allocated. */
			if (!nf)
				return;
			a->free = nf;
			a->cap = ncap;
		}
		memmove(&a->free[i + 1], &a->free[i], (a->n - i) * sizeof(*a->free));
		a->free[i] = (struct extent){start, n};
		a->n++;
	}
}

uint32_t row_alloc_free_rows(const struct row_alloc *a)
{
	uint32_t total = 0;

	for (size_t i = 0; i < a->n; i++)
		total += a->free[i].len;
	return total;
}

uint32_t row_alloc_largest_free(const struct row_alloc *a)
{
	uint32_t best = 0;

	for (size_t i = 0; i < a->n; i++)
		if (a->free[i].len > best)
			best = a->free[i].len;
	return best;
}

/* ---- prefixes ---- */

size_t unwind_split_range(uint64_t start, uint64_t end, struct unwind_prefix *out)
{
	size_t n = 0;

	while (start < end && n < UNWIND_MAX_PREFIXES) {
		unsigned align = start ? (unsigned)__builtin_ctzll(start) : 64;
		unsigned fit = 63 - (unsigned)__builtin_clzll(end - start); /* floor(log2) */
		unsigned k = align < fit ? align : fit;

		out[n].addr = start;
		out[n].bits = 64 - k;
		n++;
		start += 1ull << k; /* k <= 63: end - start < 2^64 */
	}
	return n;
}

void unwind_lpm_key(uint32_t pid, const struct unwind_prefix *p, struct sonde_unwind_lpm_key *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->prefixlen = SONDE_UNWIND_LPM_PID_BITS + p->bits;
	ret->pid = pid;
	ret->addr_be = htobe64(p->addr);
}

/* ---- page index ---- */

void unwind_index_shape(const struct sonde_unwind_row *rows, uint32_t n, uint32_t *ret_shift,
			uint32_t *ret_base, uint32_t *ret_count)
{
	uint32_t first, last, shift = SONDE_UNWIND_PAGE_SHIFT_MIN;

	*ret_shift = *ret_base = *ret_count = 0;
	if (n < UNWIND_INDEX_MIN_ROWS)
		return;
	first = le32toh(rows[0].pc);
	last = le32toh(rows[n - 1].pc);
	/* Shift 31 leaves at most 2 pages, so the loop always ends. */
	while ((last >> shift) - (first >> shift) + 1 > n / 2 + 1 && shift < SONDE_UNWIND_PAGE_SHIFT_MAX)
		shift++;
	*ret_shift = shift;
	*ret_base = first >> shift;
	*ret_count = (last >> shift) - (first >> shift) + 1;
}

void unwind_index_fill(const struct sonde_unwind_row *rows, uint32_t n, uint32_t shift,
		       uint32_t base, uint32_t count, uint32_t *out)
{
	uint32_t j = 0;

	for (uint32_t p = 0; p < count; p++) {
		uint64_t page_start = (uint64_t)(base + p) << shift;

		while (j + 1 < n && le32toh(rows[j + 1].pc) <= page_start)
			j++;
		out[p] = j;
	}
}

/* ---- files, processes, assemblies ---- */

enum file_state {
	FILE_NONE = 0,    /* no table (not sent yet, or evicted) */
	FILE_LOADED,      /* rows in the array */
	FILE_UNAVAILABLE, /* the symbolizer has none: frame pointers */
};

struct ufile {
	struct ufile *next;
	uint8_t id[UNWIND_FILE_ID_LEN];
	enum file_state state;
	uint32_t row_start, row_count;
	uint32_t index_start, page_base, page_count, page_shift; /* page_count 0: no index */
	uint32_t users;     /* bindings (process mappings) referencing it */
	uint64_t version;   /* UnwindTable.table_version of the loaded rows */
	uint64_t last_used; /* logical clock, for eviction */
};

struct binding {
	uint64_t start, end, offset;
	struct ufile *file;
	bool in_lpm;
};

struct uproc {
	struct uproc *next;
	uint32_t pid;
	struct binding *b;
	size_t n;
	size_t lpm_entries; /* its prefixes in the trie, at most UNWIND_MAX_LPM_PER_PROC */
};

struct assembly {
	bool active;
	bool skip; /* a duplicate of a loaded table: drop its chunks */
	uint8_t id[UNWIND_FILE_ID_LEN];
	uint64_t version;
	uint32_t total_rows, received;
	struct sonde_unwind_row *rows;
	size_t rows_cap;
};

struct unwind_maps {
	pthread_mutex_t lock;
	const struct unwind_map_ops *ops;
	void *ops_ctx;
	struct row_alloc *alloc;
	struct row_alloc *index_alloc; /* in buckets of SONDE_UNWIND_INDEX_PER_BUCKET */
	uint32_t capacity;
	uint64_t clock;
	size_t n_files;
	struct ufile *files[UNWIND_FILE_BUCKETS];
	struct uproc *procs[UNWIND_PROC_BUCKETS];
	struct assembly asm_[UNWIND_MAX_ASSEMBLIES];
	struct unwind_maps_stats st;
};

static size_t file_bucket(const uint8_t id[UNWIND_FILE_ID_LEN])
{
	uint32_t h;

	memcpy(&h, id, sizeof(h)); /* a hash already */
	return h % UNWIND_FILE_BUCKETS;
}

static struct ufile *file_find(struct unwind_maps *um, const uint8_t id[UNWIND_FILE_ID_LEN])
{
	for (struct ufile *f = um->files[file_bucket(id)]; f; f = f->next)
		if (memcmp(f->id, id, UNWIND_FILE_ID_LEN) == 0)
			return f;
	return NULL;
}

static struct ufile *file_get(struct unwind_maps *um, const uint8_t id[UNWIND_FILE_ID_LEN])
{
	struct ufile *f = file_find(um, id);
	size_t b;

	if (f)
		return f;
	if (um->n_files >= UNWIND_MAX_FILES)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	memcpy(f->id, id, UNWIND_FILE_ID_LEN);
	b = file_bucket(id);
	f->next = um->files[b];
	um->files[b] = f;
	um->n_files++;
	return f;
}

/* Forgets a record nothing needs: no users and no rows. */
static void file_maybe_drop(struct unwind_maps *um, struct ufile *f)
{
	struct ufile **pf;

	if (f->users > 0 || f->state == FILE_LOADED)
		return;
	for (pf = &um->files[file_bucket(f->id)]; *pf; pf = &(*pf)->next)
		if (*pf == f) {
			*pf = f->next;
			um->n_files--;
			free(f);
			return;
		}
}

#define BUCKET SONDE_UNWIND_ROWS_PER_BUCKET

/* The allocator counts buckets; tables start on bucket boundaries. */
static uint32_t buckets_of(uint32_t rows)
{
	return rows / BUCKET + (rows % BUCKET != 0);
}

static uint32_t index_buckets_of(uint32_t entries)
{
	return entries / SONDE_UNWIND_INDEX_PER_BUCKET + (entries % SONDE_UNWIND_INDEX_PER_BUCKET != 0);
}

static void file_unload(struct unwind_maps *um, struct ufile *f)
{
	if (f->state != FILE_LOADED)
		return;
	row_alloc_release(um->alloc, f->row_start / BUCKET, buckets_of(f->row_count));
	if (f->page_count)
		row_alloc_release(um->index_alloc, f->index_start / SONDE_UNWIND_INDEX_PER_BUCKET,
				  index_buckets_of(f->page_count));
	else
		um->st.tables_unindexed--;
	f->index_start = f->page_base = f->page_count = f->page_shift = 0;
	um->st.tables_loaded--;
	um->st.rows_loaded -= f->row_count;
	f->state = FILE_NONE;
	f->row_start = f->row_count = 0;
}

struct unwind_maps *unwind_maps_new(uint32_t capacity_rows, const struct unwind_map_ops *ops,
				    void *ops_ctx)
{
	struct unwind_maps *um = calloc(1, sizeof(*um));

	if (!um)
		return NULL;
	capacity_rows -= capacity_rows % SONDE_UNWIND_ROWS_PER_BUCKET;
	um->alloc = row_alloc_new(capacity_rows / SONDE_UNWIND_ROWS_PER_BUCKET);
	um->index_alloc = row_alloc_new(UNWIND_INDEX_ENTRIES(capacity_rows) /
					SONDE_UNWIND_INDEX_PER_BUCKET);
	if (!um->alloc || !um->index_alloc) {
		row_alloc_free(um->alloc);
		row_alloc_free(um->index_alloc);
		free(um);
		return NULL;
	}
	pthread_mutex_init(&um->lock, NULL);
	um->ops = ops;
	um->ops_ctx = ops_ctx;
	um->capacity = capacity_rows;
	return um;
}

void unwind_maps_free(struct unwind_maps *um)
{
	if (!um)
		return;
	for (size_t b = 0; b < UNWIND_PROC_BUCKETS; b++)
		for (struct uproc *p = um->procs[b], *next; p; p = next) {
			next = p->next;
			free(p->b);
			free(p);
		}
	for (size_t b = 0; b < UNWIND_FILE_BUCKETS; b++)
		for (struct ufile *f = um->files[b], *next; f; f = next) {
			next = f->next;
			free(f);
		}
	for (size_t i = 0; i < UNWIND_MAX_ASSEMBLIES; i++)
		free(um->asm_[i].rows);
	row_alloc_free(um->alloc);
	row_alloc_free(um->index_alloc);
	pthread_mutex_destroy(&um->lock);
	free(um);
}

/* ---- LPM entries of one binding ---- */

static void binding_lpm_remove(struct unwind_maps *um, struct uproc *p, struct binding *b)
{
	struct unwind_prefix pre[UNWIND_MAX_PREFIXES];
	struct sonde_unwind_lpm_key key;
	size_t n;

	if (!b->in_lpm)
		return;
	n = unwind_split_range(b->start, b->end, pre);
	for (size_t i = 0; i < n; i++) {
		unwind_lpm_key(p->pid, &pre[i], &key);
		um->ops->lpm_delete(um->ops_ctx, &key); /* -ENOENT is fine */
	}
	um->st.lpm_entries -= n;
	p->lpm_entries -= n;
	b->in_lpm = false;
}

static void binding_lpm_insert(struct unwind_maps *um, struct uproc *p, struct binding *b)
{
	struct unwind_prefix pre[UNWIND_MAX_PREFIXES];
	struct sonde_unwind_lpm_value val = {0};
	struct sonde_unwind_lpm_key key;
	size_t n, i;

	if (b->in_lpm || !b->file || b->file->state != FILE_LOADED)
		return;
	val.bias = b->start - b->offset;
	val.row_start = b->file->row_start;
	val.row_count = b->file->row_count;
	val.map_start = b->start;
	val.map_end = b->end;
	val.index_start = b->file->index_start;
	val.page_base = b->file->page_base;
	val.page_count = b->file->page_count;
	val.page_shift = b->file->page_shift;
	n = unwind_split_range(b->start, b->end, pre);
	if (p->lpm_entries + n > UNWIND_MAX_LPM_PER_PROC) {
		/* Its share of the trie is used up: frame pointers. */
		um->st.lpm_capped++;
		return;
	}
	for (i = 0; i < n; i++) {
		unwind_lpm_key(p->pid, &pre[i], &key);
		if (um->ops->lpm_update(um->ops_ctx, &key, &val) < 0)
			break;
	}
	if (i < n) {
		/* Trie full: this mapping unwinds with frame pointers. */
		while (i-- > 0) {
			unwind_lpm_key(p->pid, &pre[i], &key);
			um->ops->lpm_delete(um->ops_ctx, &key);
		}
		um->st.lpm_failures++;
		return;
	}
	um->st.lpm_entries += n;
	p->lpm_entries += n;
	b->in_lpm = true;
}

static struct uproc *proc_find(struct unwind_maps *um, uint32_t pid, struct uproc ***ret_link)
{
	struct uproc **pp = &um->procs[pid % UNWIND_PROC_BUCKETS];

	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->pid == pid) {
			if (ret_link)
				*ret_link = pp;
			return *pp;
		}
	return NULL;
}

static void binding_drop(struct unwind_maps *um, struct uproc *p, struct binding *b)
{
	binding_lpm_remove(um, p, b);
	if (b->file) {
		b->file->users--;
		b->file->last_used = ++um->clock;
		file_maybe_drop(um, b->file);
		b->file = NULL;
	}
}

int unwind_maps_set_process(struct unwind_maps *um, uint32_t pid,
			    const struct unwind_mapping *maps, size_t n)
{
	struct binding *nb = NULL;
	struct uproc *p;
	int r = 0;

	pthread_mutex_lock(&um->lock);
	p = proc_find(um, pid, NULL);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p) {
			r = -ENOMEM;
			goto out;
		}
		p->pid = pid;
		p->next = um->procs[pid % UNWIND_PROC_BUCKETS];
		um->procs[pid % UNWIND_PROC_BUCKETS] = p;
	}
	if (n > 0) {
		nb = calloc(n, sizeof(*nb));
		if (!nb) {
			r = -ENOMEM;
			goto out;
		}
	}
	/* Keep what did not change (its entries stay in place, so BPF never
	 * sees a gap), drop the rest, then add the new ones. Both lists are
	 * sorted by start, without overlaps (procs.c): one merge pass. */
	for (size_t i = 0, j = 0; i < n; i++) {
		nb[i].start = maps[i].start;
		nb[i].end = maps[i].end;
		nb[i].offset = maps[i].offset;
		while (j < p->n && p->b[j].start < maps[i].start)
			j++;
		if (j < p->n) {
			struct binding *o = &p->b[j];

			if (o->file && o->start == maps[i].start && o->end == maps[i].end &&
			    o->offset == maps[i].offset &&
			    memcmp(o->file->id, maps[i].file_id, UNWIND_FILE_ID_LEN) == 0) {
				nb[i] = *o;
				o->file = NULL; /* moved */
				o->in_lpm = false;
			}
		}
	}
	for (size_t j = 0; j < p->n; j++)
		binding_drop(um, p, &p->b[j]);
	free(p->b);
	p->b = nb;
	p->n = n;
	nb = NULL;
	for (size_t i = 0; i < n; i++) {
		struct binding *b = &p->b[i];

		if (b->end <= b->start)
			continue;
		if (!b->file) {
			b->file = file_get(um, maps[i].file_id);
			if (!b->file)
				continue; /* too many files: frame pointers */
			b->file->users++;
		}
		b->file->last_used = ++um->clock;
		binding_lpm_insert(um, p, b);
	}
out:
	free(nb);
	pthread_mutex_unlock(&um->lock);
	return r;
}

void unwind_maps_remove_process(struct unwind_maps *um, uint32_t pid)
{
	struct uproc **link, *p;

	pthread_mutex_lock(&um->lock);
	p = proc_find(um, pid, &link);
	if (p) {
		for (size_t j = 0; j < p->n; j++)
			binding_drop(um, p, &p->b[j]);
		*link = p->next;
		free(p->b);
		free(p);
	}
	pthread_mutex_unlock(&um->lock);
}

/* ---- tables ---- */

static int reject(struct unwind_maps *um, struct assembly *a, enum unwind_reject why)
{
	um->st.rejected[why]++;
	um->st.tables_rejected++;
	if (a) {
		free(a->rows);
		memset(a, 0, sizeof(*a));
	}
	return -EBADMSG;
}

static struct assembly *assembly_find(struct unwind_maps *um, const uint8_t id[UNWIND_FILE_ID_LEN])
{
	for (size_t i = 0; i < UNWIND_MAX_ASSEMBLIES; i++)
		if (um->asm_[i].active && memcmp(um->asm_[i].id, id, UNWIND_FILE_ID_LEN) == 0)
			return &um->asm_[i];
	return NULL;
}

/* Rows that could be made free: free now plus tables nobody uses. */
static uint64_t reclaimable_rows(struct unwind_maps *um)
{
	uint64_t n = row_alloc_free_rows(um->alloc);

	for (size_t b = 0; b < UNWIND_FILE_BUCKETS; b++)
		for (struct ufile *f = um->files[b]; f; f = f->next)
			if (f->state == FILE_LOADED && f->users == 0)
				n += buckets_of(f->row_count);
	return n * BUCKET;
}

/* Evicts the least recently used table no process maps. False if none. */
static bool evict_one(struct unwind_maps *um)
{
	struct ufile *victim = NULL;

	for (size_t b = 0; b < UNWIND_FILE_BUCKETS; b++)
		for (struct ufile *f = um->files[b]; f; f = f->next)
			if (f->state == FILE_LOADED && f->users == 0 &&
			    (!victim || f->last_used < victim->last_used))
				victim = f;
	if (!victim)
		return false;
	file_unload(um, victim);
	um->st.tables_evicted++;
	file_maybe_drop(um, victim);
	return true;
}

/* Checks rows[0..n) and appends them. prev_pc: last pc so far, if any. */
static int check_rows(const struct sonde_unwind_row *rows, uint32_t n, bool have_prev,
		      uint32_t prev_pc, enum unwind_reject *ret_why)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct sonde_unwind_row *r = &rows[i];
		uint32_t pc = le32toh(r->pc);

		if (r->cfa_kind < SONDE_CFA_SP || r->cfa_kind > SONDE_CFA_MAX ||
		    r->fp_kind > SONDE_FP_AT_CFA) {
			*ret_why = UNWIND_REJECT_BAD_KIND;
			return -EBADMSG;
		}
		if (have_prev && pc <= prev_pc) {
			*ret_why = UNWIND_REJECT_UNSORTED;
			return -EBADMSG;
		}
		have_prev = true;
		prev_pc = pc;
	}
	return 0;
}

/* Gives a loaded table its page index, if there is room; a table without
 * one is searched whole, so running out of index space only costs time. */
static void index_load(struct unwind_maps *um, struct ufile *f, const struct sonde_unwind_row *rows,
		       uint32_t n)
{
	uint32_t shift, base, count, start, *idx = NULL;

	f->page_count = 0;
	unwind_index_shape(rows, n, &shift, &base, &count);
	if (count == 0 || !um->ops->index_write)
		goto none;
	if (row_alloc_take(um->index_alloc, index_buckets_of(count), &start) < 0)
		goto none;
	start *= SONDE_UNWIND_INDEX_PER_BUCKET;
	idx = malloc((size_t)count * sizeof(*idx));
	if (!idx)
		goto release;
	unwind_index_fill(rows, n, shift, base, count, idx);
	if (um->ops->index_write(um->ops_ctx, start, idx, count) < 0)
		goto release;
	free(idx);
	f->index_start = start;
	f->page_base = base;
	f->page_count = count;
	f->page_shift = shift;
	return;
release:
	free(idx);
	row_alloc_release(um->index_alloc, start / SONDE_UNWIND_INDEX_PER_BUCKET,
			  index_buckets_of(count));
none:
	um->st.tables_unindexed++;
}

/* The whole table is in a->rows and valid: place it and point every
 * process that maps the file at it. */
static int commit(struct unwind_maps *um, struct assembly *a)
{
	struct ufile *f;
	uint32_t start;
	int r;

	f = file_get(um, a->id);
	if (!f)
		return reject(um, a, UNWIND_REJECT_MAP_WRITE);
	/* Another version of a loaded table: the new rows replace the old;
	 * the bindings are pointed at them below. */
	file_unload(um, f);
	while ((r = row_alloc_take(um->alloc, buckets_of(a->total_rows), &start)) == -ENOSPC)
		if (!evict_one(um))
			break;
	if (r < 0) {
		file_maybe_drop(um, f);
		return reject(um, a, r == -ENOSPC ? UNWIND_REJECT_NO_SPACE : UNWIND_REJECT_MAP_WRITE);
	}
	start *= BUCKET;
	r = um->ops->rows_write(um->ops_ctx, start, a->rows, a->total_rows);
	if (r < 0) {
		row_alloc_release(um->alloc, start / BUCKET, buckets_of(a->total_rows));
		file_maybe_drop(um, f);
		return reject(um, a, UNWIND_REJECT_MAP_WRITE);
	}
	f->state = FILE_LOADED;
	f->version = a->version;
	index_load(um, f, a->rows, a->total_rows);
	f->row_start = start;
	f->row_count = a->total_rows;
	f->last_used = ++um->clock;
	um->st.tables_loaded++;
	um->st.rows_loaded += a->total_rows;
	free(a->rows);
	memset(a, 0, sizeof(*a));

	if (f->users == 0)
		return 0;
	for (size_t b = 0; b < UNWIND_PROC_BUCKETS; b++)
		for (struct uproc *p = um->procs[b]; p; p = p->next)
			for (size_t j = 0; j < p->n; j++)
				if (p->b[j].file == f)
					binding_lpm_insert(um, p, &p->b[j]);
	return 0;
}

static int add_chunk_locked(struct unwind_maps *um, const struct unwind_chunk *c)
{
	struct assembly *a = assembly_find(um, c->file_id);
	enum unwind_reject why;
	struct ufile *f;
	uint32_t n;

	if (c->first) {
		if (a) /* an unfinished table for the same file: restart */
			reject(um, a, UNWIND_REJECT_SEQUENCE);
		a = NULL;
		if (!um->ops->file_known(um->ops_ctx, c->file_id))
			return reject(um, NULL, UNWIND_REJECT_UNKNOWN_FILE);
		if (c->format_version != SONDE_UNWIND_FORMAT_VERSION)
			return reject(um, NULL, UNWIND_REJECT_VERSION);
		f = file_find(um, c->file_id);
		if (c->has_error) {
			if (!c->last)
				return reject(um, NULL, UNWIND_REJECT_SEQUENCE);
			if (f && f->state != FILE_LOADED)
				f->state = FILE_UNAVAILABLE;
			um->st.tables_unavailable++;
			return 0;
		}
		for (size_t i = 0; i < UNWIND_MAX_ASSEMBLIES && !a; i++)
			if (!um->asm_[i].active)
				a = &um->asm_[i];
		if (!a)
			return reject(um, NULL, UNWIND_REJECT_SEQUENCE);
		memset(a, 0, sizeof(*a));
		memcpy(a->id, c->file_id, UNWIND_FILE_ID_LEN);
		a->active = true;
		a->total_rows = c->total_rows;
		a->version = c->table_version;
		if (f && f->state == FILE_LOADED &&
		    (c->table_version == 0 || c->table_version == f->version)) {
			/* Sent again, same version (or none said): the rows
			 * we have are this table. Another version is loaded
			 * in place of ours (commit()). */
			a->skip = true;
			um->st.duplicates++;
		} else if (c->total_rows == 0 || c->total_rows > SONDE_UNWIND_MAX_ROWS_PER_FILE ||
			   c->total_rows > um->capacity) {
			return reject(um, a, UNWIND_REJECT_TOO_BIG);
		} else if (c->total_rows > reclaimable_rows(um)) {
			return reject(um, a, UNWIND_REJECT_NO_SPACE);
		}
	} else if (!a) {
		/* The rest of a rejected table, or no first chunk at all. */
		return -EBADMSG;
	} else if (c->has_error) {
		return reject(um, a, UNWIND_REJECT_SEQUENCE);
	}

	if (a->skip) {
		if (c->last)
			memset(a, 0, sizeof(*a));
		return 0;
	}
	if (c->rows_len % sizeof(struct sonde_unwind_row))
		return reject(um, a, UNWIND_REJECT_CHUNK_SIZE);
	n = 0;
	if (c->rows_len / sizeof(struct sonde_unwind_row) > a->total_rows - a->received)
		return reject(um, a, UNWIND_REJECT_ROW_COUNT);
	n = (uint32_t)(c->rows_len / sizeof(struct sonde_unwind_row));
	if (n > 0) {
		const struct sonde_unwind_row *rows;

		if (a->received + n > a->rows_cap) {
			size_t ncap = a->rows_cap ? a->rows_cap : 4096;
			struct sonde_unwind_row *nr;

			while (ncap < a->received + n)
				ncap *= 2;
			if (ncap > a->total_rows)
				ncap = a->total_rows;
			nr = realloc(a->rows, ncap * sizeof(*nr));
			if (!nr)
				return reject(um, a, UNWIND_REJECT_MAP_WRITE);
			a->rows = nr;
			a->rows_cap = ncap;
		}
		/* Copy first (the message may be unaligned), then check. */
		memcpy(&a->rows[a->received], c->rows, c->rows_len);
		rows = &a->rows[a->received];
		if (check_rows(rows, n, a->received > 0,
			       a->received > 0 ? le32toh(a->rows[a->received - 1].pc) : 0, &why) < 0)
			return reject(um, a, why);
		a->received += n;
	}
	if (!c->last)
		return 0;
	if (a->received != a->total_rows)
		return reject(um, a, UNWIND_REJECT_ROW_COUNT);
	return commit(um, a);
}

int unwind_maps_add_chunk(struct unwind_maps *um, const struct unwind_chunk *c)
{
	int r;

	pthread_mutex_lock(&um->lock);
	r = add_chunk_locked(um, c);
	pthread_mutex_unlock(&um->lock);
	return r;
}

void unwind_maps_connection_reset(struct unwind_maps *um)
{
	pthread_mutex_lock(&um->lock);
	for (size_t i = 0; i < UNWIND_MAX_ASSEMBLIES; i++) {
		free(um->asm_[i].rows);
		memset(&um->asm_[i], 0, sizeof(um->asm_[i]));
	}
	pthread_mutex_unlock(&um->lock);
}

size_t unwind_maps_loaded(struct unwind_maps *um, struct unwind_loaded *out, size_t cap)
{
	size_t n = 0;

	pthread_mutex_lock(&um->lock);
	for (size_t b = 0; b < UNWIND_FILE_BUCKETS && n < cap; b++)
		for (struct ufile *f = um->files[b]; f && n < cap; f = f->next) {
			if (f->state != FILE_LOADED || !f->version)
				continue;
			memcpy(out[n].file_id, f->id, UNWIND_FILE_ID_LEN);
			out[n].table_version = f->version;
			n++;
		}
	pthread_mutex_unlock(&um->lock);
	return n;
}

void unwind_maps_get_stats(struct unwind_maps *um, struct unwind_maps_stats *ret)
{
	pthread_mutex_lock(&um->lock);
	*ret = um->st;
	ret->capacity_rows = um->capacity;
	ret->free_rows = row_alloc_free_rows(um->alloc) * BUCKET;
	pthread_mutex_unlock(&um->lock);
}
