/* table.c - unwind table builder, lookup, wire packing and cache blob
 * (see unwind_table.h).
 *
 * Blob format (integers little-endian), UNWIND_BLOB_VERSION 1:
 *   magic "SONDEUNW", u32 blob version, u32 SONDE_UNWIND_FORMAT_VERSION,
 *   u32 n_rows, u32 zero, n_rows * 12-byte rows (the wire format),
 *   u32 CRC-32 (zlib) of everything before it.
 * Deserialisation re-checks every row, because the cache is outside input.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "unwind_table.h"

#define BLOB_MAGIC "SONDEUNW"
#define BLOB_HEADER 24
#define ROW_SIZE 12

_Static_assert(sizeof(struct sonde_unwind_row) == ROW_SIZE, "row size");

struct span {
	uint64_t start, end;
	struct sonde_unwind_row row;
	uint8_t src;
	uint32_t seq;
};

struct unwind_builder {
	struct span *spans;
	size_t n, cap;
};

struct unwind_table {
	struct sonde_unwind_row *rows;
	size_t n;
};

struct unwind_builder *unwind_builder_new(void)
{
	return calloc(1, sizeof(struct unwind_builder));
}

void unwind_builder_free(struct unwind_builder *b)
{
	if (!b)
		return;
	free(b->spans);
	free(b);
}

/* Clears what a kind does not use, so that equal rules compare equal. */
static struct sonde_unwind_row normalise(const struct sonde_unwind_row *in)
{
	struct sonde_unwind_row r = { .cfa_kind = in->cfa_kind };

	if (in->cfa_kind == SONDE_CFA_SP || in->cfa_kind == SONDE_CFA_FP) {
		r.cfa_off = in->cfa_off;
		r.fp_kind = in->fp_kind;
		if (in->fp_kind == SONDE_FP_AT_CFA)
			r.fp_off = in->fp_off;
	}
	if (in->cfa_kind == SONDE_CFA_GO_SYSTEMSTACK || in->cfa_kind == SONDE_CFA_GO_ASMCGOCALL) {
		r.cfa_off = in->cfa_off; /* m.curg's offset, or g's slot */
		r.fp_off = in->fp_off;   /* the switching function's frame */
	}
	return r;
}

static bool row_known(const struct sonde_unwind_row *r)
{
	return r->cfa_kind >= SONDE_CFA_SP && r->cfa_kind <= SONDE_CFA_MAX &&
	       (r->fp_kind == SONDE_FP_SAME || r->fp_kind == SONDE_FP_AT_CFA);
}

int unwind_builder_add(struct unwind_builder *b, uint64_t start, uint64_t end,
		       const struct sonde_unwind_row *row, enum unwind_source src)
{
	if (start >= end || end > (1ull << 32) || !row_known(row))
		return -EINVAL;
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 1024;
		struct span *p;

		if (b->n >= UNWIND_MAX_SPANS)
			return -E2BIG;
		if (cap > UNWIND_MAX_SPANS)
			cap = UNWIND_MAX_SPANS;
		p = realloc(b->spans, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		b->spans = p;
		b->cap = cap;
	}
	b->spans[b->n] = (struct span){ start, end, normalise(row), (uint8_t)src, (uint32_t)b->n };
	b->n++;
	return 0;
}

static int cmp_priority(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->src != y->src)
		return x->src > y->src ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_start(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0; /* accepted spans never share a start */
}

/* First index in cov[0..n) (sorted, disjoint) whose end is > at. */
static size_t first_ending_after(const struct span *cov, size_t n, uint64_t at)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cov[mid].end > at)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static bool row_eq(const struct sonde_unwind_row *a, const struct sonde_unwind_row *b)
{
	return a->cfa_kind == b->cfa_kind && a->fp_kind == b->fp_kind && a->fp_off == b->fp_off &&
	       a->cfa_off == b->cfa_off;
}

static int push_row(struct unwind_table *t, size_t *cap, uint64_t pc,
		    const struct sonde_unwind_row *rule)
{
	struct sonde_unwind_row r = *rule;

	if (t->n && row_eq(&t->rows[t->n - 1], rule))
		return 0;
	if (t->n && t->rows[t->n - 1].pc == pc) {
		/* An empty gap is replaced by what follows it. */
		r.pc = (uint32_t)pc;
		t->rows[t->n - 1] = r;
		if (t->n > 1 && row_eq(&t->rows[t->n - 2], &r))
			t->n--;
		return 0;
	}
	if (t->n >= SONDE_UNWIND_MAX_ROWS_PER_FILE)
		return -E2BIG;
	if (t->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 1024;
		struct sonde_unwind_row *p = realloc(t->rows, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		t->rows = p;
		*cap = nc;
	}
	r.pc = (uint32_t)pc;
	t->rows[t->n++] = r;
	return 0;
}

int unwind_builder_finish(struct unwind_builder *b, struct unwind_table **ret)
{
	struct span *acc = NULL, *cov = NULL;
	size_t n_acc = 0, cap_acc = b->n, n_cov = 0, i = 0, cap_rows = 0;
	struct unwind_table *t = NULL;
	const struct sonde_unwind_row gap = { .cfa_kind = SONDE_CFA_UNSUPPORTED };
	int err = -ENOMEM;

	t = calloc(1, sizeof(*t));
	if (!t)
		goto cleanup;
	if (b->n) {
		acc = malloc(b->n * sizeof(*acc));
		cov = malloc(b->n * sizeof(*cov));
		if (!acc || !cov)
			goto cleanup;
	}
	/* qsort wants a non-NULL base even for 0 elements. */
	if (b->n)
		qsort(b->spans, b->n, sizeof(*b->spans), cmp_priority);
	/* One pass per source, highest first: a span keeps the parts that
	 * no higher source and no earlier span of its own source covers.
	 * Pieces never outnumber input spans by more than the coverage
	 * holes they fill, and the accepted set stays disjoint. */
	while (i < b->n) {
		uint8_t src = b->spans[i].src;
		size_t group_start = n_acc;
		uint64_t cursor = 0;

		for (; i < b->n && b->spans[i].src == src; i++) {
			struct span s = b->spans[i];
			size_t k;

			if (s.start < cursor)
				s.start = cursor;
			if (s.start >= s.end)
				continue;
			cursor = s.end;
			k = first_ending_after(cov, n_cov, s.start);
			while (s.start < s.end) {
				struct span piece = s;

				if (k < n_cov && cov[k].start < s.end) {
					if (cov[k].start > s.start) {
						piece.end = cov[k].start;
					} else {
						s.start = cov[k].end;
						k++;
						continue;
					}
				}
				if (n_acc == cap_acc) {
					/* More pieces than spans: grow (rare). */
					struct span *p = realloc(acc, (cap_acc * 2) * sizeof(*p));

					if (!p)
						goto cleanup;
					acc = p;
					cap_acc *= 2;
				}
				acc[n_acc++] = piece;
				s.start = piece.end;
			}
		}
		/* The coverage for the next source: all accepted spans. */
		if (n_acc > group_start) {
			struct span *p = realloc(cov, n_acc * sizeof(*p));

			if (!p)
				goto cleanup;
			cov = p;
			memcpy(cov, acc, n_acc * sizeof(*acc));
			n_cov = n_acc;
			qsort(cov, n_cov, sizeof(*cov), cmp_start);
		}
	}
	if (n_acc)
		qsort(acc, n_acc, sizeof(*acc), cmp_start);
	for (size_t k = 0; k < n_acc; k++) {
		if (k > 0 && acc[k - 1].end < acc[k].start) {
			err = push_row(t, &cap_rows, acc[k - 1].end, &gap);
			if (err)
				goto cleanup;
		}
		err = push_row(t, &cap_rows, acc[k].start, &acc[k].row);
		if (err)
			goto cleanup;
	}
	if (n_acc && acc[n_acc - 1].end < (1ull << 32)) {
		err = push_row(t, &cap_rows, acc[n_acc - 1].end, &gap);
		if (err)
			goto cleanup;
	}
	*ret = t;
	t = NULL;
	err = 0;
cleanup:
	free(acc);
	free(cov);
	unwind_table_free(t);
	return err;
}

const struct sonde_unwind_row *unwind_table_rows(const struct unwind_table *t, size_t *ret_n)
{
	*ret_n = t->n;
	return t->rows;
}

size_t unwind_table_count(const struct unwind_table *t)
{
	return t->n;
}

int unwind_table_lookup(const struct unwind_table *t, uint64_t off, struct sonde_unwind_row *ret)
{
	size_t lo = 0, hi = t->n;

	/* The first row with pc > off; the answer is the one before. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	*ret = t->rows[lo - 1];
	return 0;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

void unwind_table_pack(const struct unwind_table *t, size_t first, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++, out += ROW_SIZE) {
		const struct sonde_unwind_row *r = &t->rows[first + i];

		put32(out, r->pc);
		out[4] = r->cfa_kind;
		out[5] = r->fp_kind;
		put16(out + 6, (uint16_t)r->fp_off);
		put32(out + 8, (uint32_t)r->cfa_off);
	}
}

uint64_t unwind_table_version(const struct unwind_table *t)
{
	uint64_t h = 0xcbf29ce484222325ull ^ ((uint64_t)UNWIND_BLOB_VERSION << 32 |
					      SONDE_UNWIND_FORMAT_VERSION);
	uint8_t w[ROW_SIZE];

	h = (h ^ t->n) * 0x100000001b3ull;
	for (size_t i = 0; i < t->n; i++) {
		uint32_t a, b, c;

		unwind_table_pack(t, i, 1, w);
		memcpy(&a, w, 4);
		memcpy(&b, w + 4, 4);
		memcpy(&c, w + 8, 4);
		h = (h ^ (a | (uint64_t)b << 32)) * 0x100000001b3ull;
		h = (h ^ c) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h ? h : 1;
}

void *unwind_table_serialize(const struct unwind_table *t, size_t *ret_size)
{
	size_t size = BLOB_HEADER + t->n * ROW_SIZE + 4;
	uint8_t *blob = malloc(size);

	if (!blob)
		return NULL;
	memcpy(blob, BLOB_MAGIC, 8);
	put32(blob + 8, UNWIND_BLOB_VERSION);
	put32(blob + 12, SONDE_UNWIND_FORMAT_VERSION);
	put32(blob + 16, (uint32_t)t->n);
	put32(blob + 20, 0);
	unwind_table_pack(t, 0, t->n, blob + BLOB_HEADER);
	put32(blob + size - 4, (uint32_t)crc32(0L, blob, (uInt)(size - 4)));
	*ret_size = size;
	return blob;
}

struct unwind_table *unwind_table_deserialize(const void *blob, size_t size)
{
	const uint8_t *p = blob;
	struct unwind_table *t = NULL;
	uint32_t n;

	if (!blob || size < BLOB_HEADER + 4 || memcmp(p, BLOB_MAGIC, 8) != 0 ||
	    get32(p + 8) != UNWIND_BLOB_VERSION || get32(p + 12) != SONDE_UNWIND_FORMAT_VERSION ||
	    get32(p + 20) != 0)
		return NULL;
	n = get32(p + 16);
	if (n > SONDE_UNWIND_MAX_ROWS_PER_FILE || (size - BLOB_HEADER - 4) / ROW_SIZE != n ||
	    (size - BLOB_HEADER - 4) % ROW_SIZE != 0)
		return NULL;
	if (get32(p + size - 4) != (uint32_t)crc32(0L, p, (uInt)(size - 4)))
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t || (n && !(t->rows = malloc((size_t)n * sizeof(*t->rows)))))
		goto fail;
	p += BLOB_HEADER;
	for (uint32_t i = 0; i < n; i++, p += ROW_SIZE) {
		struct sonde_unwind_row r = {
			.pc = get32(p), .cfa_kind = p[4], .fp_kind = p[5],
			.fp_off = (int16_t)get16(p + 6), .cfa_off = (int32_t)get32(p + 8),
		};
		struct sonde_unwind_row norm = normalise(&r);

		/* Sorted, known kinds, unused fields zero, neighbours differ. */
		if (!row_known(&r) || !row_eq(&r, &norm) || (i > 0 && r.pc <= t->rows[i - 1].pc) ||
		    (i > 0 && row_eq(&r, &t->rows[i - 1])))
			goto fail;
		t->rows[i] = r;
	}
	t->n = n;
	return t;
fail:
	unwind_table_free(t);
	return NULL;
}

void unwind_table_free(struct unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	free(t);
}
