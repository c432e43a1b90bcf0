/* test-hotspot-method.c - symbolizer/interp/hotspot/hotspot_method.c:
 * method records as BPF builds them (bpf/hotspot.h) are named
 * "package.Class.method (Source.java:LINE)" with lines from HotSpot's
 * compressed line number table (one-byte pairs, 0xff escapes with signed
 * multi-byte numbers, in JDK 11-19's UNSIGNED5 and in JDK 20+'s, whose
 * bytes are the digits plus 1); the system name carries the descriptor; damaged
 * and hostile records are refused or made harmless; the per-(pid,
 * Method*) table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hotspot_method.h"
#include "interp_records.h"

/* ---- an encoder of the line number table, as the class file parser's
 * CompressedLineNumberWriteStream writes it; x: 0 (JDK 11-19) or 1 (20+:
 * unsigned5.hpp's excluded zero byte, 191 low digits) ---- */

static size_t put_u5(uint8_t *p, uint32_t v, unsigned x)
{
	const uint32_t low = 192 - x;
	size_t n = 0;

	for (int i = 0; i < 4 && v >= low; i++) {
		p[n++] = (uint8_t)(x + low + (v - low) % 64);
		v = (v - low) / 64;
	}
	p[n++] = (uint8_t)(x + v);
	return n;
}

static size_t put_signed(uint8_t *p, int32_t v, unsigned x)
{
	return put_u5(p, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31), x);
}

struct pair {
	uint32_t bci;
	int32_t line;
};

static size_t encode(const struct pair *pairs, size_t n, unsigned x, uint8_t *out)
{
	uint32_t bci = 0;
	int32_t line = 0;
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int32_t db = (int32_t)(pairs[i].bci - bci), dl = pairs[i].line - line;

		if (db >= 0 && db < 32 && dl >= 0 && dl < 8) {
			out[o++] = (uint8_t)(db << 3 | dl);
		} else {
			out[o++] = 0xff;
			o += put_signed(out + o, db, x);
			o += put_signed(out + o, dl, x);
		}
		bci = pairs[i].bci;
		line = pairs[i].line;
	}
	out[o++] = 0;
	return o;
}

static void set_text(char *slot, uint16_t *len, const char *s)
{
	*len = (uint16_t)strlen(s);
	memcpy(slot, s, *len);
}

static struct sonde_hotspot_method record(uint64_t method)
{
	static const struct pair pairs[] = {
		{ 0, 10 }, { 4, 11 }, { 9, 12 }, { 40, 20 }, { 300, 25 }, { 310, 3 },
	};
	struct sonde_hotspot_method r;

	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.version = SONDE_HOTSPOT_METHOD_VERSION;
	r.flags = SONDE_HOTSPOT_METHOD_HAS_LINES;
	r.code_size = 400;
	r.method = method;
	r.const_method = method + 0x1000;
	set_text(r.klass, &r.klass_len, "com/example/Work$Inner");
	set_text(r.name, &r.name_len, "hot");
	set_text(r.sig, &r.sig_len, "(I[Ljava/lang/String;)J");
	set_text(r.source, &r.source_len, "Work.java");
	r.linetable_len = (uint16_t)encode(pairs, sizeof(pairs) / sizeof(pairs[0]), 0, r.linetable);
	return r;
}

static void test_names_and_lines(void **state)
{
	struct sonde_hotspot_method r = record(0x7f0012345678);
	struct hotspot_method m;
	char buf[512];

	(void)state;
	assert_int_equal(hotspot_method_decode(&r, sizeof(r), &m), 0);
	hotspot_method_frame_name(&m, 0, buf, sizeof(buf));
	assert_string_equal(buf, "com.example.Work$Inner.hot (Work.java:10)");
	hotspot_method_frame_name(&m, 5, buf, sizeof(buf)); /* nearest below */
	assert_string_equal(buf, "com.example.Work$Inner.hot (Work.java:11)");
	hotspot_method_frame_name(&m, 40, buf, sizeof(buf)); /* line delta 8: escaped */
	assert_string_equal(buf, "com.example.Work$Inner.hot (Work.java:20)");
	hotspot_method_frame_name(&m, 305, buf, sizeof(buf)); /* bci delta 260: multi-byte */
	assert_string_equal(buf, "com.example.Work$Inner.hot (Work.java:25)");
	hotspot_method_frame_name(&m, 399, buf, sizeof(buf)); /* negative line delta */
	assert_string_equal(buf, "com.example.Work$Inner.hot (Work.java:3)");
	hotspot_method_frame_name(&m, 400, buf, sizeof(buf)); /* beyond the code */
	assert_string_equal(buf, "com.example.Work$Inner.hot (Work.java)");
	hotspot_method_frame_name(&m, SONDE_HOTSPOT_BCI_UNKNOWN, buf, sizeof(buf));
	assert_string_equal(buf, "com.example.Work$Inner.hot (Work.java)");
	hotspot_method_system_name(&m, buf, sizeof(buf));
	assert_string_equal(buf, "com.example.Work$Inner.hot(I[Ljava/lang/String;)J");
	hotspot_method_frame_name(NULL, 0, buf, sizeof(buf));
	assert_string_equal(buf, HOTSPOT_UNKNOWN_FRAME);
	/* Cut to the buffer. */
	assert_int_equal(hotspot_method_frame_name(&m, 0, buf, 8), 7);
	assert_string_equal(buf, "com.exa");

	/* No line table, no source file. */
	r.flags = 0;
	r.source_len = 0;
	assert_int_equal(hotspot_method_decode(&r, sizeof(r), &m), 0);
	hotspot_method_frame_name(&m, 0, buf, sizeof(buf));
	assert_string_equal(buf, "com.example.Work$Inner.hot");
	/* Cut names say so. */
	r.flags = SONDE_HOTSPOT_METHOD_KLASS_CUT;
	assert_int_equal(hotspot_method_decode(&r, sizeof(r), &m), 0);
	assert_string_equal(m.klass, "com.example.Work$Inner...");
}

static void test_line_table_edges(void **state)
{
	static const uint8_t cut_number[] = { 0xff, 0xc5 }; /* a number cut by the end */
	static const uint8_t only_end[] = { 0 };
	static const uint8_t no_end[] = { 0x08, 0x09 }; /* bci 1 line 0, bci 2 line 1 */
	int32_t line = 0;

	(void)state;
	assert_int_equal(hotspot_line_for_bci(cut_number, sizeof(cut_number), false, 3, &line), -EBADMSG);
	assert_int_equal(hotspot_line_for_bci(only_end, sizeof(only_end), false, 0, &line), -ENOENT);
	assert_int_equal(hotspot_line_for_bci(NULL, 0, false, 0, &line), -ENOENT);
	assert_int_equal(hotspot_line_for_bci(no_end, sizeof(no_end), false, 7, &line), 0);
	assert_int_equal(line, 1);
	assert_int_equal(hotspot_line_for_bci(no_end, sizeof(no_end), false, 0, &line), -ENOENT);
}

/* JDK 20+'s numbers (the record's U5_X1 flag): the same pairs encoded
 * with the excluded zero byte give the same lines, and read as JDK 11-19's
 * they would not; a zero byte inside such a number is refused. */
static void test_lines_jdk20_numbers(void **state)
{
	static const struct pair pairs[] = {
		{ 0, 10 }, { 40, 20 }, { 300, 25 }, { 310, 3 }, { 20000, 9000 },
	};
	static const uint8_t zero_in_number[] = { 0xff, 0xc5, 0x00, 0x02, 0 };
	uint8_t table[64];
	size_t n = encode(pairs, sizeof(pairs) / sizeof(pairs[0]), 1, table);
	struct sonde_hotspot_method r = record(0x2000);
	struct hotspot_method m;
	int32_t line = 0;
	char buf[512];

	(void)state;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		assert_int_equal(hotspot_line_for_bci(table, n, true, pairs[i].bci, &line), 0);
		assert_int_equal(line, pairs[i].line);
	}
	line = 0;
	assert_false(hotspot_line_for_bci(table, n, false, 0, &line) == 0 && line == 10);
	assert_int_equal(hotspot_line_for_bci(zero_in_number, sizeof(zero_in_number), true, 5, &line),
			 -EBADMSG);
	memset(r.linetable, 0, sizeof(r.linetable));
	memcpy(r.linetable, table, n);
	r.linetable_len = (uint16_t)n;
	r.code_size = 30000;
	r.flags = SONDE_HOTSPOT_METHOD_HAS_LINES | SONDE_HOTSPOT_METHOD_U5_X1;
	assert_int_equal(hotspot_method_decode(&r, sizeof(r), &m), 0);
	hotspot_method_frame_name(&m, 305, buf, sizeof(buf));
	assert_string_equal(buf, "com.example.Work$Inner.hot (Work.java:25)");
	hotspot_method_frame_name(&m, 20001, buf, sizeof(buf));
	assert_string_equal(buf, "com.example.Work$Inner.hot (Work.java:9000)");
	r.flags = 0x80; /* a flag no release sets */
	assert_int_equal(hotspot_method_decode(&r, sizeof(r), &m), -EBADMSG);
}

static void test_hostile_records(void **state)
{
	struct sonde_hotspot_method r = record(0x1000), bad;
	struct hotspot_method m;

	(void)state;
	assert_int_equal(hotspot_method_decode(&r, sizeof(r) - 1, &m), -EBADMSG);
	assert_int_equal(hotspot_method_decode(NULL, sizeof(r), &m), -EBADMSG);
	bad = r;
	bad.size = 12;
	assert_int_equal(hotspot_method_decode(&bad, sizeof(bad), &m), -EBADMSG);
	bad = r;
	bad.version = 9;
	assert_int_equal(hotspot_method_decode(&bad, sizeof(bad), &m), -EBADMSG);
	bad = r;
	bad.flags = 0x80;
	assert_int_equal(hotspot_method_decode(&bad, sizeof(bad), &m), -EBADMSG);
	bad = r;
	bad.klass_len = sizeof(bad.klass) + 1;
	assert_int_equal(hotspot_method_decode(&bad, sizeof(bad), &m), -EBADMSG);
	bad = r;
	bad.linetable_len = sizeof(bad.linetable) + 1;
	assert_int_equal(hotspot_method_decode(&bad, sizeof(bad), &m), -EBADMSG);
	bad = r;
	bad.name_len = 0;
	assert_int_equal(hotspot_method_decode(&bad, sizeof(bad), &m), -EBADMSG);
	/* Folded syntax, controls and modified UTF-8's NUL and surrogates
	 * become '?'; valid multibyte text stays. */
	bad = r;
	set_text(bad.name, &bad.name_len, "a;b\nc\xc0\x80\xed\xa0\x80\xc3\xa9");
	assert_int_equal(hotspot_method_decode(&bad, sizeof(bad), &m), 0);
	assert_string_equal(m.name, "a?b?c?????\xc3\xa9");
	/* A name of NULs only is no name. */
	bad = r;
	memset(bad.name, 0, sizeof(bad.name));
	assert_int_equal(hotspot_method_decode(&bad, sizeof(bad), &m), -EBADMSG);
}

static void test_table(void **state)
{
	struct interp_records *t = hotspot_methods_new();
	struct sonde_hotspot_method a = record(0x1000), b = record(0x2000), bad = record(0x3000);
	const struct hotspot_method *m;

	(void)state;
	assert_non_null(t);
	assert_int_equal(interp_records_put(t, 7, &a, sizeof(a)), 0);
	assert_int_equal(interp_records_put(t, 7, &b, sizeof(b)), 0);
	bad.version = 0;
	assert_int_equal(interp_records_put(t, 7, &bad, sizeof(bad)), -EBADMSG);
	assert_int_equal(interp_records_refused(t), 1);
	assert_int_equal(interp_records_count(t), 2);
	assert_non_null(hotspot_methods_get(t, 7, 0x1000, 0));
	assert_non_null(hotspot_methods_get(t, 7, 0x1000, 0x2000));
	assert_null(hotspot_methods_get(t, 7, 0x1000, 0x9999)); /* another ConstMethod */
	assert_null(hotspot_methods_get(t, 8, 0x1000, 0));
	assert_null(hotspot_methods_get(t, 7, 0x3000, 0));
	/* A Method* reused after class unloading: the new record wins. */
	set_text(a.name, &a.name_len, "other");
	assert_int_equal(interp_records_put(t, 7, &a, sizeof(a)), 0);
	m = hotspot_methods_get(t, 7, 0x1000, 0);
	assert_non_null(m);
	assert_string_equal(m->name, "other");
	assert_int_equal(interp_records_count(t), 2);
	interp_records_free(t);
	interp_records_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_and_lines),
		cmocka_unit_test(test_line_table_edges),
		cmocka_unit_test(test_lines_jdk20_numbers),
		cmocka_unit_test(test_hostile_records),
		cmocka_unit_test(test_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
