/* fd_upload.c - the descriptor socket (fd_upload.h): a local client puts
 * its file into a memfd, seals it and passes it here, which costs it one
 * copy in the kernel instead of pushing the bytes through HTTP/2 in 4 MiB
 * messages that both ends copy several times (most of a cold `sonde
 * symbolize`).
 *
 * A thread of its own accepts, so that checking a descriptor never waits
 * for the rpc loop and the loop never waits for a slow client (each gets
 * FD_UPLOAD_CONN_TIMEOUT_MS). It checks who connected (the same policy as
 * Symbols calls), that the descriptor is a memfd sealed against writes,
 * growing and shrinking, and that the bytes are the file ID the client
 * named; then it holds the descriptor until the client's Upload call takes
 * it on the loop thread (fd_upload_take), or FD_UPLOAD_HOLD_MS pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd_upload.h"
#include "fd_upload_wire.h"
#include "log.h"
#include "clock.h"

#define REQUIRED_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
#define MAX_FDS_A_MESSAGE 8 /* room to see (and close) extra descriptors */

struct held {
	bool used;
	uint32_t uid; /* who handed it over: only its Upload call takes it */
	struct fileid id;
	int fd;
	uint64_t size;
	int64_t at_ms;
};

static struct {
	int listeners[FD_UPLOAD_MAX_LISTENERS];
	size_t n_listeners;
	int stop_fd;
	pthread_t thread;
	bool running;
	bool (*authorize)(const struct rpc_peer *peer, enum rpc_role role, void *ctx);
	pthread_mutex_t lock; /* guards held */
	struct held held[FD_UPLOAD_MAX_HELD];
} fdu = { .stop_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

int fd_upload_listen(const char *sock_path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old_mask;
	int fd, err;

	if (fdu.n_listeners == FD_UPLOAD_MAX_LISTENERS)
		return -EMFILE;
	if (!fd_upload_socket_path(sock_path, sa.sun_path, sizeof(sa.sun_path)))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (lstat(sa.sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(sa.sun_path);
	/* Mode 0660 from the umask: no chmod(path) that could follow a symlink. */
	old_mask = umask(0117);
	err = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_mask);
	if (err < 0 || listen(fd, 16) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	fdu.listeners[fdu.n_listeners++] = fd;
	return 0;
}

static void reply(int conn, int status, const char *message)
{
	struct fd_upload_reply r = { .status = (uint32_t)status };

	snprintf(r.message, sizeof(r.message), "%s", message);
	if (send(conn, &r, sizeof(r), MSG_NOSIGNAL) != (ssize_t)sizeof(r))
		log_debug("descriptor socket: the reply did not go out: %s", strerror(errno));
}

static bool authorized(int conn, uint32_t *ret_uid)
{
	struct rpc_peer peer;

	if (rpc_unix_peer(conn, &peer) < 0 || !fdu.authorize(&peer, RPC_ROLE_CLIENT, NULL))
		return false;
	*ret_uid = peer.uid;
	return true;
}

size_t fd_upload_cmsg_fds(const struct msghdr *m, int *fds, size_t max)
{
	const uint8_t *ctl = m->msg_control, *end;
	size_t n = 0;

	if (!ctl || m->msg_controllen < sizeof(struct cmsghdr))
		return 0;
	end = ctl + m->msg_controllen;
	for (const uint8_t *p = ctl; (size_t)(end - p) >= sizeof(struct cmsghdr);) {
		struct cmsghdr c;
		size_t len, step;

		memcpy(&c, p, sizeof(c));
		len = c.cmsg_len;
		/* The kernel writes whole headers inside the buffer; anything
		 * else ends the walk instead of reading past it. */
		if (len < CMSG_LEN(0) || len > (size_t)(end - p))
			break;
		if (c.cmsg_level == SOL_SOCKET && c.cmsg_type == SCM_RIGHTS) {
			for (size_t i = 0; i < (len - CMSG_LEN(0)) / sizeof(int); i++) {
				if (n < max)
					memcpy(&fds[n], p + CMSG_LEN(0) + i * sizeof(int), sizeof(int));
				n++;
			}
		}
		step = CMSG_ALIGN(len);
		if (step > (size_t)(end - p))
			break;
		p += step;
	}
	return n;
}

int fd_upload_hello_check(const void *buf, size_t n, size_t n_fds, bool ctrunc, const char **why)
{
	struct fd_upload_hello h;

	if (n != sizeof(h)) {
		*why = "not a sonde descriptor hello";
		return EPROTO;
	}
	memcpy(&h, buf, sizeof(h));
	if (memcmp(h.magic, FD_UPLOAD_MAGIC, sizeof(h.magic)) != 0) {
		*why = "not a sonde descriptor hello";
		return EPROTO;
	}
	if (n_fds != 1 || ctrunc) {
		*why = "send exactly one descriptor";
		return EINVAL;
	}
	return 0;
}

/* Receives the hello and its one descriptor into *ret_fd (-1 when none
 * came). Returns 0 or an errno value with *why set. */
static int receive(int conn, struct fd_upload_hello *h, int *ret_fd, const char **why)
{
	union {
		char buf[CMSG_SPACE(MAX_FDS_A_MESSAGE * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = h, .iov_len = sizeof(*h) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	int fds[sizeof(u.buf) / sizeof(int)]; /* more than the buffer can carry */
	size_t n_fds;
	ssize_t n;

	*ret_fd = -1;
	n = recvmsg(conn, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	if (n < 0) {
		*why = errno == EAGAIN ? "no hello in time" : "cannot read the hello";
		return errno == EAGAIN ? ETIMEDOUT : errno;
	}
	/* Every descriptor that came is ours to close, whatever else is wrong. */
	n_fds = fd_upload_cmsg_fds(&m, fds, sizeof(fds) / sizeof(fds[0]));
	for (size_t i = 0; i < n_fds && i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (i == 0)
			*ret_fd = fds[0];
		else
			close(fds[i]);
	}
	return fd_upload_hello_check(h, (size_t)n, n_fds, m.msg_flags & MSG_CTRUNC, why);
}

/* Whether fd is what the hello says: a sealed memfd of its size holding
 * the file its ID names. Returns 0 or an errno value with *why set. */
static int check(int fd, const struct fd_upload_hello *h, const char **why)
{
	struct fileid got;
	struct stat st;
	int seals;

	/* The seals first: asking them never leaves the kernel, whereas an
	 * fstat of a FUSE file could wait on whoever serves it. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & REQUIRED_SEALS) != REQUIRED_SEALS) {
		*why = "not a memfd sealed against writes, growing and shrinking";
		return EPERM;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*why = "not a regular file (send a sealed memfd)";
		return EINVAL;
	}
	if (h->size == 0 || h->size > FD_UPLOAD_MAX_SIZE) {
		*why = "size must be 1 byte to 1 GiB";
		return EFBIG;
	}
	if ((uint64_t)st.st_size != h->size) {
		*why = "size differs from the descriptor's";
		return EINVAL;
	}
	if (fileid_from_fd(fd, &got) < 0 || memcmp(got.bytes, h->file_id, FILEID_LEN) != 0) {
		*why = "file_id is not the htlhash of the descriptor's bytes";
		return EINVAL;
	}
	return 0;
}

/* Holds fd for id (taken) from uid. Returns 0 or EBUSY when every slot
 * is full. */
static int hold(const struct fileid *id, uint32_t uid, int fd, uint64_t size)
{
	int64_t now = clock_now_ms();
	struct held *free_slot = NULL;

	pthread_mutex_lock(&fdu.lock);
	for (size_t i = 0; i < FD_UPLOAD_MAX_HELD; i++) {
		struct held *e = &fdu.held[i];

		if (e->used && (now - e->at_ms > FD_UPLOAD_HOLD_MS ||
				(e->uid == uid && memcmp(e->id.bytes, id->bytes, FILEID_LEN) == 0))) {
			/* Stale, or an older copy of the same bytes. */
			close(e->fd);
			e->used = false;
		}
		if (!e->used && !free_slot)
			free_slot = e;
	}
	if (free_slot)
		*free_slot = (struct held){ .used = true, .uid = uid, .id = *id, .fd = fd, .size = size,
					    .at_ms = now };
	pthread_mutex_unlock(&fdu.lock);
	return free_slot ? 0 : EBUSY;
}

static void serve(int conn)
{
	struct fd_upload_hello h;
	struct timeval tv = { .tv_sec = FD_UPLOAD_CONN_TIMEOUT_MS / 1000,
			      .tv_usec = (FD_UPLOAD_CONN_TIMEOUT_MS % 1000) * 1000 };
	const char *why = "";
	struct fileid id;
	uint32_t uid = UINT32_MAX;
	int fd = -1, err;

	if (!authorized(conn, &uid)) {
		reply(conn, EPERM, "not a Symbols client (docs/security.md)");
		return;
	}
	if (setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return;
	err = receive(conn, &h, &fd, &why);
	if (!err)
		err = check(fd, &h, &why);
	if (!err) {
		memcpy(id.bytes, h.file_id, FILEID_LEN);
		err = hold(&id, uid, fd, h.size);
		if (!err)
			fd = -1; /* held */
		else
			why = "too many descriptors waiting for their Upload call";
	}
	if (fd >= 0)
		close(fd);
	if (err)
		log_debug("descriptor socket: refused: %s", why);
	reply(conn, err, err ? why : "held for Upload");
}

static void *accept_loop(void *arg)
{
	struct pollfd pfd[FD_UPLOAD_MAX_LISTENERS + 1];

	(void)arg;
	for (;;) {
		size_t n = 0;

		pfd[n].fd = fdu.stop_fd;
		pfd[n++].events = POLLIN;
		for (size_t i = 0; i < fdu.n_listeners; i++) {
			pfd[n].fd = fdu.listeners[i];
			pfd[n++].events = POLLIN;
		}
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error_errno(-errno, "poll on the descriptor sockets");
			return NULL;
		}
		if (pfd[0].revents)
			return NULL;
		for (size_t i = 1; i < n; i++) {
			int conn;

			if (!(pfd[i].revents & POLLIN))
				continue;
			conn = accept4(pfd[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (conn < 0)
				continue; /* EAGAIN (another took it), ECONNABORTED */
			serve(conn);
			close(conn);
		}
	}
}

int fd_upload_start(bool (*authorize)(const struct rpc_peer *peer, enum rpc_role role, void *ctx))
{
	int err;

	if (fdu.n_listeners == 0 || fdu.running)
		return 0;
	fdu.authorize = authorize;
	fdu.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (fdu.stop_fd < 0)
		return -errno;
	err = pthread_create(&fdu.thread, NULL, accept_loop, NULL);
	if (err) {
		close(fdu.stop_fd);
		fdu.stop_fd = -1;
		return -err;
	}
	fdu.running = true;
	return 0;
}

void fd_upload_stop(void)
{
	if (fdu.running) {
		uint64_t one = 1;

		if (write(fdu.stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
			log_warn("cannot stop the descriptor socket's thread");
		else
			pthread_join(fdu.thread, NULL);
		fdu.running = false;
	}
	if (fdu.stop_fd >= 0)
		close(fdu.stop_fd);
	fdu.stop_fd = -1;
	for (size_t i = 0; i < fdu.n_listeners; i++)
		close(fdu.listeners[i]);
	fdu.n_listeners = 0;
	pthread_mutex_lock(&fdu.lock);
	for (size_t i = 0; i < FD_UPLOAD_MAX_HELD; i++) {
		if (fdu.held[i].used)
			close(fdu.held[i].fd);
		fdu.held[i].used = false;
	}
	pthread_mutex_unlock(&fdu.lock);
}

int fd_upload_take(const struct fileid *id, uint32_t uid, uint64_t *ret_size)
{
	int fd = -ENOENT;

	pthread_mutex_lock(&fdu.lock);
	for (size_t i = 0; i < FD_UPLOAD_MAX_HELD; i++) {
		struct held *e = &fdu.held[i];

		if (e->used && e->uid == uid && memcmp(e->id.bytes, id->bytes, FILEID_LEN) == 0) {
			fd = e->fd;
			*ret_size = e->size;
			e->used = false;
			break;
		}
	}
	pthread_mutex_unlock(&fdu.lock);
	return fd;
}
