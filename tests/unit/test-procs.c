/* test-procs.c - the process table (sensor/procs.c) on this test's own
 * /proc entry: a rescan that finds the same mappings changes nothing (no
 * observer call, no new generation, nothing to send), and one that finds
 * a new or removed executable mapping does; a process with more distinct
 * files than PROCS_MAX_FILES gets file IDs for that many only, and
 * rescans stop when its scan budget is spent. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fileids.h"
#include "procs.h"

static unsigned changed_calls;

static void on_changed(const struct proc *pr, void *ctx)
{
	(void)pr;
	(void)ctx;
	changed_calls++;
}

static const struct procs_observer observer = {.maps_changed = on_changed};

static int count_one(const struct proc *pr, void *ctx)
{
	(void)pr;
	(*(unsigned *)ctx)++;
	return 0;
}

/* Processes procs_foreach(PROCS_DIRTY) hands out (and marks clean). */
static unsigned take_dirty(struct procs *p)
{
	unsigned n = 0;

	assert_int_equal(procs_foreach(p, PROCS_DIRTY, count_one, &n), 0);
	return n;
}

struct fixture {
	struct fileids *ids;
	struct procs *procs;
};

static int setup(void **state)
{
	static struct fixture f;

	f.ids = fileids_new(64);
	f.procs = f.ids ? procs_new(f.ids, 16, "/proc") : NULL;
	if (!f.procs)
		return -1;
	procs_set_observer(f.procs, &observer, NULL);
	changed_calls = 0;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	procs_free(f->procs);
	fileids_free(f->ids);
	return 0;
}

static void assert_resolves(struct procs *p, uint32_t pid)
{
	struct stack_frame fr;

	/* An address in this test's own text resolves to a file. */
	memset(&fr, 0, sizeof(fr));
	assert_int_equal(procs_resolve(p, pid, (uint64_t)(uintptr_t)&take_dirty, &fr), 0);
	assert_true(fr.has_file_id);
}

/* /proc/PID/map_files wants CAP_CHECKPOINT_RESTORE (or CAP_SYS_ADMIN),
 * even for one's own process: without it no mapping gets a file ID. */
static void skip_without_map_files(void)
{
	char path[64];
	uintptr_t text = (uintptr_t)&take_dirty;
	FILE *m = fopen("/proc/self/maps", "re");
	unsigned long start, end;
	char line[512];
	int fd = -1;

	assert_non_null(m);
	while (fgets(line, sizeof(line), m))
		if (sscanf(line, "%lx-%lx", &start, &end) == 2 && start <= text && text < end) {
			snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", start, end);
			fd = open(path, O_PATH | O_CLOEXEC);
			break;
		}
	fclose(m);
	if (fd < 0)
		skip();
	close(fd);
}

static void test_same_mappings_are_no_change(void **state)
{
	struct fixture *f = *state;
	uint32_t pid = (uint32_t)getpid(), gen;
	struct proc *pr;

	skip_without_map_files();
	assert_int_equal(procs_scan(f->procs, pid), 0);
	assert_int_equal(changed_calls, 1);
	pr = procs_find(f->procs, pid);
	assert_non_null(pr);
	assert_true(pr->n_maps > 0);
	gen = pr->maps_gen;
	assert_int_equal(take_dirty(f->procs), 1);

	for (int i = 0; i < 3; i++) {
		assert_int_equal(procs_rescan_maps(f->procs, pid), 0);
		assert_int_equal(procs_scan(f->procs, pid), 0);
	}
	pr = procs_find(f->procs, pid);
	assert_int_equal(changed_calls, 1);
	assert_int_equal(pr->maps_gen, gen);
	assert_int_equal(take_dirty(f->procs), 0);
	/* The mappings kept their file IDs through the rescans. */
	for (size_t i = 0; i < pr->n_maps; i++)
		if (strcmp(pr->maps[i].path, "[vdso]") != 0)
			assert_non_null(pr->maps[i].file);
	assert_resolves(f->procs, pid);
}

static void test_new_and_removed_mapping_are_changes(void **state)
{
	struct fixture *f = *state;
	uint32_t pid = (uint32_t)getpid(), gen;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	long page = sysconf(_SC_PAGESIZE);
	void *m;

	assert_true(fd >= 0);
	skip_without_map_files();
	assert_int_equal(procs_scan(f->procs, pid), 0);
	take_dirty(f->procs);
	gen = procs_find(f->procs, pid)->maps_gen;

	/* One more executable mapping of a file: a dlopen, as far as the
	 * table can tell. */
	m = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(procs_rescan_maps(f->procs, pid), 0);
	assert_int_equal(changed_calls, 2);
	assert_int_equal(procs_find(f->procs, pid)->maps_gen, gen + 1);
	assert_int_equal(take_dirty(f->procs), 1);

	assert_int_equal(munmap(m, (size_t)page), 0);
	assert_int_equal(procs_rescan_maps(f->procs, pid), 0);
	assert_int_equal(changed_calls, 3);
	assert_int_equal(procs_find(f->procs, pid)->maps_gen, gen + 2);
	assert_int_equal(take_dirty(f->procs), 1);
	assert_resolves(f->procs, pid);
	close(fd);
}

/* fileids_register() takes a file by fd, and only a regular file whose
 * device and inode are the ones the caller read (a maps line's). */
static void test_register_only_the_expected_regular_file(void **state)
{
	struct fixture *f = *state;
	struct fileid_entry *e = NULL;
	struct fileid_info info;
	struct stat st;
	int fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
	int dev = open("/dev/null", O_PATH | O_CLOEXEC);

	assert_true(fd >= 0 && dev >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(fileids_register(f->ids, fd, st.st_dev, st.st_ino + 1, &e, &info), -ESTALE);
	assert_int_equal(fileids_register(f->ids, fd, st.st_dev + 1, st.st_ino, &e, &info), -ESTALE);
	assert_null(e);
	assert_int_equal(fstat(dev, &st), 0);
	assert_int_equal(fileids_register(f->ids, dev, st.st_dev, st.st_ino, &e, &info), -EBADFD);
	assert_null(e);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(fileids_register(f->ids, fd, st.st_dev, st.st_ino, &e, &info), 0);
	assert_non_null(e);
	assert_int_equal(info.ino, st.st_ino);
	assert_int_equal(fileids_count(f->ids), 1);
	fileids_unref(f->ids, e);
	close(fd);
	close(dev);
}

/* A chmod after registration: the file registers again, with the new
 * mode (the symbolizer's access policy gets the fresh bits). */
static void test_chmod_registers_again(void **state)
{
	struct fixture *f = *state;
	struct fileid_entry *e1 = NULL, *e2 = NULL;
	struct fileid_info info;
	struct stat st;
	char path[] = "/tmp/sonde-test-fileids.XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "sonde chmod test\n", 17), 17);
	assert_int_equal(fchmod(fd, 0644), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(fileids_register(f->ids, fd, st.st_dev, st.st_ino, &e1, &info), 0);
	assert_int_equal(info.mode, 0644);
	assert_int_equal(fchmod(fd, 0600), 0);
	assert_int_equal(fileids_register(f->ids, fd, st.st_dev, st.st_ino, &e2, &info), 0);
	assert_int_equal(info.mode, 0600);
	assert_ptr_not_equal(e1, e2);
	fileids_unref(f->ids, e1);
	fileids_unref(f->ids, e2);
	close(fd);
	unlink(path);
}

/* More distinct executable files (memfds, as a shared anonymous mapping
 * is) than PROCS_MAX_FILES: that many get a file ID, the rest none
 * (-EDQUOT) with the process marked over its bounds; every mapping of one
 * file shares its registration; the test's own code still resolves. */
static void test_distinct_files_are_capped(void **state)
{
	enum { FILES = PROCS_MAX_FILES + 100, SHARED = 50 };
	long page = sysconf(_SC_PAGESIZE);
	struct fileids *ids = fileids_new(2 * FILES);
	struct procs *p = ids ? procs_new(ids, 4, "/proc") : NULL;
	uint32_t pid = (uint32_t)getpid();
	void *m[FILES + SHARED];
	int fds[FILES];
	size_t with = 0, quota = 0, of_first = 0;
	struct fileid_entry *first = NULL;
	struct stat st;
	struct proc *pr;

	(void)state;
	assert_non_null(p);
	skip_without_map_files();
	for (int i = 0; i < FILES; i++) {
		fds[i] = memfd_create("sonde-test-cap", MFD_CLOEXEC);
		assert_true(fds[i] >= 0);
		assert_int_equal(ftruncate(fds[i], page), 0);
		m[i] = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_SHARED, fds[i], 0);
		assert_true(m[i] != MAP_FAILED);
	}
	/* The last file, mapped SHARED more times (new mappings go below
	 * the older ones: its mappings are the first the scan meets). */
	for (int i = 0; i < SHARED; i++) {
		m[FILES + i] = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_SHARED,
				    fds[FILES - 1], 0);
		assert_true(m[FILES + i] != MAP_FAILED);
	}
	assert_int_equal(fstat(fds[FILES - 1], &st), 0);
	assert_int_equal(procs_scan(p, pid), 0);
	pr = procs_find(p, pid);
	assert_non_null(pr);
	assert_true(pr->over_bounds);
	for (size_t i = 0; i < pr->n_maps; i++) {
		const struct proc_mapping *pm = &pr->maps[i];

		if (strncmp(pm->path, "/memfd:sonde-test-cap", 21) != 0)
			continue;
		with += pm->file != NULL;
		quota += pm->reg_err == -EDQUOT;
		if (pm->ino != (uint64_t)st.st_ino)
			continue;
		/* Every mapping of the file has its one registration. */
		of_first++;
		assert_non_null(pm->file);
		if (!first)
			first = pm->file;
		assert_ptr_equal(pm->file, first);
	}
	assert_int_equal(of_first, SHARED + 1);
	assert_true(with <= PROCS_MAX_FILES + SHARED);
	assert_true(quota >= FILES - PROCS_MAX_FILES);
	assert_int_equal(with + quota, FILES + SHARED);
	assert_true(fileids_count(ids) <= PROCS_MAX_FILES);
	assert_resolves(p, pid);
	/* A rescan reuses all of it: nothing changes. */
	assert_int_equal(procs_scan(p, pid), 0);
	for (int i = 0; i < FILES + SHARED; i++)
		munmap(m[i], (size_t)page);
	for (int i = 0; i < FILES; i++)
		close(fds[i]);
	procs_free(p);
	fileids_free(ids);
}

/* Rescans of a known process read its maps until its scan budget is
 * spent (far more often than the sensor rescans anything), then are
 * refused without a read; a full scan (at exec) still runs. */
static void test_rescans_stop_when_the_budget_is_spent(void **state)
{
	struct fixture *f = *state;
	uint32_t pid = (uint32_t)getpid();
	int r = 0, n = 0;

	assert_int_equal(procs_scan(f->procs, pid), 0);
	while (n < 1000000 && (r = procs_rescan_maps(f->procs, pid)) == 0)
		n++;
	assert_int_equal(r, -EAGAIN);
	/* Our maps text is at least a few KiB a scan. */
	assert_true(n > 0 && (uint64_t)n <= SCAN_BUDGET_BURST / 1024 + 1000);
	assert_int_equal(procs_rescan_limited(f->procs, pid, 1), 0);
	assert_int_equal(procs_scan(f->procs, pid), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_same_mappings_are_no_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_and_removed_mapping_are_changes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_register_only_the_expected_regular_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_chmod_registers_again, setup, teardown),
		cmocka_unit_test(test_distinct_files_are_capped),
		cmocka_unit_test_setup_teardown(test_rescans_stop_when_the_budget_is_spent, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
