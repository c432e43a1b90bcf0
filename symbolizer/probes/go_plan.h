/* go_plan.h - the probe plan of a Go executable (docs/go-probes.md): which
 * uprobes to attach where, with which constants, computed from the file's
 * own bytes (untrusted: every read is bounded). Go version from
 * .go.buildinfo (the inline string of Go 1.18+, or the pointer to it of
 * earlier versions; < 1.17 has no register ABI and gets an error); functions from .symtab, else .gopclntab; the entry and
 * every RET of each hooked function found with capstone (Go moves
 * goroutine stacks, so uretprobes must not be used); struct field offsets
 * from the binary's DWARF, else a table for the Go versions known here.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "buildinfo.h"

#define GO_PLAN_MAX_CONSTS 12
#define GO_PLAN_MAX_ATTACH 64 /* entry + RETs of one function, per probe */

struct go_plan_probe {
	const char *probe; /* "go_http_server", "go_http_client" */
	const char *error; /* static; NULL: usable */
	struct {
		const char *name;
		uint64_t value;
	} consts[GO_PLAN_MAX_CONSTS];
	size_t n_consts;
	struct {
		const char *program; /* static */
		uint64_t file_offset;
		char symbol[112];
	} attach[GO_PLAN_MAX_ATTACH];
	size_t n_attach;
};

struct go_plan {
	char go_version[32];
	const char *error; /* static; NULL: the probes below apply */
	const char *offsets_from; /* "dwarf" or "table" */
	struct go_plan_probe probes[2];
	size_t n_probes;
};

/* Plans data (size bytes, the whole file; writable, because libelf may
 * decompress sections in place, as for the source index). Only 64-bit
 * little-endian ELF is read. Returns 0 with *out filled
 * (out->error set when the binary is Go but cannot be instrumented),
 * -ENOENT when it is not a Go executable, -EBADMSG when it is not ELF,
 * -ENOMEM. */
int go_plan_build(uint8_t *data, size_t size, struct go_plan *out);

