/* utf8.h - text a target controls (thread and process names, paths,
 * cgroups, environment values, span strings, symbol names) made valid
 * UTF-8 before it enters the profile store or a protobuf `string` field,
 * whose decoders (upb in python3-grpcio, Go's protobuf) reject invalid
 * UTF-8 and fail the whole response.
 *
 * The escape: every byte that does not begin a valid UTF-8 sequence
 * (stray continuation bytes, overlong forms, UTF-16 surrogates, code
 * points above U+10FFFF, sequences cut short) and every C0 control byte
 * (NUL, ESC, newline...) and DEL becomes the four characters "\xNN"
 * (lowercase hex), so names cannot drive a terminal either; valid
 * printable sequences, multibyte ones included, are copied unchanged, and
 * so is '\\'. Escaped text is
 * therefore valid UTF-8 and escaping it again changes nothing
 * (idempotent), at the price that a name which really contains the text
 * "\xff" reads like one with the byte 0xff. Output is bounded by the
 * caller's buffer and cut only between characters or escapes, never
 * inside one.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The length (1 to 4) of the valid UTF-8 sequence starting at s, which
 * has n > 0 bytes left; 0 if s does not start one. */
size_t utf8_char_len(const uint8_t *s, size_t n);

/* Whether the n bytes at s are valid UTF-8 without C0 controls or DEL:
 * what utf8_escape() would copy unchanged. */
bool utf8_valid(const char *s, size_t n);

/* Writes the n bytes of src, escaped as above, into dst (cap bytes, cap
 * >= 1), stopping before the first character or escape that would not
 * fit; always NUL-terminates. Returns the length written (< cap). src and
 * dst must not overlap. */
size_t utf8_escape(char *dst, size_t cap, const char *src, size_t n);

/* The length utf8_escape() would write with an unlimited buffer. */
size_t utf8_escaped_len(const char *src, size_t n);

/* A malloc'd NUL-terminated escaped copy of the string src (NULL: ""),
 * at most max_len bytes long (cut as utf8_escape() cuts). The caller
 * frees it. NULL on out of memory. */
char *utf8_escape_dup(const char *src, size_t max_len);
