/* cgroup_ids.h - the container ID and Kubernetes pod UID in a process's
 * cgroup path (a ProcessUpdate's cgroup, /proc/PID/cgroup as the sensor
 * read it: a target's text). Exported as OpenTelemetry's container.id
 * and k8s.pod.uid, the keys the Collector's k8sattributes processor
 * enriches by. Pure string parsing, bounded, no allocation.
 */
#pragma once

#include <stdbool.h>

/* Bytes of a cgroup text read; the rest is ignored. */
#define CGROUP_IDS_MAX_TEXT 4096
#define CGROUP_IDS_CONTAINER_LEN 64 /* hex digits */
#define CGROUP_IDS_POD_UID_LEN 36   /* 8-4-4-4-12 */

/* The container ID (docker, containerd, cri-o, podman: the last run of
 * exactly 64 lowercase hex digits) into out, NUL-terminated. Returns
 * whether one was found; out is untouched otherwise. cgroup may be NULL. */
bool cgroup_ids_container(const char *cgroup, char out[CGROUP_IDS_CONTAINER_LEN + 1]);
/* The pod UID of kubelet's last "pod<UID>" path element ("pod" then 8-4-4-4-12 hex
 * digits separated by '-', or '_' under the systemd cgroup driver), as
 * lowercase with '-', NUL-terminated. Returns whether one was found; out
 * is untouched otherwise. cgroup may be NULL. */
bool cgroup_ids_pod_uid(const char *cgroup, char out[CGROUP_IDS_POD_UID_LEN + 1]);
/* Both; each out becomes "" when its ID is not there. */
void cgroup_ids_parse(const char *cgroup, char container_id[CGROUP_IDS_CONTAINER_LEN + 1],
		      char pod_uid[CGROUP_IDS_POD_UID_LEN + 1]);
