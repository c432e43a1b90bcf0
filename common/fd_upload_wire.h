/* fd_upload_wire.h - the descriptor socket beside a symbolizer's Unix
 * socket (PATH + FD_UPLOAD_SUFFIX): a local client hands over a file it
 * wants symbolized as a sealed memfd (SCM_RIGHTS) instead of sending its
 * bytes in 4 MiB gRPC chunks, then calls Symbols.Upload with
 * by_descriptor set. One connection carries one hello and one reply.
 *
 * Only a memfd sealed against writes, growing and shrinking is taken: its
 * bytes cannot change after the symbolizer checked their file ID, reading
 * it cannot block (shmem, not a FUSE or network file), and a mapping of it
 * cannot fault with SIGBUS. The symbolizer gets bytes, not access to the
 * client's files (docs/security.md).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FD_UPLOAD_SUFFIX ".fd"
#define FD_UPLOAD_MAGIC "SONDEFD1" /* 8 bytes, no NUL on the wire */

/* The descriptor socket of the Unix socket at sock_path, into buf (size
 * bytes); false when it does not fit. */
static inline bool fd_upload_socket_path(const char *sock_path, char *buf, size_t size)
{
	return (size_t)snprintf(buf, size, "%s%s", sock_path, FD_UPLOAD_SUFFIX) < size;
}

/* Client to symbolizer, with exactly one descriptor attached. Host byte
 * order: both ends are on the same machine. */
struct fd_upload_hello {
	char magic[8];
	uint8_t file_id[16];
	uint64_t size; /* of the file, == the memfd's size */
};

/* Symbolizer to client: status 0 (held for Upload) or an errno value, and
 * a NUL-terminated reason. */
struct fd_upload_reply {
	uint32_t status;
	char message[124];
};
