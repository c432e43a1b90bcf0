/* go-plan-dump.c - prints the probe plan of a Go executable
 * (symbolizer/probes/go_plan.c) as JSON, for test_go_plan.py to compare
 * with go tool objdump and the DWARF as readelf shows them. A tool, not a
 * test. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "go_plan.h"

int main(int argc, char **argv)
{
	struct go_plan p;
	struct stat st;
	void *data;
	int fd, r;

	if (argc != 2) {
		fprintf(stderr, "usage: go-plan-dump FILE\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
		perror(argv[1]);
		return 1;
	}
	data = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (data == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	r = go_plan_build(data, (size_t)st.st_size, &p);
	if (r == -ENOENT) {
		printf("{\"go\":false}\n");
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "go_plan_build: %d\n", r);
		return 1;
	}
	printf("{\"go\":true,\"go_version\":\"%s\",\"error\":%s%s%s,\"offsets_from\":\"%s\",\"probes\":[",
	       p.go_version, p.error ? "\"" : "", p.error ? p.error : "null", p.error ? "\"" : "",
	       p.offsets_from ? p.offsets_from : "");
	for (size_t i = 0; i < p.n_probes; i++) {
		const struct go_plan_probe *q = &p.probes[i];

		printf("%s{\"probe\":\"%s\",\"error\":%s%s%s,\"consts\":{", i ? "," : "", q->probe,
		       q->error ? "\"" : "", q->error ? q->error : "null", q->error ? "\"" : "");
		for (size_t k = 0; k < q->n_consts; k++)
			printf("%s\"%s\":%llu", k ? "," : "", q->consts[k].name,
			       (unsigned long long)q->consts[k].value);
		printf("},\"attaches\":[");
		for (size_t k = 0; k < q->n_attach; k++)
			printf("%s{\"program\":\"%s\",\"file_offset\":%llu,\"symbol\":\"%s\"}", k ? "," : "",
			       q->attach[k].program, (unsigned long long)q->attach[k].file_offset,
			       q->attach[k].symbol);
		printf("]}");
	}
	printf("]}\n");
	munmap(data, (size_t)st.st_size);
	close(fd);
	return 0;
}
