/* output.c - how profiles look on a terminal and in files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_parse_profile_type(const char *arg, void *target)
{
	static const char *const names[] = { "cpu", "off-cpu", "memory" };

	for (uint32_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(arg, names[i])) {
			*(uint32_t *)target = i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *cli_profile_type_name(uint32_t profile)
{
	static const char *const names[] = { "cpu", "off-cpu", "memory" };

	return profile < 3 ? names[profile] : "unknown";
}

/* What a profile's values count, for headings: the column's name and
 * the total's unit. */
static void profile_units(uint32_t profile, const char **ret_column, const char **ret_total)
{
	static const char *const columns[] = { "SAMPLES", "NS", "BYTES" };
	static const char *const totals[] = { "samples", "ns off the CPU", "bytes of memory growth" };

	*ret_column = columns[profile < 3 ? profile : 0];
	*ret_total = totals[profile < 3 ? profile : 0];
}

void cli_print_top(FILE *out, const Sonde__V1__TopResponse *top, unsigned limit, uint32_t profile)
{
	double total = top->total_samples ? (double)top->total_samples : 1.0;
	bool by_node = false;
	const char *column, *unit;

	profile_units(profile, &column, &unit);
	fprintf(out, "%llu %s\n", (unsigned long long)top->total_samples, unit);
	if (!top->n_entries) {
		fprintf(out, "(no samples: nothing ran on a profiled CPU, or the filter matched nothing)\n");
		return;
	}
	for (size_t i = 1; i < top->n_entries && !by_node; i++)
		by_node = strcmp(top->entries[i]->node, top->entries[0]->node) != 0;
	if (by_node)
		fprintf(out, "%7s %7s %9s  %-20s %s\n", "SELF%", "TOTAL%", column, "NODE", "FUNCTION");
	else
		fprintf(out, "%7s %7s %9s  %s\n", "SELF%", "TOTAL%", column, "FUNCTION");
	for (size_t i = 0; i < top->n_entries && i < limit; i++) {
		const Sonde__V1__TopEntry *e = top->entries[i];
		if (by_node)
			fprintf(out, "%6.2f%% %6.2f%% %9llu  %-20.100s %.200s\n",
				100.0 * (double)e->self / total, 100.0 * (double)e->total / total,
				(unsigned long long)e->self, e->node, e->function);
		else
			fprintf(out, "%6.2f%% %6.2f%% %9llu  %.200s\n", 100.0 * (double)e->self / total,
				100.0 * (double)e->total / total, (unsigned long long)e->self,
				e->function);
	}
}

/* A frame name in folded output may not contain ';' (the separator) or a
 * newline; the symbolizer already replaces them, this is the last guard. */
static void put_frame(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc(*s == ';' ? ':' : (*s == '\n' || *s == '\r') ? ' ' : *s, out);
}

int cli_write_folded(FILE *out, const Sonde__V1__FoldedResponse *folded)
{
	bool by_node = false;

	for (size_t i = 1; i < folded->n_stacks && !by_node; i++)
		by_node = strcmp(folded->stacks[i]->node, folded->stacks[0]->node) != 0;
	for (size_t i = 0; i < folded->n_stacks; i++) {
		const Sonde__V1__FoldedStack *st = folded->stacks[i];
		bool sep = false;

		/* Several nodes: each its own root, so none merge. */
		if (by_node) {
			put_frame(out, *st->node ? st->node : "[unknown node]");
			sep = true;
		}
		/* The process name is the root frame, as perf's folded output has it. */
		if (st->comm && *st->comm) {
			if (sep)
				fputc(';', out);
			put_frame(out, st->comm);
			sep = true;
		}
		for (size_t f = 0; f < st->n_frames; f++) {
			if (sep)
				fputc(';', out);
			put_frame(out, st->frames[f]);
			sep = true;
		}
		if (!sep)
			continue;
		fprintf(out, " %llu\n", (unsigned long long)st->count);
	}
	return ferror(out) ? -EIO : 0;
}

int cli_write_file_atomic(const char *path, int (*fill)(FILE *f, const void *ctx),
			  const void *ctx)
{
	char *tmp = NULL;
	FILE *f = NULL;
	int err;

	if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0) {
		tmp = NULL;
		err = -ENOMEM;
		goto cleanup;
	}
	f = fopen(tmp, "we");
	if (!f) {
		err = -errno;
		goto cleanup;
	}
	err = fill(f, ctx);
	if (fclose(f) != 0 && !err)
		err = -errno;
	f = NULL;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
cleanup:
	if (f)
		fclose(f);
	if (tmp) {
		if (err)
			unlink(tmp);
		free(tmp);
	}
	return err;
}

static int fill_folded(FILE *f, const void *folded)
{
	return cli_write_folded(f, folded);
}

int cli_write_folded_file(const char *path, const Sonde__V1__FoldedResponse *folded)
{
	return cli_write_file_atomic(path, fill_folded, folded);
}
