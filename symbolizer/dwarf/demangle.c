/* demangle.c - names through libiberty (see demangle.h). libiberty's
 * demangler bounds its own recursion (DMGL_NO_RECURSE_LIMIT is not set),
 * so a hostile name costs time linear in its length, not a stack
 * overflow; names are capped by the index builder before they get here.
 *
 * libiberty and LLVM's demangler spell three things differently; frames
 * must read as llvm-symbolizer's (the reference users compare with), so
 * the output is rewritten:
 *   foo() [clone .part.0] [clone .isra.0]  ->  foo() (.part.0.isra.0)
 *   {lambda(int)#1}  ->  'lambda'(int)      {lambda(int)#3}  ->  'lambda1'(int)
 *   {unnamed type#1} ->  'unnamed'          {unnamed type#2} ->  'unnamed0'
 *   operator< <int>  ->  operator<<int>     (libiberty spaces template
 *                                            arguments after a '<')
 * (LLVM prints the discriminator of the mangled name, which is the
 * number libiberty shows minus 2, and none for the first.) Expressions in
 * decltype() are printed differently by the two and are left as they are.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "demangle.h"

/* Appends a discriminator: #1 -> "", #n -> n - 2. */
static size_t put_count(char *out, const char *digits, size_t n)
{
	long v = strtol(digits, NULL, 10);

	(void)n;
	if (v <= 1)
		return 0;
	return (size_t)sprintf(out, "%ld", v - 2);
}

/* Rewrites s (malloc'd, taken) into LLVM's spelling; returns the result
 * (malloc'd) or s itself when nothing changes or memory runs out. */
static char *llvm_style(char *s)
{
	size_t len = strlen(s), k = 0;
	char *out = malloc(2 * len + 16);
	const char *p = s, *clones;

	if (!out)
		return s;
	/* Clone suffixes, all at the end. */
	clones = strstr(s, " [clone ");
	while (*p && p != clones) {
		if (strncmp(p, "{lambda(", 8) == 0) {
			/* {lambda(ARGS)#N} with balanced parentheses in ARGS. */
			const char *q = p + 7;
			int depth = 0;

			for (; *q; q++) {
				if (*q == '(')
					depth++;
				else if (*q == ')' && --depth == 0)
					break;
			}
			if (*q == ')' && q[1] == '#') {
				const char *d = q + 2, *e = d;

				while (*e >= '0' && *e <= '9')
					e++;
				if (e > d && *e == '}') {
					k += (size_t)sprintf(out + k, "'lambda");
					k += put_count(out + k, d, (size_t)(e - d));
					out[k++] = '\'';
					memcpy(out + k, p + 7, (size_t)(q + 1 - (p + 7)));
					k += (size_t)(q + 1 - (p + 7));
					p = e + 1;
					continue;
				}
			}
		} else if (strncmp(p, "operator< <", 11) == 0 || strncmp(p, "operator<< <", 12) == 0) {
			size_t len = p[9] == '<' ? 10 : 9;

			memcpy(out + k, p, len);
			k += len;
			p += len + 1; /* drop the space */
			continue;
		} else if (strncmp(p, "{unnamed type#", 14) == 0) {
			const char *d = p + 14, *e = d;

			while (*e >= '0' && *e <= '9')
				e++;
			if (e > d && *e == '}') {
				k += (size_t)sprintf(out + k, "'unnamed");
				k += put_count(out + k, d, (size_t)(e - d));
				out[k++] = '\'';
				p = e + 1;
				continue;
			}
		}
		out[k++] = *p++;
	}
	if (clones) {
		bool first = true;

		while (strncmp(p, " [clone ", 8) == 0) {
			const char *end = strchr(p + 8, ']');

			if (!end)
				break;
			k += (size_t)sprintf(out + k, "%s%.*s", first ? " (" : "", (int)(end - (p + 8)),
					     p + 8);
			first = false;
			p = end + 1;
		}
		if (!first)
			out[k++] = ')';
		/* Anything else after the clones stays as it was. */
		while (*p)
			out[k++] = *p++;
	}
	out[k] = '\0';
	free(s);
	return out;
}

char *demangle(const char *name)
{
	char *d = NULL;

	if (!name || name[0] != '_')
		return NULL;
	if (name[1] == 'Z')
		d = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
	else if (name[1] == 'R')
		d = rust_demangle(name, DMGL_PARAMS | DMGL_ANSI);
	return d ? llvm_style(d) : NULL;
}
