/* ruby_layout.h - the structure offsets the BPF Ruby walker needs, per
 * Ruby version (docs/interpreters.md, "Ruby"), and a file's version from
 * its name. Debian ships no DWARF and no VM headers for libruby, so the
 * offsets are a table, checked against the installed build by hand (how:
 * ruby_layout.c).
 */
#pragma once

#include "ruby.h" /* bpf/: struct sonde_ruby_offsets */

/* The layout of major.minor, or NULL when there is none. Static. */
const struct sonde_ruby_offsets *ruby_layout_for(unsigned major, unsigned minor);

/* The Ruby version a file name says: "libruby-3.1.so.3.1",
 * "libruby-3.1.so", "libruby.so.3.1.2" (any directory). Returns 0 with
 * *major, *minor, or -ENOENT for any other name. */
int ruby_version_from_name(const char *path, unsigned *major, unsigned *minor);
