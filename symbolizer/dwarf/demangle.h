/* demangle.h - the one wrapper over libiberty's demangler (C++ Itanium
 * names "_Z...", Rust v0 names "_R..."; legacy Rust names are Itanium
 * names and come out as llvm-symbolizer prints them, hash included). */
#pragma once

/* A malloc'd demangled copy of name, or NULL when name is not mangled (or
 * does not demangle: the caller keeps the raw name). name is borrowed. */
char *demangle(const char *name);
