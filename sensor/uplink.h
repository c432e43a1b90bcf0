/* uplink.h - the one stream to the symbolizer (/sonde.v1.Ingest/Connect).
 *
 * A connection thread opens the stream, sends Hello, waits for Welcome,
 * then reads SymbolizerMessages and answers ReadRange from the file
 * registry; on a broken stream it reconnects with exponential backoff
 * (100 ms to 2 s, and the channel retries every second at most while the
 * symbolizer is down). The main thread writes everything else, tagged with the
 * connection generation it prepared the message for, so nothing meant for
 * an old connection (stack ids!) reaches a new one.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fileids.h"
#include "ingest.pb-c.h"
#include "unwind_maps.h"

struct uplink;
struct goprobes;

/* target and node_name (NULL: the host name): borrowed during the call.
 * fileids: borrowed, must outlive the uplink. NULL on failure (logged). */
struct uplink *uplink_new(const char *target, struct fileids *fileids, uint32_t frequency_hz,
			  uint64_t start_unix_ns, const char *node_name);
/* Where UnwindTable messages go (borrowed, must outlive the uplink;
 * NULL: they are dropped). The reader thread calls unwind_maps_add_chunk()
 * for each, and unwind_maps_connection_reset() on every new connection.
 * Call before uplink_start(). */
void uplink_set_unwind_maps(struct uplink *u, struct unwind_maps *um);
/* Where ProbePlan messages go (borrowed, must outlive the uplink; NULL:
 * dropped). The reader thread checks each with validate_probe_plan()
 * against goprobes_catalog(), queues it with goprobes_queue_plan() and
 * wakes the main loop, which loads them. Call before uplink_start(). */
void uplink_set_goprobes(struct uplink *u, struct goprobes *gp);
/* Where InterpreterConfig messages go: only those validate_interp_config()
 * accepted for a registered file (without error set); fn runs
 * on the connection thread, with the message borrowed for the call.
 * NULL: they are dropped. Before uplink_start(). */
typedef void (*uplink_interp_fn)(void *ctx, const Sonde__V1__InterpreterConfig *c);
void uplink_set_interp_handler(struct uplink *u, uplink_interp_fn fn, void *ctx);
/* An eventfd the connection thread signals when a connection is made and
 * when an unwind table is loaded, so the main loop need not poll for
 * either. Before uplink_start. */
void uplink_set_wakeup(struct uplink *u, int efd);
/* unix: targets: the symbolizer is accepted only if the process that
 * listens on the socket (SO_PEERCRED of the connected socket: who called
 * listen()) has one of uids[0..n) (copied; n at most 4). Each connection
 * is then a socket the uplink connects and checks itself and hands to
 * gRPC (rpc_channel_new_from_fd), so the checked socket is the one used;
 * a refused one is closed before a byte is written, logged and retried
 * with the usual backoff. -EINVAL for a tcp: target (mutual TLS
 * authenticates it) or a bad n. Before uplink_start(). */
int uplink_set_peer_uids(struct uplink *u, const uint32_t *uids, size_t n);
/* Starts the connection thread. Returns 0 or a negative errno. */
int uplink_start(struct uplink *u);
/* The generation of the current connection (counts successful Welcomes),
 * or 0 while not connected. */
uint64_t uplink_generation(struct uplink *u);
/* Largest message the symbolizer accepts (from Welcome; capped at 4 MiB). */
size_t uplink_max_message_bytes(struct uplink *u);
/* Writes msg (borrowed) if connection gen is still the current one.
 * more: more messages of this burst follow (gRPC buffer hint). Returns 0,
 * -ENOTCONN if that connection is gone, -EPIPE if the write failed (the
 * stream is then cancelled and the thread reconnects). */
int uplink_send(struct uplink *u, uint64_t gen, const Sonde__V1__SensorMessage *msg, bool more);
/* Shutdown, after the last flush on connection gen: half-closes the
 * stream and keeps answering ReadRange until the symbolizer ends it or
 * timeout_ms pass. Returns true if the symbolizer ended it cleanly. */
bool uplink_finish(struct uplink *u, uint64_t gen, int timeout_ms);
/* Stops the thread (cancelling any stream) and frees. Accepts NULL. */
void uplink_free(struct uplink *u);

/* Counters for the exit summary. */
uint64_t uplink_read_ranges(struct uplink *u);
/* ProbePlans and InterpreterConfigs validate.c refused on receipt (not
 * applied; the stream went on). */
uint64_t uplink_plans_refused(struct uplink *u);
uint64_t uplink_configs_refused(struct uplink *u);
