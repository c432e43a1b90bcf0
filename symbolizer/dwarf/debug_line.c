/* debug_line.c - reads one DWARF 2-5 line program (see debug_line.h).
 *
 * File names are built as llvm-symbolizer builds them
 * (DWARFDebugLine::Prologue::getFileNameByIndex with absolute paths):
 *   absolute name                       -> the name
 *   otherwise                           -> [comp_dir /] dir / name
 * where comp_dir is prepended only when dir is relative (also for DWARF 5
 * directory 0, which is itself the compilation directory: LLVM 14 does
 * that, later versions do not), "/" is added
 * between parts that do not already have one, and nothing is normalised
 * ("./libio/./libio/fileops.c" stays as it is). DWARF < 5 numbers files
 * from 1 and directories from 1 (0 = the compilation directory).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "debug_line.h"

/* DWARF constants used here (from the DWARF 5 standard). */
enum {
	DW_LNS_copy = 1, DW_LNS_advance_pc, DW_LNS_advance_line, DW_LNS_set_file,
	DW_LNS_set_column, DW_LNS_negate_stmt, DW_LNS_set_basic_block, DW_LNS_const_add_pc,
	DW_LNS_fixed_advance_pc, DW_LNS_set_prologue_end, DW_LNS_set_epilogue_begin,
	DW_LNS_set_isa,
	DW_LNE_end_sequence = 1, DW_LNE_set_address, DW_LNE_define_file, DW_LNE_set_discriminator,
	DW_LNCT_path = 1, DW_LNCT_directory_index,
	DW_FORM_block2 = 0x03, DW_FORM_block4 = 0x04, DW_FORM_data2 = 0x05, DW_FORM_data4 = 0x06,
	DW_FORM_data8 = 0x07, DW_FORM_string = 0x08, DW_FORM_block = 0x09, DW_FORM_block1 = 0x0a,
	DW_FORM_data1 = 0x0b, DW_FORM_sdata = 0x0d, DW_FORM_strp = 0x0e, DW_FORM_udata = 0x0f,
	DW_FORM_data16 = 0x1e, DW_FORM_line_strp = 0x1f,
	DW_FORM_strx = 0x1a, DW_FORM_strx1 = 0x25, DW_FORM_strx2, DW_FORM_strx3, DW_FORM_strx4,
};

struct cur {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t rd(struct cur *c, size_t n)
{
	uint64_t v = 0;

	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		c->p = c->end;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += n;
	return v;
}

static uint64_t uleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (!c->bad) {
		uint8_t b;

		if (c->p >= c->end) {
			c->bad = true;
			break;
		}
		b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int64_t sleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b = 0;

	while (!c->bad) {
		if (c->p >= c->end) {
			c->bad = true;
			return 0;
		}
		b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

static const char *cstr(struct cur *c)
{
	const uint8_t *nul;
	const char *s;

	if (c->bad)
		return NULL;
	nul = memchr(c->p, 0, (size_t)(c->end - c->p));
	if (!nul) {
		c->bad = true;
		c->p = c->end;
		return NULL;
	}
	s = (const char *)c->p;
	c->p = nul + 1;
	return s;
}

/* A NUL-terminated string at off of a string section, or NULL. */
static const char *sec_str(const uint8_t *sec, size_t size, uint64_t off)
{
	if (!sec || off >= size || !memchr(sec + off, 0, size - off))
		return NULL;
	return (const char *)sec + off;
}

/* Skips or reads one attribute value of the given form. A string form
 * sets *ret_str, a constant form *ret_val. Unknown forms make the entry
 * format unusable (-EBADMSG: we cannot know their size). */
static int read_form(struct cur *c, uint64_t form, bool dwarf64,
		     const struct debug_line_sections *s, const char **ret_str, uint64_t *ret_val)
{
	size_t osz = dwarf64 ? 8 : 4;

	switch (form) {
	case DW_FORM_string:
		*ret_str = cstr(c);
		break;
	case DW_FORM_line_strp:
		*ret_str = sec_str(s->line_str, s->line_str_size, rd(c, osz));
		break;
	case DW_FORM_strp:
		*ret_str = sec_str(s->str, s->str_size, rd(c, osz));
		break;
	case DW_FORM_strx:
	case DW_FORM_udata:
		*ret_val = uleb(c);
		break;
	case DW_FORM_sdata:
		*ret_val = (uint64_t)sleb(c);
		break;
	case DW_FORM_data1:
	case DW_FORM_strx1:
		*ret_val = rd(c, 1);
		break;
	case DW_FORM_data2:
	case DW_FORM_strx2:
		*ret_val = rd(c, 2);
		break;
	case DW_FORM_strx3:
		*ret_val = rd(c, 3);
		break;
	case DW_FORM_data4:
	case DW_FORM_strx4:
		*ret_val = rd(c, 4);
		break;
	case DW_FORM_data8:
		*ret_val = rd(c, 8);
		break;
	case DW_FORM_data16:
		rd(c, 8);
		rd(c, 8);
		break;
	case DW_FORM_block1:
	case DW_FORM_block2:
	case DW_FORM_block4:
	case DW_FORM_block: {
		uint64_t n = form == DW_FORM_block1 ? rd(c, 1)
			   : form == DW_FORM_block2 ? rd(c, 2)
			   : form == DW_FORM_block4 ? rd(c, 4) : uleb(c);

		if (n > (uint64_t)(c->end - c->p)) {
			c->bad = true;
			c->p = c->end;
		} else {
			c->p += n;
		}
		break;
	}
	default:
		return -EBADMSG;
	}
	return c->bad ? -EBADMSG : 0;
}

static bool is_abs(const char *p)
{
	return p && p[0] == '/';
}

/* llvm::sys::path::append for POSIX paths: joins with one "/" unless the
 * path already ends in one (then the part's leading "/"s are dropped);
 * empty parts add nothing. Returns false when out of room. */
static bool path_append(char *buf, size_t size, size_t *len, const char *part)
{
	size_t n;

	if (!part || !*part)
		return true;
	if (*len && buf[*len - 1] == '/') {
		while (*part == '/')
			part++;
	} else if (*len && part[0] != '/') {
		if (*len + 1 >= size)
			return false;
		buf[(*len)++] = '/';
	}
	n = strlen(part);
	if (*len + n >= size)
		return false;
	memcpy(buf + *len, part, n);
	*len += n;
	buf[*len] = '\0';
	return true;
}

static char *make_path(uint16_t version, const char *comp_dir, const char *dir, bool dir0,
		       const char *name)
{
	char buf[DEBUG_LINE_MAX_PATH];
	size_t len = 0;

	if (!name)
		return NULL;
	buf[0] = '\0';
	if (is_abs(name))
		return strndup(name, DEBUG_LINE_MAX_PATH - 1);
	(void)version;
	(void)dir0;
	if (comp_dir && *comp_dir && !is_abs(dir))
		if (!path_append(buf, sizeof(buf), &len, comp_dir))
			return NULL;
	if (!path_append(buf, sizeof(buf), &len, dir) || !path_append(buf, sizeof(buf), &len, name))
		return NULL;
	return strdup(buf);
}

struct entry_format {
	uint64_t type, form;
};

/* A DWARF 5 directory or file table: count entries of the given format.
 * Paths go to names[], directory indexes to dirs[] (either may be NULL). */
static int read_v5_table(struct cur *c, bool dwarf64, const struct debug_line_sections *s,
			 const char ***ret_names, uint64_t **ret_dirs, size_t *ret_n)
{
	struct entry_format fmt[16];
	uint8_t n_fmt = (uint8_t)rd(c, 1);
	uint64_t count;
	const char **names = NULL;
	uint64_t *dirs = NULL;
	int err = -EBADMSG;

	if (n_fmt > 16)
		return -EBADMSG;
	for (uint8_t i = 0; i < n_fmt; i++) {
		fmt[i].type = uleb(c);
		fmt[i].form = uleb(c);
	}
	count = uleb(c);
	if (c->bad || count > DEBUG_LINE_MAX_FILES || count > (uint64_t)(c->end - c->p) + 1)
		return -EBADMSG;
	names = calloc(count + 1, sizeof(*names));
	dirs = calloc(count + 1, sizeof(*dirs));
	if (!names || !dirs) {
		err = -ENOMEM;
		goto fail;
	}
	for (uint64_t k = 0; k < count; k++) {
		for (uint8_t i = 0; i < n_fmt; i++) {
			const char *str = NULL;
			uint64_t val = 0;

			if (read_form(c, fmt[i].form, dwarf64, s, &str, &val) < 0)
				goto fail;
			if (fmt[i].type == DW_LNCT_path)
				names[k] = str;
			else if (fmt[i].type == DW_LNCT_directory_index)
				dirs[k] = val;
		}
	}
	*ret_names = names;
	*ret_dirs = dirs;
	*ret_n = (size_t)count;
	return 0;
fail:
	free(names);
	free(dirs);
	return err;
}

/* What to keep (debug_line_read_some). start: the first row of the
 * current sequence; last: the address of the row before; backwards: the
 * sequence went back (a whole table drops such a sequence: so does this). */
struct seq_filter {
	bool (*keep)(uint64_t lo, uint64_t hi, void *ctx);
	void *ctx;
	size_t start;
	uint64_t last;
	bool backwards;
};

static int add_row(struct debug_line_table *t, size_t *cap, size_t max_rows, uint64_t addr,
		   uint64_t file, uint64_t line, bool end, struct seq_filter *f)
{
	if (f->keep && t->n_rows > f->start) {
		struct debug_line_row *prev = &t->rows[t->n_rows - 1];

		if (addr < f->last)
			f->backwards = true;
		/* The row before covers [prev->addr, addr): not needed when no
		 * address asked about is there, unless it starts the sequence
		 * (its bounds decide overlaps). Replaced by this row. */
		if (t->n_rows - 1 > f->start && !f->keep(prev->addr, addr, f->ctx))
			t->n_rows--;
	}
	f->last = addr;
	if (t->n_rows == *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		struct debug_line_row *p;

		if (t->n_rows >= max_rows)
			return -E2BIG;
		if (ncap > max_rows)
			ncap = max_rows;
		p = realloc(t->rows, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		t->rows = p;
		*cap = ncap;
	}
	t->rows[t->n_rows++] = (struct debug_line_row){
		.addr = addr,
		.file = file < t->n_files ? (uint32_t)file : UINT32_MAX,
		.line = line > UINT32_MAX ? 0 : (uint32_t)line,
		.end_sequence = end,
	};
	if (end && f->keep) {
		/* A sequence that is not wanted gives its rows back at once,
		 * so the table holds only what is kept. */
		if (f->backwards || !f->keep(t->rows[f->start].addr, addr, f->ctx))
			t->n_rows = f->start;
		f->start = t->n_rows;
		f->backwards = false;
	}
	return 0;
}

int debug_line_read(const struct debug_line_sections *s, uint64_t offset, const char *comp_dir,
		    size_t max_rows, struct debug_line_table *t)
{
	return debug_line_read_some(s, offset, comp_dir, max_rows, NULL, NULL, t);
}

int debug_line_read_some(const struct debug_line_sections *s, uint64_t offset,
			 const char *comp_dir, size_t max_rows,
			 bool (*keep)(uint64_t lo, uint64_t hi, void *ctx), void *ctx,
			 struct debug_line_table *t)
{
	struct seq_filter filter = { .keep = keep, .ctx = ctx };
	struct cur c = { 0 }, prog;
	uint64_t unit_length, header_length;
	bool dwarf64 = false;
	uint8_t min_inst, default_is_stmt, line_range, opcode_base, addr_size = 8;
	int8_t line_base;
	uint8_t std_lens[256] = { 0 };
	const char **dir_names = NULL, **file_names = NULL;
	uint64_t *dir_idx = NULL, *file_dirs = NULL;
	size_t n_dirs = 0, n_files = 0, cap = 0;
	int err = -EBADMSG;

	memset(t, 0, sizeof(*t));
	if (!s->line || offset >= s->line_size)
		return -EBADMSG;
	c.p = s->line + offset;
	c.end = s->line + s->line_size;
	unit_length = rd(&c, 4);
	if (unit_length == 0xffffffffu) {
		dwarf64 = true;
		unit_length = rd(&c, 8);
	} else if (unit_length >= 0xfffffff0u) {
		return -EBADMSG;
	}
	if (c.bad || unit_length > (uint64_t)(c.end - c.p))
		return -EBADMSG;
	c.end = c.p + unit_length;
	t->version = (uint16_t)rd(&c, 2);
	if (t->version < 2 || t->version > 5)
		return -EBADMSG;
	if (t->version >= 5) {
		addr_size = (uint8_t)rd(&c, 1);
		rd(&c, 1); /* segment selector size */
		if (addr_size != 4 && addr_size != 8)
			return -EBADMSG;
	}
	header_length = rd(&c, dwarf64 ? 8 : 4);
	if (c.bad || header_length > (uint64_t)(c.end - c.p))
		return -EBADMSG;
	prog.p = c.p + header_length;
	prog.end = c.end;
	prog.bad = false;
	c.end = prog.p; /* the header */
	min_inst = (uint8_t)rd(&c, 1);
	if (t->version >= 4)
		rd(&c, 1); /* maximum_operations_per_instruction: 1 on every target we read */
	default_is_stmt = (uint8_t)rd(&c, 1);
	(void)default_is_stmt;
	line_base = (int8_t)rd(&c, 1);
	line_range = (uint8_t)rd(&c, 1);
	opcode_base = (uint8_t)rd(&c, 1);
	if (c.bad || line_range == 0 || opcode_base == 0)
		return -EBADMSG;
	for (unsigned i = 1; i < opcode_base; i++)
		std_lens[i] = (uint8_t)rd(&c, 1);
	if (t->version >= 5) {
		err = read_v5_table(&c, dwarf64, s, &dir_names, &dir_idx, &n_dirs);
		if (err < 0)
			goto cleanup;
		err = read_v5_table(&c, dwarf64, s, &file_names, &file_dirs, &n_files);
		if (err < 0)
			goto cleanup;
	} else {
		size_t cap_d = 0, cap_f = 0;

		/* Directories 1..n, then files 1..n; each list ends with an
		 * empty string. Index 0 of each stays NULL here. */
		for (;;) {
			const char *d = cstr(&c);

			if (!d || !*d)
				break;
			if (n_dirs + 1 >= cap_d) {
				const char **p;

				cap_d = cap_d ? cap_d * 2 : 16;
				if (cap_d > DEBUG_LINE_MAX_FILES)
					goto cleanup;
				p = realloc(dir_names, cap_d * sizeof(*p));
				if (!p) {
					err = -ENOMEM;
					goto cleanup;
				}
				dir_names = p;
			}
			dir_names[n_dirs++] = d;
		}
		for (;;) {
			const char *f = cstr(&c);
			uint64_t di;

			if (!f || !*f)
				break;
			di = uleb(&c);
			uleb(&c); /* mtime */
			uleb(&c); /* length */
			if (n_files + 2 >= cap_f) {
				const char **p;
				uint64_t *q;

				cap_f = cap_f ? cap_f * 2 : 16;
				if (cap_f > DEBUG_LINE_MAX_FILES)
					goto cleanup;
				p = realloc(file_names, cap_f * sizeof(*p));
				if (p)
					file_names = p;
				q = realloc(file_dirs, cap_f * sizeof(*q));
				if (q)
					file_dirs = q;
				if (!p || !q) {
					err = -ENOMEM;
					goto cleanup;
				}
			}
			if (n_files == 0) {
				file_names[0] = NULL; /* file 0 does not exist before DWARF 5 */
				file_dirs[0] = 0;
				n_files = 1;
			}
			file_names[n_files] = f;
			file_dirs[n_files++] = di;
		}
		if (c.bad)
			goto cleanup;
	}
	t->files = calloc(n_files + 1, sizeof(*t->files));
	if (!t->files) {
		err = -ENOMEM;
		goto cleanup;
	}
	t->n_files = n_files;
	for (size_t i = 0; i < n_files; i++) {
		const char *dir = NULL;
		uint64_t di = file_dirs[i];
		bool dir0 = false;

		if (!file_names[i])
			continue;
		if (t->version >= 5) {
			if (di < n_dirs)
				dir = dir_names[di];
			dir0 = di == 0;
		} else if (di > 0 && di <= n_dirs) {
			dir = dir_names[di - 1];
		}
		t->files[i] = make_path(t->version, comp_dir, dir, dir0, file_names[i]);
	}

	/* The line number program. */
	{
		uint64_t addr = 0, file = 1, line = 1;

		while (prog.p < prog.end && !prog.bad) {
			uint8_t op = (uint8_t)rd(&prog, 1);

			if (op >= opcode_base) {
				uint8_t adj = op - opcode_base;

				addr += (uint64_t)(adj / line_range) * min_inst;
				line += (int64_t)line_base + adj % line_range;
				err = add_row(t, &cap, max_rows, addr, file, line, false, &filter);
				if (err < 0)
					goto cleanup;
				continue;
			}
			switch (op) {
			case 0: {
				uint64_t len = uleb(&prog);
				const uint8_t *next;
				uint8_t sub;

				if (prog.bad || len == 0 || len > (uint64_t)(prog.end - prog.p)) {
					err = -EBADMSG;
					goto cleanup;
				}
				next = prog.p + len;
				sub = (uint8_t)rd(&prog, 1);
				if (sub == DW_LNE_end_sequence) {
					err = add_row(t, &cap, max_rows, addr, file, line, true, &filter);
					if (err < 0)
						goto cleanup;
					addr = 0;
					file = 1;
					line = 1;
				} else if (sub == DW_LNE_set_address) {
					if (len - 1 == 8)
						addr = rd(&prog, 8);
					else if (len - 1 == 4)
						addr = rd(&prog, 4);
				}
				/* define_file (DWARF < 5) is deprecated and unused by
				 * current compilers; its files get no name. */
				prog.p = next;
				break;
			}
			case DW_LNS_copy:
				err = add_row(t, &cap, max_rows, addr, file, line, false, &filter);
				if (err < 0)
					goto cleanup;
				break;
			case DW_LNS_advance_pc:
				addr += uleb(&prog) * min_inst;
				break;
			case DW_LNS_advance_line:
				line += (uint64_t)sleb(&prog);
				break;
			case DW_LNS_set_file:
				file = uleb(&prog);
				break;
			case DW_LNS_const_add_pc:
				addr += (uint64_t)((255 - opcode_base) / line_range) * min_inst;
				break;
			case DW_LNS_fixed_advance_pc:
				addr += rd(&prog, 2);
				break;
			default:
				/* Standard opcodes we do not need, and unknown
				 * ones: skip their ULEB operands as the header
				 * says. */
				for (unsigned i = 0; i < std_lens[op]; i++)
					uleb(&prog);
				break;
			}
		}
		(void)addr_size;
	}
	err = prog.bad ? -EBADMSG : 0;
cleanup:
	free(dir_names);
	free(dir_idx);
	free(file_names);
	free(file_dirs);
	return err;
}

void debug_line_table_done(struct debug_line_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; t->files && i < t->n_files; i++)
		free(t->files[i]);
	free(t->files);
	free(t->rows);
	memset(t, 0, sizeof(*t));
}
