/* hotspot_method.c - Java method records from BPF (hotspot_method.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotspot_method.h"
#include "utf8.h"

/* Copies n bytes of src as printable UTF-8 (control bytes, invalid
 * sequences, and ';' unless semis, become '?'), '/' as '.' when dots (a
 * class name's package separators). Stops at a NUL. dst has room for
 * n + 4. */
static void copy_printable(char *dst, const char *src, size_t n, bool cut, bool dots, bool semis)
{
	const uint8_t *s = (const uint8_t *)src;
	size_t o = 0;

	for (size_t i = 0; i < n && s[i];) {
		size_t l = utf8_char_len(s + i, n - i);

		if (l == 1 && (s[i] < 0x20 || s[i] == 0x7f || (s[i] == ';' && !semis)))
			l = 0;
		if (!l) {
			dst[o++] = '?';
			i++;
			continue;
		}
		memcpy(dst + o, s + i, l);
		if (dots && l == 1 && s[i] == '/')
			dst[o] = '.';
		o += l;
		i += l;
	}
	if (cut) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o] = '\0';
}

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
	copy_printable(ret->klass, r.klass, r.klass_len, r.flags & SONDE_HOTSPOT_METHOD_KLASS_CUT,
		       true, false);
	copy_printable(ret->name, r.name, r.name_len, r.flags & SONDE_HOTSPOT_METHOD_NAME_CUT,
		       false, false);
	/* A descriptor's ';' ends class names: kept (the system name is no
	 * folded text). */
	copy_printable(ret->sig, r.sig, r.sig_len, r.flags & SONDE_HOTSPOT_METHOD_SIG_CUT, false,
		       true);
	copy_printable(ret->source, r.source, r.source_len,
		       r.flags & SONDE_HOTSPOT_METHOD_SOURCE_CUT, false, false);
	if (r.flags & SONDE_HOTSPOT_METHOD_HAS_LINES) {
		memcpy(ret->linetable, r.linetable, r.linetable_len);
		ret->linetable_len = r.linetable_len;
	}
	return ret->name[0] ? 0 : -EBADMSG;
}

/* ---- the compressed line number table ---- */

/* CompressedReadStream's numbers: bytes below 192 end a number; each
 * further byte adds 6 bits more weight; at most 5 bytes. */
#define UNSIGNED5_L 192
#define UNSIGNED5_LG_H 6
#define UNSIGNED5_MAX_BYTES 5

static int read_u5(const uint8_t *p, size_t len, size_t *pos, uint32_t *ret)
{
	uint32_t sum = 0;
	unsigned shift = 0;

	for (int i = 0; i < UNSIGNED5_MAX_BYTES; i++) {
		uint32_t b;

		if (*pos >= len)
			return -EBADMSG;
		b = p[(*pos)++];
		sum += b << shift;
		if (b < UNSIGNED5_L || i == UNSIGNED5_MAX_BYTES - 1)
			break;
		shift += UNSIGNED5_LG_H;
	}
	*ret = sum;
	return 0;
}

static int read_signed(const uint8_t *p, size_t len, size_t *pos, int32_t *ret)
{
	uint32_t v;

	if (read_u5(p, len, pos, &v) < 0)
		return -EBADMSG;
	*ret = (int32_t)((v >> 1) ^ (0u - (v & 1)));
	return 0;
}

int hotspot_line_for_bci(const uint8_t *table, size_t len, uint32_t bci, int32_t *line)
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

			if (read_signed(table, len, &pos, &db) < 0 ||
			    read_signed(table, len, &pos, &dl) < 0)
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
	    hotspot_line_for_bci(m->linetable, m->linetable_len, bci, &line) < 0 || line < 0)
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

/* ---- the table: open addressing, linear probing ---- */

#define SLOTS (HOTSPOT_METHODS_MAX * 2) /* load factor <= 1/2 */

struct slot {
	uint32_t pid;
	struct hotspot_method *m; /* NULL: empty */
};

struct hotspot_methods {
	struct slot *slots;
	size_t count;
	uint64_t refused;
};

static size_t slot_of(uint32_t pid, uint64_t method)
{
	uint64_t h = (method ^ (uint64_t)pid << 40) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (SLOTS - 1);
}

struct hotspot_methods *hotspot_methods_new(void)
{
	struct hotspot_methods *t = calloc(1, sizeof(*t));

	if (t && !(t->slots = calloc(SLOTS, sizeof(*t->slots)))) {
		free(t);
		t = NULL;
	}
	return t;
}

static void clear(struct hotspot_methods *t)
{
	for (size_t i = 0; i < SLOTS; i++) {
		free(t->slots[i].m);
		t->slots[i].m = NULL;
	}
	t->count = 0;
}

void hotspot_methods_free(struct hotspot_methods *t)
{
	if (!t)
		return;
	clear(t);
	free(t->slots);
	free(t);
}

static struct slot *find(const struct hotspot_methods *t, uint32_t pid, uint64_t method)
{
	/* At most half the slots are used: an empty one ends the probe. */
	for (size_t i = slot_of(pid, method);; i = (i + 1) & (SLOTS - 1)) {
		struct slot *s = &t->slots[i];

		if (!s->m || (s->pid == pid && s->m->method == method))
			return s;
	}
}

int hotspot_methods_put(struct hotspot_methods *t, uint32_t pid, const void *rec, size_t len)
{
	struct hotspot_method *m = malloc(sizeof(*m));
	struct slot *s;

	if (!m)
		return -ENOMEM;
	if (hotspot_method_decode(rec, len, m) < 0) {
		free(m);
		t->refused++;
		return -EBADMSG;
	}
	s = find(t, pid, m->method);
	if (s->m) {
		free(s->m); /* the Method* was reused (class unloading) */
	} else {
		if (t->count == HOTSPOT_METHODS_MAX) {
			clear(t);
			s = find(t, pid, m->method);
		}
		t->count++;
	}
	s->pid = pid;
	s->m = m;
	return 0;
}

const struct hotspot_method *hotspot_methods_get(const struct hotspot_methods *t, uint32_t pid,
						 uint64_t method, uint64_t const_method)
{
	const struct slot *s = find(t, pid, method);

	if (!s->m || (const_method && s->m->const_method != const_method))
		return NULL;
	return s->m;
}

size_t hotspot_methods_count(const struct hotspot_methods *t)
{
	return t->count;
}

uint64_t hotspot_methods_refused(const struct hotspot_methods *t)
{
	return t->refused;
}
