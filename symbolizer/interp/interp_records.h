/* interp_records.h - the records a walker copied once per process (code
 * objects, iseqs, functions, SFIs, CVs, methods), kept for one symbolizer
 * session by (pid, address, type), and the byte helpers their decoders
 * share (docs/interpreters.md, "The framework").
 *
 * A runtime gives the table its decoder and bounds; the table owns what
 * the decoder fills and knows nothing of its layout. Records are outside
 * bytes (a sampled process wrote them, the sensor forwarded them): the
 * decoder bounds every read by the record's length and refuses what it
 * cannot check.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the decoder says identifies a record. type separates records of
 * one address (0 for runtimes with one kind); checksum is not part of the
 * key: a lookup compares it to tell a reused address from the recorded
 * one. */
struct interp_records_key {
	uint64_t addr, checksum;
	uint8_t type;
};

/* Decodes the len bytes of rec into value (value_size bytes, uninitialised)
 * and fills key (zeroed before the call). 0, or a negative errno (the
 * record is refused). */
typedef int (*interp_records_decode_fn)(const void *rec, size_t len, void *value,
					struct interp_records_key *key);

struct interp_records;

/* A table of at most max records (1 .. 2^30), each decoded into
 * value_size bytes by decode. Bounded: when a new (pid, address, type)
 * comes to a full table, the table empties first (walkers send a record
 * again once their dedup entry ages out, or on a new connection); its
 * slots (2 * max rounded up to a power of two, 16 bytes each) are
 * allocated here. NULL on out of memory or bad arguments. Not
 * thread-safe. */
struct interp_records *interp_records_new(size_t max, size_t value_size,
					  interp_records_decode_fn decode);
/* Frees t and every value (t NULL: nothing). */
void interp_records_free(struct interp_records *t);
/* Decodes rec into a new allocation (value_size bytes and a small header)
 * and keeps it for pid, replacing (and freeing) a record of the same key.
 * 0, -EBADMSG (the decoder refused it; counted, the table unchanged) or
 * -ENOMEM. */
int interp_records_put(struct interp_records *t, uint32_t pid, const void *rec, size_t len);
/* The value of (pid, addr, type), or NULL when unknown or when checksum
 * is not 0 and differs from the recorded one. Borrowed until the next put
 * or forget. */
const void *interp_records_get(const struct interp_records *t, uint32_t pid, uint64_t addr,
			       uint8_t type, uint64_t checksum);
/* Drops every record of pid (on out of memory, keeps them: stale ones only
 * cost memory). */
void interp_records_forget_pid(struct interp_records *t, uint32_t pid);
size_t interp_records_count(const struct interp_records *t);
/* Records the decoder refused since the table was made. */
uint64_t interp_records_refused(const struct interp_records *t);

/* Little-endian reads; p has 2, 4 or 8 bytes. */
uint16_t interp_records_le16(const uint8_t *p);
uint32_t interp_records_le32(const uint8_t *p);
uint64_t interp_records_le64(const uint8_t *p);

/* interp_records_copy_text() options. */
#define INTERP_RECORDS_TEXT_DOTS 0x1  /* '/' becomes '.' (a JVM class name) */
#define INTERP_RECORDS_TEXT_SEMIS 0x2 /* keep ';' (text that is no folded frame) */

/* Copies n bytes of src, stopping at a NUL, as printable UTF-8 into dst,
 * which has room for n + 4 bytes: control bytes, DEL, invalid sequences
 * and ';' (the folded format's frame separator, unless
 * INTERP_RECORDS_TEXT_SEMIS) become '?', so a hostile name cannot forge
 * folded-output syntax; "..." follows when cut (the walker cut the text).
 * Always NUL-terminates. */
void interp_records_copy_text(char *dst, const uint8_t *src, size_t n, bool cut, unsigned opts);
