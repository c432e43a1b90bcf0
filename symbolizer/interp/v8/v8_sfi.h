/* v8_sfi.h - V8 SharedFunctionInfo records as BPF copied them at sample
 * time (docs/interpreters.md, "V8"): the decoder of one record, frame
 * names "functionName (script.js)" from it, and the table of SFIs a
 * symbolizer session keeps per (pid, SFI address).
 *
 * Records come from a sampled process through the sensor as opaque bytes:
 * untrusted. The decoder checks size, version and every length against its
 * slot; names are converted from V8's Latin-1 or UTF-16 to UTF-8 and made
 * printable (control characters, ';' and unpaired surrogates become '?'),
 * so a hostile name cannot forge folded-output syntax; a damaged record
 * gives V8_UNKNOWN_FRAME, never a guess.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define V8_UNKNOWN_FRAME "<unknown v8 frame>"
#define V8_ANONYMOUS "(anonymous)"

/* The record's layout, little-endian, fixed size (bpf/v8.h's struct
 * sonde_v8_meta when BPF emits it). */
#define V8_META_VERSION 1
#define V8_META_NAME 128
#define V8_META_SCRIPT 256
#define V8_META_HEADER 24 /* bytes before name */
#define V8_META_SIZE (V8_META_HEADER + V8_META_NAME + V8_META_SCRIPT)
#define V8_META_NAME_CUT 0x1
#define V8_META_SCRIPT_CUT 0x2
#define V8_META_NAME_TWO_BYTE 0x4
#define V8_META_SCRIPT_TWO_BYTE 0x8
#define V8_META_NO_NAME 0x10
#define V8_META_NO_SCRIPT 0x20

/* One decoded SFI; owns nothing outside itself. Names are UTF-8 (a
 * Latin-1 byte can take 2, a UTF-16 unit 3), printable, NUL-ended, "..."
 * when cut. */
struct v8_sfi {
	uint64_t addr, checksum;
	uint8_t flags;
	char name[V8_META_NAME * 2 + 4];
	char script[V8_META_SCRIPT * 2 + 4];
};

/* 0, or -EBADMSG (wrong size or version, a length beyond its slot, an odd
 * two-byte length). */
int v8_sfi_decode(const void *rec, size_t len, struct v8_sfi *ret);

/* "functionName (script.js:LINE)", or "functionName (script.js)" when
 * line is 0 ("(anonymous)" for a function without a name; no parenthesis
 * for a function without a script: builtins and API functions);
 * V8_UNKNOWN_FRAME for s == NULL. Always NUL-terminates (len > 0).
 * Returns the length written. */
size_t v8_sfi_frame_name(const struct v8_sfi *s, int32_t line, char *buf, size_t len);

/* SFIs of one session (interp_records.h), by (pid, address): at most
 * V8_SFIS_MAX; put, count and free through interp_records_*(). */
#define V8_SFIS_MAX 65536

struct interp_records;

/* A table of SFIs; NULL on out of memory. */
struct interp_records *v8_sfis_new(void);
/* NULL when unknown. Borrowed until the next put. */
const struct v8_sfi *v8_sfis_get(const struct interp_records *t, uint32_t pid, uint64_t addr);
