/* v8_lines.h - line numbers of V8 frames (docs/interpreters.md, "V8"):
 * the Code objects' source position tables and the scripts' sources BPF
 * copied, per session, and the decoders: a position table (pc offset ->
 * script offset) and a line from a script offset.
 *
 * Records come from sampled processes: untrusted. Every read is bounded
 * by the record's lengths; a damaged table or a missing chunk of source
 * gives no line (-ENOENT), never a wrong guess beyond what the bytes say.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The records' layouts (bpf/v8.h's struct sonde_v8_code and
 * struct sonde_v8_source), little-endian. */
#define V8_CODE_VERSION 1
#define V8_CODE_TABLE 1024
#define V8_CODE_HEADER 32
#define V8_CODE_SIZE (V8_CODE_HEADER + V8_CODE_TABLE)
#define V8_SOURCE_VERSION 1
#define V8_SOURCE_CHUNK 1536
#define V8_SOURCE_CHUNKS 32
#define V8_SOURCE_HEADER 24
#define V8_SOURCE_SIZE (V8_SOURCE_HEADER + V8_SOURCE_CHUNK)

/* The script offset of the last entry of table (V8's source position
 * table: zigzag VLQ deltas of code offset, with is_statement as the sign,
 * and of the raw SourcePosition) whose code offset is <= pc_off. 0 with
 * *ret_offset (the offset in the script of the position's function or of
 * the function inlined there) and *ret_inlined (-1: not inlined);
 * -ENOENT: no such entry; -EBADMSG: a damaged table before it. */
int v8_table_lookup(const uint8_t *table, size_t len, uint32_t pc_off, int32_t *ret_offset,
		    int32_t *ret_inlined);

/* The 1-based line of script offset `offset` in src (have bytes known):
 * 0 with *ret_line, -ENOENT when offset is past what is known. */
int v8_source_line(const uint8_t *src, size_t have, uint32_t offset, int32_t *ret_line);

/* Code records and script sources of one session. Bounded (V8_LINES_MAX
 * of each; beyond, the table starts over). Not thread-safe. */
#define V8_LINES_MAX 16384

struct v8_lines;

struct v8_lines *v8_lines_new(void);
void v8_lines_free(struct v8_lines *t);
/* Keeps a code or source record (by its size) for pid: 0, -EBADMSG
 * (damaged), -ENOENT (not one of these records) or -ENOMEM. */
int v8_lines_put(struct v8_lines *t, uint32_t pid, const void *rec, size_t len);
/* The position of the frame whose word 1 is word1 (as below): 0 with
 * its script offset, inlining id (-1: none; the offset is then in the
 * inlined function's script) and the Code's script address, or -ENOENT. */
int v8_lines_position(const struct v8_lines *t, uint32_t pid, uint64_t word1, int exact,
		      int32_t *ret_offset, int32_t *ret_inlined, uint64_t *ret_script);
/* The line of script offset `offset` in the script at address `script`:
 * 0 with *ret_line, or -ENOENT (no source, or not that far). */
int v8_lines_script_line(const struct v8_lines *t, uint32_t pid, uint64_t script,
			 int32_t offset, int32_t *ret_line);
/* The line of the frame whose word 1 is word1 (code key and pc offset;
 * exact: the pc is the sampled one, not a return address): 0 with
 * *ret_line, or -ENOENT. */
int v8_lines_line(const struct v8_lines *t, uint32_t pid, uint64_t word1, int exact,
		  int32_t *ret_line);
