/* test-line-index.c - the source index (symbolizer/dwarf): LLVM-style
 * demangling, an index built from this very test binary (built with -g)
 * naming one of its functions with file and line, and the cache blob:
 * round trip, and damaged or truncated blobs refused without a crash. */
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

static void *read_self(size_t *ret_size)
{
	struct stat st;
	void *buf;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*ret_size = (size_t)st.st_size;
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
		cmocka_unit_test(test_not_elf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
