/* symbolize.c - see symbolize.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "symbolize.h"

void symbolize_file_init(struct symbolize_file *ret, const struct symbolize_ctx *ctx,
			 const struct fileid *id)
{
	memset(ret, 0, sizeof(*ret));
	ret->id = *id;
	ret->cache = ctx->cache;
	if (analysis_file_state(ctx->analysis, id, false, &ret->symtab, NULL) != FILE_READY)
		ret->symtab = NULL;
}

int symbolize_vaddr(const struct symtab *t, uint64_t addr, unsigned flags, uint64_t *ret)
{
	uint64_t vaddr = addr;

	if (!t)
		return -ENOENT;
	if ((flags & SYMBOLIZE_FILE_OFFSET) && symtab_offset_to_vaddr(t, addr, &vaddr) < 0)
		return -ENOENT;
	if ((flags & SYMBOLIZE_RETURN) && vaddr > 0)
		vaddr--;
	*ret = vaddr;
	return 0;
}

void symbolize_addr(struct symbolize_file *f, uint64_t addr, unsigned flags,
		    struct symbolized *ret)
{
	ret->has_vaddr = false;
	ret->has_symbol = false;
	ret->n_frames = 0;
	if (symbolize_vaddr(f->symtab, addr, flags, &ret->vaddr) < 0)
		return;
	ret->has_vaddr = true;
	if (flags & SYMBOLIZE_LINES) {
		/* After the symtab: see cache.h on what a lookup keeps. */
		if (!f->index && f->cache && !f->index_looked_up) {
			f->index_looked_up = true;
			if (cache_lookup_index(f->cache, &f->id, &f->index, NULL) != CACHE_OK)
				f->index = NULL;
		}
		if (f->index)
			ret->n_frames = line_index_lookup(f->index, ret->vaddr, ret->frames,
							  LINE_INDEX_MAX_FRAMES);
	}
	ret->has_symbol = symtab_lookup(f->symtab, ret->vaddr, &ret->symbol) == 0;
}

const char *symbolize_frame_name(const struct registry *reg, const struct fileid *id,
				 const char *symbol, uint64_t offset, char *buf, size_t len)
{
	const char *name;
	char *d;

	if (symbol && *symbol) {
		d = demangle(symbol); /* NULL: not mangled */
		snprintf(buf, len, "%s", d ? d : symbol);
		free(d);
		return buf;
	}
	name = registry_file_name(reg, id);
	snprintf(buf, len, "%.200s+0x%" PRIx64, name ? name : "[unknown]", offset);
	return buf;
}
