/* interp_kinds.h - the one list of interpreter kinds for user space: per
 * kind its names (logs, the exports' frame type), the BPF map in which
 * its walker remembers what it already sent (cleared for a new
 * symbolizer session), and the limits the sensor checks its configs
 * against (sensor/validate.c). A new runtime adds its walker header and
 * one case below (docs/interpreters.md).
 */
#pragma once

#include <stddef.h>

#include "cpython.h"
#include "hotspot.h"
#include "interp.h"
#include "ruby.h"
#include "perl5.h"
#include "php.h"
#include "v8.h"

struct sonde_interp_kind_info {
	const char *name;     /* "cpython": OTLP's profile.frame.type value */
	const char *records;  /* what its records are, for the sensor's log */
	const char *seen_map; /* BPF map of records already sent; NULL: none */
	const struct sonde_interp_limits *(*limits)(void);
	/* Words per frame in a sample (0 means 1): a JIT kind's frames are
	 * SONDE_INTERP_JIT_WORDS each, sent as one InterpFrame. */
	__u32 frame_words;
};

/* What user space knows of kind, or NULL for a kind this build has no
 * walker for. Static. */
static inline const struct sonde_interp_kind_info *sonde_interp_kind_info(__u32 kind)
{
	static const struct sonde_interp_kind_info cpython = {
		"cpython", "code object records", "cpython_codes", sonde_cpython_limits
	};
	static const struct sonde_interp_kind_info php = {
		"php", "function records", "php_funcs", sonde_php_limits
	};

	static const struct sonde_interp_kind_info hotspot = {
		"jvm", "Java method records", "hotspot_methods", sonde_hotspot_limits,
		SONDE_INTERP_JIT_WORDS
	};
	static const struct sonde_interp_kind_info ruby = {
		"ruby", "iseq and cfunc records", "ruby_seen", sonde_ruby_limits
	};
	static const struct sonde_interp_kind_info perl = {
		"perl", "sub and COP records", "perl_seen", sonde_perl_limits
	};
	static const struct sonde_interp_kind_info v8 = {
		"v8js", "SharedFunctionInfo records", "v8_sfis", sonde_v8_limits,
		SONDE_INTERP_JIT_WORDS
	};

	switch (kind) {
	case SONDE_INTERP_CPYTHON:
		return &cpython;
	case SONDE_INTERP_HOTSPOT:
		return &hotspot;
	case SONDE_INTERP_RUBY:
		return &ruby;
	case SONDE_INTERP_PERL:
		return &perl;
	case SONDE_INTERP_PHP:
		return &php;
	case SONDE_INTERP_V8:
		return &v8;
	default:
		return NULL;
	}
}

/* The limits of kind, or NULL for an unknown kind. */
static inline const struct sonde_interp_limits *sonde_interp_limits_of(__u32 kind)
{
	const struct sonde_interp_kind_info *k = sonde_interp_kind_info(kind);

	return k ? k->limits() : NULL;
}

/* Words per frame of kind (1 for an unknown kind). */
static inline __u32 sonde_interp_frame_words(__u32 kind)
{
	const struct sonde_interp_kind_info *k = sonde_interp_kind_info(kind);

	return k && k->frame_words ? k->frame_words : 1;
}

/* A kind's short name ("cpython"), or NULL for an unknown kind. */
static inline const char *sonde_interp_kind_name(__u32 kind)
{
	const struct sonde_interp_kind_info *k = sonde_interp_kind_info(kind);

	return k ? k->name : NULL;
}
