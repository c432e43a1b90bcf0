/* fd_upload.h - the descriptor socket (common/fd_upload_wire.h): local
 * clients hand over sealed memfds; Symbols.Upload with by_descriptor then
 * takes them on the loop thread. One set per process.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "fileid.h"
#include "rpc_admission.h"

#define FD_UPLOAD_MAX_LISTENERS 4
#define FD_UPLOAD_MAX_HELD 8          /* descriptors waiting for their Upload call */
#define FD_UPLOAD_HOLD_MS 30000       /* then they are closed */
#define FD_UPLOAD_MAX_SIZE (1ull << 30) /* as a chunked upload */
#define FD_UPLOAD_CONN_TIMEOUT_MS 1000 /* for a client's hello */

/* Before the privilege drop: listens on sock_path's descriptor socket
 * (fd_upload_socket_path; a stale socket there is replaced), mode 0660.
 * Returns 0 or a negative errno. */
int fd_upload_listen(const char *sock_path);
/* After the sandbox is on: the thread that accepts, asks authorize (role
 * RPC_ROLE_CLIENT, as for Symbols calls) and checks each descriptor.
 * Returns 0 or a negative errno (no listeners: 0, nothing started). */
int fd_upload_start(bool (*authorize)(const struct rpc_peer *peer, enum rpc_role role, void *ctx));
/* Stops the thread, closes the listeners and the held descriptors. */
void fd_upload_stop(void);
/* Loop thread: the memfd that a peer of uid handed over for id (the
 * caller owns it) with its size, or -ENOENT. Only the uid that handed a
 * descriptor over can take it: its Upload proves it holds the bytes. */
int fd_upload_take(const struct fileid *id, uint32_t uid, uint64_t *ret_size);

/* The parse of a client's hello, apart from the socket so that
 * tests/fuzz/fuzz-fd-upload-hello.c can feed it anything. */

/* The descriptors of m's SCM_RIGHTS messages in order: the first max into
 * fds, all of them counted (the caller owns and closes those it got). The
 * walk stays inside m->msg_controllen whatever the headers say. */
size_t fd_upload_cmsg_fds(const struct msghdr *m, int *fds, size_t max);
/* Checks a hello of n bytes at buf (what recvmsg returned) that came with
 * n_fds descriptors (ctrunc: the kernel dropped some, MSG_CTRUNC): the
 * size and magic of struct fd_upload_hello, then exactly one descriptor.
 * Returns 0, or EPROTO / EINVAL (positive, as the reply's status) with
 * *why set to a static reason. The hello's size field is checked against
 * the descriptor later. */
int fd_upload_hello_check(const void *buf, size_t n, size_t n_fds, bool ctrunc, const char **why);
