/* interp_maps.h - turns the InterpreterConfigs the symbolizer sends into
 * one BPF map entry per process that maps the interpreter (bpf/interp.h,
 * map interp_procs), in step with the process table, for any kind.
 *
 * The sensor parses nothing here (ARCHITECTURE.md, rule 1): the layout is
 * copied as sent (its kind, version and size checked against the kind's
 * limits, bpf/interp_kinds.h; validate.c checked its fields before), and
 * the runtime's address is
 * arithmetic on /proc/PID/maps: start - offset of the file's first
 * executable mapping + the config's runtime_offset.
 *
 * Thread-safe: the uplink's reader thread adds configs, the main thread
 * reports processes. A config that arrives after its processes were seen
 * marks the object pending; the main thread then reports all processes
 * again (interp_maps_take_pending).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "interp.h"

#define INTERP_MAPS_MAX_CONFIGS 64 /* interpreter files with a config */

struct interp_map_ops {
	int (*update)(void *ctx, uint32_t pid, const struct sonde_interp_proc *v);
	int (*remove)(void *ctx, uint32_t pid); /* -ENOENT is fine */
};

/* An executable file mapping of a process. */
struct interp_mapping {
	uint64_t start, offset;
	uint8_t file_id[16];
};

struct interp_maps_stats {
	uint64_t configs;   /* held now */
	uint64_t rejected;  /* unknown kind, wrong size or version, or no room */
	uint64_t entries;   /* map updates that succeeded */
	uint64_t failures;  /* map updates that failed (map full) */
};

struct interp_maps;

/* ops: borrowed, must outlive the object. NULL on ENOMEM. */
struct interp_maps *interp_maps_new(const struct interp_map_ops *ops, void *ctx);
void interp_maps_free(struct interp_maps *im);
/* One config of kind (layout borrowed). Returns 0 or -EBADMSG (rejected,
 * counted). A second config for the same file replaces the first. */
int interp_maps_add_config(struct interp_maps *im, const uint8_t file_id[16], uint32_t kind,
			   uint32_t format_version, uint64_t runtime_offset, const void *layout,
			   size_t layout_len);
/* True once after a config arrived: report every process again. */
bool interp_maps_take_pending(struct interp_maps *im);
/* pid's executable mappings are maps[0..n), sorted by start (borrowed). */
void interp_maps_set_process(struct interp_maps *im, uint32_t pid, const struct interp_mapping *maps,
			     size_t n);
void interp_maps_remove_process(struct interp_maps *im, uint32_t pid);
void interp_maps_get_stats(struct interp_maps *im, struct interp_maps_stats *ret);
