/* validate.h - the one place where what the symbolizer sends the sensor is
 * checked before the sensor acts on it (docs/security.md, "Symbolizer →
 * sensor"). uplink.c passes every ProbePlan and InterpreterConfig through
 * here before it is queued or kept; goprobes.c checks a plan's attach
 * offsets here against the process table before it loads a probe object
 * and again before each attach. (ReadRange ranges are checked against the
 * file registry by fileserve.c, unwind tables against their chunks by
 * unwind_maps.c: both are about state those modules own.)
 *
 * Every function here is pure: it reads the unpacked message (borrowed)
 * and plain structs the caller made from its own state, touches no BPF,
 * opens nothing, takes no lock and does not log. Each returns 0, or
 * -EBADMSG with *ret_reason set to a static string for the caller's
 * (rate-limited) log; ret_reason may be NULL. What fails is refused whole:
 * a plan with one bad attach attaches nothing.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "ingest.pb-c.h"

/* Bounds on a ProbePlan (goprobes.c keeps copies of this size). */
#define VALIDATE_MAX_PROBES 8     /* probe sets per plan */
#define VALIDATE_MAX_CONSTS 32    /* per probe set */
#define VALIDATE_MAX_ATTACHES 256 /* per probe set: an entry and each RET */
#define VALIDATE_MAX_NAME 64      /* probe, program and const names, with the NUL */
#define VALIDATE_MAX_SYMBOL 128   /* ProbeAttach.symbol (logs only), with the NUL */
/* A Go probe const named *_off is a field offset in a Go struct
 * (net/http.Request, url.URL, ...: all under 300 bytes in Go 1.17-1.23);
 * BPF adds it to a pointer it read and copies from there. Any other const
 * is a flag (header_lookup): 0 or 1. */
#define VALIDATE_GO_FIELD_OFF_MAX 4096

/* InterpreterConfig bounds are per kind, in a limits table beside each
 * BPF walker's header, which says why each bound is what it is
 * (bpf/interp_kinds.h lists them). */

/* The probe objects the sensor has (goprobes.c lists them from the
 * objects themselves): names of the programs and of the 64-bit .rodata
 * consts of each. All strings borrowed. */
struct validate_probe_def {
	const char *name; /* ProbeSet.probe, e.g. "go_http_server" */
	const char *const *programs;
	size_t n_programs;
	const char *const *consts;
	size_t n_consts;
};

/* The file ID field of any symbolizer message: exactly 16 bytes. */
int validate_file_id(const ProtobufCBinaryData *id, const char **ret_reason);

/* A ProbePlan without error, before anything is copied or loaded: file ID
 * of 16 bytes; 1..VALIDATE_MAX_PROBES probe sets; each set either has
 * error set (skipped by the caller) or names a probe of defs[0..n_defs),
 * with at most VALIDATE_MAX_CONSTS consts, each declared by that probe's
 * object, at most once, with a value within the bound above, and
 * 1..VALIDATE_MAX_ATTACHES attaches, each naming a program of that object;
 * names non-empty and under VALIDATE_MAX_NAME, symbols under
 * VALIDATE_MAX_SYMBOL. At least one set must apply. Offsets are checked
 * later against the process table (validate_probe_offsets()). */
int validate_probe_plan(const Sonde__V1__ProbePlan *pp, const struct validate_probe_def *defs,
			size_t n_defs, const char **ret_reason);

/* One executable (r-x) mapping of a file in a process, as /proc/PID/maps
 * said: file bytes [offset, offset + end - start) are mapped executable. */
struct validate_exec_range {
	uint64_t start, end, offset;
};

/* Every offsets[i] lies inside one of ranges[0..n_ranges), the
 * executable mappings of the plan's file in the process the probes are to
 * be attached to. No ranges: refused (the file is not mapped executable
 * by a process the sensor tracks). */
int validate_probe_offsets(const uint64_t *offsets, size_t n_offsets,
			   const struct validate_exec_range *ranges, size_t n_ranges,
			   const char **ret_reason);

/* An InterpreterConfig without error: file ID of 16 bytes, a kind with
 * a limits table (bpf/interp_kinds.h), that kind's format_version, a
 * layout of exactly the kind's config size whose every field is within
 * the kind's bounds (offsets, versions, known flag bits, zero padding),
 * and a runtime_offset (plus the walker's first read at it) inside the
 * file's image plus the kind's slack: file_size is the registered file's
 * size, from the sensor's own registry. */
int validate_interp_config(const Sonde__V1__InterpreterConfig *c, uint64_t file_size,
			   const char **ret_reason);
