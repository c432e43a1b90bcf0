/* ruby_meta.h - Ruby iseqs and cfuncs as BPF copied them at sample time
 * (docs/interpreters.md, "Ruby"): the decoder of one record, the line of
 * a pc from the copied line table, frame names as Ruby's profilers print
 * them ("Foo#bar (app.rb:12)", "block in Foo#bar (app.rb:13)",
 * "Zlib.crc32"), and the table of records a symbolizer session keeps per
 * (pid, address).
 *
 * Records come from a sampled process through the sensor as opaque bytes:
 * untrusted. The decoder checks size, version, type and every length
 * against its slot; names are made printable (control bytes, ';' and
 * invalid UTF-8 become '?'), so a hostile name cannot forge folded-output
 * syntax; every read of the line table is bounded by what was copied; a
 * damaged record gives RUBY_UNKNOWN_FRAME, a line not in the copied table
 * none, never a guess.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "ruby.h" /* bpf/: the record's layout */

#define RUBY_UNKNOWN_FRAME "<unknown ruby frame>"

/* One decoded record; owns nothing outside itself. */
struct ruby_meta {
	uint64_t addr, checksum;
	uint8_t type;  /* SONDE_RUBY_META_ISEQ or _CFUNC */
	uint8_t flags; /* SONDE_RUBY_META_* */
	uint8_t insn_info_size;
	int32_t first_lineno;
	uint32_t iseq_size, insns_size;
	/* printable, NUL-ended; "..." appended when cut */
	char label[SONDE_RUBY_META_LABEL + 4];
	char klass[SONDE_RUBY_META_CLASS + 4];
	char path[SONDE_RUBY_META_PATH + 4];
	uint16_t base_len; /* bytes of the base label as copied */
	uint16_t succ_len, lines_len;
	uint8_t succ[SONDE_RUBY_META_SUCC];
	uint8_t lines[SONDE_RUBY_META_LINES];
	char base[SONDE_RUBY_META_BASE + 4];
};

/* 0, or -EBADMSG (wrong size, version, type, a length beyond its slot, a
 * line table whose sizes disagree, or no name). */
int ruby_meta_decode(const void *rec, size_t len, struct ruby_meta *ret);

/* The source line of the instruction before pc index pc (the frame
 * word's, in words from the iseq's start) as Ruby computes it: the
 * insns_info entry the succinct index table gives. Returns the line (>= 0)
 * or -1 when the copied table does not reach it. */
int32_t ruby_meta_line(const struct ruby_meta *m, uint32_t pc);

/* The frame's name: iseqs "label (path:LINE)" with the label qualified by
 * the owner's class ("block in Foo#bar", "Foo.baz" for a singleton
 * method), "(path)" without a line; cfuncs "Class#name" or "Class.name";
 * RUBY_UNKNOWN_FRAME for m == NULL. Always NUL-terminates (len > 0).
 * Returns the length written. */
size_t ruby_meta_frame_name(const struct ruby_meta *m, uint32_t pc, char *buf, size_t len);

/* Records of one session (interp_records.h), by (pid, address): at most
 * RUBY_METAS_MAX; put, count and free through interp_records_*(). */
#define RUBY_METAS_MAX 65536

struct interp_records;

/* A table of records; NULL on out of memory. */
struct interp_records *ruby_metas_new(void);
/* NULL when unknown. checksum 0 matches any. Borrowed until the next put. */
const struct ruby_meta *ruby_metas_get(const struct interp_records *t, uint32_t pid, uint64_t addr,
				       uint64_t checksum);
