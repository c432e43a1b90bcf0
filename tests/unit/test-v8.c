/* test-v8.c - symbolizer/interp/v8/: the SFI record decoder (lengths,
 * Latin-1 and UTF-16 to printable UTF-8, hostile bytes), frame names,
 * the per-session table, position tables and lines, inlined functions
 * (the record, the chain, an optimised frame split by the ops table's
 * expand), baseline frames (the offset table walked with the bytecodes'
 * lengths, real bytes from Node 20), and the Loader on Debian's node when present
 * (its v8dbg constants into the walker's config). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "interp_ops.h"
#include "v8.h"
#include "v8_baseline.h"
#include "v8_inline.h"
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
	int64_t pc = -1, pp = 0; /* V8 encodes from the function entry, -1 */
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
	int64_t pc = -1, pp = 0; /* V8 encodes from the function entry, -1 */
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

/* A raw SourcePosition: script offset, inlining id (-1: none). */
static uint64_t source_pos(int32_t offset, int32_t inlined)
{
	return ((uint64_t)(offset + 1) << 1) | ((uint64_t)(inlined + 1) << 31);
}

static void inline_pos(struct sonde_v8_inline *r, int i, int32_t offset, int32_t parent,
		       int32_t fn)
{
	uint64_t raw = source_pos(offset, parent);

	memcpy(r->positions + 16 * i, &raw, 8);
	memcpy(r->positions + 16 * i + 8, &fn, 4);
	if (r->pos_len < 16 * (i + 1))
		r->pos_len = (uint16_t)(16 * (i + 1));
}

/* round() inlined middle() (inlining id 0, literal 1) which inlined
 * spin() (id 1, literal 0): the chain of a position in spin. */
static void test_inline_chain(void **state)
{
	struct sonde_v8_inline r = { .size = sizeof(r), .version = SONDE_V8_INLINE_VERSION,
				     .n_fns = 2, .code = 0x7f0000001231 };
	struct v8_inline_level lv[V8_INLINE_DEPTH];
	struct v8_inline in;
	int32_t off, inl;

	(void)state;
	assert_int_equal(sizeof(r), V8_INLINE_SIZE);
	assert_int_equal(offsetof(struct sonde_v8_inline, fns), V8_INLINE_HEADER);
	assert_int_equal(offsetof(struct sonde_v8_inline, positions),
			 V8_INLINE_HEADER + 16 * V8_INLINE_FNS);
	r.fns[0] = 0x5001;
	r.scripts[0] = 0x6001;
	r.fns[1] = 0x5101;
	r.scripts[1] = 0x6101;
	inline_pos(&r, 0, 300, -1, 1); /* middle called at round's offset 300 */
	inline_pos(&r, 1, 120, 0, 0);  /* spin called at middle's offset 120 */
	assert_int_equal(v8_inline_decode(&r, sizeof(r), &in), 0);
	assert_int_equal(in.key, (uint32_t)(0x7f0000001231ull >> 3));
	assert_int_equal(in.n_pos, 2);
	assert_int_equal(v8_inline_chain(&in, 1, 40, lv, V8_INLINE_DEPTH), 3);
	assert_int_equal(lv[0].sfi, 0x5001);
	assert_int_equal(lv[0].script, 0x6001);
	assert_int_equal(lv[0].offset, 40);
	assert_int_equal(lv[1].sfi, 0x5101);
	assert_int_equal(lv[1].offset, 120);
	assert_int_equal(lv[2].sfi, 0);
	assert_int_equal(lv[2].offset, 300);
	/* Room for two: cut, refused. */
	assert_int_equal(v8_inline_chain(&in, 1, 40, lv, 2), -EBADMSG);
	/* An id past the positions, a function past fns, a cycle. */
	assert_int_equal(v8_inline_chain(&in, 2, 40, lv, V8_INLINE_DEPTH), -EBADMSG);
	inline_pos(&r, 1, 120, 0, 2);
	assert_int_equal(v8_inline_decode(&r, sizeof(r), &in), 0);
	assert_int_equal(v8_inline_chain(&in, 1, 40, lv, V8_INLINE_DEPTH), -EBADMSG);
	inline_pos(&r, 1, 120, 1, 0);
	assert_int_equal(v8_inline_decode(&r, sizeof(r), &in), 0);
	assert_int_equal(v8_inline_chain(&in, 1, 40, lv, V8_INLINE_DEPTH), -EBADMSG);
	/* Damaged records. */
	r.n_fns = V8_INLINE_FNS + 1;
	assert_int_equal(v8_inline_decode(&r, sizeof(r), &in), -EBADMSG);
	r.n_fns = 2;
	r.pos_len = 17;
	assert_int_equal(v8_inline_decode(&r, sizeof(r), &in), -EBADMSG);
	r.pos_len = V8_INLINE_POS_BYTES + 16;
	assert_int_equal(v8_inline_decode(&r, sizeof(r), &in), -EBADMSG);
	r.pos_len = 32;
	r.version = 2;
	assert_int_equal(v8_inline_decode(&r, sizeof(r), &in), -EBADMSG);
	r.version = SONDE_V8_INLINE_VERSION;
	assert_int_equal(v8_inline_decode(&r, sizeof(r) - 1, &in), -EBADMSG);
	/* External positions have no script offset. */
	v8_position_split(source_pos(7, 3) | 1, &off, &inl);
	assert_int_equal(off, -1);
	assert_int_equal(inl, 3);
}

static void put_meta(struct interp_session *sess, uint64_t sfi, const char *name)
{
	struct sonde_v8_meta m;

	rec_init(&m, name, "/srv/app.js");
	m.sfi = sfi;
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &m, sizeof(m)), 0);
}

/* An optimised frame of round() whose pc is in spin() inlined through
 * middle(): split into spin, middle, round with their lines, each
 * standing for the same native frame. */
static void test_inline_expand(void **state)
{
	static const char text[] = "round\n\nmiddle\n\nspin\n";
	struct interp_session *sess = interp_session_new();
	struct sonde_v8_code code = { .size = sizeof(code), .version = SONDE_V8_CODE_VERSION,
				      .code = 0x7f0000001231, .sfi = 0x4001, .script = 0x6001 };
	struct sonde_v8_source src = { .size = sizeof(src), .version = SONDE_V8_SOURCE_VERSION,
				       .script = 0x6001 };
	struct sonde_v8_inline r = { .size = sizeof(r), .version = SONDE_V8_INLINE_VERSION,
				     .n_fns = 2, .code = 0x7f0000001231 };
	struct interp_frame f = { .kind = SONDE_INTERP_V8, .n_words = 2 }, *out = NULL;
	uint64_t key = (0x7f0000001231ull >> 3) << 32;
	int64_t pc = -1, pp = 0; /* V8 encodes from the function entry, -1 */
	uint32_t n = 0;
	char buf[128];

	(void)state;
	put_meta(sess, 0x4001, "round");
	put_meta(sess, 0x5001, "spin");
	put_meta(sess, 0x5101, "middle");
	code.table_len = (uint16_t)put_entry(code.table, &pc, &pp, 0, 0, -1);
	code.table_len += (uint16_t)put_entry(code.table + code.table_len, &pc, &pp, 40, 15, 1);
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &code, sizeof(code)),
			 0);
	src.total = src.len = sizeof(text) - 1;
	memcpy(src.bytes, text, sizeof(text) - 1);
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &src, sizeof(src)), 0);
	f.words[0] = SONDE_INTERP_JIT_WORD0(1, SONDE_V8_WORD0(0x4001, SONDE_V8_TIER_OPTIMIZED));
	f.words[1] = key | 50;
	/* Without the inlining record: round, no line (the offset is spin's). */
	assert_int_equal(interp_session_expand(sess, 42, &f, 1, &out, &n), 0);
	assert_int_equal(n, 1);
	interp_session_frame_name(sess, 42, &out[0], buf, sizeof(buf));
	assert_string_equal(buf, "round (/srv/app.js)");
	free(out);
	r.fns[0] = 0x5001;
	r.scripts[0] = 0x6001;
	r.fns[1] = 0x5101;
	r.scripts[1] = 0x6001;
	inline_pos(&r, 0, 0, -1, 1); /* middle called at line 1 */
	inline_pos(&r, 1, 8, 0, 0);  /* spin called at line 3 */
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &r, sizeof(r)), 0);
	assert_int_equal(interp_session_expand(sess, 42, &f, 1, &out, &n), 0);
	assert_int_equal(n, 3);
	interp_session_frame_name(sess, 42, &out[0], buf, sizeof(buf));
	assert_string_equal(buf, "spin (/srv/app.js:5)");
	interp_session_frame_name(sess, 42, &out[1], buf, sizeof(buf));
	assert_string_equal(buf, "middle (/srv/app.js:3)");
	interp_session_frame_name(sess, 42, &out[2], buf, sizeof(buf));
	assert_string_equal(buf, "round (/srv/app.js:1)");
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(SONDE_INTERP_JIT_POS(out[i].words[0]), 1);
	free(out);
	/* Not inlined there (pc 10): the frame as it came. */
	f.words[1] = key | 10;
	assert_int_equal(interp_session_expand(sess, 42, &f, 1, &out, &n), 0);
	assert_int_equal(n, 1);
	assert_memory_equal(&out[0], &f, sizeof(f));
	free(out);
	/* A damaged inlining record is refused. */
	r.pos_len = 3;
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &r, sizeof(r)),
			 -EBADMSG);
	interp_session_free(sess);
}

/* ---- baseline (Sparkplug) frames ---- */

/* Real bytes, read by hand from a running Node 20.20 (V8 11.3; /proc/PID/mem
 * at the addresses %DebugPrint gave, `node --allow-natives-syntax
 * --always-sparkplug --no-opt --no-maglev`, then %CompileBaseline(leaf)):
 * its kBytecodeSizes (198 bytecodes at scales 1, 2, 4), and of
 * leaf (below) the baseline Code's bytecode offset table (332 bytes of
 * code), its BytecodeArray's 45 bytes of bytecodes and its position
 * table. `node --print-bytecode` lists the same bytecodes at offsets 0, 1,
 * 2, 3, 4, 6, 9, 11, 13, 16, 19, 22, 23, 26, 29, 32, 33, 35, 37, 38
 * (JumpLoop), 42, 44 (Return). */
static const uint8_t node20_sizes[594] = {
	0x01, 0x01, 0x01, 0x01, 0x01, 0x02, 0x03, 0x04, 0x05, 0x05, 0x06, 0x02,
	0x01, 0x02, 0x01, 0x01, 0x01, 0x01, 0x01, 0x02, 0x04, 0x04, 0x02, 0x02,
	0x02, 0x03, 0x02, 0x02, 0x02, 0x01, 0x01, 0x01, 0x02, 0x03, 0x03, 0x03,
	0x04, 0x02, 0x02, 0x04, 0x04, 0x02, 0x04, 0x04, 0x03, 0x04, 0x04, 0x03,
	0x03, 0x03, 0x04, 0x04, 0x04, 0x05, 0x04, 0x05, 0x03, 0x03, 0x03, 0x03,
	0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03,
	0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x02, 0x02, 0x02, 0x02,
	0x01, 0x01, 0x01, 0x02, 0x02, 0x02, 0x04, 0x05, 0x05, 0x04, 0x05, 0x06,
	0x05, 0x03, 0x04, 0x05, 0x05, 0x05, 0x06, 0x04, 0x04, 0x05, 0x05, 0x03,
	0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x02, 0x02, 0x02, 0x02, 0x01,
	0x05, 0x04, 0x01, 0x02, 0x04, 0x01, 0x04, 0x03, 0x04, 0x02, 0x03, 0x03,
	0x03, 0x03, 0x01, 0x01, 0x01, 0x04, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02,
	0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02,
	0x02, 0x02, 0x02, 0x02, 0x04, 0x02, 0x03, 0x03, 0x05, 0x02, 0x01, 0x01,
	0x01, 0x01, 0x02, 0x01, 0x01, 0x02, 0x04, 0x05, 0x04, 0x04, 0x01, 0x02,
	0x02, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01,
	0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x03,
	0x05, 0x07, 0x09, 0x07, 0x09, 0x03, 0x01, 0x03, 0x01, 0x01, 0x01, 0x01,
	0x01, 0x03, 0x07, 0x07, 0x03, 0x03, 0x03, 0x05, 0x03, 0x03, 0x03, 0x01,
	0x01, 0x01, 0x02, 0x05, 0x05, 0x05, 0x07, 0x03, 0x03, 0x07, 0x07, 0x03,
	0x07, 0x07, 0x04, 0x07, 0x07, 0x05, 0x05, 0x05, 0x07, 0x07, 0x07, 0x08,
	0x07, 0x08, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05,
	0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05,
	0x05, 0x05, 0x03, 0x03, 0x03, 0x03, 0x01, 0x01, 0x01, 0x03, 0x03, 0x03,
	0x07, 0x09, 0x09, 0x07, 0x09, 0x0b, 0x09, 0x05, 0x07, 0x09, 0x09, 0x07,
	0x09, 0x06, 0x06, 0x09, 0x09, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05,
	0x05, 0x03, 0x03, 0x03, 0x03, 0x01, 0x07, 0x06, 0x01, 0x03, 0x06, 0x01,
	0x06, 0x05, 0x06, 0x03, 0x05, 0x05, 0x05, 0x05, 0x01, 0x01, 0x01, 0x07,
	0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03,
	0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x07, 0x03,
	0x05, 0x05, 0x09, 0x03, 0x01, 0x01, 0x01, 0x01, 0x03, 0x01, 0x01, 0x03,
	0x07, 0x09, 0x07, 0x07, 0x01, 0x03, 0x03, 0x01, 0x01, 0x01, 0x01, 0x01,
	0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01,
	0x01, 0x01, 0x01, 0x01, 0x01, 0x05, 0x09, 0x0d, 0x11, 0x0b, 0x0f, 0x05,
	0x01, 0x05, 0x01, 0x01, 0x01, 0x01, 0x01, 0x05, 0x0d, 0x0d, 0x05, 0x05,
	0x05, 0x09, 0x05, 0x05, 0x05, 0x01, 0x01, 0x01, 0x02, 0x09, 0x09, 0x09,
	0x0d, 0x05, 0x05, 0x0d, 0x0d, 0x05, 0x0d, 0x0d, 0x06, 0x0d, 0x0d, 0x09,
	0x09, 0x09, 0x0d, 0x0d, 0x0d, 0x0e, 0x0d, 0x0e, 0x09, 0x09, 0x09, 0x09,
	0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x09,
	0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x05, 0x05, 0x05, 0x05,
	0x01, 0x01, 0x01, 0x05, 0x05, 0x05, 0x0d, 0x11, 0x11, 0x0d, 0x11, 0x15,
	0x11, 0x09, 0x0d, 0x11, 0x11, 0x0b, 0x0f, 0x0a, 0x0a, 0x11, 0x11, 0x09,
	0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x09, 0x05, 0x05, 0x05, 0x05, 0x01,
	0x0b, 0x0a, 0x01, 0x05, 0x0a, 0x01, 0x0a, 0x09, 0x0a, 0x05, 0x09, 0x09,
	0x09, 0x09, 0x01, 0x01, 0x01, 0x0d, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05,
	0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05,
	0x05, 0x05, 0x05, 0x05, 0x0d, 0x05, 0x09, 0x09, 0x11, 0x05, 0x01, 0x01,
	0x01, 0x01, 0x05, 0x01, 0x01, 0x05, 0x0d, 0x11, 0x0d, 0x0d, 0x01, 0x05,
	0x05, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01,
	0x01, 0x01, 0x01, 0x01, 0x01, 0x01,
};

static const uint8_t leaf_offsets[23] = {
	0x17, 0x02, 0x04, 0x02, 0x04, 0x04, 0x0b, 0x1b, 0x04, 0x14, 0x0e, 0x08, 0x04, 0x14, 0x0e, 0x08,
	0x04, 0x04, 0x0a, 0x04, 0x76, 0x04, 0x11,
};

static const uint8_t leaf_bytecodes[45] = {
	0x0c, 0xc4, 0x0c, 0xc3, 0x0b, 0x03, 0x6d, 0xf9, 0x00, 0x99, 0x21, 0x0b, 0xf9, 0x46, 0x03, 0x02,
	0x38, 0xfa, 0x01, 0x19, 0xfa, 0xf8, 0xc4, 0x4f, 0x02, 0x04, 0x3f, 0xfa, 0x03, 0x19, 0xfa, 0xf8,
	0xc4, 0x0b, 0xf9, 0x50, 0x05, 0xc3, 0x89, 0x22, 0x00, 0x06, 0x0b, 0xfa, 0xa9,
};

static const uint8_t leaf_positions[26] = {
	0x01, 0x38, 0x02, 0x40, 0x04, 0x48, 0x04, 0x14, 0x05, 0x00, 0x0a, 0x40, 0x05, 0x1c, 0x14, 0x44,
	0x14, 0x87, 0x01, 0x0b, 0x5f, 0x08, 0xa0, 0x02, 0x04, 0x24,
};

static const char leaf_source[] = "function leaf(n) {\n  let s = 0;\n  for (let i = 0; i < n; i++) "
				  "{\n    s += i * 3;\n    s ^= (s >>> 2);\n  }\n  return s;\n}\n";

static void sizes_init(struct sonde_v8_sizes *r)
{
	memset(r, 0, sizeof(*r));
	r->size = sizeof(*r);
	r->version = SONDE_V8_SIZES_VERSION;
	r->n_bytecodes = sizeof(node20_sizes) / 3;
	r->len = sizeof(node20_sizes);
	memcpy(r->sizes, node20_sizes, sizeof(node20_sizes));
}

static void test_baseline_offsets(void **state)
{
	struct sonde_v8_sizes rec;
	struct v8_sizes sz;
	int32_t bo = -7;

	(void)state;
	assert_int_equal(sizeof(struct sonde_v8_baseline), V8_BASELINE_SIZE);
	assert_int_equal(offsetof(struct sonde_v8_baseline, table), V8_BASELINE_HEADER);
	assert_int_equal(offsetof(struct sonde_v8_baseline, bytecodes),
			 V8_BASELINE_HEADER + V8_BASELINE_TABLE);
	assert_int_equal(sizeof(struct sonde_v8_sizes), V8_SIZES_SIZE);
	assert_int_equal(offsetof(struct sonde_v8_sizes, sizes), V8_SIZES_HEADER);
	sizes_init(&rec);
	assert_int_equal(v8_sizes_decode(&rec, sizeof(rec), &sz), 0);
	assert_int_equal(sz.n, 198);
#define BO(pc, exact) \
	v8_baseline_bytecode_offset(&sz, leaf_offsets, sizeof(leaf_offsets), leaf_bytecodes, \
				    sizeof(leaf_bytecodes), pc, exact, &bo)
	/* The prologue (23 bytes): the first bytecode. */
	assert_int_equal(BO(10, 1), 0);
	assert_int_equal(bo, 0);
	assert_int_equal(BO(23, 1), 0);
	assert_int_equal(bo, 0);
	assert_int_equal(BO(25, 1), 0);
	assert_int_equal(bo, 1);
	assert_int_equal(BO(120, 1), 0); /* Mov r0, r2 */
	assert_int_equal(bo, 19);
	assert_int_equal(BO(200, 1), 0); /* JumpLoop: its interrupt check's call */
	assert_int_equal(bo, 38);
	/* 309 ends JumpLoop's code: as a sampled pc the next bytecode's, as a
	 * return address the call's. */
	assert_int_equal(BO(309, 1), 0);
	assert_int_equal(bo, 42);
	assert_int_equal(BO(309, 0), 0);
	assert_int_equal(bo, 38);
	assert_int_equal(BO(329, 1), 0);
	assert_int_equal(bo, 44);
	/* Past the code V8 mapped (330 of 332 bytes), or past what came. */
	assert_int_equal(BO(330, 1), -ENOENT);
	assert_int_equal(v8_baseline_bytecode_offset(&sz, leaf_offsets, 10, leaf_bytecodes,
						     sizeof(leaf_bytecodes), 200, 1, &bo),
			 -ENOENT);
	assert_int_equal(v8_baseline_bytecode_offset(&sz, leaf_offsets, sizeof(leaf_offsets),
						     leaf_bytecodes, 20, 200, 1, &bo),
			 -ENOENT);
	/* A bytecode the lengths do not know, a length of 0. */
	sz.n = 100;
	assert_int_equal(BO(200, 1), -EBADMSG);
	sz.n = 198;
	sz.len[0x0c] = 0;
	assert_int_equal(BO(200, 1), -EBADMSG);
#undef BO
	/* Damaged lengths records. */
	rec.n_bytecodes = 3;
	rec.len = 9;
	assert_int_equal(v8_sizes_decode(&rec, sizeof(rec), &sz), -EBADMSG);
	sizes_init(&rec);
	rec.len = 3;
	assert_int_equal(v8_sizes_decode(&rec, sizeof(rec), &sz), -EBADMSG);
	sizes_init(&rec);
	rec.version = 9;
	assert_int_equal(v8_sizes_decode(&rec, sizeof(rec), &sz), -EBADMSG);
	assert_int_equal(v8_sizes_decode(&rec, 12, &sz), -EBADMSG);
}

/* Operand scale prefixes: Wide (0) and ExtraWide (1) make the bytecode
 * after them longer, and the prefix's offset is the bytecode's. */
static void test_baseline_prefixes(void **state)
{
	/* Ldar a0 (wide), Ldar r1 (extra wide), Return. */
	static const uint8_t bc[] = { 0x00, 0x0b, 0x03, 0x00, 0x01, 0x0b, 0xf9, 0xff, 0xff, 0xff,
				      0xa9 };
	static const uint8_t table[] = { 10, 5, 0x81, 0x01, 7 };
	struct sonde_v8_sizes rec;
	struct v8_sizes sz;
	int32_t bo = -7;

	(void)state;
	sizes_init(&rec);
	assert_int_equal(v8_sizes_decode(&rec, sizeof(rec), &sz), 0);
	assert_int_equal(v8_baseline_bytecode_offset(&sz, table, sizeof(table), bc, sizeof(bc), 12,
						     1, &bo),
			 0);
	assert_int_equal(bo, 0);
	assert_int_equal(v8_baseline_bytecode_offset(&sz, table, sizeof(table), bc, sizeof(bc), 15,
						     1, &bo),
			 0);
	assert_int_equal(bo, 4);
	assert_int_equal(v8_baseline_bytecode_offset(&sz, table, sizeof(table), bc, sizeof(bc), 143,
						     1, &bo),
			 0);
	assert_int_equal(bo, 4);
	assert_int_equal(v8_baseline_bytecode_offset(&sz, table, sizeof(table), bc, sizeof(bc), 144,
						     1, &bo),
			 0);
	assert_int_equal(bo, 10);
	/* A prefix that ends the copy. */
	assert_int_equal(v8_baseline_bytecode_offset(&sz, table, sizeof(table), bc, 4, 144, 1, &bo),
			 -ENOENT);
	/* A VLQ past 32 bits. */
	{
		static const uint8_t huge[] = { 0xff, 0xff, 0xff, 0xff, 0x7f };

		assert_int_equal(v8_baseline_bytecode_offset(&sz, huge, sizeof(huge), bc, sizeof(bc),
							     12, 1, &bo),
				 -EBADMSG);
	}
}

/* A baseline frame of leaf named through the ops table, from the four
 * records BPF sends: the lengths, the Code's offset table and bytecodes,
 * the BytecodeArray's position table, the script's source. */
static void test_baseline_frame(void **state)
{
	struct interp_session *sess = interp_session_new();
	struct sonde_v8_baseline b = { .size = sizeof(b), .version = SONDE_V8_BASELINE_VERSION,
				       .code = 0x3d1659570a79, .bytecode_array = 0x3d16595709a1 };
	struct sonde_v8_code code = { .size = sizeof(code), .version = SONDE_V8_CODE_VERSION,
				      .flags = SONDE_V8_CODE_BYTECODE, .code = 0x3d16595709a1,
				      .sfi = 0x4001, .script = 0x3d165956f559 };
	struct sonde_v8_source src = { .size = sizeof(src), .version = SONDE_V8_SOURCE_VERSION,
				       .script = 0x3d165956f559 };
	struct interp_frame f = { .kind = SONDE_INTERP_V8, .n_words = 2 };
	struct sonde_v8_sizes sz;
	uint64_t key = (0x3d1659570a79ull >> 3) << 32;
	char buf[128];

	(void)state;
	put_meta(sess, 0x4001, "leaf");
	b.table_len = sizeof(leaf_offsets);
	memcpy(b.table, leaf_offsets, sizeof(leaf_offsets));
	b.bytecodes_len = sizeof(leaf_bytecodes);
	memcpy(b.bytecodes, leaf_bytecodes, sizeof(leaf_bytecodes));
	code.table_len = sizeof(leaf_positions);
	memcpy(code.table, leaf_positions, sizeof(leaf_positions));
	src.total = src.len = sizeof(leaf_source) - 1;
	memcpy(src.bytes, leaf_source, sizeof(leaf_source) - 1);
	sizes_init(&sz);
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &b, sizeof(b)), 0);
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &code, sizeof(code)),
			 0);
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &src, sizeof(src)), 0);
	f.words[0] = SONDE_INTERP_JIT_WORD0(1, SONDE_V8_WORD0(0x4001, SONDE_V8_TIER_BASELINE));
	f.words[1] = key | 120;
	/* Without the lengths: no line. */
	interp_session_frame_name(sess, 42, &f, buf, sizeof(buf));
	assert_string_equal(buf, "leaf (/srv/app.js)");
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &sz, sizeof(sz)), 0);
	/* Mov r0, r2 of `s += i * 3` (the position of `i * 3`, line 4). */
	interp_session_frame_name(sess, 42, &f, buf, sizeof(buf));
	assert_string_equal(buf, "leaf (/srv/app.js:4)");
	/* 23, ShiftRightLogicalSmi of `s ^= (s >>> 2)`: line 5; 42, the
	 * Ldar of `return s`: line 7. */
	f.words[1] = key | 128;
	interp_session_frame_name(sess, 42, &f, buf, sizeof(buf));
	assert_string_equal(buf, "leaf (/srv/app.js:5)");
	f.words[1] = key | 310;
	interp_session_frame_name(sess, 42, &f, buf, sizeof(buf));
	assert_string_equal(buf, "leaf (/srv/app.js:7)");
	/* A caller's return address at 309: JumpLoop's call, `for (let i`. */
	f.words[0] = SONDE_INTERP_JIT_WORD0(3, SONDE_V8_WORD0(0x4001, SONDE_V8_TIER_BASELINE));
	f.words[1] = key | 309;
	interp_session_frame_name(sess, 42, &f, buf, sizeof(buf));
	assert_string_equal(buf, "leaf (/srv/app.js:3)");
	/* Not in the Code, another process, damaged records. */
	f.words[1] = key | 0xffffffffu;
	interp_session_frame_name(sess, 42, &f, buf, sizeof(buf));
	assert_string_equal(buf, "leaf (/srv/app.js)");
	f.words[1] = key | 120;
	interp_session_frame_name(sess, 43, &f, buf, sizeof(buf));
	assert_string_equal(buf, V8_UNKNOWN_FRAME);
	b.table_len = V8_BASELINE_TABLE + 1;
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &b, sizeof(b)),
			 -EBADMSG);
	b.table_len = 0;
	b.version = 2;
	assert_int_equal(interp_session_put_record(sess, SONDE_INTERP_V8, 42, &b, sizeof(b)),
			 -EBADMSG);
	interp_session_free(sess);
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
	assert_int_equal(o.code_deopt, 16);
	assert_int_equal(o.deopt_count, 1);
	assert_int_equal(o.deopt_literals, 2);
	assert_int_equal(o.deopt_inlining, 7);
	/* kBytecodeSizes: 198 bytecodes, in .rodata after the builtins. */
	assert_int_equal(o.n_bytecodes, 198);
	assert_true(o.bytecode_sizes > o.blob_size);
	assert_true(d.runtime_offset + o.bytecode_sizes + SONDE_V8_SIZES_MAX <= file_image_size(img));
	/* Data of another size (another layout): no config. */
	d.data_len = 48;
	assert_int_equal(ops->config(&d, &cfg), -EPROTONOSUPPORT);
	d.data_len = sizeof(o);
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
		cmocka_unit_test(test_inline_chain),
		cmocka_unit_test(test_inline_expand),
		cmocka_unit_test(test_baseline_offsets),
		cmocka_unit_test(test_baseline_prefixes),
		cmocka_unit_test(test_baseline_frame),
		cmocka_unit_test(test_loader_node),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
