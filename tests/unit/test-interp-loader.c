/* test-interp-loader.c - the interpreter Loader (symbolizer/interp/
 * interp_loader.c) on real interpreters: the image is filled the way the
 * service fills it (only what the symtab analysis asked for), and the
 * runtime's offset is checked against nm -D (its address) and
 * readelf -lW (the executable load segment it is measured from). Also: a non-interpreter
 * under an interpreter's name, an unknown version, other names.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "elf_analysis.h"
#include "file_image.h"
#include "interp_loader.h"

#define DEBIAN_PYTHON "/usr/bin/python3.11"
#define DEBIAN_LIBRUBY "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1"
#define PYENV_LIBPYTHON "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"

/* A sparse image of path holding only the ranges elf_analysis_step asked
 * for, as the service would have fetched them. */
static struct file_image *fetched_image(const char *path)
{
	struct file_image *whole = file_image_open(path), *img;
	struct symtab *t = NULL;
	int r = -EAGAIN;

	assert_non_null(whole);
	img = file_image_new(file_image_size(whole));
	assert_non_null(img);
	for (int step = 0; step < 64 && r == -EAGAIN; step++) {
		struct elf_need need = { 0 };

		r = elf_analysis_step(img, &need, &t, NULL);
		for (size_t i = 0; r == -EAGAIN && i < need.n; i++)
			assert_int_equal(file_image_put(img, need.ranges[i].offset,
							file_image_data(whole) + need.ranges[i].offset,
							need.ranges[i].length), 0);
	}
	assert_int_equal(r, 0);
	symtab_free(t);
	file_image_free(whole);
	return img;
}

/* symbol's offset as binutils see it: its address from nm -D, in the
 * coordinates of the executable PT_LOAD line of readelf -lW. */
static uint64_t binutils_offset_of(const char *path, const char *symbol)
{
	char cmd[512], line[512];
	uint64_t vaddr = 0, ret = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "nm -D --defined-only %s", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char type, name[256];
		uint64_t v;

		if (sscanf(line, "%" SCNx64 " %c %255s", &v, &type, name) == 3 &&
		    !strcmp(name, symbol))
			vaddr = v;
	}
	pclose(f);
	assert_int_not_equal(vaddr, 0);
	snprintf(cmd, sizeof(cmd), "readelf -lW %s", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		uint64_t off, va, pa, filesz, memsz;

		if (sscanf(line, " LOAD 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64
			   " 0x%" SCNx64, &off, &va, &pa, &filesz, &memsz) == 5 &&
		    strstr(line, " R E ") && !ret)
			ret = vaddr - va + off;
	}
	pclose(f);
	assert_int_not_equal(ret, 0);
	return ret;
}

static uint64_t binutils_offset(const char *path)
{
	return binutils_offset_of(path, "_PyRuntime");
}

static void check_interpreter(const char *path, const char *name)
{
	struct file_image *img;
	struct interp_data d;
	const char *reason = NULL;

	if (access(path, R_OK) < 0)
		skip();
	img = fetched_image(path);
	assert_true(interp_loader_wants(name));
	assert_int_equal(interp_loader_analyse(img, name, &d, &reason), 0);
	assert_int_equal(d.kind, INTERP_CPYTHON);
	assert_int_equal(d.major, 3);
	assert_int_equal(d.minor, 11);
	assert_int_equal(d.runtime_offset, binutils_offset(path));
	/* The same bytes under an unknown version's name: unsupported. */
	assert_int_equal(interp_loader_analyse(img, "/usr/bin/python3.99", &d, &reason),
			 -EPROTONOSUPPORT);
	assert_non_null(reason);
	file_image_free(img);
}

static void test_debian_stripped(void **state)
{
	(void)state;
	check_interpreter(DEBIAN_PYTHON, DEBIAN_PYTHON);
}

static void test_pyenv_libpython(void **state)
{
	(void)state;
	check_interpreter(PYENV_LIBPYTHON, PYENV_LIBPYTHON);
}

/* Debian's libruby-3.1.so.3.1: Ruby 3.1, its ruby_current_vm_ptr. */
static void test_debian_libruby(void **state)
{
	const char *path = DEBIAN_LIBRUBY;
	struct file_image *img;
	struct interp_data d;
	const char *reason = NULL;

	(void)state;
	if (access(path, R_OK) < 0)
		skip();
	img = fetched_image(path);
	assert_true(interp_loader_wants(path));
	assert_true(interp_loader_wants("libruby.so.3.1.2"));
	assert_false(interp_loader_wants("/usr/bin/ruby3.1"));
	assert_false(interp_loader_wants("libruby-static.a"));
	assert_false(interp_loader_wants("libruby-3.1.a"));
	assert_int_equal(interp_loader_analyse(img, path, &d, &reason), 0);
	assert_int_equal(d.kind, INTERP_RUBY);
	assert_int_equal(d.major, 3);
	assert_int_equal(d.minor, 1);
	assert_int_equal(d.runtime_offset, binutils_offset_of(path, "ruby_current_vm_ptr"));
	/* No layout for another version. */
	assert_int_equal(interp_loader_analyse(img, "libruby-3.2.so.3.2", &d, &reason),
			 -EPROTONOSUPPORT);
	assert_non_null(reason);
	file_image_free(img);
	/* A Ruby name without the root symbol. */
	img = fetched_image("/usr/bin/ls");
	assert_int_equal(interp_loader_analyse(img, "libruby-3.1.so.3.1", &d, &reason), -ENOENT);
	file_image_free(img);
}

static void test_not_interpreters(void **state)
{
	struct file_image *img = fetched_image("/usr/bin/ls");
	struct interp_data d;
	const char *reason = NULL;

	(void)state;
	/* An interpreter's name without _PyRuntime. */
	assert_int_equal(interp_loader_analyse(img, "/tmp/python3.11", &d, &reason), -ENOENT);
	assert_non_null(reason);
	/* Other names are not looked at. */
	assert_false(interp_loader_wants("/usr/bin/ls"));
	assert_false(interp_loader_wants("/usr/bin/python"));
	assert_true(interp_loader_wants("libpython3.12.so.1.0"));
	assert_int_equal(interp_loader_analyse(img, "/usr/bin/ls", &d, &reason), -ENOENT);
	file_image_free(img);
	/* Headers missing from the image: an error, not a crash. */
	img = file_image_new(4096);
	assert_non_null(img);
	assert_int_equal(interp_loader_analyse(img, "python3.11", &d, &reason), -EBADMSG);
	file_image_free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_debian_stripped),
		cmocka_unit_test(test_pyenv_libpython),
		cmocka_unit_test(test_debian_libruby),
		cmocka_unit_test(test_not_interpreters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
