/* fileserve.h - the sensor's half of ReadRange (the symbolizer's half is
 * symbolizer_read_range()): bytes of a file that a profiled process maps,
 * found by file ID in the registry, never by a path from the request. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "fileids.h"

/* Largest range served per request. */
#define FILESERVE_MAX_READ (4u << 20)

/* Reads up to length bytes at offset of the registered file id; a range
 * that runs past the end is cut there. length must be 1..max_read (and
 * max_read <= FILESERVE_MAX_READ). On success returns 0 with an owned
 * malloc'd *ret_data (may be NULL when *ret_len is 0).
 * Errors: -EPROTO the request contradicts what the sensor told the
 * symbolizer (bad length, offset past the registered size): end the stream;
 * -ENOENT the ID is not registered (or no longer); -ESTALE the file changed
 * since it was registered; -EIO/-ENOMEM read failures. */
int sensor_serve_read_range(struct fileids *f, const struct fileid *id, uint64_t offset,
			    uint32_t length, uint32_t max_read, void **ret_data, size_t *ret_len);
