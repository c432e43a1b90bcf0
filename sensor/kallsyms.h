/* kallsyms.h - the kernel symbol snapshot for the symbolizer. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct uplink;

/* Reads /proc/kallsyms (text symbols t/T/w/W), sorts them by address and
 * sends them on connection gen as KernelSymbols chunks of at most
 * ~20,000 symbols or max_bytes, first/last flags set. Returns the number of
 * symbols sent or a negative errno (-ENOTCONN/-EPIPE from the uplink). */
int kallsyms_send(struct uplink *u, uint64_t gen, size_t max_bytes);
