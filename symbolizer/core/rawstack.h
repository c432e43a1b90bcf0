/* rawstack.h - a stack as a sensor described it, in a compact byte
 * string: the identity of a stack in the profile store and in export
 * windows, kept so that exports can symbolize every frame with lines and
 * inlines (and better, once debug info arrives) long after the sensor's
 * stack IDs are gone. Kernel frames carry their name: kernel symbols are
 * per sensor and the snapshot may be gone when the stack is read.
 *
 * Layout (little-endian): u8 version (1), u16 frame count, then the
 * frames, leaf first, each a u8 kind and:
 *   RAW_USER_FILE    file ID (16 bytes), u64 offset in the file
 *   RAW_USER_ANON    u64 virtual address (no file mapped there)
 *   RAW_KERNEL       u64 address, u8 name length, the name (no NUL)
 *   RAW_INTERP + kind - 1
 *                    u64 key, u8 name length, the name: an interpreter
 *                    frame of that kind (bpf/interp.h) as ingest named it
 *                    (its runtime's name for it; the records that named
 *                    it were the process's); the key,
 *                    a hash of the name (and system name), tells
 *                    locations apart
 *   RAW_INTERP + kind - 1, or'ed with RAW_SYSTEM_NAME
 *                    the same, then u8 length (not 0) and the system
 *                    name: its runtime's own name of the function (a JVM
 *                    method with its descriptor)
 * Everything read back is checked: a damaged string is rejected whole.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RAWSTACK_VERSION 1
#define RAWSTACK_MAX_FRAMES 512 /* kernel + user */
#define RAWSTACK_MAX_NAME 255

enum rawframe_kind {
	RAW_USER_FILE = 1,
	RAW_USER_ANON = 2,
	RAW_KERNEL = 3,
	/* + interpreter kind (bpf/interp.h) - 1: 28 kinds fit */
	RAW_INTERP = 4,
	RAW_INTERP_LAST = 31,
	/* Or'ed into an interpreter frame's kind byte in the string: a
	 * system name follows the name. Never in struct rawframe's kind. */
	RAW_SYSTEM_NAME = 0x80,
};

/* The rawframe kind of an interpreter frame of kind (1 and up). */
static inline uint8_t rawframe_interp_kind(uint32_t kind)
{
	return (uint8_t)(RAW_INTERP + kind - 1);
}

/* The interpreter kind of a rawframe kind, or 0 when it is none. */
static inline uint32_t rawframe_interp_of(uint8_t raw_kind)
{
	return raw_kind >= RAW_INTERP && raw_kind <= RAW_INTERP_LAST ? raw_kind - RAW_INTERP + 1u
								     : 0;
}

struct rawframe {
	uint8_t kind;       /* enum rawframe_kind */
	uint8_t file_id[16];/* RAW_USER_FILE */
	uint64_t address;   /* file offset, virtual or kernel address */
	const char *name;   /* RAW_KERNEL, RAW_INTERP..: borrowed from the string, not NUL-terminated; may be NULL */
	uint8_t name_len;
	/* RAW_INTERP..: the system name, as name; NULL: none (the name is
	 * all there is) */
	const char *system_name;
	uint8_t system_name_len;
};

/* Builds a string frame by frame (leaf first). */
struct rawstack_builder {
	uint8_t *buf; /* owned */
	size_t len, cap;
	uint16_t n;
	int err; /* first error: -ENOMEM, -E2BIG (over RAWSTACK_MAX_FRAMES) */
};

void rawstack_begin(struct rawstack_builder *b);
void rawstack_push(struct rawstack_builder *b, const struct rawframe *f);
/* Returns 0 with the string in *ret and *ret_len (owned by the caller), or the
 * builder's error. Resets b either way. */
int rawstack_end(struct rawstack_builder *b, uint8_t **ret, size_t *ret_len);

struct rawstack_iter {
	const uint8_t *p, *end;
	uint16_t left;
};

/* Returns 0, or -EBADMSG if the header is wrong. */
int rawstack_iter_init(struct rawstack_iter *it, const void *raw, size_t len);
/* 1 with *f filled, 0 at the end, -EBADMSG on a damaged string. */
int rawstack_next(struct rawstack_iter *it, struct rawframe *f);
/* Frames in the string, or -EBADMSG. */
int rawstack_count(const void *raw, size_t len);
