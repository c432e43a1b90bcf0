/* test-pprof.c - the pprof encoder (symbolizer/export/pprof.c): a model
 * built with the pm_* builders is encoded, gunzipped with zlib and decoded
 * with protobuf-c from proto/pprof/profile.proto; every table is checked
 * against what went in (ids from 1, the main executable first, build IDs,
 * inline order, labels, values, period). Also: the main mapping guessed,
 * no period, the size bound,
 * an inconsistent model, an empty one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <cmocka.h>

#include "model.h"
#include "pprof.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile PProfile;

static const uint8_t exe_id[16] = { 0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
static const uint8_t lib_id[16] = { 0xbb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
#define LIB_ID_HEX "bb0102030405060708090a0b0c0d0e0f"
#define PERIOD_NS 10000000ull /* 100 Hz */
#define START_NS 1700000000000000000ull

static PProfile *decode(const uint8_t *gz, size_t len)
{
	z_stream z = { 0 };
	size_t cap = 1 << 20;
	uint8_t *raw = malloc(cap);
	PProfile *p;

	assert_non_null(raw);
	assert_true(len > 18 && gz[0] == 0x1f && gz[1] == 0x8b); /* a gzip header */
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)len;
	z.next_out = raw;
	z.avail_out = (uInt)cap;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	p = perftools__profiles__profile__unpack(NULL, z.total_out, raw);
	inflateEnd(&z);
	free(raw);
	assert_non_null(p);
	return p;
}

static const char *str(const PProfile *p, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < p->n_string_table);
	return p->string_table[i];
}

static const Perftools__Profiles__Function *func(const PProfile *p, uint64_t id)
{
	assert_true(id >= 1 && id <= p->n_function);
	assert_int_equal(p->function[id - 1]->id, id);
	return p->function[id - 1];
}

static const Perftools__Profiles__Location *loc(const PProfile *p, uint64_t id)
{
	assert_true(id >= 1 && id <= p->n_location);
	assert_int_equal(p->location[id - 1]->id, id);
	return p->location[id - 1];
}

static const Perftools__Profiles__Mapping *mapping(const PProfile *p, uint64_t id)
{
	assert_true(id >= 1 && id <= p->n_mapping);
	assert_int_equal(p->mapping[id - 1]->id, id);
	return p->mapping[id - 1];
}

/* The label key's value (str or, as text, num); NULL if absent. */
static const char *label(const PProfile *p, const Perftools__Profiles__Sample *s, const char *key,
			 char buf[32])
{
	for (size_t i = 0; i < s->n_label; i++) {
		if (strcmp(str(p, s->label[i]->key), key))
			continue;
		if (s->label[i]->str)
			return str(p, s->label[i]->str);
		snprintf(buf, 32, "%lld", (long long)s->label[i]->num);
		return buf;
	}
	return NULL;
}

/* The test model: a library mapped first (so the encoder must move the
 * executable to the front), an inline chain, a kernel frame, two threads. */
static void build(struct pmodel *m)
{
	uint32_t lib, exe, f_main, f_leaf, f_inl, f_kern, l_leaf, l_main, l_kern, st0, st1, proc;
	uint32_t s_comm, s_worker, s_exe, s_host;
	uint32_t stack0[2], stack1[3];

	assert_int_equal(pm_init(m), 0);
	assert_int_equal(pm_mapping(m, lib_id, "/usr/lib/libwork.so", NULL, 4096, &lib), 0);
	assert_int_equal(pm_mapping(m, exe_id, "/usr/bin/work", "0123abcd", 8192, &exe), 0);
	assert_int_equal(pm_function(m, "main", "main", "main.c", &f_main), 0);
	assert_int_equal(pm_function(m, "ns::leaf()", "_ZN2ns4leafEv", "leaf.cc", &f_leaf), 0);
	assert_int_equal(pm_function(m, "inlined_helper", NULL, "helper.h", &f_inl), 0);
	assert_int_equal(pm_function(m, "do_syscall_64", NULL, NULL, &f_kern), 0);
	{
		/* innermost (inlined) first, the containing function last */
		struct pm_line leaf_lines[2] = { { f_inl, 10 }, { f_leaf, 20 } };
		struct pm_line main_line = { f_main, 5 };
		struct pm_line kern_line = { f_kern, 0 };

		assert_int_equal(pm_location(m, lib + 1, 0x1234, PM_FRAME_NATIVE, leaf_lines, 2, &l_leaf), 0);
		assert_int_equal(pm_location(m, exe + 1, 0x5678, PM_FRAME_NATIVE, &main_line, 1, &l_main), 0);
		assert_int_equal(pm_location(m, 0, 0xffffffff81000000ull, PM_FRAME_KERNEL, &kern_line, 1,
					     &l_kern), 0);
	}
	stack0[0] = l_leaf;
	stack0[1] = l_main;
	stack1[0] = l_kern;
	stack1[1] = l_leaf;
	stack1[2] = l_main;
	assert_int_equal(pm_stack(m, stack0, 2, &st0), 0);
	assert_int_equal(pm_stack(m, stack1, 3, &st1), 0);
	assert_int_equal(pm_string(m, "work", &s_comm), 0);
	assert_int_equal(pm_string(m, "worker", &s_worker), 0);
	assert_int_equal(pm_string(m, "work", &s_exe), 0);
	assert_int_equal(pm_string(m, "node-1", &s_host), 0);
	{
		struct pm_process p = { .pid = 42, .comm = s_comm, .exe_name = s_exe,
					.host_name = s_host, .main_mapping = exe + 1 };
		struct pm_sample a = { .stack = st0, .tid = 43, .thread_name = s_worker, .count = 3,
				       .first_ns = START_NS, .last_ns = START_NS + 1000 };
		struct pm_sample b = { .stack = st1, .tid = 42, .thread_name = s_comm, .count = 2,
				       .first_ns = START_NS + 500, .last_ns = START_NS + 2000 };

		static const uint8_t span[24] = {0x4b,0xf9,0x2f,0x35,0x77,0xb3,0x4d,0xa6,0xa3,0xce,0x92,0x9d,0x0e,0x0e,0x47,0x36,0x00,0xf0,0x67,0xaa,0x0b,0xa9,0x02,0xb7};

		assert_int_equal(pm_process(m, &p, &proc), 0);
		a.process = b.process = proc;
		assert_int_equal(pm_link(m, span, &a.link), 0); /* a traced request's samples */
		assert_int_equal(pm_sample(m, &a), 0);
		assert_int_equal(pm_sample(m, &b), 0);
	}
	m->period_ns = PERIOD_NS;
	m->start_ns = START_NS;
	m->end_ns = START_NS + 60000000000ull;
}

static void test_round_trip(void **state)
{
	struct pmodel m;
	uint8_t *gz = NULL;
	size_t len = 0;
	PProfile *p;
	char buf[32];
	int64_t total = 0, cpu = 0;

	build(&m);
	assert_int_equal(pprof_encode(&m, 0, &gz, &len), 0);
	p = decode(gz, len);

	assert_string_equal(str(p, 0), "");
	assert_int_equal(p->n_sample_type, 2);
	assert_string_equal(str(p, p->sample_type[0]->type), "samples");
	assert_string_equal(str(p, p->sample_type[0]->unit), "count");
	assert_string_equal(str(p, p->sample_type[1]->type), "cpu");
	assert_string_equal(str(p, p->sample_type[1]->unit), "nanoseconds");
	assert_non_null(p->period_type);
	assert_string_equal(str(p, p->period_type->type), "cpu");
	assert_string_equal(str(p, p->period_type->unit), "nanoseconds");
	assert_int_equal(p->period, PERIOD_NS);
	assert_int_equal(p->time_nanos, START_NS);
	assert_int_equal(p->duration_nanos, 60000000000ll);

	/* The executable first, with its GNU build ID; the library names
	 * itself by its file ID. */
	assert_int_equal(p->n_mapping, 2);
	assert_string_equal(str(p, mapping(p, 1)->filename), "/usr/bin/work");
	assert_string_equal(str(p, mapping(p, 1)->build_id), "0123abcd");
	assert_string_equal(str(p, mapping(p, 2)->filename), "/usr/lib/libwork.so");
	assert_string_equal(str(p, mapping(p, 2)->build_id), LIB_ID_HEX);
	assert_int_equal(mapping(p, 2)->memory_start, 0);
	assert_true(mapping(p, 2)->memory_limit >= 4096);
	assert_true(mapping(p, 2)->has_functions && mapping(p, 2)->has_inline_frames);
	assert_true(mapping(p, 1)->has_line_numbers && !mapping(p, 1)->has_inline_frames);

	assert_int_equal(p->n_function, 4);
	assert_int_equal(p->n_location, 3);
	assert_int_equal(p->n_sample, 2);
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		const Perftools__Profiles__Location *leaf;
		bool kernel = s->n_location_id == 3;

		assert_int_equal(s->n_value, 2);
		total += s->value[0];
		cpu += s->value[1];
		assert_int_equal(s->value[1], s->value[0] * (int64_t)PERIOD_NS);
		assert_string_equal(label(p, s, "pid", buf), "42");
		assert_string_equal(label(p, s, "process", buf), "work");
		assert_string_equal(label(p, s, "host", buf), "node-1");
		assert_null(label(p, s, "container_id", buf));
		if (kernel) {
			const Perftools__Profiles__Location *k = loc(p, s->location_id[0]);

			assert_int_equal(s->value[0], 2);
			assert_string_equal(label(p, s, "tid", buf), "42");
			assert_string_equal(label(p, s, "comm", buf), "work");
			assert_null(label(p, s, "trace_id", buf));
			assert_int_equal(k->mapping_id, 0);
			assert_int_equal(k->address, 0xffffffff81000000ull);
			assert_int_equal(k->n_line, 1);
			assert_string_equal(str(p, func(p, k->line[0]->function_id)->name), "do_syscall_64");
		} else {
			assert_int_equal(s->n_location_id, 2);
			assert_int_equal(s->value[0], 3);
			assert_string_equal(label(p, s, "tid", buf), "43");
			assert_string_equal(label(p, s, "thread", buf), "worker");
			assert_string_equal(label(p, s, "comm", buf), "worker");
			assert_string_equal(label(p, s, "trace_id", buf),
					    "4bf92f3577b34da6a3ce929d0e0e4736");
			assert_string_equal(label(p, s, "span_id", buf), "00f067aa0ba902b7");
		}
		/* Leaf first, main last; the leaf's lines innermost first. */
		leaf = loc(p, s->location_id[s->n_location_id - 2]);
		assert_int_equal(leaf->address, 0x1234);
		assert_string_equal(str(p, mapping(p, leaf->mapping_id)->filename), "/usr/lib/libwork.so");
		assert_int_equal(leaf->n_line, 2);
		assert_string_equal(str(p, func(p, leaf->line[0]->function_id)->name), "inlined_helper");
		assert_int_equal(leaf->line[0]->line, 10);
		assert_string_equal(str(p, func(p, leaf->line[1]->function_id)->name), "ns::leaf()");
		assert_string_equal(str(p, func(p, leaf->line[1]->function_id)->system_name),
				    "_ZN2ns4leafEv");
		assert_string_equal(str(p, func(p, leaf->line[1]->function_id)->filename), "leaf.cc");
		assert_int_equal(leaf->line[1]->line, 20);
		{
			const Perftools__Profiles__Location *ml = loc(p, s->location_id[s->n_location_id - 1]);

			assert_int_equal(ml->mapping_id, 1);
			assert_int_equal(ml->line[0]->line, 5);
			assert_string_equal(str(p, func(p, ml->line[0]->function_id)->name), "main");
			assert_string_equal(str(p, func(p, ml->line[0]->function_id)->filename), "main.c");
		}
	}
	assert_int_equal(total, 5);
	assert_int_equal((uint64_t)total, m.total);
	assert_int_equal(cpu, 5 * (int64_t)PERIOD_NS);

	perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);
	pm_free(&m);
}

static void test_no_period(void **state)
{
	struct pmodel m;
	uint8_t *gz = NULL;
	size_t len = 0;
	PProfile *p;

	build(&m);
	m.period_ns = 0;
	assert_int_equal(pprof_encode(&m, 0, &gz, &len), 0);
	p = decode(gz, len);
	/* Without a period there is no time to give: counts only. */
	assert_int_equal(p->n_sample_type, 1);
	assert_null(p->period_type);
	for (size_t i = 0; i < p->n_sample; i++)
		assert_int_equal(p->sample[i]->n_value, 1);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);
	pm_free(&m);
}

/* No process knows its executable (the profile store does not keep it):
 * the mapping in the most samples that is not a shared library. */
static void test_main_mapping_guessed(void **state)
{
	struct pmodel m;
	uint8_t *gz = NULL;
	size_t len = 0;
	PProfile *p;

	build(&m);
	m.processes[0].main_mapping = 0;
	assert_int_equal(pprof_encode(&m, 0, &gz, &len), 0);
	p = decode(gz, len);
	assert_string_equal(str(p, mapping(p, 1)->filename), "/usr/bin/work");
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);
	pm_free(&m);
}

static void test_bounds_and_damage(void **state)
{
	struct pmodel m;
	uint8_t *gz = (uint8_t *)"untouched";
	size_t len = 7;

	build(&m);
	assert_int_equal(pprof_encode(&m, 64, &gz, &len), -E2BIG);
	assert_string_equal((char *)gz, "untouched");
	assert_int_equal(len, 7);
	m.samples[0].stack = 99;
	assert_int_equal(pprof_encode(&m, 0, &gz, &len), -EINVAL);
	m.samples[0].stack = 0;
	m.locations[0].first_line = 1000;
	assert_int_equal(pprof_encode(&m, 0, &gz, &len), -EINVAL);
	assert_int_equal(len, 7);
	pm_free(&m);
}

static void test_empty(void **state)
{
	struct pmodel m;
	uint8_t *gz = NULL;
	size_t len = 0;
	PProfile *p;

	assert_int_equal(pm_init(&m), 0);
	assert_int_equal(pprof_encode(&m, 0, &gz, &len), 0);
	p = decode(gz, len);
	assert_int_equal(p->n_sample, 0);
	assert_int_equal(p->n_sample_type, 1);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);
	pm_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_no_period),
		cmocka_unit_test(test_main_mapping_guessed),
		cmocka_unit_test(test_bounds_and_damage),
		cmocka_unit_test(test_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
