/* log.h - one logging macro family for every sonde program.
 *
 * Messages go to stderr as "PROGRAM: LEVEL: function: text". The level is
 * checked before formatting. Library-style modules log only at debug level;
 * their callers log once. Target-supplied strings must be truncated by the
 * caller ("%.100s").
 */
#pragma once

#include <stdarg.h>

enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN = 1,
	LOG_LEVEL_INFO = 2,
	LOG_LEVEL_DEBUG = 3,
};

extern enum log_level log_max_level;

/* program: borrowed, must be static (e.g. "sonde-sensor"). */
void log_init(const char *program, enum log_level level);
void log_emit(enum log_level level, const char *func, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define log_at(level, err, ...)                                          \
	do {                                                             \
		if ((level) <= log_max_level)                            \
			log_emit((level), __func__, (err), __VA_ARGS__); \
	} while (0)

/* err: a negative (or positive) errno whose text is appended, or 0. */
#define log_error_errno(err, ...) log_at(LOG_LEVEL_ERROR, (err), __VA_ARGS__)
#define log_warn_errno(err, ...) log_at(LOG_LEVEL_WARN, (err), __VA_ARGS__)
#define log_error(...) log_at(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_warn(...) log_at(LOG_LEVEL_WARN, 0, __VA_ARGS__)
#define log_info(...) log_at(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_at(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
