/* perl_ops.h - Perl 5.36 as an entry of the interpreter ops table
 * (interp_ops.h): files named perl, perl5.X.Y or libperl.so* whose
 * dynamic symbols include PL_curinterp (threaded builds, as Debian's),
 * the walker's offsets (perl_layout.h, bpf/perl5.h), sub and COP records
 * (perl_meta.h) and frame words (SONDE_PERL_FRAME; words[1], when
 * present, a record checksum to match). Runs of Perl frames replace
 * Perl_runops_standard frames: one per C-level run of the op loop
 * (perl_run, call_sv, MULTICALL), not one per sub, as Perl sub calls do
 * not recurse in C.
 */
#pragma once

#include "interp_ops.h"

extern const struct interp_ops perl_ops;
