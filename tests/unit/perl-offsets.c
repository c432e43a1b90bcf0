/* perl-offsets.c - the Perl 5.36 layout the walker uses
 * (symbolizer/interp/perl/perl_layout.c) against the installed perl's own
 * CORE headers: every offset is offsetof() of the field it names, compiled
 * with the build's ccopts (ExtUtils::Embed), so a table that drifts from
 * the headers fails here. Exits 77 (skipped) when the installed perl is
 * not 5.36 or unthreaded. Not cmocka: perl.h and cmocka.h do not mix. */
#include <EXTERN.h>
#include <perl.h>
#include <stdio.h>

#include "perl_layout.h"

static int failed;

static void check(const char *name, unsigned got, unsigned want)
{
	if (got == want)
		return;
	fprintf(stderr, "%s: the layout says %u, the headers %u\n", name, got, want);
	failed = 1;
}

#define CHECK(field, want) check(#field, l->field, (unsigned)(want))

int main(void)
{
	const struct sonde_perl_offsets *l;

#if PERL_REVISION != 5 || PERL_VERSION != 36 || !defined(MULTIPLICITY) || !defined(USE_ITHREADS)
	puts("the installed perl is not a threaded 5.36: skipped");
	return 77;
#endif
	l = perl_layout_for(PERL_REVISION, PERL_VERSION);
	if (!l) {
		fputs("no layout for 5.36\n", stderr);
		return 1;
	}
	CHECK(major, PERL_REVISION);
	CHECK(minor, PERL_VERSION);
	CHECK(interp_curcop, offsetof(struct interpreter, Icurcop));
	CHECK(interp_curstackinfo, offsetof(struct interpreter, Icurstackinfo));
	CHECK(interp_op, offsetof(struct interpreter, Iop));
	CHECK(si_cxstack, offsetof(struct stackinfo, si_cxstack));
	CHECK(si_prev, offsetof(struct stackinfo, si_prev));
	CHECK(si_cxix, offsetof(struct stackinfo, si_cxix));
	CHECK(cx_size, sizeof(PERL_CONTEXT));
	CHECK(cx_typeoff, offsetof(PERL_CONTEXT, cx_u.cx_blk.blku_type));
	CHECK(cx_typeoff, offsetof(PERL_CONTEXT, cx_type));
	CHECK(cx_oldcop, offsetof(PERL_CONTEXT, cx_u.cx_blk.blku_oldcop));
	CHECK(cx_sub_cv, offsetof(PERL_CONTEXT, cx_u.cx_blk.blk_u.blku_sub.cv));
	CHECK(cx_sub_cv, offsetof(PERL_CONTEXT, cx_u.cx_blk.blk_u.blku_format.cv));
	CHECK(cx_retop, offsetof(PERL_CONTEXT, cx_u.cx_blk.blk_u.blku_sub.retop));
	CHECK(cx_retop, offsetof(PERL_CONTEXT, cx_u.cx_blk.blk_u.blku_format.retop));
	CHECK(cx_retop, offsetof(PERL_CONTEXT, cx_u.cx_blk.blk_u.blku_eval.retop));
	CHECK(cop_line, offsetof(COP, cop_line));
	CHECK(cop_file, offsetof(COP, cop_file));
	CHECK(sv_any, offsetof(SV, sv_any));
	CHECK(xcv_stash, offsetof(XPVCV, xcv_stash));
	CHECK(xcv_gv, offsetof(XPVCV, xcv_gv_u.xcv_gv));
	CHECK(xcv_gv, offsetof(XPVCV, xcv_gv_u.xcv_hek));
	CHECK(xcv_file, offsetof(XPVCV, xcv_file));
	CHECK(xcv_flags, offsetof(XPVCV, xcv_flags));
	CHECK(xgv_namehek, offsetof(XPVGV, xiv_u.xivu_namehek));
	CHECK(xgv_stash, offsetof(XPVGV, xnv_u.xgv_stash));
	CHECK(hv_aux_name,
	      offsetof(struct xpvhv_with_aux, xhv_aux) + offsetof(struct xpvhv_aux, xhv_name_u));
	CHECK(hv_aux_name_count, offsetof(struct xpvhv_with_aux, xhv_aux) +
					 offsetof(struct xpvhv_aux, xhv_name_count));
	CHECK(hek_len, offsetof(HEK, hek_len));
	CHECK(hek_key, offsetof(HEK, hek_key));
	CHECK(cvf_named, CVf_NAMED);
	check("CXt_SUB", SONDE_PERL_CXT_SUB, CXt_SUB);
	check("CXt_FORMAT", SONDE_PERL_CXT_FORMAT, CXt_FORMAT);
	check("CXt_EVAL", SONDE_PERL_CXT_EVAL, CXt_EVAL);
	check("CXTYPEMASK", SONDE_PERL_CXTYPEMASK, CXTYPEMASK);
	check("sizeof(cop_line)", 4, sizeof(((COP *)0)->cop_line));
	check("sizeof(si_cxix)", 4, sizeof(((struct stackinfo *)0)->si_cxix));
	check("sizeof(xcv_flags)", 4, sizeof(((XPVCV *)0)->xcv_flags));
	check("sizeof(xhv_name_count)", 4, sizeof(((struct xpvhv_aux *)0)->xhv_name_count));
	if (!failed)
		puts("the 5.36 layout matches the installed perl's headers");
	return failed;
}
