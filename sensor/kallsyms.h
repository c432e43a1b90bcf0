/* kallsyms.h - the kernel symbol snapshot for the symbolizer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct uplink;

/* One line of /proc/kallsyms: "ADDR TYPE NAME[\t[MOD]]". */
struct kallsyms_line {
	uint64_t addr;
	const char *name;   /* into the line */
	size_t name_len;
	const char *module; /* into the line; "" for vmlinux */
	size_t module_len;
};

/* Parses one line (len bytes, no newline; not modified). Returns true
 * for a text symbol (types t, T, w, W) with a well-formed address, false
 * for anything else. */
bool kallsyms_parse_line(const char *line, size_t len, struct kallsyms_line *ret);

/* Reads /proc/kallsyms (text symbols) and sends it on connection gen as
 * KernelSymbols chunks of at most ~20,000 symbols or max_bytes, first and
 * last flags set, as it reads: memory stays at one chunk, not the whole
 * file (5 MB and 120,000 symbols here). The symbolizer sorts. Returns the
 * number of symbols sent or a negative errno (-ENOTCONN/-EPIPE from the
 * uplink). */
int kallsyms_send(struct uplink *u, uint64_t gen, size_t max_bytes);
