/* symbolize.c - sonde symbolize --file PATH: names addresses of any ELF
 * file the caller can read. The CLI computes the file's ID (the htlhash,
 * common/fileid.h), asks the symbolizer, and if the symbolizer has never
 * seen the file uploads it and asks again: on a local Unix socket as a
 * sealed memfd passed on the descriptor socket (common/fd_upload_wire.h),
 * else in 4 MiB Symbols.Upload chunks. The symbolizer itself never opens
 * the path: it only gets the bytes.
 *
 * Addresses go in batches (BATCH per call, one channel for all) so a
 * reply stays far under the message limit; while one batch is printed a
 * helper thread already makes the next call; replies are compact (frames as
 * columns over one string table per batch, see symbols.proto), and each
 * string is escaped once per batch. Output is one line (JSON) or one block
 * (text) per address, in input order.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "command.h"
#include "fd_upload_wire.h"
#include "fileid.h"

#define BATCH 20000u
#define CHUNK (4u << 20)
#define MAX_ADDRESSES (64u << 20)
#define UPLOAD_TIMEOUT_MS 300000 /* the last chunk waits for the analysis */
#define UPLOAD_RETRIES 120       /* on RESOURCE_EXHAUSTED, one second apart */

/* One address line [p, end) without its newline: blanks around, an
 * optional 0x, hex digits. Returns 0, 1 (blank: skip) or -EINVAL. */
static int parse_line(const char *p, const char *end, uint64_t *ret)
{
	uint64_t v = 0;
	size_t digits = 0;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		end--;
	if (p == end)
		return 1;
	if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	for (; p < end; p++, digits++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'f')
			d = (unsigned)((*p | 0x20) - 'a' + 10);
		else
			return -EINVAL;
		if (v >> 60)
			return -EINVAL; /* more than 64 bits */
		v = v << 4 | d;
	}
	*ret = v;
	return 0;
}

/* One address given as an argument: a line's grammar, not blank. */
static int parse_addr(const char *s, uint64_t *ret)
{
	return parse_line(s, s + strlen(s), ret) == 0 ? 0 : -EINVAL;
}

/* The addresses, in anonymous memory of their own: grown by mremap, which
 * moves the pages instead of copying them, and advised for huge pages.
 * realloc would fault in new pages and then copy into them, and a page
 * fault is expensive on a VM; this way one 2 MiB page where the kernel
 * has them. */
struct addr_vec {
	uint64_t *v;
	size_t n, cap;
};

#define ADDR_FIRST_CAP ((2u << 20) / sizeof(uint64_t))

/* Appends x. Returns 0 or an exit code. */
static int addr_push(struct addr_vec *a, uint64_t x)
{
	if (a->n == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : ADDR_FIRST_CAP;
		void *p;

		if (ncap > MAX_ADDRESSES) {
			fprintf(stderr, "sonde: more than %u addresses\n", MAX_ADDRESSES);
			return 2;
		}
		p = a->v ? mremap(a->v, a->cap * sizeof(*a->v), ncap * sizeof(*a->v), MREMAP_MAYMOVE)
			 : mmap(NULL, ncap * sizeof(*a->v), PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return 1;
		madvise(p, ncap * sizeof(*a->v), MADV_HUGEPAGE); /* advice only */
		a->v = p;
		a->cap = ncap;
	}
	a->v[a->n++] = x;
	return 0;
}

static void addr_free(struct addr_vec *a)
{
	if (a->v)
		munmap(a->v, a->cap * sizeof(*a->v));
	*a = (struct addr_vec){ 0 };
}

/* Addresses from argv, or from stdin (one per line, blank lines skipped).
 * stdin is read in large blocks and parsed in place: 100,000 addresses
 * took 7-9 ms through getline and strtoull, a tenth of a warm run.
 * Returns 0 or an exit code. */
static int read_addresses(int n, char **argv, struct addr_vec *a)
{
	enum { BLOCK = 1 << 16, MAX_LINE = 256 };
	size_t have = 0;
	char *buf = NULL;
	bool eof = false;
	int rc = 0;

	if (n > 0) {
		for (int i = 0; i < n; i++) {
			uint64_t v;

			if (parse_addr(argv[i], &v) < 0) {
				fprintf(stderr, "sonde: '%.64s' is not a hex address\n", argv[i]);
				addr_free(a);
				return 2;
			}
			if ((rc = addr_push(a, v))) {
				addr_free(a);
				return rc;
			}
		}
		return 0;
	}
	/* A block, plus room for the unfinished line carried over. */
	buf = malloc(BLOCK + MAX_LINE);
	if (!buf)
		return 1;
	while (!eof) {
		ssize_t k = read(STDIN_FILENO, buf + have, BLOCK + MAX_LINE - have);
		const char *p = buf, *end;

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			fprintf(stderr, "sonde: reading addresses: %s\n", strerror(errno));
			rc = 1;
			goto fail;
		}
		eof = k == 0;
		have += (size_t)k;
		end = buf + have;
		for (;;) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			uint64_t v;
			int r;

			if (!nl && !(eof && p < end))
				break;
			if (!nl)
				nl = end;
			r = parse_line(p, nl, &v);
			if (r < 0) {
				fprintf(stderr, "sonde: '%.*s' is not a hex address\n",
					(int)(nl - p < 64 ? nl - p : 64), p);
				rc = 2;
				goto fail;
			}
			if (r == 0 && (rc = addr_push(a, v)))
				goto fail;
			p = nl < end ? nl + 1 : end;
		}
		have = (size_t)(end - p);
		if (have >= MAX_LINE) {
			fprintf(stderr, "sonde: '%.64s' is not a hex address\n", p);
			rc = 2;
			goto fail;
		}
		memmove(buf, p, have);
	}
	free(buf);
	return 0;
fail:
	free(buf);
	addr_free(a);
	return rc;
}

/* A sealed copy of fd's size bytes in a memfd (copied in the kernel).
 * Returns the memfd or -errno. */
static int sealed_copy(int fd, uint64_t size)
{
	loff_t off = 0;
	int mfd, err;

	mfd = memfd_create("sonde-upload", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -errno;
	while ((uint64_t)off < size) {
		ssize_t n = copy_file_range(fd, &off, mfd, NULL, size - (uint64_t)off, 0);

		if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
			      errno == EOPNOTSUPP))
			n = sendfile(mfd, fd, &off, size - (uint64_t)off); /* across file systems */
		if (n <= 0) {
			err = n == 0 ? -EIO : -errno; /* 0: the file shrank */
			goto fail;
		}
	}
	if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		err = -errno;
		goto fail;
	}
	return mfd;
fail:
	close(mfd);
	return err;
}

/* Passes mfd with its hello on the descriptor socket beside the
 * symbolizer's Unix socket path. Returns 0 when it holds it, else -errno
 * (the symbolizer's status, or the socket's error). */
static int pass_descriptor(const char *sock_path, int mfd, uint64_t size, const struct fileid *id)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct fd_upload_hello h = { .size = size };
	struct fd_upload_reply r;
	struct timeval tv = { .tv_sec = 10 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u = { 0 };
	struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	int sock, err;

	if (!fd_upload_socket_path(sock_path, sa.sun_path, sizeof(sa.sun_path)))
		return -ENAMETOOLONG;
	memcpy(h.magic, FD_UPLOAD_MAGIC, sizeof(h.magic));
	memcpy(h.file_id, id->bytes, FILEID_LEN);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &mfd, sizeof(int));
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	errno = 0; /* a short reply sets none */
	if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    sendmsg(sock, &m, MSG_NOSIGNAL) != (ssize_t)sizeof(h) ||
	    recv(sock, &r, sizeof(r), MSG_WAITALL) != (ssize_t)sizeof(r)) {
		err = errno ? -errno : -EPROTO;
		goto cleanup;
	}
	/* Refused (r.message says why): the caller sends chunks, whose
	 * answer states any real problem with the file. */
	err = r.status ? -(int)r.status : 0;
cleanup:
	close(sock);
	return err;
}

/* Hands the file over by descriptor (fd_upload_wire.h) when the
 * symbolizer is on a local Unix socket: the kernel copies the file once,
 * and no bytes go through gRPC. Returns 0 (analysed or known), 1 (not
 * possible here: send chunks) or -errno. SONDE_UPLOAD=chunks turns it
 * off (tests of the chunked path). */
static int upload_by_descriptor(struct rpc_channel *ch, const char *address, int fd, uint64_t size,
				const char *name, const struct fileid *id)
{
	Sonde__V1__UploadRequest req = SONDE__V1__UPLOAD_REQUEST__INIT;
	Sonde__V1__UploadResponse *resp = NULL;
	const char *mode = getenv("SONDE_UPLOAD");
	struct rpc_error rerr;
	int mfd, err;

	if (strncmp(address, "unix:", 5) != 0 || (mode && strcmp(mode, "chunks") == 0))
		return 1;
	mfd = sealed_copy(fd, size);
	if (mfd < 0)
		return 1;
	err = pass_descriptor(address + 5, mfd, size, id);
	close(mfd); /* the symbolizer holds its own reference */
	if (err < 0)
		return 1; /* no descriptor socket (an older symbolizer), or refused */
	req.file_id.data = (uint8_t *)id->bytes;
	req.file_id.len = FILEID_LEN;
	req.size = size;
	req.name = (char *)name;
	req.by_descriptor = true;
	err = command_call_on(ch, address, "/sonde.v1.Symbols/Upload", &req.base,
			      &sonde__v1__upload_response__descriptor, UPLOAD_TIMEOUT_MS, false,
			      (ProtobufCMessage **)&resp, &rerr);
	if (err < 0)
		return rerr.status == RPC_FAILED_PRECONDITION ? 1 : err;
	if (resp->error && *resp->error)
		fprintf(stderr, "sonde: the symbolizer could not analyse %s: %s\n", name, resp->error);
	rpc_message_free(&resp->base);
	return 0;
}

/* Sends the file: by descriptor where it can, else in order, in chunks.
 * Returns 0 (analysed or known) or -errno. */
static int upload(struct rpc_channel *ch, const char *address, const char *path,
		  const struct fileid *id)
{
	Sonde__V1__UploadRequest req = SONDE__V1__UPLOAD_REQUEST__INIT;
	Sonde__V1__UploadResponse *resp = NULL;
	const char *slash = strrchr(path, '/');
	uint8_t *buf = NULL;
	struct stat st;
	uint64_t off = 0;
	int fd = -1, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		err = -errno;
		fprintf(stderr, "sonde: %s: %s\n", path, strerror(errno));
		goto cleanup;
	}
	err = upload_by_descriptor(ch, address, fd, (uint64_t)st.st_size, slash ? slash + 1 : path, id);
	if (err <= 0)
		goto cleanup;
	buf = malloc(CHUNK);
	if (!buf) {
		err = -ENOMEM;
		goto cleanup;
	}
	req.file_id.data = (uint8_t *)id->bytes;
	req.file_id.len = FILEID_LEN;
	req.size = (uint64_t)st.st_size;
	req.name = (char *)(slash ? slash + 1 : path);
	for (;;) {
		ssize_t n = pread(fd, buf, CHUNK, (off_t)off);
		struct rpc_error rerr;
		int tries = 0;

		if (n < 0) {
			err = -errno;
			fprintf(stderr, "sonde: reading %s: %s\n", path, strerror(errno));
			goto cleanup;
		}
		req.offset = off;
		req.data.data = buf;
		req.data.len = (size_t)n;
		for (;;) {
			err = command_call_on(ch, address, "/sonde.v1.Symbols/Upload", &req.base,
					      &sonde__v1__upload_response__descriptor, UPLOAD_TIMEOUT_MS,
					      false, (ProtobufCMessage **)&resp, &rerr);
			if (!(err < 0 && rerr.status == RPC_RESOURCE_EXHAUSTED && ++tries < UPLOAD_RETRIES))
				break;
			sleep(1); /* the symbolizer's upload budget refills */
		}
		if (err < 0) {
			if (rerr.status == RPC_RESOURCE_EXHAUSTED)
				fprintf(stderr, "sonde: upload of %s refused: %s\n", path, rerr.message);
			goto cleanup;
		}
		if (resp->complete) {
			if (resp->error && *resp->error)
				fprintf(stderr, "sonde: the symbolizer could not analyse %s: %s\n", path,
					resp->error);
			err = 0;
			goto cleanup;
		}
		if (n == 0 || resp->received != off + (uint64_t)n) {
			fprintf(stderr, "sonde: upload of %s stalled at byte %" PRIu64 "\n", path,
				resp->received);
			err = -EIO;
			goto cleanup;
		}
		off += (uint64_t)n;
		rpc_message_free(&resp->base);
		resp = NULL;
	}
cleanup:
	rpc_message_free(resp ? &resp->base : NULL);
	free(buf);
	if (fd >= 0)
		close(fd);
	return err;
}

/* A result is assembled here and written a buffer at a time, straight
 * to the descriptor: stdio would take its lock on every call (gRPC's threads make the
 * CLI multi-threaded) and printf would parse its format every time, and
 * stdio's own buffer would be one more copy of every byte. */
static char obuf[1u << 16];
static size_t olen;
static bool out_failed;
static int out_errno;

static void out_write(const char *s, size_t n)
{
	while (n && !out_failed) {
		ssize_t k = write(STDOUT_FILENO, s, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			out_failed = true;
			out_errno = k < 0 ? errno : EIO;
			break;
		}
		s += k;
		n -= (size_t)k;
	}
}

static void out_flush(void)
{
	out_write(obuf, olen);
	olen = 0;
}

static void out(const char *s, size_t n)
{
	if (olen + n > sizeof(obuf)) {
		out_flush();
		if (n > sizeof(obuf)) {
			out_write(s, n);
			return;
		}
	}
	memcpy(obuf + olen, s, n);
	olen += n;
}

#define OUT_LIT(lit) out(lit, sizeof(lit) - 1)

static void put_u64(uint64_t v, int base)
{
	char buf[24], *p = buf + sizeof(buf);

	do {
		*--p = "0123456789abcdef"[v % (unsigned)base];
		v /= (unsigned)base;
	} while (v);
	out(p, (size_t)(buf + sizeof(buf) - p));
}

/* Prints the k addresses of one compact result. Returns 0 or -EBADMSG
 * when the columns do not add up. */
static int print_result(const struct cli_symbolize_opts *o, const uint64_t *addrs, size_t k,
			const Sonde__V1__SymbolizeResult *r)
{
	char *qbuf = NULL;
	size_t *qoff = NULL;
	size_t f = 0, total = 0;
	int err = 0;

	if (r->n_frame_counts != k)
		return -EBADMSG;
	for (size_t i = 0; i < k; i++)
		total += r->frame_counts[i];
	if (total != r->n_frame_functions || total != r->n_frame_files || total != r->n_frame_lines)
		return -EBADMSG;
	for (size_t i = 0; i < total; i++)
		if (r->frame_functions[i] >= r->n_strings || r->frame_files[i] >= r->n_strings)
			return -EBADMSG;
	if (o->json) {
		/* Every string quoted once, into one buffer (one allocation
		 * a batch, not one a string: fewer fresh pages to fault in);
		 * string i is qbuf[qoff[i], qoff[i + 1]). */
		size_t room = 0, at = 0;

		for (size_t i = 0; i < r->n_strings; i++)
			room += strlen(r->strings[i]) * 6 + 2;
		qoff = malloc((r->n_strings + 1) * sizeof(*qoff));
		qbuf = malloc(room + 1);
		if (!qoff || !qbuf) {
			err = -ENOMEM;
			goto cleanup;
		}
		for (size_t i = 0; i < r->n_strings; i++) {
			qoff[i] = at;
			at = (size_t)(cli_json_quote_into(qbuf + at, r->strings[i]) - qbuf);
		}
		qoff[r->n_strings] = at;
	}
	for (size_t i = 0; i < k; i++) {
		uint32_t n = r->frame_counts[i];

		if (o->json) {
			OUT_LIT("{\"address\":\"0x");
			put_u64(addrs[i], 16);
			OUT_LIT("\",\"frames\":[");
			for (uint32_t j = 0; j < n; j++, f++) {
				uint32_t fn = r->frame_functions[f], file = r->frame_files[f];

				if (j)
					OUT_LIT(",");
				OUT_LIT("{\"function\":");
				out(qbuf + qoff[fn], qoff[fn + 1] - qoff[fn]);
				OUT_LIT(",\"file\":");
				out(qbuf + qoff[file], qoff[file + 1] - qoff[file]);
				OUT_LIT(",\"line\":");
				put_u64(r->frame_lines[f], 10);
				OUT_LIT("}");
			}
			OUT_LIT("]}\n");
		} else if (n == 0) {
			OUT_LIT("??\n??:0\n\n");
		} else {
			/* As llvm-symbolizer prints: per frame the function, then
			 * file:line; a blank line after each address. */
			for (uint32_t j = 0; j < n; j++, f++) {
				const char *fn = r->strings[r->frame_functions[f]];
				const char *file = r->strings[r->frame_files[f]];

				if (*fn)
					out(fn, strlen(fn));
				else
					OUT_LIT("??");
				OUT_LIT("\n");
				if (*file)
					out(file, strlen(file));
				else
					OUT_LIT("??");
				OUT_LIT(":");
				put_u64(r->frame_lines[f], 10);
				OUT_LIT("\n");
			}
			OUT_LIT("\n");
		}
	}
	out_flush();
cleanup:
	free(qbuf);
	free(qoff);
	return err;
}

/* One Symbolize call for addrs[first, first + k): its own request, so a
 * helper thread can make the next call while the main thread prints. */
struct fetch {
	struct rpc_channel *ch;
	const char *address;
	Sonde__V1__SymbolizeOptions opts;
	Sonde__V1__SymbolizeQuery q;
	Sonde__V1__SymbolizeQuery *qs[1];
	Sonde__V1__SymbolizeRequest req;
	Sonde__V1__SymbolizeResponse *resp;
	size_t first, k;
	int err;
};

static void fetch_init(struct fetch *f, struct rpc_channel *ch, const struct cli_symbolize_opts *o,
		       struct fileid *id, uint64_t *addrs, size_t first, size_t k)
{
	*f = (struct fetch){ .ch = ch, .address = o->symbolizer, .first = first, .k = k };
	sonde__v1__symbolize_options__init(&f->opts);
	sonde__v1__symbolize_query__init(&f->q);
	sonde__v1__symbolize_request__init(&f->req);
	f->opts.lines = true;
	f->opts.inlines = o->inlines;
	f->opts.demangle = o->demangle;
	f->opts.compact = true;
	f->q.file_id.data = id->bytes;
	f->q.file_id.len = FILEID_LEN;
	f->q.addresses = addrs + first;
	f->q.n_addresses = k;
	f->qs[0] = &f->q;
	f->req.options = &f->opts;
	f->req.n_queries = 1;
	f->req.queries = f->qs;
}

static void fetch_run(struct fetch *f)
{
	f->err = command_call_on(f->ch, f->address, "/sonde.v1.Symbols/Symbolize", &f->req.base,
				 &sonde__v1__symbolize_response__descriptor, COMMAND_RPC_TIMEOUT_MS, false,
				 (ProtobufCMessage **)&f->resp, NULL);
	if (f->err == 0 && f->resp->n_results != 1) {
		fprintf(stderr, "sonde: the symbolizer answered a query with the wrong count\n");
		f->err = -EBADMSG;
	}
}

static void *fetch_thread(void *arg)
{
	fetch_run(arg);
	return NULL;
}

static void fetch_done(struct fetch *f)
{
	rpc_message_free(f->resp ? &f->resp->base : NULL);
	f->resp = NULL;
}

int cli_symbolize_file(const struct cli_symbolize_opts *o, int n, char **argv)
{
	struct fetch cur = { 0 }, next = { 0 };
	struct rpc_channel *ch = NULL;
	struct addr_vec av = { 0 };
	struct fileid id;
	pthread_t helper;
	bool helper_running = false;
	int rc = 1, err;

	/* Output goes past stdio (out_write): nothing may wait in its buffer. */
	fflush(stdout);
	/* Each batch's reply buffers are reused by the next instead of
	 * being mapped afresh: about 600 of 2,400 page faults fewer on
	 * 100,000 addresses (a fault costs ~10 us on this kind of VM). */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	/* The connection is made while the file ID is computed and the
	 * addresses are read (together about as long: 7 ms here). */
	ch = command_channel_open(o->symbolizer);
	if (!ch)
		return 1;
	rpc_channel_connect(ch);
	err = fileid_from_path(o->file, &id);
	if (err < 0) {
		fprintf(stderr, "sonde: %s: %s\n", o->file, strerror(-err));
		goto cleanup;
	}
	rc = read_addresses(n, argv, &av);
	if (rc)
		goto cleanup;
	rc = 1;
	if (av.n == 0) {
		rc = 0;
		goto cleanup;
	}
	/* The first batch alone: it tells whether the file must be uploaded. */
	fetch_init(&cur, ch, o, &id, av.v, 0, av.n > BATCH ? BATCH : av.n);
	fetch_run(&cur);
	if (cur.err < 0)
		goto cleanup;
	if (cur.resp->results[0]->unknown_file) {
		fetch_done(&cur);
		if (upload(ch, o->symbolizer, o->file, &id) < 0)
			goto cleanup;
		fetch_run(&cur);
		if (cur.err < 0)
			goto cleanup;
	}
	for (;;) {
		const Sonde__V1__SymbolizeResult *r = cur.resp->results[0];
		size_t after = cur.first + cur.k;

		/* The next call runs while this batch is printed. */
		if (after < av.n) {
			fetch_init(&next, ch, o, &id, av.v, after,
				   av.n - after > BATCH ? BATCH : av.n - after);
			helper_running = pthread_create(&helper, NULL, fetch_thread, &next) == 0;
			if (!helper_running)
				fetch_run(&next);
		}
		if (r->error && *r->error) {
			fprintf(stderr, "sonde: %s: %s\n", o->file, r->error);
			goto cleanup;
		}
		err = print_result(o, av.v + cur.first, cur.k, r);
		if (err < 0) {
			fprintf(stderr, "sonde: %s\n", err == -EBADMSG
				? "the symbolizer's reply does not add up" : strerror(-err));
			goto cleanup;
		}
		fetch_done(&cur);
		if (after >= av.n)
			break;
		if (helper_running) {
			pthread_join(helper, NULL);
			helper_running = false;
		}
		cur = next;
		next = (struct fetch){ 0 };
		/* The requests point into their own struct: fix them up. */
		cur.qs[0] = &cur.q;
		cur.req.queries = cur.qs;
		cur.req.options = &cur.opts;
		if (cur.err < 0)
			goto cleanup;
	}
	rc = out_failed ? 1 : 0;
	if (out_failed)
		fprintf(stderr, "sonde: writing the output: %s\n", strerror(out_errno));
cleanup:
	if (helper_running)
		pthread_join(helper, NULL);
	fetch_done(&next);
	fetch_done(&cur);
	rpc_channel_free(ch);
	addr_free(&av);
	return rc;
}
