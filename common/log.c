/* log.c - the logging backend behind log.h.
 *
 * Each message is formatted into one buffer and written with a single
 * write(2), so lines from several threads (ours and gRPC's, see rpc.c) do
 * not interleave. errno is preserved, so a log call never changes what the
 * caller reports next.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

enum log_level log_max_level = LOG_LEVEL_INFO;
static const char *log_program = "sonde";

static const char *const level_names[] = {
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARN] = "warning",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

void log_init(const char *program, enum log_level level)
{
	const char *env = getenv("SONDE_LOG_LEVEL");

	if (program)
		log_program = program;
	log_max_level = level;
	/* $SONDE_LOG_LEVEL lowers or raises the default (sonde record runs
	 * the services at "warning"); an explicit debug level still wins. */
	if (!env || level == LOG_LEVEL_DEBUG)
		return;
	for (int l = LOG_LEVEL_ERROR; l <= LOG_LEVEL_DEBUG; l++)
		if (!strcmp(env, level_names[l]))
			log_max_level = (enum log_level)l;
	if (!strcmp(env, "warn"))
		log_max_level = LOG_LEVEL_WARN;
}

void log_emit(enum log_level level, const char *func, int err, const char *fmt, ...)
{
	/* Long enough for any sane line; longer ones are cut, not split. */
	char buf[2048];
	char errbuf[128];
	const char *lname;
	size_t len = 0;
	int saved_errno = errno;
	va_list ap;
	int n;

	lname = (level >= LOG_LEVEL_ERROR && level <= LOG_LEVEL_DEBUG) ? level_names[level] : "?";
	n = snprintf(buf, sizeof(buf), "%s: %s: %s: ", log_program, lname, func ? func : "?");
	if (n > 0)
		len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;

	va_start(ap, fmt);
	n = vsnprintf(buf + len, sizeof(buf) - len, fmt, ap);
	va_end(ap);
	if (n > 0)
		len += (size_t)n < sizeof(buf) - len ? (size_t)n : sizeof(buf) - len - 1;

	if (err != 0 && len < sizeof(buf) - 1) {
		/* GNU strerror_r: returns a pointer, maybe not to errbuf. */
		const char *text = strerror_r(err < 0 ? -err : err, errbuf, sizeof(errbuf));

		n = snprintf(buf + len, sizeof(buf) - len, ": %s", text);
		if (n > 0)
			len += (size_t)n < sizeof(buf) - len ? (size_t)n : sizeof(buf) - len - 1;
	}

	/* Room for the newline is always kept: len <= sizeof(buf) - 1. */
	buf[len++] = '\n';
	for (size_t off = 0; off < len;) {
		ssize_t w = write(STDERR_FILENO, buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	errno = saved_errno;
}
