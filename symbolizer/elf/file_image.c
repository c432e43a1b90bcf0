/* file_image.c - sparse in-memory copies of files (see file_image.h).
 *
 * A remote image is one anonymous private mapping of the file's size with
 * MAP_NORESERVE: untouched pages cost no memory and read as zeros, so a
 * 500 MB library of which we fetch 200 KB costs about 200 KB. The ranges
 * that have arrived are kept as a sorted list of disjoint, non-adjacent
 * intervals, so "has this range arrived" is one binary search.
 *
 * A local image (file_image_open, file_image_map_sealed) maps the file
 * copy-on-write; all of it is present.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_image.h"

struct file_range {
	uint64_t start;
	uint64_t end; /* exclusive */
};

struct file_image {
	uint8_t *data;
	uint64_t size;
	size_t map_len;
	bool writable; /* anonymous image that file_image_put may fill */
	struct file_range *ranges;
	size_t n_ranges;
	size_t cap_ranges;
	uint64_t present;
};

static struct file_image *file_image_alloc(uint64_t size)
{
	struct file_image *img;
	long page = sysconf(_SC_PAGESIZE);

	if (size == 0 || size > FILE_IMAGE_MAX_SIZE || page <= 0)
		return NULL;
	img = calloc(1, sizeof(*img));
	if (!img)
		return NULL;
	img->size = size;
	img->map_len = (size_t)((size + (uint64_t)page - 1) & ~((uint64_t)page - 1));
	return img;
}

struct file_image *file_image_new(uint64_t size)
{
	struct file_image *img = file_image_alloc(size);
	void *p;

	if (!img)
		return NULL;
	p = mmap(NULL, img->map_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(img);
		return NULL;
	}
	img->data = p;
	img->writable = true;
	return img;
}

/* Maps all of fd (a regular file, borrowed) as a present image. */
static struct file_image *map_whole(int fd)
{
	struct file_image *img = NULL;
	struct stat st;
	void *p;
	int err;

	if (fstat(fd, &st) < 0) {
		err = errno;
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		err = EINVAL;
		goto cleanup;
	}
	if (st.st_size <= 0 || (uint64_t)st.st_size > FILE_IMAGE_MAX_SIZE) {
		err = EFBIG;
		goto cleanup;
	}
	img = file_image_alloc((uint64_t)st.st_size);
	if (!img) {
		err = ENOMEM;
		goto cleanup;
	}
	img->ranges = malloc(sizeof(*img->ranges));
	if (!img->ranges) {
		err = ENOMEM;
		goto cleanup;
	}
	/* Private, writable copy-on-write: libelf rewrites the section
	 * headers of compressed debug sections in its buffer when libdw
	 * decompresses them; nothing reaches the file. */
	p = mmap(NULL, img->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		err = errno;
		goto cleanup;
	}
	img->data = p;
	img->ranges[0] = (struct file_range){ 0, img->size };
	img->n_ranges = 1;
	img->cap_ranges = 1;
	img->present = img->size;
	err = 0;
cleanup:
	if (err) {
		file_image_free(img);
		errno = err;
		return NULL;
	}
	return img;
}

struct file_image *file_image_open(const char *path)
{
	struct file_image *img;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return NULL;
	/* A debug file in a configured directory is trusted not to be
	 * truncated under us (that would be SIGBUS). */
	img = map_whole(fd);
	err = errno;
	close(fd);
	errno = err;
	return img;
}

struct file_image *file_image_map_sealed(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	/* Only a memfd that cannot shrink cannot SIGBUS us; one that cannot
	 * be written keeps the bytes whose ID was checked. */
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_WRITE)) != (F_SEAL_SHRINK | F_SEAL_WRITE)) {
		errno = EPERM;
		return NULL;
	}
	return map_whole(fd);
}

void file_image_free(struct file_image *img)
{
	if (!img)
		return;
	if (img->data)
		munmap(img->data, img->map_len);
	free(img->ranges);
	free(img);
}

uint64_t file_image_size(const struct file_image *img)
{
	return img->size;
}

const uint8_t *file_image_data(const struct file_image *img)
{
	return img->data;
}

uint64_t file_image_bytes_present(const struct file_image *img)
{
	return img->present;
}

/* Index of the first range whose end is >= off (n_ranges if none). Ranges
 * are disjoint and sorted, so their ends are sorted too. */
static size_t file_image_find(const struct file_image *img, uint64_t off)
{
	size_t lo = 0, hi = img->n_ranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (img->ranges[mid].end < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool file_image_has(const struct file_image *img, uint64_t off, uint64_t len)
{
	size_t i;

	if (off > img->size || len > img->size - off)
		return false;
	if (len == 0)
		return true;
	i = file_image_find(img, off + 1);
	return i < img->n_ranges && img->ranges[i].start <= off && img->ranges[i].end >= off + len;
}

/* Records [start, end) as present, merging with every range it overlaps or
 * touches. */
static int file_image_mark(struct file_image *img, uint64_t start, uint64_t end)
{
	size_t first = file_image_find(img, start);
	size_t last = first;
	uint64_t covered = 0;

	/* Ranges [first, last) overlap or touch [start, end). */
	while (last < img->n_ranges && img->ranges[last].start <= end) {
		covered += img->ranges[last].end - img->ranges[last].start;
		last++;
	}
	if (first == last) {
		if (img->n_ranges == img->cap_ranges) {
			size_t cap = img->cap_ranges ? img->cap_ranges * 2 : 16;
			struct file_range *r = reallocarray(img->ranges, cap, sizeof(*r));

			if (!r)
				return -ENOMEM;
			img->ranges = r;
			img->cap_ranges = cap;
		}
		memmove(img->ranges + first + 1, img->ranges + first,
			(img->n_ranges - first) * sizeof(*img->ranges));
		img->ranges[first] = (struct file_range){ start, end };
		img->n_ranges++;
		img->present += end - start;
		return 0;
	}
	if (img->ranges[first].start < start)
		start = img->ranges[first].start;
	if (img->ranges[last - 1].end > end)
		end = img->ranges[last - 1].end;
	img->ranges[first] = (struct file_range){ start, end };
	memmove(img->ranges + first + 1, img->ranges + last,
		(img->n_ranges - last) * sizeof(*img->ranges));
	img->n_ranges -= last - first - 1;
	img->present += (end - start) - covered;
	return 0;
}

int file_image_put(struct file_image *img, uint64_t off, const void *data, size_t len)
{
	int err;

	if (off > img->size || len > img->size - off)
		return -ERANGE;
	if (!img->writable)
		return -EPERM;
	if (len == 0)
		return 0;
	/* Mark first: if that fails the bytes are simply not recorded. */
	err = file_image_mark(img, off, off + len);
	if (err)
		return err;
	memcpy(img->data + off, data, len);
	return 0;
}
