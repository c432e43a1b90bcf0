/* test-hotspot-layout.c - symbolizer/interp/hotspot/hotspot_vmstructs.c and
 * hotspot_layout.c on Debian's real OpenJDK 17 libjvm.so: the tables are
 * read from the file with relocations applied and field offsets decoded
 * from the static initializer; the values match what the running JVM's
 * own tables hold (checked against the serviceability agent's view,
 * written down here); the same answers come from a sparse image filled
 * only with the ranges hotspot_vm_need() asked for; a damaged file gives
 * an error, never a crash. Skipped when no JDK 17 is installed. Debian
 * 13's JDK 21 and Debian 11's JDK 11 (tests/workload/fetch-jdk, found by
 * SONDE_JDK21 and SONDE_JDK11 as tests/run exports them) are read field
 * by field too: their values are what test_hotspot_frames.py walks
 * against JFR's, and an independent reading of the tables gave. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hotspot_layout.h"
#include "hotspot_vmstructs.h"
#include "interp_kinds.h"
#include "interp_loader.h"
#include "interp_ops.h"

#define LIBJVM "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"

static struct file_image *open_jvm(void)
{
	if (access(LIBJVM, R_OK) != 0)
		return NULL;
	return file_image_open(LIBJVM);
}

static void test_queries_on_real_libjvm(void **state)
{
	struct hotspot_vm_query q[] = {
		{ HOTSPOT_VM_OFFSET, "Method", "_constMethod", false, 0 },
		{ HOTSPOT_VM_OFFSET, "ConstMethod", "_name_index", false, 0 },
		{ HOTSPOT_VM_OFFSET, "CodeBlob", "_frame_size", false, 0 },
		{ HOTSPOT_VM_OFFSET, "nmethod", "_compile_id", false, 0 },
		{ HOTSPOT_VM_OFFSET, "Symbol", "_hash_and_refcount", false, 0 }, /* a 0 offset */
		{ HOTSPOT_VM_ADDRESS, "CodeCache", "_low_bound", false, 0 },
		{ HOTSPOT_VM_SIZE, NULL, "ConstMethod", false, 0 },
		{ HOTSPOT_VM_INT, NULL, "frame::interpreter_frame_sender_sp_offset", false, 0 },
		{ HOTSPOT_VM_LONG, NULL, "markWord::hash_mask", false, 0 },
		{ HOTSPOT_VM_OFFSET, "Method", "_no_such_field", false, 0 },
		{ HOTSPOT_VM_OFFSET, "CodeCache", "_low_bound", false, 0 }, /* static: no offset */
	};
	struct file_image *img = open_jvm();
	struct elf_need need = { 0 };
	const char *reason = NULL;

	(void)state;
	if (!img)
		skip();
	assert_int_equal(hotspot_vm_need(img, &need, &reason), 0);
	assert_int_equal(hotspot_vm_read(img, q, sizeof(q) / sizeof(q[0]), &reason), 0);
	assert_true(q[0].found);
	assert_int_equal(q[0].value, 8);
	assert_int_equal(q[1].value, 34);
	assert_int_equal(q[2].value, 28);
	assert_int_equal(q[3].value, 304);
	assert_true(q[4].found);
	assert_int_equal(q[4].value, 0);
	assert_int_equal(q[5].value, 0x131c620);
	assert_int_equal(q[6].value, 48);
	assert_int_equal(q[7].value, -1);
	assert_true(q[8].found);
	assert_false(q[9].found);
	assert_false(q[10].found);
	file_image_free(img);
}

static void check_jdk17(const struct hotspot_layout *l, uint64_t root)
{
	const struct sonde_hotspot_offsets *o = &l->off;

	assert_int_equal(l->major, 17);
	assert_int_equal(l->root_offset, root); /* CodeCache::_heaps */
	assert_int_equal(o->codecache_heaps_static, 0);
	assert_int_equal(o->codecache_high_static, 0x18);
	assert_int_equal(o->codecache_low_static, 0x20);
	assert_int_equal(o->growable_len, 0);
	assert_int_equal(o->growable_data, 8);
	assert_int_equal(o->heap_memory, 8);
	assert_int_equal(o->heap_segmap, 120);
	assert_int_equal(o->heap_log2_segment, 256);
	assert_int_equal(o->vs_low, 16);
	assert_int_equal(o->vs_high, 24);
	assert_int_equal(o->blob_name, 96);
	assert_int_equal(o->blob_frame_size, 28);
	assert_int_equal(o->blob_frame_complete, 20);
	assert_int_equal(o->blob_code_begin, 32);
	assert_int_equal(o->nmethod_method, 112);
	assert_int_equal(o->nmethod_scopes_data, 120);
	assert_int_equal(o->nmethod_metadata, 260);
	assert_int_equal(o->nmethod_scopes_pcs, 268);
	assert_int_equal(o->nmethod_dependencies, 272);
	assert_int_equal(o->method_const, 8);
	assert_int_equal(o->cmethod_constants, 8);
	assert_int_equal(o->cmethod_flags, 28);
	assert_int_equal(o->cmethod_code_size, 32);
	assert_int_equal(o->cmethod_name_index, 34);
	assert_int_equal(o->cmethod_sig_index, 36);
	assert_int_equal(o->cpool_holder, 24);
	assert_int_equal(o->cpool_source_index, 54);
	assert_int_equal(o->klass_name, 24);
	assert_int_equal(o->symbol_length, 4);
	assert_int_equal(o->symbol_body, 6);
	assert_int_equal(o->heapblock_size, 16);
	assert_int_equal(o->cmethod_size, 48);
	assert_int_equal(o->cpool_size, 72);
	assert_int_equal(o->cmethod_has_lines, 1);
	assert_int_equal(o->frame_method_slot, 3);
	assert_int_equal(o->frame_bcp_slot, 8);
	assert_int_equal(o->frame_sender_sp_slot, 1);
	assert_int_equal(o->nmethod_compile_id4 * 4, 304); /* nmethod::_compile_id */
}

/* The libjvm.so of the JDK tests/workload/fetch-jdk unpacked in the
 * directory env names; NULL (the test skips) without one. */
static struct file_image *open_fetched_jvm(const char *env, const char *release, char *path,
					   size_t len)
{
	const char *dir = getenv(env);

	if (!dir || !*dir)
		return NULL;
	snprintf(path, len, "%s/root/usr/lib/jvm/java-%s-openjdk-amd64/lib/server/libjvm.so", dir,
		 release);
	if (access(path, R_OK) != 0)
		return NULL;
	return file_image_open(path);
}

/* Where JDK 21 differs from 17: CodeBlob's and CodeHeap's fields moved,
 * ConstMethod grew (its flags a ConstMethodFlags), nmethod's offsets. */
static void check_jdk21(const struct hotspot_layout *l)
{
	const struct sonde_hotspot_offsets *o = &l->off;

	assert_int_equal(l->major, 21);
	assert_int_equal(l->root_offset, 0x157a9f8); /* CodeCache::_heaps */
	assert_int_equal(o->codecache_high_static, 0x18);
	assert_int_equal(o->codecache_low_static, 0x20);
	assert_int_equal(o->growable_len, 0);
	assert_int_equal(o->growable_data, 8);
	assert_int_equal(o->heap_memory, 0);
	assert_int_equal(o->heap_segmap, 112);
	assert_int_equal(o->heap_log2_segment, 248);
	assert_int_equal(o->blob_name, 64);
	assert_int_equal(o->blob_frame_size, 88);
	assert_int_equal(o->blob_frame_complete, 80);
	assert_int_equal(o->blob_code_begin, 8);
	assert_int_equal(o->nmethod_method, 112);
	assert_int_equal(o->nmethod_metadata, 268);
	assert_int_equal(o->nmethod_scopes_pcs, 276);
	assert_int_equal(o->nmethod_dependencies, 280);
	assert_int_equal(o->cmethod_flags, 28); /* ConstMethod::_flags._flags */
	assert_int_equal(o->cmethod_code_size, 34);
	assert_int_equal(o->cmethod_name_index, 36);
	assert_int_equal(o->cmethod_sig_index, 38);
	assert_int_equal(o->cpool_source_index, 54);
	assert_int_equal(o->symbol_length, 4);
	assert_int_equal(o->cmethod_size, 56);
	assert_int_equal(o->cpool_size, 72);
	assert_int_equal(o->cmethod_has_lines, 1); /* ConstMethodFlags::_misc_has_linenumber_table */
	assert_int_equal(o->frame_method_slot, 3);
	assert_int_equal(o->frame_bcp_slot, 8);
	assert_int_equal(o->frame_sender_sp_slot, 1);
	assert_int_equal(o->nmethod_compile_id4 * 4, 308);
}

/* Where JDK 11 differs from 17: offsets are the file's constant data (0
 * included: GenericGrowableArray::_len, Symbol::_length), the source file
 * index is InstanceKlass's, ConstMethod and nmethod are laid out
 * otherwise. */
static void check_jdk11(const struct hotspot_layout *l)
{
	const struct sonde_hotspot_offsets *o = &l->off;

	assert_int_equal(l->major, 11);
	assert_int_equal(l->root_offset, 0x12586c8); /* CodeCache::_heaps */
	assert_int_equal(o->codecache_high_static, 0x18);
	assert_int_equal(o->codecache_low_static, 0x20);
	assert_int_equal(o->growable_len, 0);
	assert_int_equal(o->growable_data, 24);
	assert_int_equal(o->heap_memory, 8);
	assert_int_equal(o->heap_segmap, 120);
	assert_int_equal(o->heap_log2_segment, 256);
	assert_int_equal(o->blob_name, 96);
	assert_int_equal(o->blob_frame_size, 28);
	assert_int_equal(o->blob_code_begin, 32);
	assert_int_equal(o->nmethod_metadata, 292);
	assert_int_equal(o->nmethod_scopes_pcs, 300);
	assert_int_equal(o->nmethod_dependencies, 304);
	assert_int_equal(o->cmethod_flags, 36);
	assert_int_equal(o->cmethod_code_size, 40);
	assert_int_equal(o->cmethod_name_index, 42);
	assert_int_equal(o->cmethod_sig_index, 44);
	assert_int_equal(o->cpool_source_index, SONDE_HOTSPOT_SOURCE_IN_KLASS + 298);
	assert_int_equal(o->klass_name, 24);
	assert_int_equal(o->symbol_length, 0);
	assert_int_equal(o->symbol_body, 6);
	assert_int_equal(o->cmethod_size, 56);
	assert_int_equal(o->cpool_size, 64);
	assert_int_equal(o->cmethod_has_lines, 1);
	assert_int_equal(o->frame_method_slot, 3);
	assert_int_equal(o->frame_bcp_slot, 8);
	assert_int_equal(o->frame_sender_sp_slot, 1);
	assert_int_equal(o->nmethod_compile_id4 * 4, 324);
}

static void test_layout_of_fetched_libjvms(void **state)
{
	static const struct {
		const char *env, *release;
		void (*check)(const struct hotspot_layout *);
	} jdks[] = { { "SONDE_JDK21", "21", check_jdk21 }, { "SONDE_JDK11", "11", check_jdk11 } };
	char path[4096];
	int tested = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(jdks) / sizeof(jdks[0]); i++) {
		struct file_image *img = open_fetched_jvm(jdks[i].env, jdks[i].release, path,
							  sizeof(path));
		struct hotspot_layout l;
		struct interp_data d;
		const char *reason = NULL;

		if (!img)
			continue;
		assert_int_equal(hotspot_layout_read(img, &l, &reason), 0);
		jdks[i].check(&l);
		assert_int_equal(interp_loader_analyse(img, path, &d, &reason), 0);
		assert_int_equal(d.major, l.major);
		assert_memory_equal(d.data + 1, &l.off, sizeof(l.off));
		file_image_free(img);
		tested++;
	}
	if (!tested)
		skip();
}

static void test_layout_of_real_libjvm(void **state)
{
	struct file_image *img = open_jvm();
	struct hotspot_layout l;
	const char *reason = NULL;

	(void)state;
	if (!img)
		skip();
	assert_int_equal(hotspot_layout_read(img, &l, &reason), 0);
	check_jdk17(&l, 0x131c600);
	file_image_free(img);
}

/* Through the ops table, as the analysis runs it: the Data carries the
 * config, and config() hands it out with the runtime offset. */
static void test_loader_and_config(void **state)
{
	struct file_image *img = open_jvm();
	struct interp_data d;
	struct interp_config c;
	const char *reason = NULL;

	(void)state;
	if (!img)
		skip();
	assert_true(interp_loader_wants(LIBJVM));
	assert_false(interp_loader_wants("/usr/lib/libjvm.so.1"));
	assert_int_equal(interp_loader_analyse(img, LIBJVM, &d, &reason), 0);
	assert_int_equal(d.kind, SONDE_INTERP_HOTSPOT);
	assert_int_equal(d.major, 17);
	assert_int_equal(d.data_len, 1 + sizeof(struct sonde_hotspot_offsets));
	assert_int_equal(d.data[0], SONDE_HOTSPOT_FORMAT_VERSION);
	assert_int_equal(interp_ops_of(d.kind)->config(&d, &c), 0);
	assert_int_equal(c.format_version, SONDE_HOTSPOT_FORMAT_VERSION);
	assert_int_equal(c.runtime_offset, 0x131c600);
	assert_int_equal(c.layout_len, sizeof(struct sonde_hotspot_offsets));
	assert_memory_equal(c.layout, d.data + 1, c.layout_len);
	assert_string_equal(interp_kind_name(SONDE_INTERP_HOTSPOT), "jvm");
	d.data[0]++; /* a row of another format */
	assert_int_equal(interp_ops_of(d.kind)->config(&d, &c), -EPROTONOSUPPORT);
	d.data[0]--;
	d.data_len = 3; /* a damaged cache row */
	assert_int_equal(interp_ops_of(d.kind)->config(&d, &c), -EPROTONOSUPPORT);
	file_image_free(img);
}

/* The analysis's way: a sparse image, filled only with what was asked
 * (headers first, as the symtab analysis does, then our ranges). */
static void test_sparse_fetch(void **state)
{
	struct file_image *whole = open_jvm(), *img;
	struct hotspot_layout l;
	const char *reason = NULL;
	uint64_t fetched = 0;
	int r = -EAGAIN, rounds = 0;

	(void)state;
	if (!whole)
		skip();
	img = file_image_new(file_image_size(whole));
	assert_non_null(img);
	while (r == -EAGAIN && rounds++ < 20) {
		struct elf_need need = { 0 };

		r = hotspot_layout_need(img, &need, &reason);
		for (size_t i = 0; i < need.n; i++) {
			assert_int_equal(file_image_put(img, need.ranges[i].offset,
							file_image_data(whole) + need.ranges[i].offset,
							need.ranges[i].length),
					 0);
			fetched += need.ranges[i].length;
		}
	}
	assert_int_equal(r, 0);
	/* .rela.dyn, .rodata, .data.rel.ro, .data and 280 KiB of
	 * initializers: well under a third of the 23 MiB file. */
	assert_true(fetched < (8u << 20));
	assert_int_equal(hotspot_layout_read(img, &l, &reason), 0);
	check_jdk17(&l, 0x131c600);
	file_image_free(img);
	file_image_free(whole);
}

/* A file without the tables, and damaged copies: errors, no crash. */
static void test_not_a_jvm_and_damage(void **state)
{
	struct file_image *whole = open_jvm(), *img;
	struct hotspot_layout l;
	struct elf_need need = { 0 };
	const char *reason = NULL;
	uint64_t size;
	uint8_t *copy;

	(void)state;
	img = file_image_open("/proc/self/exe");
	assert_non_null(img);
	assert_int_not_equal(hotspot_layout_need(img, &need, &reason), 0);
	assert_int_not_equal(hotspot_layout_read(img, &l, &reason), 0);
	assert_non_null(reason);
	file_image_free(img);
	if (!whole)
		skip();
	size = file_image_size(whole);
	copy = malloc(size);
	assert_non_null(copy);
	/* Every 4 KiB of the data segment and .rela.dyn overwritten with a
	 * pattern: offsets and pointers that lead anywhere. */
	for (unsigned pattern = 0; pattern < 3; pattern++) {
		memcpy(copy, file_image_data(whole), size);
		for (uint64_t off = 0x6038 + pattern * 1024; off < size; off += 4096)
			memset(copy + off, pattern == 0 ? 0xff : pattern == 1 ? 0x00 : 0x41, 64);
		img = file_image_new(size);
		assert_non_null(img);
		assert_int_equal(file_image_put(img, 0, copy, size), 0);
		reason = NULL;
		if (hotspot_layout_read(img, &l, &reason) < 0)
			assert_non_null(reason);
		file_image_free(img);
	}
	free(copy);
	file_image_free(whole);
}

/* A fuzz seed of tests/fuzz/make-hotspot-corpus.py as an image. */
static struct file_image *seed_image(const char *name)
{
	char path[4096];
	const char *root = getenv("SONDE_SOURCE_ROOT");
	struct file_image *img;
	uint8_t *in;
	FILE *f;
	long size;
	size_t pos = 5;

	snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/hotspot_vmstructs/%s",
		 root ? root : ".", name);
	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	in = malloc((size_t)size);
	assert_non_null(in);
	assert_int_equal(fread(in, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	img = file_image_new((uint64_t)in[1] | (uint64_t)in[2] << 8 | (uint64_t)in[3] << 16 |
			     (uint64_t)in[4] << 24);
	assert_non_null(img);
	while (pos + 6 <= (size_t)size) {
		uint32_t off = in[pos] | in[pos + 1] << 8 | in[pos + 2] << 16 |
			       (uint32_t)in[pos + 3] << 24;
		size_t len = in[pos + 4] | in[pos + 5] << 8;

		assert_int_equal(file_image_put(img, off, in + pos + 6, len), 0);
		pos += 6 + len;
	}
	free(in);
	return img;
}

/* The fuzz seeds: synthetic libjvms of JDK 17's values, read to the same
 * layout, in 17's shape (offsets stored by code) and in 11's (constant
 * offsets, 11's names); run without a JDK. */
static void test_synthetic_libjvm(void **state)
{
	struct hotspot_layout l;
	struct elf_need need = { 0 };
	const char *reason = NULL;
	struct file_image *img = seed_image("synthetic-jdk17");

	(void)state;
	assert_int_equal(hotspot_layout_need(img, &need, &reason), 0);
	assert_int_equal(hotspot_layout_read(img, &l, &reason), 0);
	check_jdk17(&l, 0x2e00);
	file_image_free(img);

	img = seed_image("synthetic-jdk11");
	assert_int_equal(hotspot_layout_need(img, &need, &reason), 0);
	assert_int_equal(hotspot_layout_read(img, &l, &reason), 0);
	assert_int_equal(l.major, 11);
	l.major = 17; /* the rest is 17's, but for the source file index */
	l.off.major = 17;
	assert_int_equal(l.off.cpool_source_index, SONDE_HOTSPOT_SOURCE_IN_KLASS + 298);
	l.off.cpool_source_index = 54;
	check_jdk17(&l, 0x2e00);
	file_image_free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_queries_on_real_libjvm),
		cmocka_unit_test(test_layout_of_real_libjvm),
		cmocka_unit_test(test_layout_of_fetched_libjvms),
		cmocka_unit_test(test_loader_and_config),
		cmocka_unit_test(test_sparse_fetch),
		cmocka_unit_test(test_not_a_jvm_and_damage),
		cmocka_unit_test(test_synthetic_libjvm),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
