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
