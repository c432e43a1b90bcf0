/* hotspot_method.h - Java methods as BPF copied them at sample time
 * (docs/interpreters.md, bpf/hotspot.h's struct sonde_hotspot_method):
 * the decoder of one method record, the line number table (HotSpot's
 * compressed pairs of bci and line deltas), frame names
 * "package.Class.method (Source.java:LINE)" and system names with the
 * descriptor, and the table of methods a symbolizer session keeps per
 * (pid, Method*).
 *
 * Records come from a sampled process through the sensor as opaque bytes:
 * untrusted. The decoder checks size, version, flags and every length
 * against its slot; names are made printable (control bytes, ';' outside
 * descriptors, and
 * invalid UTF-8, including modified UTF-8's encoded NUL and surrogates,
 * become '?'), so a hostile name cannot forge folded-output syntax; a
 * damaged record or line table gives no line or HOTSPOT_UNKNOWN_FRAME,
 * never a guess.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hotspot.h" /* bpf/: the record's layout */

#define HOTSPOT_UNKNOWN_FRAME "<unknown java frame>"
#define HOTSPOT_METHOD_SIZE sizeof(struct sonde_hotspot_method)
#define HOTSPOT_NO_LINE (-1)

/* One decoded method; owns nothing outside itself. Text fields are
 * printable UTF-8, NUL-ended, "..." appended if BPF cut them. */
struct hotspot_method {
	uint64_t method, const_method;
	uint16_t code_size;
	uint8_t flags; /* SONDE_HOTSPOT_METHOD_* */
	char klass[sizeof(((struct sonde_hotspot_method *)0)->klass) + 4]; /* "java.lang.String" */
	char name[sizeof(((struct sonde_hotspot_method *)0)->name) + 4];
	char sig[sizeof(((struct sonde_hotspot_method *)0)->sig) + 4];
	char source[sizeof(((struct sonde_hotspot_method *)0)->source) + 4];
	uint16_t linetable_len;
	uint8_t linetable[sizeof(((struct sonde_hotspot_method *)0)->linetable)];
};

/* 0, or -EBADMSG (wrong size, version, unknown flags, a length beyond its
 * slot, or no method name). */
int hotspot_method_decode(const void *rec, size_t len, struct hotspot_method *ret);

/* The line of bytecode index bci in a compressed line number table
 * (Method::line_number_from_bci's rule: an exact entry, else the nearest
 * one below), reading at most len bytes; x1: its numbers exclude the zero
 * byte (JDK 20+, SONDE_HOTSPOT_METHOD_U5_X1). 0 with *line, -ENOENT (no
 * entry at or below bci before the table ended or was cut) or -EBADMSG (a
 * multi-byte number cut by the end, or a zero byte in one under x1). */
int hotspot_line_for_bci(const uint8_t *table, size_t len, bool x1, uint32_t bci, int32_t *line);

/* "package.Class.method (Source.java:LINE)" for bci (no line when bci is
 * SONDE_HOTSPOT_BCI_UNKNOWN, beyond the code or not in the table; no
 * source when the record has none); HOTSPOT_UNKNOWN_FRAME for m == NULL.
 * Always NUL-terminates (len > 0). Returns the length written. */
size_t hotspot_method_frame_name(const struct hotspot_method *m, uint32_t bci, char *buf,
				 size_t len);

/* "package.Class.method(descriptor)" (the JVM's system name): as
 * hotspot_method_frame_name, except that the descriptor keeps its ';'
 * (not for folded text). */
size_t hotspot_method_system_name(const struct hotspot_method *m, char *buf, size_t len);

/* Methods of one session (interp_records.h), by (pid, Method*): at most
 * HOTSPOT_METHODS_MAX; put, count and free through interp_records_*(). */
#define HOTSPOT_METHODS_MAX 65536

struct interp_records;

/* A table of methods; NULL on out of memory. */
struct interp_records *hotspot_methods_new(void);
/* NULL when unknown. const_method 0 matches any. Borrowed until the next
 * put. */
const struct hotspot_method *hotspot_methods_get(const struct interp_records *t, uint32_t pid,
						 uint64_t method, uint64_t const_method);
