/* test-interp-maps.c - sensor/interp_maps.c with fake map ops: configs
 * checked (format version, layout size, room), the runtime address
 * computed from the process's mapping of the configured file, processes
 * without the file removed, a later config marking the object pending. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cpython.h"
#include "interp_maps.h"

struct fake {
	uint32_t pid;
	struct sonde_interp_proc v;
	int updates, removes;
};

static int fake_update(void *ctx, uint32_t pid, const struct sonde_interp_proc *v)
{
	struct fake *f = ctx;

	f->pid = pid;
	f->v = *v;
	f->updates++;
	return 0;
}

static int fake_remove(void *ctx, uint32_t pid)
{
	struct fake *f = ctx;

	f->pid = pid;
	f->removes++;
	return 0;
}

static const struct interp_map_ops ops = { .update = fake_update, .remove = fake_remove };

static const uint8_t py[16] = { 1, 2, 3 };

static void test_configs_checked(void **state)
{
	struct fake f = { 0 };
	struct interp_maps *im = interp_maps_new(&ops, &f);
	struct sonde_cpython_offsets off = { .major = 3, .minor = 11 };
	struct interp_maps_stats st;
	uint8_t id[16] = { 0 };

	(void)state;
	assert_non_null(im);
	assert_false(interp_maps_take_pending(im));
	assert_int_equal(interp_maps_add_config(im, py, SONDE_INTERP_CPYTHON, SONDE_CPYTHON_FORMAT_VERSION + 1, 0, &off,
						sizeof(off)), -EBADMSG);
	assert_int_equal(interp_maps_add_config(im, py, SONDE_INTERP_CPYTHON, SONDE_CPYTHON_FORMAT_VERSION, 0, &off,
						sizeof(off) - 1), -EBADMSG);
	assert_false(interp_maps_take_pending(im));
	for (int i = 0; i < INTERP_MAPS_MAX_CONFIGS; i++) {
		id[0] = (uint8_t)i;
		assert_int_equal(interp_maps_add_config(im, id, SONDE_INTERP_CPYTHON, SONDE_CPYTHON_FORMAT_VERSION, 0,
							&off, sizeof(off)), 0);
	}
	id[0] = 0xff;
	assert_int_equal(interp_maps_add_config(im, id, SONDE_INTERP_CPYTHON, SONDE_CPYTHON_FORMAT_VERSION, 0, &off,
						sizeof(off)), -EBADMSG);
	/* The same file again replaces, needing no room. */
	id[0] = 3;
	assert_int_equal(interp_maps_add_config(im, id, SONDE_INTERP_CPYTHON, SONDE_CPYTHON_FORMAT_VERSION, 0, &off,
						sizeof(off)), 0);
	interp_maps_get_stats(im, &st);
	assert_int_equal(st.configs, INTERP_MAPS_MAX_CONFIGS);
	assert_int_equal(st.rejected, 3);
	assert_true(interp_maps_take_pending(im));
	assert_false(interp_maps_take_pending(im));
	interp_maps_free(im);
}

static void test_runtime_address(void **state)
{
	struct fake f = { 0 };
	struct interp_maps *im = interp_maps_new(&ops, &f);
	struct sonde_cpython_offsets off = { .major = 3, .minor = 11, .frame_code = 4 };
	struct interp_mapping maps[2] = {
		{ .start = 0x400000, .offset = 0x1000, .file_id = { 1, 2, 3 } },
		{ .start = 0x7f0000001000, .offset = 0x28000, .file_id = { 9, 9, 9 } },
	};
	struct interp_maps_stats st;

	(void)state;
	/* No config yet: nothing touched. */
	interp_maps_set_process(im, 42, maps, 2);
	assert_int_equal(f.updates + f.removes, 0);

	assert_int_equal(interp_maps_add_config(im, py, SONDE_INTERP_CPYTHON, SONDE_CPYTHON_FORMAT_VERSION, 0x556e38,
						&off, sizeof(off)), 0);
	interp_maps_set_process(im, 42, maps, 2);
	assert_int_equal(f.updates, 1);
	assert_int_equal(f.pid, 42);
	assert_int_equal(f.v.runtime_addr, 0x400000 - 0x1000 + 0x556e38);
	assert_int_equal(f.v.kind, SONDE_INTERP_CPYTHON);
	assert_int_equal(((const struct sonde_cpython_proc *)&f.v)->off.frame_code, 4);
	assert_int_equal(((const struct sonde_cpython_proc *)&f.v)->off.minor, 11);

	/* A process mapping only libc: its entry (if any) goes. */
	interp_maps_set_process(im, 43, &maps[1], 1);
	assert_int_equal(f.removes, 1);
	assert_int_equal(f.pid, 43);

	interp_maps_remove_process(im, 42);
	assert_int_equal(f.removes, 2);
	assert_int_equal(f.pid, 42);
	interp_maps_get_stats(im, &st);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.failures, 0);
	interp_maps_free(im);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_configs_checked),
		cmocka_unit_test(test_runtime_address),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
