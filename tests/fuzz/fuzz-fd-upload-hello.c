/* fuzz-fd-upload-hello.c - fuzzes the parse of a descriptor-socket hello
 * (symbolizer/api/fd_upload.c, common/fd_upload_wire.h): the walk over
 * the control messages that carry the descriptors (fd_upload_cmsg_fds)
 * and the hello's checks (fd_upload_hello_check). A client writes the
 * hello's bytes and chooses how many descriptors to attach; the control
 * headers come from the kernel, but the walk is held to its buffer
 * whatever they say. No socket, no descriptor is opened or closed here.
 *
 * Input: u8 flags (bit 0: MSG_CTRUNC), u8 n, n bytes of hello (as
 * recvmsg returned them), then the control buffer (at most the 8
 * descriptors' room the service gives it, or up to 1 KiB when flag bit 1
 * is set, to try headers no kernel writes).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fd_upload.h"
#include "fd_upload_wire.h"

#define FUZZ_MAX_CONTROL 1024
#define FUZZ_MAX_FDS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	union {
		uint8_t buf[FUZZ_MAX_CONTROL];
		struct cmsghdr align;
	} ctl;
	uint8_t hello[256];
	int fds[FUZZ_MAX_FDS];
	struct msghdr m = { 0 };
	const char *why = NULL;
	size_t pos = 0, n, n_ctl, n_fds, cap;
	uint8_t flags;
	int r;

	if (size < 2)
		return 0;
	flags = data[pos++];
	n = data[pos++];
	if (n > size - pos)
		n = size - pos;
	memcpy(hello, data + pos, n);
	pos += n;
	cap = flags & 2 ? sizeof(ctl.buf) : CMSG_SPACE(FUZZ_MAX_FDS * sizeof(int));
	n_ctl = size - pos < cap ? size - pos : cap;
	memcpy(ctl.buf, data + pos, n_ctl);
	m.msg_control = n_ctl ? ctl.buf : NULL;
	m.msg_controllen = n_ctl;

	memset(fds, 0xff, sizeof(fds));
	n_fds = fd_upload_cmsg_fds(&m, fds, FUZZ_MAX_FDS);
	if (n_fds > n_ctl / sizeof(int))
		abort(); /* more descriptors than the buffer could hold */
	for (size_t i = n_fds; i < FUZZ_MAX_FDS; i++)
		if (fds[i] != -1)
			abort(); /* wrote past what it counted */

	r = fd_upload_hello_check(hello, n, n_fds, flags & 1, &why);
	if (r == 0) {
		struct fd_upload_hello h;

		if (n != sizeof(h) || n_fds != 1 || (flags & 1))
			abort();
		memcpy(&h, hello, sizeof(h));
		if (memcmp(h.magic, FD_UPLOAD_MAGIC, sizeof(h.magic)) != 0)
			abort();
	} else if ((r != EPROTO && r != EINVAL) || !why) {
		abort();
	}
	return 0;
}
