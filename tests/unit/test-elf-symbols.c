/* test-elf-symbols.c - unit tests for symbolizer/elf: the sparse file
 * image, the resumable ELF analysis driven exactly as the service drives
 * it (step, fetch the named ranges, put, step again), symbol lookups
 * checked against nm, segments against readelf -l, build IDs against
 * readelf -n, the cache blob (round trip, truncations, bit flips), hostile
 * inputs, ELF32/ELF64 in both byte orders (built here by hand, since
 * objcopy cannot change byte order), separate debug files and the merge.
 *
 * SONDE_WRITE_ELF_CORPUS=DIR makes the hand-built test files also be
 * written to DIR (that is how tests/fuzz/corpus/elf/ was seeded).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "elf_analysis.h"
#include "file_image.h"
#include "symtab.h"

#define LIBC_PATH "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define MAX_STEPS 64
#define N_PROBES 1000

/* ---- helpers ---- */

static uint8_t *read_file(const char *path, size_t *ret_len)
{
	struct stat st;
	uint8_t *buf = NULL;
	size_t done = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || st.st_size <= 0)
		goto fail;
	buf = malloc((size_t)st.st_size);
	if (!buf)
		goto fail;
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);

		if (n <= 0)
			goto fail;
		done += (size_t)n;
	}
	close(fd);
	*ret_len = done;
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

struct run {
	int rc;
	int steps;
	uint64_t fetched;
	const char *reason;
	struct symtab *t;
};

/* The service's loop: step, fetch what is needed (here from memory or
 * with pread from fd), put, step again. */
static struct run run_analysis(int fd, const uint8_t *buf, uint64_t size)
{
	struct run r = { .rc = -EINVAL };
	struct file_image *img = file_image_new(size);
	struct elf_need need;
	uint8_t *chunk = NULL;

	assert_non_null(img);
	for (r.steps = 1; r.steps <= MAX_STEPS; r.steps++) {
		r.rc = elf_analysis_step(img, &need, &r.t, &r.reason);
		if (r.rc != -EAGAIN)
			break;
		assert_true(need.n > 0 && need.n <= ELF_ANALYSIS_MAX_RANGES);
		for (size_t i = 0; i < need.n; i++) {
			const struct elf_range *g = &need.ranges[i];

			assert_true(g->length > 0);
			assert_true(g->offset <= size && g->length <= size - g->offset);
			chunk = realloc(chunk, g->length);
			assert_non_null(chunk);
			if (fd >= 0)
				assert_int_equal(pread(fd, chunk, g->length, (off_t)g->offset),
						 (ssize_t)g->length);
			else
				memcpy(chunk, buf + g->offset, g->length);
			assert_int_equal(file_image_put(img, g->offset, chunk, g->length), 0);
			r.fetched += g->length;
		}
	}
	/* Every input must end, well inside the step budget. */
	assert_true(r.steps <= MAX_STEPS);
	if (r.rc == -EBADMSG)
		assert_non_null(r.reason);
	free(chunk);
	file_image_free(img);
	return r;
}

static struct run run_buf(const uint8_t *buf, size_t len)
{
	return run_analysis(-1, buf, len);
}

static struct run run_path(const char *path)
{
	struct stat st;
	struct run r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	r = run_analysis(fd, NULL, (uint64_t)st.st_size);
	close(fd);
	return r;
}

/* One symbol line of nm -S output. */
struct nm_sym {
	uint64_t addr;
	uint64_t size; /* 0 if nm printed none */
	uint64_t seg_end; /* end of its executable segment */
	char type;
	char *name;    /* without @version */
};

struct nm_list {
	struct nm_sym *s;
	size_t n;
};

static int cmp_nm(const void *pa, const void *pb)
{
	const struct nm_sym *a = pa, *b = pb;

	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* Executable PT_LOAD segments of path, from readelf -lW. */
struct exec_seg {
	uint64_t start, end;
};

static size_t exec_segments(const char *path, struct exec_seg *segs, size_t max)
{
	char cmd[4200], line[1024];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -lW '%s' 2>/dev/null", path);
	p = popen(cmd, "re");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		uint64_t off, va, pa, filesz, memsz;
		char flags[8] = "";

		if (sscanf(line, " LOAD 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64
				 " 0x%" SCNx64 " %7[RWE ]",
			   &off, &va, &pa, &filesz, &memsz, flags) == 6 &&
		    strchr(flags, 'E') && n < max)
			segs[n++] = (struct exec_seg){ va, va + memsz };
	}
	pclose(p);
	return n;
}

/* nm's defined function symbols (types T t W i) of path, sorted; only
 * those in executable segments (nm's W also covers weak data), with
 * unsized ones clipped to their segment's end. */
static struct nm_list run_nm(const char *path, bool dynamic)
{
	struct nm_list l = { 0 };
	char cmd[4200], line[8192];
	struct exec_seg segs[16];
	size_t cap = 0, nsegs = exec_segments(path, segs, 16);
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm -S --defined-only %s '%s' 2>/dev/null",
		 dynamic ? "-D" : "", path);
	p = popen(cmd, "re");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *tok[4], *save = NULL, *at;
		int n = 0;

		for (char *s = strtok_r(line, " \n", &save); s && n < 4; s = strtok_r(NULL, " \n", &save))
			tok[n++] = s;
		if (n < 3)
			continue;
		struct nm_sym s = { .addr = strtoull(tok[0], NULL, 16) };
		if (n == 4) {
			s.size = strtoull(tok[1], NULL, 16);
			s.type = tok[2][0];
			s.name = tok[3];
		} else {
			s.type = tok[1][0];
			s.name = tok[2];
		}
		if (!strchr("TtWi", s.type) || s.addr == 0 || strlen(tok[n - 2]) != 1)
			continue;
		size_t k = 0;
		while (k < nsegs && !(s.addr >= segs[k].start && s.addr < segs[k].end))
			k++;
		if (k == nsegs)
			continue;
		s.seg_end = segs[k].end;
		at = strchr(s.name, '@');
		if (at)
			*at = '\0';
		s.name = strdup(s.name);
		assert_non_null(s.name);
		if (l.n == cap) {
			cap = cap ? cap * 2 : 1024;
			l.s = realloc(l.s, cap * sizeof(*l.s));
			assert_non_null(l.s);
		}
		l.s[l.n++] = s;
	}
	pclose(p);
	qsort(l.s, l.n, sizeof(*l.s), cmp_nm);
	return l;
}

static void nm_free(struct nm_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->s[i].name);
	free(l->s);
}

/* A probe: an address inside a symbol nm lists, and where it starts. */
struct probe {
	uint64_t addr;
	uint64_t start;
	size_t first, last; /* nm entries at start: [first, last) */
};

/* N_PROBES addresses spread over nm's function symbols; each lies inside
 * its symbol (by nm's size) and before any other symbol starts. */
static size_t make_probes(const struct nm_list *l, struct probe *pr)
{
	size_t n_starts = 0, np = 0;
	size_t *starts = calloc(l->n + 1, sizeof(*starts));

	assert_non_null(starts);
	for (size_t i = 0; i < l->n; i++)
		if (i == 0 || l->s[i].addr != l->s[i - 1].addr)
			starts[n_starts++] = i;
	starts[n_starts] = l->n;
	assert_true(n_starts > 0);
	for (size_t j = 0; j < N_PROBES; j++) {
		size_t g = j * n_starts / N_PROBES;
		size_t first = starts[g], last = starts[g + 1];
		uint64_t start = l->s[first].addr, span = 0;

		for (size_t i = first; i < last; i++)
			if (l->s[i].size > span)
				span = l->s[i].size;
		if (last < l->n && (span == 0 || l->s[last].addr - start < span))
			span = l->s[last].addr - start;
		if (span == 0 || span > l->s[first].seg_end - start)
			span = l->s[first].seg_end - start;
		if (span == 0)
			span = 1;
		pr[np++] = (struct probe){ start + (j * 7919) % span, start, first, last };
	}
	free(starts);
	return np;
}

static void check_probes(const struct symtab *t, const struct nm_list *l, const struct probe *pr,
			 size_t np)
{
	size_t bad = 0;

	for (size_t j = 0; j < np; j++) {
		struct symtab_lookup lk;
		bool match = false;

		if (symtab_lookup(t, pr[j].addr, &lk) != 0) {
			fprintf(stderr, "not found: %#" PRIx64 " (%s)\n", pr[j].addr,
				l->s[pr[j].first].name);
			bad++;
			continue;
		}
		for (size_t i = pr[j].first; i < pr[j].last; i++)
			match |= strcmp(lk.name, l->s[i].name) == 0;
		if (!match || lk.start != pr[j].start || lk.offset != pr[j].addr - pr[j].start) {
			fprintf(stderr, "mismatch at %#" PRIx64 ": got %s+%#" PRIx64 " want %s\n",
				pr[j].addr, lk.name, lk.offset, l->s[pr[j].first].name);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* Output of a command, first line matching prefix after trimming. */
static bool build_id_from_readelf(const char *path, uint8_t *id, size_t *len)
{
	char cmd[4200], line[1024];
	bool found = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -nW '%s' 2>/dev/null", path);
	p = popen(cmd, "re");
	assert_non_null(p);
	while (!found && fgets(line, sizeof(line), p)) {
		char *s = strstr(line, "Build ID: ");

		if (!s)
			continue;
		s += strlen("Build ID: ");
		*len = 0;
		while (*len < 64 && sscanf(s, "%2hhx", &id[*len]) == 1) {
			(*len)++;
			s += 2;
		}
		found = true;
	}
	pclose(p);
	return found;
}

static void check_build_id(const char *path, const struct symtab *t)
{
	uint8_t want[64], *got;
	size_t want_len = 0, got_len;

	assert_true(build_id_from_readelf(path, want, &want_len));
	got = (uint8_t *)symtab_build_id(t, &got_len);
	assert_int_equal(got_len, want_len);
	assert_memory_equal(got, want, want_len);
}

/* symtab_offset_to_vaddr against readelf -lW's LOAD lines. */
static void check_segments(const char *path, const struct symtab *t)
{
	char cmd[4200], line[1024];
	int loads = 0;
	uint64_t vaddr;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -lW '%s' 2>/dev/null", path);
	p = popen(cmd, "re");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		uint64_t off, va, pa, filesz;

		if (sscanf(line, " LOAD 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64, &off,
			   &va, &pa, &filesz) != 4 ||
		    filesz == 0)
			continue;
		loads++;
		uint64_t probes[3] = { off, off + filesz / 2, off + filesz - 1 };
		for (int i = 0; i < 3; i++) {
			assert_int_equal(symtab_offset_to_vaddr(t, probes[i], &vaddr), 0);
			assert_true(vaddr == va + (probes[i] - off));
		}
	}
	pclose(p);
	assert_true(loads > 0);
	assert_int_equal(symtab_offset_to_vaddr(t, UINT64_MAX - 1, &vaddr), -ENOENT);
}

/* serialize -> deserialize gives the same answers; every truncation and
 * random damage gives NULL or a table that still answers safely. */
static void check_blob(const struct symtab *t, const struct probe *pr, size_t np)
{
	size_t size, size2;
	uint8_t *blob = symtab_serialize(t, &size), *copy;
	struct symtab *u;

	assert_non_null(blob);
	u = symtab_deserialize(blob, size);
	assert_non_null(u);
	assert_int_equal(symtab_count(u), symtab_count(t));
	for (size_t j = 0; j < np; j++) {
		struct symtab_lookup a, b;
		int ra = symtab_lookup(t, pr[j].addr, &a), rb = symtab_lookup(u, pr[j].addr, &b);

		assert_int_equal(ra, rb);
		if (ra == 0) {
			assert_string_equal(a.name, b.name);
			assert_true(a.start == b.start && a.offset == b.offset);
		}
	}
	/* Same blob again: the format is deterministic. */
	copy = symtab_serialize(u, &size2);
	assert_non_null(copy);
	assert_int_equal(size2, size);
	assert_memory_equal(copy, blob, size);
	free(copy);
	symtab_free(u);

	for (size_t len = 0; len < size; len++)
		assert_null(symtab_deserialize(blob, len));

	copy = malloc(size);
	assert_non_null(copy);
	srandom(42);
	for (int k = 0; k < 2000; k++) {
		size_t bit = (size_t)random() % (size * 8);

		memcpy(copy, blob, size);
		copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		/* Plain damage is caught by the CRC... */
		assert_null(symtab_deserialize(copy, size));
		/* ...so also forge the CRC, to exercise the field checks. */
		uint32_t crc = (uint32_t)crc32(0L, copy, (uInt)(size - 4));
		for (int i = 0; i < 4; i++)
			copy[size - 4 + i] = (uint8_t)(crc >> (8 * i));
		u = symtab_deserialize(copy, size);
		if (!u)
			continue;
		for (size_t j = 0; j < np; j += 10) {
			struct symtab_lookup lk;
			const char *names[4];

			if (symtab_lookup(u, pr[j].addr, &lk) == 0) {
				assert_true(strlen(lk.name) < size);
				symtab_names(u, lk.start, names, 4);
			}
		}
		symtab_free(u);
	}
	free(copy);
	free(blob);
}

/* ---- libc (.dynsym only) ---- */

static void test_libc(void **state)
{
	struct run r = run_path(LIBC_PATH);
	struct nm_list l;
	struct probe *pr;
	struct stat st;
	size_t np;

	assert_int_equal(r.rc, 0);
	assert_int_equal(stat(LIBC_PATH, &st), 0);
	fprintf(stderr, "libc: %d steps, %" PRIu64 " of %lld bytes fetched, %zu functions\n",
		r.steps, r.fetched, (long long)st.st_size, symtab_count(r.t));
	/* Headers, then tables, then strings/symbols/notes, maybe debuglink. */
	assert_true(r.steps <= 6);
	assert_true(r.fetched < (uint64_t)st.st_size / 4);
	assert_true(symtab_count(r.t) > 1000);

	l = run_nm(LIBC_PATH, true);
	assert_true(l.n > 1000);
	pr = calloc(N_PROBES, sizeof(*pr));
	assert_non_null(pr);
	np = make_probes(&l, pr);
	check_probes(r.t, &l, pr, np);
	check_segments(LIBC_PATH, r.t);
	check_build_id(LIBC_PATH, r.t);
	check_blob(r.t, pr, np);

	/* The same file read whole and locally ends in one step. */
	struct file_image *img = file_image_open(LIBC_PATH);
	struct elf_need need;
	struct symtab *t2 = NULL;

	assert_non_null(img);
	assert_int_equal(file_image_bytes_present(img), (uint64_t)st.st_size);
	assert_int_equal(elf_analysis_step(img, &need, &t2, NULL), 0);
	assert_int_equal(symtab_count(t2), symtab_count(r.t));
	assert_int_equal(file_image_put(img, 0, "x", 1), -EPERM);
	symtab_free(t2);
	file_image_free(img);

	free(pr);
	nm_free(&l);
	symtab_free(r.t);
}

/* ---- this test binary (.symtab and .dynsym) ---- */

static void test_self(void **state)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	struct run r;
	struct nm_list l;
	struct probe *pr;
	size_t np;

	assert_true(n > 0);
	path[n] = '\0';
	r = run_path(path);
	assert_int_equal(r.rc, 0);
	assert_true(r.steps <= 6);
	l = run_nm(path, false);
	assert_true(l.n > 20);
	assert_true(symtab_count(r.t) >= 20);
	pr = calloc(N_PROBES, sizeof(*pr));
	assert_non_null(pr);
	np = make_probes(&l, pr);
	check_probes(r.t, &l, pr, np);
	check_segments(path, r.t);
	check_build_id(path, r.t);
	check_blob(r.t, pr, np);

	/* Every name nm lists at a function's start is kept as an alias. */
	for (size_t i = 0; i < l.n; i += 7) {
		const char *names[64];
		size_t k = symtab_names(r.t, l.s[i].addr, names, 64);
		bool found = false;

		assert_true(k > 0);
		for (size_t j = 0; j < k && j < 64; j++)
			found |= strcmp(names[j], l.s[i].name) == 0;
		assert_true(found || k > 64);
	}
	free(pr);
	nm_free(&l);
	symtab_free(r.t);
}

/* ---- hand-built ELF files, any class and byte order ---- */

struct gen {
	bool is64, be;
	bool xnum;      /* extended section numbering */
	bool bad_link;  /* .symtab sh_link out of range */
	bool bad_name;  /* one symbol's name offset past .strtab */
	bool bad_shoff; /* .symtab sh_offset + sh_size overflows */
	uint8_t *p;
	size_t len;
};

static void put(struct gen *g, size_t off, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++) {
		int shift = g->be ? 8 * (bytes - 1 - i) : 8 * i;

		g->p[off + (size_t)i] = (uint8_t)(v >> shift);
	}
}

/* Address-sized field. */
static void puta(struct gen *g, size_t off, uint64_t v)
{
	put(g, off, v, g->is64 ? 8 : 4);
}

#define GEN_BASE 0x400000u
static const uint8_t gen_build_id[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6,
					  7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

struct gen_sym {
	const char *name;
	uint32_t value; /* file offset in .text (vaddr = GEN_BASE + value) */
	uint32_t size;
	uint8_t bind, type;
	uint16_t shndx;
};

static const struct gen_sym gen_syms[] = {
	{ "foo", 0x100, 0x10, STB_GLOBAL, STT_FUNC, 1 },
	{ "foo_alias", 0x100, 0x10, STB_WEAK, STT_FUNC, 1 },
	{ "_foo_local", 0x100, 0x10, STB_LOCAL, STT_FUNC, 1 },
	{ "bar", 0x120, 0, STB_GLOBAL, STT_FUNC, 1 },
	{ "obj", 0x130, 4, STB_GLOBAL, STT_OBJECT, 1 },
	{ "baz", 0x140, 0x20, STB_GLOBAL, STT_GNU_IFUNC, 1 },
	{ "undef", 0, 0, STB_GLOBAL, STT_FUNC, SHN_UNDEF },
	{ "lbl", 0x180, 0, STB_LOCAL, STT_NOTYPE, 1 },
	{ "abs", 0x190, 0, STB_GLOBAL, STT_FUNC, SHN_ABS },
};
#define GEN_NSYMS (sizeof(gen_syms) / sizeof(gen_syms[0]) + 1)

/* Layout: ehdr, 1 phdr, .text at 0x100 (0x100 bytes), .symtab at 0x200,
 * then .strtab, .shstrtab, .note.gnu.build-id, .gnu_debuglink, section
 * headers. One PT_LOAD maps offsets [0, 0x200) at GEN_BASE. */
static void gen_build(struct gen *g)
{
	static const char shstr[] = "\0.text\0.symtab\0.strtab\0.shstrtab\0.note.gnu.build-id\0"
				    ".gnu_debuglink";
	size_t ehsize = g->is64 ? 64 : 52, phsize = g->is64 ? 56 : 32;
	size_t shsize = g->is64 ? 64 : 40, symsize = g->is64 ? 24 : 16;
	size_t symoff = 0x200, stroff = symoff + GEN_NSYMS * symsize, strlen_ = 1, shstroff,
	       noteoff, dloff, shoff, nsec = 7;
	uint32_t names[GEN_NSYMS];

	g->len = 0x1000;
	g->p = calloc(1, g->len);
	assert_non_null(g->p);
	/* .strtab */
	for (size_t i = 1; i < GEN_NSYMS; i++) {
		names[i] = (uint32_t)strlen_;
		strcpy((char *)g->p + stroff + strlen_, gen_syms[i - 1].name);
		strlen_ += strlen(gen_syms[i - 1].name) + 1;
	}
	shstroff = stroff + strlen_;
	memcpy(g->p + shstroff, shstr, sizeof(shstr));
	noteoff = (shstroff + sizeof(shstr) + 3) & ~(size_t)3;
	put(g, noteoff, 4, 4);
	put(g, noteoff + 4, sizeof(gen_build_id), 4);
	put(g, noteoff + 8, 3, 4);
	memcpy(g->p + noteoff + 12, "GNU", 4);
	memcpy(g->p + noteoff + 16, gen_build_id, sizeof(gen_build_id));
	dloff = noteoff + 16 + sizeof(gen_build_id);
	memcpy(g->p + dloff, "dbg.debug", 10); /* 10 bytes, padded to 12 */
	put(g, dloff + 12, 0x12345678, 4);
	shoff = (dloff + 16 + 7) & ~(size_t)7;
	assert_true(shoff + nsec * shsize <= g->len);
	memset(g->p + 0x100, 0xcc, 0x100);

	/* ELF header */
	memcpy(g->p, ELFMAG, SELFMAG);
	g->p[EI_CLASS] = g->is64 ? ELFCLASS64 : ELFCLASS32;
	g->p[EI_DATA] = g->be ? ELFDATA2MSB : ELFDATA2LSB;
	g->p[EI_VERSION] = EV_CURRENT;
	put(g, 16, ET_EXEC, 2);
	put(g, 18, g->is64 ? EM_X86_64 : EM_386, 2);
	put(g, 20, EV_CURRENT, 4);
	size_t o = 24;
	puta(g, o, GEN_BASE + 0x100), o += g->is64 ? 8 : 4; /* e_entry */
	puta(g, o, ehsize), o += g->is64 ? 8 : 4;            /* e_phoff */
	puta(g, o, shoff), o += g->is64 ? 8 : 4;             /* e_shoff */
	put(g, o, 0, 4), o += 4;                             /* e_flags */
	put(g, o, ehsize, 2), o += 2;
	put(g, o, phsize, 2), o += 2;
	put(g, o, 1, 2), o += 2;
	put(g, o, shsize, 2), o += 2;
	put(g, o, g->xnum ? 0 : nsec, 2), o += 2;
	put(g, o, g->xnum ? SHN_XINDEX : 4, 2);

	/* PT_LOAD */
	o = ehsize;
	put(g, o, PT_LOAD, 4);
	if (g->is64) {
		put(g, o + 4, PF_R | PF_X, 4);
		put(g, o + 8, 0, 8);
		put(g, o + 16, GEN_BASE, 8);
		put(g, o + 24, GEN_BASE, 8);
		put(g, o + 32, 0x200, 8);
		put(g, o + 40, 0x200, 8);
		put(g, o + 48, 0x1000, 8);
	} else {
		put(g, o + 4, 0, 4);
		put(g, o + 8, GEN_BASE, 4);
		put(g, o + 12, GEN_BASE, 4);
		put(g, o + 16, 0x200, 4);
		put(g, o + 20, 0x200, 4);
		put(g, o + 24, PF_R | PF_X, 4);
		put(g, o + 28, 0x1000, 4);
	}

	/* .symtab */
	for (size_t i = 1; i < GEN_NSYMS; i++) {
		const struct gen_sym *s = &gen_syms[i - 1];
		uint64_t value = s->shndx == SHN_UNDEF ? 0 : GEN_BASE + s->value;
		uint32_t name = g->bad_name && i == 4 ? 0x7fffffff : names[i];

		o = symoff + i * symsize;
		put(g, o, name, 4);
		if (g->is64) {
			g->p[o + 4] = (uint8_t)(s->bind << 4 | s->type);
			put(g, o + 6, s->shndx, 2);
			put(g, o + 8, value, 8);
			put(g, o + 16, s->size, 8);
		} else {
			put(g, o + 4, value, 4);
			put(g, o + 8, s->size, 4);
			g->p[o + 12] = (uint8_t)(s->bind << 4 | s->type);
			put(g, o + 14, s->shndx, 2);
		}
	}

	/* Section headers: type, flags, offset, size, link, info, align, entsize. */
	struct {
		uint32_t name, type;
		uint64_t flags, addr, off, size;
		uint32_t link, info;
		uint64_t align, entsize;
	} sh[7] = {
		{ 0 },
		{ 1, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, GEN_BASE + 0x100, 0x100, 0x100, 0, 0,
		  16, 0 },
		{ 7, SHT_SYMTAB, 0, 0, symoff, GEN_NSYMS * symsize, 3, 4, 8, symsize },
		{ 15, SHT_STRTAB, 0, 0, stroff, strlen_, 0, 0, 1, 0 },
		{ 23, SHT_STRTAB, 0, 0, shstroff, sizeof(shstr), 0, 0, 1, 0 },
		{ 33, SHT_NOTE, SHF_ALLOC, 0, noteoff, 16 + sizeof(gen_build_id), 0, 0, 4, 0 },
		{ 52, SHT_PROGBITS, 0, 0, dloff, 16, 0, 0, 4, 0 },
	};
	if (g->xnum) {
		sh[0].size = nsec; /* real e_shnum */
		sh[0].link = 4;    /* real e_shstrndx */
	}
	if (g->bad_link)
		sh[2].link = 1000;
	if (g->bad_shoff)
		sh[2].off = UINT64_MAX - 8;
	for (size_t i = 0; i < nsec; i++) {
		o = shoff + i * shsize;
		put(g, o, sh[i].name, 4);
		put(g, o + 4, sh[i].type, 4);
		if (g->is64) {
			put(g, o + 8, sh[i].flags, 8);
			put(g, o + 16, sh[i].addr, 8);
			put(g, o + 24, sh[i].off, 8);
			put(g, o + 32, sh[i].size, 8);
			put(g, o + 40, sh[i].link, 4);
			put(g, o + 44, sh[i].info, 4);
			put(g, o + 48, sh[i].align, 8);
			put(g, o + 56, sh[i].entsize, 8);
		} else {
			put(g, o + 8, sh[i].flags, 4);
			put(g, o + 12, sh[i].addr, 4);
			put(g, o + 16, sh[i].off, 4);
			put(g, o + 20, sh[i].size, 4);
			put(g, o + 24, sh[i].link, 4);
			put(g, o + 28, sh[i].info, 4);
			put(g, o + 32, sh[i].align, 4);
			put(g, o + 36, sh[i].entsize, 4);
		}
	}
	g->len = shoff + nsec * shsize;
}

static void maybe_write_corpus(const char *name, const struct gen *g)
{
	const char *dir = getenv("SONDE_WRITE_ELF_CORPUS");
	char path[4096];

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	write_file(path, g->p, g->len);
}

static void expect_lookup(const struct symtab *t, uint64_t addr, const char *name, uint64_t off)
{
	struct symtab_lookup lk;

	if (!name) {
		assert_int_equal(symtab_lookup(t, addr, &lk), -ENOENT);
		return;
	}
	assert_int_equal(symtab_lookup(t, addr, &lk), 0);
	assert_string_equal(lk.name, name);
	assert_true(lk.offset == off);
}

static void test_generated(void **state)
{
	for (int v = 0; v < 8; v++) {
		struct gen g = { .is64 = v & 1, .be = v & 2, .xnum = v & 4 };
		const char *names[8];
		uint32_t crc;
		size_t len;
		uint64_t va;
		struct run r;

		gen_build(&g);
		if (!g.xnum && (g.is64 || g.be)) {
			char name[64];

			snprintf(name, sizeof(name), "gen-elf%d-%s", g.is64 ? 64 : 32,
				 g.be ? "be" : "le");
			maybe_write_corpus(name, &g);
		}
		r = run_buf(g.p, g.len);
		if (r.rc)
			fprintf(stderr, "variant %d: %d %s\n", v, r.rc, r.reason);
		assert_int_equal(r.rc, 0);
		assert_int_equal(symtab_count(r.t), 4); /* foo, bar, baz, lbl */
		expect_lookup(r.t, GEN_BASE + 0x105, "foo", 5);
		assert_int_equal(symtab_names(r.t, GEN_BASE + 0x100, names, 8), 3);
		assert_string_equal(names[0], "foo");
		expect_lookup(r.t, GEN_BASE + 0x110, NULL, 0); /* past foo's size */
		expect_lookup(r.t, GEN_BASE + 0x120, "bar", 0);
		expect_lookup(r.t, GEN_BASE + 0x13f, "bar", 0x1f); /* unsized: up to baz */
		expect_lookup(r.t, GEN_BASE + 0x145, "baz", 5);
		expect_lookup(r.t, GEN_BASE + 0x160, NULL, 0);
		expect_lookup(r.t, GEN_BASE + 0x1ff, "lbl", 0x7f); /* last: to segment end */
		expect_lookup(r.t, GEN_BASE + 0x200, NULL, 0);
		expect_lookup(r.t, GEN_BASE + 0x50, NULL, 0);
		assert_int_equal(symtab_offset_to_vaddr(r.t, 0x150, &va), 0);
		assert_true(va == GEN_BASE + 0x150);
		assert_int_equal(symtab_offset_to_vaddr(r.t, 0x200, &va), -ENOENT);
		const uint8_t *id = symtab_build_id(r.t, &len);
		assert_int_equal(len, sizeof(gen_build_id));
		assert_memory_equal(id, gen_build_id, len);
		assert_string_equal(symtab_debuglink(r.t, &crc), "dbg.debug");
		assert_int_equal(crc, 0x12345678);
		symtab_free(r.t);

		/* Hostile variants of the same file. */
		struct gen h = g;
		h.bad_link = true;
		gen_build(&h);
		r = run_buf(h.p, h.len);
		assert_int_equal(r.rc, -EBADMSG);
		free(h.p);

		h = g;
		h.bad_shoff = true;
		gen_build(&h);
		r = run_buf(h.p, h.len);
		assert_int_equal(r.rc, -EBADMSG);
		free(h.p);

		h = g;
		h.bad_name = true; /* "bar" has a bad name: skipped, the rest kept */
		gen_build(&h);
		r = run_buf(h.p, h.len);
		assert_int_equal(r.rc, 0);
		assert_int_equal(symtab_count(r.t), 3);
		expect_lookup(r.t, GEN_BASE + 0x125, NULL, 0);
		symtab_free(r.t);
		free(h.p);

		/* Every truncation and every single-byte change must end. */
		for (size_t cut = 0; cut < g.len; cut += 7) {
			r = run_buf(g.p, cut ? cut : 1);
			assert_int_not_equal(r.rc, -EAGAIN);
			if (r.rc == 0)
				symtab_free(r.t);
		}
		uint8_t *m = malloc(g.len);
		assert_non_null(m);
		for (size_t i = 0; i < g.len; i++) {
			memcpy(m, g.p, g.len);
			m[i] ^= 0xff;
			r = run_buf(m, g.len);
			assert_int_not_equal(r.rc, -EAGAIN);
			if (r.rc == 0)
				symtab_free(r.t);
		}
		free(m);
		free(g.p);
	}
}

/* ---- bad input ---- */

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Offset of libc's .dynsym section header (ELF64 little-endian). */
static size_t libc_dynsym_shdr(const uint8_t *b, size_t len)
{
	uint64_t shoff = get_le(b + 0x28, 8);
	uint64_t shnum = get_le(b + 0x3c, 2);

	for (uint64_t i = 0; i < shnum; i++) {
		size_t o = (size_t)(shoff + i * 64);

		assert_true(o + 64 <= len);
		if (get_le(b + o + 4, 4) == SHT_DYNSYM)
			return o;
	}
	fail();
	return 0;
}

static void expect_bad(const uint8_t *b, size_t len, const char *what)
{
	struct run r = run_buf(b, len);

	if (r.rc != -EBADMSG)
		fprintf(stderr, "%s: rc %d\n", what, r.rc);
	assert_int_equal(r.rc, -EBADMSG);
	assert_non_null(r.reason);
}

static void test_bad_input(void **state)
{
	size_t len = 0, cuts[] = { 1, 4, 16, 63, 64, 65, 1000, 4096, 0 };
	uint8_t *libc = read_file(LIBC_PATH, &len), *b;
	char tmpl[] = "/tmp/sonde-elf-empty-XXXXXX";
	struct run r;
	int fd;

	assert_non_null(libc);
	cuts[8] = len / 2;
	b = malloc(len);
	assert_non_null(b);

	/* Empty: no image at all. */
	assert_null(file_image_new(0));
	assert_null(file_image_new(FILE_IMAGE_MAX_SIZE + 1));
	fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	close(fd);
	assert_null(file_image_open(tmpl));
	unlink(tmpl);
	assert_null(file_image_open("/nonexistent/sonde"));
	assert_null(file_image_open("/tmp"));

	expect_bad((const uint8_t *)"\x7f", 1, "one byte");
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
		expect_bad(libc, cuts[i], "truncated libc");

	srandom(7);
	for (size_t i = 0; i < 65536; i++)
		b[i] = (uint8_t)random();
	expect_bad(b, 65536, "garbage");
	/* Garbage behind a valid identification: any result but a crash. */
	memcpy(b, libc, 16);
	for (int k = 0; k < 200; k++) {
		for (size_t i = 16; i < 4096; i++)
			b[i] = (uint8_t)random();
		r = run_buf(b, 4096);
		assert_true(r.rc == -EBADMSG || r.rc == 0);
		if (r.rc == 0)
			symtab_free(r.t);
	}

	/* e_shoff past the end, absurd, e_shnum too large. */
	uint64_t shoffs[] = { len - 10, len, UINT64_MAX - 100, 1ULL << 40 };
	for (size_t i = 0; i < 4; i++) {
		memcpy(b, libc, len);
		put_le(b + 0x28, shoffs[i], 8);
		expect_bad(b, len, "e_shoff");
	}
	memcpy(b, libc, len);
	put_le(b + 0x3c, 0xfff0, 2);
	expect_bad(b, len, "e_shnum");
	memcpy(b, libc, len);
	put_le(b + 0x3a, 1000, 2);
	expect_bad(b, len, "e_shentsize");
	memcpy(b, libc, len);
	put_le(b + 0x20, UINT64_MAX - 8, 8);
	expect_bad(b, len, "e_phoff");
	/* Extended numbering with an absurd count in section 0. */
	memcpy(b, libc, len);
	put_le(b + 0x3c, 0, 2);
	put_le(b + get_le(b + 0x28, 8) + 32, UINT64_MAX / 2, 8);
	expect_bad(b, len, "e_shnum 0, huge sh_size");

	size_t ds = libc_dynsym_shdr(libc, len);
	memcpy(b, libc, len);
	put_le(b + ds + 24, UINT64_MAX - 0x10, 8); /* sh_offset + sh_size overflows */
	expect_bad(b, len, "sh_offset overflow");
	memcpy(b, libc, len);
	put_le(b + ds + 32, UINT64_MAX - 0x10, 8); /* huge sh_size */
	expect_bad(b, len, "sh_size");
	memcpy(b, libc, len);
	put_le(b + ds + 40, 0xffff, 4); /* sh_link out of range */
	expect_bad(b, len, "sh_link");
	memcpy(b, libc, len);
	put_le(b + ds + 56, 7, 8); /* sh_entsize */
	expect_bad(b, len, "sh_entsize");

	/* Name offsets past .dynstr: those symbols are skipped. */
	r = run_buf(libc, len);
	assert_int_equal(r.rc, 0);
	size_t full = symtab_count(r.t);
	symtab_free(r.t);
	memcpy(b, libc, len);
	uint64_t symoff = get_le(b + ds + 24, 8), symsz = get_le(b + ds + 32, 8);
	for (uint64_t o = symoff + 24; o + 24 <= symoff + symsz; o += 48)
		put_le(b + o, 0xfffffff0, 4);
	r = run_buf(b, len);
	assert_int_equal(r.rc, 0);
	assert_true(symtab_count(r.t) < full && symtab_count(r.t) > 0);
	symtab_free(r.t);

	/* Random byte damage in libc's headers must end, whatever it gives. */
	for (int k = 0; k < 300; k++) {
		memcpy(b, libc, len);
		for (int i = 0; i < 8; i++) {
			size_t at = (size_t)random() % 4096;

			if (k % 2)
				at = (size_t)(get_le(libc + 0x28, 8) + (uint64_t)random() % (64 * 70));
			if (at < len)
				b[at] = (uint8_t)random();
		}
		r = run_buf(b, len);
		assert_true(r.rc == 0 || r.rc == -EBADMSG);
		if (r.rc == 0)
			symtab_free(r.t);
	}
	free(b);
	free(libc);
}

/* ---- file image ---- */

static void test_file_image(void **state)
{
	struct file_image *img = file_image_new(10000);
	uint8_t buf[100];

	assert_non_null(img);
	assert_int_equal(file_image_size(img), 10000);
	assert_false(file_image_has(img, 0, 1));
	assert_true(file_image_has(img, 10000, 0));
	assert_false(file_image_has(img, 10001, 0));
	memset(buf, 'a', sizeof(buf));
	assert_int_equal(file_image_put(img, 9950, buf, 100), -ERANGE);
	assert_int_equal(file_image_put(img, UINT64_MAX, buf, 1), -ERANGE);
	assert_int_equal(file_image_put(img, 100, buf, 50), 0);
	assert_int_equal(file_image_put(img, 300, buf, 50), 0);
	assert_int_equal(file_image_put(img, 200, buf, 50), 0);
	assert_int_equal(file_image_bytes_present(img), 150);
	assert_false(file_image_has(img, 100, 60));
	assert_true(file_image_has(img, 110, 40));
	/* Bridge [150, 300): one range [100, 350). */
	assert_int_equal(file_image_put(img, 140, buf, 100), 0);
	assert_int_equal(file_image_put(img, 240, buf, 60), 0);
	assert_true(file_image_has(img, 100, 250));
	assert_false(file_image_has(img, 99, 2));
	assert_int_equal(file_image_bytes_present(img), 250);
	assert_int_equal(file_image_put(img, 0, buf, 100), 0);
	assert_int_equal(file_image_put(img, 9900, buf, 100), 0);
	assert_true(file_image_has(img, 0, 350));
	assert_true(file_image_has(img, 9900, 100));
	assert_int_equal(file_image_bytes_present(img), 450);
	assert_int_equal(file_image_data(img)[9999], 'a');
	assert_int_equal(file_image_data(img)[5000], 0);
	/* Many disjoint ranges, put backwards. */
	for (int i = 99; i >= 40; i--)
		assert_int_equal(file_image_put(img, (uint64_t)i * 90, buf, 10), 0);
	assert_true(file_image_has(img, 4500, 10));
	assert_false(file_image_has(img, 4500, 11));
	file_image_free(img);
	file_image_free(NULL);
}

/* ---- separate debug files ---- */

static char tmpdir[64];

static void sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

static void test_find_debug_file(void **state)
{
	char d1[128], d2[128], path[256];
	const char *dirs[] = { d1, d2, NULL };
	const uint8_t id[] = { 0xab, 0xcd, 0xef, 0x01 };
	const char content[] = "not really an ELF file";
	uint32_t crc = (uint32_t)crc32(0L, (const Bytef *)content, sizeof(content) - 1);
	char *found;

	snprintf(d1, sizeof(d1), "%s/d1", tmpdir);
	snprintf(d2, sizeof(d2), "%s/d2", tmpdir);
	sh("mkdir -p %s/.build-id/ab %s/.build-id/ab", d1, d2);
	snprintf(path, sizeof(path), "%s/.build-id/ab/cdef01.debug", d2);
	write_file(path, content, sizeof(content) - 1);
	snprintf(path, sizeof(path), "%s/app.debug", d2);
	write_file(path, content, sizeof(content) - 1);
	snprintf(path, sizeof(path), "%s/secret", tmpdir);
	write_file(path, content, sizeof(content) - 1);

	found = elf_find_debug_file(dirs, id, sizeof(id), NULL, 0);
	assert_non_null(found);
	snprintf(path, sizeof(path), "%s/.build-id/ab/cdef01.debug", d2);
	assert_string_equal(found, path);
	free(found);
	/* Another build ID: only the debuglink can match, CRC checked. */
	const uint8_t other[] = { 0xab, 0x00 };
	assert_null(elf_find_debug_file(dirs, other, sizeof(other), NULL, 0));
	assert_null(elf_find_debug_file(dirs, id, 1, NULL, 0));
	found = elf_find_debug_file(dirs, other, sizeof(other), "app.debug", crc);
	assert_non_null(found);
	snprintf(path, sizeof(path), "%s/app.debug", d2);
	assert_string_equal(found, path);
	free(found);
	assert_null(elf_find_debug_file(dirs, other, sizeof(other), "app.debug", crc ^ 1));
	assert_null(elf_find_debug_file(dirs, NULL, 0, "missing.debug", crc));
	/* Names that would leave the directories. */
	assert_null(elf_find_debug_file(dirs, NULL, 0, "../secret", crc));
	assert_null(elf_find_debug_file(dirs, NULL, 0, "d1/../../secret", crc));
	assert_null(elf_find_debug_file(dirs, NULL, 0, "..", crc));
	assert_null(elf_find_debug_file(dirs, NULL, 0, "", crc));
	const char *none[] = { NULL };
	assert_null(elf_find_debug_file(none, id, sizeof(id), "app.debug", crc));
}

/* A stripped program with a debuglink, its debug file found by CRC and
 * merged: the merged table has the program's local functions. */
static void test_merge_debug(void **state)
{
	char src[128], prog[128], dbg[128], stripped[128];
	const char *dirs[] = { tmpdir, NULL };
	struct run base, full;
	struct symtab *debug_t = NULL, *merged;
	struct file_image *img;
	struct elf_need need;
	struct nm_list l;
	size_t idlen, idlen2;
	uint32_t crc;
	char *found;

	snprintf(src, sizeof(src), "%s/prog.c", tmpdir);
	snprintf(prog, sizeof(prog), "%s/prog", tmpdir);
	snprintf(dbg, sizeof(dbg), "%s/prog.debug", tmpdir);
	snprintf(stripped, sizeof(stripped), "%s/prog.stripped", tmpdir);
	static const char code[] =
		"#include <stdio.h>\n"
		"static __attribute__((noinline)) int helper_one(int x) { return x * 3 + 1; }\n"
		"__attribute__((noinline)) int helper_two(int x) { return helper_one(x) ^ 5; }\n"
		"int main(int argc, char **argv) { printf(\"%d\\n\", helper_two(argc)); return 0; }\n";
	write_file(src, code, sizeof(code) - 1);
	sh("cc -O1 -g -Wl,--build-id -o %s %s", prog, src);
	sh("objcopy --only-keep-debug %s %s", prog, dbg);
	sh("cd %s && objcopy --strip-all --add-gnu-debuglink=prog.debug prog prog.stripped", tmpdir);

	base = run_path(stripped);
	assert_int_equal(base.rc, 0);
	assert_string_equal(symtab_debuglink(base.t, &crc), "prog.debug");
	const uint8_t *id = symtab_build_id(base.t, &idlen);
	assert_true(idlen == 20);
	struct symtab_lookup lk;
	l = run_nm(prog, false);
	size_t helper = l.n;
	for (size_t i = 0; i < l.n; i++)
		if (strcmp(l.s[i].name, "helper_one") == 0)
			helper = i;
	assert_true(helper < l.n);
	assert_int_not_equal(symtab_lookup(base.t, l.s[helper].addr, &lk) == 0 &&
				     strcmp(lk.name, "helper_one") == 0,
			     1);

	found = elf_find_debug_file(dirs, id, idlen, "prog.debug", crc);
	assert_non_null(found);
	assert_string_equal(found, dbg);
	img = file_image_open(found);
	assert_non_null(img);
	/* All bytes present: one step. */
	assert_int_equal(elf_analysis_step(img, &need, &debug_t, NULL), 0);
	file_image_free(img);
	free(found);
	assert_true(symtab_count(debug_t) >= 3);
	symtab_build_id(debug_t, &idlen2);
	assert_int_equal(idlen2, idlen);

	merged = symtab_merge_debug(base.t, debug_t);
	assert_non_null(merged);
	expect_lookup(merged, l.s[helper].addr + 1, "helper_one", 1);
	const uint8_t *mid = symtab_build_id(merged, &idlen2);
	assert_int_equal(idlen2, idlen);
	assert_memory_equal(mid, id, idlen);
	assert_string_equal(symtab_debuglink(merged, NULL), "prog.debug");
	/* The merge knows what the unstripped program knows. */
	full = run_path(prog);
	assert_int_equal(full.rc, 0);
	struct probe *pr = calloc(N_PROBES, sizeof(*pr));
	assert_non_null(pr);
	size_t np = make_probes(&l, pr);
	check_probes(merged, &l, pr, np);
	check_probes(full.t, &l, pr, np);
	check_segments(stripped, merged);
	free(pr);
	nm_free(&l);
	symtab_free(full.t);
	symtab_free(merged);
	symtab_free(debug_t);
	symtab_free(base.t);
}

static int setup(void **state)
{
	strcpy(tmpdir, "/tmp/sonde-elf-test-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_image),
		cmocka_unit_test(test_generated),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_find_debug_file),
		cmocka_unit_test(test_merge_debug),
	};

	return cmocka_run_group_tests_name("elf-symbols", tests, setup, teardown);
}
