/* test-export-model.c - the profile model's builders (deduplication,
 * sample merging) and the raw stack string (round trip, damaged input). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cgroup_ids.h"
#include "model.h"
#include "rawstack.h"

static void test_model_dedup(void **state)
{
	struct pmodel m;
	uint8_t id[16] = { 1, 2, 3 };
	uint32_t a, b, mp, mp2, f1, f2, l1, l2, st1, st2, proc;
	struct pm_line lines[2];
	struct pm_process p = { .pid = 42 };

	assert_int_equal(pm_init(&m), 0);
	assert_string_equal(m.strings[0], "");
	assert_int_equal(pm_string(&m, "x", &a), 0);
	assert_int_equal(pm_string(&m, "x", &b), 0);
	assert_int_equal(a, b);
	assert_int_equal(pm_string(&m, NULL, &b), 0);
	assert_int_equal(b, 0);

	assert_int_equal(pm_mapping(&m, id, "/usr/lib/libc.so.6", "abcd", 10, &mp), 0);
	assert_int_equal(pm_mapping(&m, id, "/other", "", 0, &mp2), 0);
	assert_int_equal(mp, mp2);
	assert_string_equal(m.strings[m.mappings[mp].path], "/usr/lib/libc.so.6");
	assert_string_equal(m.strings[m.mappings[mp].file_id], "01020300000000000000000000000000");

	assert_int_equal(pm_function(&m, "inner", "_Z5innerv", "a.c", &f1), 0);
	assert_int_equal(pm_function(&m, "outer", NULL, "a.c", &f2), 0);
	assert_int_equal(pm_function(&m, "inner", "_Z5innerv", "a.c", &a), 0);
	assert_int_equal(a, f1);
	assert_string_equal(m.strings[m.functions[f2].system_name], "outer");
	lines[0] = (struct pm_line){ f1, 10 };
	lines[1] = (struct pm_line){ f2, 20 };
	assert_int_equal(pm_location(&m, mp + 1, 0x1234, PM_FRAME_NATIVE, lines, 2, &l1), 0);
	assert_true(pm_find_location(&m, mp + 1, 0x1234, &a));
	assert_int_equal(a, l1);
	assert_false(pm_find_location(&m, 0, 0x1234, &a));
	assert_int_equal(m.locations[l1].n_lines, 2);
	assert_int_equal(m.lines[m.locations[l1].first_line + 1].line, 20);
	assert_int_equal(pm_location(&m, 0, 0xffffffff81000000ull, PM_FRAME_KERNEL, lines, 1, &l2),
			 0);
	assert_int_not_equal(l1, l2);

	uint32_t s1[] = { l2, l1 }, s2[] = { l1 };
	assert_int_equal(pm_stack(&m, s1, 2, &st1), 0);
	assert_int_equal(pm_stack(&m, s2, 1, &st2), 0);
	assert_int_not_equal(st1, st2);
	assert_int_equal(pm_stack(&m, s1, 2, &a), 0);
	assert_int_equal(a, st1);

	assert_int_equal(pm_process(&m, &p, &proc), 0);
	struct pm_sample smp = { .stack = st1, .process = proc, .tid = 43, .count = 2,
				 .first_ns = 2000, .last_ns = 3000 };
	assert_int_equal(pm_sample(&m, &smp), 0);
	smp.count = 5;
	smp.first_ns = 1000;
	smp.last_ns = 1500;
	assert_int_equal(pm_sample(&m, &smp), 0);
	smp.tid = 44;
	assert_int_equal(pm_sample(&m, &smp), 0);
	assert_int_equal(m.n_samples, 2);
	assert_int_equal(m.samples[0].count, 7);
	assert_int_equal(m.samples[0].first_ns, 1000);
	assert_int_equal(m.samples[0].last_ns, 3000);
	assert_int_equal(m.total, 12);
	assert_int_equal(m.start_ns, 1000);
	assert_int_equal(m.end_ns, 3000);
	pm_free(&m);
	pm_free(&m); /* a freed model frees again harmlessly */
}

static void test_rawstack_roundtrip(void **state)
{
	struct rawstack_builder b;
	struct rawstack_iter it;
	struct rawframe f = { .kind = RAW_KERNEL, .address = 0xffffffff81001234ull,
			      .name = "do_syscall_64", .name_len = 13 };
	uint8_t *raw;
	size_t len;

	rawstack_begin(&b);
	rawstack_push(&b, &f);
	f = (struct rawframe){ .kind = RAW_KERNEL, .address = 0xffffffff81000000ull };
	rawstack_push(&b, &f);
	f = (struct rawframe){ .kind = RAW_USER_FILE, .address = 0x4567, .file_id = { 9, 8, 7 } };
	rawstack_push(&b, &f);
	f = (struct rawframe){ .kind = RAW_USER_ANON, .address = 0x7fff0000 };
	rawstack_push(&b, &f);
	f = (struct rawframe){ .kind = RAW_INTERP, .address = 0x1234abcd5678ef00ull,
			       .name = "leaf (/a.py:4)", .name_len = 14 };
	rawstack_push(&b, &f);
	f = (struct rawframe){ .kind = RAW_INTERP + 1, .address = 0x77,
			       .name = "a.B.c (B.java:3)", .name_len = 16,
			       .system_name = "a.B.c(I)V", .system_name_len = 9 };
	rawstack_push(&b, &f);
	assert_int_equal(rawstack_end(&b, &raw, &len), 0);
	assert_int_equal(rawstack_count(raw, len), 6);

	assert_int_equal(rawstack_iter_init(&it, raw, len), 0);
	assert_int_equal(rawstack_next(&it, &f), 1);
	assert_int_equal(f.kind, RAW_KERNEL);
	assert_int_equal(f.name_len, 13);
	assert_memory_equal(f.name, "do_syscall_64", 13);
	assert_int_equal(rawstack_next(&it, &f), 1);
	assert_null(f.name);
	assert_int_equal(rawstack_next(&it, &f), 1);
	assert_int_equal(f.kind, RAW_USER_FILE);
	assert_int_equal(f.address, 0x4567);
	assert_int_equal(f.file_id[1], 8);
	assert_int_equal(rawstack_next(&it, &f), 1);
	assert_int_equal(f.address, 0x7fff0000);
	assert_int_equal(rawstack_next(&it, &f), 1);
	assert_int_equal(f.kind, RAW_INTERP);
	assert_int_equal(f.address, 0x1234abcd5678ef00ull);
	assert_int_equal(f.name_len, 14);
	assert_memory_equal(f.name, "leaf (/a.py:4)", 14);
	assert_null(f.system_name);
	assert_int_equal(rawstack_next(&it, &f), 1);
	assert_int_equal(f.kind, RAW_INTERP + 1); /* the flag byte is not the kind */
	assert_int_equal(f.address, 0x77);
	assert_int_equal(f.name_len, 16);
	assert_int_equal(f.system_name_len, 9);
	assert_memory_equal(f.system_name, "a.B.c(I)V", 9);
	assert_int_equal(rawstack_next(&it, &f), 0);
	/* The system name's flag on a kernel frame, and an empty system
	 * name, are damage. */
	{
		uint8_t bad[] = { RAWSTACK_VERSION, 1, 0, RAW_KERNEL | RAW_SYSTEM_NAME,
				  1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 'x' };
		uint8_t empty[] = { RAWSTACK_VERSION, 1, 0, RAW_INTERP | RAW_SYSTEM_NAME,
				    1, 2, 3, 4, 5, 6, 7, 8, 0, 0 };

		assert_int_equal(rawstack_count(bad, sizeof(bad)), -EBADMSG);
		assert_int_equal(rawstack_count(empty, sizeof(empty)), -EBADMSG);
	}

	/* Every truncation is rejected, never read past the end. */
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *t = malloc(cut ? cut : 1);

		memcpy(t, raw, cut);
		assert_true(rawstack_count(t, cut) < 0);
		free(t);
	}
	free(raw);

	/* An empty stack is a valid string of no frames. */
	rawstack_begin(&b);
	assert_int_equal(rawstack_end(&b, &raw, &len), 0);
	assert_int_equal(rawstack_count(raw, len), 0);
	free(raw);
}

static void test_rawstack_garbage(void **state)
{
	uint8_t buf[512];

	srand(7);
	for (int i = 0; i < 20000; i++) {
		size_t len = (size_t)rand() % sizeof(buf);

		for (size_t k = 0; k < len; k++)
			buf[k] = (uint8_t)rand();
		if (len)
			buf[0] = RAWSTACK_VERSION; /* get past the header often */
		int n = rawstack_count(buf, len);
		assert_true(n >= -EBADMSG && n <= RAWSTACK_MAX_FRAMES);
	}
}

/* Container IDs and pod UIDs of the cgroup drivers' layouts; near misses
 * are not IDs. */
static void test_cgroup_ids(void **state)
{
	static const char cid[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char text[512], c[CGROUP_IDS_CONTAINER_LEN + 1], pod[CGROUP_IDS_POD_UID_LEN + 1];

	(void)state;
	snprintf(text, sizeof(text), "0::/kubepods/burstable/pod3d4e5f6a-1234-5678-9abc-def012345678/%s",
		 cid);
	cgroup_ids_parse(text, c, pod);
	assert_string_equal(c, cid);
	assert_string_equal(pod, "3d4e5f6a-1234-5678-9abc-def012345678");
	snprintf(text, sizeof(text),
		 "0::/kubepods.slice/kubepods-besteffort.slice/"
		 "kubepods-besteffort-pod3D4E5F6A_1234_5678_9abc_def012345678.slice/"
		 "cri-containerd-%s.scope", cid);
	cgroup_ids_parse(text, c, pod);
	assert_string_equal(c, cid);
	assert_string_equal(pod, "3d4e5f6a-1234-5678-9abc-def012345678");
	snprintf(text, sizeof(text), "0::/system.slice/docker-%s.scope", cid);
	cgroup_ids_parse(text, c, pod);
	assert_string_equal(c, cid);
	assert_string_equal(pod, "");
	/* 65 hex digits, a mixed separator, a short group: none. */
	cgroup_ids_parse("0::/x/pod3d4e5f6a-1234_5678-9abc-def012345678/"
			 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0", c, pod);
	assert_string_equal(c, "");
	assert_string_equal(pod, "");
	cgroup_ids_parse("0::/pod3d4e5f6a-1234-5678-9abc-def01234567", c, pod);
	assert_string_equal(pod, "");
	cgroup_ids_parse(NULL, c, pod);
	assert_string_equal(c, "");
	assert_string_equal(pod, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_dedup),
		cmocka_unit_test(test_rawstack_roundtrip),
		cmocka_unit_test(test_rawstack_garbage),
		cmocka_unit_test(test_cgroup_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
