/* files.c - real files of this machine for the simulated sensors: shared
 * libraries with their function offsets (so stacks symbolize to real
 * names), their file IDs, and kernel text symbols from /proc/kallsyms.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "parse.h"

#define MIN_FUNCS 50
#define MAX_FUNCS 4096
#define MIN_SIZE (64u << 10)
#define MAX_SIZE (32u << 20)

uint64_t lg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t lg_unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t lg_rand(uint64_t *st)
{
	uint64_t x = *st;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*st = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* File offset of vaddr through the executable PT_LOAD that holds it. */
static bool vaddr_to_off(Elf *e, size_t phnum, uint64_t vaddr, uint64_t *ret)
{
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
			*ret = vaddr - ph.p_vaddr + ph.p_offset;
			return true;
		}
	}
	return false;
}

/* Reads defined functions of .dynsym into f. Returns 0 or -ENOENT. */
static int read_funcs(struct lg_file *f)
{
	Elf *e = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	size_t phnum;
	int r = -ENOENT;

	if (!e || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64 ||
	    elf_getphdrnum(e, &phnum) != 0)
		goto cleanup;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			break;
		n = sh.sh_size / sh.sh_entsize;
		f->func_off = calloc(MAX_FUNCS, sizeof(uint64_t));
		f->func_size = calloc(MAX_FUNCS, sizeof(uint64_t));
		if (!f->func_off || !f->func_size)
			break;
		for (size_t i = 0; i < n && f->n_funcs < MAX_FUNCS; i++) {
			GElf_Sym s;
			uint64_t off;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    s.st_shndx == SHN_UNDEF || s.st_value == 0 || s.st_size == 0)
				continue;
			if (!vaddr_to_off(e, phnum, s.st_value, &off))
				continue;
			f->func_off[f->n_funcs] = off;
			f->func_size[f->n_funcs] = s.st_size;
			f->n_funcs++;
		}
		break;
	}
	if (f->n_funcs >= MIN_FUNCS)
		r = 0;
cleanup:
	if (e)
		elf_end(e);
	return r;
}

static void file_done(struct lg_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	free(f->func_off);
	free(f->func_size);
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The symbolizer sorts too; here only the text symbols matter. */
static int load_ksyms(struct lg_files *fs, size_t max)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512];

	if (!f)
		return -errno;
	fs->kaddr = calloc(max ? max : 1, sizeof(uint64_t));
	fs->kname = calloc(max ? max : 1, sizeof(char *));
	if (!fs->kaddr || !fs->kname) {
		fclose(f);
		return -ENOMEM;
	}
	while (fs->n_ksyms < max && fgets(line, sizeof(line), f)) {
		char *sp1 = strchr(line, ' '), *name;
		uint64_t a;

		if (!sp1 || (sp1[1] != 't' && sp1[1] != 'T') || sp1[2] != ' ')
			continue;
		*sp1 = '\0';
		name = sp1 + 3;
		name[strcspn(name, " \t\n")] = '\0';
		if (parse_u64(line, 16, &a) < 0 || a == 0)
			continue;
		fs->kname[fs->n_ksyms] = strdup(name);
		if (!fs->kname[fs->n_ksyms])
			break;
		fs->kaddr[fs->n_ksyms++] = a;
	}
	fclose(f);
	return fs->n_ksyms ? 0 : -ENOENT; /* addresses are 0 unless root */
}

int lg_files_load(struct lg_files *fs, const char *dir, size_t max, size_t max_ksyms)
{
	DIR *d = NULL;
	struct dirent *de;
	char **names = NULL;
	size_t n_names = 0, cap = 0;
	int r;

	memset(fs, 0, sizeof(*fs));
	if (max > LG_MAX_FILES)
		max = LG_MAX_FILES;
	elf_version(EV_CURRENT);
	d = opendir(dir);
	if (!d) {
		r = -errno;
		goto cleanup;
	}
	while ((de = readdir(d))) {
		if (!strstr(de->d_name, ".so"))
			continue;
		if (n_names == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 256) * sizeof(*nn));

			if (!nn) {
				r = -ENOMEM;
				goto cleanup;
			}
			names = nn;
		}
		if (!(names[n_names] = strdup(de->d_name))) {
			r = -ENOMEM;
			goto cleanup;
		}
		n_names++;
	}
	qsort(names, n_names, sizeof(*names), cmp_str);
	fs->f = calloc(max ? max : 1, sizeof(*fs->f));
	if (!fs->f) {
		r = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < n_names && fs->n < max; i++) {
		struct lg_file *f = &fs->f[fs->n];
		struct stat st;
		bool dup = false;

		snprintf(f->path, sizeof(f->path), "%s/%s", dir, names[i]);
		/* Symlinks to a file already taken would repeat its file ID. */
		if (lstat(f->path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < MIN_SIZE ||
		    st.st_size > MAX_SIZE)
			continue;
		f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
		if (f->fd < 0)
			continue;
		f->size = (uint64_t)st.st_size;
		if (fileid_from_fd(f->fd, &f->id) < 0 || read_funcs(f) < 0) {
			file_done(f);
			continue;
		}
		for (size_t k = 0; k < fs->n; k++)
			dup |= memcmp(fs->f[k].id.bytes, f->id.bytes, FILEID_LEN) == 0;
		if (dup) {
			file_done(f);
			continue;
		}
		memcpy(f->id_bytes, f->id.bytes, FILEID_LEN);
		fs->n++;
	}
	if (fs->n == 0) {
		r = -ENOENT;
		goto cleanup;
	}
	r = load_ksyms(fs, max_ksyms);
cleanup:
	for (size_t i = 0; i < n_names; i++)
		free(names[i]);
	free(names);
	if (d)
		closedir(d);
	if (r < 0)
		lg_files_done(fs);
	return r;
}

void lg_files_done(struct lg_files *fs)
{
	for (size_t i = 0; fs->f && i < fs->n; i++)
		file_done(&fs->f[i]);
	for (size_t i = 0; fs->kname && i < fs->n_ksyms; i++)
		free(fs->kname[i]);
	free(fs->f);
	free(fs->kaddr);
	free(fs->kname);
	memset(fs, 0, sizeof(*fs));
}

const struct lg_file *lg_files_find(const struct lg_files *fs, const uint8_t *id, size_t len)
{
	if (len != FILEID_LEN)
		return NULL;
	for (size_t i = 0; i < fs->n; i++)
		if (memcmp(fs->f[i].id.bytes, id, FILEID_LEN) == 0)
			return &fs->f[i];
	return NULL;
}
