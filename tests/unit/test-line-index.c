/* test-line-index.c - the source index (symbolizer/dwarf): LLVM-style
 * demangling, an index built from this very test binary (built with -g)
 * naming one of its functions with file and line, and the cache blob:
 * round trip, and damaged or truncated blobs refused without a crash; an
 * index built for a few addresses (line_index_build_for) answers them as
 * the whole index does. */
#include <errno.h>
#include <fcntl.h>
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

#include "demangle.h"
#include "line_index.h"
#include "line_index_format.h"

static int probe_line;

/* Its address is looked up in the index of this binary. */
__attribute__((noinline)) int line_index_probe(int x)
{
	probe_line = __LINE__;
	return x * 3 + probe_line;
}

extern char __executable_start;

static void expect_demangled(const char *mangled, const char *want)
{
	char *d = demangle(mangled);

	if (!want) {
		assert_null(d);
		return;
	}
	assert_non_null(d);
	assert_string_equal(d, want);
	free(d);
}

static void test_demangle_as_llvm_spells_it(void **state)
{
	(void)state;
	expect_demangled("_ZN3foo3barEv", "foo::bar()");
	expect_demangled("_Z3fooi.part.0", "foo(int) (.part.0)");
	expect_demangled("_Z3fooi.constprop.0.isra.0", "foo(int) (.constprop.0.isra.0)");
	expect_demangled("_ZZ4mainENKUlvE_clEv", "main::'lambda'()::operator()() const");
	expect_demangled("_ZZ4mainENKUlvE0_clEv", "main::'lambda0'()::operator()() const");
	expect_demangled("_ZltIiEbRKT_S2_", "bool operator<<int>(int const&, int const&)");
	expect_demangled("main", NULL);
	expect_demangled("_Zgarbage", NULL);
}

static void *read_file(const char *path, size_t *ret_size)
{
	struct stat st;
	void *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*ret_size = (size_t)st.st_size;
	return buf;
}

static void *read_self(size_t *ret_size)
{
	void *buf = read_file("/proc/self/exe", ret_size);

	assert_non_null(buf);
	return buf;
}

static struct line_index *index_of_self(void)
{
	struct line_index *ix = NULL;
	const char *reason = NULL;
	size_t size;
	void *buf = read_self(&size);

	assert_int_equal(line_index_build(buf, size, NULL, 0, NULL, 0, 0, &ix, &reason), 0);
	free(buf);
	assert_true(line_index_has_lines(ix));
	return ix;
}

static void test_names_a_function_of_this_binary(void **state)
{
	struct line_index *ix = index_of_self();
	struct line_frame fr[LINE_INDEX_MAX_FRAMES];
	/* A PIE links at 0: the run-time address minus the image start is
	 * the ELF virtual address. */
	uint64_t va = (uint64_t)((uintptr_t)&line_index_probe - (uintptr_t)&__executable_start);
	size_t n;

	(void)state;
	line_index_probe(1);
	n = line_index_lookup(ix, va + 4, fr, LINE_INDEX_MAX_FRAMES);
	assert_true(n >= 1);
	assert_string_equal(fr[n - 1].function, "line_index_probe");
	assert_non_null(fr[0].file);
	assert_non_null(strstr(fr[0].file, "test-line-index.c"));
	assert_true(fr[0].line >= (uint32_t)probe_line - 3 && fr[0].line <= (uint32_t)probe_line + 2);
	/* Far outside any function: nothing. */
	assert_int_equal(line_index_lookup(ix, 1ull << 60, fr, LINE_INDEX_MAX_FRAMES), 0);
	line_index_free(ix);
}

static void test_blob_round_trip_and_damage(void **state)
{
	struct line_index *ix = index_of_self(), *copy;
	struct line_frame fr[LINE_INDEX_MAX_FRAMES];
	uint64_t va = (uint64_t)((uintptr_t)&line_index_probe - (uintptr_t)&__executable_start);
	size_t size, n;
	uint8_t *blob = line_index_serialize(ix, &size);

	(void)state;
	assert_non_null(blob);
	copy = line_index_deserialize(blob, size);
	assert_non_null(copy);
	n = line_index_lookup(copy, va, fr, LINE_INDEX_MAX_FRAMES);
	assert_true(n >= 1);
	assert_string_equal(fr[n - 1].function, "line_index_probe");
	line_index_free(copy);
	/* Truncated: refused. */
	for (size_t cut = 0; cut < size; cut += size / 97 + 1)
		assert_null(line_index_deserialize(blob, cut));
	/* Damaged anywhere: refused, or loaded and safe to use. */
	for (size_t i = 0; i < size; i += size / 2003 + 1) {
		uint8_t saved = blob[i];

		blob[i] ^= 0xa5;
		copy = line_index_deserialize(blob, size);
		if (copy) {
			for (uint64_t a = 0; a < 1u << 16; a += 97)
				line_index_lookup(copy, a, fr, LINE_INDEX_MAX_FRAMES);
			line_index_free(copy);
		}
		blob[i] = saved;
	}
	/* Another version: refused, so the file is indexed again. */
	blob[4]++;
	assert_null(line_index_deserialize(blob, size));
	free(blob);
	line_index_free(ix);
}

static uint64_t next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* The row a lookup finds for addr, by a scan: the last at or below it. */
static long scan_last(const struct lix_row *rows, uint32_t n, uint64_t addr)
{
	long last = -1;

	for (uint32_t i = 0; i < n && rows[i].addr <= addr; i++)
		last = (long)i;
	return last;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Lookups bounded by the bucket directories find what a scan finds: dense
 * and sparse rows, gaps, and keys at both ends of the address space. */
static void test_bucket_directory_agrees_with_a_scan(void **state)
{
	static const char pool[] = "f.c";
	const uint32_t files[] = { 0 };
	enum { N = 3000 };
	uint64_t keys[N], x = 0x9e3779b97f4a7c15ull;
	struct lix_row rows[N];
	struct line_frame fr[LINE_INDEX_MAX_FRAMES];
	uint32_t n = 0;

	(void)state;
	for (int i = 0; i < N; i++) {
		uint64_t r = next_rand(&x);

		/* Most in a small range (code), some anywhere. */
		keys[i] = i < 2 ? (i ? UINT64_MAX : 0) : (r % 8 ? 0x400000 + r % 200000 : r);
	}
	qsort(keys, N, sizeof(keys[0]), cmp_u64);
	for (int i = 0; i < N; i++) {
		if (n && keys[i] == rows[n - 1].addr)
			continue;
		rows[n] = (struct lix_row){ .addr = keys[i], .file = i % 11 ? 0 : LIX_NONE,
					    .line = (uint32_t)i + 1 };
		n++;
	}
	for (int round = 0; round < 2; round++) {
		/* pack, then the blob's way in: both build the directories. */
		struct line_index *ix = line_index_pack(LIX_FLAG_LINES, NULL, 0, NULL, 0, rows, n, NULL,
							0, files, 1, pool, sizeof(pool));
		size_t size;
		void *blob;

		assert_non_null(ix);
		if (round) {
			blob = line_index_serialize(ix, &size);
			line_index_free(ix);
			ix = line_index_deserialize(blob, size);
			free(blob);
			assert_non_null(ix);
		}
		for (int q = 0; q < 20000; q++) {
			uint64_t r = next_rand(&x), addr;
			long want;
			size_t got;

			switch (q % 4) {
			case 0: addr = rows[r % n].addr; break;
			case 1: addr = rows[r % n].addr - 1; break;
			case 2: addr = 0x400000 + r % 210000; break;
			default: addr = r; break;
			}
			want = scan_last(rows, n, addr);
			got = line_index_lookup(ix, addr, fr, LINE_INDEX_MAX_FRAMES);
			if (want < 0 || rows[want].file == LIX_NONE) {
				assert_int_equal(got, 0);
			} else {
				assert_int_equal(got, 1);
				assert_int_equal(fr[0].line, rows[want].line);
			}
		}
		line_index_free(ix);
	}
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* Lookups of addrs in part equal those in whole, frame by frame. */
static void expect_same_answers(const struct line_index *whole, const struct line_index *part,
				const uint64_t *addrs, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++) {
		struct line_frame a[LINE_INDEX_MAX_FRAMES], b[LINE_INDEX_MAX_FRAMES];
		size_t na = line_index_lookup(whole, addrs[i], a, LINE_INDEX_MAX_FRAMES);
		size_t nb = line_index_lookup(part, addrs[i], b, LINE_INDEX_MAX_FRAMES);

		if (na != nb)
			fail_msg("%s %#llx: %zu frames whole, %zu partial", path,
				 (unsigned long long)addrs[i], na, nb);
		for (size_t k = 0; k < na; k++)
			if (!same_str(a[k].function, b[k].function) || !same_str(a[k].raw, b[k].raw) ||
			    !same_str(a[k].file, b[k].file) || a[k].line != b[k].line)
				fail_msg("%s %#llx frame %zu: %s %s:%u whole, %s %s:%u partial", path,
					 (unsigned long long)addrs[i], k, a[k].function, a[k].file,
					 a[k].line, b[k].function, b[k].file, b[k].line);
	}
}

/* Files with DWARF of their own: this binary, a copy of it with
 * compressed debug sections (libelf rewrites their section headers in the
 * buffer it reads: every build must leave the buffer as it was, since a
 * first answer and the whole index read the same image), and GCC's
 * sanitizer runtimes (C++ with deep inlining) when installed. */
static void test_partial_index_answers_as_the_whole(void **state)
{
	char zpath[] = "/tmp/test-line-index-z.XXXXXX";
	const char *const paths[] = { "/proc/self/exe", zpath,
				      "/usr/lib/x86_64-linux-gnu/libasan.so.8",
				      "/usr/lib/x86_64-linux-gnu/libtsan.so.2" };
	uint64_t x = 0x2545f4914f6cdd1dull;
	int files = 0, partial = 0, fd = mkstemp(zpath);
	char self[512], cmd[1200];
	ssize_t n_self = readlink("/proc/self/exe", self, sizeof(self) - 1);

	(void)state;
	assert_true(fd >= 0 && n_self > 0);
	close(fd);
	self[n_self] = 0;
	snprintf(cmd, sizeof(cmd), "objcopy --compress-debug-sections=zlib '%s' %s", self, zpath);
	assert_int_equal(system(cmd), 0);
	for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
		struct line_index *whole = NULL;
		const char *reason = NULL;
		size_t size, units_all = 0, hits = 0;
		void *buf = read_file(paths[p], &size), *pristine;

		if (!buf)
			continue;
		pristine = malloc(size);
		assert_non_null(pristine);
		memcpy(pristine, buf, size);
		assert_int_equal(line_index_build_for(buf, size, NULL, 0, NULL, 0, 0, NULL, 0,
						      LINE_INDEX_MAX_DIES, &units_all, &whole, &reason), 0);
		if (units_all < 2)
			fail_msg("%s: %zu units", paths[p], units_all);
		files++;
		for (int round = 0; round < 30; round++) {
			struct line_frame fr[LINE_INDEX_MAX_FRAMES];
			uint64_t addrs[64];
			size_t n = round % 3 == 0 ? 1 : round % 3 == 1 ? 7 : 64, units = 0;
			struct line_index *part = NULL;
			int err;

			/* Addresses in the file's first bytes, where its code
			 * is (some land in data or padding: those must agree
			 * too). */
			for (size_t i = 0; i < n; i++)
				addrs[i] = next_rand(&x) % (size < (16u << 20) ? size : (16u << 20));
			err = line_index_build_for(buf, size, NULL, 0, NULL, 0, 0, addrs, n,
						   LINE_INDEX_MAX_DIES, &units, &part, &reason);
			/* Wanting most units, a partial build declines. */
			if (err == -E2BIG && n > 1)
				continue;
			assert_int_equal(err, 0);
			partial += n > 1;
			if (n == 1 && units * 2 > units_all)
				fail_msg("%s: %zu of %zu units read for one address", paths[p], units, units_all);
			expect_same_answers(whole, part, addrs, n, paths[p]);
			for (size_t i = 0; i < n; i++)
				hits += line_index_lookup(whole, addrs[i], fr, LINE_INDEX_MAX_FRAMES) > 1;
			line_index_free(part);
		}
		/* Inline chains were compared, not only leaf names. */
		if (p > 1)
			assert_true(hits > 10);
		if (memcmp(buf, pristine, size) != 0)
			fail_msg("%s: a build changed the buffer it read", paths[p]);
		line_index_free(whole);
		free(pristine);
		free(buf);
	}
	unlink(zpath);
	assert_true(files >= 2);
	assert_true(partial >= 5); /* multi-address partial indexes were compared */
}

/* Past its DIE budget a partial build gives up rather than grow. */
static void test_partial_index_budget(void **state)
{
	struct line_index *ix = NULL;
	const char *reason = NULL;
	size_t size;
	void *buf = read_self(&size);
	uint64_t va = (uint64_t)((uintptr_t)&line_index_probe - (uintptr_t)&__executable_start);

	(void)state;
	assert_int_equal(line_index_build_for(buf, size, NULL, 0, NULL, 0, 0, &va, 1, 3, NULL, &ix,
					      &reason), -E2BIG);
	assert_null(ix);
	free(buf);
}

static void test_not_elf(void **state)
{
	char junk[256] = "not an ELF file";
	struct line_index *ix = NULL;
	const char *reason = NULL;

	(void)state;
	assert_int_equal(line_index_build(junk, sizeof(junk), NULL, 0, NULL, 0, 0, &ix, &reason), -EBADMSG);
	assert_non_null(reason);
	assert_null(ix);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_demangle_as_llvm_spells_it),
		cmocka_unit_test(test_names_a_function_of_this_binary),
		cmocka_unit_test(test_blob_round_trip_and_damage),
		cmocka_unit_test(test_bucket_directory_agrees_with_a_scan),
		cmocka_unit_test(test_partial_index_answers_as_the_whole),
		cmocka_unit_test(test_partial_index_budget),
		cmocka_unit_test(test_not_elf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
