/* checkpoint.c - a thread that checkpoints a WAL database (checkpoint.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "checkpoint.h"
#include "log.h"

struct checkpointer {
	sqlite3 *db; /* the thread's own connection */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	bool stopping;     /* under mu */
};

/* One PASSIVE checkpoint. Returns 0, or a negative errno (logged once). */
static int checkpointer_run(struct checkpointer *k)
{
	static bool logged;
	int rc = sqlite3_wal_checkpoint_v2(k->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);

	if (rc == SQLITE_OK || rc == SQLITE_BUSY) /* busy: the writer's backstop runs */
		return 0;
	if (!logged)
		log_warn("WAL checkpoint failed: %s (the writer's own checkpoints remain)",
			 sqlite3_errmsg(k->db));
	logged = true;
	return -EIO;
}

static void *checkpointer_main(void *arg)
{
	struct checkpointer *k = arg;
	struct timespec until;

	pthread_mutex_lock(&k->mu);
	while (!k->stopping) {
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)CHECKPOINT_EVERY_MS * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&k->cv, &k->mu, &until);
		if (k->stopping)
			break;
		pthread_mutex_unlock(&k->mu);
		checkpointer_run(k);
		pthread_mutex_lock(&k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

static int checkpointer_sync_init(struct checkpointer *k)
{
	pthread_condattr_t ca;
	int r;

	r = pthread_condattr_init(&ca);
	if (r)
		return -r;
	r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!r)
		r = pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (!r && (r = pthread_mutex_init(&k->mu, NULL)))
		pthread_cond_destroy(&k->cv);
	return -r;
}

int checkpointer_start(const char *path, sqlite3 *db, struct checkpointer **ret)
{
	struct checkpointer *k = calloc(1, sizeof(*k));
	int r = -ENOMEM;

	if (!k)
		return r;
	if (sqlite3_open_v2(path, &k->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK) {
		r = -EIO;
		goto fail;
	}
	/* A connection knows the database is in WAL mode (and opens the WAL
	 * and its index) once it has read it; until then a checkpoint is a
	 * no-op. */
	if (sqlite3_exec(k->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) !=
	    SQLITE_OK) {
		r = -EIO;
		goto fail;
	}
	r = checkpointer_run(k);
	if (r < 0)
		goto fail;
	r = checkpointer_sync_init(k);
	if (r < 0)
		goto fail;
	r = -pthread_create(&k->thread, NULL, checkpointer_main, k);
	if (r < 0) {
		pthread_cond_destroy(&k->cv);
		pthread_mutex_destroy(&k->mu);
		goto fail;
	}
	sqlite3_wal_autocheckpoint(db, CHECKPOINT_BACKSTOP_PAGES);
	*ret = k;
	return 0;
fail:
	sqlite3_close_v2(k->db);
	free(k);
	return r;
}

void checkpointer_stop(struct checkpointer *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	k->stopping = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->thread, NULL);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
	sqlite3_close_v2(k->db);
	free(k);
}
