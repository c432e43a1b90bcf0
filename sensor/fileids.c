/* fileids.c - a fixed array of registered files, searched linearly (a few
 * thousand entries at most; registration is rare after startup, lookups by
 * file ID happen only per ReadRange). */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "fileids.h"
#include "log.h"

struct fileid_entry {
	struct fileid_info info;
	int fd; /* -1: slot free */
	uint32_t refs;
	uint64_t last_use; /* registration tick, for eviction */
};

struct fileids {
	pthread_mutex_t lock;
	struct fileid_entry *entries;
	size_t max, n_used;
	uint64_t tick;
};

struct fileids *fileids_new(size_t max_files)
{
	struct fileids *f;

	if (max_files == 0)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->entries = calloc(max_files, sizeof(*f->entries));
	if (!f->entries) {
		free(f);
		return NULL;
	}
	for (size_t i = 0; i < max_files; i++)
		f->entries[i].fd = -1;
	f->max = max_files;
	pthread_mutex_init(&f->lock, NULL);
	return f;
}

void fileids_free(struct fileids *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->max; i++)
		if (f->entries[i].fd >= 0)
			close(f->entries[i].fd);
	pthread_mutex_destroy(&f->lock);
	free(f->entries);
	free(f);
}

static bool same_file(const struct fileid_info *a, const struct stat *st)
{
	return a->dev == (uint64_t)st->st_dev && a->ino == (uint64_t)st->st_ino &&
	       a->size == (uint64_t)st->st_size && a->mtime_sec == st->st_mtim.tv_sec &&
	       a->mtime_nsec == st->st_mtim.tv_nsec && a->ctime_sec == st->st_ctim.tv_sec &&
	       a->ctime_nsec == st->st_ctim.tv_nsec && a->mode == (st->st_mode & 07777) &&
	       a->uid == st->st_uid && a->gid == st->st_gid;
}

/* Called with the lock held: a free slot, evicting the least recently
 * registered unreferenced file if needed. NULL when all are referenced. */
static struct fileid_entry *free_slot(struct fileids *f)
{
	struct fileid_entry *victim = NULL;

	for (size_t i = 0; i < f->max; i++) {
		struct fileid_entry *e = &f->entries[i];

		if (e->fd < 0)
			return e;
		if (e->refs == 0 && (!victim || e->last_use < victim->last_use))
			victim = e;
	}
	if (victim) {
		close(victim->fd);
		victim->fd = -1;
		f->n_used--;
	}
	return victim;
}

/* overlayfs reports a per-layer pseudo device in stat (when its layers are
 * on different file systems and xino is off), while /proc/PID/maps shows
 * the overlay's own device (on 6.18, for example, a lower file shows 0:40
 * in maps and 0:42 in fstat, an upper one 0:40 and 0:41), while the inode
 * numbers agree. On overlayfs only the inode is compared. */
static bool on_overlayfs(int fd)
{
	struct statfs sfs;

	return fstatfs(fd, &sfs) == 0 && sfs.f_type == OVERLAYFS_SUPER_MAGIC;
}

static int check_file(int fd, uint64_t dev, uint64_t ino, struct stat *ret_st)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	if ((uint64_t)st.st_ino != ino || ((uint64_t)st.st_dev != dev && !on_overlayfs(fd)))
		return -ESTALE;
	*ret_st = st;
	return 0;
}

/* A read-only fd on the inode fd refers to (an O_PATH fd, say), through
 * our own /proc/self/fd: no path anyone else chose is resolved. */
static int reopen_read(int fd, const struct stat *want, int *ret_fd)
{
	char path[64];
	struct stat st;
	int rfd, r;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (rfd < 0)
		return -errno;
	if (fstat(rfd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_dev != want->st_dev || st.st_ino != want->st_ino) {
		r = -ESTALE;
		goto fail;
	}
	*ret_fd = rfd;
	return 0;
fail:
	close(rfd);
	return r;
}

int fileids_register(struct fileids *f, int fd, uint64_t dev, uint64_t ino,
		     struct fileid_entry **ret_entry, struct fileid_info *ret_info)
{
	struct fileid_entry *e = NULL;
	struct fileid_info info = {0};
	struct stat st = {0};
	int rfd = -1, r;

	r = check_file(fd, dev, ino, &st);
	if (r < 0)
		return r;

	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->max; i++)
		if (f->entries[i].fd >= 0 && same_file(&f->entries[i].info, &st)) {
			e = &f->entries[i];
			e->refs++;
			e->last_use = ++f->tick;
			*ret_entry = e;
			*ret_info = e->info;
			pthread_mutex_unlock(&f->lock);
			return 0;
		}
	pthread_mutex_unlock(&f->lock);

	/* Hash outside the lock: it reads 8 KiB. */
	r = reopen_read(fd, &st, &rfd);
	if (r < 0)
		return r;
	info.size = st.st_size;
	info.dev = st.st_dev;
	info.ino = st.st_ino;
	info.mtime_sec = st.st_mtim.tv_sec;
	info.mtime_nsec = st.st_mtim.tv_nsec;
	info.ctime_sec = st.st_ctim.tv_sec;
	info.ctime_nsec = st.st_ctim.tv_nsec;
	info.mode = st.st_mode & 07777;
	info.uid = st.st_uid;
	info.gid = st.st_gid;
	r = fileid_from_fd(rfd, &info.id);
	if (r < 0)
		goto fail;

	pthread_mutex_lock(&f->lock);
	e = free_slot(f);
	if (!e) {
		pthread_mutex_unlock(&f->lock);
		r = -ENOSPC;
		goto fail;
	}
	e->info = info;
	e->fd = rfd;
	e->refs = 1;
	e->last_use = ++f->tick;
	f->n_used++;
	pthread_mutex_unlock(&f->lock);
	*ret_entry = e;
	*ret_info = info;
	return 0;
fail:
	close(rfd);
	return r;
}

struct fileid_entry *fileids_ref(struct fileids *f, struct fileid_entry *e)
{
	if (!e)
		return NULL;
	pthread_mutex_lock(&f->lock);
	e->refs++;
	pthread_mutex_unlock(&f->lock);
	return e;
}

void fileids_unref(struct fileids *f, struct fileid_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&f->lock);
	if (e->refs > 0)
		e->refs--;
	pthread_mutex_unlock(&f->lock);
}

int fileids_open(struct fileids *f, const struct fileid *id, int *ret_fd,
		 struct fileid_info *ret_info)
{
	int r = -ENOENT;

	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->max; i++) {
		struct fileid_entry *e = &f->entries[i];
		int fd;

		if (e->fd < 0 || memcmp(e->info.id.bytes, id->bytes, FILEID_LEN) != 0)
			continue;
		fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0) {
			r = -errno;
			break;
		}
		*ret_fd = fd;
		*ret_info = e->info;
		r = 0;
		break;
	}
	pthread_mutex_unlock(&f->lock);
	return r;
}

bool fileids_contains(struct fileids *f, const struct fileid *id)
{
	bool found = false;

	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->max && !found; i++)
		found = f->entries[i].fd >= 0 &&
			memcmp(f->entries[i].info.id.bytes, id->bytes, FILEID_LEN) == 0;
	pthread_mutex_unlock(&f->lock);
	return found;
}

size_t fileids_count(struct fileids *f)
{
	size_t n;

	pthread_mutex_lock(&f->lock);
	n = f->n_used;
	pthread_mutex_unlock(&f->lock);
	return n;
}
