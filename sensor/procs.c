/* procs.c - reads /proc/PID/{stat,comm,exe,cgroup,maps} for tracked
 * processes. /proc is kernel output, but names in it are target-chosen:
 * every read is bounded, lines are parsed strictly (maps.c), and files are
 * opened only through /proc/PID/map_files so the mapped inode is what we
 * hash, also for deleted files and files inside a container's root; the
 * path text of a maps line is never opened. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "maps.h"
#include "parse.h"
#include "environ.h"
#include "procs.h"
#include "vdso.h"

#define PROCS_BUCKETS 4096
/* The files seen in one scan (procs.h PROCS_MAX_FILES), by (dev, inode):
 * open addressing at most half full. */
#define PROCS_SEEN_SLOTS (2 * PROCS_MAX_FILES)
/* stdio's buffer for maps: each read() of /proc/PID/maps resumes the
 * kernel's walk of the mappings, so fewer, larger reads cost less. */
#define PROCS_MAPS_BUF (64u << 10)

/* A file seen in this scan: maps[idx] holds its registration or error. */
struct seen_file {
	uint64_t dev, ino;
	uint32_t idx;
	bool used;
};

struct proc_node {
	struct proc_node *next;
	struct proc pr;
};

struct procs {
	struct fileids *fileids;
	struct fileid_entry *vdso; /* the kernel's vDSO (vdso.h), or NULL */
	struct fileid_info vdso_info;
	char proc_root[64];
	size_t max, n, n_live;
	/* Some process may be dirty and not a fork copy: a PROCS_DIRTY_URGENT
	 * pass is needed (it runs after every drain; most find nothing). */
	bool urgent_hint;
	bool cmdline; /* procs_set_command_line() */
	const struct procs_observer *obs;
	void *obs_ctx;
	struct proc_node *buckets[PROCS_BUCKETS];
	struct seen_file seen[PROCS_SEEN_SLOTS]; /* read_maps' scratch */
	size_t n_seen;
};

void procs_set_command_line(struct procs *p, bool on)
{
	p->cmdline = on;
}

void procs_set_observer(struct procs *p, const struct procs_observer *obs, void *ctx)
{
	p->obs = obs;
	p->obs_ctx = ctx;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

struct procs *procs_new(struct fileids *fileids, size_t max_procs, const char *proc_root)
{
	struct procs *p;

	if (strlen(proc_root) >= sizeof(p->proc_root))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->fileids = fileids;
	p->max = max_procs;
	strcpy(p->proc_root, proc_root);
	return p;
}

void procs_set_vdso(struct procs *p, struct fileid_entry *e, const struct fileid_info *info)
{
	p->vdso = e;
	p->vdso_info = *info;
}

static void maps_free(struct procs *p, struct proc_mapping *maps, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fileids_unref(p->fileids, maps[i].file);
		free(maps[i].path);
	}
	free(maps);
}

static void node_free(struct procs *p, struct proc_node *node)
{
	maps_free(p, node->pr.maps, node->pr.n_maps);
	free(node->pr.exe);
	free(node->pr.cgroup);
	free(node->pr.cmdline);
	free(node);
}

void procs_free(struct procs *p)
{
	if (!p)
		return;
	for (size_t b = 0; b < PROCS_BUCKETS; b++) {
		struct proc_node *n = p->buckets[b], *next;

		for (; n; n = next) {
			next = n->next;
			node_free(p, n);
		}
	}
	free(p);
}

struct proc *procs_find(struct procs *p, uint32_t pid)
{
	for (struct proc_node *n = p->buckets[pid % PROCS_BUCKETS]; n; n = n->next)
		if (n->pr.pid == pid)
			return &n->pr;
	return NULL;
}

/* Reads at most size - 1 bytes of a small /proc file, NUL-terminated.
 * Returns the length or a negative errno. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	ssize_t n, total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((size_t)total < size - 1) {
		n = read(fd, buf + total, size - 1 - total);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			total = -errno;
			break;
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	if (total >= 0)
		buf[total] = '\0';
	return total;
}

/* The path of the cgroup v2 line "0::/path" of dir/cgroup. Returns 0 with
 * an owned *ret, -ENOENT when there is no such line, -ENOMEM, or
 * read_small's error. */
static int cgroup_of(const char *dir, char **ret)
{
	char path[128], buf[4096];
	const char *line;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/cgroup", dir);
	n = read_small(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	for (line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, "0::", 3) == 0) {
			*ret = strndup(line + 3, strcspn(line + 3, "\n"));
			return *ret ? 0 : -ENOMEM;
		}
	}
	return -ENOENT;
}

/* The cgroup v2 path. Returns a malloc'd string ("" if none). */
static char *read_cgroup(const char *dir)
{
	char *cgroup;

	return cgroup_of(dir, &cgroup) == 0 ? cgroup : strdup("");
}

static void remove_node(struct procs *p, uint32_t pid)
{
	struct proc_node **pn = &p->buckets[pid % PROCS_BUCKETS];

	for (; *pn; pn = &(*pn)->next) {
		struct proc_node *n = *pn;

		if (n->pr.pid != pid)
			continue;
		*pn = n->next;
		p->n--;
		if (!n->pr.exited) {
			p->n_live--;
			if (p->obs && p->obs->gone)
				p->obs->gone(pid, p->obs_ctx);
		}
		node_free(p, n);
		return;
	}
}

static int cmp_mapping(const void *a, const void *b)
{
	const struct proc_mapping *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The identical mapping of the previous scan (its maps are sorted by
 * start and do not overlap), whose registration or error is reused. */
static struct proc_mapping *old_mapping(struct proc *old, const struct maps_line *l, uint64_t dev)
{
	size_t lo = 0, hi = old ? old->n_maps : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct proc_mapping *m = &old->maps[mid];

		if (l->start < m->start) {
			hi = mid;
		} else if (l->start > m->start) {
			lo = mid + 1;
		} else {
			if (m->end == l->end && m->offset == l->offset && m->dev == dev &&
			    m->ino == l->inode && strcmp(m->path, l->path) == 0)
				return m;
			return NULL;
		}
	}
	return NULL;
}

/* A mapping of anything but a regular file (-EBADFD), or over the
 * process's PROCS_MAX_FILES, stays without a file ID while it is mapped;
 * other failures (the mapping gone before the lookup, a full table) are
 * tried again at the next scan. */
static bool reg_retry(int err)
{
	return err != -EBADFD && err != -EDQUOT;
}

static size_t seen_hash(uint64_t dev, uint64_t ino)
{
	uint64_t h = (ino ^ (dev * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;

	return (size_t)(h >> 32) % PROCS_SEEN_SLOTS;
}

/* The slot of (dev, ino): its entry if used, else where it goes. */
static struct seen_file *seen_slot(struct procs *p, uint64_t dev, uint64_t ino)
{
	size_t i = seen_hash(dev, ino);

	/* Never full (n_seen <= PROCS_MAX_FILES, half the slots): ends. */
	while (p->seen[i].used && (p->seen[i].dev != dev || p->seen[i].ino != ino))
		i = (i + 1) % PROCS_SEEN_SLOTS;
	return &p->seen[i];
}

/* Gives m the registration (or error) of from: a reference of its own. */
static void mapping_copy_file(struct procs *p, struct proc_mapping *m,
			      const struct proc_mapping *from)
{
	m->file = fileids_ref(p->fileids, from->file);
	m->info = from->info;
	m->reg_err = from->reg_err;
}

/* Registers the file of mapping l through map_files, the kernel's link to
 * the mapped inode, never through the path text of the maps line (a target
 * chooses it, and a chroot or a symlink can make it name any file): a
 * mapping of anything but a regular file with the line's device and inode
 * gets no file ID (ARCHITECTURE.md, rule 1). */
static int register_mapping(struct procs *p, const char *dir, const struct maps_line *l,
			    struct proc_mapping *m)
{
	char path[128];
	int fd, r;

	snprintf(path, sizeof(path), "%s/map_files/%" PRIx64 "-%" PRIx64, dir, l->start, l->end);
	/* O_PATH: a device node is looked at, never opened. */
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = fileids_register(p->fileids, fd, makedev(l->dev_major, l->dev_minor), l->inode,
			     &m->file, &m->info);
	close(fd);
	return r;
}

/* The file ID of mapping m (maps[idx], the line l's): the registration
 * of an identical mapping of the previous scan, or of a mapping of the
 * same file earlier in this scan, or a new one through map_files, as far
 * as PROCS_MAX_FILES allows. Returns false when over that bound. */
static bool mapping_file(struct procs *p, uint32_t pid, const char *dir, struct proc *old,
			 const struct maps_line *l, struct proc_mapping *maps, size_t idx)
{
	struct proc_mapping *m = &maps[idx], *o = old_mapping(old, l, m->dev);
	struct seen_file *s = seen_slot(p, m->dev, m->ino);

	if (s->used) {
		mapping_copy_file(p, m, &maps[s->idx]);
		return true;
	}
	if (o && (o->file || !reg_retry(o->reg_err))) {
		/* A reference of its own, not moved: the old mapping stays
		 * whole for maps_equal(), and for the process if this scan
		 * fails. */
		mapping_copy_file(p, m, o);
	} else if (p->n_seen == PROCS_MAX_FILES) {
		m->reg_err = -EDQUOT;
		return false;
	} else {
		m->reg_err = register_mapping(p, dir, l, m);
		if (m->reg_err < 0)
			log_debug("pid %" PRIu32 ": no file ID for %.100s: %d, ignoring", pid,
				  l->path, m->reg_err);
	}
	if (p->n_seen < PROCS_MAX_FILES) {
		*s = (struct seen_file){.dev = m->dev, .ino = m->ino, .idx = (uint32_t)idx, .used = true};
		p->n_seen++;
	}
	return true;
}

/* Reads the executable file mappings, within the bounds of procs.h.
 * Returns 0 with an owned array, the maps bytes read and whether a bound
 * left mappings out. */
static int read_maps(struct procs *p, uint32_t pid, const char *dir, struct proc *old,
		     struct proc_mapping **ret_maps, size_t *ret_n, uint64_t *ret_bytes,
		     bool *ret_over)
{
	char path[128], line[MAPS_PATH_MAX + 256];
	struct proc_mapping *maps = NULL, *m;
	struct maps_line *l = NULL;
	size_t n = 0, cap = 0, path_bytes = 0;
	uint64_t bytes = 0;
	FILE *f = NULL;
	bool vdso, over = false;
	int r = 0;

	snprintf(path, sizeof(path), "%s/maps", dir);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	setvbuf(f, NULL, _IOFBF, PROCS_MAPS_BUF);
	memset(p->seen, 0, sizeof(p->seen));
	p->n_seen = 0;
	l = malloc(sizeof(*l));
	if (!l) {
		r = -ENOMEM;
		goto out;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);

		bytes += len;
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			/* Over-long line: skip the rest of it. */
			int c;

			while ((c = fgetc(f)) != EOF && c != '\n')
				bytes++;
			continue;
		}
		if (bytes > PROCS_MAX_MAPS_BYTES) {
			over = true; /* what is further up stays unknown */
			break;
		}
		if (maps_parse_line(line, len, l) < 0) {
			log_debug("pid %" PRIu32 ": unparsable maps line, ignoring", pid);
			continue;
		}
		vdso = p->vdso && l->executable &&
		       vdso_matches(&p->vdso_info, l->start, l->end, l->offset, l->path);
		if (!vdso && !maps_line_is_exec_file(l))
			continue;
		path_bytes += strlen(l->path) + 1;
		if (n == PROCS_MAX_MAPS || path_bytes > PROCS_MAX_PATH_BYTES) {
			over = true;
			break;
		}
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 32;
			struct proc_mapping *nm = realloc(maps, ncap * sizeof(*maps));

			if (!nm) {
				r = -ENOMEM;
				goto out;
			}
			maps = nm;
			cap = ncap;
		}
		m = &maps[n];
		memset(m, 0, sizeof(*m));
		m->start = l->start;
		m->end = l->end;
		m->offset = l->offset;
		m->dev = makedev(l->dev_major, l->dev_minor);
		m->ino = l->inode;
		m->deleted = l->deleted;
		m->path = strdup(l->path);
		if (!m->path) {
			r = -ENOMEM;
			goto out;
		}
		n++;
		if (vdso) {
			m->file = fileids_ref(p->fileids, p->vdso);
			m->info = p->vdso_info;
			continue;
		}

		if (!mapping_file(p, pid, dir, old, l, maps, n - 1))
			over = true;
	}
	if (ferror(f))
		r = -EIO;
out:
	free(l);
	fclose(f);
	if (r < 0) {
		maps_free(p, maps, n);
		return r;
	}
	/* The kernel lists mappings by address: sorted already, as a rule. */
	for (size_t i = 1; i < n; i++)
		if (maps[i - 1].start > maps[i].start) {
			qsort(maps, n, sizeof(*maps), cmp_mapping);
			break;
		}
	*ret_maps = maps;
	*ret_n = n;
	*ret_bytes = bytes;
	*ret_over = over;
	return 0;
}

static bool maps_equal(const struct proc_mapping *a, size_t na, const struct proc_mapping *b,
		       size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (a[i].start != b[i].start || a[i].end != b[i].end ||
		    a[i].offset != b[i].offset || !a[i].file != !b[i].file ||
		    (a[i].file && memcmp(&a[i].info.id, &b[i].info.id, sizeof(a[i].info.id))) ||
		    strcmp(a[i].path, b[i].path))
			return false;
	return true;
}

/* OTEL_SERVICE_NAME from the start of /proc/PID/environ (the first
 * ENVIRON_READ_MAX bytes; further down it is not looked for). */
static void read_service_name(const char *dir, char *out, size_t size)
{
	char path[128], *buf = malloc(ENVIRON_READ_MAX + 1);
	ssize_t len;

	out[0] = '\0';
	if (!buf)
		return;
	snprintf(path, sizeof(path), "%s/environ", dir);
	len = read_small(path, buf, ENVIRON_READ_MAX + 1);
	if (len > 0)
		environ_find(buf, (size_t)len, "OTEL_SERVICE_NAME", out, size);
	free(buf);
}

/* /proc/PID/cmdline's first PROCS_MAX_CMDLINE bytes, arguments joined
 * by spaces (malloc'd); NULL when unreadable (a kernel thread, gone). The
 * bytes stay opaque here: flush.c escapes them as it does every text. */
static char *read_cmdline(const char *dir)
{
	char path[128], *buf = malloc(PROCS_MAX_CMDLINE + 1);
	ssize_t len;

	if (!buf)
		return NULL;
	snprintf(path, sizeof(path), "%s/cmdline", dir);
	len = read_small(path, buf, PROCS_MAX_CMDLINE + 1);
	if (len <= 0) {
		free(buf);
		return NULL;
	}
	if (len > PROCS_MAX_CMDLINE)
		len = PROCS_MAX_CMDLINE;
	while (len > 0 && buf[len - 1] == '\0')
		len--;
	for (ssize_t i = 0; i < len; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[len] = '\0';
	return buf;
}

/* Reads /proc/PID: everything, or (maps_only, for a known process that
 * did not exec since its last scan) only stat and maps. */
static int scan(struct procs *p, uint32_t pid, bool maps_only)
{
	char dir[96], path[128], buf[4096], exe[PATH_MAX];
	struct proc_mapping *maps = NULL;
	struct proc_node *node = NULL;
	struct proc *old = procs_find(p, pid);
	uint64_t start = 0, bytes = 0, now;
	uint32_t ppid = 0;
	char *cgroup = NULL, *exe_copy = NULL;
	size_t n_maps = 0;
	bool changed = false, over = false;
	ssize_t len;
	int r;

	snprintf(dir, sizeof(dir), "%s/%" PRIu32, p->proc_root, pid);
	snprintf(path, sizeof(path), "%s/stat", dir);
	len = read_small(path, buf, sizeof(buf));
	if (len < 0)
		return len == -ENOENT ? -ESRCH : (int)len;
	if (proc_parse_stat(buf, len, &ppid, &start) < 0)
		return -EINVAL;
	if (old && (old->exited || old->start_ticks != start)) {
		/* The pid was reused: the old process is gone, and the new
		 * one's ProcessUpdate replaces it for the symbolizer. */
		remove_node(p, pid);
		old = NULL;
	}
	if (!old || old->exec_pending)
		maps_only = false;

	if (!maps_only) {
		len = readlink((snprintf(path, sizeof(path), "%s/exe", dir), path), exe,
			       sizeof(exe) - 1);
		if (len < 0)
			return errno == ENOENT ? -ENOEXEC : -errno; /* kernel thread, or gone */
		exe[len] = '\0';
	}

	if (!old && p->n >= p->max)
		return -ENOSPC;

	r = read_maps(p, pid, dir, old, &maps, &n_maps, &bytes, &over);
	if (r < 0)
		return r;
	now = now_ns();
	if (!maps_only) {
		cgroup = read_cgroup(dir);
		exe_copy = strdup(exe);
	}
	if (!old) {
		node = calloc(1, sizeof(*node));
		if (!node || !cgroup || !exe_copy) {
			free(node);
			r = -ENOMEM;
			goto fail;
		}
		node->pr.pid = pid;
		scan_budget_init(&node->pr.budget, now);
		node->next = p->buckets[pid % PROCS_BUCKETS];
		p->buckets[pid % PROCS_BUCKETS] = node;
		p->n++;
		p->n_live++;
		old = &node->pr;
		old->dirty = true;
		changed = true;
	} else if (!maps_only && (!cgroup || !exe_copy)) {
		r = -ENOMEM;
		goto fail;
	}

	if (!maps_only) {
		struct stat st;
		uint32_t uid = 0;

		/* Unreadable or malformed: root's (admin only), not anyone's. */
		snprintf(path, sizeof(path), "%s/status", dir);
		len = read_small(path, buf, sizeof(buf));
		if (len <= 0 || proc_parse_status_uid(buf, (size_t)len, &uid) < 0)
			uid = 0;
		/* The kernel makes /proc/PID root's while the task is not
		 * dumpable (after a setuid exec, or prctl): perf and ptrace
		 * refuse it to its uid, so its samples are root's too. */
		if (uid && (stat(dir, &st) < 0 || st.st_uid != uid))
			uid = 0;
		if (old->uid != uid) {
			old->uid = uid;
			old->dirty = true;
		}
		snprintf(path, sizeof(path), "%s/comm", dir);
		len = read_small(path, buf, sizeof(old->comm) + 1);
		if (len > 0) {
			buf[strcspn(buf, "\n")] = '\0';
			buf[sizeof(old->comm) - 1] = '\0';
			if (strcmp(old->comm, buf)) {
				memcpy(old->comm, buf, sizeof(old->comm));
				old->dirty = true;
			}
		}
	}
	if (!maps_equal(old->maps, old->n_maps, maps, n_maps)) {
		old->maps_gen++;
		old->dirty = true;
		changed = true;
	}
	/* A fork's copy gets unwind entries of its own now. */
	if (old->cloned)
		changed = true;
	old->cloned = false;
	old->exec_pending = false;
	if (!maps_only) {
		/* The environment is read once per exe: at the first scan
		 * and after an exec (when the environment may change, so may
		 * the exe). */
		if (!old->exe || strcmp(old->exe, exe_copy)) {
			read_service_name(dir, old->otel_service_name,
					  sizeof(old->otel_service_name));
			if (p->cmdline) {
				free(old->cmdline);
				old->cmdline = read_cmdline(dir);
			}
			old->dirty = true;
		}
		if (!old->cgroup || strcmp(old->cgroup, cgroup))
			old->dirty = true;
		free(old->exe);
		free(old->cgroup);
		old->exe = exe_copy;
		old->cgroup = cgroup;
	}
	maps_free(p, old->maps, old->n_maps);
	old->maps = maps;
	old->n_maps = n_maps;
	old->ppid = ppid;
	old->start_ticks = start;
	old->last_scan_ns = now;
	scan_budget_spend(&old->budget, bytes, now);
	old->over_bounds = over;
	if (over && !old->over_bounds_logged) {
		old->over_bounds_logged = true;
		log_info("pid %" PRIu32 ": its maps are over the per-process bounds "
			 "(%u MiB read, %u executable file mappings, %u distinct files): frames "
			 "in the rest keep raw addresses",
			 pid, PROCS_MAX_MAPS_BYTES >> 20, PROCS_MAX_MAPS, PROCS_MAX_FILES);
	}
	if (old->dirty)
		p->urgent_hint = true;
	if (changed && p->obs && p->obs->maps_changed)
		p->obs->maps_changed(old, p->obs_ctx);
	return 0;
fail:
	maps_free(p, maps, n_maps);
	free(cgroup);
	free(exe_copy);
	return r;
}

int procs_scan(struct procs *p, uint32_t pid)
{
	return scan(p, pid, false);
}

/* Whether pid's scan budget keeps a rescan from running now: only a known
 * process whose image was scanned (an exec'd one gets its scan). A fork's
 * copy of a process over the bounds is not scanned at all until it execs
 * (it has its parent's mappings): forking it costs the sensor nothing. */
static bool over_budget(struct procs *p, uint32_t pid)
{
	struct proc *pr = procs_find(p, pid);

	if (!pr || pr->exited || pr->exec_pending)
		return false;
	return (pr->cloned && pr->over_bounds) || !scan_budget_allows(&pr->budget, now_ns());
}

int procs_rescan_maps(struct procs *p, uint32_t pid)
{
	if (over_budget(p, pid))
		return -EAGAIN;
	return scan(p, pid, true);
}

int procs_fork(struct procs *p, uint32_t child, uint32_t parent, uint64_t start_ticks)
{
	struct proc *pa = procs_find(p, parent), *c;
	struct proc_node *node;
	struct proc_mapping *maps = NULL;

	if (!pa || pa->exited || pa->exec_pending)
		return -ESRCH;
	c = procs_find(p, child);
	if (c && !c->exited)
		return -EEXIST;
	if (c)
		remove_node(p, child); /* the pid was reused */
	if (p->n >= p->max)
		return -ENOSPC;
	node = calloc(1, sizeof(*node));
	if (!node)
		return -ENOMEM;
	if (pa->n_maps && !(maps = calloc(pa->n_maps, sizeof(*maps))))
		goto nomem;
	for (size_t i = 0; i < pa->n_maps; i++) {
		maps[i] = pa->maps[i];
		maps[i].path = strdup(pa->maps[i].path);
		maps[i].file = NULL;
		if (!maps[i].path) {
			maps_free(p, maps, i);
			maps = NULL;
			goto nomem;
		}
		maps[i].file = fileids_ref(p->fileids, pa->maps[i].file);
	}
	c = &node->pr;
	c->maps = maps;
	c->n_maps = pa->n_maps;
	c->exe = strdup(pa->exe ? pa->exe : "");
	c->cgroup = strdup(pa->cgroup ? pa->cgroup : "");
	c->cmdline = pa->cmdline ? strdup(pa->cmdline) : NULL;
	if (!c->exe || !c->cgroup || (pa->cmdline && !c->cmdline)) {
		node_free(p, node);
		return -ENOMEM;
	}
	c->pid = child;
	c->ppid = parent;
	memcpy(c->comm, pa->comm, sizeof(c->comm));
	c->uid = pa->uid; /* fork keeps the credentials */
	memcpy(c->otel_service_name, pa->otel_service_name, sizeof(c->otel_service_name));
	c->start_ticks = start_ticks;
	c->last_scan_ns = now_ns();
	c->budget = pa->budget;
	c->over_bounds = pa->over_bounds;
	c->over_bounds_logged = pa->over_bounds_logged;
	c->dirty = true;
	c->cloned = true;
	node->next = p->buckets[child % PROCS_BUCKETS];
	p->buckets[child % PROCS_BUCKETS] = node;
	p->n++;
	p->n_live++;
	return 0;
nomem:
	free(node);
	return -ENOMEM;
}

bool procs_exec(struct procs *p, uint32_t pid)
{
	struct proc *pr = procs_find(p, pid);

	if (!pr || pr->exited)
		return false;
	pr->exec_pending = true;
	return true;
}

int procs_rescan_limited(struct procs *p, uint32_t pid, uint64_t min_interval_ns)
{
	struct proc *pr = procs_find(p, pid);
	uint32_t gen;
	int r;

	/* A process that is still loading its libraries needs a quick second
	 * look; one that runs code outside file mappings (a JIT) would make
	 * every sample rescan. So the gap starts at min_interval_ns, doubles
	 * after each rescan that found nothing new (up to 64 times), and
	 * starts again when the mappings changed. */
	if (pr && pr->rescan_gap_ns < min_interval_ns)
		pr->rescan_gap_ns = min_interval_ns;
	if (pr && now_ns() - pr->last_scan_ns < pr->rescan_gap_ns)
		return 0;
	if (over_budget(p, pid))
		return 0;
	gen = pr ? pr->maps_gen : 0;
	r = procs_scan(p, pid);
	pr = procs_find(p, pid);
	if (pr) {
		if (r < 0) /* rate-limit failures too */
			pr->last_scan_ns = now_ns();
		if (r < 0 || pr->maps_gen == gen)
			pr->rescan_gap_ns = pr->rescan_gap_ns * 2 > min_interval_ns * 64
						    ? min_interval_ns * 64
						    : pr->rescan_gap_ns * 2;
		else
			pr->rescan_gap_ns = min_interval_ns;
	}
	return r < 0 ? r : 1;
}

void procs_exit(struct procs *p, uint32_t pid)
{
	struct proc *pr = procs_find(p, pid);

	if (pr && !pr->exited && pr->cloned && pr->dirty && !pr->sampled) {
		/* A fork's copy that nobody heard of and no sample needs. */
		remove_node(p, pid);
		return;
	}
	if (pr && !pr->exited) {
		pr->exited = true;
		pr->exit_sent = false;
		p->n_live--;
		if (p->obs && p->obs->gone)
			p->obs->gone(pid, p->obs_ctx);
	}
}

void procs_reap(struct procs *p)
{
	for (size_t b = 0; b < PROCS_BUCKETS; b++) {
		struct proc_node **pn = &p->buckets[b];

		while (*pn) {
			struct proc_node *n = *pn;

			if (n->pr.exited && n->pr.exit_sent && !n->pr.dirty) {
				*pn = n->next;
				p->n--;
				node_free(p, n);
			} else {
				pn = &n->next;
			}
		}
	}
}

void procs_reset_connection(struct procs *p)
{
	for (size_t b = 0; b < PROCS_BUCKETS; b++)
		for (struct proc_node *n = p->buckets[b]; n; n = n->next) {
			n->pr.dirty = true;
			n->pr.exit_sent = false;
			p->urgent_hint = true;
		}
}

int procs_resolve(struct procs *p, uint32_t pid, uint64_t addr, struct stack_frame *ret)
{
	struct proc *pr = procs_find(p, pid);
	size_t lo = 0, hi;

	if (!pr)
		return -ENOENT;
	pr->sampled = true;
	hi = pr->n_maps;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct proc_mapping *m = &pr->maps[mid];

		if (addr < m->start) {
			hi = mid;
		} else if (addr >= m->end) {
			lo = mid + 1;
		} else {
			if (!m->file)
				return -ENOENT;
			memcpy(ret->file_id, m->info.id.bytes, sizeof(ret->file_id));
			ret->addr = addr - m->start + m->offset;
			ret->has_file_id = 1;
			return 0;
		}
	}
	return -ENOENT;
}

int procs_foreach(struct procs *p, enum procs_select sel,
		  int (*fn)(const struct proc *pr, void *ctx), void *ctx)
{
	if (sel == PROCS_DIRTY_URGENT && !p->urgent_hint)
		return 0;
	for (size_t b = 0; b < PROCS_BUCKETS; b++)
		for (struct proc_node *n = p->buckets[b]; n; n = n->next) {
			int r;

			if (sel != PROCS_ALL && !n->pr.dirty)
				continue;
			if (sel == PROCS_DIRTY_URGENT && n->pr.cloned)
				continue;
			r = fn(&n->pr, ctx);
			if (r)
				return r;
			n->pr.dirty = false;
		}
	if (sel != PROCS_ALL)
		p->urgent_hint = false; /* every dirty one was sent */
	return 0;
}

int procs_visit(struct procs *p, int (*fn)(const struct proc *pr, void *ctx), void *ctx)
{
	for (size_t b = 0; b < PROCS_BUCKETS; b++)
		for (struct proc_node *n = p->buckets[b]; n; n = n->next) {
			int r;

			if (n->pr.exited)
				continue;
			r = fn(&n->pr, ctx);
			if (r)
				return r;
		}
	return 0;
}

int procs_foreach_exit(struct procs *p, int (*fn)(uint32_t pid, void *ctx), void *ctx)
{
	for (size_t b = 0; b < PROCS_BUCKETS; b++)
		for (struct proc_node *n = p->buckets[b]; n; n = n->next) {
			int r;

			if (!n->pr.exited || n->pr.exit_sent)
				continue;
			r = fn(n->pr.pid, ctx);
			if (r)
				return r;
			n->pr.exit_sent = true;
		}
	return 0;
}

size_t procs_count(struct procs *p)
{
	return p->n_live;
}

int procs_list_pids(struct procs *p, int (*fn)(uint32_t pid, void *ctx), void *ctx)
{
	DIR *d = opendir(p->proc_root);
	struct dirent *de;
	int r = 0;

	if (!d)
		return -errno;
	while (r == 0 && (de = readdir(d))) {
		uint32_t pid;

		if (parse_u32(de->d_name, 10, &pid) == 0)
			r = fn(pid, ctx);
	}
	closedir(d);
	return r;
}

int procs_read_ppid(struct procs *p, uint32_t pid, uint32_t *ret_ppid)
{
	char path[128], buf[4096];
	uint32_t ppid;
	uint64_t start;
	ssize_t len;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/stat", p->proc_root, pid);
	len = read_small(path, buf, sizeof(buf));
	if (len < 0)
		return len == -ENOENT ? -ESRCH : (int)len;
	if (proc_parse_stat(buf, (size_t)len, &ppid, &start) < 0)
		return -EINVAL;
	*ret_ppid = ppid;
	return 0;
}

int procs_read_cgroup(struct procs *p, uint32_t pid, char **ret_path)
{
	char dir[96];

	snprintf(dir, sizeof(dir), "%s/%" PRIu32, p->proc_root, pid);
	return cgroup_of(dir, ret_path);
}
