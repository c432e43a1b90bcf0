/* interp_walk.h - runs the interpreter walkers of a sampled process
 * (docs/interpreters.md). At the sample's start interp_jit_begin() looks
 * the tgid's interp_procs entry up once (or its parent's, for a fork's
 * child not bound yet) and keeps a copy in the scratch; for a JIT kind it
 * also lets the kind fill the walk's code ranges. During the native walk,
 * interp_jit_step() hands the frames in those ranges (or without an
 * unwind table, when the kind claims them) to the kind's step. After it,
 * interp_walk() calls the walker of the entry's kind, which records its
 * frames after the native ones (a JIT kind: the frames its steps
 * buffered). One walker header per runtime; a new one adds its cases.
 * Included by sample.bpf.c after its maps, scratch and count_err().
 */
#pragma once

#include "interp_read.h"

#include "cpython.h"
#include "cpython_walk.h"
#include "hotspot.h"
#include "hotspot_walk.h"
#include "ruby.h"
#include "ruby_walk.h"
#include "perl5.h"
#include "perl_walk.h"
#include "php.h"
#include "php_walk.h"

/* Whether pc lies in one of the walk's JIT ranges. */
static __always_inline bool interp_jit_in_range(const struct sonde_interp_jit *j, __u64 pc)
{
	for (__u32 i = 0; i < SONDE_INTERP_JIT_RANGES; i++)
		if (i < j->n_ranges && pc >= j->lo[i] && pc < j->hi[i])
			return true;
	return false;
}

/* Buffers one JIT frame for native frame `native` (its index among the
 * user frames): word0's kind bits, word1. False when the buffer is full. */
static __always_inline bool interp_jit_push(struct sonde_interp_jit *j, __u32 native, __u64 word0,
					    __u64 word1)
{
	__u32 at = j->n;

	if (at + SONDE_INTERP_JIT_WORDS > SONDE_INTERP_JIT_MAX_FRAMES * SONDE_INTERP_JIT_WORDS)
		return false;
	j->words[at & (SONDE_INTERP_JIT_MAX_FRAMES * SONDE_INTERP_JIT_WORDS - 1)] =
		SONDE_INTERP_JIT_WORD0(native + 1, word0);
	j->words[(at + 1) & (SONDE_INTERP_JIT_MAX_FRAMES * SONDE_INTERP_JIT_WORDS - 1)] = word1;
	j->n = at + SONDE_INTERP_JIT_WORDS;
	return true;
}

/* The JIT kinds' walkers use interp_jit_push(). */
#include "v8.h"
#include "v8_walk.h"

/* Copies tgid's interp_procs entry into s->proc (kind 0: none) and sets
 * up s->jit for a JIT kind. */
static __always_inline void interp_jit_begin(struct unwind_scratch *s, __u32 tgid, __u16 slot)
{
	const struct sonde_interp_proc *p = bpf_map_lookup_elem(&interp_procs, &tgid);
	__u32 config_tgid;

	s->jit.kind = 0;
	s->jit.n = 0;
	s->jit.anon = 0;
	s->jit.slot = slot;
	s->jit.n_ranges = 0;
	if (!p) {
		/* A fork's child not bound yet: its parent's runtime, at the
		 * same address in the copied address space. */
		config_tgid = lpm_tgid(tgid);
		if (config_tgid != tgid)
			p = bpf_map_lookup_elem(&interp_procs, &config_tgid);
	}
	if (!p) {
		s->proc.kind = SONDE_INTERP_NONE;
		return;
	}
	s->proc = *p;
	switch (p->kind) {
	case SONDE_INTERP_HOTSPOT:
		hotspot_jit_begin(&s->jit, &s->proc, tgid);
		break;
	case SONDE_INTERP_V8:
		v8_jit_begin(s);
		break;
	default:
		break;
	}
}

/* The frame at st (already recorded as native frame `native`) when the
 * walk has a JIT kind: no_table says the native walk found no unwind
 * table for it. Returns -1 when the kind does not claim it (the usual
 * rule applies), else what unwind_one returns: 1 to stop, 0 to go on
 * with st set to the caller. A global function, verified once: inline,
 * its range loop multiplied the walk callback's states. */
__noinline int interp_jit_step(struct unwind_scratch *s, struct user_walk *st, __u32 native,
			       __u32 no_table)
{
	int r;

	if (!s || !st)
		return -1;
	if (no_table ? !s->jit.anon : !interp_jit_in_range(&s->jit, st->pc))
		return -1;
	switch (s->jit.kind) {
	case SONDE_INTERP_HOTSPOT:
		r = hotspot_jit_step(&s->jit, &s->proc, st, native);
		break;
	case SONDE_INTERP_V8:
		r = v8_jit_step(s, st, native);
		break;
	default:
		return -1;
	}
	/* (a global function's result is any number to the verifier) */
	return r < 0 ? -1 : r ? 1 : 0;
}

/* Appends the JIT frames the walk buffered at s->rec.frames[at..];
 * returns how many words. A global function: verified once, not in the
 * states of every walker the sample program holds. */
__noinline int interp_jit_finish(struct unwind_scratch *s, __u32 at)
{
	__u32 n = 0;

	if (!s)
		return 0;
	for (__u32 i = 0; i < SONDE_INTERP_JIT_MAX_FRAMES * SONDE_INTERP_JIT_WORDS; i++) {
		__u32 idx = at + i;

		if (i >= s->jit.n || idx >= SONDE_MAX_KERNEL_FRAMES + SONDE_MAX_USER_FRAMES)
			break;
		/* A bound the verifier follows (unwind_scratch.interp_slack),
		 * on the register it is given (the barrier keeps the compiler
		 * from dropping the mask after the check above). */
		asm volatile("" : "+r"(idx));
		s->rec.frames[idx & 0xff] = s->jit.words[i & (SONDE_INTERP_JIT_MAX_FRAMES *
								SONDE_INTERP_JIT_WORDS - 1)];
		n++;
	}
	/* Whole frames only. */
	return n - n % SONDE_INTERP_JIT_WORDS;
}

/* The frames of a walker that is not a JIT kind's, recorded at
 * s->rec.frames[at..]: how many. A global function: verified once, not
 * in each program that samples. */
__noinline int interp_walk_kind(struct unwind_scratch *s, __u32 tgid, __u32 tid, __u32 at)
{
	if (!s)
		return 0;
	switch (s->proc.kind) {
	case SONDE_INTERP_CPYTHON:
		return cpython_walk(s, tgid, tid, at);
	case SONDE_INTERP_RUBY:
		return ruby_walk(s, tgid, tid, at);
	case SONDE_INTERP_PERL:
		return perl_walk(s, tgid, tid, at);
	case SONDE_INTERP_PHP:
		return php_walk(s, tgid, tid, at);
	default:
		return 0;
	}
}

/* Returns the frames (words, for a JIT kind) recorded at s->rec.frames[at..]
 * (rec.interp_kind set), or -1 when the process has no interpreter
 * config. s->proc is interp_jit_begin()'s copy. */
static __always_inline int interp_walk(struct unwind_scratch *s, __u32 tgid, __u32 tid, __u32 at)
{
	const struct sonde_interp_proc *p = &s->proc;

	if (p->kind == SONDE_INTERP_NONE)
		return -1;
	s->rec.interp_kind = (__u8)p->kind;
	if (s->jit.kind) {
		int n = interp_jit_finish(s, at);

		/* (a global function's result is any number to the verifier) */
		return n > 0 && n <= SONDE_INTERP_JIT_MAX_FRAMES * SONDE_INTERP_JIT_WORDS ? n : 0;
	}
	return interp_walk_kind(s, tgid, tid, at);
}
