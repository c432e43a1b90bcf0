/* v8_lines.c - line numbers of V8 frames (v8_lines.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "v8_lines.h"

/* One zigzag VLQ at table[*i]; false at the end or past 64 bits. */
static bool vlq(const uint8_t *table, size_t len, size_t *i, int64_t *ret)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t b;

		if (*i >= len)
			return false;
		b = table[(*i)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*ret = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
			return true;
		}
	}
	return false;
}

int v8_table_lookup(const uint8_t *table, size_t len, uint32_t pc_off, int32_t *ret_offset,
		    int32_t *ret_inlined)
{
	/* V8 starts both at the function entry's "bytecode offset", -1 (an
	 * entry there is the function's own position). */
	int64_t code = -1, pos = 0, best = -1;
	bool damaged = false;
	size_t i = 0;

	while (i < len) {
		int64_t d, p;

		if (!vlq(table, len, &i, &d) || !vlq(table, len, &i, &p) ||
		    d < -(int64_t)UINT32_MAX - 1 || d > UINT32_MAX) {
			damaged = true;
			break;
		}
		code += d >= 0 ? d : -d - 1;
		pos = (int64_t)((uint64_t)pos + (uint64_t)p); /* wraps on garbage, no UB */
		if (code < -1 || code > UINT32_MAX) {
			damaged = true;
			break;
		}
		if (code > pc_off)
			break;
		best = pos;
		/* SourcePosition: bit 0 external (no script offset), bits
		 * 1-30 the script offset + 1, bits 31-46 the inlining id + 1. */
		*ret_offset = (int32_t)((best >> 1) & 0x3fffffff) - 1;
		*ret_inlined = (int32_t)((best >> 31) & 0xffff) - 1;
		if (best & 1)
			best = -1;
	}
	if (best < 0)
		return damaged ? -EBADMSG : -ENOENT;
	return *ret_offset >= 0 ? 0 : -ENOENT;
}

int v8_source_line(const uint8_t *src, size_t have, uint32_t offset, int32_t *ret_line)
{
	int32_t line = 1;

	if (offset > have)
		return -ENOENT;
	for (size_t i = 0; i < offset; i++)
		line += src[i] == '\n';
	*ret_line = line;
	return 0;
}

/* ---- the tables ---- */

struct code {
	uint32_t pid;
	uint32_t key; /* (address >> 3) & 0xffffffff, as frames carry it */
	uint64_t script;
	uint16_t table_len;
	uint8_t table[V8_CODE_TABLE];
};

struct source {
	uint32_t pid;
	uint64_t script;
	uint32_t total;   /* bytes of the source copied (capped by BPF) */
	uint32_t chunks;  /* bit i: chunk i arrived */
	uint8_t *bytes;   /* total bytes */
};

#define SLOTS (V8_LINES_MAX * 2)

struct v8_lines {
	struct code **codes;
	struct source **sources;
	size_t n_codes, n_sources;
};

static size_t hash(uint32_t pid, uint64_t key)
{
	return (size_t)(((key ^ (uint64_t)pid << 40) * 0x9e3779b97f4a7c15ULL) >> 32) & (SLOTS - 1);
}

struct v8_lines *v8_lines_new(void)
{
	struct v8_lines *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->codes = calloc(SLOTS, sizeof(*t->codes));
	t->sources = calloc(SLOTS, sizeof(*t->sources));
	if (!t->codes || !t->sources) {
		v8_lines_free(t);
		return NULL;
	}
	return t;
}

static void clear_codes(struct v8_lines *t)
{
	for (size_t i = 0; i < SLOTS; i++) {
		free(t->codes[i]);
		t->codes[i] = NULL;
	}
	t->n_codes = 0;
}

static void clear_sources(struct v8_lines *t)
{
	for (size_t i = 0; i < SLOTS; i++) {
		if (t->sources[i])
			free(t->sources[i]->bytes);
		free(t->sources[i]);
		t->sources[i] = NULL;
	}
	t->n_sources = 0;
}

void v8_lines_free(struct v8_lines *t)
{
	if (!t)
		return;
	if (t->codes)
		clear_codes(t);
	if (t->sources)
		clear_sources(t);
	free(t->codes);
	free(t->sources);
	free(t);
}

static struct code **find_code(const struct v8_lines *t, uint32_t pid, uint32_t key)
{
	for (size_t i = hash(pid, key);; i = (i + 1) & (SLOTS - 1)) {
		struct code **c = &t->codes[i];

		if (!*c || ((*c)->pid == pid && (*c)->key == key))
			return c;
	}
}

static struct source **find_source(const struct v8_lines *t, uint32_t pid, uint64_t script)
{
	for (size_t i = hash(pid, script);; i = (i + 1) & (SLOTS - 1)) {
		struct source **s = &t->sources[i];

		if (!*s || ((*s)->pid == pid && (*s)->script == script))
			return s;
	}
}

static int put_code(struct v8_lines *t, uint32_t pid, const uint8_t *p)
{
	uint16_t tlen = interp_records_le16(p + 4);
	struct code *c, **slot;

	if (p[2] != V8_CODE_VERSION || tlen > V8_CODE_TABLE)
		return -EBADMSG;
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->pid = pid;
	c->key = (uint32_t)(interp_records_le64(p + 8) >> 3);
	c->script = interp_records_le64(p + 24);
	c->table_len = tlen;
	memcpy(c->table, p + V8_CODE_HEADER, tlen);
	slot = find_code(t, pid, c->key);
	if (*slot) {
		free(*slot);
	} else {
		if (t->n_codes == V8_LINES_MAX) {
			clear_codes(t);
			slot = find_code(t, pid, c->key);
		}
		t->n_codes++;
	}
	*slot = c;
	return 0;
}

static int put_source(struct v8_lines *t, uint32_t pid, const uint8_t *p)
{
	uint8_t index = p[3];
	uint16_t len = interp_records_le16(p + 4);
	uint32_t total = interp_records_le32(p + 8);
	uint64_t script = interp_records_le64(p + 16);
	struct source *s, **slot;
	size_t off = (size_t)index * V8_SOURCE_CHUNK;

	if (p[2] != V8_SOURCE_VERSION || index >= V8_SOURCE_CHUNKS || len > V8_SOURCE_CHUNK ||
	    total > V8_SOURCE_CHUNK * V8_SOURCE_CHUNKS || off + len > total)
		return -EBADMSG;
	slot = find_source(t, pid, script);
	s = *slot;
	if (s && s->total != total) {
		/* Another source at the same address: start again. */
		free(s->bytes);
		s->bytes = NULL;
	}
	if (!s) {
		if (t->n_sources == V8_LINES_MAX) {
			clear_sources(t);
			slot = find_source(t, pid, script);
		}
		s = calloc(1, sizeof(*s));
		if (!s)
			return -ENOMEM;
		*slot = s;
		t->n_sources++;
	}
	if (!s->bytes) {
		s->bytes = calloc(1, total ? total : 1);
		if (!s->bytes)
			return -ENOMEM;
		s->pid = pid;
		s->script = script;
		s->total = total;
		s->chunks = 0;
	}
	memcpy(s->bytes + off, p + V8_SOURCE_HEADER, len);
	if (len == V8_SOURCE_CHUNK || off + len == total)
		s->chunks |= 1u << index;
	return 0;
}

int v8_lines_put(struct v8_lines *t, uint32_t pid, const void *rec, size_t len)
{
	const uint8_t *p = rec;

	if (!rec || len < 4 || interp_records_le16(p) != len)
		return -ENOENT;
	if (len == V8_CODE_SIZE)
		return put_code(t, pid, p);
	if (len == V8_SOURCE_SIZE)
		return put_source(t, pid, p);
	return -ENOENT;
}

/* How many bytes from the source's start arrived without a gap. */
static size_t source_have(const struct source *s)
{
	size_t have = 0;

	for (uint32_t i = 0; i < V8_SOURCE_CHUNKS && (s->chunks & (1u << i)); i++)
		have = (size_t)(i + 1) * V8_SOURCE_CHUNK;
	return have < s->total ? have : s->total;
}

int v8_lines_position(const struct v8_lines *t, uint32_t pid, uint64_t word1, int exact,
		      int32_t *ret_offset, int32_t *ret_inlined, uint64_t *ret_script)
{
	uint32_t pc = (uint32_t)word1, key = (uint32_t)(word1 >> 32);
	const struct code *c;
	int32_t offset, inlined;

	if (!t || pc == 0xffffffffu)
		return -ENOENT;
	c = *find_code(t, pid, key);
	if (!c)
		return -ENOENT;
	/* A return address is just past its call. */
	if (!exact && pc > 0)
		pc--;
	if (v8_table_lookup(c->table, c->table_len, pc, &offset, &inlined) < 0)
		return -ENOENT;
	*ret_offset = offset;
	*ret_inlined = inlined;
	*ret_script = c->script;
	return 0;
}

int v8_lines_script_line(const struct v8_lines *t, uint32_t pid, uint64_t script,
			 int32_t offset, int32_t *ret_line)
{
	const struct source *s;

	if (!t || offset < 0)
		return -ENOENT;
	s = *find_source(t, pid, script);
	if (!s || !s->bytes)
		return -ENOENT;
	return v8_source_line(s->bytes, source_have(s), (uint32_t)offset, ret_line);
}

int v8_lines_line(const struct v8_lines *t, uint32_t pid, uint64_t word1, int exact,
		  int32_t *ret_line)
{
	int32_t offset, inlined;
	uint64_t script;

	if (v8_lines_position(t, pid, word1, exact, &offset, &inlined, &script) < 0)
		return -ENOENT;
	return v8_lines_script_line(t, pid, script, offset, ret_line);
}
