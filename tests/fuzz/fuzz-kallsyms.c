/* fuzz-kallsyms.c - fuzzes the kernel symbol snapshot on its way through
 * both services: the sensor's line parser (sensor/kallsyms_parse.c) on
 * /proc/kallsyms-like text, then the symbolizer's table (symbolizer/ksyms)
 * built from what it parsed, as KernelSymbols chunks would fill it. The
 * symbolizer gets these names from the network, so the table must bound
 * them and look up only what it holds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kallsyms.h"
#include "ksyms.h"

#define FUZZ_MAX_INPUT (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A NUL-terminated copy of n bytes (names arrive as protobuf strings). */
static char *dup_n(const char *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *end = text + size, *line = text;
	struct ksyms *k;
	struct ksyms_lookup lk;
	uint64_t addrs[64];
	size_t n_addrs = 0;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	k = ksyms_new();
	if (!k)
		return 0;
	ksyms_begin(k);
	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t len = (size_t)((nl ? nl : end) - line);
		struct kallsyms_line l;

		if (kallsyms_parse_line(line, len, &l)) {
			char *name = dup_n(l.name, l.name_len), *mod = dup_n(l.module, l.module_len);

			if (l.name < line || l.name + l.name_len > line + len ||
			    l.module_len > len)
				abort(); /* parsed fields must lie inside the line */
			if (name && mod)
				ksyms_add(k, l.addr, name, mod);
			if (n_addrs < 64)
				addrs[n_addrs++] = l.addr;
			free(name);
			free(mod);
		}
		line = nl ? nl + 1 : end;
	}
	ksyms_commit(k);
	for (size_t i = 0; i < n_addrs; i++) {
		for (uint64_t d = 0; d < 3; d++) {
			if (ksyms_lookup(k, addrs[i] + d * 7, &lk) != 0)
				continue;
			if (!lk.name || !lk.module || lk.start > addrs[i] + d * 7 ||
			    lk.offset != addrs[i] + d * 7 - lk.start || strlen(lk.name) == 0)
				abort();
		}
	}
	if (ksyms_lookup(k, 0, &lk) == 0 && lk.start != 0)
		abort();
	ksyms_free(k);
	return 0;
}
