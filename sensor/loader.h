/* loader.h - bpf/sample.bpf.c's object: open -> configure -> load, kept
 * apart from attach (the caller attaches once the maps it fills before
 * sampling are filled); the two things read back from it (error counts,
 * charged map memory); and its --pid allow-list behind targets.h's ops. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "env.h"
#include "sample.skel.h"
#include "targets.h"

struct loader_config {
	const struct targets_filter *filter; /* borrowed */
	bool idle;                  /* keep samples of the idle task */
	enum env_bpf_walk walk;     /* bpf_loop(), tail calls, or what the kernel has */
	uint32_t ringbuf_bytes;     /* loader_ringbuf_size() */
	uint32_t unwind_rows;       /* loader_unwind_rows(); 0: frame pointers only */
	bool memory_reserved;       /* the memory profile from brk/mmap (memory_every 0) */
	uint32_t memory_every;      /* the memory profile's period in faults; 0: off
				     * (on needs bpf_loop(): else loader_load fails) */
	bool off_cpu;               /* load the off-CPU program (bpf_loop() only); attached
	                             * with the tracepoints by sample_bpf__attach() */
	uint64_t off_cpu_min_ns;    /* shorter blocks are not recorded */
};


/* The ring buffer's size: ringbuf_mb when set, else about one second of
 * samples of every CPU at frequency (256 KiB to 64 MiB, a power of two). */
uint32_t loader_ringbuf_size(uint32_t ringbuf_mb, uint32_t frequency);
/* rows rounded down to whole BPF buckets (bpf/unwind.h): the capacity of
 * the unwind row array, which unwind_maps_new() must be given too. */
uint32_t loader_unwind_rows(uint32_t rows);

/* Opens, configures and loads the object (not attached), and installs the
 * tail-call walker where it is used. On success returns 0 with an owned
 * *ret_skel (sample_bpf__destroy) and *ret_use_loop: true when user stacks
 * are walked with bpf_loop() (attach progs.sonde_sample), false with tail
 * calls (progs.sonde_sample_tail). On failure logs why, destroys what it
 * made and returns a negative errno. */
int loader_load(const struct loader_config *c, struct sample_bpf **ret_skel, bool *ret_use_loop);

/* Attaches the program that wakes the sensor when a profiled process in
 * its first second after an exec maps code (SONDE_REC_MMAP), where the
 * kernel has the mmap_lock_released tracepoint. Returns whether it is
 * attached; without it, libraries
 * are found by the young rescans and samples outside known mappings
 * (logged once). */
bool loader_attach_mmap(struct sample_bpf *skel);

/* Per-error counts summed over the CPUs into ret_errs (SONDE_ERR__COUNT
 * entries; 0 where unreadable). Returns the ring-buffer-full count: the
 * samples lost. */
uint64_t loader_errors(struct sample_bpf *skel, uint64_t *ret_errs);
/* Kernel memory charged for all of the object's maps: their sizes are
 * fixed once loaded, so one read after loading holds. */
uint64_t loader_map_bytes(struct sample_bpf *skel);

/* The --pid allow-list (targets.h) in the object's allowed_tgids map;
 * ctx is the loaded struct sample_bpf. */
extern const struct targets_allow_ops loader_allow_ops;
