/* goprobes.h - the Go probes' loader (docs/go-probes.md): BPF objects
 * loaded per executable file ID with the consts of the symbolizer's
 * ProbePlan, attached by file offset with a PID filter to every process
 * that maps that file, detached when it goes; and the `go_events` ring
 * buffer, whose records are forwarded as opaque bytes (ProbeEvents).
 *
 * goprobes_queue_plan() may be called from the uplink thread; everything
 * else is main-thread only.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "ingest.pb-c.h"
#include "procs.h"
#include "uplink.h"
#include "validate.h"

struct goprobes;

/* spans_fd: the sampler's `go_spans` map (borrowed, must outlive gp).
 * NULL on failure (logged). */
struct goprobes *goprobes_new(int spans_fd);
/* Detaches and unloads everything. Accepts NULL. */
void goprobes_free(struct goprobes *gp);

/* The probe objects this sensor has, for validate_probe_plan(): *ret_n
 * entries, owned by gp (valid until goprobes_free). Any thread. */
const struct validate_probe_def *goprobes_catalog(const struct goprobes *gp, size_t *ret_n);
/* Copies a plan that validate_probe_plan() accepted, for
 * goprobes_apply(). Returns 0, -EPROTO or -EBADMSG for one it would not
 * have accepted, -ENOMEM. Any thread. */
int goprobes_queue_plan(struct goprobes *gp, const Sonde__V1__ProbePlan *plan);
/* Loads the queued plans (once per file ID) and attaches them to every
 * live process of procs that maps their file. A plan whose file no
 * tracked process maps executable, or whose attach offsets lie outside
 * those mappings (validate_probe_offsets), is refused and counted; so is
 * the attachment to a process whose own mappings do not hold them. */
void goprobes_apply(struct goprobes *gp, struct procs *procs);

/* A process appeared or its mappings changed: attach the loaded probes of
 * the files it maps (once per process and file). */
void goprobes_process(struct goprobes *gp, const struct proc *pr);
/* The process is gone: detach its probes. */
void goprobes_process_gone(struct goprobes *gp, uint32_t pid);

/* An fd that polls readable when a quarter of the ring waits (owned). */
int goprobes_fd(struct goprobes *gp);
/* Drains `go_events` into the pending batch. Returns the records read or a
 * negative errno. */
int goprobes_consume(struct goprobes *gp);
/* True when half the pending batch is used: flush before the timer, or
 * records would be lost between two flushes of a busy service. */
bool goprobes_half_full(const struct goprobes *gp);
/* Sends the pending records as ProbeEvents (several messages if they do
 * not fit max_bytes). mono_to_real_ns: CLOCK_REALTIME - CLOCK_MONOTONIC.
 * Returns 0 or a negative errno (the batch is then dropped and counted
 * as lost in the next one). */
int goprobes_flush(struct goprobes *gp, struct uplink *u, uint64_t gen, size_t max_bytes,
		   int64_t mono_to_real_ns);

struct goprobes_stats {
	uint64_t plans, files_loaded, load_failures, attached, attach_failures, records, lost;
	uint64_t plans_refused; /* by validate_probe_offsets(), at load or attach */
	uint64_t files, links; /* now */
};
void goprobes_get_stats(const struct goprobes *gp, struct goprobes_stats *st);
