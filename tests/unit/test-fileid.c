/* test-fileid.c - file IDs against an independent computation.
 *
 * The reference below builds head || tail || be64(size) as one buffer and
 * hashes it with one-shot EVP_Digest(), a different path from fileid.c's
 * incremental EVP_DigestUpdate() calls; fixed vectors pin the format
 * against Python's hashlib.
 */
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
#include <openssl/evp.h>

#include "fileid.h"

static char tmpdir[64];

static void reference_id(const uint8_t *data, size_t size, uint8_t out[FILEID_LEN])
{
	size_t part = size < 4096 ? size : 4096;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;
	uint8_t *buf = malloc(2 * part + 8);

	assert_non_null(buf);
	memcpy(buf, data, part);
	memcpy(buf + part, data + size - part, part);
	for (int i = 0; i < 8; i++)
		buf[2 * part + i] = (uint8_t)((uint64_t)size >> (56 - 8 * i));
	assert_int_equal(EVP_Digest(buf, 2 * part + 8, md, &md_len, EVP_sha256(), NULL), 1);
	assert_true(md_len >= FILEID_LEN);
	memcpy(out, md, FILEID_LEN);
	free(buf);
}

static void write_file(const char *path, const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, size), (ssize_t)size);
	assert_int_equal(close(fd), 0);
}

static uint8_t *pattern(size_t size, unsigned seed)
{
	uint8_t *d = malloc(size ? size : 1);
	uint32_t x = seed * 2654435761u + 1;

	assert_non_null(d);
	for (size_t i = 0; i < size; i++) {
		x = x * 1103515245u + 12345u;
		d[i] = (uint8_t)(x >> 16);
	}
	return d;
}

static void test_sizes(void **state)
{
	static const size_t sizes[] = { 0, 1, 4095, 4096, 4097, 8191, 8192, 100000 };
	char path[128];

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *d = pattern(sizes[i], (unsigned)i);
		uint8_t want[FILEID_LEN];
		struct fileid a, b;
		int fd;

		reference_id(d, sizes[i], want);
		fileid_from_buffer(d, sizes[i], &a);
		assert_memory_equal(a.bytes, want, FILEID_LEN);

		snprintf(path, sizeof(path), "%s/f%zu", tmpdir, sizes[i]);
		write_file(path, d, sizes[i]);
		assert_int_equal(fileid_from_path(path, &b), 0);
		assert_memory_equal(b.bytes, want, FILEID_LEN);

		/* fileid_from_fd leaves the file position alone. */
		fd = open(path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(lseek(fd, 1, SEEK_SET), 1);
		memset(&b, 0, sizeof(b));
		assert_int_equal(fileid_from_fd(fd, &b), 0);
		assert_memory_equal(b.bytes, want, FILEID_LEN);
		assert_int_equal(lseek(fd, 0, SEEK_CUR), 1);
		close(fd);
		unlink(path);
		free(d);
	}
}

static void test_real_file(void **state)
{
	const char *path = "/usr/bin/true";
	uint8_t want[FILEID_LEN];
	struct fileid id;
	struct stat st;
	uint8_t *d;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	d = malloc((size_t)st.st_size);
	assert_non_null(d);
	assert_int_equal(pread(fd, d, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	reference_id(d, (size_t)st.st_size, want);
	assert_int_equal(fileid_from_path(path, &id), 0);
	assert_memory_equal(id.bytes, want, FILEID_LEN);
	free(d);
}

/* Expected values from Debian's /usr/bin/python3:
 *   def h(d):
 *       n = min(4096, len(d))
 *       return hashlib.sha256(d[:n] + d[len(d)-n:]
 *                             + len(d).to_bytes(8, "big")).hexdigest()[:32]
 *   h(b"sonde\n")                                      -> 8c8d80...
 *   h(bytes((i*7+3) & 0xff for i in range(5000)))       -> 6b2b13...
 *   h(b"")                                             -> af5570...
 */
static void test_fixed_vectors(void **state)
{
	char path[128], hex[FILEID_HEX_LEN + 1];
	uint8_t big[5000];
	struct fileid id;

	snprintf(path, sizeof(path), "%s/fixed", tmpdir);
	write_file(path, (const uint8_t *)"sonde\n", 6);
	assert_int_equal(fileid_from_path(path, &id), 0);
	assert_string_equal(fileid_to_hex(&id, hex), "8c8d802eaf7a6cc2d3b5dcf0d6b45d18");

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)((i * 7 + 3) & 0xff);
	write_file(path, big, sizeof(big));
	assert_int_equal(fileid_from_path(path, &id), 0);
	assert_string_equal(fileid_to_hex(&id, hex), "6b2b1300713c5a2e3dd2b55a3a2c9eab");

	fileid_from_buffer(NULL, 0, &id);
	assert_string_equal(fileid_to_hex(&id, hex), "af5570f5a1810b7af78caf4bc70a660f");
	unlink(path);
}

static void test_errors(void **state)
{
	struct fileid id, orig;
	char path[128];

	memset(&orig, 0xa5, sizeof(orig));
	id = orig;
	snprintf(path, sizeof(path), "%s/missing", tmpdir);
	assert_int_equal(fileid_from_path(path, &id), -ENOENT);
	assert_int_equal(fileid_from_path(tmpdir, &id), -EINVAL); /* a directory */
	assert_int_equal(fileid_from_fd(-1, &id), -EINVAL);
	assert_memory_equal(&id, &orig, sizeof(id));
}

static void test_hex(void **state)
{
	char hex[FILEID_HEX_LEN + 1];
	struct fileid id, back, orig;

	for (int i = 0; i < FILEID_LEN; i++)
		id.bytes[i] = (uint8_t)(i * 17 + 1);
	fileid_to_hex(&id, hex);
	assert_int_equal(strlen(hex), FILEID_HEX_LEN);
	assert_int_equal(fileid_from_hex(hex, &back), 0);
	assert_memory_equal(back.bytes, id.bytes, FILEID_LEN);
	assert_int_equal(fileid_from_hex("00112233445566778899AABBCCDDEEFF", &back), 0);
	assert_int_equal(back.bytes[15], 0xff);

	memset(&orig, 0x5a, sizeof(orig));
	back = orig;
	assert_int_equal(fileid_from_hex("", &back), -EINVAL);
	assert_int_equal(fileid_from_hex("0011223344556677889900aabbccddee0", &back), -EINVAL);
	assert_int_equal(fileid_from_hex("0011223344556677889900aabbccdde", &back), -EINVAL);
	assert_int_equal(fileid_from_hex("0011223344556677889900aabbccddeg", &back), -EINVAL);
	assert_int_equal(fileid_from_hex(" 011223344556677889900aabbccddee", &back), -EINVAL);
	assert_int_equal(fileid_from_hex("0x11223344556677889900aabbccddee", &back), -EINVAL);
	assert_int_equal(fileid_from_hex(NULL, &back), -EINVAL);
	assert_memory_equal(&back, &orig, sizeof(back));
}

static int setup(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-fileid.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	return rmdir(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),	  cmocka_unit_test(test_real_file),
		cmocka_unit_test(test_fixed_vectors), cmocka_unit_test(test_errors),
		cmocka_unit_test(test_hex),
	};

	return cmocka_run_group_tests_name("fileid", tests, setup, teardown);
}
