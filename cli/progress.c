/* progress.c - the one-line progress of a long `sonde record` on a
 * terminal: elapsed time, samples stored and lost, redrawn in place once
 * a second. Not a terminal (a pipe, a log, CI): nothing is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "command.h"

#define PROGRESS_EVERY_MS 1000

struct progress {
	bool on;
	bool drawn;
	uint64_t start_ms, next_ms;
};

static struct progress pg;

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void cli_progress_start(void)
{
	pg.on = isatty(STDERR_FILENO) && getenv("TERM") && strcmp(getenv("TERM"), "dumb") != 0;
	pg.drawn = false;
	pg.start_ms = mono_ms();
	pg.next_ms = pg.start_ms + PROGRESS_EVERY_MS;
}

void cli_progress_tick(const char *address)
{
	Sonde__V1__StatusResponse *st = NULL;
	uint64_t now = mono_ms(), secs;

	if (!pg.on || now < pg.next_ms)
		return;
	pg.next_ms = now + PROGRESS_EVERY_MS;
	if (command_status_quiet(address, 500, false, &st) == 0) {
		secs = (now - pg.start_ms) / 1000;
		/* \r and erase-line: the line is redrawn where it is. */
		fprintf(stderr, "\r\033[Ksonde record: %llu:%02llu  %llu samples  %llu lost",
			(unsigned long long)(secs / 60), (unsigned long long)(secs % 60),
			(unsigned long long)st->samples_received,
			(unsigned long long)(st->samples_lost + st->samples_dropped));
		fflush(stderr);
		pg.drawn = true;
		rpc_message_free(&st->base);
	}
}

void cli_progress_end(void)
{
	if (pg.drawn)
		fputs("\r\033[K", stderr);
	pg.drawn = false;
	pg.on = false;
}
