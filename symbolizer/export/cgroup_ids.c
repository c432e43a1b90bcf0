/* cgroup_ids.c - container ID and pod UID from a cgroup path (see
 * cgroup_ids.h). Examples of what it reads:
 *   0::/system.slice/docker-<64 hex>.scope
 *   0::/kubepods/burstable/pod<uid with '-'>/<64 hex>
 *   0::/kubepods.slice/kubepods-besteffort.slice/
 *      kubepods-besteffort-pod<uid with '_'>.slice/cri-containerd-<64 hex>.scope
 */
#include <string.h>

#include "cgroup_ids.h"

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static char lower(char c)
{
	return c >= 'A' && c <= 'F' ? (char)(c - 'A' + 'a') : c;
}

bool cgroup_ids_container(const char *cgroup, char out[CGROUP_IDS_CONTAINER_LEN + 1])
{
	size_t n = cgroup ? strnlen(cgroup, CGROUP_IDS_MAX_TEXT) : 0;
	size_t run = 0;
	const char *found = NULL;

	for (size_t i = 0; i < n; i++) {
		bool h = (cgroup[i] >= '0' && cgroup[i] <= '9') ||
			 (cgroup[i] >= 'a' && cgroup[i] <= 'f');

		run = h ? run + 1 : 0;
		if (run == CGROUP_IDS_CONTAINER_LEN &&
		    (i + 1 == n || !((cgroup[i + 1] >= '0' && cgroup[i + 1] <= '9') ||
				     (cgroup[i + 1] >= 'a' && cgroup[i + 1] <= 'f'))))
			found = cgroup + i + 1 - CGROUP_IDS_CONTAINER_LEN;
	}
	if (!found)
		return false;
	memcpy(out, found, CGROUP_IDS_CONTAINER_LEN);
	out[CGROUP_IDS_CONTAINER_LEN] = '\0';
	return true;
}

/* Whether p (n bytes left) is a UID: 8-4-4-4-12 hex digits with sep
 * between the groups, not followed by another hex digit. */
static bool uid_at(const char *p, size_t n, char sep)
{
	static const unsigned char groups[] = { 8, 4, 4, 4, 12 };
	size_t k = 0;

	if (n < CGROUP_IDS_POD_UID_LEN)
		return false;
	for (size_t g = 0; g < sizeof(groups); g++) {
		if (g && p[k++] != sep)
			return false;
		for (unsigned i = 0; i < groups[g]; i++)
			if (!is_hex(p[k++]))
				return false;
	}
	return n == CGROUP_IDS_POD_UID_LEN || !is_hex(p[CGROUP_IDS_POD_UID_LEN]);
}

bool cgroup_ids_pod_uid(const char *cgroup, char out[CGROUP_IDS_POD_UID_LEN + 1])
{
	size_t n = cgroup ? strnlen(cgroup, CGROUP_IDS_MAX_TEXT) : 0;
	const char *found = NULL;

	for (size_t i = 0; i + 3 < n; i++) {
		const char *p = cgroup + i + 3;

		if (memcmp(cgroup + i, "pod", 3) != 0)
			continue;
		if (uid_at(p, n - i - 3, '-') || uid_at(p, n - i - 3, '_'))
			found = p;
	}
	if (!found)
		return false;
	for (size_t i = 0; i < CGROUP_IDS_POD_UID_LEN; i++)
		out[i] = found[i] == '_' ? '-' : lower(found[i]);
	out[CGROUP_IDS_POD_UID_LEN] = '\0';
	return true;
}

void cgroup_ids_parse(const char *cgroup, char container_id[CGROUP_IDS_CONTAINER_LEN + 1],
		      char pod_uid[CGROUP_IDS_POD_UID_LEN + 1])
{
	if (!cgroup_ids_container(cgroup, container_id))
		container_id[0] = '\0';
	if (!cgroup_ids_pod_uid(cgroup, pod_uid))
		pod_uid[0] = '\0';
}
