/* targets.c - the selection of profiled processes (targets.h): --pid and
 * --cgroup resolved before the privilege drop, handed to BPF, and applied
 * by the first scan to the processes that already exist. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "targets.h"

struct targets {
	uint32_t *pids;
	size_t n_pids;
	uint64_t cgroup_id;
	uint32_t cgroup_level;
	char *cgroup_rel; /* below the cgroup2 root, as /proc/PID/cgroup shows it */
	char *description;
	const struct targets_allow_ops *allow;
	void *allow_ctx;
};

/* Where cgroup2 is mounted, from the sensor's own mount table. */
static int targets_cgroup2_mount(char *ret, size_t size)
{
	char line[8192];
	FILE *f = fopen("/proc/self/mounts", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char dev[256], dir[4096], type[64];

		if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 &&
		    strcmp(type, "cgroup2") == 0) {
			snprintf(ret, size, "%s", dir);
			break;
		}
	}
	fclose(f);
	return ret[0] ? 0 : -ENOENT;
}

/* cgroup v2 id (the directory's inode), depth below the cgroup2 root and
 * path below it. */
static int targets_cgroup_resolve(struct targets *t, const char *path)
{
	char mnt[4096] = "", *real = NULL;
	size_t len;
	struct stat st;
	int r;

	r = targets_cgroup2_mount(mnt, sizeof(mnt));
	if (r < 0)
		return r;
	real = realpath(path, NULL);
	if (!real)
		return -errno;
	len = strlen(mnt);
	if (strncmp(real, mnt, len) != 0 || (real[len] != '/' && real[len] != '\0')) {
		r = -EXDEV;
		goto cleanup;
	}
	if (stat(real, &st) < 0) {
		r = -errno;
		goto cleanup;
	}
	for (const char *p = real + len; *p; p++)
		if (*p == '/' && p[1] != '\0')
			t->cgroup_level++;
	t->cgroup_rel = strdup(real[len] ? real + len : "/");
	if (!t->cgroup_rel) {
		r = -ENOMEM;
		goto cleanup;
	}
	t->cgroup_id = st.st_ino;
cleanup:
	free(real);
	return r;
}

/* A lookup in /proc, nothing of the process read. */
static int targets_check_pids(const uint32_t *pids, size_t n_pids)
{
	for (size_t i = 0; i < n_pids; i++) {
		char path[32];

		snprintf(path, sizeof(path), "/proc/%u", pids[i]);
		if (access(path, F_OK) < 0) {
			log_error("--pid %u: no such process", pids[i]);
			return -ESRCH;
		}
	}
	return 0;
}

static char *targets_description(size_t n_pids, const char *cgroup)
{
	char *s = NULL;

	if (asprintf(&s, "%s%s%s%s", n_pids ? "pid (and children)" : "",
		     n_pids && cgroup ? ", " : "", cgroup ? "cgroup " : "",
		     cgroup ? cgroup : (n_pids ? "" : "none (whole host)")) < 0)
		return NULL;
	return s;
}

int targets_new(const uint32_t *pids, size_t n_pids, const char *cgroup,
		struct targets **ret)
{
	struct targets *t = calloc(1, sizeof(*t));
	int err = -ENOMEM;

	if (!t || !(t->pids = calloc(n_pids ? n_pids : 1, sizeof(*pids))))
		goto fail;
	if (n_pids)
		memcpy(t->pids, pids, n_pids * sizeof(*pids));
	t->n_pids = n_pids;
	if (cgroup) {
		err = targets_cgroup_resolve(t, cgroup);
		if (err < 0) {
			log_error_errno(err, "--cgroup %.200s: not a cgroup v2 directory", cgroup);
			goto fail;
		}
	}
	err = targets_check_pids(pids, n_pids);
	if (err < 0)
		goto fail;
	t->description = targets_description(n_pids, cgroup);
	if (!t->description) {
		err = -ENOMEM;
		goto fail;
	}
	*ret = t;
	return 0;
fail:
	if (err == -ENOMEM)
		log_error("out of memory");
	targets_free(t);
	return err;
}

void targets_free(struct targets *t)
{
	if (!t)
		return;
	free(t->pids);
	free(t->cgroup_rel);
	free(t->description);
	free(t);
}

void targets_bpf_filter(const struct targets *t, struct targets_filter *ret)
{
	ret->enabled = t->n_pids > 0 || t->cgroup_id != 0;
	ret->tgids = t->n_pids > 0;
	ret->cgroup_id = t->cgroup_id;
	ret->cgroup_level = t->cgroup_level;
}

void targets_set_allow_list(struct targets *t, const struct targets_allow_ops *ops, void *ctx)
{
	t->allow = ops;
	t->allow_ctx = ctx;
}

int targets_allow_pids(struct targets *t)
{
	for (size_t i = 0; i < t->n_pids; i++) {
		int r = t->allow->add(t->allow_ctx, t->pids[i]);

		if (r < 0)
			return r;
	}
	return 0;
}

const char *targets_describe(const struct targets *t)
{
	return t->description;
}

/* --pid: allowed, or a child of an allowed process (then allowed now). */
static bool targets_pid_allowed(struct targets *t, struct procs *procs, uint32_t pid,
				bool *ret_added)
{
	uint32_t ppid;

	if (t->allow->contains(t->allow_ctx, pid))
		return true;
	if (procs_read_ppid(procs, pid, &ppid) < 0 || !t->allow->contains(t->allow_ctx, ppid))
		return false;
	/* A full allow-list is counted by BPF at the next fork; this process
	 * is scanned all the same. */
	(void)t->allow->add(t->allow_ctx, pid);
	*ret_added = true;
	return true;
}

/* --cgroup: in cgroup_rel or below. */
static bool targets_pid_in_cgroup(struct targets *t, struct procs *procs, uint32_t pid)
{
	size_t n = strlen(t->cgroup_rel);
	char *path = NULL;
	bool in;

	if (procs_read_cgroup(procs, pid, &path) < 0)
		return false;
	in = strcmp(t->cgroup_rel, "/") == 0 ||
	     (strncmp(path, t->cgroup_rel, n) == 0 && (path[n] == '/' || path[n] == '\0'));
	free(path);
	return in;
}

bool targets_selects(struct targets *t, struct procs *procs, uint32_t pid, bool *ret_added)
{
	if (t->n_pids && !targets_pid_allowed(t, procs, pid, ret_added))
		return false;
	/* The cgroup before any scan, so that no file of a process we do not
	 * profile gets registered. */
	return !t->cgroup_rel || targets_pid_in_cgroup(t, procs, pid);
}

struct targets_pass {
	struct targets *t;
	struct procs *procs;
	unsigned drain_every;
	void (*drain)(void *ctx);
	void *ctx;
	bool added; /* a descendant joined the allow-list: list again */
	int n;      /* processes scanned */
};

static int targets_scan_one(uint32_t pid, void *ctx)
{
	struct targets_pass *pass = ctx;

	if (procs_find(pass->procs, pid) ||
	    !targets_selects(pass->t, pass->procs, pid, &pass->added) ||
	    procs_scan(pass->procs, pid) < 0)
		return 0;
	if (++pass->n % pass->drain_every == 0)
		pass->drain(pass->ctx);
	return 0;
}

int targets_scan(struct targets *t, struct procs *procs, unsigned drain_every,
		 void (*drain)(void *ctx), void *ctx)
{
	struct targets_pass pass = {
		.t = t, .procs = procs, .drain_every = drain_every, .drain = drain, .ctx = ctx,
	};
	int r;

	/* Every process once; for --pid, again until no new descendant. */
	do {
		pass.added = false;
		r = procs_list_pids(procs, targets_scan_one, &pass);
		if (r < 0)
			return r;
	} while (pass.added);
	return pass.n;
}
