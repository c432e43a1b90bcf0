/* fileserve.c - answers ReadRange. The fd comes from the registry (opened
 * when a process mapped the file); before reading we re-check that it is
 * still the registered file (dev, inode, size, mtime) so a file modified in
 * place is refused rather than served as the old ID. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileserve.h"

int sensor_serve_read_range(struct fileids *f, const struct fileid *id, uint64_t offset,
			    uint32_t length, uint32_t max_read, void **ret_data, size_t *ret_len)
{
	struct fileid_info info;
	struct stat st;
	uint8_t *buf = NULL;
	size_t want, got = 0;
	int fd = -1, r;

	if (max_read == 0 || max_read > FILESERVE_MAX_READ)
		max_read = FILESERVE_MAX_READ;
	if (length == 0 || length > max_read)
		return -EPROTO;
	r = fileids_open(f, id, &fd, &info);
	if (r < 0)
		return r;
	if (offset > info.size) {
		r = -EPROTO;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		r = -EIO;
		goto out;
	}
	if ((uint64_t)st.st_dev != info.dev || (uint64_t)st.st_ino != info.ino ||
	    (uint64_t)st.st_size != info.size || st.st_mtim.tv_sec != info.mtime_sec ||
	    st.st_mtim.tv_nsec != info.mtime_nsec) {
		r = -ESTALE;
		goto out;
	}
	want = length;
	if (want > info.size - offset)
		want = info.size - offset;
	if (want > 0) {
		buf = malloc(want);
		if (!buf) {
			r = -ENOMEM;
			goto out;
		}
	}
	while (got < want) {
		ssize_t n = pread(fd, buf + got, want - got, (off_t)(offset + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = -EIO; /* a short file despite an unchanged size */
			goto out;
		}
		got += n;
	}
	*ret_data = buf;
	*ret_len = got;
	buf = NULL;
	r = 0;
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return r;
}
