/* environ.h - one variable out of a /proc/PID/environ snapshot. The
 * snapshot is target-controlled: the value is copied bounded and never
 * interpreted (docs/go-probes.md: the sensor reads OTEL_SERVICE_NAME only). */
#pragma once

#include <stddef.h>

/* How much of /proc/PID/environ the sensor reads. */
#define ENVIRON_READ_MAX 65536

/* Finds "name=value" among the NUL-separated entries of buf[0..len) and
 * copies value, truncated to out_size - 1 bytes, NUL-terminated (a value
 * with a NUL can only end at it). The first entry wins; an entry cut off at
 * len counts only if complete up to len. Returns the value's copied length,
 * or -1 when absent (out is then ""). */
int environ_find(const char *buf, size_t len, const char *name, char *out, size_t out_size);
