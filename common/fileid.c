/* fileid.c - file IDs (see fileid.h), compatible with OpenTelemetry's
 * htlhash ("head, tail, length").
 *
 * ID = first 16 bytes of SHA-256(head || tail || be64(size)), where
 * head = the first min(4096, size) bytes and tail = the last
 * min(4096, size) bytes. Head and tail are hashed as they are even when
 * they overlap: a file smaller than 8192 bytes contributes some bytes
 * twice, and one smaller than 4096 bytes is hashed twice in full. That is
 * what the OpenTelemetry profiler does, so the IDs match the ones other
 * tools compute for the same file.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "fileid.h"

#define FILEID_PART 4096

static int fileid_hash(const void *head, size_t head_len, const void *tail, size_t tail_len,
		       uint64_t size, struct fileid *ret_id)
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned char be[8];
	unsigned int digest_len = 0;
	EVP_MD_CTX *md = NULL;
	int err;

	for (int i = 0; i < 8; i++)
		be[i] = (unsigned char)(size >> (56 - 8 * i));

	md = EVP_MD_CTX_new();
	if (!md) {
		err = -ENOMEM;
		goto cleanup;
	}
	if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(md, head, head_len) != 1 ||
	    EVP_DigestUpdate(md, tail, tail_len) != 1 || EVP_DigestUpdate(md, be, sizeof(be)) != 1 ||
	    EVP_DigestFinal_ex(md, digest, &digest_len) != 1 || digest_len < FILEID_LEN) {
		err = -EIO;
		goto cleanup;
	}
	memcpy(ret_id->bytes, digest, FILEID_LEN);
	err = 0;
cleanup:
	EVP_MD_CTX_free(md);
	return err;
}

/* Reads exactly len bytes at off; a file that shrank under us is -EIO. */
static int pread_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

int fileid_from_fd(int fd, struct fileid *ret_id)
{
	unsigned char head[FILEID_PART], tail[FILEID_PART];
	struct stat st;
	size_t part;
	uint64_t size;
	int err;

	if (fd < 0 || !ret_id)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	size = (uint64_t)st.st_size;
	part = size < FILEID_PART ? (size_t)size : FILEID_PART;

	err = pread_full(fd, head, part, 0);
	if (err < 0)
		return err;
	err = pread_full(fd, tail, part, (off_t)(size - part));
	if (err < 0)
		return err;
	return fileid_hash(head, part, tail, part, size, ret_id);
}

int fileid_from_path(const char *path, struct fileid *ret_id)
{
	int fd = -1;
	int err;

	if (!path || !ret_id)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		err = -errno;
		goto cleanup;
	}
	err = fileid_from_fd(fd, ret_id);
cleanup:
	if (fd >= 0)
		close(fd);
	return err;
}

void fileid_from_buffer(const void *data, size_t size, struct fileid *ret_id)
{
	size_t part = size < FILEID_PART ? size : FILEID_PART;
	const unsigned char *p = data;
	static const unsigned char empty[1];

	if (!p)
		p = empty; /* size must then be 0 */
	/* SHA-256 over memory only fails on allocation failure; an all-zero
	 * ID is then returned rather than garbage (the caller cannot be told,
	 * the signature is void). */
	if (fileid_hash(p, part, p + size - part, part, (uint64_t)size, ret_id) < 0)
		memset(ret_id->bytes, 0, FILEID_LEN);
}

char *bytes_to_hex(const uint8_t *bytes, size_t n, char *buf)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		buf[2 * i] = digits[bytes[i] >> 4];
		buf[2 * i + 1] = digits[bytes[i] & 0xf];
	}
	buf[2 * n] = '\0';
	return buf;
}

char *fileid_to_hex(const struct fileid *id, char *buf)
{
	return bytes_to_hex(id->bytes, FILEID_LEN, buf);
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int fileid_from_hex(const char *hex, struct fileid *ret_id)
{
	struct fileid id;

	if (!hex || !ret_id)
		return -EINVAL;
	for (size_t i = 0; i < FILEID_LEN; i++) {
		int hi, lo;

		/* A NUL ends the string early and fails here too. */
		hi = hex_value(hex[2 * i]);
		if (hi < 0)
			return -EINVAL;
		lo = hex_value(hex[2 * i + 1]);
		if (lo < 0)
			return -EINVAL;
		id.bytes[i] = (uint8_t)(hi << 4 | lo);
	}
	if (hex[FILEID_HEX_LEN] != '\0')
		return -EINVAL;
	*ret_id = id;
	return 0;
}
