/* php_func.c - PHP function records from BPF (php_func.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp_records.h"
#include "php_func.h"

int php_func_decode(const void *rec, size_t len, struct php_func *ret)
{
	const uint8_t *p = rec;
	uint16_t nlen, clen, flen;
	uint8_t type;

	if (!rec || len != PHP_META_SIZE || interp_records_le16(p) != PHP_META_SIZE ||
	    p[2] != PHP_META_VERSION)
		return -EBADMSG;
	type = p[3];
	nlen = interp_records_le16(p + 28);
	clen = interp_records_le16(p + 30);
	flen = interp_records_le16(p + 32);
	if ((type != PHP_FUNC_INTERNAL && type != PHP_FUNC_USER && type != PHP_FUNC_EVAL) ||
	    nlen > PHP_META_NAME || clen > PHP_META_CLASS || flen > PHP_META_FILE)
		return -EBADMSG;
	memset(ret, 0, sizeof(*ret));
	ret->type = type;
	ret->fn_flags = interp_records_le32(p + 4);
	ret->addr = interp_records_le64(p + 8);
	ret->checksum = interp_records_le64(p + 16);
	ret->line_start = interp_records_le32(p + 24);
	ret->flags = p[34];
	p += PHP_META_HEADER;
	interp_records_copy_text(ret->name, p, nlen, ret->flags & PHP_META_NAME_CUT, 0);
	p += PHP_META_NAME;
	interp_records_copy_text(ret->class_name, p, clen, ret->flags & PHP_META_CLASS_CUT, 0);
	p += PHP_META_CLASS;
	interp_records_copy_text(ret->file, p, flen, ret->flags & PHP_META_FILE_CUT, 0);
	if (type == PHP_FUNC_INTERNAL && !ret->name[0])
		return -EBADMSG; /* every internal function has a name */
	return 0;
}

size_t php_func_frame_name(const struct php_func *f, uint32_t line, char *buf, size_t len)
{
	const char *name, *sep;
	int n;

	if (!len)
		return 0;
	if (!f) {
		n = snprintf(buf, len, "%s", PHP_UNKNOWN_FRAME);
		goto out;
	}
	name = f->name[0] ? f->name : f->type == PHP_FUNC_EVAL ? "{eval}" : "{main}";
	sep = f->class_name[0] ? "::" : "";
	if (f->type == PHP_FUNC_INTERNAL)
		n = snprintf(buf, len, "%s%s%s", f->class_name, sep, name);
	else if (line && f->file[0])
		n = snprintf(buf, len, "%s%s%s (%s:%u)", f->class_name, sep, name, f->file,
			     (unsigned)line);
	else if (f->file[0])
		n = snprintf(buf, len, "%s%s%s (%s)", f->class_name, sep, name, f->file);
	else
		n = snprintf(buf, len, "%s%s%s", f->class_name, sep, name);
out:
	if (n < 0) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n < len ? (size_t)n : len - 1;
}

static int funcs_decode(const void *rec, size_t len, void *value, struct interp_records_key *key)
{
	struct php_func *f = value;

	if (php_func_decode(rec, len, f) < 0)
		return -EBADMSG;
	key->addr = f->addr;
	key->checksum = f->checksum;
	return 0;
}

struct interp_records *php_funcs_new(void)
{
	return interp_records_new(PHP_FUNCS_MAX, sizeof(struct php_func), funcs_decode);
}

const struct php_func *php_funcs_get(const struct interp_records *t, uint32_t pid, uint64_t addr,
				     uint64_t checksum)
{
	return interp_records_get(t, pid, addr, 0, checksum);
}
