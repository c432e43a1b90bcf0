/* fileid.h - the file ID: first 16 bytes of SHA-256(first 4096 bytes ||
 * last 4096 bytes || file size as big-endian u64). For files shorter than
 * 4096 bytes the "first" and "last" parts are both the whole file (as
 * OpenTelemetry's htlhash does). This is OpenTelemetry's
 * process.executable.build_id.htlhash.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FILEID_LEN 16
#define FILEID_HEX_LEN (2 * FILEID_LEN)

struct fileid {
	uint8_t bytes[FILEID_LEN];
};

/* Hashes an open file (borrowed fd, read with pread; position untouched).
 * Returns 0 or a negative errno; *ret_id untouched on failure. */
int fileid_from_fd(int fd, struct fileid *ret_id);
/* Same for a file at path (opened O_RDONLY|O_CLOEXEC). */
int fileid_from_path(const char *path, struct fileid *ret_id);
/* Same for bytes in memory (the whole file). */
void fileid_from_buffer(const void *data, size_t size, struct fileid *ret_id);
/* buf must hold FILEID_HEX_LEN + 1 bytes; returns buf. */
char *fileid_to_hex(const struct fileid *id, char *buf);
/* n bytes as lowercase hex into buf (2 * n + 1 bytes, NUL-terminated);
 * returns buf. For build IDs and other byte strings. */
char *bytes_to_hex(const uint8_t *bytes, size_t n, char *buf);
/* Parses exactly 32 hex digits. Returns 0 or -EINVAL. */
int fileid_from_hex(const char *hex, struct fileid *ret_id);
