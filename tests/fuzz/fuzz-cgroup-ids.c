/* fuzz-cgroup-ids.c - fuzzes the cgroup path reader
 * (symbolizer/export/cgroup_ids.c): the cgroup text is a target's (a
 * process can name its cgroups) relayed by the sensor. Both IDs must stay
 * inside the bytes, come out in their exact shape (64 lowercase hex
 * digits; 8-4-4-4-12 lowercase hex with '-'), and appear in the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup_ids.h"

#define FUZZ_MAX_INPUT (2 * CGROUP_IDS_MAX_TEXT)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int hexlow(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, cid[CGROUP_IDS_CONTAINER_LEN + 1], pod[CGROUP_IDS_POD_UID_LEN + 1];

	if (size > FUZZ_MAX_INPUT)
		return 0;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	cgroup_ids_parse(text, cid, pod);
	if (cid[0]) {
		if (strlen(cid) != CGROUP_IDS_CONTAINER_LEN || !strstr(text, cid))
			abort();
		for (size_t i = 0; i < CGROUP_IDS_CONTAINER_LEN; i++)
			if (!hexlow(cid[i]))
				abort();
	}
	if (pod[0]) {
		if (strlen(pod) != CGROUP_IDS_POD_UID_LEN)
			abort();
		for (size_t i = 0; i < CGROUP_IDS_POD_UID_LEN; i++)
			if (i == 8 || i == 13 || i == 18 || i == 23 ? pod[i] != '-' : !hexlow(pod[i]))
				abort();
	}
	cgroup_ids_parse(NULL, cid, pod);
	if (cid[0] || pod[0])
		abort();
	free(text);
	return 0;
}
