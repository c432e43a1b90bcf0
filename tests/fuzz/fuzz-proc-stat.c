/* fuzz-proc-stat.c - fuzzes the sensor's /proc/PID/stat parser
 * (proc_parse_stat in sensor/maps.c). The kernel writes the comm in
 * parentheses as the process set it (prctl(PR_SET_NAME) takes spaces,
 * parentheses and newlines), so a target controls bytes in the middle of
 * the line. Two checks:
 *   - the input as a whole stat text (read_small()'s 4096-byte buffer):
 *     no crash, *ret untouched on failure, ppid in 32 bits;
 *   - the input's first bytes as a comm inside a real-looking stat line:
 *     the parser must find the ppid and start time the line was built
 *     with, whatever the comm holds.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maps.h"

/* sensor/procs.c reads at most this much of /proc/PID/stat. */
#define FUZZ_MAX_INPUT 4095
/* The kernel's TASK_COMM_LEN - 1; a few more to be safe. */
#define FUZZ_COMM_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *text, size_t len)
{
	uint32_t ppid = 0xdeadbeef;
	uint64_t start = 0xdeadbeef;
	int r = proc_parse_stat(text, len, &ppid, &start);

	if (r != 0 && r != -EINVAL)
		abort();
	if (r != 0 && (ppid != 0xdeadbeef || start != 0xdeadbeef))
		abort();
}

/* A stat line of this machine's kernel (6.1) around comm. */
static void check_comm(const uint8_t *comm, size_t n)
{
	static const uint32_t want_ppid = 4242;
	static const uint64_t want_start = 987654321;
	char line[FUZZ_COMM_MAX + 512];
	uint32_t ppid = 0;
	uint64_t start = 0;
	int a, b;

	a = snprintf(line, sizeof(line), "31337 (");
	memcpy(line + a, comm, n);
	b = snprintf(line + a + n, sizeof(line) - a - n,
		     ") S %" PRIu32 " 31337 31337 34816 31337 4194304 102 0 0 0 0 0 0 0 20 0 1 0 %" PRIu64
		     " 5742592 384 18446744073709551615 94214454296576 94214454317457 140725453061168 0 0 0 0 "
		     "0 0 0 0 0 17 1 0 0 0 0 0 94214454331248 94214454332704 94214470897664 "
		     "140725453068125 140725453068145 140725453068145 140725453070315 0\n",
		     want_ppid, want_start);
	if (a < 0 || b < 0)
		abort();
	if (proc_parse_stat(line, a + n + b, &ppid, &start) != 0 || ppid != want_ppid ||
	    start != want_start)
		abort(); /* the comm moved the fields */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FUZZ_MAX_INPUT)
		size = FUZZ_MAX_INPUT;
	check_text((const char *)data, size);
	check_comm(data, size < FUZZ_COMM_MAX ? size : FUZZ_COMM_MAX);
	return 0;
}
