/* test-interp-records.c - symbolizer/interp/interp_records.c: the
 * per-session record table by (pid, address, type), its checksum match,
 * its bound (a full table starts over), refused records, forgetting a
 * pid; the little-endian reads and the printable copy of names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "interp_records.h"

/* A test record: 8 bytes address, 8 checksum, 1 type, 1 payload. */
struct rec {
	uint8_t addr[8], checksum[8], type, payload;
};

static int decode(const void *rec, size_t len, void *value, struct interp_records_key *key)
{
	const struct rec *r = rec;

	if (len != sizeof(*r) || r->payload == 0xff)
		return -EBADMSG;
	key->addr = interp_records_le64(r->addr);
	key->checksum = interp_records_le64(r->checksum);
	key->type = r->type;
	*(uint8_t *)value = r->payload;
	return 0;
}

static struct rec make(uint64_t addr, uint64_t checksum, uint8_t type, uint8_t payload)
{
	struct rec r = { .type = type, .payload = payload };

	for (int i = 0; i < 8; i++) {
		r.addr[i] = (uint8_t)(addr >> 8 * i);
		r.checksum[i] = (uint8_t)(checksum >> 8 * i);
	}
	return r;
}

static uint8_t payload(const struct interp_records *t, uint32_t pid, uint64_t addr, uint8_t type,
		       uint64_t checksum)
{
	const uint8_t *v = interp_records_get(t, pid, addr, type, checksum);

	return v ? *v : 0;
}

static void test_keys(void **state)
{
	struct interp_records *t = interp_records_new(8, 1, decode);
	struct rec a = make(0x1000, 77, 0, 1), b = make(0x1000, 0, 1, 2), c = make(0x1000, 78, 0, 3);

	assert_non_null(t);
	assert_int_equal(interp_records_put(t, 7, &a, sizeof(a)), 0);
	assert_int_equal(interp_records_put(t, 7, &b, sizeof(b)), 0);
	assert_int_equal(interp_records_count(t), 2);
	assert_int_equal(payload(t, 7, 0x1000, 0, 0), 1);
	assert_int_equal(payload(t, 7, 0x1000, 0, 77), 1);
	assert_null(interp_records_get(t, 7, 0x1000, 0, 78)); /* another checksum */
	assert_int_equal(payload(t, 7, 0x1000, 1, 0), 2);      /* another type */
	assert_null(interp_records_get(t, 8, 0x1000, 0, 0));   /* another process */
	assert_int_equal(interp_records_put(t, 7, &c, sizeof(c)), 0); /* reused address */
	assert_int_equal(payload(t, 7, 0x1000, 0, 0), 3);
	assert_int_equal(interp_records_count(t), 2);
	interp_records_free(t);
	interp_records_free(NULL);
}

static void test_refused(void **state)
{
	struct interp_records *t = interp_records_new(8, 1, decode);
	struct rec a = make(0x1000, 0, 0, 1), bad = make(0x1000, 0, 0, 0xff);

	assert_int_equal(interp_records_put(t, 7, &a, sizeof(a)), 0);
	assert_int_equal(interp_records_put(t, 7, &bad, sizeof(bad)), -EBADMSG);
	assert_int_equal(interp_records_put(t, 7, &a, 3), -EBADMSG);
	assert_int_equal(interp_records_refused(t), 2);
	assert_int_equal(payload(t, 7, 0x1000, 0, 0), 1); /* unchanged */
	interp_records_free(t);
	assert_null(interp_records_new(0, 1, decode));
	assert_null(interp_records_new(8, 1, NULL));
}

static void test_full_starts_over(void **state)
{
	struct interp_records *t = interp_records_new(100, 1, decode);
	struct rec r;

	for (uint64_t i = 0; i < 100; i++) {
		r = make(0x1000 + i, 0, 0, 1);
		assert_int_equal(interp_records_put(t, 1, &r, sizeof(r)), 0);
	}
	assert_int_equal(interp_records_count(t), 100);
	r = make(0x1000, 0, 0, 2); /* a known key replaces */
	assert_int_equal(interp_records_put(t, 1, &r, sizeof(r)), 0);
	assert_int_equal(interp_records_count(t), 100);
	r = make(0x9000, 0, 0, 3); /* a new key empties the full table first */
	assert_int_equal(interp_records_put(t, 1, &r, sizeof(r)), 0);
	assert_int_equal(interp_records_count(t), 1);
	assert_int_equal(payload(t, 1, 0x9000, 0, 0), 3);
	assert_null(interp_records_get(t, 1, 0x1001, 0, 0));
	interp_records_free(t);
}

static void test_forget_pid(void **state)
{
	struct interp_records *t = interp_records_new(1000, 1, decode);

	for (uint32_t pid = 1; pid <= 3; pid++)
		for (uint64_t i = 0; i < 300; i++) {
			struct rec r = make(0x1000 + i * 0x40, 0, 0, (uint8_t)pid);

			assert_int_equal(interp_records_put(t, pid, &r, sizeof(r)), 0);
		}
	interp_records_forget_pid(t, 2);
	assert_int_equal(interp_records_count(t), 600);
	assert_null(interp_records_get(t, 2, 0x1000, 0, 0));
	assert_int_equal(payload(t, 3, 0x1000 + 299 * 0x40, 0, 0), 3);
	assert_int_equal(payload(t, 1, 0x1000 + 5 * 0x40, 0, 0), 1);
	interp_records_free(t);
}

static void test_bytes(void **state)
{
	const uint8_t le[8] = { 1, 2, 3, 4, 5, 6, 7, 0x88 };
	char out[32];

	assert_int_equal(interp_records_le16(le), 0x0201);
	assert_int_equal(interp_records_le32(le), 0x04030201);
	assert_true(interp_records_le64(le) == 0x8807060504030201ULL);
	interp_records_copy_text(out, (const uint8_t *)"a;b\n\xff\xc3\xa9", 8, false, 0);
	assert_string_equal(out, "a?b??\xc3\xa9");
	interp_records_copy_text(out, (const uint8_t *)"ab\0cd", 5, true, 0);
	assert_string_equal(out, "ab...");
	interp_records_copy_text(out, (const uint8_t *)"java/lang/X;", 12, false,
				 INTERP_RECORDS_TEXT_DOTS);
	assert_string_equal(out, "java.lang.X?");
	interp_records_copy_text(out, (const uint8_t *)"(Ljava/X;)V", 11, false,
				 INTERP_RECORDS_TEXT_SEMIS);
	assert_string_equal(out, "(Ljava/X;)V");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_full_starts_over),
		cmocka_unit_test(test_forget_pid),
		cmocka_unit_test(test_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
