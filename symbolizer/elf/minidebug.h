/* minidebug.h - MiniDebugInfo: the .gnu_debugdata section some
 * distributions add to stripped binaries, an xz-compressed ELF file that
 * holds a .symtab of the functions .dynsym leaves out (GDB's "mini
 * debuginfo"). Decompressed here with liblzma, bounded, so the symbol
 * readers can treat it as a small debug file. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define MINIDEBUG_MAX_OUT (64u << 20)   /* decompressed bytes */
#define MINIDEBUG_MEMLIMIT (128u << 20) /* liblzma's own memory */

/* Decompresses an .xz stream (data, len: the section's bytes) into a
 * malloc'd buffer (*ret, *ret_len; caller frees). Returns 0, -EBADMSG
 * (not xz, damaged, or more than MINIDEBUG_MAX_OUT bytes) or -ENOMEM. */
int minidebug_decompress(const uint8_t *data, size_t len, uint8_t **ret, size_t *ret_len);
