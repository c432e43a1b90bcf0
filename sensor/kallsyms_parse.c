/* kallsyms_parse.c - one line of /proc/kallsyms (see kallsyms.h); pure,
 * so the unit tests and the fuzzer reach it without an uplink. */
#include <string.h>

#include "kallsyms.h"
#include "parse.h"

bool kallsyms_parse_line(const char *line, size_t len, struct kallsyms_line *ret)
{
	const char *sp1 = memchr(line, ' ', len), *name, *end = line + len, *tab;

	/* "ADDR T NAME": one type letter between two spaces. */
	if (!sp1 || end - sp1 < 4 || sp1[2] != ' ' || !strchr("tTwW", sp1[1]) || sp1[1] == '\0')
		return false;
	if (parse_u64_n(line, (size_t)(sp1 - line), 16, &ret->addr) < 0)
		return false;
	name = sp1 + 3;
	tab = memchr(name, '\t', (size_t)(end - name));
	ret->name = name;
	ret->name_len = (size_t)((tab ? tab : end) - name);
	ret->module = "";
	ret->module_len = 0;
	if (ret->name_len == 0)
		return false;
	if (tab) {
		const char *mod = tab + 1, *close;

		if (mod < end && *mod == '[') {
			mod++;
			close = memchr(mod, ']', (size_t)(end - mod));
			ret->module_len = (size_t)((close ? close : end) - mod);
		} else {
			ret->module_len = (size_t)(end - mod);
		}
		ret->module = mod;
	}
	return true;
}
