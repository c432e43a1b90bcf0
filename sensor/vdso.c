/* vdso.c - the sensor's vDSO, copied into a sealed memfd and registered
 * (see vdso.h). Runs once, before privileges are dropped (memfd_create is
 * not in the seccomp allow-list). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "maps.h"
#include "vdso.h"

#define VDSO_MAX_SIZE (1u << 20)

/* The size of our own [vdso] mapping at base, from /proc/self/maps. */
static int own_vdso_size(uint64_t base, uint64_t *ret)
{
	char line[512];
	struct maps_line l;
	FILE *f = fopen("/proc/self/maps", "re");
	int r = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (maps_parse_line(line, strlen(line), &l) == 0 && l.start == base &&
		    strcmp(l.path, "[vdso]") == 0) {
			*ret = l.end - l.start;
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

int vdso_register(struct fileids *f, struct fileid_entry **ret_entry, struct fileid_info *ret_info)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR), size = 0, done = 0;
	struct stat st;
	int fd = -1, r;

	if (!base)
		return -ENOENT;
	r = own_vdso_size(base, &size);
	if (r < 0)
		return r;
	if (size == 0 || size > VDSO_MAX_SIZE)
		return -EFBIG;
	fd = memfd_create("sonde-vdso", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	while (done < size) {
		ssize_t n = write(fd, (const char *)(uintptr_t)base + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			goto out;
		}
		done += (uint64_t)n;
	}
	/* Sealed, the registry's dev/inode/size/mtime check always holds. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		r = -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	r = fileids_register(f, fd, st.st_dev, st.st_ino, ret_entry, ret_info);
	if (r == 0) {
		/* Mapped into every process by the kernel: anyone may read it,
		 * whatever mode the memfd copy has. */
		ret_info->mode = 0444;
		ret_info->uid = ret_info->gid = 0;
	}
out:
	close(fd);
	return r;
}

bool vdso_matches(const struct fileid_info *vdso, uint64_t start, uint64_t end, uint64_t offset,
		  const char *path)
{
	return strcmp(path, "[vdso]") == 0 && offset == 0 && end - start == vdso->size &&
	       start >= (1ull << 32);
}
