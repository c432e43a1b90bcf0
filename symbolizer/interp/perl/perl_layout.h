/* perl_layout.h - the struct offsets the BPF Perl walker needs, per Perl
 * version (docs/interpreters.md, "Perl"), packed as bpf/perl5.h's
 * struct sonde_perl_offsets; and the version of a perl file from its
 * dynamic symbols. Only threaded (MULTIPLICITY) builds: the walker starts
 * at PL_curinterp, which only they have.
 */
#pragma once

#include <stdint.h>

#include "file_image.h"
#include "perl5.h"

/* 5.36's offsets (checked against the installed build's CORE headers by
 * tests/unit/perl-offsets.c), or NULL for a version without a layout. */
const struct sonde_perl_offsets *perl_layout_for(unsigned major, unsigned minor);

/* The Perl version of img (ELF headers and .dynsym/.dynstr present), from
 * which version-specific functions it exports: 5.36 has Perl_pp_is_bool
 * (new in 5.36) and not Perl_pp_padsv_store (new in 5.38). Returns 0 with
 * *major, *minor (5.36), -EPROTONOSUPPORT (a perl, but older or newer;
 * *minor 0) or another interp_loader_find_root() error. */
int perl_layout_version(const struct file_image *img, unsigned *major, unsigned *minor,
			const char **reason);
