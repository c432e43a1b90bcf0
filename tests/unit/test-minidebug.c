/* test-minidebug.c - MiniDebugInfo decompression (symbolizer/elf/
 * minidebug.c): a stream round-trips; one that inflates past
 * MINIDEBUG_MAX_OUT (a decompression bomb: 64 MiB + 1 from about 10 KiB)
 * or that asks liblzma for more than MINIDEBUG_MEMLIMIT is refused with
 * the outputs untouched; exactly MINIDEBUG_MAX_OUT is still taken. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lzma.h>

#include "minidebug.h"

/* An .xz stream (CRC64) of len bytes from data, malloc'd. */
static uint8_t *xz(const uint8_t *data, size_t len, size_t *ret_len)
{
	size_t cap = lzma_stream_buffer_bound(len), pos = 0;
	uint8_t *out = malloc(cap);

	assert_non_null(out);
	assert_int_equal(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, data, len, out, &pos, cap),
			 LZMA_OK);
	*ret_len = pos;
	return out;
}

/* n zero bytes, compressed. */
static uint8_t *xz_zeros(size_t n, size_t *ret_len)
{
	uint8_t *zeros = calloc(1, n), *out;

	assert_non_null(zeros);
	out = xz(zeros, n, ret_len);
	free(zeros);
	return out;
}

static void test_round_trip(void **state)
{
	uint8_t data[100000], *in, *out = NULL;
	size_t in_len, out_len = 0;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + i / 251);
	in = xz(data, sizeof(data), &in_len);
	assert_int_equal(minidebug_decompress(in, in_len, &out, &out_len), 0);
	assert_int_equal(out_len, sizeof(data));
	assert_memory_equal(out, data, sizeof(data));
	free(out);
	free(in);
}

static void test_bomb_refused(void **state)
{
	uint8_t *in, *out = (uint8_t *)state;
	size_t in_len, out_len = 7;

	in = xz_zeros(MINIDEBUG_MAX_OUT + 1ull, &in_len);
	assert_true(in_len < 64 * 1024); /* what makes it a bomb */
	assert_int_equal(minidebug_decompress(in, in_len, &out, &out_len), -EBADMSG);
	assert_ptr_equal(out, (uint8_t *)state);
	assert_int_equal(out_len, 7);
	free(in);
}

static void test_exactly_the_cap_taken(void **state)
{
	uint8_t *in, *out = NULL;
	size_t in_len, out_len = 0;

	in = xz_zeros(MINIDEBUG_MAX_OUT, &in_len);
	assert_int_equal(minidebug_decompress(in, in_len, &out, &out_len), 0);
	assert_int_equal(out_len, MINIDEBUG_MAX_OUT);
	free(out);
	free(in);
}

/* The first block's LZMA2 dictionary raised to 3 GiB (property 39) in its
 * header, whose CRC32 is then fixed: liblzma would need more than
 * MINIDEBUG_MEMLIMIT to decode it. */
static void test_memlimit_refused(void **state)
{
	static const uint8_t small[] = "a small payload, a small payload";
	uint8_t *in, *out = NULL;
	size_t in_len, out_len = 0, hdr, at;
	uint32_t crc;

	in = xz(small, sizeof(small), &in_len);
	/* Stream header (12 bytes), then the block header: size byte, flags,
	 * the sizes if the flags say so, then the filter flags: id 0x21
	 * (LZMA2), 1 property byte, the property. */
	hdr = ((size_t)in[12] + 1) * 4;
	at = 12 + 2;
	for (int bit = 0x40; bit <= 0x80; bit <<= 1) /* compressed, uncompressed size VLIs */
		if (in[13] & bit)
			while (in[at++] & 0x80)
				;
	assert_int_equal(in[at], 0x21);
	assert_int_equal(in[at + 1], 1);
	in[at + 2] = 39;
	crc = lzma_crc32(in + 12, hdr - 4, 0);
	for (int i = 0; i < 4; i++)
		in[12 + hdr - 4 + i] = (uint8_t)(crc >> (8 * i));
	assert_int_equal(minidebug_decompress(in, in_len, &out, &out_len), -EBADMSG);
	assert_null(out);
	free(in);
}

static void test_not_xz(void **state)
{
	static const uint8_t junk[] = "\177ELF not compressed at all";
	uint8_t *out = NULL;
	size_t out_len = 0;

	assert_int_equal(minidebug_decompress(junk, sizeof(junk), &out, &out_len), -EBADMSG);
	assert_int_equal(minidebug_decompress(junk, 0, &out, &out_len), -EBADMSG);
	assert_int_equal(minidebug_decompress(NULL, 5, &out, &out_len), -EBADMSG);
	assert_null(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_bomb_refused),
		cmocka_unit_test(test_exactly_the_cap_taken),
		cmocka_unit_test(test_memlimit_refused),
		cmocka_unit_test(test_not_xz),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
