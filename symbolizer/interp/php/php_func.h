/* php_func.h - PHP functions as BPF copied their names at sample time
 * (docs/interpreters.md, "PHP"): the decoder of one record, frame names
 * from it ("Class::method (file.php:LINE)", "{main} (file.php:LINE)",
 * "{closure} (file.php:LINE)", "crc32" for an internal function), and the
 * table of functions a symbolizer session keeps per (pid, zend_function
 * address).
 *
 * Records come from a sampled process through the sensor as opaque bytes:
 * untrusted. The decoder checks size, version and every length against its
 * slot; names are made printable (control bytes, ';' and invalid UTF-8
 * become '?'), so a hostile name cannot forge folded-output syntax; a
 * damaged record gives PHP_UNKNOWN_FRAME, never a guess.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PHP_UNKNOWN_FRAME "<unknown php frame>"

/* The record's layout, little-endian, fixed size (bpf/php.h's struct
 * sonde_php_meta when BPF emits it). */
#define PHP_META_VERSION 1
#define PHP_META_NAME 128
#define PHP_META_CLASS 128
#define PHP_META_FILE 256
#define PHP_META_HEADER 40 /* bytes before the name */
#define PHP_META_SIZE (PHP_META_HEADER + PHP_META_NAME + PHP_META_CLASS + PHP_META_FILE)
#define PHP_META_NAME_CUT 0x1
#define PHP_META_CLASS_CUT 0x2
#define PHP_META_FILE_CUT 0x4

/* zend_function.type */
#define PHP_FUNC_INTERNAL 1
#define PHP_FUNC_USER 2
#define PHP_FUNC_EVAL 4

/* One decoded function; owns nothing outside itself. */
struct php_func {
	uint64_t addr, checksum;
	uint32_t fn_flags, line_start;
	uint8_t type; /* PHP_FUNC_* */
	uint8_t flags;
	char name[PHP_META_NAME + 4]; /* printable, NUL-ended; "..." if cut */
	char class_name[PHP_META_CLASS + 4];
	char file[PHP_META_FILE + 4];
};

/* 0, or -EBADMSG (wrong size or version, an unknown type, a length beyond
 * its slot, an internal function without a name). */
int php_func_decode(const void *rec, size_t len, struct php_func *ret);

/* f's frame name at line (0: none): "Class::name (file:LINE)" for user
 * code ("{main}" when it has no name: a script's or an included file's
 * top level; "{eval}" for eval()'d code), "Class::name" for an internal
 * function; PHP_UNKNOWN_FRAME for f == NULL. Always NUL-terminates
 * (len > 0). Returns the length written. */
size_t php_func_frame_name(const struct php_func *f, uint32_t line, char *buf, size_t len);

/* Functions of one session (interp_records.h), by (pid, address): at
 * most PHP_FUNCS_MAX; put, count and free through interp_records_*(). */
#define PHP_FUNCS_MAX 32768

struct interp_records;

/* A table of functions; NULL on out of memory. */
struct interp_records *php_funcs_new(void);
/* NULL when unknown. checksum 0 matches any. Borrowed until the next put. */
const struct php_func *php_funcs_get(const struct interp_records *t, uint32_t pid, uint64_t addr,
				     uint64_t checksum);
