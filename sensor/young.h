/* young.h - the rescan schedule of processes that have just exec'd or
 * forked.
 *
 * After exec, ld.so maps the libraries within the first milliseconds; the
 * exec-time scan (main.c, at the exec event) may see none of them. Where
 * the kernel has the mmap_lock_released tracepoint as (mm, write) (not its
 * costly 5.13-6.10 form: loader.c), BPF wakes the sensor
 * as each is mapped (SONDE_REC_MMAP); the exec schedule's rescans pick
 * them up otherwise, before most of the process's first samples (neither
 * kprobes nor fentry can be counted on to see the mmap calls). It ends at
 * the first rescan that finds nothing new: ld.so maps every library before
 * the program runs, and a later dlopen shows as samples outside the known
 * mappings, which rescan (procs_rescan_limited). A fork's child that has
 * neither exec'd nor exited after YOUNG_FORK_SCAN_MS gets its own scan
 * (and unwind entries); before, it uses its parent's.
 *
 * Main thread only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "procs.h"

#define YOUNG_MAX 1024
#define YOUNG_FORK_SCAN_MS 500

enum young_kind { YOUNG_EXEC, YOUNG_FORK };

struct young;

/* procs: borrowed, must outlive the schedule. Returns NULL when out of
 * memory. */
struct young *young_new(struct procs *procs);
void young_free(struct young *y);
/* BPF wakes the sensor as young processes map code (loader_attach_mmap):
 * the exec schedule then starts at its 10 ms step, a check that nothing
 * was missed, instead of at 2 ms. */
void young_set_mmap_wakeups(struct young *y, bool on);

/* Puts pid on the schedule of kind, its first step due after now_ns
 * (CLOCK_MONOTONIC). A pid already on it starts over with the new kind
 * (a fork's child that execs takes the exec's schedule). When YOUNG_MAX
 * processes are scheduled, the new one is left out: a sample of an exec'd
 * process scans it anyway, and a fork's child keeps its parent's unwind
 * entries. */
void young_add(struct young *y, uint32_t pid, enum young_kind kind, uint64_t now_ns);
/* Scans or rescans (procs_scan, procs_rescan_maps) the processes whose
 * step is due at now_ns, and drops those whose schedule ended (gone, the
 * fork step done, a rescan that found nothing new, or the last step). A
 * step refused by the process's scan budget leaves its next step due.
 * Returns the ms to the next due step (at least 1), or -1 if none. */
int young_rescan(struct young *y, uint64_t now_ns);
/* Processes on the schedule. */
size_t young_count(const struct young *y);
