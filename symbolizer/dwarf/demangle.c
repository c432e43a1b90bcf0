/* demangle.c - names through libiberty (see demangle.h). libiberty's
 * demangler bounds its own recursion (DMGL_NO_RECURSE_LIMIT is not set),
 * so a hostile name costs time linear in its length, not a stack
 * overflow; names are capped by the index builder before they get here. */
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "demangle.h"

char *demangle(const char *name)
{
	if (!name || name[0] != '_')
		return NULL;
	if (name[1] == 'Z')
		return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
	if (name[1] == 'R')
		return rust_demangle(name, DMGL_PARAMS | DMGL_ANSI);
	return NULL;
}
