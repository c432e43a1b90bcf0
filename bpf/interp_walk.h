/* interp_walk.h - runs the interpreter walker of a sampled process
 * (docs/interpreters.md): looks up the tgid's interp_procs entry (or its
 * parent's, for a fork's child not bound yet) and calls the walker of the
 * entry's kind, which records its frames after the native ones and
 * returns how many. One walker header per runtime; a new one adds a case.
 * Included by sample.bpf.c after its maps and count_err().
 */
#pragma once

#include "cpython.h"
#include "cpython_walk.h"
#include "ruby.h"
#include "ruby_walk.h"
#include "perl5.h"
#include "perl_walk.h"
#include "php.h"
#include "php_walk.h"

/* Returns the frames recorded at rec->frames[at..] (rec->interp_kind
 * set), or -1 when tgid has no interpreter config. */
static __always_inline int interp_walk(struct sonde_sample *rec, __u32 tgid, __u32 tid, __u32 at)
{
	const struct sonde_interp_proc *p = bpf_map_lookup_elem(&interp_procs, &tgid);
	__u32 config_tgid;

	if (!p) {
		/* A fork's child not bound yet: its parent's runtime, at the
		 * same address in the copied address space. */
		config_tgid = lpm_tgid(tgid);
		if (config_tgid != tgid)
			p = bpf_map_lookup_elem(&interp_procs, &config_tgid);
	}
	if (!p)
		return -1;
	rec->interp_kind = (__u8)p->kind;
	switch (p->kind) {
	case SONDE_INTERP_CPYTHON:
		return cpython_walk(rec, (const struct sonde_cpython_proc *)p, tgid, tid, at);
	case SONDE_INTERP_RUBY:
		return ruby_walk(rec, (const struct sonde_ruby_proc *)p, tgid, tid, at);
	case SONDE_INTERP_PERL:
		return perl_walk(rec, (const struct sonde_perl_proc *)p, tgid, tid, at);
	case SONDE_INTERP_PHP:
		return php_walk(rec, (const struct sonde_php_proc *)p, tgid, tid, at);
	default:
		return 0;
	}
}
