/* unwind_bpf.c - the unwind map writes, with the BPF syscalls. Rows go in
 * with BPF_MAP_UPDATE_BATCH (kernel 5.6+), one element at a time where the
 * kernel refuses batches. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "unwind_bpf.h"

/* 96 KiB per syscall at most: the buffers are the sensor's memory. */
#define UNWIND_BATCH_BYTES (96u << 10)

/* Writes bytes of data into the array map fd from element first on, in
 * elements of size bytes each (the last one zero-padded). */
static int write_buckets(struct unwind_bpf *ub, int fd, uint32_t first, const void *data,
			 size_t bytes, size_t size)
{
	uint32_t per_batch = UNWIND_BATCH_BYTES / size;
	uint32_t n_buckets = bytes / size + (bytes % size != 0);
	uint32_t *keys = NULL, done = 0;
	char *vals = NULL;
	int r = 0;

	keys = malloc(per_batch * sizeof(*keys));
	vals = malloc((size_t)per_batch * size);
	if (!keys || !vals) {
		r = -ENOMEM;
		goto out;
	}
	while (done < n_buckets) {
		uint32_t cnt = n_buckets - done < per_batch ? n_buckets - done : per_batch;
		size_t off = (size_t)done * size;
		size_t len = bytes - off < cnt * size ? bytes - off : cnt * size;

		memset(vals, 0, cnt * size);
		memcpy(vals, (const char *)data + off, len);
		for (uint32_t i = 0; i < cnt; i++)
			keys[i] = first + done + i;
		if (ub->batch >= 0) {
			uint32_t c = cnt;

			if (bpf_map_update_batch(fd, keys, vals, &c, NULL) == 0) {
				ub->batch = 1;
				done += cnt;
				continue;
			}
			r = -errno;
			if (ub->batch == 1 || (r != -EINVAL && r != -ENOTSUP && r != -EOPNOTSUPP))
				goto out;
			ub->batch = -1; /* an old kernel: one element at a time */
			r = 0;
		}
		for (uint32_t i = 0; i < cnt; i++)
			if (bpf_map_update_elem(fd, &keys[i], vals + i * size, BPF_ANY) < 0) {
				r = -errno;
				goto out;
			}
		done += cnt;
	}
out:
	free(keys);
	free(vals);
	return r;
}

/* After a write that reached the kernel (or may have): the BPF rule
 * cache's entries from before are stale. */
static int bump_gen(struct unwind_bpf *ub, int r)
{
	if (ub->gen)
		__atomic_add_fetch(ub->gen, 1, __ATOMIC_RELEASE);
	return r;
}

/* first is bucket-aligned (unwind_maps.c places tables so). */
static int bpf_rows_write(void *ctx, uint32_t first, const struct sonde_unwind_row *rows,
			  uint32_t n)
{
	if (first % SONDE_UNWIND_ROWS_PER_BUCKET)
		return -EINVAL;
	return bump_gen(ctx, write_buckets(ctx, ((struct unwind_bpf *)ctx)->rows_fd,
					   first / SONDE_UNWIND_ROWS_PER_BUCKET, rows,
					   (size_t)n * sizeof(*rows),
					   sizeof(struct sonde_unwind_bucket)));
}

static int bpf_index_write(void *ctx, uint32_t first, const uint32_t *idx, uint32_t n)
{
	if (first % SONDE_UNWIND_INDEX_PER_BUCKET)
		return -EINVAL;
	return bump_gen(ctx, write_buckets(ctx, ((struct unwind_bpf *)ctx)->index_fd,
					   first / SONDE_UNWIND_INDEX_PER_BUCKET, idx,
					   (size_t)n * sizeof(*idx),
					   sizeof(struct sonde_unwind_index_bucket)));
}

static int bpf_lpm_update(void *ctx, const struct sonde_unwind_lpm_key *key,
			  const struct sonde_unwind_lpm_value *value)
{
	struct unwind_bpf *ub = ctx;

	return bump_gen(ub, bpf_map_update_elem(ub->lpm_fd, key, value, BPF_ANY) < 0 ? -errno : 0);
}

static int bpf_lpm_delete(void *ctx, const struct sonde_unwind_lpm_key *key)
{
	struct unwind_bpf *ub = ctx;

	return bump_gen(ub, bpf_map_delete_elem(ub->lpm_fd, key) < 0 ? -errno : 0);
}

static bool bpf_file_known(void *ctx, const uint8_t id[UNWIND_FILE_ID_LEN])
{
	struct unwind_bpf *ub = ctx;
	struct fileid fid;

	memcpy(fid.bytes, id, FILEID_LEN);
	return fileids_contains(ub->fileids, &fid);
}

const struct unwind_map_ops unwind_bpf_ops = {
	.rows_write = bpf_rows_write,
	.index_write = bpf_index_write,
	.lpm_update = bpf_lpm_update,
	.lpm_delete = bpf_lpm_delete,
	.file_known = bpf_file_known,
};

uint64_t unwind_bpf_map_memlock(int map_fd)
{
	char path[64], line[256];
	uint64_t v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", map_fd);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "memlock: %" SCNu64, &v) == 1)
			break;
	fclose(f);
	return v;
}
