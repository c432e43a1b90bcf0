/* file_image.h - a sparse in-memory copy of a file that lives elsewhere
 * (on a sensor's node), filled range by range as byte ranges arrive.
 *
 * The image reserves size bytes of address space (not memory: pages that
 * are never written cost nothing) so that libelf can read it as one
 * buffer. Ranges that have not arrived read as zeros; the analysis asks for
 * every range before it trusts it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FILE_IMAGE_MAX_SIZE (4ULL << 30) /* files above 4 GiB are not analysed */

struct file_image;

/* NULL on failure (size 0 or over FILE_IMAGE_MAX_SIZE, or no memory). */
struct file_image *file_image_new(uint64_t size);
/* Image over a local file (a debug file in a configured directory): all of
 * it is present. NULL on failure, errno set. */
struct file_image *file_image_open(const char *path);
/* Image over a memfd sealed against shrinking and writes (F_SEAL_SHRINK,
 * F_SEAL_WRITE; else EPERM), borrowed: a client's file handed over by
 * descriptor. NULL on failure, errno set. */
struct file_image *file_image_map_sealed(int fd);
void file_image_free(struct file_image *img);

uint64_t file_image_size(const struct file_image *img);
/* The whole buffer (file_image_size bytes), borrowed. */
const uint8_t *file_image_data(const struct file_image *img);
/* Copies len bytes at off into the image. -ERANGE if outside the file,
 * -EPERM on a mapped image (file_image_open, _map_sealed, already whole),
 * -ENOMEM. */
int file_image_put(struct file_image *img, uint64_t off, const void *data, size_t len);
/* Whether every byte of [off, off+len) has arrived (false if outside). */
bool file_image_has(const struct file_image *img, uint64_t off, uint64_t len);
/* Bytes stored so far (for limits and statistics). */
uint64_t file_image_bytes_present(const struct file_image *img);
