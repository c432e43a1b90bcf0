/* checkpoint.h - WAL checkpoints of a cache database off the thread that
 * writes it.
 *
 * SQLite checkpoints a WAL database on the connection that commits, once
 * the WAL has passed wal_autocheckpoint pages: that commit then copies
 * the WAL into the database and syncs it, 15-35 ms on the symbolizer's
 * loop (the profile store's writes). A checkpointer runs PASSIVE
 * checkpoints (they never block the writer) on a connection and a thread
 * of its own every CHECKPOINT_EVERY_MS, and raises the writer's automatic
 * checkpoint to CHECKPOINT_BACKSTOP_PAGES, a backstop should the thread
 * fall behind (the WAL never grows without bound).
 */
#pragma once

#include <sqlite3.h>

#define CHECKPOINT_EVERY_MS 500
#define CHECKPOINT_BACKSTOP_PAGES 16384 /* 64 MiB of 4 KiB pages */

struct checkpointer;

/* Opens path (a WAL database that db already has open) a second time and
 * checkpoints once, so the files are open before any sandbox; starts the
 * thread and sets db's automatic checkpoint to the backstop. Returns 0
 * with *ret set, or a negative errno, db untouched (SQLite's own
 * checkpoints then serve). */
int checkpointer_start(const char *path, sqlite3 *db, struct checkpointer **ret);

/* Stops the thread (waits for a checkpoint under way) and closes its
 * connection; db's automatic checkpoint is left at the backstop. NULL is
 * fine. */
void checkpointer_stop(struct checkpointer *k);
