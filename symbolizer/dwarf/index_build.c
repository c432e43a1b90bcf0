/* index_build.c - builds a line index (line_index.h) from an ELF file and
 * its DWARF, once per file ID.
 *
 * What it collects, and how lookups use it:
 *   - symbols: the file's .symtab, or .dynsym when there is no .symtab,
 *     functions and data objects, one per address (the largest size wins,
 *     then the later entry): what llvm-symbolizer names the outermost
 *     frame with;
 *   - rows: every line program (debug_line.c), cut into sequences; the
 *     sequences are sorted and laid end to end, so an address finds its
 *     row by one binary search (the last row at or below it);
 *   - scopes: DW_TAG_subprogram and DW_TAG_inlined_subroutine DIEs with
 *     address ranges (libdw reads DIEs, attributes and range lists, DWARF
 *     4 and 5, compressed sections), each with its name (linkage name
 *     first, through DW_AT_abstract_origin/DW_AT_specification), its call
 *     site and the scope it is inlined into;
 *   - segments: the scope ranges flattened into disjoint [lo, hi) pieces
 *     that name the innermost scope, by one sweep with a stack.
 * Go binaries without DWARF (stripped with -ldflags=-s -w) get their
 * scopes and rows from .gopclntab (symbolizer/go/pclntab.c).
 *
 * Everything is bounded (line_index.h caps); a unit whose DIEs or line
 * program do not read is skipped, the rest of the file still counts.
 */
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>

#include "debug_line.h"
#include "demangle.h"
#include "elf_section.h"
#include "line_index.h"
#include "line_index_format.h"
#include "buildinfo.h"
#include "pclntab.h"
#include "minidebug.h"

#define MAX_NAME 8192
#define MAX_SYMBOLS (8u << 20)

#define GROW(arr, n, cap, max, err)                                            \
	do {                                                                   \
		if ((n) == (cap)) {                                            \
			size_t ncap_ = (cap) ? (cap) * 2 : 1024;               \
			void *p_;                                              \
			if ((n) >= (max)) {                                    \
				err = -E2BIG;                                  \
				break;                                         \
			}                                                      \
			p_ = realloc((arr), ncap_ * sizeof(*(arr)));           \
			if (!p_) {                                             \
				err = -ENOMEM;                                 \
				break;                                         \
			}                                                      \
			(arr) = p_;                                            \
			(cap) = ncap_;                                         \
		}                                                              \
	} while (0)

/* ---- the string pool, with interning ---- */

struct intern_slot {
	uint32_t off;   /* LIX_NONE: empty slot */
	uint32_t dname; /* demangled name, LIX_NONE: not computed yet */
	uint32_t hash;
	uint32_t file;  /* index in files when used as a file name (Go), or LIX_NONE */
};

struct builder {
	char *pool;
	size_t pool_size, pool_cap;
	struct intern_slot *slots;
	size_t n_slots, slot_cap; /* cap is a power of two */

	struct lix_scope *scopes;
	size_t n_scopes, cap_scopes;
	struct range { uint64_t lo, hi; uint32_t scope, depth, unit; } *ranges;
	size_t n_ranges, cap_ranges;
	struct seq { uint64_t lo, hi; size_t first, n; } *seqs;
	size_t n_seqs, cap_seqs;
	struct lix_row *rows;  /* raw rows, by sequence */
	size_t n_rows, cap_rows;
	uint32_t *files;
	size_t n_files, cap_files;
	struct lix_sym *syms;
	size_t n_syms, cap_syms;
	size_t dies, max_dies;
	uint32_t unit; /* index of the unit being walked */
	/* line_index_build_for: the only addresses asked about (sorted),
	 * and how many units were read */
	uint64_t *only;
	size_t n_only, units_read;
};

static uint32_t hash_str(const char *s, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static int intern_grow(struct builder *b)
{
	size_t cap = b->slot_cap ? b->slot_cap * 2 : 4096;
	struct intern_slot *s = malloc(cap * sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < cap; i++)
		s[i].off = LIX_NONE;
	for (size_t i = 0; i < b->slot_cap; i++) {
		size_t k;

		if (b->slots[i].off == LIX_NONE)
			continue;
		for (k = b->slots[i].hash & (cap - 1); s[k].off != LIX_NONE; k = (k + 1) & (cap - 1))
			;
		s[k] = b->slots[i];
	}
	free(b->slots);
	b->slots = s;
	b->slot_cap = cap;
	return 0;
}

/* The slot of name (len bytes, no NUL needed), added if new; NULL on
 * failure (*err set). */
static struct intern_slot *intern(struct builder *b, const char *name, size_t len, int *err)
{
	uint32_t h;
	size_t k;

	if (len > MAX_NAME)
		len = MAX_NAME;
	if ((b->n_slots + 1) * 2 > b->slot_cap && (*err = intern_grow(b)) < 0)
		return NULL;
	h = hash_str(name, len);
	for (k = h & (b->slot_cap - 1); b->slots[k].off != LIX_NONE; k = (k + 1) & (b->slot_cap - 1)) {
		const char *s = b->pool + b->slots[k].off;

		if (b->slots[k].hash == h && strncmp(s, name, len) == 0 && s[len] == '\0')
			return &b->slots[k];
	}
	if (b->pool_size + len + 1 > LINE_INDEX_MAX_POOL) {
		*err = -E2BIG;
		return NULL;
	}
	if (b->pool_size + len + 1 > b->pool_cap) {
		size_t cap = b->pool_cap ? b->pool_cap : 65536;
		char *p;

		while (cap < b->pool_size + len + 1)
			cap *= 2;
		p = realloc(b->pool, cap);
		if (!p) {
			*err = -ENOMEM;
			return NULL;
		}
		b->pool = p;
		b->pool_cap = cap;
	}
	memcpy(b->pool + b->pool_size, name, len);
	b->pool[b->pool_size + len] = '\0';
	b->slots[k] = (struct intern_slot){ .off = (uint32_t)b->pool_size, .dname = LIX_NONE,
					    .hash = h, .file = LIX_NONE };
	b->pool_size += len + 1;
	b->n_slots++;
	return &b->slots[k];
}

static int intern_off(struct builder *b, const char *name, uint32_t *ret)
{
	int err = 0;
	struct intern_slot *s = intern(b, name, strlen(name), &err);

	if (!s)
		return err;
	*ret = s->off;
	return 0;
}

/* Raw and demangled pool offsets of a function name. */
static int intern_function(struct builder *b, const char *name, size_t len, uint32_t *ret_raw,
			   uint32_t *ret_dname)
{
	int err = 0;
	struct intern_slot *s = intern(b, name, len, &err);
	uint32_t raw, dn;
	char *d;

	if (!s)
		return err;
	raw = s->off;
	if (s->dname == LIX_NONE) {
		/* b->pool may move below: demangle from a copy of the offset. */
		d = demangle(b->pool + raw);
		dn = raw;
		if (d) {
			struct intern_slot *ds = intern(b, d, strlen(d), &err);

			free(d);
			if (!ds)
				return err;
			dn = ds->off;
		}
		/* The table may have grown: find the raw slot again. */
		s = intern(b, b->pool + raw, strlen(b->pool + raw), &err);
		if (!s)
			return err;
		s->dname = dn;
	}
	*ret_raw = raw;
	*ret_dname = s->dname;
	return 0;
}

static void builder_done(struct builder *b)
{
	free(b->pool);
	free(b->slots);
	free(b->scopes);
	free(b->ranges);
	free(b->seqs);
	free(b->rows);
	free(b->files);
	free(b->syms);
	free(b->only);
}

/* ---- symbols ---- */

struct rawsym {
	uint64_t addr, size;
	size_t order;
	uint32_t name, dname, file;
};

static int cmp_rawsym(const void *a, const void *b)
{
	const struct rawsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->size != y->size)
		return x->size < y->size ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Appends the defined function and data symbols of one symbol table
 * section to raw (see read_symbols). */
static int collect_symbols(struct builder *b, Elf *elf, Elf_Scn *scn, size_t order_base,
			   struct rawsym **raw, size_t *n, size_t *cap)
{
	uint32_t file = LIX_NONE;
	GElf_Shdr sh;
	Elf_Data *data;
	size_t count;
	int err = 0;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || !sh.sh_entsize ||
	    !(data = elf_getdata(scn, NULL)))
		return 0;
	count = data->d_size / sh.sh_entsize;
	if (count > MAX_SYMBOLS)
		count = MAX_SYMBOLS;
	for (size_t i = 1; i < count; i++) {
		GElf_Sym sym;
		const char *name;
		int type;

		if (!gelf_getsym(data, (int)i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if (type == STT_FILE) {
			/* Names the source of the local symbols after it. */
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			file = LIX_NONE;
			if (name && *name && (err = intern_off(b, name, &file)) < 0)
				return err;
			continue;
		}
		if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_OBJECT && type != STT_COMMON)
			continue;
		if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS)
			continue;
		name = elf_strptr(elf, sh.sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		GROW(*raw, *n, *cap, MAX_SYMBOLS, err);
		if (err < 0)
			return err;
		(*raw)[*n] = (struct rawsym){ .addr = sym.st_value, .size = sym.st_size,
					      .order = order_base + i, .dname = LIX_NONE,
					      .file = GELF_ST_BIND(sym.st_info) == STB_LOCAL ? file : LIX_NONE };
		if (b->only) {
			/* Demangled later, if an address asked about needs it. */
			struct intern_slot *slot = intern(b, name, strnlen(name, MAX_NAME), &err);

			if (!slot)
				return err;
			(*raw)[*n].name = slot->off;
		} else {
			err = intern_function(b, name, strnlen(name, MAX_NAME), &(*raw)[*n].name,
					      &(*raw)[*n].dname);
			if (err < 0)
				return err;
		}
		(*n)++;
	}
	return 0;
}

static Elf_Data *section_data(Elf *elf, const char *want);

/* A partial index demangles only the symbols its lookups end at (the last
 * one at or below each address asked about; line_index.c): all of
 * libasan's 2,800 names took 7 of a first answer's 11 ms. The others get
 * their raw name as the demangled one. */
static int demangle_wanted(struct builder *b)
{
	size_t j = 0;
	int err;

	for (size_t i = 0; i < b->n_only && b->n_syms; i++) {
		struct lix_sym *sym;
		uint32_t raw;

		while (j + 1 < b->n_syms && b->syms[j + 1].addr <= b->only[i])
			j++;
		sym = &b->syms[j];
		if (sym->addr > b->only[i] || sym->dname != LIX_NONE)
			continue;
		/* Found, not added: the pool does not move under the name. */
		err = intern_function(b, b->pool + sym->name, strlen(b->pool + sym->name), &raw,
				      &sym->dname);
		if (err < 0)
			return err;
	}
	for (size_t i = 0; i < b->n_syms; i++)
		if (b->syms[i].dname == LIX_NONE)
			b->syms[i].dname = b->syms[i].name;
	return 0;
}

/* The symbol table that names outermost frames: .symtab, or else .dynsym
 * (what llvm-symbolizer reads), plus the .symtab inside MiniDebugInfo
 * (.gnu_debugdata) when the file has one, which holds the functions
 * .dynsym leaves out. One symbol per address: after sorting by (address,
 * size, table order), the last one (largest size, then the later entry). */
static int read_symbols(struct builder *b, Elf *elf)
{
	Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL, *mscn = NULL;
	struct rawsym *raw = NULL;
	size_t n = 0, cap = 0;
	uint8_t *mini = NULL;
	size_t mini_len = 0;
	Elf *melf = NULL;
	GElf_Shdr sh;
	Elf_Data *gd;
	int err = 0;

	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_entsize == 0)
			continue;
		if (sh.sh_type == SHT_SYMTAB && sh.sh_size / sh.sh_entsize > 1 && !symtab)
			symtab = scn;
		else if (sh.sh_type == SHT_DYNSYM && !dynsym)
			dynsym = scn;
	}
	err = collect_symbols(b, elf, symtab ? symtab : dynsym, 0, &raw, &n, &cap);
	if (err < 0)
		goto cleanup;
	if (!symtab && (gd = section_data(elf, ".gnu_debugdata")) && gd->d_buf &&
	    minidebug_decompress(gd->d_buf, gd->d_size, &mini, &mini_len) == 0 &&
	    mini_len >= EI_NIDENT && memcmp(mini, ELFMAG, SELFMAG) == 0 &&
	    mini[EI_CLASS] == ELFCLASS64 && mini[EI_DATA] == ELFDATA2LSB &&
	    (melf = elf_memory((char *)mini, mini_len)) && elf_kind(melf) == ELF_K_ELF) {
		while ((mscn = elf_nextscn(melf, mscn)))
			if (gelf_getshdr(mscn, &sh) && sh.sh_type == SHT_SYMTAB)
				break;
		err = collect_symbols(b, melf, mscn, MAX_SYMBOLS, &raw, &n, &cap);
		if (err < 0)
			goto cleanup;
	}
	if (n)
		qsort(raw, n, sizeof(*raw), cmp_rawsym);
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && raw[i + 1].addr == raw[i].addr)
			continue;
		GROW(b->syms, b->n_syms, b->cap_syms, MAX_SYMBOLS, err);
		if (err < 0)
			goto cleanup;
		b->syms[b->n_syms++] = (struct lix_sym){ .addr = raw[i].addr, .size = raw[i].size,
							 .name = raw[i].name, .dname = raw[i].dname,
							 .file = raw[i].file };
	}
	if (b->only)
		err = demangle_wanted(b);
cleanup:
	elf_end(melf);
	free(mini);
	free(raw);
	return err;
}

/* ---- line programs ---- */

static Elf_Data *section_data(Elf *elf, const char *want)
{
	GElf_Shdr sh;
	Elf_Scn *scn = elf_section_by_name(elf, want, &sh);

	if (!scn || sh.sh_type == SHT_NOBITS)
		return NULL;
	if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
		return NULL;
	return elf_getdata(scn, NULL);
}

/* Adds the rows of one unit's program, as sequences, and maps its file
 * numbers to global file indexes (*ret_map, n entries, caller frees). */
/* Whether one of the sorted addrs lies in [lo, hi) (never, when lo >= hi). */
static bool holds_one(const uint64_t *addrs, size_t n, uint64_t lo, uint64_t hi)
{
	size_t l = 0, r = n;

	while (l < r) {
		size_t m = l + (r - l) / 2;

		if (addrs[m] < lo)
			l = m + 1;
		else
			r = m;
	}
	return l < n && addrs[l] < hi;
}

/* A partial index keeps the line sequences that hold an address asked
 * about: the lookup of such an address finds its row in its sequence. */
static bool seq_wanted(uint64_t lo, uint64_t hi, void *ctx)
{
	const struct builder *b = ctx;

	return holds_one(b->only, b->n_only, lo, hi);
}

static int add_line_program(struct builder *b, const struct debug_line_sections *secs,
			    uint64_t offset, const char *comp_dir, uint32_t **ret_map, size_t *ret_n)
{
	struct debug_line_table t;
	uint32_t *map = NULL;
	size_t start = 0;
	int err;

	err = debug_line_read_some(secs, offset, comp_dir, LINE_INDEX_MAX_ROWS - b->n_rows,
				   b->only ? seq_wanted : NULL, b, &t);
	if (err < 0 && err != -EBADMSG)
		goto cleanup;
	if (err == -EBADMSG) {
		/* A damaged program: its rows are not trusted. */
		t.n_rows = 0;
	}
	err = 0;
	map = malloc((t.n_files + 1) * sizeof(*map));
	if (!map) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < t.n_files; i++) {
		map[i] = LIX_NONE;
		if (!t.files[i])
			continue;
		GROW(b->files, b->n_files, b->cap_files, DEBUG_LINE_MAX_FILES * 16u, err);
		if (err < 0)
			goto cleanup;
		err = intern_off(b, t.files[i], &b->files[b->n_files]);
		if (err < 0)
			goto cleanup;
		map[i] = (uint32_t)b->n_files++;
	}
	for (size_t i = 0; i < t.n_rows; i++) {
		const struct debug_line_row *r = &t.rows[i];

		GROW(b->rows, b->n_rows, b->cap_rows, LINE_INDEX_MAX_ROWS, err);
		if (err < 0)
			goto cleanup;
		b->rows[b->n_rows++] = (struct lix_row){
			.addr = r->addr,
			.file = r->end_sequence || r->file == UINT32_MAX ? LIX_NONE : map[r->file],
			.line = r->end_sequence ? 0 : r->line,
		};
		if (!r->end_sequence)
			continue;
		/* A sequence: rows [start, i], the last one its end. Rows
		 * must not go backwards inside it; discarded code (address 0
		 * or a tombstone) is dropped. */
		{
			size_t first = b->n_rows - (i - start + 1);
			uint64_t lo = b->rows[first].addr, hi = r->addr;
			bool ok = lo < hi && lo != 0 && hi < UINT64_MAX - 1;

			for (size_t k = first + 1; ok && k < b->n_rows; k++)
				ok = b->rows[k].addr >= b->rows[k - 1].addr;
			if (ok) {
				GROW(b->seqs, b->n_seqs, b->cap_seqs, LINE_INDEX_MAX_ROWS, err);
				if (err < 0)
					goto cleanup;
				b->seqs[b->n_seqs++] = (struct seq){ .lo = lo, .hi = hi, .first = first,
								     .n = b->n_rows - first };
			} else {
				b->n_rows = first;
			}
		}
		start = i + 1;
	}
	/* Rows after the last end_sequence belong to no sequence. */
	if (b->n_seqs)
		b->n_rows = b->seqs[b->n_seqs - 1].first + b->seqs[b->n_seqs - 1].n;
	else
		b->n_rows = 0;
	*ret_map = map;
	*ret_n = t.n_files;
	map = NULL;
cleanup:
	free(map);
	debug_line_table_done(&t);
	return err;
}

/* ---- DIEs ---- */

struct frame {
	Dwarf_Die die;
	bool subroutine;
	bool inlined;
	uint32_t scope; /* LIX_NONE until some range needs it */
	uint32_t parent_frame; /* index of the enclosing subroutine frame, or LIX_NONE */
	bool holds; /* partial index: its ranges hold an address asked about */
};

static bool descend(int tag)
{
	switch (tag) {
	case DW_TAG_compile_unit:
	case DW_TAG_partial_unit:
	case DW_TAG_namespace:
	case DW_TAG_subprogram:
	case DW_TAG_inlined_subroutine:
	case DW_TAG_lexical_block:
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
	case DW_TAG_module:
	case DW_TAG_try_block:
	case DW_TAG_catch_block:
		return true;
	default:
		return false;
	}
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *s;

	if ((dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	     dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a)) &&
	    (s = dwarf_formstring(&a)))
		return s;
	return dwarf_diename(die) ? dwarf_diename(die) : (dwarf_attr_integrate(die, DW_AT_name, &a)
							  ? dwarf_formstring(&a) : NULL);
}

/* Gives frames[k] (and the subroutine frames it is inlined into) a scope. */
static int materialize(struct builder *b, struct frame *frames, uint32_t k, const uint32_t *fmap,
		       size_t n_fmap)
{
	uint32_t chain[LINE_INDEX_MAX_DEPTH];
	size_t n = 0;
	int err = 0;

	for (uint32_t f = k; f != LIX_NONE && frames[f].scope == LIX_NONE && n < LINE_INDEX_MAX_DEPTH;
	     f = frames[f].inlined ? frames[f].parent_frame : LIX_NONE)
		chain[n++] = f;
	while (n-- > 0) {
		struct frame *fr = &frames[chain[n]];
		struct lix_scope s = { .name = LIX_NONE, .dname = LIX_NONE, .parent = LIX_NONE,
				       .call_file = LIX_NONE };
		const char *name = die_name(&fr->die);
		Dwarf_Attribute a;
		Dwarf_Word w;

		if (name) {
			err = intern_function(b, name, strnlen(name, MAX_NAME), &s.name, &s.dname);
			if (err < 0)
				return err;
		}
		if (fr->inlined) {
			if (fr->parent_frame != LIX_NONE)
				s.parent = frames[fr->parent_frame].scope;
			if (dwarf_attr(&fr->die, DW_AT_call_file, &a) && dwarf_formudata(&a, &w) == 0 &&
			    w < n_fmap)
				s.call_file = fmap[w];
			if (dwarf_attr(&fr->die, DW_AT_call_line, &a) && dwarf_formudata(&a, &w) == 0 &&
			    w <= UINT32_MAX)
				s.call_line = (uint32_t)w;
		}
		GROW(b->scopes, b->n_scopes, b->cap_scopes, LINE_INDEX_MAX_SCOPES, err);
		if (err < 0)
			return err;
		fr->scope = (uint32_t)b->n_scopes;
		b->scopes[b->n_scopes++] = s;
	}
	return frames[k].scope == LIX_NONE ? -E2BIG : 0;
}

/* Whether the DIE's ranges hold one of the addresses asked about;
 * *ret_any (may be NULL): whether it states any range. */
static bool die_holds_one(const struct builder *b, Dwarf_Die *die, bool *ret_any)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	unsigned n = 0;

	if (ret_any)
		*ret_any = false;
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0 && n++ < 65536) {
		if (ret_any)
			*ret_any = true;
		if (holds_one(b->only, b->n_only, lo, hi))
			return true;
	}
	return false;
}

static int walk_unit(struct builder *b, Dwarf_Die *cudie, const uint32_t *fmap, size_t n_fmap)
{
	struct frame *frames = NULL;
	uint32_t depth = 0;
	int err = 0;
	Dwarf_Die child;

	frames = malloc(LINE_INDEX_MAX_DEPTH * sizeof(*frames));
	if (!frames)
		return -ENOMEM;
	frames[0] = (struct frame){ .die = *cudie, .scope = LIX_NONE, .parent_frame = LIX_NONE };
	if (dwarf_child(cudie, &child) != 0)
		goto cleanup;
	depth = 1;
	frames[1] = (struct frame){ .die = child };
	for (;;) {
		struct frame *fr = &frames[depth];
		int tag = dwarf_tag(&fr->die);
		uint32_t enclosing = LIX_NONE;

		if (++b->dies > b->max_dies) {
			err = -E2BIG;
			goto cleanup;
		}
		for (uint32_t k = depth - 1; k > 0; k--)
			if (frames[k].subroutine) {
				enclosing = k;
				break;
			}
		fr->subroutine = tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
		fr->inlined = tag == DW_TAG_inlined_subroutine;
		fr->scope = LIX_NONE;
		fr->parent_frame = enclosing;
		/* A partial index records (and names) only the functions and
		 * inlined calls that hold an address asked about. It still
		 * walks into the others, whose children may be functions of
		 * their own (GNU C nested functions), but an inlined call in a
		 * caller that holds none holds none either (the whole index
		 * clips a call to its caller's ranges), so only functions'
		 * ranges are read there. */
		fr->holds = false;
		if (b->only && fr->subroutine)
			fr->holds = (fr->inlined && (enclosing == LIX_NONE || !frames[enclosing].holds))
					    ? false
					    : die_holds_one(b, &fr->die, NULL);
		if (fr->subroutine && (!b->only || fr->holds)) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t off = 0;
			unsigned n = 0;

			while ((off = dwarf_ranges(&fr->die, off, &base, &lo, &hi)) > 0 && n++ < 65536) {
				if (lo >= hi || lo == 0 || hi >= UINT64_MAX - 1)
					continue;
				if (fr->scope == LIX_NONE) {
					err = materialize(b, frames, depth, fmap, n_fmap);
					if (err < 0)
						goto cleanup;
				}
				GROW(b->ranges, b->n_ranges, b->cap_ranges, LINE_INDEX_MAX_SCOPES * 4u, err);
				if (err < 0)
					goto cleanup;
				b->ranges[b->n_ranges++] = (struct range){ .lo = lo, .hi = hi,
									   .scope = fr->scope,
									   .depth = depth,
									   .unit = b->unit };
			}
		}
		/* Next DIE in preorder. */
		if (descend(tag) && depth + 1 < LINE_INDEX_MAX_DEPTH &&
		    dwarf_child(&fr->die, &child) == 0) {
			frames[++depth] = (struct frame){ .die = child };
			continue;
		}
		while (depth > 0 && dwarf_siblingof(&frames[depth].die, &child) != 0)
			depth--;
		if (depth == 0)
			break;
		frames[depth] = (struct frame){ .die = child };
	}
cleanup:
	free(frames);
	return err;
}

/* The DWZ alternate file (alt_elf, may be NULL) for dw, when dw's
 * .gnu_debugaltlink names it by build ID: then names, types and abstract
 * origins that dwz moved out (DW_FORM_GNU_ref_alt, DW_FORM_GNU_strp_alt)
 * resolve. Returns the alternate's Dwarf (owned) or NULL. */
static Dwarf *set_alt(Dwarf *dw, Elf *alt_elf)
{
	const char *name;
	const void *want, *have;
	ssize_t want_len, have_len;
	Dwarf *alt;

	if (!alt_elf)
		return NULL;
	want_len = dwelf_dwarf_gnu_debugaltlink(dw, &name, &want);
	have_len = dwelf_elf_gnu_build_id(alt_elf, &have);
	if (want_len <= 0 || have_len != want_len || memcmp(want, have, (size_t)want_len) != 0)
		return NULL;
	alt = dwarf_begin_elf(alt_elf, DWARF_C_READ, NULL);
	if (alt)
		dwarf_setalt(dw, alt);
	return alt;
}

/* Whether the unit is to be read: always for a whole index; for
 * line_index_build_for, when its ranges hold an address asked about, or
 * when it states no ranges (then the whole index could use it too). */
static bool unit_wanted(const struct builder *b, Dwarf_Die *cudie)
{
	bool any;

	return !b->only || die_holds_one(b, cudie, &any) || !any;
}

static int read_dwarf(struct builder *b, Elf *elf, Elf *alt_elf, bool *ret_any)
{
	struct debug_line_sections secs = { 0 };
	Elf_Data *d;
	Dwarf *dw = NULL, *alt = NULL;
	Dwarf_CU *cu = NULL, *next;
	Dwarf_Half version;
	uint8_t unit_type;
	Dwarf_Die cudie, subdie;
	int err = 0;

	dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	if (!dw)
		return 0;
	alt = set_alt(dw, alt_elf);
	if ((d = section_data(elf, ".debug_line"))) {
		secs.line = d->d_buf;
		secs.line_size = d->d_size;
	}
	if ((d = section_data(elf, ".debug_str"))) {
		secs.str = d->d_buf;
		secs.str_size = d->d_size;
	}
	if ((d = section_data(elf, ".debug_line_str"))) {
		secs.line_str = d->d_buf;
		secs.line_str_size = d->d_size;
	}
	/* A partial index wanting most units would cost what the whole one
	 * does: better to wait for that (the caller does on -E2BIG). */
	if (b->only) {
		size_t units = 0, wanted = 0;

		while (dwarf_get_units(dw, cu, &next, &version, &unit_type, &cudie, &subdie) == 0) {
			cu = next;
			if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
				continue;
			units++;
			wanted += unit_wanted(b, &cudie);
		}
		cu = NULL;
		if (wanted > 1 && wanted * 2 > units) {
			err = -E2BIG;
			goto cleanup;
		}
	}
	while (dwarf_get_units(dw, cu, &next, &version, &unit_type, &cudie, &subdie) == 0) {
		Dwarf_Attribute a;
		Dwarf_Word stmt;
		const char *comp_dir = NULL;
		uint32_t *fmap = NULL;
		size_t n_fmap = 0;

		cu = next;
		if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
			continue;
		*ret_any = true;
		if (!unit_wanted(b, &cudie)) {
			b->unit++; /* numbered as in the whole index */
			continue;
		}
		b->units_read++;
		if (dwarf_attr(&cudie, DW_AT_comp_dir, &a))
			comp_dir = dwarf_formstring(&a);
		if (secs.line && dwarf_attr(&cudie, DW_AT_stmt_list, &a) &&
		    dwarf_formudata(&a, &stmt) == 0) {
			err = add_line_program(b, &secs, stmt, comp_dir, &fmap, &n_fmap);
			if (err < 0)
				goto cleanup;
		}
		err = walk_unit(b, &cudie, fmap, n_fmap);
		b->unit++;
		free(fmap);
		if (err < 0)
			goto cleanup;
	}
cleanup:
	dwarf_end(dw);
	dwarf_end(alt); /* after dw, which refers to it */
	return err;
}

/* ---- Go ---- */

struct go_state {
	struct builder *b;
	size_t seq_first; /* first row of the current function */
	uint64_t lo;
	bool open;
	uint32_t func_scope; /* the current function's scope */
	/* Scopes of the current function's inline tree nodes: node_scope[i]
	 * holds for node i when node_gen[i] == gen. */
	uint32_t *node_scope, *node_gen, gen;
};

/* Adds scope sc named name (interned here) as *ret. */
static int go_scope(struct builder *b, struct lix_scope sc, const char *name, size_t name_len,
		    uint32_t *ret)
{
	int err = intern_function(b, name, name_len, &sc.name, &sc.dname);

	if (err < 0)
		return err;
	GROW(b->scopes, b->n_scopes, b->cap_scopes, LINE_INDEX_MAX_SCOPES, err);
	if (err < 0)
		return err;
	b->scopes[b->n_scopes] = sc;
	*ret = (uint32_t)b->n_scopes++;
	return 0;
}

/* The files index of a Go file name, interned. */
static int go_file(struct builder *b, const char *file, size_t file_len, uint32_t *ret)
{
	struct intern_slot *s;
	int err = 0;

	*ret = LIX_NONE;
	if (!file || !file_len)
		return 0;
	s = intern(b, file, file_len, &err);
	if (!s)
		return err;
	if (s->file == LIX_NONE) {
		GROW(b->files, b->n_files, b->cap_files, DEBUG_LINE_MAX_FILES * 16u, err);
		if (err < 0)
			return err;
		b->files[b->n_files] = s->off;
		s->file = (uint32_t)b->n_files++;
	}
	*ret = s->file;
	return 0;
}

static int go_func(void *ctx, uint64_t lo, uint64_t hi, const char *name, size_t name_len)
{
	struct go_state *g = ctx;
	struct builder *b = g->b;
	struct lix_scope sc = { .parent = LIX_NONE, .call_file = LIX_NONE };
	uint32_t scope;
	int err = go_scope(b, sc, name, name_len, &scope);

	if (err < 0)
		return err;
	GROW(b->ranges, b->n_ranges, b->cap_ranges, LINE_INDEX_MAX_SCOPES * 4u, err);
	if (err < 0)
		return err;
	b->ranges[b->n_ranges++] = (struct range){ .lo = lo, .hi = hi, .scope = scope,
						   .depth = 1 };
	g->seq_first = b->n_rows;
	g->lo = lo;
	g->open = true;
	g->func_scope = scope;
	g->gen++;
	return 0;
}

static int go_row(void *ctx, uint64_t addr, const char *file, size_t file_len, uint32_t line)
{
	struct go_state *g = ctx;
	struct builder *b = g->b;
	uint32_t fidx;
	int err = go_file(b, file, file_len, &fidx);

	if (err < 0)
		return err;
	GROW(b->rows, b->n_rows, b->cap_rows, LINE_INDEX_MAX_ROWS, err);
	if (err < 0)
		return err;
	b->rows[b->n_rows++] = (struct lix_row){ .addr = addr, .file = fidx, .line = line };
	return 0;
}

static int go_end(void *ctx, uint64_t addr)
{
	struct go_state *g = ctx;
	struct builder *b = g->b;
	int err = 0;

	if (!g->open || b->n_rows == g->seq_first)
		return 0;
	g->open = false;
	GROW(b->rows, b->n_rows, b->cap_rows, LINE_INDEX_MAX_ROWS, err);
	if (err < 0)
		return err;
	b->rows[b->n_rows++] = (struct lix_row){ .addr = addr, .file = LIX_NONE };
	GROW(b->seqs, b->n_seqs, b->cap_seqs, LINE_INDEX_MAX_ROWS, err);
	if (err < 0)
		return err;
	b->seqs[b->n_seqs++] = (struct seq){ .lo = b->rows[g->seq_first].addr, .hi = addr,
					     .first = g->seq_first, .n = b->n_rows - g->seq_first };
	return 0;
}

/* An inlined call: a scope inside its caller's (the function's, or
 * another inlined call's), named for the callee, at the call site. */
static int go_inline_call(void *ctx, int32_t node, int32_t parent, const char *name,
			  size_t name_len, const char *call_file, size_t call_file_len,
			  uint32_t call_line)
{
	struct go_state *g = ctx;
	struct builder *b = g->b;
	struct lix_scope sc = { .parent = g->func_scope, .call_line = call_line };
	int err;

	if (node < 0 || (uint32_t)node >= PCLNTAB_MAX_INLINE_NODES)
		return -EBADMSG;
	if (!g->node_scope) {
		g->node_scope = calloc(PCLNTAB_MAX_INLINE_NODES, sizeof(*g->node_scope));
		g->node_gen = calloc(PCLNTAB_MAX_INLINE_NODES, sizeof(*g->node_gen));
		if (!g->node_scope || !g->node_gen)
			return -ENOMEM;
	}
	if (parent >= 0 && (uint32_t)parent < PCLNTAB_MAX_INLINE_NODES &&
	    g->node_gen[parent] == g->gen)
		sc.parent = g->node_scope[parent];
	err = go_file(b, call_file, call_file_len, &sc.call_file);
	if (err < 0)
		return err;
	err = go_scope(b, sc, name, name_len, &g->node_scope[node]);
	if (err < 0)
		return err;
	g->node_gen[node] = g->gen;
	return 0;
}

/* Code of an inlined call: the innermost scope there (flatten_scopes
 * names the segment after it; its callers follow the parents). */
static int go_inline_range(void *ctx, uint64_t lo, uint64_t hi, int32_t node)
{
	struct go_state *g = ctx;
	struct builder *b = g->b;
	int err = 0;

	if (node < 0 || (uint32_t)node >= PCLNTAB_MAX_INLINE_NODES || !g->node_gen ||
	    g->node_gen[node] != g->gen || lo >= hi)
		return 0;
	GROW(b->ranges, b->n_ranges, b->cap_ranges, LINE_INDEX_MAX_SCOPES * 4u, err);
	if (err < 0)
		return err;
	b->ranges[b->n_ranges++] = (struct range){ .lo = lo, .hi = hi,
						   .scope = g->node_scope[node], .depth = 2 };
	return 0;
}

/* Where a Go 1.19+ binary keeps its inline trees (pclntab.h): the
 * moduledata in .noptrdata points at the table and holds gofunc, which
 * lies in .rodata. In a PIE those pointers are relocations' (relative.h),
 * so moduledata is read from a relocated copy (*ret_copy, the caller's to
 * free). False when not found (Go 1.18, damage). */
static bool go_funcdata(Elf *elf, const struct elf_go_table *tab, struct pclntab_funcdata *ret,
			uint8_t **ret_copy)
{
	Elf_Data *rd = section_data(elf, ".rodata"), *bi = section_data(elf, ".go.buildinfo");
	char ver[64];
	bool go119;
	GElf_Shdr sh, nsh;
	uint64_t gofunc;
	uint8_t *nd;

	*ret_copy = NULL;
	if (!rd || !rd->d_buf || !elf_section_by_name(elf, ".rodata", &sh))
		return false;
	nd = elf_section_relocated(elf, ".noptrdata", &nsh);
	if (!nd)
		return false;
	*ret_copy = nd;
	/* 1.18 and 1.19 share the table's magic: the version tells them apart. */
	go119 = bi && bi->d_buf && go_buildinfo_version(bi->d_buf, bi->d_size, ver, sizeof(ver)) == 0 &&
		go_version_minor(ver) == 19;
	if (pclntab_find_gofunc(tab->data, tab->size, tab->addr, nd, nsh.sh_size, go119,
				&gofunc) < 0)
		return false;
	if (gofunc < sh.sh_addr || gofunc - sh.sh_addr >= rd->d_size)
		return false;
	*ret = (struct pclntab_funcdata){ .data = rd->d_buf, .size = rd->d_size,
					  .addr = sh.sh_addr, .gofunc = gofunc, .go119 = go119 };
	return true;
}

/* Scopes and rows from .gopclntab, for Go binaries without DWARF, with
 * inlined calls where the inline trees can be found. A damaged table
 * keeps what was read before the damage. */
static int read_pclntab(struct builder *b, Elf *elf)
{
	struct elf_go_table tab;
	struct go_state g = { .b = b };
	struct pclntab_sink sink = { .func = go_func, .row = go_row, .end = go_end,
				     .inline_call = go_inline_call,
				     .inline_range = go_inline_range, .ctx = &g };
	struct pclntab_funcdata fd;
	uint8_t *moduledata = NULL;
	bool have_fd;
	int r;

	if (!elf_go_table(elf, &tab))
		return 0;
	have_fd = go_funcdata(elf, &tab, &fd, &moduledata);
	r = pclntab_read_inlined(tab.data, tab.size, tab.text, have_fd ? &fd : NULL, &sink);
	free(moduledata);
	free(g.node_scope);
	free(g.node_gen);
	if (r == -ENOMEM)
		return r;
	/* A function whose rows were cut short still ends. */
	if (g.open && b->n_rows > g.seq_first)
		b->n_rows = g.seq_first;
	return 0;
}

/* ---- assembling ---- */

static int cmp_seq(const void *a, const void *b)
{
	const struct seq *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->hi != y->hi)
		return x->hi > y->hi ? -1 : 1;
	/* Equal ranges of two units: the later unit first, so the earlier
	 * one ends up innermost and wins (see flatten_scopes). */
	if (x->unit != y->unit)
		return x->unit > y->unit ? -1 : 1;
	return x->scope < y->scope ? -1 : x->scope > y->scope;
}

/* Rows of the sorted sequences, end to end; where two rows share an
 * address the later one wins (llvm-symbolizer takes the last row at or
 * below an address). Overlapping sequences: the first keeps its range. */
static int flatten_rows(struct builder *b, struct lix_row **ret, size_t *ret_n)
{
	struct lix_row *out = NULL;
	size_t n = 0;
	uint64_t prev_hi = 0;

	if (b->n_seqs)
		qsort(b->seqs, b->n_seqs, sizeof(*b->seqs), cmp_seq);
	out = malloc((b->n_rows + 1) * sizeof(*out));
	if (!out)
		return -ENOMEM;
	for (size_t s = 0; s < b->n_seqs; s++) {
		const struct seq *q = &b->seqs[s];

		if (q->lo < prev_hi)
			continue;
		for (size_t k = 0; k < q->n; k++) {
			const struct lix_row *r = &b->rows[q->first + k];

			if (n && out[n - 1].addr == r->addr)
				out[n - 1] = *r;
			else
				out[n++] = *r;
		}
		prev_hi = q->hi;
	}
	*ret = out;
	*ret_n = n;
	return 0;
}

/* Flattens nested scope ranges into disjoint segments naming the
 * innermost scope. A range that sticks out of the one it sits in is
 * clipped to it (well-formed DWARF nests them). Where two units claim the
 * same code (identical code folded, duplicates), the earlier unit wins, as
 * llvm-symbolizer's address-to-unit map decides: a later unit's range
 * inside an earlier unit's is dropped. */
static int flatten_scopes(struct builder *b, struct lix_seg **ret, size_t *ret_n)
{
	struct range *stack = NULL;
	struct lix_seg *out = NULL;
	size_t n = 0, cap = 0, top = 0;
	uint64_t cur = 0;
	int err = 0;

#define EMIT(lo_, hi_, scope_)                                                          \
	do {                                                                            \
		if ((lo_) < (hi_)) {                                                    \
			if (n && out[n - 1].hi == (lo_) && out[n - 1].scope == (scope_)) {  \
				out[n - 1].hi = (hi_);                                  \
			} else {                                                        \
				GROW(out, n, cap, LINE_INDEX_MAX_SCOPES * 8u, err);     \
				if (err < 0)                                            \
					goto cleanup;                                   \
				out[n++] = (struct lix_seg){ .lo = (lo_), .hi = (hi_),  \
							     .scope = (scope_) };       \
			}                                                               \
		}                                                                       \
	} while (0)

	if (b->n_ranges)
		qsort(b->ranges, b->n_ranges, sizeof(*b->ranges), cmp_range);
	stack = malloc((b->n_ranges + 1) * sizeof(*stack));
	if (!stack) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i <= b->n_ranges; i++) {
		struct range r = i < b->n_ranges ? b->ranges[i]
						 : (struct range){ .lo = UINT64_MAX, .hi = UINT64_MAX };

		/* Close what ends before r starts. */
		while (top > 0 && stack[top - 1].hi <= r.lo) {
			struct range t = stack[--top];

			if (cur < t.hi) {
				EMIT(cur, t.hi, t.scope);
				cur = t.hi;
			}
		}
		if (i == b->n_ranges)
			break;
		if (top > 0 && r.unit > stack[top - 1].unit)
			continue;
		if (top > 0) {
			EMIT(cur > r.lo ? r.lo : cur, r.lo, stack[top - 1].scope);
			if (r.hi > stack[top - 1].hi)
				r.hi = stack[top - 1].hi;
		}
		cur = r.lo;
		stack[top++] = r;
	}
cleanup:
#undef EMIT
	free(stack);
	if (err < 0) {
		free(out);
		return err;
	}
	*ret = out;
	*ret_n = n;
	return 0;
}

static bool native_elf64(const uint8_t *p, size_t size)
{
	return size >= EI_NIDENT && memcmp(p, ELFMAG, SELFMAG) == 0 && p[EI_CLASS] == ELFCLASS64 &&
	       p[EI_DATA] == ELFDATA2LSB;
}

/* libelf rewrites the section headers of compressed sections inside the
 * buffer it reads (flags, size, alignment, once decompressed), so a
 * second build over the same buffer would take compressed bytes for
 * plain ones. A build keeps a copy of each buffer's section header table
 * and puts it back when done: both index_worker.c's first answer and the
 * whole index read the same images. */
struct shdr_copy {
	void *at;
	void *saved;
	size_t len;
};

static void shdr_save(struct shdr_copy *c, void *buf, size_t size)
{
	const Elf64_Ehdr *eh = buf;
	uint64_t n, len;

	*c = (struct shdr_copy){ 0 };
	/* (A table off its 8-byte alignment, which no linker writes, is
	 * left alone: hide_unread_sections reads it in place.) */
	if (!buf || size < sizeof(*eh) || eh->e_shentsize != sizeof(Elf64_Shdr) || !eh->e_shoff ||
	    eh->e_shoff % _Alignof(Elf64_Shdr) || eh->e_shoff > size ||
	    size - eh->e_shoff < sizeof(Elf64_Shdr))
		return;
	n = eh->e_shnum;
	if (n == 0) /* extended numbering: the count is in section 0 */
		memcpy(&n, (const uint8_t *)buf + eh->e_shoff + offsetof(Elf64_Shdr, sh_size),
		       sizeof(n));
	if (n == 0 || n > (size - eh->e_shoff) / sizeof(Elf64_Shdr))
		return;
	len = n * sizeof(Elf64_Shdr);
	c->saved = malloc(len);
	if (!c->saved)
		return;
	c->at = (uint8_t *)buf + eh->e_shoff;
	c->len = len;
	memcpy(c->saved, c->at, len);
}

static void shdr_restore(struct shdr_copy *c)
{
	if (c->saved)
		memcpy(c->at, c->saved, c->len);
	free(c->saved);
	c->saved = NULL;
}

/* Debug sections the index never reads. libdw decompresses every debug
 * section it knows when it opens a file; in glibc's debug files the
 * location lists alone are a sixth of the compressed bytes. Their names
 * are blanked (name offset 0: "") in the saved header table, so libdw
 * passes them by; shdr_restore puts the names back. */
static void hide_unread_sections(struct shdr_copy *c, const void *buf, size_t size)
{
	static const char *const unread[] = {
		".debug_loc", ".debug_loclists", ".debug_macro", ".debug_macinfo",
		".debug_aranges", ".debug_pubnames", ".debug_pubtypes",
		".debug_gnu_pubnames", ".debug_gnu_pubtypes", ".debug_frame",
	};
	const Elf64_Ehdr *eh = buf;
	Elf64_Shdr *sh = c->at;
	size_t n = c->len / sizeof(Elf64_Shdr);
	const Elf64_Shdr *strs;

	if (!c->saved || eh->e_shstrndx >= n)
		return;
	strs = &sh[eh->e_shstrndx];
	if (strs->sh_type != SHT_STRTAB || (strs->sh_flags & SHF_COMPRESSED) ||
	    strs->sh_offset > size || strs->sh_size > size - strs->sh_offset)
		return;
	/* Offset 0 must be the empty name the blanked ones will have. */
	if (strs->sh_size == 0 || ((const char *)buf)[strs->sh_offset] != '\0')
		return;
	for (size_t i = 0; i < n; i++) {
		const char *name;
		size_t room;

		if (sh[i].sh_name >= strs->sh_size)
			continue;
		name = (const char *)buf + strs->sh_offset + sh[i].sh_name;
		room = strs->sh_size - sh[i].sh_name;
		for (size_t k = 0; k < sizeof(unread) / sizeof(unread[0]); k++) {
			size_t len = strlen(unread[k]);

			if (len < room && name[len] == '\0' && memcmp(name, unread[k], len) == 0)
				sh[i].sh_name = 0;
		}
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int line_index_build(void *file, size_t file_size, void *debug, size_t debug_size, void *alt,
		     size_t alt_size, unsigned flags, struct line_index **ret, const char **reason)
{
	return line_index_build_for(file, file_size, debug, debug_size, alt, alt_size, flags, NULL,
				    0, LINE_INDEX_MAX_DIES, NULL, ret, reason);
}

int line_index_build_for(void *file, size_t file_size, void *debug, size_t debug_size, void *alt,
			 size_t alt_size, unsigned flags, const uint64_t *addrs, size_t n_addrs,
			 size_t max_dies, size_t *ret_units, struct line_index **ret,
			 const char **reason)
{
	struct builder b = { .max_dies = max_dies < LINE_INDEX_MAX_DIES ? max_dies : LINE_INDEX_MAX_DIES };
	struct shdr_copy shdrs[3] = { 0 };
	Elf *elf = NULL, *delf = NULL, *aelf = NULL;
	struct lix_row *rows = NULL;
	struct lix_seg *segs = NULL;
	size_t n_rows = 0, n_segs = 0;
	struct line_index *ix = NULL;
	bool any_dwarf = false;
	int err;

	elf_version(EV_CURRENT);
	/* libelf converts foreign byte orders in place; we only read native
	 * files (x86-64). */
	if (!native_elf64(file, file_size)) {
		if (reason)
			*reason = "not a 64-bit little-endian ELF file";
		return -EBADMSG;
	}
	shdr_save(&shdrs[0], file, file_size);
	if (debug && native_elf64(debug, debug_size))
		shdr_save(&shdrs[1], debug, debug_size);
	if (alt && native_elf64(alt, alt_size))
		shdr_save(&shdrs[2], alt, alt_size);
	hide_unread_sections(&shdrs[0], file, file_size);
	hide_unread_sections(&shdrs[1], debug, debug_size);
	hide_unread_sections(&shdrs[2], alt, alt_size);
	elf = elf_memory(file, file_size);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (reason)
			*reason = "libelf cannot read the file";
		err = -EBADMSG;
		goto cleanup;
	}
	if (debug && native_elf64(debug, debug_size)) {
		delf = elf_memory(debug, debug_size);
		if (delf && elf_kind(delf) != ELF_K_ELF) {
			elf_end(delf);
			delf = NULL;
		}
	}
	if (alt && native_elf64(alt, alt_size)) {
		aelf = elf_memory(alt, alt_size);
		if (aelf && elf_kind(aelf) != ELF_K_ELF) {
			elf_end(aelf);
			aelf = NULL;
		}
	}
	if (addrs) {
		b.only = malloc((n_addrs + 1) * sizeof(*b.only));
		if (!b.only) {
			err = -ENOMEM;
			goto cleanup;
		}
		memcpy(b.only, addrs, n_addrs * sizeof(*addrs));
		qsort(b.only, n_addrs, sizeof(*b.only), cmp_u64);
		b.n_only = n_addrs;
	}
	err = read_symbols(&b, elf);
	if (err < 0)
		goto cleanup;
	if (delf || !(flags & LINE_INDEX_SYMBOLS_ONLY)) {
		err = read_dwarf(&b, delf ? delf : elf, aelf, &any_dwarf);
		if (err < 0)
			goto cleanup;
	}
	if (!any_dwarf && delf && !(flags & LINE_INDEX_SYMBOLS_ONLY)) {
		err = read_dwarf(&b, elf, aelf, &any_dwarf);
		if (err < 0)
			goto cleanup;
	}
	if (!any_dwarf && !(flags & LINE_INDEX_SYMBOLS_ONLY)) {
		err = read_pclntab(&b, elf);
		if (err < 0)
			goto cleanup;
	}
	err = flatten_rows(&b, &rows, &n_rows);
	if (err < 0)
		goto cleanup;
	err = flatten_scopes(&b, &segs, &n_segs);
	if (err < 0)
		goto cleanup;
	if (n_rows > UINT32_MAX || n_segs > UINT32_MAX) {
		err = -E2BIG;
		goto cleanup;
	}
	if (b.pool_size == 0) {
		uint32_t off;

		err = intern_off(&b, "", &off);
		if (err < 0)
			goto cleanup;
	}
	ix = line_index_pack(n_rows || n_segs ? LIX_FLAG_LINES : 0, b.scopes, (uint32_t)b.n_scopes,
			     segs, (uint32_t)n_segs, rows, (uint32_t)n_rows, b.syms,
			     (uint32_t)b.n_syms, b.files, (uint32_t)b.n_files, b.pool,
			     (uint32_t)b.pool_size);
	if (!ix) {
		err = -ENOMEM;
		goto cleanup;
	}
	*ret = ix;
	if (ret_units)
		*ret_units = b.units_read;
	err = 0;
cleanup:
	if (err == -E2BIG && reason)
		*reason = "debug information over the index caps";
	free(rows);
	free(segs);
	builder_done(&b);
	elf_end(aelf);
	elf_end(delf);
	elf_end(elf);
	for (int i = 0; i < 3; i++)
		shdr_restore(&shdrs[i]);
	return err;
}
