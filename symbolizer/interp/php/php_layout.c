/* php_layout.c - Zend structure offsets per PHP version (php_layout.h). */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "php_layout.h"

/* PHP 8.2, 64-bit, non-ZTS: each offset checked with offsetof() against
 * php8.2-dev's headers (Debian 12's 8.2.36), and the registers of the
 * hybrid VM (r14 execute_data, r15 opline) in the disassembly of Debian's
 * execute_ex (tests/integration/test_php_frames.py checks both). */
static const struct sonde_php_offsets php82 = {
	.major = 8,
	.minor = 2,
	.eg_current_execute_data = 488,
	.ex_opline = 0,
	.ex_func = 24,
	.ex_call_info = 40, /* This.u1.type_info: the call info in the high 16 bits */
	.ex_prev = 48,
	.fn_type = 0,
	.fn_flags = 4,
	.fn_name = 8,
	.fn_scope = 16,
	.op_filename = 152,
	.op_line_start = 160,
	.op_opcodes = 88,
	.op_last = 80,
	.ce_name = 8,
	.str_len = 16,
	.str_val = 24,
	.op_lineno = 24,
	.flags = SONDE_PHP_VM_REGS,
};

const struct sonde_php_offsets *php_layout_for(unsigned major, unsigned minor)
{
	if (major == 8 && minor == 2)
		return &php82;
	return NULL;
}

int php_version_from_name(const char *path, unsigned *major, unsigned *minor)
{
	static const char *const prefixes[] = { "libphp", "php-fpm", "php-cgi", "php" };
	const char *base = path ? strrchr(path, '/') : NULL, *p = NULL;
	unsigned ma = 0, mi = 0;
	int digits = 0;

	base = base ? base + 1 : path;
	if (!base)
		return -ENOENT;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]) && !p; i++)
		if (!strncmp(base, prefixes[i], strlen(prefixes[i])))
			p = base + strlen(prefixes[i]);
	if (!p || *p < '0' || *p > '9')
		return -ENOENT;
	while (*p >= '0' && *p <= '9' && digits++ < 2)
		ma = ma * 10 + (unsigned)(*p++ - '0');
	if (*p++ != '.')
		return -ENOENT;
	digits = 0;
	while (*p >= '0' && *p <= '9' && digits++ < 3)
		mi = mi * 10 + (unsigned)(*p++ - '0');
	/* "8.2" then the end or ".so" (libphp8.2.so) */
	if (!digits || (*p && strcmp(p, ".so") != 0))
		return -ENOENT;
	*major = ma;
	*minor = mi;
	return 0;
}
