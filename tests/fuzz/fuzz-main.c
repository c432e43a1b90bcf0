/* fuzz-main.c - the replay main() of every fuzz target (none carries its
 * own): runs LLVMFuzzerTestOneInput once per file named on the
 * command line, so meson's unit suite replays the checked-in corpus and a
 * crash found by libFuzzer reproduces without clang. Not linked into the
 * libFuzzer builds (libFuzzer brings its own main).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Larger than any target's input cap, smaller than anything harmful. */
#define REPLAY_MAX_FILE (16u << 20)

static int replay(const char *path)
{
	FILE *f = fopen(path, "rbe");
	uint8_t *buf = NULL;
	size_t len = 0;
	long size;
	int r = 1;

	if (!f) {
		perror(path);
		return 1;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0 ||
	    (unsigned long)size > REPLAY_MAX_FILE) {
		fprintf(stderr, "%s: cannot size it, or over %u bytes\n", path, REPLAY_MAX_FILE);
		goto cleanup;
	}
	buf = malloc(size ? (size_t)size : 1);
	if (!buf)
		goto cleanup;
	len = fread(buf, 1, (size_t)size, f);
	if (len != (size_t)size) {
		fprintf(stderr, "%s: short read\n", path);
		goto cleanup;
	}
	LLVMFuzzerTestOneInput(buf, len);
	r = 0;
cleanup:
	free(buf);
	fclose(f);
	return r;
}

int main(int argc, char **argv)
{
	int failed = 0;

	for (int i = 1; i < argc; i++)
		failed |= replay(argv[i]);
	printf("replayed %d inputs\n", argc - 1);
	return failed;
}
