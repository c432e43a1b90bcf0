/* fileids.h - the registry of files that profiled processes map: file ID
 * cache keyed by (dev, inode, mtime, size), holding an open fd per file so
 * that the bytes can still be served after the process exited or the path
 * was replaced. Only files registered here may be read by fileserve.c.
 *
 * Thread-safe: the main thread registers, the uplink reader thread serves.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fileid.h"

struct fileids;
struct fileid_entry;

/* What a registration says about the file. */
struct fileid_info {
	struct fileid id;
	uint64_t size;
	uint64_t dev;
	uint64_t ino;
	int64_t mtime_sec;
	int64_t mtime_nsec;
	/* Status change time: a chmod or chown after registration changes
	 * it, so the file is registered again with its new mode and owner. */
	int64_t ctime_sec;
	int64_t ctime_nsec;
	/* Owner and mode bits (st_mode & 07777) at registration, for the
	 * symbolizer's access policy (ingest.proto Mapping.file_mode). */
	uint32_t mode, uid, gid;
};

/* max_files: open fds kept (> 0). NULL on ENOMEM. */
struct fileids *fileids_new(size_t max_files);
/* Closes every fd. Accepts NULL. */
void fileids_free(struct fileids *f);

/* Registers the file fd refers to (borrowed; an O_PATH fd is enough, e.g.
 * of /proc/PID/map_files/START-END, the kernel's link to the mapped
 * inode). Only a regular file whose inode is ino and whose device is dev
 * (makedev() of the maps line's major:minor; on overlayfs, whose stat
 * device differs from the one maps shows, the inode alone) is registered:
 * -EBADFD for anything else than a regular file, -ESTALE for another
 * inode. No path is resolved: the file is opened again read-only through
 * the sensor's own /proc/self/fd. On success returns 0, fills *ret_info
 * and gives the caller one reference in *ret_entry (release with
 * fileids_unref()). -ENOSPC when full of referenced files, else the errno
 * of fstat/open/read. Outputs untouched on failure. */
int fileids_register(struct fileids *f, int fd, uint64_t dev, uint64_t ino,
		     struct fileid_entry **ret_entry, struct fileid_info *ret_info);
/* Another reference to a registered file (e for a fork's copy of its
 * parent's mapping). Returns e; accepts NULL. */
struct fileid_entry *fileids_ref(struct fileids *f, struct fileid_entry *e);
/* Drops a reference. Unreferenced files stay cached until room is needed.
 * Accepts NULL. */
void fileids_unref(struct fileids *f, struct fileid_entry *e);

/* For serving: a new fd (owned by the caller, O_CLOEXEC) on a registered
 * file with this ID, and its registration. -ENOENT when no such file was
 * registered. */
int fileids_open(struct fileids *f, const struct fileid *id, int *ret_fd,
		 struct fileid_info *ret_info);

/* True if a file with this ID is registered (referenced or cached). */
bool fileids_contains(struct fileids *f, const struct fileid *id);

size_t fileids_count(struct fileids *f);
