/* test-ruby-meta.c - symbolizer/interp/ruby/ruby_meta.c: records decode
 * and are refused when damaged; names are qualified as Ruby's profilers
 * print them and made printable; the line of a pc through the succinct
 * index table matches a plain count of the entries' positions for random
 * tables (built here as Ruby's iseq.c lays them out), and stops where the
 * copied table stops; the per-(pid, address) table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "interp_records.h"
#include "ruby_meta.h"

static struct sonde_ruby_meta *rec_new(uint8_t type, const char *label, const char *base,
				       const char *klass, const char *path)
{
	struct sonde_ruby_meta *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->size = sizeof(*m);
	m->version = SONDE_RUBY_META_VERSION;
	m->type = type;
	m->addr = 0x7f0000001000;
	m->checksum = 77;
	m->first_lineno = 3;
	m->label_len = (uint16_t)strlen(label);
	memcpy(m->label, label, m->label_len);
	m->base_len = (uint16_t)strlen(base);
	memcpy(m->base, base, m->base_len);
	m->class_len = (uint16_t)strlen(klass);
	memcpy(m->klass, klass, m->class_len);
	m->path_len = (uint16_t)strlen(path);
	memcpy(m->path, path, m->path_len);
	m->insn_info_size = 12;
	return m;
}

/* positions[0..n) (increasing, positions[0] == 0) into m's line table as
 * iseq.c encodes it: lines[i] = 100 + i. */
static void encode(struct sonde_ruby_meta *m, const uint32_t *pos, uint32_t n, uint32_t iseq_size)
{
	uint64_t imm[6] = { 0 };
	uint32_t blocks = iseq_size > 54 ? (iseq_size - 54 + 511) / 512 : 0, k = 0, rank = 0;

	m->iseq_size = iseq_size;
	m->insns_size = n;
	for (uint32_t x = 0; x < 54; x++) {
		while (k < n && pos[k] <= x)
			k++, rank++;
		imm[x / 9] |= (uint64_t)rank << ((x % 9) * 7);
	}
	memcpy(m->succ, imm, 48);
	for (uint32_t b = 0; b < blocks && 48 + 80 * (b + 1) <= sizeof(m->succ); b++) {
		uint8_t *blk = m->succ + 48 + 80 * b;
		uint64_t bits[8] = { 0 }, small = 0;
		uint32_t start = rank, sub_rank = 0;

		for (uint32_t i = 0; i < n; i++) {
			uint32_t x = pos[i];

			if (x >= 54 + 512 * b && x < 54 + 512 * (b + 1)) {
				uint32_t bit = x - 54 - 512 * b;

				bits[bit / 64] |= 1ull << (bit % 64);
				rank++;
			}
		}
		for (uint32_t s = 1; s < 8; s++) {
			sub_rank += (uint32_t)__builtin_popcountll(bits[s - 1]);
			small |= (uint64_t)sub_rank << ((s - 1) * 9);
		}
		memcpy(blk, &start, 4);
		memcpy(blk + 8, &small, 8);
		memcpy(blk + 16, bits, 64);
	}
	m->succ_len = (uint16_t)(48 + 80 * (blocks > 2 ? 2 : blocks));
	for (uint32_t i = 0; i < n && (i + 1) * 12 <= sizeof(m->lines); i++) {
		int32_t line = 100 + (int32_t)i;

		memcpy(m->lines + i * 12, &line, 4);
		m->lines_len = (uint16_t)((i + 1) * 12);
	}
}

static void test_lines_match_a_plain_count(void **state)
{
	(void)state;
	srand(31);
	for (int round = 0; round < 300; round++) {
		struct sonde_ruby_meta *r = rec_new(SONDE_RUBY_META_ISEQ, "m", "m", "", "a.rb");
		uint32_t size = 2 + (uint32_t)(rand() % 1100), pos[1100], n = 0;
		struct ruby_meta m;

		for (uint32_t x = 0; x < size; x++)
			if (x == 0 || rand() % 3 == 0)
				pos[n++] = x;
		encode(r, pos, n, size);
		assert_int_equal(ruby_meta_decode(r, sizeof(*r), &m), 0);
		for (uint32_t pc = 0; pc <= size; pc++) {
			uint32_t x = pc ? pc - 1 : 0, k = 0;
			int32_t want = -1;

			while (k < n && pos[k] <= x)
				k++;
			if (n == 1)
				k = 1;
			if (x < size && (k * 12 <= r->lines_len) && (x < 54 + 512 * 2 || n == 1))
				want = 100 + (int32_t)k - 1;
			assert_int_equal(ruby_meta_line(&m, pc), want);
		}
		free(r);
	}
}

static void name_of(const struct sonde_ruby_meta *r, uint32_t pc, const char *want)
{
	struct ruby_meta m;
	char buf[600];

	assert_int_equal(ruby_meta_decode(r, sizeof(*r), &m), 0);
	ruby_meta_frame_name(&m, pc, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

static void test_names(void **state)
{
	uint32_t pos[] = { 0, 4, 9 };
	struct sonde_ruby_meta *r;

	(void)state;
	r = rec_new(SONDE_RUBY_META_ISEQ, "hot", "hot", "Foo", "/srv/app.rb");
	encode(r, pos, 3, 12);
	name_of(r, 1, "Foo#hot (/srv/app.rb:100)");
	name_of(r, 6, "Foo#hot (/srv/app.rb:101)");
	name_of(r, 12, "Foo#hot (/srv/app.rb:102)");
	name_of(r, 40, "Foo#hot (/srv/app.rb)"); /* past the iseq */
	free(r);
	r = rec_new(SONDE_RUBY_META_ISEQ, "block (2 levels) in hot", "hot", "Foo::Bar", "a.rb");
	r->flags = SONDE_RUBY_META_SINGLETON;
	encode(r, pos, 3, 12);
	name_of(r, 1, "block (2 levels) in Foo::Bar.hot (a.rb:100)");
	free(r);
	r = rec_new(SONDE_RUBY_META_ISEQ, "<main>", "<main>", "", "a.rb");
	encode(r, pos, 1, 12);
	name_of(r, 7, "<main> (a.rb:100)"); /* one entry: every pc */
	free(r);
	r = rec_new(SONDE_RUBY_META_CFUNC, "crc32", "", "Zlib", "");
	r->flags = SONDE_RUBY_META_SINGLETON;
	name_of(r, 0, "Zlib.crc32");
	free(r);
	r = rec_new(SONDE_RUBY_META_CFUNC, "times", "", "Integer", "");
	name_of(r, 0, "Integer#times");
	free(r);
	/* Hostile text: no ';', no control bytes, no invalid UTF-8. */
	r = rec_new(SONDE_RUBY_META_CFUNC, "a;b\n\xff", "", "K\x01", "");
	r->flags = SONDE_RUBY_META_LABEL_CUT;
	name_of(r, 0, "K?#a?b??...");
	free(r);
	{
		char buf[4];

		assert_int_equal(ruby_meta_frame_name(NULL, 0, buf, sizeof(buf)), 3);
		assert_string_equal(buf, "<un");
	}
}

static void test_refused(void **state)
{
	struct sonde_ruby_meta *r = rec_new(SONDE_RUBY_META_ISEQ, "m", "m", "", "a.rb");
	struct ruby_meta m;

	(void)state;
	assert_int_equal(ruby_meta_decode(r, sizeof(*r) - 1, &m), -EBADMSG);
	r->version = 9;
	assert_int_equal(ruby_meta_decode(r, sizeof(*r), &m), -EBADMSG);
	r->version = SONDE_RUBY_META_VERSION;
	r->type = 3;
	assert_int_equal(ruby_meta_decode(r, sizeof(*r), &m), -EBADMSG);
	r->type = SONDE_RUBY_META_ISEQ;
	r->path_len = SONDE_RUBY_META_PATH + 1;
	assert_int_equal(ruby_meta_decode(r, sizeof(*r), &m), -EBADMSG);
	r->path_len = 4;
	r->lines_len = 13; /* not whole entries */
	assert_int_equal(ruby_meta_decode(r, sizeof(*r), &m), -EBADMSG);
	r->lines_len = 0;
	r->label_len = 0;
	assert_int_equal(ruby_meta_decode(r, sizeof(*r), &m), -EBADMSG);
	r->label_len = 1;
	assert_int_equal(ruby_meta_decode(r, sizeof(*r), &m), 0);
	free(r);
}

static void test_table(void **state)
{
	struct interp_records *t = ruby_metas_new();
	struct sonde_ruby_meta *r = rec_new(SONDE_RUBY_META_CFUNC, "x", "", "", "");
	const struct ruby_meta *m;

	(void)state;
	assert_non_null(t);
	assert_int_equal(interp_records_put(t, 7, r, sizeof(*r)), 0);
	m = ruby_metas_get(t, 7, r->addr, 0);
	assert_non_null(m);
	assert_string_equal(m->label, "x");
	assert_non_null(ruby_metas_get(t, 7, r->addr, 77));
	assert_null(ruby_metas_get(t, 7, r->addr, 78));
	assert_null(ruby_metas_get(t, 8, r->addr, 0));
	r->label[0] = 'y';
	assert_int_equal(interp_records_put(t, 7, r, sizeof(*r)), 0);
	assert_string_equal(ruby_metas_get(t, 7, r->addr, 0)->label, "y");
	assert_int_equal(interp_records_count(t), 1);
	assert_int_equal(interp_records_put(t, 7, r, 5), -EBADMSG);
	assert_int_equal(interp_records_refused(t), 1);
	interp_records_free(t);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_match_a_plain_count),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
