/* perl_layout.c - Perl struct offsets and versions (perl_layout.h). */
#include <errno.h>
#include <stddef.h>

#include "interp_loader.h"
#include "perl_layout.h"

/* Perl 5.36 (Debian 12's 5.36.0, x86_64-linux-gnu-thread-multi): from
 * intrpvar.h, cop.h, cv.h, gv.h, hv.h and sv.h. */
static const struct sonde_perl_offsets layout_536 = {
	.major = 5,
	.minor = 36,
	.interp_curcop = 208,
	.interp_curstackinfo = 224,
	.si_cxstack = 8,
	.si_prev = 16,
	.si_cxix = 32,
	.cx_size = 104,
	.cx_typeoff = 0,
	.cx_oldcop = 16,
	.cx_sub_cv = 72,
	.cx_retop = 48,
	.cop_line = 36,
	.cop_file = 48,
	.sv_any = 0,
	.xcv_stash = 32,
	.xcv_gv = 56,
	.xcv_file = 64,
	.xcv_flags = 92,
	.xgv_namehek = 32,
	.xgv_stash = 40,
	.hv_aux_name = 32,
	.hv_aux_name_count = 32 + 28,
	.hek_len = 4,
	.hek_key = 8,
	.cvf_named = 0x8000,
	.interp_op = 8,
};

const struct sonde_perl_offsets *perl_layout_for(unsigned major, unsigned minor)
{
	return major == 5 && minor == 36 ? &layout_536 : NULL;
}

static int has_symbol(const struct file_image *img, const char *name, const char **reason)
{
	uint64_t off;
	int r = interp_loader_find_root(img, name, NULL, &off, reason);

	if (r == 0)
		return 1;
	return r == -ENOENT ? 0 : r;
}

int perl_layout_version(const struct file_image *img, unsigned *major, unsigned *minor,
			const char **reason)
{
	int has536 = has_symbol(img, "Perl_pp_is_bool", reason), has538;

	if (has536 < 0)
		return has536;
	has538 = has_symbol(img, "Perl_pp_padsv_store", reason);
	if (has538 < 0)
		return has538;
	*major = 5;
	*minor = has536 && !has538 ? 36 : 0;
	if (!*minor) {
		*reason = "Perl version without a layout (only 5.36)";
		return -EPROTONOSUPPORT;
	}
	*reason = NULL;
	return 0;
}
