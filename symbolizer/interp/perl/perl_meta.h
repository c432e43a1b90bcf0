/* perl_meta.h - what names Perl frames, as BPF copied it at sample time
 * (docs/interpreters.md, "Perl"): the decoder of one record (a sub's
 * name, package and file, or a COP's file), frame names
 * "Package::sub (file.pl:LINE)" from it, and the table of records a
 * symbolizer session keeps per (pid, address, type).
 *
 * Records come from a sampled process through the sensor as opaque bytes:
 * untrusted. The decoder checks size, version, type and every length
 * against its slot; names are made printable (control bytes, ';' and
 * invalid UTF-8 become '?'), so a hostile name cannot forge folded-output
 * syntax; a damaged record gives PERL_UNKNOWN_FRAME, never a guess.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PERL_UNKNOWN_FRAME "<unknown perl frame>"

/* The record's layout, little-endian, fixed size (bpf/perl5.h's
 * struct sonde_perl_meta when BPF emits it). */
#define PERL_META_VERSION 1
#define PERL_META_SUB 1
#define PERL_META_COP 2
#define PERL_META_NAME 128
#define PERL_META_PACKAGE 128
#define PERL_META_FILE 256
#define PERL_META_HEADER 32 /* bytes before the name */
#define PERL_META_SIZE (PERL_META_HEADER + PERL_META_NAME + PERL_META_PACKAGE + PERL_META_FILE)
#define PERL_META_NAME_CUT 0x1
#define PERL_META_PACKAGE_CUT 0x2
#define PERL_META_FILE_CUT 0x4

/* One decoded record; owns nothing outside itself. Strings printable,
 * NUL-ended, "..." appended when BPF cut them. */
struct perl_meta {
	uint64_t addr, checksum;
	uint8_t type; /* PERL_META_SUB or PERL_META_COP */
	uint8_t flags;
	char name[PERL_META_NAME + 4];       /* a sub's; "" for a COP */
	char package[PERL_META_PACKAGE + 4]; /* a sub's; may be "" */
	char file[PERL_META_FILE + 4];       /* may be "" */
};

/* 0, or -EBADMSG (wrong size, version or type, a length beyond its slot,
 * a sub without a name, or a COP with a name). */
int perl_meta_decode(const void *rec, size_t len, struct perl_meta *ret);

/* The name of a frame word (bpf/perl5.h: SONDE_PERL_FRAME) whose record
 * is m: "Package::sub (file.pl:LINE)" for a sub, "main (file.pl:LINE)"
 * for the main program, "(eval) (file.pl:LINE)" for an eval; without
 * ":LINE" for line 0, without the parenthesis when the file is unknown;
 * PERL_UNKNOWN_FRAME for m == NULL or a record of the wrong type. Always
 * NUL-terminates (len > 0). Returns the length written. */
size_t perl_meta_frame_name(const struct perl_meta *m, uint64_t word, char *buf, size_t len);

/* Records of one session (interp_records.h), by (pid, address, type): at
 * most PERL_METAS_MAX; put, count and free through interp_records_*(). */
#define PERL_METAS_MAX 65536

struct interp_records;

/* A table of records; NULL on out of memory. */
struct interp_records *perl_metas_new(void);
/* The record a frame word names, or NULL. checksum 0 matches any.
 * Borrowed until the next put. */
const struct perl_meta *perl_metas_get(const struct interp_records *t, uint32_t pid, uint64_t word,
				       uint64_t checksum);
