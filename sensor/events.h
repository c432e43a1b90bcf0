/* events.h - the one wrapper over the BPF ring buffer: checks each record's
 * size and type and hands typed records to the handlers. */
#pragma once

#include <stdint.h>

#include "interp.h"
#include "sample.h"

struct events_handlers {
	/* Records are borrowed: valid during the call only. */
	void (*on_sample)(const struct sonde_sample *s, void *ctx);
	void (*on_proc)(const struct sonde_proc_event *e, void *ctx);
	/* An interpreter walker's record: r->len bytes follow the header
	 * (sizes and kind range checked, contents not); may be NULL. */
	void (*on_interp)(const struct sonde_interp_rec *r, void *ctx);
	void *ctx;
};

struct events;

/* map_fd: the ring buffer map (borrowed). handlers: copied. NULL on error. */
struct events *events_new(int map_fd, const struct events_handlers *handlers);
void events_free(struct events *ev);
/* An fd that polls readable when records are waiting (owned by ev). */
int events_fd(struct events *ev);
/* Handles every waiting record. Returns the number or a negative errno. */
int events_consume(struct events *ev);
/* Records of unknown type or wrong size (a BPF/sensor mismatch). */
uint64_t events_malformed(const struct events *ev);
/* SONDE_REC_INTERP records received. */
uint64_t events_interp(struct events *ev);
