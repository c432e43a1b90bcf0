/* model.h - a symbolized profile in memory: the one shape every export
 * encoder reads (pprof.c, otlp.c). Each table is deduplicated by the
 * builder functions below, so an encoder maps it 1:1 onto its format's
 * tables. Index 0 of strings is "" (unknown / none).
 *
 * Who fills it: model_symbolize.c (from raw stacks, see rawstack.h) and
 * tests. Who reads it: the encoders. Nothing here knows a wire format.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "interp.h" /* bpf/: SONDE_INTERP_KINDS */

/* One frame type per interpreter kind (kind 0 is none). */
#define PM_INTERP_KINDS (SONDE_INTERP_KINDS - 1)

enum pm_frame_type {
	PM_FRAME_NATIVE = 0,
	PM_FRAME_KERNEL,
	PM_FRAME_GO,
	PM_FRAME_INTERP, /* + interpreter kind - 1 */
	PM_N_FRAME_TYPES = PM_FRAME_INTERP + PM_INTERP_KINDS,
};

/* "native", "kernel", "go", or an interpreter kind's name
 * (bpf/interp_kinds.h): OTLP's profile.frame.type values. */
const char *pm_frame_type_name(enum pm_frame_type t);

struct pm_mapping {
	uint32_t path;     /* string: the file's path as a process mapped it */
	uint32_t build_id; /* string: GNU build ID, lowercase hex; 0: none */
	uint32_t file_id;  /* string: sonde file ID (htlhash), 32 hex digits */
	uint64_t size;     /* of the file; 0: unknown */
};

struct pm_function {
	uint32_t name;        /* string: demangled */
	uint32_t system_name; /* string: as the file has it (mangled) */
	uint32_t file;        /* string: source file; 0: unknown */
};

struct pm_line {
	uint32_t function; /* index into functions */
	uint32_t line;     /* 0: unknown */
};

struct pm_location {
	uint32_t mapping;  /* index + 1 into mappings; 0: none (kernel, anonymous memory) */
	uint64_t address;  /* file offset (with a mapping), else the kernel or virtual address */
	uint8_t type;      /* enum pm_frame_type */
	/* Into lines, innermost (inlined) first, the containing function
	 * last; n_lines 0: nothing known. */
	uint32_t first_line, n_lines;
};

struct pm_stack {
	uint32_t first_loc, n_locs; /* into stack_locs: location indexes, leaf first */
};

struct pm_process {
	uint32_t pid;
	uint32_t comm;         /* string: process name */
	uint32_t exe_name;     /* string: basename of exe_path */
	uint32_t exe_path;     /* string; 0: unknown */
	uint32_t container_id; /* string; 0: not in a container */
	uint32_t host_name;    /* string: the sensor's node name */
	uint32_t host_id;      /* string: the node's machine-id; 0: unknown */
	uint64_t start;        /* start time, clock ticks after the node's boot; 0: unknown */
	uint32_t pod_uid;      /* string: Kubernetes pod UID; 0: none */
	uint32_t command_line; /* string; 0: not sent (opt-in) */
	uint32_t main_mapping; /* index + 1 into mappings of the executable; 0: unknown */
};

/* The span a sample was taken in (Go probes: docs/go-probes.md). */
struct pm_link {
	uint8_t trace_id[16];
	uint8_t span_id[8];
};

struct pm_sample {
	uint32_t stack;       /* index into stacks */
	uint32_t process;     /* index into processes */
	uint32_t tid;         /* 0: unknown */
	uint32_t link;        /* index + 1 into links; 0: in no span */
	uint32_t thread_name; /* string */
	uint64_t count;       /* samples */
	uint64_t weight;      /* off-CPU ns or memory bytes (pmodel.profile); 0 for CPU */
	uint64_t first_ns, last_ns; /* unix ns of the first and last of them; 0: unknown */
};

/* What a model's samples measure (bpf/sample.h's enum sonde_profile).
 * CPU values are counts of samples, each worth a sampling period of CPU
 * time; the others' values are weights: ns off the CPU, bytes of growth. */
enum pm_profile {
	PM_PROFILE_CPU = 0,
	PM_PROFILE_OFF_CPU = 1,
	PM_PROFILE_MEMORY = 2,
	PM_PROFILES,
};

/* The value type of a profile's samples and of its period, as pprof and
 * OTLP name them (docs/exports.md, "Value types"). For CPU the sample is
 * samples/count and the period cpu/nanoseconds; off-CPU samples are
 * off_cpu/nanoseconds, memory samples memory/bytes, both with the period
 * events/count (one context switch, one growth event). */
struct pm_value_types {
	const char *sample_type, *sample_unit, *period_type, *period_unit;
};
const struct pm_value_types *pm_profile_value_types(uint32_t profile);
/* "cpu", "off-cpu", "memory"; "unknown" out of range. */
const char *pm_profile_name(uint32_t profile);

struct pm_index; /* the builder's dedup tables */

struct pmodel {
	char **strings; /* strings[0] is "" */
	size_t n_strings;
	struct pm_mapping *mappings;
	size_t n_mappings;
	struct pm_function *functions;
	size_t n_functions;
	struct pm_line *lines;
	size_t n_lines;
	struct pm_location *locations;
	size_t n_locations;
	uint32_t *stack_locs;
	size_t n_stack_locs;
	struct pm_stack *stacks;
	size_t n_stacks;
	struct pm_process *processes;
	size_t n_processes;
	struct pm_sample *samples;
	size_t n_samples;
	struct pm_link *links;
	size_t n_links;

	uint64_t start_ns, end_ns; /* the window the samples fall in */
	uint64_t period_ns;        /* between samples on one CPU (1e9 / Hz); 0: unknown */
	uint64_t total;            /* sum of the samples' counts */
	uint32_t profile;          /* what every sample measures: enum pm_profile */

	struct pm_index *ix;
	size_t bytes; /* held in the tables, for bounds */
};

/* Returns 0 or -ENOMEM. pm_free accepts a zeroed or freed model. */
int pm_init(struct pmodel *m);
void pm_free(struct pmodel *m);

/* Builders: each returns 0 and the (existing or new) index in *ret, or
 * -ENOMEM. Strings are copied; NULL counts as "". */
int pm_string(struct pmodel *m, const char *s, uint32_t *ret);
/* By file_id (16 bytes): the first call's path and build ID win. */
int pm_mapping(struct pmodel *m, const uint8_t file_id[16], const char *path, const char *build_id,
	       uint64_t size, uint32_t *ret);
int pm_function(struct pmodel *m, const char *name, const char *system_name, const char *file,
		uint32_t *ret);
/* By (mapping, address): type and lines are only taken by the first call. */
int pm_location(struct pmodel *m, uint32_t mapping, uint64_t address, enum pm_frame_type type,
		const struct pm_line *lines, size_t n_lines, uint32_t *ret);
/* Whether the location of (mapping, address) exists, with its index in
 * *ret: lets a caller skip symbolizing what is there. */
bool pm_find_location(const struct pmodel *m, uint32_t mapping, uint64_t address, uint32_t *ret);
/* locs: location indexes, leaf first. */
int pm_stack(struct pmodel *m, const uint32_t *locs, size_t n, uint32_t *ret);
/* By host_name, pid and start: the first call's other fields win. */
int pm_process(struct pmodel *m, const struct pm_process *p, uint32_t *ret);
/* By value: span is the trace ID (16 bytes) then the span ID (8). *ret
 * is the index + 1, as pm_sample.link wants it. */
int pm_link(struct pmodel *m, const uint8_t span[24], uint32_t *ret);
/* Adds count (and weight) to the sample of (stack, process, tid, thread_name, link), widening
 * its time range; a new one if there is none. */
int pm_sample(struct pmodel *m, const struct pm_sample *s);
