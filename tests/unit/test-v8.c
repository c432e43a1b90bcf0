/* test-v8.c - symbolizer/interp/v8/: the SFI record decoder (lengths,
 * Latin-1 and UTF-16 to printable UTF-8, hostile bytes), frame names,
 * the per-session table, and the Loader on Debian's node when present
 * (its v8dbg constants into the walker's config). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "interp_ops.h"
#include "v8.h"
#include "v8_lines.h"
#include "v8_loader.h"
#include "v8_sfi.h"

static void rec_init(struct sonde_v8_meta *m, const char *name, const char *script)
{
	memset(m, 0, sizeof(*m));
	m->size = sizeof(*m);
	m->version = SONDE_V8_META_VERSION;
	m->sfi = 0x1234561;
	m->checksum = 7;
	m->name_len = (uint16_t)strlen(name);
	memcpy(m->name, name, m->name_len);
	m->script_len = (uint16_t)strlen(script);
	memcpy(m->script, script, m->script_len);
}

static void test_layout(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct sonde_v8_meta), V8_META_SIZE);
	assert_int_equal(offsetof(struct sonde_v8_meta, name), V8_META_HEADER);
	assert_int_equal(offsetof(struct sonde_v8_meta, script), V8_META_HEADER + V8_META_NAME);
}

static void test_decode_and_name(void **state)
{
	struct sonde_v8_meta m;
	struct v8_sfi s;
	char buf[600];

	(void)state;
	rec_init(&m, "leafA", "/srv/app.js");
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), 0);
	assert_int_equal(s.addr, 0x1234561);
	v8_sfi_frame_name(&s, 0, buf, sizeof(buf));
	assert_string_equal(buf, "leafA (/srv/app.js)");
	/* No name: V8's "(anonymous)"; no script: the name alone. */
	rec_init(&m, "", "node:internal/timers");
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), 0);
	v8_sfi_frame_name(&s, 0, buf, sizeof(buf));
	assert_string_equal(buf, "(anonymous) (node:internal/timers)");
	rec_init(&m, "Promise", "");
	m.flags = SONDE_V8_META_NO_SCRIPT;
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), 0);
	v8_sfi_frame_name(&s, 0, buf, sizeof(buf));
	assert_string_equal(buf, "Promise");
	v8_sfi_frame_name(NULL, 0, buf, sizeof(buf));
	assert_string_equal(buf, V8_UNKNOWN_FRAME);
	/* Cut names say so. */
	rec_init(&m, "f", "a.js");
	m.flags = SONDE_V8_META_NAME_CUT;
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), 0);
	assert_string_equal(s.name, "f...");
	/* A small buffer: cut, NUL-terminated. */
	rec_init(&m, "leafA", "/srv/app.js");
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), 0);
	assert_int_equal(v8_sfi_frame_name(&s, 0, buf, 4), 3);
	assert_string_equal(buf, "lea");
}

static void test_encodings(void **state)
{
	struct sonde_v8_meta m;
	struct v8_sfi s;
	/* UTF-16LE "é€😀" + an unpaired surrogate. */
	const uint8_t utf16[] = { 0xe9, 0, 0xac, 0x20, 0x3d, 0xd8, 0x00, 0xde, 0x00, 0xd8 };

	(void)state;
	/* Latin-1: é is one byte; controls and ';' are made '?'. */
	rec_init(&m, "caf\xe9;\n", "x.js");
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), 0);
	assert_string_equal(s.name, "caf\xc3\xa9??");
	rec_init(&m, "", "x.js");
	memcpy(m.name, utf16, sizeof(utf16));
	m.name_len = sizeof(utf16);
	m.flags = SONDE_V8_META_NAME_TWO_BYTE;
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), 0);
	assert_string_equal(s.name, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80?");
	/* The longest names fit their buffers. */
	memset(m.name, 0xff, sizeof(m.name));
	m.name_len = sizeof(m.name);
	m.flags = SONDE_V8_META_NAME_CUT;
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), 0);
	assert_int_equal(strlen(s.name), 2 * V8_META_NAME + 3);
	memset(m.name, 0xff, sizeof(m.name));
	m.flags = SONDE_V8_META_NAME_CUT | SONDE_V8_META_NAME_TWO_BYTE; /* U+FFFF x 64 */
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), 0);
	assert_int_equal(strlen(s.name), 3 * V8_META_NAME / 2 + 3);
}

static void test_damaged(void **state)
{
	struct sonde_v8_meta m;
	struct v8_sfi s;

	(void)state;
	rec_init(&m, "f", "a.js");
	assert_int_equal(v8_sfi_decode(&m, sizeof(m) - 1, &s), -EBADMSG);
	assert_int_equal(v8_sfi_decode(NULL, sizeof(m), &s), -EBADMSG);
	m.version = 2;
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), -EBADMSG);
	rec_init(&m, "f", "a.js");
	m.size = 1;
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), -EBADMSG);
	rec_init(&m, "f", "a.js");
	m.name_len = V8_META_NAME + 1;
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), -EBADMSG);
	rec_init(&m, "f", "a.js");
	m.script_len = V8_META_SCRIPT + 1;
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), -EBADMSG);
	rec_init(&m, "fff", "a.js");
	m.flags = SONDE_V8_META_NAME_TWO_BYTE; /* an odd two-byte length */
	assert_int_equal(v8_sfi_decode(&m, sizeof(m), &s), -EBADMSG);
}

static void test_table_and_ops(void **state)
{
	const struct interp_ops *ops = interp_ops_of(SONDE_INTERP_V8);
	struct interp_session *sess = interp_session_new();
	struct sonde_v8_meta m;
	struct interp_frame f = { .kind = SONDE_INTERP_V8, .n_words = 2 };
	char buf[128];

	(void)state;
	assert_non_null(ops);
	assert_true(ops->jit);
	assert_ptr_equal(interp_ops_for_path("/usr/bin/node"), ops);
	assert_ptr_equal(interp_ops_for_path("/opt/lib/libnode.so.115"), ops);
	assert_null(interp_ops_for_path("/usr/bin/nodejs-helper"));
	assert_string_equal(interp_kind_name(SONDE_INTERP_V8), "v8js");
	rec_init(&m, "leafA", "/srv/app.js");
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &m, sizeof(m)), 0);
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &m, 3), -EBADMSG);
	f.words[0] = SONDE_INTERP_JIT_WORD0(3, SONDE_V8_WORD0(0x1234561, SONDE_V8_TIER_OPTIMIZED));
	interp_session_frame_name(sess, 42, &f, buf, sizeof(buf));
	assert_string_equal(buf, "leafA (/srv/app.js)");
	interp_session_frame_name(sess, 43, &f, buf, sizeof(buf));
	assert_string_equal(buf, V8_UNKNOWN_FRAME);
	/* A reused address: the newer record wins. */
	rec_init(&m, "other", "/srv/app.js");
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &m, sizeof(m)), 0);
	interp_session_frame_name(sess, 42, &f, buf, sizeof(buf));
	assert_string_equal(buf, "other (/srv/app.js)");
	interp_session_free(sess);
}

/* Appends value as V8's zigzag VLQ. */
static size_t put_vlq(uint8_t *p, int64_t value)
{
	uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
	size_t n = 0;

	do {
		p[n] = v & 0x7f;
		v >>= 7;
		if (v)
			p[n] |= 0x80;
		n++;
	} while (v);
	return n;
}

/* An entry (code offset, script offset, inlining id) after prev. */
static size_t put_entry(uint8_t *p, int64_t *prev_code, int64_t *prev_pos, int64_t code,
			int32_t offset, int32_t inlined)
{
	int64_t pos = ((int64_t)(offset + 1) << 1) | ((int64_t)(inlined + 1) << 31);
	size_t n = put_vlq(p, -(code - *prev_code) - 1); /* not a statement */

	n += put_vlq(p + n, pos - *prev_pos);
	*prev_code = code;
	*prev_pos = pos;
	return n;
}

static void test_lines(void **state)
{
	uint8_t table[64];
	int64_t pc = 0, pp = 0;
	size_t n = 0;
	int32_t off, inl, line;
	const char *src = "a\nb\nfunction f() {\n  x++;\n}\n";

	(void)state;
	n += put_entry(table + n, &pc, &pp, 0, 4, -1);
	n += put_entry(table + n, &pc, &pp, 40, 22, -1);
	n += put_entry(table + n, &pc, &pp, 300, 27, 0);
	assert_int_equal(v8_table_lookup(table, n, 0, &off, &inl), 0);
	assert_int_equal(off, 4);
	assert_int_equal(v8_table_lookup(table, n, 39, &off, &inl), 0);
	assert_int_equal(off, 4);
	assert_int_equal(v8_table_lookup(table, n, 40, &off, &inl), 0);
	assert_int_equal(off, 22);
	assert_int_equal(inl, -1);
	assert_int_equal(v8_table_lookup(table, n, 100000, &off, &inl), 0);
	assert_int_equal(off, 27);
	assert_int_equal(inl, 0);
	/* Cut in the middle of an entry: what came before still counts. */
	assert_int_equal(v8_table_lookup(table, n - 1, 100000, &off, &inl), 0);
	assert_int_equal(off, 22);
	assert_int_equal(v8_table_lookup(table, 0, 0, &off, &inl), -ENOENT);
	memset(table, 0xff, sizeof(table)); /* a VLQ that never ends */
	assert_int_equal(v8_table_lookup(table, sizeof(table), 0, &off, &inl), -EBADMSG);
	assert_int_equal(v8_source_line((const uint8_t *)src, strlen(src), 0, &line), 0);
	assert_int_equal(line, 1);
	assert_int_equal(v8_source_line((const uint8_t *)src, strlen(src), 22, &line), 0);
	assert_int_equal(line, 4);
	assert_int_equal(v8_source_line((const uint8_t *)src, 10, 22, &line), -ENOENT);
}

static void test_lines_records(void **state)
{
	struct v8_lines *t = v8_lines_new();
	struct sonde_v8_code code = { .size = sizeof(code), .version = SONDE_V8_CODE_VERSION,
				      .code = 0x7f0000001231, .sfi = 0x1234561,
				      .script = 0x5551 };
	struct sonde_v8_source src = { .size = sizeof(src), .version = SONDE_V8_SOURCE_VERSION,
				       .script = 0x5551 };
	uint64_t word1 = ((0x7f0000001231ull >> 3) << 32) | 50;
	int64_t pc = 0, pp = 0;
	int32_t line;

	(void)state;
	assert_non_null(t);
	assert_int_equal(sizeof(code), V8_CODE_SIZE);
	assert_int_equal(sizeof(src), V8_SOURCE_SIZE);
	assert_int_equal(offsetof(struct sonde_v8_code, table), V8_CODE_HEADER);
	assert_int_equal(offsetof(struct sonde_v8_source, bytes), V8_SOURCE_HEADER);
	code.table_len = (uint16_t)put_entry(code.table, &pc, &pp, 0, 1, -1);
	code.table_len += (uint16_t)put_entry(code.table + code.table_len, &pc, &pp, 40, 1600, -1);
	assert_int_equal(v8_lines_put(t, 7, &code, sizeof(code)), 0);
	assert_int_equal(v8_lines_line(t, 7, word1, 1, &line), -ENOENT); /* no source yet */
	/* The source: 2,000 bytes, a line each 100 bytes, in two chunks. */
	src.total = 2000;
	src.len = V8_SOURCE_CHUNK;
	for (int i = 0; i < V8_SOURCE_CHUNK; i++)
		src.bytes[i] = i % 100 == 99 ? '\n' : 'x';
	assert_int_equal(v8_lines_put(t, 7, &src, sizeof(src)), 0);
	assert_int_equal(v8_lines_line(t, 7, word1, 1, &line), -ENOENT); /* offset 1600: chunk 1 */
	assert_int_equal(v8_lines_line(t, 7, word1 - 50 + 40, 0, &line), 0); /* a return address */
	assert_int_equal(line, 1);
	src.index = 1;
	src.len = 2000 - V8_SOURCE_CHUNK;
	for (int i = 0; i < src.len; i++)
		src.bytes[i] = (V8_SOURCE_CHUNK + i) % 100 == 99 ? '\n' : 'x';
	assert_int_equal(v8_lines_put(t, 7, &src, sizeof(src)), 0);
	assert_int_equal(v8_lines_line(t, 7, word1, 1, &line), 0);
	assert_int_equal(line, 17);
	assert_int_equal(v8_lines_line(t, 8, word1, 1, &line), -ENOENT); /* another process */
	/* Damaged: a chunk past the total, a table longer than its slot. */
	src.index = 2;
	assert_int_equal(v8_lines_put(t, 7, &src, sizeof(src)), -EBADMSG);
	code.table_len = V8_CODE_TABLE + 1;
	assert_int_equal(v8_lines_put(t, 7, &code, sizeof(code)), -EBADMSG);
	assert_int_equal(v8_lines_put(t, 7, &code, 12), -ENOENT);
	v8_lines_free(t);
}

/* An interpreted frame: a BytecodeArray's table (bytecode offset ->
 * script offset), as Node 20 built it for
 * `function f(n){ let s=0; for(let i=0;i<n;i++){ s+=i%7; } return s; }`,
 * with two of the source's spaces made newlines (offsets unchanged). */
static void test_lines_bytecode(void **state)
{
	static const uint8_t table[] = { 0x01, 0x2c, 0x02, 0x2c, 0x04, 0x34, 0x04, 0x0c,
					 0x05, 0x00, 0x0a, 0x24, 0x05, 0x10, 0x14, 0x23,
					 0x0b, 0x43, 0x08, 0x80, 0x01, 0x04, 0x24 };
	static const char text[] = "function f(n){ let s=0; for(let i=0;i<n;i++){\ns+=i%7; }"
				   "\nreturn s; }\n";
	struct v8_lines *t = v8_lines_new();
	struct sonde_v8_code code = { .size = sizeof(code), .version = SONDE_V8_CODE_VERSION,
				      .flags = SONDE_V8_CODE_BYTECODE, .code = 0x45485636b1,
				      .sfi = 0x1234561, .script = 0x5551 };
	struct sonde_v8_source src = { .size = sizeof(src), .version = SONDE_V8_SOURCE_VERSION,
				       .script = 0x5551 };
	uint64_t key = (0x45485636b1ull >> 3) << 32;
	int32_t line;

	(void)state;
	assert_non_null(t);
	code.table_len = sizeof(table);
	memcpy(code.table, table, sizeof(table));
	src.total = src.len = sizeof(text) - 1;
	memcpy(src.bytes, text, sizeof(text) - 1);
	assert_int_equal(v8_lines_put(t, 7, &code, sizeof(code)), 0);
	assert_int_equal(v8_lines_put(t, 7, &src, sizeof(src)), 0);
	/* Bytecode 5: the loop's test (i<n); 12: s+=i%7; 33: return s. */
	assert_int_equal(v8_lines_line(t, 7, key | 5, 1, &line), 0);
	assert_int_equal(line, 1);
	assert_int_equal(v8_lines_line(t, 7, key | 12, 1, &line), 0);
	assert_int_equal(line, 2);
	assert_int_equal(v8_lines_line(t, 7, key | 33, 1, &line), 0);
	assert_int_equal(line, 3);
	assert_int_equal(v8_lines_line(t, 7, key | 0xffffffffu, 1, &line), -ENOENT);
	v8_lines_free(t);
}

static void test_loader_node(void **state)
{
	struct file_image *img = file_image_open("/usr/bin/node");
	const struct interp_ops *ops = interp_ops_of(SONDE_INTERP_V8);
	struct interp_config cfg;
	struct interp_data d;
	struct elf_need need = { 0 };
	struct sonde_v8_offsets o;
	const char *reason = NULL;

	(void)state;
	if (!img) {
		skip();
		return;
	}
	assert_int_equal(v8_loader_need(img, &need), 0);
	assert_int_equal(interp_loader_analyse(img, "/usr/bin/node", &d, &reason), 0);
	assert_int_equal(d.kind, SONDE_INTERP_V8);
	assert_int_equal(d.data_len, sizeof(o));
	assert_int_equal(ops->config(&d, &cfg), 0);
	assert_int_equal(cfg.layout_len, sizeof(o));
	memcpy(&o, cfg.layout, sizeof(o));
	/* Node 20's V8 11.3: the frame slots and the layouts the walker reads. */
	assert_int_equal(o.fp_context, 8);
	assert_int_equal(o.fp_function, 16);
	assert_int_equal(o.fp_bytecode_array, 32);
	assert_int_equal(o.fp_bytecode_offset, 40);
	assert_int_equal(o.fn_shared, 24);
	assert_int_equal(o.fn_code, 48);
	assert_int_equal(o.sfi_name, 16);
	assert_int_equal(o.sfi_script, 32);
	assert_int_equal(o.script_name, 16);
	assert_int_equal(o.scope_first_slot, 32);
	assert_int_equal(o.type_sfi, 262);
	assert_int_equal(o.type_scope_info, 261);
	assert_int_equal(o.first_nonstring, 128);
	assert_int_equal(o.bytecode_table, 32);
	assert_int_equal(o.bytecode_data, 54);
	assert_true(o.blob_size > (1u << 20) && o.blob_size < (8u << 20));
	assert_true(d.runtime_offset > 0 && d.runtime_offset < file_image_size(img));
	/* Not V8: python, for one. */
	file_image_free(img);
	img = file_image_open("/usr/bin/python3.11");
	if (img) {
		assert_int_equal(v8_loader_analyse(img, &d, &reason), -ENOENT);
		file_image_free(img);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_decode_and_name),
		cmocka_unit_test(test_encodings),
		cmocka_unit_test(test_damaged),
		cmocka_unit_test(test_table_and_ops),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_lines_records),
		cmocka_unit_test(test_lines_bytecode),
		cmocka_unit_test(test_loader_node),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
