/* kallsyms.c - /proc/kallsyms is kernel output: "ADDR TYPE NAME[\t[MOD]]".
 * It is read through a small buffer and sent a chunk at a time: holding
 * the whole file, its parse and the messages at once was the sensor's
 * peak memory (about 10 MB above its steady state). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kallsyms.h"
#include "log.h"
#include "parse.h"
#include "uplink.h"
#include "utf8.h"

#define KALLSYMS_MAX_BYTES (64u << 20) /* of the file: a bound, not a size */
#define KALLSYMS_CHUNK 20000           /* symbols per message */
#define KALLSYMS_POOL (1u << 20)       /* name bytes per message */
#define KALLSYMS_READ (64u << 10)
#define KALLSYMS_MAX_LINE 4096         /* longer lines are skipped */

struct chunk {
	Sonde__V1__KernelSymbol syms[KALLSYMS_CHUNK];
	Sonde__V1__KernelSymbol *ptrs[KALLSYMS_CHUNK];
	char pool[KALLSYMS_POOL];
	size_t n, pool_used, bytes;
	bool sent_first;
};

static int chunk_send(struct uplink *u, uint64_t gen, struct chunk *c, bool last)
{
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__KernelSymbols ks = SONDE__V1__KERNEL_SYMBOLS__INIT;
	int r;

	ks.first = !c->sent_first;
	ks.last = last;
	ks.n_symbols = c->n;
	ks.symbols = c->ptrs;
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_KERNEL_SYMBOLS;
	msg.kernel_symbols = &ks;
	r = uplink_send(u, gen, &msg, !last);
	c->sent_first = true;
	c->n = c->pool_used = 0;
	c->bytes = 16;
	return r;
}

/* Copies n bytes of s escaped to valid UTF-8 (common/utf8.h; a module's
 * name is whatever its loader chose), escaped_len bytes. */
static char *pool_dup(struct chunk *c, const char *s, size_t n, size_t escaped_len)
{
	char *p = c->pool + c->pool_used;

	utf8_escape(p, escaped_len + 1, s, n);
	c->pool_used += escaped_len + 1;
	return p;
}

/* Adds a symbol, sending the chunk first if it would not fit. */
static int chunk_add(struct uplink *u, uint64_t gen, struct chunk *c, size_t max_bytes,
		     const struct kallsyms_line *l)
{
	size_t name_len = utf8_escaped_len(l->name, l->name_len);
	size_t module_len = utf8_escaped_len(l->module, l->module_len);
	size_t need = name_len + module_len + 2, est = need + 24;
	Sonde__V1__KernelSymbol *s;
	int r;

	if (need > KALLSYMS_POOL)
		return 0; /* cannot be a kernel symbol (KSYM_NAME_LEN is 512) */
	if (c->n == KALLSYMS_CHUNK || c->pool_used + need > KALLSYMS_POOL ||
	    (c->n > 0 && c->bytes + est > max_bytes)) {
		r = chunk_send(u, gen, c, false);
		if (r < 0)
			return r;
	}
	s = &c->syms[c->n];
	sonde__v1__kernel_symbol__init(s);
	s->address = l->addr;
	s->name = pool_dup(c, l->name, l->name_len, name_len);
	s->module = pool_dup(c, l->module, l->module_len, module_len);
	c->ptrs[c->n++] = s;
	c->bytes += est;
	return 0;
}

int kallsyms_send(struct uplink *u, uint64_t gen, size_t max_bytes)
{
	struct chunk *c = calloc(1, sizeof(*c));
	char *buf = malloc(KALLSYMS_READ);
	size_t have = 0, total = 0, sent = 0;
	bool any_addr = false, skipping = false;
	int fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0 || !c || !buf) {
		r = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	c->bytes = 16;
	for (;;) {
		ssize_t n = read(fd, buf + have, KALLSYMS_READ - have);
		char *line = buf, *end, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		total += (size_t)n;
		if (total > KALLSYMS_MAX_BYTES) {
			r = -EFBIG;
			goto out;
		}
		end = buf + have + n;
		if (n == 0 && have > 0)
			*end++ = '\n'; /* the last line without its newline */
		while ((nl = memchr(line, '\n', (size_t)(end - line)))) {
			struct kallsyms_line l;

			if (!skipping && kallsyms_parse_line(line, (size_t)(nl - line), &l)) {
				any_addr |= l.addr != 0;
				r = chunk_add(u, gen, c, max_bytes, &l);
				if (r < 0)
					goto out;
				sent++;
			}
			skipping = false;
			line = nl + 1;
		}
		have = (size_t)(end - line);
		if (have >= KALLSYMS_MAX_LINE) {
			skipping = true; /* the rest of this line goes too */
			have = 0;
		}
		memmove(buf, line, have);
		if (n == 0)
			break;
	}
	if (!any_addr)
		log_warn("/proc/kallsyms shows no addresses (kptr_restrict?), kernel frames will "
			 "not symbolize");
	r = chunk_send(u, gen, c, true);
	if (r == 0)
		r = (int)sent;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(c);
	return r;
}
