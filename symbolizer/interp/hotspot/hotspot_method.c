/* hotspot_method.c - Java method records from BPF (hotspot_method.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotspot_method.h"
#include "interp_records.h"

int hotspot_method_decode(const void *rec, size_t len, struct hotspot_method *ret)
{
	struct sonde_hotspot_method r;

	if (!rec || len != sizeof(r))
		return -EBADMSG;
	memcpy(&r, rec, sizeof(r));
	if (r.size != sizeof(r) || r.version != SONDE_HOTSPOT_METHOD_VERSION ||
	    (r.flags & ~SONDE_HOTSPOT_METHOD_KNOWN) || r.klass_len > sizeof(r.klass) ||
	    r.name_len > sizeof(r.name) || r.sig_len > sizeof(r.sig) ||
	    r.source_len > sizeof(r.source) || r.linetable_len > sizeof(r.linetable) ||
	    !r.name_len)
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->method = r.method;
	ret->const_method = r.const_method;
	ret->code_size = r.code_size;
	ret->flags = r.flags;
	interp_records_copy_text(ret->klass, (const uint8_t *)r.klass, r.klass_len,
				 r.flags & SONDE_HOTSPOT_METHOD_KLASS_CUT,
				 INTERP_RECORDS_TEXT_DOTS);
	interp_records_copy_text(ret->name, (const uint8_t *)r.name, r.name_len,
				 r.flags & SONDE_HOTSPOT_METHOD_NAME_CUT, 0);
	/* A descriptor's ';' ends class names: kept (the system name is no
	 * folded text). */
	interp_records_copy_text(ret->sig, (const uint8_t *)r.sig, r.sig_len,
				 r.flags & SONDE_HOTSPOT_METHOD_SIG_CUT, INTERP_RECORDS_TEXT_SEMIS);
	interp_records_copy_text(ret->source, (const uint8_t *)r.source, r.source_len,
				 r.flags & SONDE_HOTSPOT_METHOD_SOURCE_CUT, 0);
	if (r.flags & SONDE_HOTSPOT_METHOD_HAS_LINES) {
		memcpy(ret->linetable, r.linetable, r.linetable_len);
		ret->linetable_len = r.linetable_len;
	}
	return ret->name[0] ? 0 : -EBADMSG;
}

/* ---- the compressed line number table ---- */

/* CompressedReadStream's numbers (bpf/hotspot.h): bytes below 192 end a
 * number; each further byte adds 6 bits more weight; at most 5 bytes;
 * each byte is its digit plus x (1 from JDK 20, 0 before). */
#define UNSIGNED5_L 192
#define UNSIGNED5_LG_H 6
#define UNSIGNED5_MAX_BYTES 5

static int read_u5(const uint8_t *p, size_t len, unsigned x, size_t *pos, uint32_t *ret)
{
	uint32_t sum = 0;
	unsigned shift = 0;

	for (int i = 0; i < UNSIGNED5_MAX_BYTES; i++) {
		uint32_t b;

		if (*pos >= len)
			return -EBADMSG;
		b = p[(*pos)++];
		if (b < x)
			return -EBADMSG;
		sum += (b - x) << shift;
		if (b < UNSIGNED5_L || i == UNSIGNED5_MAX_BYTES - 1)
			break;
		shift += UNSIGNED5_LG_H;
	}
	*ret = sum;
	return 0;
}

static int read_signed(const uint8_t *p, size_t len, unsigned x, size_t *pos, int32_t *ret)
{
	uint32_t v;

	if (read_u5(p, len, x, pos, &v) < 0)
		return -EBADMSG;
	*ret = (int32_t)((v >> 1) ^ (0u - (v & 1)));
	return 0;
}

int hotspot_line_for_bci(const uint8_t *table, size_t len, bool x1, uint32_t bci, int32_t *line)
{
	uint32_t cur_bci = 0, best_bci = 0;
	int32_t cur_line = 0, best_line = HOTSPOT_NO_LINE;
	size_t pos = 0;

	/* Each pair takes at least one byte: the loop ends within len. */
	while (pos < len) {
		uint8_t next = table[pos++];

		if (!next)
			break;
		if (next == 0xff) {
			int32_t db, dl;

			if (read_signed(table, len, x1, &pos, &db) < 0 ||
			    read_signed(table, len, x1, &pos, &dl) < 0)
				return -EBADMSG;
			cur_bci += (uint32_t)db;
			cur_line = (int32_t)((uint32_t)cur_line + (uint32_t)dl);
		} else {
			cur_bci += next >> 3;
			cur_line = (int32_t)((uint32_t)cur_line + (next & 7u));
		}
		if (cur_bci == bci) {
			*line = cur_line;
			return 0;
		}
		if (cur_bci < bci && cur_bci >= best_bci) {
			best_bci = cur_bci;
			best_line = cur_line;
		}
	}
	if (best_line == HOTSPOT_NO_LINE)
		return -ENOENT;
	*line = best_line;
	return 0;
}

/* ---- names ---- */

static size_t finish(int n, char *buf, size_t len)
{
	if (n < 0) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n < len ? (size_t)n : len - 1;
}

static const char *dot(const struct hotspot_method *m)
{
	return m->klass[0] ? "." : "";
}

size_t hotspot_method_frame_name(const struct hotspot_method *m, uint32_t bci, char *buf,
				 size_t len)
{
	int32_t line = HOTSPOT_NO_LINE;
	int n;

	if (!len)
		return 0;
	if (!m)
		return finish(snprintf(buf, len, "%s", HOTSPOT_UNKNOWN_FRAME), buf, len);
	if (bci == SONDE_HOTSPOT_BCI_UNKNOWN || bci >= m->code_size ||
	    hotspot_line_for_bci(m->linetable, m->linetable_len,
				 m->flags & SONDE_HOTSPOT_METHOD_U5_X1, bci, &line) < 0 ||
	    line < 0)
		line = HOTSPOT_NO_LINE;
	if (m->source[0] && line != HOTSPOT_NO_LINE)
		n = snprintf(buf, len, "%s%s%s (%s:%d)", m->klass, dot(m), m->name, m->source,
			     (int)line);
	else if (m->source[0])
		n = snprintf(buf, len, "%s%s%s (%s)", m->klass, dot(m), m->name, m->source);
	else if (line != HOTSPOT_NO_LINE)
		n = snprintf(buf, len, "%s%s%s (line %d)", m->klass, dot(m), m->name, (int)line);
	else
		n = snprintf(buf, len, "%s%s%s", m->klass, dot(m), m->name);
	return finish(n, buf, len);
}

size_t hotspot_method_system_name(const struct hotspot_method *m, char *buf, size_t len)
{
	if (!len)
		return 0;
	if (!m)
		return finish(snprintf(buf, len, "%s", HOTSPOT_UNKNOWN_FRAME), buf, len);
	return finish(snprintf(buf, len, "%s%s%s%s", m->klass, dot(m), m->name, m->sig), buf, len);
}

static int methods_decode(const void *rec, size_t len, void *value, struct interp_records_key *key)
{
	struct hotspot_method *m = value;

	if (hotspot_method_decode(rec, len, m) < 0)
		return -EBADMSG;
	key->addr = m->method;
	key->checksum = m->const_method;
	return 0;
}

struct interp_records *hotspot_methods_new(void)
{
	return interp_records_new(HOTSPOT_METHODS_MAX, sizeof(struct hotspot_method),
				  methods_decode);
}

const struct hotspot_method *hotspot_methods_get(const struct interp_records *t, uint32_t pid,
						 uint64_t method, uint64_t const_method)
{
	return interp_records_get(t, pid, method, 0, const_method);
}
