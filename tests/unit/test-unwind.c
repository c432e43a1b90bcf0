/* test-unwind.c - unit tests of symbolizer/unwind: tables compiled from
 * real files of this machine, driven through the resumable step loop
 * exactly like the service does (elf_analysis_step and
 * unwind_analysis_step on one sparse image, needs folded together,
 * ranges read from the file), and checked against an independent
 * reference: `readelf --debug-dump=frames-interp -W`, row by row; Go
 * binaries (.gopclntab) against their own prologues' machine code. Plus the
 * cache blob (round trip, truncations, bit flips) and hostile CFI
 * (garbage, truncation, CIE pointer games, huge lengths, deep
 * remember_state).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "elf_analysis.h"
#include "file_image.h"
#include "eh_frame.h"
#include "pclntab.h"
#include "unwind_analysis.h"
#include "unwind_table.h"

#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define LDSO "/lib64/ld-linux-x86-64.so.2"
#define PYTHON "/usr/bin/python3.11"
#define XZ "/usr/bin/xz"
#define SORT "/usr/bin/sort"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct compiled {
	struct unwind_table *t;
	struct elf_layout layout;
	struct unwind_analysis_info info;
	unsigned rounds;
	uint64_t bytes;
	double ms;
	uint8_t *whole; /* the file, for byte patterns */
	uint64_t size;
};

/* The service's loop: one image, both analyses, one request list. */
static int compile_file(const char *path, struct compiled *ret)
{
	struct file_image *img = NULL;
	struct symtab *st = NULL;
	struct elf_need need, uneed;
	const char *reason = NULL, *ureason = NULL;
	struct stat sb;
	uint8_t *buf = NULL;
	int fd, r = -EIO, ru = -EAGAIN, re = -EAGAIN;
	double t0;

	memset(ret, 0, sizeof(*ret));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0)
		goto out;
	ret->size = (uint64_t)sb.st_size;
	ret->whole = malloc(ret->size);
	if (!ret->whole || pread(fd, ret->whole, ret->size, 0) != (ssize_t)ret->size)
		goto out;
	img = file_image_new(ret->size);
	assert_non_null(img);
	t0 = now_ms();
	for (unsigned round = 0; round < 32; round++) {
		need.n = 0;
		if (re == -EAGAIN)
			re = elf_analysis_step(img, &need, &st, &reason);
		if (ru == -EAGAIN) {
			ru = unwind_analysis_step(img, NULL, &uneed, &ret->t, &ret->info, &ureason);
			for (size_t i = 0; ru == -EAGAIN && i < uneed.n; i++)
				elf_need_add(&need, uneed.ranges[i].offset, uneed.ranges[i].length);
		}
		if (re != -EAGAIN && ru != -EAGAIN)
			break;
		if (need.n == 0) {
			/* the elf step is done: ask for the unwind needs alone */
			need = uneed;
		}
		for (size_t i = 0; i < need.n; i++) {
			uint64_t off = need.ranges[i].offset, len = need.ranges[i].length;

			if (off + len > ret->size)
				len = ret->size - off;
			assert_int_equal(file_image_put(img, off, ret->whole + off, len), 0);
			ret->bytes += len;
		}
		ret->rounds++;
	}
	ret->ms = now_ms() - t0;
	if (ru != 0) {
		print_message("%s: unwind step %d (%s)\n", path, ru, ureason ? ureason : "?");
		r = ru;
		goto out;
	}
	assert_int_equal(re, 0);
	{
		struct elf_section s;
		const char *names[] = { ".text" };

		assert_int_equal(elf_sections(img, &need, names, 1, &s, &ret->layout, NULL), 0);
	}
	r = 0;
out:
	symtab_free(st);
	file_image_free(img);
	free(buf);
	if (fd >= 0)
		close(fd);
	return r;
}

static void compiled_done(struct compiled *c)
{
	unwind_table_free(c->t);
	free(c->whole);
}

static bool to_offset(const struct elf_layout *l, uint64_t vaddr, uint64_t *off)
{
	for (size_t i = 0; i < l->n_segments; i++) {
		const struct elf_segment *s = &l->segments[i];

		if (s->type == 1 /* PT_LOAD */ && vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz) {
			*off = vaddr - s->vaddr + s->offset;
			return true;
		}
	}
	return false;
}

/* ---- the readelf reference ---- */

struct ref_row {
	uint64_t loc, end;
	char cfa[32], rbp[16], ra[16];
	bool signal;
	bool first; /* first row of its FDE */
};

struct reference {
	struct ref_row *rows;
	size_t n, cap;
};

static void ref_push(struct reference *ref, const struct ref_row *r)
{
	if (ref->n == ref->cap) {
		ref->cap = ref->cap ? ref->cap * 2 : 4096;
		ref->rows = realloc(ref->rows, ref->cap * sizeof(*ref->rows));
		assert_non_null(ref->rows);
	}
	ref->rows[ref->n++] = *r;
}

/* The cell of a readelf row at character position col (-1: no column). */
static void cell(const char *line, int col, char *out, size_t size, const char *blank)
{
	size_t len = strlen(line), n = 0;

	if (col < 0 || (size_t)col >= len || line[col] == ' ' || line[col] == '\n') {
		snprintf(out, size, "%s", blank);
		return;
	}
	while (line[col + n] && line[col + n] != ' ' && line[col + n] != '\n' && n + 1 < size)
		n++;
	/* "r10 (r10)": a register rule names the register twice. */
	if (line[col + n] == ' ' && line[col + n + 1] == '(') {
		const char *close = strchr(line + col + n, ')');

		if (close && (size_t)(close + 1 - (line + col)) < size)
			n = (size_t)(close + 1 - (line + col));
	}
	memcpy(out, line + col, n);
	out[n] = '\0';
}

struct cie_ref {
	uint64_t off;
	bool signal;
	char cfa[32], rbp[16], ra[16];
};

/* Parses readelf's frames-interp output of the .eh_frame section: for
 * each FDE its rows (LOC, CFA, rbp, ra columns); an FDE without rows has
 * its CIE's initial row at its start. */
static void read_reference(const char *path, struct reference *ref)
{
	char cmd[512], line[4096];
	struct cie_ref cies[256];
	size_t n_cies = 0;
	int col_rbp = -1, col_ra = -1, col_pos[64], n_cols = 0;
	bool in_eh = false, in_fde = false, fde_has_rows = false, cur_signal = false;
	struct cie_ref *cur_cie = NULL, *pending_cie = NULL;
	uint64_t fde_lo = 0, fde_hi = 0;
	size_t fde_first = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp -W %s 2>/dev/null", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	memset(ref, 0, sizeof(*ref));
#define END_FDE()                                                                       \
	do {                                                                            \
		if (in_fde && !fde_has_rows && cur_cie && fde_lo < fde_hi) {            \
			struct ref_row rr = { .loc = fde_lo, .end = fde_hi,             \
					      .signal = cur_signal, .first = true };    \
			snprintf(rr.cfa, sizeof(rr.cfa), "%s", cur_cie->cfa);           \
			snprintf(rr.rbp, sizeof(rr.rbp), "%s", cur_cie->rbp);           \
			snprintf(rr.ra, sizeof(rr.ra), "%s", cur_cie->ra);              \
			ref_push(ref, &rr);                                             \
		}                                                                       \
		if (in_fde && fde_has_rows) {                                           \
			for (size_t k = fde_first; k < ref->n; k++)                     \
				ref->rows[k].end = k + 1 < ref->n ? ref->rows[k + 1].loc \
								  : fde_hi;             \
		}                                                                       \
		in_fde = false;                                                         \
	} while (0)
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, c;
		char aug[32];

		if (strncmp(line, "Contents of the ", 16) == 0) {
			END_FDE();
			in_eh = strstr(line, ".eh_frame section") != NULL;
			continue;
		}
		if (!in_eh)
			continue;
		if (strstr(line, " CIE") && !strstr(line, " FDE") &&
		    sscanf(line, "%llx %llx %llx", &a, &b, &c) == 3) {
			const char *q = strchr(line, '"');

			aug[0] = 0;
			if (q)
				sscanf(q, "\"%31[^\"]\"", aug);
			END_FDE();
			assert_true(n_cies < 256);
			pending_cie = &cies[n_cies++];
			memset(pending_cie, 0, sizeof(*pending_cie));
			pending_cie->off = a;
			pending_cie->signal = strchr(aug, 'S') != NULL;
			snprintf(pending_cie->rbp, sizeof(pending_cie->rbp), "u");
			snprintf(pending_cie->ra, sizeof(pending_cie->ra), "?");
			col_rbp = col_ra = -1;
			continue;
		}
		{
			unsigned long long cie_off, lo, hi;

			if (sscanf(line, "%llx %llx %llx FDE cie=%llx pc=%llx..%llx", &a, &b, &c,
				   &cie_off, &lo, &hi) == 6) {
				END_FDE();
				pending_cie = NULL;
				cur_cie = NULL;
				for (size_t k = 0; k < n_cies; k++)
					if (cies[k].off == cie_off)
						cur_cie = &cies[k];
				cur_signal = cur_cie && cur_cie->signal;
				in_fde = true;
				fde_has_rows = false;
				fde_lo = lo;
				fde_hi = hi;
				fde_first = ref->n;
				col_rbp = col_ra = -1;
				continue;
			}
		}
		if (strstr(line, "   LOC ")) {
			/* Column header: cells sit at the header's character
			 * positions (a register unreferenced so far in the
			 * FDE prints as blanks), except that a cell wider
			 * than its column pushes the rest to the right. */
			n_cols = 0;
			col_rbp = col_ra = -1;
			for (int k = 1; line[k] && n_cols < 64; k++) {
				if (line[k - 1] != ' ' || line[k] == ' ' || line[k] == '\n')
					continue;
				if (strncmp(line + k, "rbp ", 4) == 0)
					col_rbp = n_cols;
				if (strncmp(line + k, "ra ", 3) == 0 || strncmp(line + k, "ra\n", 3) == 0)
					col_ra = n_cols;
				col_pos[n_cols++] = k;
			}
			continue;
		}
		if (sscanf(line, "%llx", &a) == 1 && strlen(line) > 17 && line[16] == ' ') {
			struct ref_row rr = { .loc = a, .signal = cur_signal };
			int shift = 0, prev_end = 16;

			snprintf(rr.rbp, sizeof(rr.rbp), "u");
			snprintf(rr.ra, sizeof(rr.ra), "?");
			/* col_pos[0] is LOC, [1] CFA, then the registers. */
			for (int k = 1; k < n_cols; k++) {
				int at = col_pos[k] + shift, len = 0;
				char tmp[32];

				if (at < prev_end + 1)
					at = prev_end + 1;
				shift = at - col_pos[k];
				cell(line, at, tmp, sizeof(tmp), "u");
				if (at < (int)strlen(line) && line[at] != ' ')
					len = (int)strlen(tmp);
				prev_end = len ? at + len : at;
				if (k == 1)
					snprintf(rr.cfa, sizeof(rr.cfa), "%s", tmp);
				else if (k == col_rbp)
					snprintf(rr.rbp, sizeof(rr.rbp), "%s", tmp);
				else if (k == col_ra)
					snprintf(rr.ra, sizeof(rr.ra), "%s", tmp);
			}
			if (pending_cie) {
				snprintf(pending_cie->cfa, sizeof(pending_cie->cfa), "%s", rr.cfa);
				snprintf(pending_cie->rbp, sizeof(pending_cie->rbp), "%s", rr.rbp);
				snprintf(pending_cie->ra, sizeof(pending_cie->ra), "%s", rr.ra);
				continue;
			}
			if (!in_fde)
				continue;
			rr.first = !fde_has_rows;
			fde_has_rows = true;
			ref_push(ref, &rr);
		}
	}
	END_FDE();
#undef END_FDE
	pclose(f);
}

enum verdict {
	AGREE,
	DELIBERATE, /* expressions -> PLT/UNSUPPORTED, other documented cases */
	DISAGREE,
};

/* What our row must be for this readelf row. */
static enum verdict judge(const struct ref_row *rr, const struct sonde_unwind_row *row,
			  unsigned *n_exp)
{
	long v;
	char reg[8];

	if (rr->signal)
		return row->cfa_kind == SONDE_CFA_SIGNAL ? AGREE : DISAGREE;
	if (strcmp(rr->ra, "u") == 0)
		return row->cfa_kind == SONDE_CFA_STOP ? AGREE : DISAGREE;
	if (strcmp(rr->cfa, "exp") == 0) {
		(*n_exp)++;
		return row->cfa_kind == SONDE_CFA_PLT || row->cfa_kind == SONDE_CFA_UNSUPPORTED
			       ? DELIBERATE
			       : DISAGREE;
	}
	if (strcmp(rr->ra, "c-8") != 0 || sscanf(rr->cfa, "%3[a-z0-9]+%ld", reg, &v) != 2 ||
	    (strcmp(reg, "rsp") != 0 && strcmp(reg, "rbp") != 0))
		return row->cfa_kind == SONDE_CFA_UNSUPPORTED ? DELIBERATE : DISAGREE;
	if (row->cfa_kind != (strcmp(reg, "rsp") == 0 ? SONDE_CFA_SP : SONDE_CFA_FP) ||
	    row->cfa_off != v)
		return DISAGREE;
	if (rr->rbp[0] == 'c') {
		long fo = strtol(rr->rbp + 1, NULL, 10);

		return row->fp_kind == SONDE_FP_AT_CFA && row->fp_off == fo ? AGREE : DISAGREE;
	}
	if (strcmp(rr->rbp, "u") == 0 || strcmp(rr->rbp, "s") == 0)
		return row->fp_kind == SONDE_FP_SAME ? AGREE : DISAGREE;
	return DISAGREE; /* rbp in a register or by expression: we say UNSUPPORTED */
}

struct agreement {
	unsigned checked, agree, deliberate, disagree, exp, skipped;
};

static void compare_with_readelf(const char *path, const struct compiled *c,
				 struct agreement *ret)
{
	struct reference ref;
	struct agreement a = { 0 };

	read_reference(path, &ref);
	assert_true(ref.n > 0);
	for (size_t i = 0; i < ref.n; i++) {
		const struct ref_row *rr = &ref.rows[i];
		struct sonde_unwind_row row;
		uint64_t off;
		enum verdict v;

		if (rr->end <= rr->loc || !to_offset(&c->layout, rr->loc, &off)) {
			a.skipped++;
			continue;
		}
		a.checked++;
		if (unwind_table_lookup(c->t, off, &row) < 0) {
			v = DISAGREE;
		} else {
			v = judge(rr, &row, &a.exp);
			/* An FDE-less rule at the same place in an overlapping,
			 * earlier FDE wins deterministically: check the last
			 * byte of the row too before calling it a difference. */
		}
		if (v == AGREE)
			a.agree++;
		else if (v == DELIBERATE)
			a.deliberate++;
		else {
			if (a.disagree < 5)
				print_message("  %s: %#llx cfa=%s rbp=%s ra=%s -> ours kind %u off %d fp %u/%d\n",
					      path, (unsigned long long)rr->loc, rr->cfa, rr->rbp,
					      rr->ra, row.cfa_kind, row.cfa_off, row.fp_kind,
					      row.fp_off);
			a.disagree++;
		}
	}
	free(ref.rows);
	*ret = a;
}

static void report(const char *path, const struct compiled *c, const struct agreement *a)
{
	size_t n = unwind_table_count(c->t);

	print_message("%-40s rows %7zu (%7zu KiB) FDEs %6llu hdr %6llu  %2u rounds %7llu KiB fetched  %6.1f ms | readelf rows %6u agree %6u deliberate %4u (exp %u) disagree %u\n",
		      path, n, n * 12 / 1024, (unsigned long long)c->info.eh_frame.fdes,
		      (unsigned long long)c->info.eh_frame_hdr_fdes, c->rounds,
		      (unsigned long long)c->bytes / 1024, c->ms, a->checked, a->agree,
		      a->deliberate, a->exp, a->disagree);
}

static void check_sorted(const struct unwind_table *t)
{
	size_t n;
	const struct sonde_unwind_row *rows = unwind_table_rows(t, &n);

	for (size_t i = 1; i < n; i++) {
		assert_true(rows[i].pc > rows[i - 1].pc);
		assert_false(rows[i].cfa_kind == rows[i - 1].cfa_kind &&
			     rows[i].fp_kind == rows[i - 1].fp_kind &&
			     rows[i].fp_off == rows[i - 1].fp_off &&
			     rows[i].cfa_off == rows[i - 1].cfa_off);
	}
	assert_int_equal(rows[n - 1].cfa_kind, SONDE_CFA_UNSUPPORTED);
}

static void check_file(const char *path, struct compiled *c)
{
	struct agreement a;

	if (access(path, R_OK) != 0) {
		print_message("%s missing, skipped\n", path);
		skip();
	}
	assert_int_equal(compile_file(path, c), 0);
	check_sorted(c->t);
	compare_with_readelf(path, c, &a);
	report(path, c, &a);
	/* Allowed: only the deliberate differences. */
	assert_int_equal(a.disagree, 0);
	assert_true(a.agree > a.checked / 2);
}

static int64_t find_bytes(const struct compiled *c, const uint8_t *pat, size_t n)
{
	for (uint64_t i = 0; i + n <= c->size; i++)
		if (memcmp(c->whole + i, pat, n) == 0)
			return (int64_t)i;
	return -1;
}

static void test_libc(void **state)
{
	/* __restore_rt: mov $15, %rax; syscall (rt_sigreturn) */
	static const uint8_t restore_rt[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	struct compiled c;
	struct sonde_unwind_row row;
	struct reference ref;
	int64_t at;
	unsigned thread_starts = 0;

	check_file(LIBC, &c);
	at = find_bytes(&c, restore_rt, sizeof(restore_rt));
	assert_true(at > 0);
	assert_int_equal(unwind_table_lookup(c.t, (uint64_t)at, &row), 0);
	assert_int_equal(row.cfa_kind, SONDE_CFA_SIGNAL);
	/* RA - 1 lookups land inside the trampoline's FDE, which starts one
	 * byte early (the nop before __restore_rt) for exactly that. */
	assert_int_equal(unwind_table_lookup(c.t, (uint64_t)at - 1, &row), 0);
	assert_int_equal(row.cfa_kind, SONDE_CFA_SIGNAL);
	/* clone and clone3: the child's path (thread_start) is its own FDE
	 * that marks rip undefined; xor %ebp,%ebp follows. Those rows must
	 * be STOP, also after the xor. */
	read_reference(LIBC, &ref);
	for (size_t i = 0; i < ref.n; i++) {
		uint64_t off;

		if (strcmp(ref.rows[i].ra, "u") != 0 || ref.rows[i].end < ref.rows[i].loc + 3 ||
		    !to_offset(&c.layout, ref.rows[i].loc, &off))
			continue;
		assert_int_equal(unwind_table_lookup(c.t, off, &row), 0);
		assert_int_equal(row.cfa_kind, SONDE_CFA_STOP);
		if (c.whole[off] == 0x31 && c.whole[off + 1] == 0xed) {
			assert_int_equal(unwind_table_lookup(c.t, off + 2, &row), 0);
			assert_int_equal(row.cfa_kind, SONDE_CFA_STOP);
		}
		thread_starts++;
	}
	free(ref.rows);
	print_message("libc: %u thread start rows (clone, clone3) are STOP\n", thread_starts);
	assert_true(thread_starts >= 2);
	compiled_done(&c);
	(void)state;
}

static void check_entry_stop(struct compiled *c)
{
	uint64_t entry, off = 0;
	struct sonde_unwind_row row;

	memcpy(&entry, c->whole + 24, 8); /* e_entry */
	assert_true(to_offset(&c->layout, entry, &off));
	/* _start: cfi_undefined rip, then xor %ebp,%ebp (2 bytes) */
	assert_int_equal(unwind_table_lookup(c->t, off + 2, &row), 0);
	assert_int_equal(row.cfa_kind, SONDE_CFA_STOP);
}

static void check_plt(struct compiled *c, const char *path)
{
	struct file_image *img = file_image_open(path);
	const char *names[] = { ".plt" };
	struct elf_section s;
	struct elf_layout l;
	struct elf_need need;
	struct sonde_unwind_row row;
	uint64_t off = 0;

	assert_non_null(img);
	assert_int_equal(elf_sections(img, &need, names, 1, &s, &l, NULL), 0);
	file_image_free(img);
	if (!s.found || s.size < 48)
		return;
	assert_true(to_offset(&l, s.addr + 16, &off));
	assert_int_equal(unwind_table_lookup(c->t, off, &row), 0);
	assert_int_equal(row.cfa_kind, SONDE_CFA_PLT);
	assert_int_equal(unwind_table_lookup(c->t, off + 12, &row), 0);
	assert_int_equal(row.cfa_kind, SONDE_CFA_PLT);
}

static void test_ldso(void **state)
{
	struct compiled c;

	/* ld.so's _start (RTLD_START) has no FDE: no STOP check there. */
	check_file(LDSO, &c);
	compiled_done(&c);
	(void)state;
}

static void test_python(void **state)
{
	struct compiled c;

	check_file(PYTHON, &c);
	check_entry_stop(&c);
	check_plt(&c, PYTHON);
	compiled_done(&c);
	(void)state;
}

static void test_xz(void **state)
{
	struct compiled c;

	check_file(XZ, &c);
	check_entry_stop(&c);
	check_plt(&c, XZ);
	compiled_done(&c);
	(void)state;
}

static void test_sort(void **state)
{
	struct compiled c;

	check_file(SORT, &c);
	check_entry_stop(&c);
	check_plt(&c, SORT);
	compiled_done(&c);
	(void)state;
}

static const char test_program[] =
	"#include <alloca.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
	"__attribute__((noinline)) static long leaf(long *p, long n) {\n"
	"  long s = 0; for (long i = 0; i < n; i++) s += p[i] * i; return s; }\n"
	"__attribute__((noinline)) static long withalloca(long n) {\n"
	"  long *p = alloca(n * sizeof(long)); memset(p, 1, n * sizeof(long));\n"
	"  return leaf(p, n); }\n"
	"__attribute__((noinline)) static long many(long a, long b, long c, long d) {\n"
	"  long x[64]; for (int i = 0; i < 64; i++) x[i] = a * i + b;\n"
	"  return leaf(x, 64) + withalloca(c + d); }\n"
	"int main(int argc, char **argv) { printf(\"%ld\\n\", many(argc, 2, 3, argc * 5)); return 0; }\n";

static void test_compiled_program(void **state)
{
	char dir[] = "/tmp/sonde-test-unwind.XXXXXX", src[128], bin[128], cmd[512];
	struct compiled c;
	struct agreement a;
	struct reference ref;
	unsigned fp_rows = 0;
	size_t n;
	const struct sonde_unwind_row *rows;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/prog.c", dir);
	snprintf(bin, sizeof(bin), "%s/prog", dir);
	f = fopen(src, "w");
	assert_non_null(f);
	fputs(test_program, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -O2 -fomit-frame-pointer -o %s %s", bin, src);
	if (system(cmd) != 0) {
		print_message("no C compiler, skipped\n");
		skip();
	}
	assert_int_equal(compile_file(bin, &c), 0);
	check_sorted(c.t);
	compare_with_readelf(bin, &c, &a);
	report("cc -O2 -fomit-frame-pointer prog", &c, &a);
	assert_int_equal(a.disagree, 0);
	check_entry_stop(&c);
	/* alloca makes gcc use rbp as the CFA register. */
	rows = unwind_table_rows(c.t, &n);
	for (size_t i = 0; i < n; i++)
		fp_rows += rows[i].cfa_kind == SONDE_CFA_FP;
	assert_true(fp_rows >= 1);
	read_reference(bin, &ref);
	free(ref.rows);
	compiled_done(&c);
	unlink(bin);
	unlink(src);
	rmdir(dir);
	(void)state;
}

/* ---- Go: frames from .gopclntab ---- */

struct go_funcs {
	uint64_t *lo, *hi;
	size_t n, cap;
	uint64_t goexit, systemstack[2];
	/* asmcgocall and its ABI wrapper share the name */
	uint64_t asmcgocall[2][2];
	size_t n_asmcgocall;
};

static int go_func(void *ctx, uint64_t lo, uint64_t hi, const char *name, size_t len)
{
	struct go_funcs *g = ctx;

	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 4096;
		g->lo = realloc(g->lo, g->cap * sizeof(*g->lo));
		g->hi = realloc(g->hi, g->cap * sizeof(*g->hi));
		assert_non_null(g->lo);
		assert_non_null(g->hi);
	}
	g->lo[g->n] = lo;
	g->hi[g->n++] = hi;
	if (len == 14 && memcmp(name, "runtime.goexit", 14) == 0)
		g->goexit = lo;
	if (len == 19 && memcmp(name, "runtime.systemstack", 19) == 0) {
		g->systemstack[0] = lo;
		g->systemstack[1] = hi;
	}
	if (len == 18 && memcmp(name, "runtime.asmcgocall", 18) == 0 && g->n_asmcgocall < 2) {
		g->asmcgocall[g->n_asmcgocall][0] = lo;
		g->asmcgocall[g->n_asmcgocall++][1] = hi;
	}
	return 0;
}

/* A function that switches to the g0 stack ([range[0], range[1])): every
 * row (but the padding after its last instruction, which has no SP table)
 * is kind with cfa_off off (the SP table does not count what they take of
 * the g0 stack), and right after its call on g0 (`call *%rdi` or `*%rax`,
 * or Go 1.22's asmcgocall_landingpad: the first call after a `mov
 * ...,%rsp`) fp_off is its frame on the goroutine's stack: the rbp Go
 * 1.21+ saves. */
static void check_switch(const struct compiled *c, const uint64_t range[2], unsigned kind,
			 int32_t off, bool pushes_bp)
{
	struct sonde_unwind_row row;
	unsigned rows = 0, returns = 0;
	bool switched = false;
	uint64_t at = 0;

	assert_true(range[0] && range[1] > range[0]);
	for (uint64_t a = range[0]; a < range[1]; a++) {
		assert_true(to_offset(&c->layout, a, &at));
		assert_int_equal(unwind_table_lookup(c->t, at, &row), 0);
		if (row.cfa_kind == SONDE_CFA_UNSUPPORTED)
			continue;
		assert_int_equal(row.cfa_kind, kind);
		assert_int_equal(row.cfa_off, off);
		rows++;
		/* mov ...(%reg),%rsp: 48 8b 6x/62/60 .. */
		if (at >= 4 && c->whole[at - 4] == 0x48 && c->whole[at - 3] == 0x8b &&
		    (c->whole[at - 2] & 0xf8) == 0x60 && (c->whole[at - 2] & 7) != 4)
			switched = true;
		/* call rel32, or call *%reg */
		if (switched && !returns && at >= 5 &&
		    (c->whole[at - 5] == 0xe8 ||
		     (c->whole[at - 2] == 0xff && (c->whole[at - 1] & 0xf8) == 0xd0))) {
			assert_int_equal(row.fp_off, pushes_bp ? 8 : 0);
			returns++;
		}
	}
	assert_true(rows > 64);
	assert_int_equal(returns, 1);
}

/* Which of the two functions named runtime.asmcgocall is the assembly one
 * (the other is its ABI wrapper, an ordinary Go function): the one with
 * GO_ASMCGOCALL rows, and only one may have them. */
static size_t asm_function(const struct compiled *c, const struct go_funcs *g)
{
	struct sonde_unwind_row row;
	size_t found = 2, n = 0;
	uint64_t at;

	for (size_t i = 0; i < g->n_asmcgocall; i++) {
		for (uint64_t a = g->asmcgocall[i][0]; a < g->asmcgocall[i][1]; a++) {
			if (to_offset(&c->layout, a, &at) && unwind_table_lookup(c->t, at, &row) == 0 &&
			    row.cfa_kind == SONDE_CFA_GO_ASMCGOCALL) {
				found = i;
				n++;
				break;
			}
		}
	}
	assert_int_equal(n, 1);
	return found;
}

/* Checks a Go binary's table against its machine code, an independent
 * witness of the SP offsets: every function whose first instructions
 * include `sub $n, %rsp` (Go's prologue: after the stack check, and after
 * `push %rbp; mov %rsp, %rbp` since Go 1.21) must have CFA = rsp + n + 8
 * (+ 8 after that push) right after it, with the caller's rbp saved at
 * CFA - 16; every function's first byte CFA = rsp + 8; runtime.goexit is
 * the goroutine's outermost frame (STOP, like the few assembly functions
 * that are outermost or switch stacks), and runtime.systemstack and
 * runtime.asmcgocall continue on the goroutine's stack (check_switch),
 * with m.curg at 192 (these binaries' versions, 1.19 and 1.23: DWARF says
 * so) and g at 48 and 8 on the g0 stack (their asm_amd64.s). */
static void check_go(const char *path, bool pushes_bp)
{
	static const char *const names[] = { ".gopclntab", ".text" };
	struct go_funcs g = { 0 };
	struct pclntab_sink sink = { .func = go_func, .ctx = &g };
	struct elf_section secs[2];
	struct elf_layout layout;
	struct file_image *img;
	struct elf_need need;
	struct sonde_unwind_row row;
	struct compiled c;
	unsigned prologues = 0, entries = 0, stops = 0, bad = 0;
	uint64_t off = 0;

	if (access(path, R_OK) != 0) {
		print_message("%s missing, skipped\n", path);
		skip();
	}
	assert_int_equal(compile_file(path, &c), 0);
	check_sorted(c.t);
	assert_true(c.info.go_spans > 0);
	img = file_image_new(c.size);
	assert_non_null(img);
	assert_int_equal(file_image_put(img, 0, c.whole, c.size), 0);
	assert_int_equal(elf_sections(img, &need, names, 2, secs, &layout, NULL), 0);
	assert_true(secs[0].found);
	assert_int_equal(pclntab_read(c.whole + secs[0].offset, secs[0].size, secs[1].addr, &sink), 0);
	for (size_t i = 0; i < g.n; i++) {
		const uint8_t *p;
		uint64_t n = 0;
		size_t at;

		/* (go.buildid, a function at the start of the text, has no
		 * SP table and so no row) */
		if (!to_offset(&c.layout, g.lo[i], &off) || off + 48 > c.size ||
		    unwind_table_lookup(c.t, off, &row) != 0)
			continue;
		if (row.cfa_kind == SONDE_CFA_SP) {
			entries++;
			bad += !(row.cfa_off == 8 && row.fp_kind == SONDE_FP_SAME);
		}
		p = c.whole + off;
		for (at = 0; at < 32 && g.lo[i] + at + 7 <= g.hi[i]; at++) {
			if (p[at] == 0x48 && p[at + 1] == 0x83 && p[at + 2] == 0xec) {
				n = p[at + 3];
				at += 4;
				break;
			}
			if (p[at] == 0x48 && p[at + 1] == 0x81 && p[at + 2] == 0xec) {
				n = (uint64_t)p[at + 3] | (uint64_t)p[at + 4] << 8 |
				    (uint64_t)p[at + 5] << 16 | (uint64_t)p[at + 6] << 24;
				at += 7;
				break;
			}
		}
		if (!n || (at < 8 && pushes_bp))
			continue;
		/* The prologue: after `push %rbp; mov %rsp, %rbp` (Go 1.21+),
		 * or followed by `mov %rbp, n-8(%rsp)` (before). */
		if (pushes_bp && !(p[at - 8] == 0x55 && p[at - 7] == 0x48 && p[at - 6] == 0x89 &&
				   p[at - 5] == 0xe5) && !(p[at - 11] == 0x55 && p[at - 10] == 0x48 &&
							   p[at - 9] == 0x89 && p[at - 8] == 0xe5))
			continue;
		if (!pushes_bp && !(p[at] == 0x48 && p[at + 1] == 0x89 &&
				    (p[at + 2] == 0x6c || p[at + 2] == 0xac) && p[at + 3] == 0x24))
			continue;
		assert_int_equal(unwind_table_lookup(c.t, off + at, &row), 0);
		if (row.cfa_kind == SONDE_CFA_STOP) {
			stops++; /* TOPFRAME or SPWRITE: rt0_go, systemstack, ... */
			continue;
		}
		prologues++;
		if (row.cfa_kind != SONDE_CFA_SP || row.cfa_off != (int32_t)n + 8 + (pushes_bp ? 8 : 0) ||
		    row.fp_kind != SONDE_FP_AT_CFA || row.fp_off != -16) {
			if (bad++ < 5)
				print_message("%s: function at %#llx: after sub $%llu, rsp: kind %u cfa %d fp %u/%d\n",
					      path, (unsigned long long)g.lo[i], (unsigned long long)n,
					      row.cfa_kind, row.cfa_off, row.fp_kind, row.fp_off);
		}
	}
	print_message("%s: %zu functions, %u rows, fetched %llu KiB, %.1f ms; %u entries SP+8, "
		      "%u prologues checked, %u wrong, %u STOP\n",
		      path, g.n, (unsigned)unwind_table_count(c.t), (unsigned long long)c.bytes / 1024,
		      c.ms, entries, prologues, bad, stops);
	assert_true(g.n > 1000);
	assert_true(entries > g.n * 9 / 10);
	assert_true(prologues > g.n / 3);
	assert_int_equal(bad, 0);
	assert_true(stops < prologues / 100);
	assert_true(g.goexit);
	assert_true(to_offset(&c.layout, g.goexit, &off));
	assert_int_equal(unwind_table_lookup(c.t, off, &row), 0);
	assert_int_equal(row.cfa_kind, SONDE_CFA_STOP);
	check_switch(&c, g.systemstack, SONDE_CFA_GO_SYSTEMSTACK, 192, pushes_bp);
	check_switch(&c, g.asmcgocall[asm_function(&c, &g)], SONDE_CFA_GO_ASMCGOCALL,
		     pushes_bp ? 8 : 48, pushes_bp);
	file_image_free(img);
	free(g.lo);
	free(g.hi);
	compiled_done(&c);
}

static void test_go119(void **state)
{
	check_go("/usr/lib/go-1.19/bin/go", false);
	(void)state;
}

static void test_go123(void **state)
{
	check_go("/usr/lib/go-1.23/pkg/tool/linux_amd64/compile", true);
	(void)state;
}

/* ---- serialisation ---- */

static struct unwind_table *small_table(void)
{
	struct unwind_builder *b = unwind_builder_new();
	struct unwind_table *t = NULL;
	struct sonde_unwind_row sp8 = { .cfa_kind = SONDE_CFA_SP, .cfa_off = 8 };
	struct sonde_unwind_row sp16 = { .cfa_kind = SONDE_CFA_SP, .cfa_off = 16,
					 .fp_kind = SONDE_FP_AT_CFA, .fp_off = -16 };
	struct sonde_unwind_row fp = { .cfa_kind = SONDE_CFA_FP, .cfa_off = 16,
				       .fp_kind = SONDE_FP_AT_CFA, .fp_off = -16 };
	struct sonde_unwind_row stop = { .cfa_kind = SONDE_CFA_STOP, .cfa_off = 99 };

	assert_non_null(b);
	assert_int_equal(unwind_builder_add(b, 0x1000, 0x1004, &sp8, UNWIND_SRC_EH_FRAME), 0);
	assert_int_equal(unwind_builder_add(b, 0x1004, 0x1010, &sp16, UNWIND_SRC_EH_FRAME), 0);
	assert_int_equal(unwind_builder_add(b, 0x1010, 0x1100, &fp, UNWIND_SRC_EH_FRAME), 0);
	/* identical neighbour: merged */
	assert_int_equal(unwind_builder_add(b, 0x1100, 0x1200, &fp, UNWIND_SRC_EH_FRAME), 0);
	/* gap, then a stop */
	assert_int_equal(unwind_builder_add(b, 0x2000, 0x2010, &stop, UNWIND_SRC_EH_FRAME), 0);
	/* lower priority overlap: only fills [0x1200, 0x1300) */
	assert_int_equal(unwind_builder_add(b, 0x1100, 0x1300, &sp8, UNWIND_SRC_DEBUG_FRAME), 0);
	/* same priority overlap: the earlier start keeps its range */
	assert_int_equal(unwind_builder_add(b, 0x1008, 0x1020, &sp8, UNWIND_SRC_EH_FRAME), 0);
	assert_int_equal(unwind_builder_finish(b, &t), 0);
	unwind_builder_free(b);
	return t;
}

static void test_builder(void **state)
{
	struct unwind_table *t = small_table();
	struct sonde_unwind_row r;
	size_t n;
	const struct sonde_unwind_row *rows = unwind_table_rows(t, &n);
	/* [0x1008, 0x1020) starts before [0x1010, 0x1100): it keeps
	 * [0x1010, 0x1020), the FP span keeps the rest. */
	static const uint32_t want_pc[] = { 0x1000, 0x1004, 0x1010, 0x1020,
					    0x1200, 0x1300, 0x2000, 0x2010 };
	static const uint8_t want_kind[] = { SONDE_CFA_SP, SONDE_CFA_SP, SONDE_CFA_SP, SONDE_CFA_FP,
					     SONDE_CFA_SP, SONDE_CFA_UNSUPPORTED, SONDE_CFA_STOP,
					     SONDE_CFA_UNSUPPORTED };

	assert_int_equal(n, 8);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(rows[i].pc, want_pc[i]);
		assert_int_equal(rows[i].cfa_kind, want_kind[i]);
	}
	assert_int_equal(rows[6].cfa_off, 0); /* unused fields cleared */
	assert_int_equal(unwind_table_lookup(t, 0xfff, &r), -ENOENT);
	assert_int_equal(unwind_table_lookup(t, 0x100f, &r), 0);
	assert_int_equal(r.pc, 0x1004);
	assert_int_equal(r.fp_off, -16);
	unwind_table_free(t);
	(void)state;
}

static void test_blob(void **state)
{
	struct unwind_table *t = small_table(), *u;
	size_t size, n1, n2;
	uint8_t *blob = unwind_table_serialize(t, &size), *copy;
	const struct sonde_unwind_row *a, *b;

	assert_non_null(blob);
	u = unwind_table_deserialize(blob, size);
	assert_non_null(u);
	a = unwind_table_rows(t, &n1);
	b = unwind_table_rows(u, &n2);
	assert_int_equal(n1, n2);
	assert_memory_equal(a, b, n1 * sizeof(*a));
	unwind_table_free(u);
	for (size_t len = 0; len < size; len++)
		assert_null(unwind_table_deserialize(blob, len));
	copy = malloc(size);
	for (size_t bit = 0; bit < size * 8; bit++) {
		memcpy(copy, blob, size);
		copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		u = unwind_table_deserialize(copy, size);
		assert_null(u);
	}
	/* The wire packing is the blob's row format. */
	{
		uint8_t wire[8 * 12];

		unwind_table_pack(t, 0, n1, wire);
		assert_memory_equal(wire, blob + 24, sizeof(wire));
		assert_int_equal(wire[4], SONDE_CFA_SP);
	}
	free(copy);
	free(blob);
	unwind_table_free(t);
	(void)state;
}

static void test_real_blob(void **state)
{
	struct compiled c;
	size_t size;
	uint8_t *blob;
	struct unwind_table *u;

	if (compile_file(XZ, &c) != 0)
		skip();
	blob = unwind_table_serialize(c.t, &size);
	u = unwind_table_deserialize(blob, size);
	assert_non_null(u);
	assert_int_equal(unwind_table_count(u), unwind_table_count(c.t));
	unwind_table_free(u);
	free(blob);
	compiled_done(&c);
	(void)state;
}

/* ---- hostile CFI ---- */

struct counter {
	unsigned n;
	uint64_t last_end;
};

static int count_emit(void *ctx, uint64_t start, uint64_t end, const struct sonde_unwind_row *row)
{
	struct counter *c = ctx;

	assert_true(start < end);
	assert_true(row->cfa_kind >= SONDE_CFA_SP && row->cfa_kind <= SONDE_CFA_MAX);
	c->n++;
	c->last_end = end;
	return 0;
}

static int parse(const uint8_t *p, size_t n, enum cfi_kind kind, struct counter *c,
		 struct cfi_stats *st)
{
	struct cfi_section sec = { .data = p, .size = n, .addr = 0x10000, .kind = kind,
				   .addr_size = 8 };
	const char *reason = NULL;

	memset(c, 0, sizeof(*c));
	return cfi_parse(&sec, count_emit, c, st, &reason);
}

/* A CIE "zR" (pcrel|sdata4), cf 1, df -8, ra 16, def_cfa rsp+8,
 * offset ra at cfa-8; then one FDE for [0x20000, 0x20100). */
static size_t build_cfi(uint8_t *out, const uint8_t *fde_insns, size_t n_insns)
{
	static const uint8_t cie[] = {
		0x14, 0, 0, 0, 0, 0, 0, 0, /* length 20, id 0 */
		1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b, /* version, aug, cf, df, ra, augsz, enc */
		0x0c, 7, 8, 0x90, 1, 0, 0, /* def_cfa rsp 8; offset r16 1*-8; nops */
	};
	size_t pos = sizeof(cie), fde_len = 4 + 4 + 4 + 1 + n_insns;
	int32_t pc;

	memcpy(out, cie, sizeof(cie));
	fde_len = (fde_len + 3) & ~(size_t)3;
	memset(out + pos, 0, 4 + fde_len);
	out[pos] = (uint8_t)fde_len;
	out[pos + 4] = (uint8_t)(pos + 4); /* CIE pointer back to offset 0 */
	pc = (int32_t)(0x20000 - (0x10000 + pos + 8));
	memcpy(out + pos + 8, &pc, 4);
	out[pos + 12] = 0x00;
	out[pos + 13] = 0x01; /* range 0x100 */
	out[pos + 16] = 0;    /* augmentation length */
	memcpy(out + pos + 17, fde_insns, n_insns);
	return pos + 4 + fde_len;
}

static void test_hostile(void **state)
{
	uint8_t buf[8192], junk[4096];
	struct counter c;
	struct cfi_stats st;
	size_t n;
	static const uint8_t simple[] = { 0x41, 0x0e, 0x10, 0x86, 0x02 }; /* adv 1; cfa+16; rbp@-16 */

	/* A good one first. */
	n = build_cfi(buf, simple, sizeof(simple));
	assert_int_equal(parse(buf, n, CFI_EH_FRAME, &c, &st), 0);
	assert_int_equal(st.fdes, 1);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.last_end, 0x20100);

	/* Every truncation: never a crash, never an emit past the range. */
	for (size_t len = 0; len < n; len++)
		parse(buf, len, CFI_EH_FRAME, &c, &st);

	/* Bit flips of the good one. */
	for (size_t bit = 0; bit < n * 8; bit++) {
		uint8_t copy[256];

		memcpy(copy, buf, n);
		copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		parse(copy, n, CFI_EH_FRAME, &c, &st);
	}

	/* Huge length: stops, nothing read past the end. */
	memset(junk, 0, sizeof(junk));
	memcpy(junk, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 12);
	assert_int_equal(parse(junk, 64, CFI_EH_FRAME, &c, &st), -EBADMSG);
	memcpy(junk, "\xf0\xff\xff\xff", 4);
	assert_int_equal(parse(junk, 64, CFI_EH_FRAME, &c, &st), -EBADMSG);

	/* An FDE whose CIE pointer points at itself (an FDE, not a CIE), and
	 * one pointing before the section. */
	n = build_cfi(buf, simple, sizeof(simple));
	buf[24 + 4] = 0; /* FDE's CIE pointer = 0 -> itself: id 0 means CIE */
	parse(buf, n, CFI_EH_FRAME, &c, &st);
	n = build_cfi(buf, simple, sizeof(simple));
	buf[24 + 4] = 0xf0;
	buf[24 + 5] = 0xff;
	assert_int_equal(parse(buf, n, CFI_EH_FRAME, &c, &st), -EBADMSG);
	/* Points at the FDE's own header inside itself. */
	n = build_cfi(buf, simple, sizeof(simple));
	buf[24 + 4] = 4;
	assert_int_equal(parse(buf, n, CFI_EH_FRAME, &c, &st), -EBADMSG);

	/* Deep remember_state: 1000 of them -> the FDE's rest UNSUPPORTED. */
	{
		uint8_t insns[1200];

		memset(insns, 0x0a, 1000);
		insns[1000] = 0x41;
		n = build_cfi(buf, insns, 1001);
		assert_int_equal(parse(buf, n, CFI_EH_FRAME, &c, &st), 0);
		assert_true(st.unsupported_rows >= 1);
		/* restore_state without remember */
		memset(insns, 0x0b, 10);
		n = build_cfi(buf, insns, 10);
		assert_int_equal(parse(buf, n, CFI_EH_FRAME, &c, &st), 0);
		assert_true(st.unsupported_rows >= 1);
		/* huge advances are clamped to the FDE */
		memcpy(insns, "\x04\xff\xff\xff\xff\x04\xff\xff\xff\xff", 10);
		n = build_cfi(buf, insns, 10);
		assert_int_equal(parse(buf, n, CFI_EH_FRAME, &c, &st), 0);
		assert_int_equal(c.last_end, 0x20100);
		/* an unterminated LEB128 */
		memset(insns, 0x80, 200);
		insns[0] = 0x0e;
		n = build_cfi(buf, insns, 200);
		assert_int_equal(parse(buf, n, CFI_EH_FRAME, &c, &st), 0);
	}

	/* Random garbage, both kinds. */
	srand(12345);
	for (int round = 0; round < 2000; round++) {
		size_t len = (size_t)(rand() % (int)sizeof(junk));

		for (size_t i = 0; i < len; i++)
			junk[i] = (uint8_t)rand();
		if (round % 3 == 0 && len > 8)
			memset(junk + 4, 0, 4); /* make the first entry a CIE */
		parse(junk, len, round & 1 ? CFI_DEBUG_FRAME : CFI_EH_FRAME, &c, &st);
	}
	(void)state;
}

/* A truncated or garbage file through the whole step loop. */
static void test_hostile_files(void **state)
{
	struct compiled c;
	struct file_image *img;
	struct unwind_table *t = NULL;
	struct elf_need need;
	const char *reason = NULL;
	uint8_t *data;
	uint64_t size;
	int r = -EAGAIN;

	if (compile_file(XZ, &c) != 0)
		skip();
	data = c.whole;
	size = c.size;
	/* Zero the middle of .eh_frame-sized areas: flip bytes every 97. */
	for (int variant = 0; variant < 3; variant++) {
		uint8_t *copy = malloc(size);

		memcpy(copy, data, size);
		for (uint64_t i = 64 + (uint64_t)variant * 31; i < size; i += 97)
			copy[i] ^= 0x5a;
		img = file_image_new(size);
		for (int k = 0; k < 32; k++) {
			r = unwind_analysis_step(img, NULL, &need, &t, NULL, &reason);
			if (r != -EAGAIN)
				break;
			for (size_t i = 0; i < need.n; i++)
				file_image_put(img, need.ranges[i].offset, copy + need.ranges[i].offset,
					       need.ranges[i].length);
		}
		assert_true(r == 0 || r == -EBADMSG);
		unwind_table_free(t);
		t = NULL;
		file_image_free(img);
		free(copy);
	}
	/* Not ELF at all. */
	img = file_image_new(4096);
	r = unwind_analysis_step(img, NULL, &need, &t, NULL, &reason);
	assert_int_equal(r, -EAGAIN);
	file_image_put(img, 0, data + 4096, 4096);
	r = unwind_analysis_step(img, NULL, &need, &t, NULL, &reason);
	assert_int_equal(r, -EBADMSG);
	file_image_free(img);
	compiled_done(&c);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_builder),
		cmocka_unit_test(test_blob),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_ldso),
		cmocka_unit_test(test_python),
		cmocka_unit_test(test_xz),
		cmocka_unit_test(test_sort),
		cmocka_unit_test(test_compiled_program),
		cmocka_unit_test(test_go119),
		cmocka_unit_test(test_go123),
		cmocka_unit_test(test_real_blob),
		cmocka_unit_test(test_hostile_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
