/* cpython_code.h - CPython code objects as BPF copied them at sample time
 * (docs/interpreters.md): the decoder of one metadata record,
 * frame names "qualname (file.py:LINE)" from it, and the table of code
 * objects a symbolizer session keeps per (pid, code object address).
 *
 * Records come from a sampled process through the sensor as opaque bytes:
 * untrusted. The decoder checks size, version and every length against its
 * slot; names are made printable (control bytes and invalid UTF-8 become
 * '?'), so a hostile name cannot forge folded-output syntax; a damaged
 * record or line table gives CPYTHON_UNKNOWN_FRAME, never a guess.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define CPYTHON_UNKNOWN_FRAME "<unknown python frame>"

/* The record's layout, little-endian, fixed size (bpf/cpython.h's
 * struct sonde_cpython_meta when BPF emits it). */
#define CPYTHON_META_VERSION 1
#define CPYTHON_META_QUALNAME 128
#define CPYTHON_META_FILENAME 256
#define CPYTHON_META_LINETABLE 1024
#define CPYTHON_META_HEADER 32 /* bytes before qualname */
#define CPYTHON_META_SIZE \
	(CPYTHON_META_HEADER + CPYTHON_META_QUALNAME + CPYTHON_META_FILENAME + CPYTHON_META_LINETABLE)
#define CPYTHON_META_QUALNAME_CUT 0x1
#define CPYTHON_META_FILENAME_CUT 0x2
#define CPYTHON_META_LINETABLE_CUT 0x4

/* One decoded code object; owns nothing outside itself. */
struct cpython_code {
	uint64_t addr, checksum;
	int32_t firstlineno;
	uint8_t minor; /* 10..13 */
	uint8_t flags;
	char qualname[CPYTHON_META_QUALNAME + 4]; /* printable, NUL-ended; "..." if cut */
	char filename[CPYTHON_META_FILENAME + 4];
	uint16_t linetable_len;
	uint8_t linetable[CPYTHON_META_LINETABLE];
};

/* 0, or -EBADMSG (wrong size, version, minor, or a length beyond its slot). */
int cpython_code_decode(const void *rec, size_t len, struct cpython_code *ret);

/* "qualname (file.py:LINE)" for the instruction at byte offset `offset`
 * of the bytecode; "qualname (file.py)" when the line table has no line
 * for it or was cut before it; CPYTHON_UNKNOWN_FRAME for c == NULL.
 * Always NUL-terminates (len > 0). Returns the length written. */
size_t cpython_code_frame_name(const struct cpython_code *c, uint32_t offset, char *buf,
			       size_t len);

/* Code objects of one session (interp_records.h), by (pid, address): at
 * most CPYTHON_CODES_MAX; put, count, forget and free through
 * interp_records_*(). */
#define CPYTHON_CODES_MAX 65536

struct interp_records;

/* A table of code objects; NULL on out of memory. */
struct interp_records *cpython_codes_new(void);
/* NULL when unknown. checksum 0 matches any. Borrowed until the next put
 * or forget. */
const struct cpython_code *cpython_codes_get(const struct interp_records *t, uint32_t pid,
					     uint64_t addr, uint64_t checksum);
