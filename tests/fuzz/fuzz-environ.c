/* fuzz-environ.c - fuzzes the sensor's environ lookup (sensor/environ.c)
 * on /proc/PID/environ-like bytes, which a target process controls. */
#include <stdint.h>
#include <string.h>

#include "environ.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[256], tiny[1];
	int n;

	if (size > ENVIRON_READ_MAX)
		size = ENVIRON_READ_MAX;
	n = environ_find((const char *)data, size, "OTEL_SERVICE_NAME", out, sizeof(out));
	if (n >= (int)sizeof(out) || (n >= 0 && strlen(out) > (size_t)n))
		__builtin_trap();
	if (n < 0 && out[0])
		__builtin_trap();
	environ_find((const char *)data, size, "OTEL_SERVICE_NAME", tiny, sizeof(tiny));
	if (tiny[0])
		__builtin_trap();
	return 0;
}
