/* cpython_lines.c - CPython line tables (see cpython_lines.h). Written from
 * the formats CPython documents (Objects/lnotab_notes.txt for 3.10,
 * InternalDocs/locations.md for 3.11 on) and checked against co_lines() of
 * the interpreter on this machine (tests/integration/test_cpython_lines.py). */
#include <errno.h>

#include "cpython_lines.h"

#define LOC_NONE 15
#define LOC_LONG 14
#define LOC_NO_COLUMNS 13
#define LOC_ONE_LINE0 10
#define LOC_ONE_LINE2 12

/* Lines and offsets beyond these are damage, not code. */
#define MAX_LINE (1ll << 30)
#define MAX_ADDR (1u << 30)

int cpython_lines_begin(struct cpython_lines_iter *it, enum cpython_lines_format format,
			const uint8_t *table, size_t len, int32_t firstlineno)
{
	if ((format != CPYTHON_LINES_310 && format != CPYTHON_LINES_311) ||
	    len > CPYTHON_LINES_MAX_TABLE || (len && !table))
		return -EINVAL;
	it->p = table;
	it->end = table + len;
	it->format = format;
	it->line = firstlineno;
	it->addr = 0;
	return 0;
}

/* An unsigned varint of 6-bit groups, low group first, bit 6 set on all
 * but the last; only continuation bytes (bit 7 clear) may carry it. */
static int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *ret)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	unsigned shift = 0;

	for (;;) {
		if (p >= end || (*p & 0x80) || shift > 36)
			return -EBADMSG;
		v |= (uint64_t)(*p & 63) << shift;
		shift += 6;
		if (!(*p++ & 64))
			break;
	}
	*pp = p;
	*ret = v;
	return 0;
}

static int next_311(struct cpython_lines_iter *it, struct cpython_line_range *r)
{
	const uint8_t *p = it->p;
	uint8_t first = *p++;
	unsigned code = (first >> 3) & 15;
	uint32_t units = (first & 7) + 1;
	int64_t delta = 0;
	uint64_t v;

	if (!(first & 0x80))
		return -EBADMSG; /* an entry must start here */
	if (code == LOC_LONG || code == LOC_NO_COLUMNS) {
		if (read_varint(&p, it->end, &v) < 0)
			return -EBADMSG;
		delta = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
	} else if (code >= LOC_ONE_LINE0 && code <= LOC_ONE_LINE2) {
		delta = code - LOC_ONE_LINE0;
	}
	/* The rest of the entry (columns, end line) is not needed. */
	while (p < it->end && !(*p & 0x80))
		p++;
	it->line += delta;
	if (it->line < -MAX_LINE || it->line > MAX_LINE || it->addr > MAX_ADDR)
		return -EBADMSG;
	r->start = it->addr;
	r->end = it->addr + 2 * units;
	r->line = code == LOC_NONE ? CPYTHON_NO_LINE : (int32_t)it->line;
	it->addr = r->end;
	it->p = p;
	return 1;
}

static int next_310(struct cpython_lines_iter *it, struct cpython_line_range *r)
{
	int8_t ldelta;

	if (it->end - it->p < 2)
		return -EBADMSG;
	r->start = it->addr;
	r->end = it->addr + it->p[0];
	ldelta = (int8_t)it->p[1];
	it->p += 2;
	if (ldelta == -128) {
		r->line = CPYTHON_NO_LINE;
	} else {
		it->line += ldelta;
		if (it->line < -MAX_LINE || it->line > MAX_LINE)
			return -EBADMSG;
		r->line = (int32_t)it->line;
	}
	if (r->end > MAX_ADDR)
		return -EBADMSG;
	it->addr = r->end;
	return 1;
}

int cpython_lines_next(struct cpython_lines_iter *it, struct cpython_line_range *r)
{
	if (it->p >= it->end)
		return 0;
	return it->format == CPYTHON_LINES_311 ? next_311(it, r) : next_310(it, r);
}

int cpython_addr2line(enum cpython_lines_format format, const uint8_t *table, size_t len,
		      int32_t firstlineno, uint32_t offset, int32_t *ret_line)
{
	struct cpython_lines_iter it;
	struct cpython_line_range r;
	int rc;

	rc = cpython_lines_begin(&it, format, table, len, firstlineno);
	if (rc < 0)
		return rc;
	while ((rc = cpython_lines_next(&it, &r)) > 0) {
		/* 3.10 has zero-length ranges that only move the line. */
		if (offset >= r.start && offset < r.end) {
			*ret_line = r.line;
			return 0;
		}
	}
	return rc < 0 ? rc : -ENOENT;
}
