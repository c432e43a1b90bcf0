/* test-perl-meta.c - symbolizer/interp/perl/perl_meta.c: sub and COP
 * records as BPF builds them (bpf/perl5.h) decode and name frames
 * "Package::sub (file.pl:LINE)", "main (...)" and "(eval) (...)"; damaged
 * and hostile records are refused or made harmless; the per-(pid,
 * address, type) table, checksums and the frame word encoding. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "interp_records.h"
#include "perl5.h"
#include "perl_meta.h"

static struct sonde_perl_meta sub_rec(uint64_t cv, const char *pkg, const char *name,
				      const char *file)
{
	struct sonde_perl_meta m = { .size = sizeof(m), .version = SONDE_PERL_META_VERSION,
				     .type = SONDE_PERL_META_SUB, .addr = cv, .checksum = 77 };

	m.name_len = (uint16_t)strlen(name);
	m.package_len = (uint16_t)strlen(pkg);
	m.file_len = (uint16_t)strlen(file);
	memcpy(m.name, name, m.name_len);
	memcpy(m.package, pkg, m.package_len);
	memcpy(m.file, file, m.file_len);
	return m;
}

static struct sonde_perl_meta cop_rec(uint64_t cop, const char *file)
{
	struct sonde_perl_meta m = sub_rec(cop, "", "", file);

	m.type = SONDE_PERL_META_COP;
	return m;
}

static const char *name_of(const struct perl_meta *m, uint64_t word)
{
	static char buf[1024];

	perl_meta_frame_name(m, word, buf, sizeof(buf));
	return buf;
}

static void test_frame_word(void **state)
{
	uint64_t w = SONDE_PERL_FRAME(0x7f0012345678ull, SONDE_PERL_FRAME_EVAL, 42, 1);

	(void)state;
	assert_int_equal(SONDE_PERL_FRAME_ADDR(w), 0x7f0012345678ull);
	assert_int_equal(SONDE_PERL_FRAME_TYPE(w), SONDE_PERL_FRAME_EVAL);
	assert_int_equal(SONDE_PERL_FRAME_LINE(w), 42);
	assert_true(w & SONDE_PERL_FRAME_ENTRY);
	/* Lines past 16 bits clamp; unaligned addresses lose their low
	 * bits to the type. */
	w = SONDE_PERL_FRAME(0x1007ull, SONDE_PERL_FRAME_SUB, 1u << 20, 0);
	assert_int_equal(SONDE_PERL_FRAME_LINE(w), 0xffff);
	assert_int_equal(SONDE_PERL_FRAME_ADDR(w), 0x1000);
	assert_false(w & SONDE_PERL_FRAME_ENTRY);
}

static void test_names(void **state)
{
	struct sonde_perl_meta r = sub_rec(0x5000, "Shape", "area", "/tmp/b.pl");
	struct perl_meta m;

	(void)state;
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), 0);
	assert_string_equal(name_of(&m, SONDE_PERL_FRAME(0x5000, SONDE_PERL_FRAME_SUB, 10, 0)),
			    "Shape::area (/tmp/b.pl:10)");
	assert_string_equal(name_of(&m, SONDE_PERL_FRAME(0x5000, SONDE_PERL_FRAME_SUB, 0, 0)),
			    "Shape::area (/tmp/b.pl)");
	/* A COP frame word against a sub's record: unknown. */
	assert_string_equal(name_of(&m, SONDE_PERL_FRAME(0x5000, SONDE_PERL_FRAME_MAIN, 3, 0)),
			    PERL_UNKNOWN_FRAME);
	r = sub_rec(0x5000, "", "lonely", "");
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), 0);
	assert_string_equal(name_of(&m, SONDE_PERL_FRAME(0x5000, SONDE_PERL_FRAME_SUB, 9, 0)),
			    "lonely");
	r = cop_rec(0x6000, "-e");
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), 0);
	assert_string_equal(name_of(&m, SONDE_PERL_FRAME(0x6000, SONDE_PERL_FRAME_MAIN, 1, 1)),
			    "main (-e:1)");
	assert_string_equal(name_of(&m, SONDE_PERL_FRAME(0x6000, SONDE_PERL_FRAME_EVAL, 7, 0)),
			    "(eval) (-e:7)");
	assert_string_equal(name_of(&m, SONDE_PERL_FRAME(0x6000, SONDE_PERL_FRAME_SUB, 7, 0)),
			    PERL_UNKNOWN_FRAME);
	/* Frame type 3..7: nothing BPF sends. */
	assert_string_equal(name_of(&m, 0x6003 | (7ull << 48)), PERL_UNKNOWN_FRAME);
	assert_string_equal(name_of(NULL, 0x6001), PERL_UNKNOWN_FRAME);
}

static void test_cut_and_hostile(void **state)
{
	struct sonde_perl_meta r = sub_rec(0x5000, "P;Q", "a\nb;c", "f\xff.pl");
	struct perl_meta m;
	char small[8];

	(void)state;
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), 0);
	/* ';' and control bytes cannot forge folded frames; invalid UTF-8
	 * is replaced. */
	assert_string_equal(name_of(&m, SONDE_PERL_FRAME(0x5000, 0, 2, 0)),
			    "P?Q::a?b?c (f?.pl:2)");
	r = sub_rec(0x5000, "Pkg", "x", "file.pl");
	r.flags = SONDE_PERL_META_FILE_CUT | SONDE_PERL_META_NAME_CUT;
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), 0);
	assert_string_equal(name_of(&m, SONDE_PERL_FRAME(0x5000, 0, 2, 0)),
			    "Pkg::x... (file.pl...:2)");
	/* Truncation into a small buffer, always terminated. */
	assert_int_equal(perl_meta_frame_name(&m, SONDE_PERL_FRAME(0x5000, 0, 2, 0), small,
					      sizeof(small)),
			 7);
	assert_string_equal(small, "Pkg::x.");
	/* Full slots decode. */
	memset(r.name, 'n', sizeof(r.name));
	r.name_len = sizeof(r.name);
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), 0);
	assert_int_equal(strlen(m.name), sizeof(r.name) + 3);
	/* Refused: lengths past a slot, wrong size, version or type, a sub
	 * without a name, a COP with one. */
	r.name_len = sizeof(r.name) + 1;
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), -EBADMSG);
	r = sub_rec(0x5000, "P", "n", "f");
	r.file_len = sizeof(r.file) + 1;
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), -EBADMSG);
	r = sub_rec(0x5000, "P", "n", "f");
	assert_int_equal(perl_meta_decode(&r, sizeof(r) - 1, &m), -EBADMSG);
	r.version = 2;
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), -EBADMSG);
	r = sub_rec(0x5000, "P", "n", "f");
	r.type = 3;
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), -EBADMSG);
	r = sub_rec(0x5000, "P", "", "f");
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), -EBADMSG);
	r = sub_rec(0x5000, "P", "n", "f");
	r.name[0] = '\0'; /* a length, but only a NUL */
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), -EBADMSG);
	r = cop_rec(0x6000, "f");
	r.name_len = 1;
	assert_int_equal(perl_meta_decode(&r, sizeof(r), &m), -EBADMSG);
	assert_int_equal(perl_meta_decode(NULL, sizeof(r), &m), -EBADMSG);
}

static void test_table(void **state)
{
	struct interp_records *t = perl_metas_new();
	struct sonde_perl_meta a = sub_rec(0x5000, "A", "one", "a.pl");
	struct sonde_perl_meta c = cop_rec(0x5000, "main.pl"); /* same address, other type */
	uint64_t sub_word = SONDE_PERL_FRAME(0x5000, SONDE_PERL_FRAME_SUB, 4, 0);
	uint64_t main_word = SONDE_PERL_FRAME(0x5000, SONDE_PERL_FRAME_MAIN, 5, 1);
	const struct perl_meta *m;

	(void)state;
	assert_non_null(t);
	assert_int_equal(interp_records_put(t, 10, &a, sizeof(a)), 0);
	assert_int_equal(interp_records_put(t, 10, &c, sizeof(c)), 0);
	assert_int_equal(interp_records_count(t), 2);
	m = perl_metas_get(t, 10, sub_word, 0);
	assert_non_null(m);
	assert_string_equal(name_of(m, sub_word), "A::one (a.pl:4)");
	m = perl_metas_get(t, 10, main_word, 0);
	assert_non_null(m);
	assert_string_equal(name_of(m, main_word), "main (main.pl:5)");
	assert_string_equal(name_of(perl_metas_get(t, 10, SONDE_PERL_FRAME(0x5000,
		SONDE_PERL_FRAME_EVAL, 6, 0), 0), SONDE_PERL_FRAME(0x5000, SONDE_PERL_FRAME_EVAL,
		6, 0)), "(eval) (main.pl:6)");
	/* Other pids, checksums. */
	assert_null(perl_metas_get(t, 11, sub_word, 0));
	assert_non_null(perl_metas_get(t, 10, sub_word, 77));
	assert_null(perl_metas_get(t, 10, sub_word, 78));
	/* A reused address replaces its record. */
	a = sub_rec(0x5000, "B", "two", "b.pl");
	assert_int_equal(interp_records_put(t, 10, &a, sizeof(a)), 0);
	assert_int_equal(interp_records_count(t), 2);
	assert_string_equal(name_of(perl_metas_get(t, 10, sub_word, 0), sub_word),
			    "B::two (b.pl:4)");
	/* A damaged record is refused and counted. */
	a.version = 9;
	assert_int_equal(interp_records_put(t, 10, &a, sizeof(a)), -EBADMSG);
	assert_int_equal(interp_records_refused(t), 1);
	/* Bounded: past PERL_METAS_MAX it starts over. */
	for (uint32_t i = 0; i < PERL_METAS_MAX + 5; i++) {
		struct sonde_perl_meta r = sub_rec(0x100000 + (uint64_t)i * 8, "P", "s", "f");

		assert_int_equal(interp_records_put(t, 12, &r, sizeof(r)), 0);
	}
	assert_true(interp_records_count(t) <= PERL_METAS_MAX);
	interp_records_free(t);
	interp_records_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_word),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_cut_and_hostile),
		cmocka_unit_test(test_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
