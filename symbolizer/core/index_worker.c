/* index_worker.c - builds source indexes (line_index.h) of files that
 * sensors map on one worker thread, off the rpc loop.
 *
 * Building the index of a large file with its debug file takes hundreds of
 * milliseconds (libc with its debug file: about 250 ms); on the loop
 * thread that would hold back every sensor's stacks and unwind tables
 * meanwhile. The worker only runs line_index_build over images it was
 * handed (taken); the loop thread keeps everything else: it collects the
 * results on its timer and stores them in the cache (SQLite is used from
 * the loop thread only); its caller then wakes the Symbolize calls waiting.
 * The thread is created after the sandbox is on, so it inherits the same
 * Landlock domain, seccomp filter and capabilities (none).
 *
 * A query that would wait for an index still queued gets a first answer
 * instead (index_worker_first_answer): the loop thread takes the task off
 * the queue, builds an index of only the units its addresses fall in
 * (a few milliseconds), and puts the task back at the queue's head. An
 * upload's task is held off the queue for a moment (index_worker_submit
 * with hold_until_ms), as the client that uploaded asks next and the worker
 * would otherwise have taken the task already; a held task goes to the
 * queue when that first query comes, or when its time is up.
 *
 * An upload's task also computes the file's unwind table, after the index
 * (INDEX_TASK_UNWIND): on the loop thread it was most of the time between
 * the upload and the client's first answer. Here it cannot race a first
 * answer's build over the same images, as a running task is on no list.
 * The index is handed over first, on a task of its own (publish_index).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "line_index.h"
#include "index_worker.h"
#include "registry.h"
#include "unwind_analysis.h"

#define WORKER_MAX_QUEUED 256u
/* A first answer reads at most this many DIEs (a few ms); a query
 * touching more waits for the whole index. */
#define FIRST_ANSWER_MAX_DIES 200000u

struct index_task {
	struct index_task *next;
	struct fileid id;
	struct file_image *img, *dimg, *aimg; /* taken */
	unsigned flags; /* INDEX_TASK_* */
	int64_t held_until_ms; /* on the held list until then */
	char name[128];
	struct line_index *ix; /* result */
	const char *reason;
	int err;
	struct unwind_table *ut; /* INDEX_TASK_UNWIND: result, or NULL and ureason */
	const char *ureason;
	int uerr;
	/* The index went ahead on a task of its own (publish_index); this one
	 * only carries the unwind table. Under mu. */
	bool index_published;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct index_task *todo, *todo_tail, *done, *running, *held;
static size_t n_todo;
static bool started, stopping;
static pthread_t thread;

static void task_free(struct index_task *t)
{
	if (!t)
		return;
	file_image_free(t->img);
	file_image_free(t->dimg);
	file_image_free(t->aimg);
	line_index_free(t->ix);
	unwind_table_free(t->ut);
	free(t);
}

/* Worker thread, for a task that computes an unwind table after its
 * index: hands the index over on a task of its own first, so queries
 * waiting for it (and a stop) need not wait for the table too. */
static void publish_index(struct index_task *t)
{
	struct index_task *r = calloc(1, sizeof(*r));

	if (!r)
		return; /* both go together then */
	r->id = t->id;
	memcpy(r->name, t->name, sizeof(r->name));
	r->ix = t->ix;
	r->reason = t->reason;
	r->err = t->err;
	t->ix = NULL;
	pthread_mutex_lock(&mu);
	t->index_published = true;
	r->next = done;
	done = r;
	pthread_mutex_unlock(&mu);
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		struct index_task *t;

		while (!todo && !stopping)
			pthread_cond_wait(&cv, &mu);
		if (stopping)
			break;
		t = todo;
		todo = t->next;
		if (!todo)
			todo_tail = NULL;
		n_todo--;
		running = t;
		pthread_mutex_unlock(&mu);
		/* Both images are private writable mappings (file_image.h),
		 * which libelf needs to decompress sections. */
		t->err = line_index_build((void *)file_image_data(t->img), file_image_size(t->img),
					  t->dimg ? (void *)file_image_data(t->dimg) : NULL,
					  t->dimg ? file_image_size(t->dimg) : 0,
					  t->aimg ? (void *)file_image_data(t->aimg) : NULL,
					  t->aimg ? file_image_size(t->aimg) : 0,
					  (t->flags & INDEX_TASK_SPARSE) ? LINE_INDEX_SYMBOLS_ONLY : 0,
					  &t->ix, &t->reason);
		if (t->flags & INDEX_TASK_UNWIND) {
			publish_index(t);
			t->uerr = unwind_analysis_whole(t->img, t->dimg, &t->ut, &t->ureason);
		}
		pthread_mutex_lock(&mu);
		running = NULL;
		t->next = done;
		done = t;
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* Under mu: queues t at the head (a query waits for it) or the tail. */
static void enqueue(struct index_task *t, bool head)
{
	if (head) {
		t->next = todo;
		todo = t;
		if (!todo_tail)
			todo_tail = t;
	} else {
		t->next = NULL;
		if (todo_tail)
			todo_tail->next = t;
		else
			todo = t;
		todo_tail = t;
	}
	n_todo++;
	pthread_cond_signal(&cv);
}

/* Under mu: unlinks id's task from the held list, or NULL. */
static struct index_task *unlink_held(const struct fileid *id)
{
	for (struct index_task **pp = &held; *pp; pp = &(*pp)->next) {
		struct index_task *t = *pp;

		if (memcmp(&t->id, id, sizeof(*id)) == 0) {
			*pp = t->next;
			t->next = NULL;
			return t;
		}
	}
	return NULL;
}

/* Under mu: unlinks id's task from the queue, or NULL. */
static struct index_task *unlink_queued(const struct fileid *id)
{
	struct index_task *prev = NULL;

	for (struct index_task *t = todo; t; prev = t, t = t->next) {
		if (memcmp(&t->id, id, sizeof(*id)) != 0)
			continue;
		if (prev)
			prev->next = t->next;
		else
			todo = t->next;
		if (todo_tail == t)
			todo_tail = prev;
		n_todo--;
		t->next = NULL;
		return t;
	}
	return NULL;
}

/* Under mu: unlinks id's task, held or queued (not one being built), or
 * NULL. */
static struct index_task *unlink_waiting(const struct fileid *id)
{
	struct index_task *t = unlink_held(id);

	return t ? t : unlink_queued(id);
}

int index_worker_submit(const struct fileid *id, struct file_image *img, struct file_image *dimg,
			struct file_image *aimg, unsigned flags, const char *name, int64_t hold_until_ms)
{
	struct index_task *t = calloc(1, sizeof(*t));
	int err = 0;

	if (!t) {
		file_image_free(img);
		file_image_free(dimg);
		file_image_free(aimg);
		return -ENOMEM;
	}
	t->id = *id;
	t->img = img;
	t->dimg = dimg;
	t->aimg = aimg;
	t->flags = flags;
	snprintf(t->name, sizeof(t->name), "%s", name);
	pthread_mutex_lock(&mu);
	if (n_todo >= WORKER_MAX_QUEUED) {
		err = -E2BIG;
		goto out;
	}
	if (!started) {
		err = -pthread_create(&thread, NULL, worker, NULL);
		if (err < 0)
			goto out;
		started = true;
	}
	if (hold_until_ms) {
		t->held_until_ms = hold_until_ms;
		t->next = held;
		held = t;
	} else {
		enqueue(t, false);
	}
	t = NULL;
out:
	pthread_mutex_unlock(&mu);
	task_free(t);
	return err;
}

int index_worker_first_answer(const struct fileid *id, const uint64_t *addrs, size_t n,
			      struct line_index **ret, size_t *ret_units)
{
	struct index_task *t;
	const char *reason = NULL;
	int err;

	pthread_mutex_lock(&mu);
	t = unlink_waiting(id);
	pthread_mutex_unlock(&mu);
	if (!t)
		return -ENOENT;
	/* The task is off every list, so the worker cannot touch its
	 * images meanwhile (libelf may write section headers in them). */
	err = line_index_build_for((void *)file_image_data(t->img), file_image_size(t->img),
				   t->dimg ? (void *)file_image_data(t->dimg) : NULL,
				   t->dimg ? file_image_size(t->dimg) : 0,
				   t->aimg ? (void *)file_image_data(t->aimg) : NULL,
				   t->aimg ? file_image_size(t->aimg) : 0,
				   (t->flags & INDEX_TASK_SPARSE) ? LINE_INDEX_SYMBOLS_ONLY : 0, addrs, n,
				   FIRST_ANSWER_MAX_DIES, ret_units, ret, &reason);
	pthread_mutex_lock(&mu);
	enqueue(t, true);
	pthread_mutex_unlock(&mu);
	return err;
}

void index_worker_hurry(const struct fileid *id)
{
	struct index_task *t;

	pthread_mutex_lock(&mu);
	t = unlink_waiting(id);
	if (t)
		enqueue(t, true);
	pthread_mutex_unlock(&mu);
}

void index_worker_release_held(int64_t now_ms)
{
	pthread_mutex_lock(&mu);
	for (struct index_task **pp = &held; *pp;) {
		struct index_task *t = *pp;

		if (now_ms < t->held_until_ms) {
			pp = &t->next;
			continue;
		}
		*pp = t->next;
		enqueue(t, false);
	}
	pthread_mutex_unlock(&mu);
}

bool index_worker_pending(const struct fileid *id)
{
	bool found = false;

	pthread_mutex_lock(&mu);
	for (struct index_task *t = held; t && !found; t = t->next)
		found = memcmp(&t->id, id, sizeof(*id)) == 0;
	for (struct index_task *t = todo; t && !found; t = t->next)
		found = memcmp(&t->id, id, sizeof(*id)) == 0;
	if (running && !running->index_published && memcmp(&running->id, id, sizeof(*id)) == 0)
		found = true;
	for (struct index_task *t = done; t && !found; t = t->next)
		found = !t->index_published && memcmp(&t->id, id, sizeof(*id)) == 0;
	pthread_mutex_unlock(&mu);
	return found;
}

bool index_worker_busy(void)
{
	bool busy;

	pthread_mutex_lock(&mu);
	busy = todo || running || done || held;
	pthread_mutex_unlock(&mu);
	return busy;
}

/* Loop thread: the unwind table an upload's task computed goes to the
 * cache (index_worker_collect then tells the sessions). */
static void store_unwind(struct cache *cache, struct index_task *t)
{
	if (t->uerr < 0) {
		log_warn("unwind table of %.100s: %s, ignoring", t->name, strerror(-t->uerr));
		return;
	}
	log_debug("unwind table of %.100s: %zu rows%s%s", t->name,
		  t->ut ? unwind_table_count(t->ut) : 0, t->ut ? "" : ": ",
		  t->ut ? "" : t->ureason);
	if (cache_store_unwind(cache, &t->id, t->ut, t->ut ? NULL : t->ureason,
			       (int64_t)time(NULL)) < 0)
		log_warn("cannot write the unwind table of %.100s to the cache, ignoring", t->name);
	t->ut = NULL; /* the cache took it */
}

size_t index_worker_collect(struct cache *cache, struct registry *reg)
{
	struct index_task *list, *t;
	size_t n = 0;

	pthread_mutex_lock(&mu);
	list = done;
	done = NULL;
	pthread_mutex_unlock(&mu);
	if (!list)
		return 0;
	/* Everything goes into the cache before anyone is woken: a wakeup
	 * answers the queries that no longer wait for the worker, and an
	 * upload's index and table can come in the same list. */
	for (t = list; t; t = t->next) {
		if (t->index_published) {
			/* stored from its own task */
		} else if (t->err < 0) {
			const char *why = t->reason ? t->reason : strerror(-t->err);

			log_warn("source index of %.100s: %s, ignoring", t->name, why);
			if (cache_store_index(cache, &t->id, NULL, why, (int64_t)time(NULL)) < 0)
				log_warn("cannot write the index failure of %.100s to the cache, ignoring",
					 t->name);
		} else {
			log_debug("source index of %.100s: %zu bytes%s", t->name,
				  line_index_bytes(t->ix),
				  line_index_has_lines(t->ix) ? "" : " (symbols only)");
			if (cache_store_index(cache, &t->id, t->ix, NULL, (int64_t)time(NULL)) < 0)
				log_warn("cannot write the source index of %.100s to the cache, ignoring",
					 t->name);
			t->ix = NULL; /* the cache took it */
		}
		if (t->flags & INDEX_TASK_UNWIND)
			store_unwind(cache, t);
	}
	while ((t = list)) {
		list = t->next;
		/* Sessions whose sensors map an uploaded file get its table,
		 * as when an analysis job ends. */
		if (t->flags & INDEX_TASK_UNWIND)
			registry_file_done(reg, &t->id);
		task_free(t);
		n++;
	}
	return n;
}

void index_worker_stop(struct cache *cache, struct registry *reg)
{
	struct index_task *t;

	pthread_mutex_lock(&mu);
	stopping = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	if (started)
		pthread_join(thread, NULL);
	started = false;
	/* What the worker finished is stored, not dropped: a symbolizer
	 * stopped right after an upload's answer would otherwise restart
	 * with the file's symbols cached and no index that anything builds. */
	index_worker_collect(cache, reg);
	while ((t = todo)) {
		todo = t->next;
		task_free(t);
	}
	while ((t = done)) {
		done = t->next;
		task_free(t);
	}
	while ((t = held)) {
		held = t->next;
		task_free(t);
	}
	todo_tail = NULL;
	n_todo = 0;
	stopping = false;
}
