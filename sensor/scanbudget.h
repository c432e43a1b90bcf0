/* scanbudget.h - how much of one process's /proc/PID/maps the sensor may
 * read per second: a token bucket of bytes (docs/security.md, "A hostile
 * profiled process").
 *
 * A rescan costs the sensor in proportion to the maps text it reads (the
 * kernel formats every line, procs.c parses it), and the process decides
 * how long that text is (up to vm.max_map_count lines) and how often it
 * changes. Rescans of a known process (mmap wakeups, young steps, samples
 * at unknown addresses) are allowed while its bucket is not empty; each
 * scan takes what it read, so a process whose maps text is large is
 * rescanned less often, in proportion, and what it makes the sensor read
 * stays under SCAN_BUDGET_BURST plus SCAN_BUDGET_BYTES_PER_SEC a second.
 * Normal processes (tens of KiB of maps text) never empty it.
 *
 * Pure: the caller passes the time, so the unit tests replay it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A full bucket: a process's start (ld.so's wakeups, the young steps,
 * each a rescan of maps text that grows with every library) fits in it
 * many times over. */
#define SCAN_BUDGET_BURST (4u << 20)
/* The refill: with the burst, test_trust_maps.py's process of 65,000
 * mappings costs the sensor about 3 % of one CPU (docs/security.md). */
#define SCAN_BUDGET_BYTES_PER_SEC (256u << 10)

struct scan_budget {
	int64_t bytes;   /* may go below 0: the last scan overdrew it */
	uint64_t at_ns;  /* CLOCK_MONOTONIC of the last refill */
};

/* A full bucket at now_ns. */
void scan_budget_init(struct scan_budget *b, uint64_t now_ns);
/* Refills for the time since the last call, then says whether a rescan
 * may run now (the bucket holds more than 0 bytes). */
bool scan_budget_allows(struct scan_budget *b, uint64_t now_ns);
/* A scan read bytes at now_ns: they are taken from the bucket (after its
 * refill), which may go below 0 down to -bytes. */
void scan_budget_spend(struct scan_budget *b, uint64_t bytes, uint64_t now_ns);
