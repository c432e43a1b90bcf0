/* maps.c - parses /proc/PID/maps lines field by field: hex numbers through
 * the strict parser, the path as the rest of the line. */
#include <errno.h>
#include <string.h>

#include "maps.h"
#include "parse.h"

/* Reads a token of at most max bytes that ends at stop (not included) and
 * parses it in base. Advances *pos past the stop character. */
static int take_number(const char *s, size_t len, size_t *pos, char stop, int base,
		       size_t max, uint64_t *ret)
{
	size_t i = *pos, start = *pos;
	int r;

	while (i < len && s[i] != stop)
		i++;
	if (i >= len || i == start || i - start > max)
		return -EINVAL;
	r = parse_u64_n(s + start, i - start, base, ret);
	if (r < 0)
		return -EINVAL;
	*pos = i + 1;
	return 0;
}

int maps_parse_line(const char *line, size_t len, struct maps_line *ret)
{
	static const char deleted[] = " (deleted)";
	const size_t deleted_len = sizeof(deleted) - 1;
	struct maps_line l = {0};
	uint64_t major, minor;
	size_t pos = 0, plen;
	const char *p;

	if (len > 0 && line[len - 1] == '\n')
		len--;
	if (take_number(line, len, &pos, '-', 16, 16, &l.start) < 0 ||
	    take_number(line, len, &pos, ' ', 16, 16, &l.end) < 0)
		return -EINVAL;
	if (l.end < l.start)
		return -EINVAL;
	if (pos + 5 > len || line[pos + 4] != ' ')
		return -EINVAL;
	p = line + pos;
	if ((p[0] != 'r' && p[0] != '-') || (p[1] != 'w' && p[1] != '-') ||
	    (p[2] != 'x' && p[2] != '-') || (p[3] != 'p' && p[3] != 's'))
		return -EINVAL;
	l.readable = p[0] == 'r';
	l.writable = p[1] == 'w';
	l.executable = p[2] == 'x';
	l.shared = p[3] == 's';
	pos += 5;
	if (take_number(line, len, &pos, ' ', 16, 16, &l.offset) < 0 ||
	    take_number(line, len, &pos, ':', 16, 8, &major) < 0 ||
	    take_number(line, len, &pos, ' ', 16, 8, &minor) < 0)
		return -EINVAL;
	if (major > UINT32_MAX || minor > UINT32_MAX)
		return -EINVAL;
	l.dev_major = (uint32_t)major;
	l.dev_minor = (uint32_t)minor;
	/* The inode is the last field when there is no path. */
	{
		size_t i = pos;

		while (i < len && line[i] != ' ')
			i++;
		if (i == pos || i - pos > 20 ||
		    parse_u64_n(line + pos, i - pos, 10, &l.inode) < 0)
			return -EINVAL;
		pos = i;
	}
	/* Padding spaces, then the path (which may itself contain spaces). */
	while (pos < len && line[pos] == ' ')
		pos++;
	plen = len - pos;
	if (plen >= deleted_len && l.inode != 0 &&
	    memcmp(line + len - deleted_len, deleted, deleted_len) == 0) {
		l.deleted = true;
		plen -= deleted_len;
	}
	if (plen >= MAPS_PATH_MAX)
		return -ENAMETOOLONG;
	if (memchr(line + pos, '\0', plen))
		return -EINVAL;
	memcpy(l.path, line + pos, plen);
	l.path[plen] = '\0';
	*ret = l;
	return 0;
}

bool maps_line_is_exec_file(const struct maps_line *l)
{
	return l->executable && l->path[0] == '/';
}

int proc_parse_stat(const char *text, size_t len, uint32_t *ret_ppid, uint64_t *ret_start)
{
	uint64_t ppid = 0, start = 0;
	size_t pos, field = 2; /* the ')' ends field 2 */
	const char *close = NULL;

	for (size_t i = 0; i < len; i++)
		if (text[i] == ')')
			close = text + i;
	if (!close)
		return -EINVAL;
	pos = (size_t)(close - text) + 1;
	while (pos < len && field < 22) {
		size_t end;

		if (text[pos] != ' ')
			return -EINVAL;
		pos++;
		field++;
		end = pos;
		while (end < len && text[end] != ' ' && text[end] != '\n')
			end++;
		if (end == pos)
			return -EINVAL;
		if (field == 4 && parse_u64_n(text + pos, end - pos, 10, &ppid) < 0)
			return -EINVAL;
		if (field == 22 && parse_u64_n(text + pos, end - pos, 10, &start) < 0)
			return -EINVAL;
		pos = end;
	}
	if (field != 22 || ppid > UINT32_MAX)
		return -EINVAL;
	*ret_ppid = (uint32_t)ppid;
	*ret_start = start;
	return 0;
}

/* The four ids of the line starting with key ("Uid:" or "Gid:"), and
 * whether they are all equal. */
static int status_ids(const char *text, size_t len, const char *key, uint32_t *ret_id)
{
	uint64_t ids[4];
	size_t pos = 0;

	/* Lines are "Name:\tvalue"; the Uid: line comes after Name: and
	 * State:, whose values (the comm) a target chose: match at line
	 * starts only. The comm is escaped by the kernel (no newline). */
	while (pos < len && !(len - pos >= 4 && memcmp(text + pos, key, 4) == 0 &&
			      (pos == 0 || text[pos - 1] == '\n'))) {
		const char *nl = memchr(text + pos, '\n', len - pos);

		if (!nl)
			return -EINVAL;
		pos = (size_t)(nl - text) + 1;
	}
	if (pos >= len)
		return -EINVAL;
	pos += 4;
	for (int k = 0; k < 4; k++) {
		size_t end;

		if (pos >= len || text[pos] != '\t')
			return -EINVAL;
		pos++;
		end = pos;
		while (end < len && text[end] >= '0' && text[end] <= '9')
			end++;
		if (parse_u64_n(text + pos, end - pos, 10, &ids[k]) < 0 || ids[k] > UINT32_MAX)
			return -EINVAL;
		pos = end;
	}
	if (pos < len && text[pos] != '\n')
		return -EINVAL;
	*ret_id = ids[0] == ids[1] && ids[1] == ids[2] && ids[2] == ids[3] ? (uint32_t)ids[0]
									 : UINT32_MAX;
	return 0;
}

int proc_parse_status_uid(const char *text, size_t len, uint32_t *ret_uid)
{
	uint32_t uid, gid;

	if (status_ids(text, len, "Uid:", &uid) < 0 || status_ids(text, len, "Gid:", &gid) < 0)
		return -EINVAL;
	/* A uid or gid change under way (setuid, setgid): root's. */
	*ret_uid = uid == UINT32_MAX || gid == UINT32_MAX ? 0 : uid;
	return 0;
}
