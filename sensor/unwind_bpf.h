/* unwind_bpf.h - struct unwind_map_ops backed by the real BPF maps
 * (the unwind_rows and unwind_index arrays and the unwind_lpm trie of
 * sample.bpf.c). The
 * only place that writes them; unwind_maps.c decides what to write. */
#pragma once

#include <linux/types.h>

#include "fileids.h"
#include "unwind_maps.h"

struct unwind_bpf {
	int rows_fd;  /* borrowed from the skeleton */
	int index_fd; /* borrowed from the skeleton */
	int lpm_fd;   /* borrowed from the skeleton */
	/* The skeleton's unwind_gen (in .bss): one more after every write, so
	 * the BPF rule cache drops what it learnt from the maps before. */
	volatile __u64 *gen;
	struct fileids *fileids; /* borrowed: answers file_known */
	int batch;    /* 1: BPF_MAP_UPDATE_BATCH works, 0: unknown, -1: not */
};

extern const struct unwind_map_ops unwind_bpf_ops;

/* Bytes of kernel memory the BPF map with this fd charges (the "memlock"
 * line of /proc/self/fdinfo/FD), or 0 if unknown. */
uint64_t unwind_bpf_map_memlock(int map_fd);
