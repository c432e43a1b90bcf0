/* test-unwind-maps.c - sensor/unwind_maps.c with fake map ops: the row
 * allocator, prefix splitting (against brute force), table validation
 * (every rejection reason), chunk assembly, reference counts across
 * processes and exits, eviction, and LPM lookups through the keys the
 * sensor writes. */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unwind_maps.h"

/* ---- fake maps ---- */

#define FAKE_ROWS 4096
#define FAKE_LPM (UNWIND_MAX_LPM_PER_PROC + 64)

struct fake {
	struct sonde_unwind_row rows[FAKE_ROWS];
	uint32_t row_writes;
	uint32_t index[UNWIND_INDEX_ENTRIES(FAKE_ROWS)];
	struct {
		struct sonde_unwind_lpm_key k;
		struct sonde_unwind_lpm_value v;
	} lpm[FAKE_LPM];
	size_t n_lpm;
	size_t lpm_max;   /* fail updates beyond this many entries */
	bool fail_rows;
	uint8_t known[8][16];
	size_t n_known;
};

static int fake_rows_write(void *ctx, uint32_t first, const struct sonde_unwind_row *rows,
			   uint32_t n)
{
	struct fake *f = ctx;
	uint32_t end = first + n;

	assert_int_equal(first % SONDE_UNWIND_ROWS_PER_BUCKET, 0);
	if (f->fail_rows)
		return -EIO;
	assert_true(end <= FAKE_ROWS);
	memcpy(&f->rows[first], rows, n * sizeof(*rows));
	while (end % SONDE_UNWIND_ROWS_PER_BUCKET)
		memset(&f->rows[end++], 0, sizeof(f->rows[0]));
	f->row_writes++;
	return 0;
}

static int fake_index_write(void *ctx, uint32_t first, const uint32_t *idx, uint32_t n)
{
	struct fake *f = ctx;

	assert_int_equal(first % SONDE_UNWIND_INDEX_PER_BUCKET, 0);
	assert_true(first + n <= UNWIND_INDEX_ENTRIES(FAKE_ROWS));
	memcpy(&f->index[first], idx, n * sizeof(*idx));
	return 0;
}

static ssize_t lpm_index(struct fake *f, const struct sonde_unwind_lpm_key *k)
{
	for (size_t i = 0; i < f->n_lpm; i++)
		if (memcmp(&f->lpm[i].k, k, sizeof(*k)) == 0)
			return (ssize_t)i;
	return -1;
}

static int fake_lpm_update(void *ctx, const struct sonde_unwind_lpm_key *k,
			   const struct sonde_unwind_lpm_value *v)
{
	struct fake *f = ctx;
	ssize_t i = lpm_index(f, k);

	if (i >= 0) {
		f->lpm[i].v = *v;
		return 0;
	}
	if (f->n_lpm >= f->lpm_max)
		return -ENOSPC;
	f->lpm[f->n_lpm].k = *k;
	f->lpm[f->n_lpm].v = *v;
	f->n_lpm++;
	return 0;
}

static int fake_lpm_delete(void *ctx, const struct sonde_unwind_lpm_key *k)
{
	struct fake *f = ctx;
	ssize_t i = lpm_index(f, k);

	if (i < 0)
		return -ENOENT;
	f->lpm[i] = f->lpm[--f->n_lpm];
	return 0;
}

static bool fake_file_known(void *ctx, const uint8_t id[16])
{
	struct fake *f = ctx;

	for (size_t i = 0; i < f->n_known; i++)
		if (memcmp(f->known[i], id, 16) == 0)
			return true;
	return false;
}

static const struct unwind_map_ops fake_ops = {
	.rows_write = fake_rows_write,
	.index_write = fake_index_write,
	.lpm_update = fake_lpm_update,
	.lpm_delete = fake_lpm_delete,
	.file_known = fake_file_known,
};

/* What the kernel's LPM trie answers for (pid, addr): the longest prefix
 * whose bits match the key bytes in order. */
static const struct sonde_unwind_lpm_value *fake_lookup(struct fake *f, uint32_t pid,
							uint64_t addr)
{
	struct sonde_unwind_lpm_key q = {.prefixlen = 96, .pid = pid, .addr_be = htobe64(addr)};
	const struct sonde_unwind_lpm_value *best = NULL;
	uint32_t best_len = 0;

	for (size_t i = 0; i < f->n_lpm; i++) {
		const uint8_t *a = (const uint8_t *)&f->lpm[i].k.pid, *b = (const uint8_t *)&q.pid;
		uint32_t len = f->lpm[i].k.prefixlen, bit;

		for (bit = 0; bit < len; bit++)
			if (((a[bit / 8] ^ b[bit / 8]) >> (7 - bit % 8)) & 1)
				break;
		if (bit == len && (!best || len > best_len)) {
			best = &f->lpm[i].v;
			best_len = len;
		}
	}
	return best;
}

static struct fake *fake_new(void)
{
	struct fake *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->lpm_max = FAKE_LPM;
	return f;
}

static void id_of(uint8_t id[16], uint8_t n)
{
	memset(id, 0, 16);
	id[0] = n;
	id[15] = 0xaa;
}

static void know(struct fake *f, uint8_t n)
{
	id_of(f->known[f->n_known++], n);
}

static struct sonde_unwind_row row(uint32_t pc, uint8_t kind, int32_t off)
{
	return (struct sonde_unwind_row){.pc = pc, .cfa_kind = kind, .cfa_off = off};
}

/* A valid table of n rows: pc = base + 16 i. */
static struct sonde_unwind_row *table(uint32_t n, uint32_t base)
{
	struct sonde_unwind_row *t = calloc(n ? n : 1, sizeof(*t));

	for (uint32_t i = 0; i < n; i++)
		t[i] = row(base + 16 * i, SONDE_CFA_SP, 8 + (int32_t)i);
	return t;
}

/* Sends rows[0..n) for file n_id in chunks of chunk rows. Returns the
 * last add_chunk result. */
static int send_table_v(struct unwind_maps *um, uint8_t n_id, const struct sonde_unwind_row *rows,
			uint32_t n, uint32_t chunk, uint64_t version)
{
	uint32_t sent = 0;
	int r = 0;

	do {
		struct unwind_chunk c = {0};
		uint32_t k = n - sent < chunk ? n - sent : chunk;

		id_of(c.file_id, n_id);
		c.format_version = SONDE_UNWIND_FORMAT_VERSION;
		c.first = sent == 0;
		c.total_rows = c.first ? n : 0;
		c.table_version = c.first ? version : 0;
		c.rows = rows + sent;
		c.rows_len = k * sizeof(*rows);
		sent += k;
		c.last = sent == n;
		r = unwind_maps_add_chunk(um, &c);
	} while (sent < n && r == 0);
	return r;
}

static int send_table(struct unwind_maps *um, uint8_t n_id, const struct sonde_unwind_row *rows,
		      uint32_t n, uint32_t chunk)
{
	return send_table_v(um, n_id, rows, n, chunk, 0);
}

static struct unwind_mapping mapping(uint64_t start, uint64_t end, uint64_t off, uint8_t n_id)
{
	struct unwind_mapping m = {.start = start, .end = end, .offset = off};

	id_of(m.file_id, n_id);
	return m;
}

/* ---- allocator ---- */

static void test_alloc_basic(void **state)
{
	struct row_alloc *a = row_alloc_new(100);
	uint32_t s1, s2, s3, s4;

	assert_int_equal(row_alloc_take(a, 0, &s1), -EINVAL);
	assert_int_equal(row_alloc_take(a, 30, &s1), 0);
	assert_int_equal(row_alloc_take(a, 30, &s2), 0);
	assert_int_equal(row_alloc_take(a, 30, &s3), 0);
	assert_int_equal(s1, 0);
	assert_int_equal(s2, 30);
	assert_int_equal(s3, 60);
	assert_int_equal(row_alloc_free_rows(a), 10);
	assert_int_equal(row_alloc_take(a, 11, &s4), -ENOSPC); /* exhaustion */
	/* Fragmentation: 40 rows free, but not contiguous. */
	row_alloc_release(a, s2, 30);
	assert_int_equal(row_alloc_free_rows(a), 40);
	assert_int_equal(row_alloc_largest_free(a), 30);
	assert_int_equal(row_alloc_take(a, 35, &s4), -ENOSPC);
	/* First fit: the hole at 30. */
	assert_int_equal(row_alloc_take(a, 5, &s4), 0);
	assert_int_equal(s4, 30);
	row_alloc_release(a, s4, 5);
	/* Coalescing both sides: 30..60 + 60..90 + 90..100 = 30..100. */
	row_alloc_release(a, s3, 30);
	assert_int_equal(row_alloc_largest_free(a), 70);
	row_alloc_release(a, s1, 30);
	assert_int_equal(row_alloc_largest_free(a), 100);
	assert_int_equal(row_alloc_take(a, 100, &s1), 0);
	assert_int_equal(s1, 0);
	row_alloc_free(a);

	a = row_alloc_new(0);
	assert_int_equal(row_alloc_take(a, 1, &s1), -ENOSPC);
	row_alloc_free(a);
	row_alloc_free(NULL);
}

/* Random takes and releases against a bitmap. */
static void test_alloc_random(void **state)
{
	enum { CAP = 1000, LIVE = 64 };
	struct row_alloc *a = row_alloc_new(CAP);
	uint8_t used[CAP] = {0};
	struct {
		uint32_t start, n;
	} live[LIVE] = {{0}};
	unsigned seed = 12345;

	for (int iter = 0; iter < 20000; iter++) {
		int slot = rand_r(&seed) % LIVE;

		if (live[slot].n) {
			for (uint32_t i = 0; i < live[slot].n; i++)
				used[live[slot].start + i] = 0;
			row_alloc_release(a, live[slot].start, live[slot].n);
			live[slot].n = 0;
		} else {
			uint32_t n = 1 + rand_r(&seed) % 60, start, first_fit = UINT32_MAX, run = 0;
			int r;

			for (uint32_t i = 0; i < CAP && first_fit == UINT32_MAX; i++) {
				run = used[i] ? 0 : run + 1;
				if (run == n)
					first_fit = i + 1 - n;
			}
			r = row_alloc_take(a, n, &start);
			if (first_fit == UINT32_MAX) {
				assert_int_equal(r, -ENOSPC);
				continue;
			}
			assert_int_equal(r, 0);
			assert_int_equal(start, first_fit);
			for (uint32_t i = 0; i < n; i++) {
				assert_int_equal(used[start + i], 0);
				used[start + i] = 1;
			}
			live[slot].start = start;
			live[slot].n = n;
		}
		uint32_t nfree = 0;

		for (uint32_t i = 0; i < CAP; i++)
			nfree += !used[i];
		assert_int_equal(row_alloc_free_rows(a), nfree);
	}
	row_alloc_free(a);
}

/* ---- prefixes ---- */

/* The fewest aligned blocks that tile [a, b) exactly (blocks in a tiling
 * are contiguous in address order, so this DP from the right is exact). */
static unsigned min_blocks(uint64_t a, uint64_t b)
{
	static unsigned best[4097];

	best[b] = 0;
	for (uint64_t x = b; x-- > a;) {
		best[x] = ~0u;
		for (unsigned k = 0; k < 13; k++) {
			uint64_t s = 1ull << k;

			if (x % s || x + s > b)
				break;
			if (best[x + s] + 1 < best[x])
				best[x] = best[x + s] + 1;
		}
	}
	return best[a];
}

static void check_split(uint64_t start, uint64_t end)
{
	struct unwind_prefix p[UNWIND_MAX_PREFIXES];
	size_t n = unwind_split_range(start, end, p);
	uint64_t at = start;

	for (size_t i = 0; i < n; i++) {
		uint64_t size = p[i].bits == 0 ? 0 : (p[i].bits == 64 ? 1 : 1ull << (64 - p[i].bits));

		assert_true(p[i].bits >= 1 && p[i].bits <= 64);
		assert_int_equal(p[i].addr, at);           /* contiguous, in order */
		assert_int_equal(p[i].addr & (size - 1), 0); /* aligned */
		at += size;
		/* Minimal: no two neighbours are buddies of one bigger block. */
		if (i > 0 && p[i - 1].bits == p[i].bits) {
			uint64_t big = size * 2;

			assert_false(p[i - 1].addr % big == 0);
		}
	}
	assert_int_equal(at, end > start ? end : start);
}

/* The last row with pc <= x, or -1: what the BPF search must find. */
static int64_t last_row_le(const struct sonde_unwind_row *t, uint32_t n, uint64_t x)
{
	int64_t ans = -1;

	for (uint32_t i = 0; i < n && t[i].pc <= x; i++)
		ans = i;
	return ans;
}

/* The page index narrows every lookup to a range that holds the answer
 * (the BPF side, unwind_narrow(), searches only there), and stays within
 * half an entry per row. */
static void test_page_index(void **state)
{
	unsigned seed = 11;

	for (int iter = 0; iter < 300; iter++) {
		uint32_t n = UNWIND_INDEX_MIN_ROWS + rand_r(&seed) % 2000, pc = rand_r(&seed) % 100000;
		struct sonde_unwind_row *t = calloc(n, sizeof(*t));
		uint32_t shift, base, count, *idx;

		/* Dense stretches and big gaps, like functions and padding. */
		for (uint32_t i = 0; i < n; i++) {
			t[i] = row(pc, SONDE_CFA_SP, 8);
			pc += rand_r(&seed) % 8 == 0 ? 1 + rand_r(&seed) % 100000 : 1 + rand_r(&seed) % 40;
		}
		unwind_index_shape(t, n, &shift, &base, &count);
		assert_true(count >= 1 && count <= n / 2 + 1);
		assert_true(shift >= SONDE_UNWIND_PAGE_SHIFT_MIN && shift <= SONDE_UNWIND_PAGE_SHIFT_MAX);
		idx = calloc(count, sizeof(*idx));
		unwind_index_fill(t, n, shift, base, count, idx);
		for (int k = 0; k < 2000; k++) {
			uint64_t x = rand_r(&seed) % (t[n - 1].pc + 5000);
			int64_t want = last_row_le(t, n, x), lo, hi;
			uint64_t page = x >> shift, p;

			if (page < base) {
				lo = hi = 0;
			} else {
				p = page - base < count ? page - base : count - 1;
				lo = idx[p];
				hi = p + 1 < count ? idx[p + 1] : n - 1;
			}
			assert_true(lo <= hi && hi < n);
			if (want < 0)
				assert_true(t[lo].pc > x); /* "no row" is seen at lo */
			else
				assert_true(want >= lo && want <= hi);
		}
		free(idx);
		free(t);
	}
	/* Small tables go without. */
	struct sonde_unwind_row *t = table(UNWIND_INDEX_MIN_ROWS - 1, 0);
	uint32_t shift, base, count;

	unwind_index_shape(t, UNWIND_INDEX_MIN_ROWS - 1, &shift, &base, &count);
	assert_int_equal(count, 0);
	free(t);
}

static void test_split_brute_force(void **state)
{
	struct unwind_prefix p[UNWIND_MAX_PREFIXES];
	unsigned seed = 7;

	/* Small universe: every address checked, and the count is minimal. */
	for (int iter = 0; iter < 3000; iter++) {
		uint64_t a = rand_r(&seed) % 4096, b = rand_r(&seed) % 4097;
		size_t n;

		if (a > b) {
			uint64_t t = a;
			a = b;
			b = t;
		}
		n = unwind_split_range(a, b, p);
		for (uint64_t x = 0; x < 4096; x++) {
			int hits = 0;

			for (size_t i = 0; i < n; i++) {
				uint64_t mask = p[i].bits == 64 ? ~0ull : ~((1ull << (64 - p[i].bits)) - 1);

				hits += (x & mask) == p[i].addr;
			}
			assert_int_equal(hits, x >= a && x < b ? 1 : 0);
		}
		assert_int_equal(n, min_blocks(a, b));
		check_split(a, b);
	}
	/* Real mapping shapes: page-aligned, 47-bit user addresses. */
	for (int iter = 0; iter < 20000; iter++) {
		uint64_t a = (((uint64_t)rand_r(&seed) << 20) ^ rand_r(&seed)) & 0x7ffffffff000ull;
		uint64_t len = ((uint64_t)(rand_r(&seed) % 100000) + 1) << 12;

		check_split(a, a + len);
		assert_true(unwind_split_range(a, a + len, p) <= 2 * 36);
	}
	check_split(0, ~0ull);
	assert_int_equal(unwind_split_range(5, 5, p), 0);
	assert_int_equal(unwind_split_range(0x1000, 0x2000, p), 1);
	assert_int_equal(p[0].bits, 52);
}

static void test_lpm_key_layout(void **state)
{
	struct unwind_prefix pre = {.addr = 0x7f0012345000ull, .bits = 52};
	struct sonde_unwind_lpm_key k;
	const uint8_t *b = (const uint8_t *)&k;

	unwind_lpm_key(4321, &pre, &k);
	assert_int_equal(k.prefixlen, 32 + 52);
	assert_int_equal(k.pid, 4321);
	/* Address bytes most significant first, right after the pid. */
	assert_int_equal(b[8], 0x00);
	assert_int_equal(b[9], 0x00);
	assert_int_equal(b[10], 0x7f);
	assert_int_equal(b[15], 0x00);
	assert_int_equal(b[14], 0x50);
}

/* ---- tables ---- */

struct env {
	struct fake *f;
	struct unwind_maps *um;
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	e->f = fake_new();
	for (uint8_t i = 1; i <= 6; i++)
		know(e->f, i);
	e->um = unwind_maps_new(FAKE_ROWS, &fake_ops, e->f);
	assert_non_null(e->um);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	unwind_maps_free(e->um);
	free(e->f);
	free(e);
	return 0;
}

static void expect_reject(struct env *e, const struct unwind_chunk *c, enum unwind_reject why)
{
	struct unwind_maps_stats before, after;

	unwind_maps_get_stats(e->um, &before);
	assert_int_equal(unwind_maps_add_chunk(e->um, c), -EBADMSG);
	unwind_maps_get_stats(e->um, &after);
	assert_int_equal(after.rejected[why], before.rejected[why] + 1);
	assert_int_equal(after.tables_rejected, before.tables_rejected + 1);
	assert_int_equal(after.tables_loaded, before.tables_loaded);
}

static void test_validation(void **state)
{
	struct env *e = *state;
	struct sonde_unwind_row *t = table(10, 0x1000), bad[3];
	struct unwind_chunk c = {0};
	struct unwind_maps_stats st;
	uint8_t odd[25];

	id_of(c.file_id, 1);
	c.format_version = SONDE_UNWIND_FORMAT_VERSION;
	c.first = c.last = true;
	c.total_rows = 10;
	c.rows = t;
	c.rows_len = 10 * sizeof(*t);

	struct unwind_chunk x = c;
	id_of(x.file_id, 99);
	expect_reject(e, &x, UNWIND_REJECT_UNKNOWN_FILE);
	x = c;
	x.format_version = 2;
	expect_reject(e, &x, UNWIND_REJECT_VERSION);
	x = c;
	x.total_rows = 0;
	x.rows_len = 0;
	expect_reject(e, &x, UNWIND_REJECT_TOO_BIG);
	x = c;
	x.total_rows = SONDE_UNWIND_MAX_ROWS_PER_FILE + 1;
	expect_reject(e, &x, UNWIND_REJECT_TOO_BIG);
	x = c;
	x.total_rows = FAKE_ROWS + 1; /* under the per-file cap, over the capacity */
	expect_reject(e, &x, UNWIND_REJECT_TOO_BIG);
	x = c;
	memset(odd, 0, sizeof(odd));
	x.rows = odd;
	x.rows_len = sizeof(odd); /* not a multiple of 12 */
	x.total_rows = 2;
	expect_reject(e, &x, UNWIND_REJECT_CHUNK_SIZE);
	x = c;
	x.total_rows = 11; /* one row short */
	expect_reject(e, &x, UNWIND_REJECT_ROW_COUNT);
	x = c;
	x.total_rows = 9; /* one row too many */
	expect_reject(e, &x, UNWIND_REJECT_ROW_COUNT);
	bad[0] = row(0x10, SONDE_CFA_SP, 8);
	bad[1] = row(0x20, SONDE_CFA_SP, 8);
	bad[2] = row(0x20, SONDE_CFA_SP, 16); /* equal pc: not strictly sorted */
	x = c;
	x.rows = bad;
	x.rows_len = sizeof(bad);
	x.total_rows = 3;
	expect_reject(e, &x, UNWIND_REJECT_UNSORTED);
	bad[2] = row(0x30, 0, 8); /* cfa_kind 0 */
	expect_reject(e, &x, UNWIND_REJECT_BAD_KIND);
	bad[2] = row(0x30, SONDE_CFA_MAX + 1, 8);
	expect_reject(e, &x, UNWIND_REJECT_BAD_KIND);
	bad[2] = row(0x30, SONDE_CFA_SP, 8);
	bad[2].fp_kind = 2;
	expect_reject(e, &x, UNWIND_REJECT_BAD_KIND);
	/* A chunk that is not first, with no table started: dropped, and
	 * not counted twice (the table it belongs to was counted). */
	x = c;
	x.first = false;
	assert_int_equal(unwind_maps_add_chunk(e->um, &x), -EBADMSG);
	/* An error message split over chunks is a sequence error. */
	x = c;
	x.has_error = true;
	x.last = false;
	expect_reject(e, &x, UNWIND_REJECT_SEQUENCE);
	/* The row array refuses the write. */
	e->f->fail_rows = true;
	expect_reject(e, &c, UNWIND_REJECT_MAP_WRITE);
	e->f->fail_rows = false;
	/* Nothing reached a map so far. */
	assert_int_equal(e->f->row_writes, 0);
	assert_int_equal(e->f->n_lpm, 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.free_rows, FAKE_ROWS);

	/* And the good one loads. */
	assert_int_equal(unwind_maps_add_chunk(e->um, &c), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.tables_loaded, 1);
	assert_int_equal(st.rows_loaded, 10);
	assert_int_equal(e->f->row_writes, 1);
	/* "No usable table" is not a rejection. */
	x = c;
	id_of(x.file_id, 2);
	x.has_error = true;
	x.rows_len = 0;
	x.total_rows = 0;
	assert_int_equal(unwind_maps_add_chunk(e->um, &x), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.tables_unavailable, 1);
	assert_int_equal(st.tables_rejected, 14);
	free(t);
}

static void test_chunks(void **state)
{
	struct env *e = *state;
	struct sonde_unwind_row *t = table(1000, 0x400), *u;
	struct unwind_maps_stats st;
	struct unwind_chunk c = {0};

	/* Uneven chunk sizes, unaligned source (rows copied from a byte
	 * buffer at an odd address). */
	uint8_t *buf = malloc(1000 * sizeof(*t) + 1);
	memcpy(buf + 1, t, 1000 * sizeof(*t));
	uint32_t sizes[] = {1, 7, 300, 92, 600};
	uint32_t at = 0;
	for (size_t i = 0; i < 5; i++) {
		memset(&c, 0, sizeof(c));
		id_of(c.file_id, 3);
		c.format_version = SONDE_UNWIND_FORMAT_VERSION;
		c.first = i == 0;
		c.last = i == 4;
		c.total_rows = c.first ? 1000 : 0;
		c.rows = buf + 1 + at * sizeof(*t);
		c.rows_len = sizes[i] * sizeof(*t);
		at += sizes[i];
		assert_int_equal(unwind_maps_add_chunk(e->um, &c), 0);
		assert_int_equal(e->f->row_writes, i == 4 ? 1 : 0); /* only when complete */
	}
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.tables_loaded, 1);
	assert_int_equal(memcmp(e->f->rows, t, 1000 * sizeof(*t)), 0);

	/* Unsorted across a chunk boundary. */
	u = table(20, 0x100);
	u[10].pc = u[9].pc;
	assert_int_equal(send_table(e->um, 4, u, 20, 10), -EBADMSG);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.rejected[UNWIND_REJECT_UNSORTED], 1);

	/* A restarted table (a new first chunk for the same file) replaces
	 * the unfinished one; the later chunk of the old one is gone. */
	u[10].pc = u[9].pc + 1;
	memset(&c, 0, sizeof(c));
	id_of(c.file_id, 4);
	c.format_version = SONDE_UNWIND_FORMAT_VERSION;
	c.first = true;
	c.total_rows = 20;
	c.rows = u;
	c.rows_len = 5 * sizeof(*u);
	assert_int_equal(unwind_maps_add_chunk(e->um, &c), 0);
	assert_int_equal(send_table(e->um, 4, u, 20, 20), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.rejected[UNWIND_REJECT_SEQUENCE], 1);
	assert_int_equal(st.tables_loaded, 2);

	/* A reconnect drops half-received tables. */
	c.first = true;
	id_of(c.file_id, 5);
	assert_int_equal(unwind_maps_add_chunk(e->um, &c), 0);
	unwind_maps_connection_reset(e->um);
	c.first = false;
	c.last = true;
	assert_int_equal(unwind_maps_add_chunk(e->um, &c), -EBADMSG);

	/* A table sent again for a loaded file is skipped, not loaded twice. */
	assert_int_equal(send_table(e->um, 3, t, 1000, 400), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.duplicates, 1);
	assert_int_equal(st.tables_loaded, 2);
	assert_int_equal(st.rows_loaded, 1020);
	/* Tables start on bucket boundaries. */
	assert_int_equal(st.free_rows, FAKE_ROWS - 1000 - 24);
	free(buf);
	free(t);
	free(u);
}

/* Versions: the loaded tables with a version are listed (for Hello); the
 * same version sent again is skipped, another one replaces the rows. */
static void test_versions(void **state)
{
	struct env *e = *state;
	struct sonde_unwind_row *t = table(100, 0x400), *u = table(60, 0x800);
	struct unwind_loaded out[4];
	struct unwind_maps_stats st;
	uint8_t id6[UNWIND_FILE_ID_LEN];

	id_of(id6, 6);
	assert_int_equal(send_table(e->um, 5, t, 100, 100), 0); /* no version: not listed */
	assert_int_equal(send_table_v(e->um, 6, t, 100, 30, 7), 0);
	assert_int_equal(unwind_maps_loaded(e->um, out, 4), 1);
	assert_memory_equal(out[0].file_id, id6, UNWIND_FILE_ID_LEN);
	assert_int_equal(out[0].table_version, 7);
	assert_int_equal(unwind_maps_loaded(e->um, out, 0), 0);

	assert_int_equal(send_table_v(e->um, 6, t, 100, 30, 7), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.duplicates, 1);
	assert_int_equal(st.rows_loaded, 200);

	assert_int_equal(send_table_v(e->um, 6, u, 60, 30, 8), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.duplicates, 1);
	assert_int_equal(st.tables_loaded, 2);
	assert_int_equal(st.rows_loaded, 160);
	assert_int_equal(unwind_maps_loaded(e->um, out, 4), 1);
	assert_int_equal(out[0].table_version, 8);
	free(t);
	free(u);
}

static void test_processes(void **state)
{
	struct env *e = *state;
	struct sonde_unwind_row *t = table(100, 0x1000);
	const struct sonde_unwind_lpm_value *v;
	struct unwind_maps_stats st;
	struct unwind_mapping m1[2] = {
		mapping(0x555555554000, 0x555555556000, 0x1000, 1), /* exe */
		mapping(0x7ffff7dd0000, 0x7ffff7f45000, 0x26000, 2), /* libc */
	};
	struct unwind_mapping m2[1] = {mapping(0x7f0000010000, 0x7f0000185000, 0x26000, 2)};

	/* Two processes map libc before its table is there: no entries. */
	assert_int_equal(unwind_maps_set_process(e->um, 100, m1, 2), 0);
	assert_int_equal(unwind_maps_set_process(e->um, 200, m2, 1), 0);
	assert_int_equal(e->f->n_lpm, 0);

	/* The table arrives: both get entries, the rows are written once. */
	assert_int_equal(send_table(e->um, 2, t, 100, 100), 0);
	assert_int_equal(e->f->row_writes, 1);
	v = fake_lookup(e->f, 100, 0x7ffff7dd0000);
	assert_non_null(v);
	assert_int_equal(v->bias, 0x7ffff7dd0000 - 0x26000);
	assert_int_equal(v->row_count, 100);
	/* The whole mapping, for the walk to reuse the value; a page index
	 * (100 rows at 16-byte steps: 1600 bytes, 256-byte pages). */
	assert_int_equal(v->map_start, 0x7ffff7dd0000);
	assert_int_equal(v->map_end, 0x7ffff7f45000);
	assert_int_equal(v->page_shift, SONDE_UNWIND_PAGE_SHIFT_MIN);
	assert_int_equal(v->page_base, 0x1000 >> SONDE_UNWIND_PAGE_SHIFT_MIN);
	assert_int_equal(v->page_count, 7);
	for (uint32_t p = 0; p < v->page_count; p++)
		assert_int_equal(e->f->index[v->index_start + p], p * 16);
	assert_non_null(fake_lookup(e->f, 100, 0x7ffff7f44fff));
	assert_null(fake_lookup(e->f, 100, 0x7ffff7f45000));
	assert_null(fake_lookup(e->f, 100, 0x7ffff7dcffff));
	assert_null(fake_lookup(e->f, 100, 0x555555554000)); /* exe: no table yet */
	assert_null(fake_lookup(e->f, 300, 0x7ffff7dd0000)); /* other pid */
	v = fake_lookup(e->f, 200, 0x7f0000100000);
	assert_non_null(v);
	assert_int_equal(v->bias, 0x7f0000010000 - 0x26000);
	uint32_t libc_start = v->row_start;

	/* A third process maps libc: entries at once, no new rows. */
	assert_int_equal(unwind_maps_set_process(e->um, 300, m2, 1), 0);
	assert_non_null(fake_lookup(e->f, 300, 0x7f0000010000));
	assert_int_equal(e->f->row_writes, 1);

	/* The exe's table, in chunks. */
	assert_int_equal(send_table(e->um, 1, t, 100, 33), 0);
	assert_non_null(fake_lookup(e->f, 100, 0x555555555fff));

	/* Exits: entries go, rows stay while anyone maps the file. */
	unwind_maps_remove_process(e->um, 100);
	assert_null(fake_lookup(e->f, 100, 0x7ffff7dd0000));
	assert_null(fake_lookup(e->f, 100, 0x555555554000));
	assert_non_null(fake_lookup(e->f, 200, 0x7f0000010000));
	unwind_maps_remove_process(e->um, 200);
	unwind_maps_remove_process(e->um, 200); /* twice is fine */
	assert_non_null(fake_lookup(e->f, 300, 0x7f0000010000));
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.tables_loaded, 2);

	/* Maps change (dlopen + munmap): the moved mapping's entries follow. */
	struct unwind_mapping m3[2] = {
		mapping(0x7f0000010000, 0x7f0000185000, 0x26000, 2),
		mapping(0x7f1000000000, 0x7f1000002000, 0x1000, 1),
	};
	assert_int_equal(unwind_maps_set_process(e->um, 300, m3, 2), 0);
	assert_non_null(fake_lookup(e->f, 300, 0x7f1000001000));
	struct unwind_mapping m4[1] = {mapping(0x7f1000000000, 0x7f1000002000, 0x1000, 1)};
	assert_int_equal(unwind_maps_set_process(e->um, 300, m4, 1), 0);
	assert_null(fake_lookup(e->f, 300, 0x7f0000010000));
	assert_non_null(fake_lookup(e->f, 300, 0x7f1000001000));

	/* All gone: no entries left, tables stay loaded (unused). */
	unwind_maps_remove_process(e->um, 300);
	assert_int_equal(e->f->n_lpm, 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.lpm_entries, 0);
	assert_int_equal(st.tables_loaded, 2);

	/* A new process mapping libc gets the already loaded rows. */
	assert_int_equal(unwind_maps_set_process(e->um, 400, m2, 1), 0);
	v = fake_lookup(e->f, 400, 0x7f0000010000);
	assert_non_null(v);
	assert_int_equal(v->row_start, libc_start);
	assert_int_equal(e->f->row_writes, 2);
	free(t);
}

static void test_eviction(void **state)
{
	struct env *e = *state;
	struct sonde_unwind_row *t = table(1500, 0);
	struct unwind_mapping m = mapping(0x10000, 0x20000, 0, 1);
	struct unwind_maps_stats st;

	/* 4096 rows: two 1500-row tables fit, a third does not. */
	assert_int_equal(unwind_maps_set_process(e->um, 1, &m, 1), 0);
	assert_int_equal(send_table(e->um, 1, t, 1500, 1500), 0); /* used by pid 1 */
	assert_int_equal(send_table(e->um, 2, t, 1500, 1500), 0); /* used by nobody */
	/* The third evicts the unused table 2, never table 1. */
	assert_int_equal(send_table(e->um, 3, t, 1500, 1500), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.tables_evicted, 1);
	assert_int_equal(st.tables_loaded, 2);
	assert_non_null(fake_lookup(e->f, 1, 0x10000));
	/* Table 3 is unused now too; with pid 2 mapping it, a fourth table
	 * finds nothing to evict: rejected for space, up front. */
	m = mapping(0x30000, 0x40000, 0, 3);
	assert_int_equal(unwind_maps_set_process(e->um, 2, &m, 1), 0);
	assert_int_equal(send_table(e->um, 4, t, 1500, 1500), -EBADMSG);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.rejected[UNWIND_REJECT_NO_SPACE], 1);
	/* Layout now: 1 at [0, 1504), 3 at [1504, 3008), 1088 rows free at
	 * the end. pid 2 exits: 3 is unused. Table 4 fits in the tail; table
	 * 5 fits nowhere, and evicting the least recently used unused table
	 * (3, not the newer 4) opens a hole it fits in. */
	unwind_maps_remove_process(e->um, 2);
	assert_int_equal(send_table(e->um, 4, t, 1000, 1000), 0);
	assert_int_equal(send_table(e->um, 5, t, 1400, 700), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.tables_evicted, 2);
	assert_int_equal(st.tables_loaded, 3);
	assert_int_equal(st.rows_loaded, 1500 + 1000 + 1400);
	assert_int_equal(st.free_rows, 4096 - 1504 - 1000 - 1400);
	free(t);
}

static void test_lpm_full(void **state)
{
	struct env *e = *state;
	struct sonde_unwind_row *t = table(10, 0);
	/* An odd range: several prefixes, more than the trie takes. */
	struct unwind_mapping m = mapping(0x11000, 0x1f000, 0, 1);
	struct unwind_maps_stats st;

	e->f->lpm_max = 2;
	assert_int_equal(unwind_maps_set_process(e->um, 1, &m, 1), 0);
	assert_int_equal(send_table(e->um, 1, t, 10, 10), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.lpm_failures, 1);
	assert_int_equal(e->f->n_lpm, 0); /* rolled back: no half-covered mapping */
	free(t);
}

/* One process that maps a file with a table more often than its share of
 * the trie allows: its entries stop at UNWIND_MAX_LPM_PER_PROC (the rest
 * counted), and another process still gets its own. Page-aligned pages
 * of 4 KiB are one prefix each. */
static void test_lpm_share_per_process(void **state)
{
	enum { EXTRA = 10 };
	struct env *e = *state;
	struct sonde_unwind_row *t = table(10, 0);
	size_t n = UNWIND_MAX_LPM_PER_PROC + EXTRA;
	struct unwind_mapping *m = calloc(n, sizeof(*m));
	struct unwind_mapping other = mapping(0x10000, 0x11000, 0, 1);
	struct unwind_maps_stats st;

	assert_non_null(m);
	for (size_t i = 0; i < n; i++)
		m[i] = mapping(0x100000000ull + 0x2000 * i, 0x100001000ull + 0x2000 * i, 0, 1);
	assert_int_equal(send_table(e->um, 1, t, 10, 10), 0);
	assert_int_equal(unwind_maps_set_process(e->um, 1, m, n), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.lpm_entries, UNWIND_MAX_LPM_PER_PROC);
	assert_int_equal(st.lpm_capped, EXTRA);
	assert_int_equal(e->f->n_lpm, UNWIND_MAX_LPM_PER_PROC);
	assert_int_equal(unwind_maps_set_process(e->um, 2, &other, 1), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.lpm_entries, UNWIND_MAX_LPM_PER_PROC + 1);
	assert_non_null(fake_lookup(e->f, 2, 0x10800));
	/* Its mappings going away give its share back. */
	assert_int_equal(unwind_maps_set_process(e->um, 1, m, 1), 0);
	unwind_maps_get_stats(e->um, &st);
	assert_int_equal(st.lpm_entries, 2);
	free(m);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alloc_basic),
		cmocka_unit_test(test_alloc_random),
		cmocka_unit_test(test_split_brute_force),
		cmocka_unit_test(test_page_index),
		cmocka_unit_test(test_lpm_key_layout),
		cmocka_unit_test_setup_teardown(test_validation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_versions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eviction, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lpm_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lpm_share_per_process, setup, teardown),
	};

	return cmocka_run_group_tests_name("unwind-maps", tests, NULL, NULL);
}
