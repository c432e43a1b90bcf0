/* debug.c - finds the separate debug file of an ELF file under the
 * configured debug directories (see elf_find_debug_file in
 * elf_analysis.h).
 *
 * Two layouts, in this order for each directory:
 *   DIR/.build-id/xx/yyyy.debug   xx = first build-ID byte in hex, yyyy
 *                                 the rest (what debuginfod and distro
 *                                 -dbg packages install);
 *   DIR/NAME                      NAME from .gnu_debuglink, accepted only
 *                                 if the CRC-32 of the whole file matches.
 * The debuglink name comes from the analysed (untrusted) file, so it must
 * be a plain file name: no '/', no "..", so the path stays under DIR.
 *
 * Also the DWZ "alternate" file that a debug file's .gnu_debugaltlink
 * names (dwz -m moves what several debug files share into one; Debian's
 * -dbgsym packages use it): by its build ID as above, then by the name
 * the link holds when that is an absolute path inside a configured
 * directory (Debian: /usr/lib/debug/.dwz/<triplet>/<package>.debug). The
 * reader of the DWARF checks the file's build ID against the link's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>
#include <zlib.h>

#include "elf_analysis.h"
#include "elf_section.h"
#include "symtab_build.h"

/* Whether path names a regular file we can open. */
static bool is_regular_file(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	bool ok;

	if (fd < 0)
		return false;
	ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	close(fd);
	return ok;
}

/* 0 and the CRC-32 of the whole file, or a negative errno. */
static int file_crc32(const char *path, uint32_t *ret_crc)
{
	unsigned char buf[64 * 1024];
	uLong crc = crc32(0L, Z_NULL, 0);
	struct stat st;
	int fd = -1;
	int err;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		err = -errno;
		goto cleanup;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto cleanup;
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			goto cleanup;
		}
		if (n == 0)
			break;
		crc = crc32(crc, buf, (uInt)n);
	}
	*ret_crc = (uint32_t)crc;
	err = 0;
cleanup:
	if (fd >= 0)
		close(fd);
	return err;
}

static bool debuglink_name_ok(const char *name)
{
	size_t len = strlen(name);

	return len > 0 && len <= SYMTAB_MAX_DEBUGLINK && !strchr(name, '/') && !strstr(name, "..");
}

static char *build_id_path(const char *dir, const uint8_t *id, size_t len)
{
	/* ".build-id/" + 2 + "/" + 2*(len-1) + ".debug" */
	char hex[2 * SYMTAB_MAX_BUILD_ID + 2];
	char *path = NULL;
	size_t k = 0;

	for (size_t i = 0; i < len; i++) {
		k += (size_t)snprintf(hex + k, sizeof(hex) - k, "%02x", id[i]);
		if (i == 0)
			hex[k++] = '/';
	}
	hex[k] = '\0';
	if (asprintf(&path, "%s/.build-id/%s.debug", dir, hex) < 0)
		return NULL;
	return path;
}

char *elf_find_debug_file(const char *const *dirs, const uint8_t *build_id, size_t build_id_len,
			  const char *debuglink, uint32_t debuglink_crc)
{
	char *path = NULL;

	if (!dirs)
		return NULL;
	/* Two bytes at least: one for the directory, one for the file. */
	if (build_id && build_id_len >= 2 && build_id_len <= SYMTAB_MAX_BUILD_ID) {
		for (size_t d = 0; dirs[d]; d++) {
			if (!dirs[d][0])
				continue;
			path = build_id_path(dirs[d], build_id, build_id_len);
			if (!path)
				return NULL;
			if (is_regular_file(path))
				return path;
			free(path);
			path = NULL;
		}
	}
	if (debuglink && debuglink_name_ok(debuglink)) {
		for (size_t d = 0; dirs[d]; d++) {
			uint32_t crc;

			if (!dirs[d][0])
				continue;
			if (asprintf(&path, "%s/%s", dirs[d], debuglink) < 0)
				return NULL;
			if (file_crc32(path, &crc) == 0 && crc == debuglink_crc)
				return path;
			free(path);
			path = NULL;
		}
	}
	return NULL;
}

/* Whether the untrusted name is an absolute path inside dir: dir + '/' +
 * a rest with no "." or ".." component and no empty one. */
static bool alt_name_inside(const char *name, const char *dir)
{
	size_t n = strlen(dir);
	const char *p;

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (name[0] != '/' || strncmp(name, dir, n) != 0 || name[n] != '/')
		return false;
	for (p = name + n; *p; ) {
		const char *seg = p + 1, *end = strchr(seg, '/');
		size_t len = end ? (size_t)(end - seg) : strlen(seg);

		if (len == 0 || (len == 1 && seg[0] == '.') || (len == 2 && !strncmp(seg, "..", 2)))
			return false;
		p = seg + len;
	}
	return true;
}

char *elf_find_alt_file(const char *const *dirs, void *data, size_t size)
{
	Elf *e = NULL;
	Elf_Scn *scn;
	GElf_Shdr sh;
	Elf_Data *d;
	const char *name;
	size_t name_len;
	char *path = NULL;

	if (!dirs || !data)
		return NULL;
	/* libelf converts other byte orders in place: native files only, the
	 * image is read again by the index builder. */
	if (size < EI_NIDENT || memcmp(data, ELFMAG, SELFMAG) != 0 ||
	    ((const uint8_t *)data)[EI_CLASS] != ELFCLASS64 ||
	    ((const uint8_t *)data)[EI_DATA] != ELFDATA2LSB)
		return NULL;
	elf_version(EV_CURRENT);
	e = elf_memory(data, size);
	if (!e || elf_kind(e) != ELF_K_ELF)
		goto cleanup;
	scn = elf_section_by_name(e, ".gnu_debugaltlink", &sh);
	if (!scn || sh.sh_type == SHT_NOBITS)
		goto cleanup;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 2)
		goto cleanup;
	/* A NUL-terminated name, then the build ID to its end. */
	name = d->d_buf;
	name_len = strnlen(name, d->d_size);
	if (name_len == d->d_size)
		goto cleanup;
	path = elf_find_debug_file(dirs, (const uint8_t *)name + name_len + 1,
				   d->d_size - name_len - 1, NULL, 0);
	if (path || name_len > 4096)
		goto cleanup;
	for (size_t i = 0; dirs[i]; i++) {
		if (dirs[i][0] && alt_name_inside(name, dirs[i]) && is_regular_file(name)) {
			path = strdup(name);
			break;
		}
	}
cleanup:
	if (e)
		elf_end(e);
	return path;
}
