/* kallsyms.c - /proc/kallsyms is kernel output: "ADDR TYPE NAME[\t[MOD]]".
 * It is read through a small buffer and sent a chunk at a time: holding
 * the whole file, its parse and the messages at once was the sensor's
 * peak memory (about 10 MB above its steady state). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flush.h"
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

/* A symbol on its way: u64 address, then name and module, each escaped
 * and NUL-terminated (flush.c's buffer holds them until a chunk goes). */
#define KALLSYMS_REC_MAX (8 + 2 * (4 * KALLSYMS_MAX_LINE + 1))

struct chunks {
	Sonde__V1__KernelSymbol syms[KALLSYMS_CHUNK];
	Sonde__V1__KernelSymbol *ptrs[KALLSYMS_CHUNK];
	bool sent_first;
};

/* One KernelSymbols message of recs[0..n). */
static int chunk_send(void *ctx, struct uplink *u, uint64_t gen, const struct flush_rec *recs,
		      size_t n, bool last)
{
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__KernelSymbols ks = SONDE__V1__KERNEL_SYMBOLS__INIT;
	struct chunks *c = ctx;
	int r;

	for (size_t i = 0; i < n && i < KALLSYMS_CHUNK; i++) {
		Sonde__V1__KernelSymbol *s = &c->syms[i];
		const char *name = (const char *)recs[i].data + 8;

		sonde__v1__kernel_symbol__init(s);
		memcpy(&s->address, recs[i].data, 8);
		s->name = (char *)name;
		s->module = (char *)name + strlen(name) + 1;
		c->ptrs[i] = s;
	}
	ks.first = !c->sent_first;
	ks.last = last;
	ks.n_symbols = n;
	ks.symbols = c->ptrs;
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_KERNEL_SYMBOLS;
	msg.kernel_symbols = &ks;
	r = uplink_send(u, gen, &msg, !last);
	c->sent_first = true;
	return r;
}

/* Adds a symbol, sending the waiting chunk first when it is full. */
static int chunk_add(struct uplink *u, uint64_t gen, struct flush_records *q,
		     const struct flush_batch *b, uint8_t *rec, const struct kallsyms_line *l)
{
	size_t name_len = utf8_escaped_len(l->name, l->name_len);
	size_t module_len = utf8_escaped_len(l->module, l->module_len);
	size_t need = name_len + module_len + 2, unsent;
	int r;

	if (8 + need > KALLSYMS_REC_MAX)
		return 0; /* cannot be a kernel symbol (KSYM_NAME_LEN is 512) */
	memcpy(rec, &l->addr, 8);
	/* The name and module are whatever the kernel and a module's loader
	 * chose: escaped to valid UTF-8 (common/utf8.h). */
	utf8_escape((char *)rec + 8, name_len + 1, l->name, l->name_len);
	utf8_escape((char *)rec + 8 + name_len + 1, module_len + 1, l->module, l->module_len);
	if (flush_records_add(q, 0, 0, rec, 8 + need) == 0)
		return 0;
	r = flush_records_send(q, u, gen, b, false, &unsent);
	if (r < 0)
		return r;
	flush_records_add(q, 0, 0, rec, 8 + need); /* fits an empty buffer */
	return 0;
}

int kallsyms_send(struct uplink *u, uint64_t gen, size_t max_bytes)
{
	struct chunks *c = calloc(1, sizeof(*c));
	struct flush_records *q = flush_records_new(KALLSYMS_CHUNK, KALLSYMS_POOL);
	/* A symbol's estimated bytes in a message are its record's + 16. */
	const struct flush_batch b = { .per_message = KALLSYMS_CHUNK, .max_bytes = max_bytes,
				       .overhead = 16, .send = chunk_send, .ctx = c };
	char *buf = malloc(KALLSYMS_READ);
	uint8_t *rec = malloc(KALLSYMS_REC_MAX);
	size_t have = 0, total = 0, sent = 0, unsent;
	bool any_addr = false, skipping = false;
	int fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0 || !c || !q || !buf || !rec) {
		r = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
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
				r = chunk_add(u, gen, q, &b, rec, &l);
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
	r = flush_records_send(q, u, gen, &b, true, &unsent);
	if (r == 0)
		r = (int)sent;
out:
	if (fd >= 0)
		close(fd);
	free(rec);
	free(buf);
	flush_records_free(q);
	free(c);
	return r;
}
