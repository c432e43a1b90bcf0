/* buildinfo.h - the Go version a Go executable was built with, from its
 * .go.buildinfo section: which layouts of the runtime's tables
 * (pclntab.h) and structs (symbolizer/probes) apply. Bounded: the section's
 * bytes are the target's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The Go version of a .go.buildinfo section (Go 1.18+ layout), into ver
 * (cap bytes). Returns 0, or -EBADMSG (not one, or an older layout). */
int go_buildinfo_version(const uint8_t *sec, size_t size, char *ver, size_t cap);
/* Copies a version string of len bytes (the file's) into ver (cap bytes,
 * NUL-terminated): 0, or -EBADMSG when empty, too long or not printable
 * ASCII without spaces. */
int go_version_copy(const uint8_t *src, uint64_t len, char *ver, size_t cap);
/* M and X of "goM.X...": true, or false when ver does not start so. */
bool go_version_number(const char *ver, unsigned *major, unsigned *minor);
/* X of "go1.X..."; -1 for anything else. */
int go_version_minor(const char *ver);
/* Where runtime.m keeps curg (the goroutine its thread runs) in a binary
 * of Go version ver, for the BPF unwinder's step across
 * runtime.systemstack (bpf/unwind.h): 192 for the versions whose DWARF
 * was checked (1.19-1.23; the other offsets it reads agree there too),
 * else 0 (unknown: the stack ends at systemstack). */
uint32_t go_m_curg_offset(const char *ver);
/* Where runtime.asmcgocall keeps the goroutine's g on the g0 stack while
 * C runs (the depth of its SP is 8 bytes below): 48 in Go 1.19-1.21, 8 in
 * 1.22-1.23 (their asm_amd64.s), else 0 (unknown). */
uint32_t go_asmcgocall_g_slot(const char *ver);
