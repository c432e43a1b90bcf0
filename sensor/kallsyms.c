/* kallsyms.c - /proc/kallsyms is kernel output: "ADDR TYPE NAME[\t[MOD]]".
 * It is read whole (bounded), split in place, sorted and chunked. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kallsyms.h"
#include "log.h"
#include "parse.h"
#include "uplink.h"

#define KALLSYMS_MAX_BYTES (64u << 20)
#define KALLSYMS_CHUNK 20000

struct ksym {
	uint64_t addr;
	const char *name;
	const char *module;
};

static int read_all(const char *path, char **ret, size_t *ret_len)
{
	size_t cap = 8u << 20, len = 0;
	char *buf = malloc(cap + 1), *nb;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0 || !buf) {
		r = fd < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	for (;;) {
		ssize_t n;

		if (len == cap) {
			if (cap >= KALLSYMS_MAX_BYTES) {
				r = -EFBIG;
				goto fail;
			}
			cap *= 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				r = -ENOMEM;
				goto fail;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto fail;
		}
		if (n == 0)
			break;
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return r;
}

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Splits buf in place. Returns the number of symbols kept. */
static size_t parse(char *buf, size_t len, struct ksym *out, size_t max)
{
	size_t n = 0;
	char *line = buf, *end = buf + len;

	while (line < end && n < max) {
		char *nl = memchr(line, '\n', end - line), *sp1, *sp2, *tab, *mod = NULL;
		uint64_t addr;

		if (!nl)
			nl = end;
		*nl = '\0';
		sp1 = strchr(line, ' ');
		if (!sp1 || sp1[1] == '\0' || sp1[2] != ' ')
			goto next;
		sp2 = sp1 + 2;
		if (!strchr("tTwW", sp1[1]))
			goto next;
		if (parse_u64_n(line, sp1 - line, 16, &addr) < 0)
			goto next;
		tab = strchr(sp2 + 1, '\t');
		if (tab) {
			*tab = '\0';
			mod = tab + 1;
			if (*mod == '[') {
				char *close = strchr(mod, ']');

				mod++;
				if (close)
					*close = '\0';
			}
		}
		out[n].addr = addr;
		out[n].name = sp2 + 1;
		out[n].module = mod ? mod : "";
		n++;
	next:
		line = nl + 1;
	}
	return n;
}

static int send_chunk(struct uplink *u, uint64_t gen, Sonde__V1__KernelSymbol **ptrs, size_t n,
		      bool first, bool last)
{
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__KernelSymbols ks = SONDE__V1__KERNEL_SYMBOLS__INIT;

	ks.first = first;
	ks.last = last;
	ks.n_symbols = n;
	ks.symbols = ptrs;
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_KERNEL_SYMBOLS;
	msg.kernel_symbols = &ks;
	return uplink_send(u, gen, &msg, !last);
}

int kallsyms_send(struct uplink *u, uint64_t gen, size_t max_bytes)
{
	Sonde__V1__KernelSymbol *syms = NULL, **ptrs = NULL;
	struct ksym *ks = NULL;
	size_t len = 0, n, max, start = 0;
	char *buf = NULL;
	bool any_addr = false;
	int r;

	r = read_all("/proc/kallsyms", &buf, &len);
	if (r < 0)
		return r;
	max = len / 16 + 1; /* a line has at least 16 bytes of address */
	ks = malloc(max * sizeof(*ks));
	syms = malloc(KALLSYMS_CHUNK * sizeof(*syms));
	ptrs = malloc(KALLSYMS_CHUNK * sizeof(*ptrs));
	if (!ks || !syms || !ptrs) {
		r = -ENOMEM;
		goto out;
	}
	n = parse(buf, len, ks, max);
	qsort(ks, n, sizeof(*ks), cmp_ksym);
	for (size_t i = 0; i < n && !any_addr; i++)
		any_addr = ks[i].addr != 0;
	if (!any_addr)
		log_warn("/proc/kallsyms shows no addresses (kptr_restrict?), kernel frames will "
			 "not symbolize");

	do {
		size_t k = 0, bytes = 16;

		while (start + k < n && k < KALLSYMS_CHUNK) {
			const struct ksym *s = &ks[start + k];
			size_t est = strlen(s->name) + strlen(s->module) + 24;

			if (k > 0 && bytes + est > max_bytes)
				break;
			sonde__v1__kernel_symbol__init(&syms[k]);
			syms[k].address = s->addr;
			syms[k].name = (char *)s->name;
			syms[k].module = (char *)s->module;
			ptrs[k] = &syms[k];
			bytes += est;
			k++;
		}
		r = send_chunk(u, gen, ptrs, k, start == 0, start + k >= n);
		if (r < 0)
			goto out;
		start += k;
	} while (start < n);
	r = (int)n;
out:
	free(ptrs);
	free(syms);
	free(ks);
	free(buf);
	return r;
}
