/* model_symbolize.c - a raw stack joins a model: every user frame is
 * symbolized from the cache (function, file, line and the inline chain
 * when the file's source index is ready; the symbol table's name when
 * only that is; basename+0xOFFSET when the file is not analysed), kernel
 * frames keep the name the sensor's symbols gave them at ingest. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "demangle.h"
#include "export.h"
#include "line_index.h"
#include "profile.h"
#include "rawstack.h"
#include "symbolize.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = s ? strlen(s) : 0, m = strlen(suffix);

	return n >= m && !memcmp(s + n - m, suffix, m);
}

/* One function and line for a frame known only by name (and system
 * name: NULL, the name). */
static int name_only(struct pmodel *m, uint32_t mapping, uint64_t address,
		     enum pm_frame_type type, const char *name, const char *system_name,
		     uint32_t *ret)
{
	struct pm_line l = { 0 };

	if (pm_function(m, name, system_name ? system_name : name, NULL, &l.function) < 0)
		return -ENOMEM;
	return pm_location(m, mapping, address, type, &l, 1, ret);
}

static int user_frame(struct pmodel *m, const struct symbolize_ctx *sc, const struct rawframe *f,
		      bool return_address, uint32_t *ret)
{
	struct fileid id;
	struct symbolize_file sf;
	struct symbolized sy;
	struct pm_line lines[LINE_INDEX_MAX_FRAMES];
	enum pm_frame_type type = PM_FRAME_NATIVE;
	const char *outer_raw = NULL, *symbol = NULL;
	char *outer = NULL;
	const char *path;
	char build_id[2 * 64 + 1] = "", fallback[PROFILE_MAX_NAME];
	uint32_t mapping;

	memcpy(id.bytes, f->file_id, FILEID_LEN);
	path = registry_file_path(sc->reg, &id);
	symbolize_file_init(&sf, sc, &id);
	if (sf.symtab) {
		size_t bl = 0;
		const uint8_t *b = symtab_build_id(sf.symtab, &bl);

		if (b && bl && bl <= 64)
			bytes_to_hex(b, bl, build_id);
	}
	if (pm_mapping(m, f->file_id, path, build_id, 0, &mapping) < 0)
		return -ENOMEM;
	mapping++; /* locations hold index + 1 */
	if (pm_find_location(m, mapping, f->address, ret))
		return 0;
	symbolize_addr(&sf, f->address,
		       SYMBOLIZE_FILE_OFFSET | SYMBOLIZE_LINES | (return_address ? SYMBOLIZE_RETURN : 0),
		       &sy);
	if (sy.has_symbol && sy.symbol.name && *sy.symbol.name)
		symbol = sy.symbol.name;
	/* The containing function is named as folded stacks name it (the
	 * file's own symbol table, demangled), so every output agrees; a
	 * debug file's table can prefer an alias (__GI_mprotect for
	 * mprotect). Inlined frames come from the index alone. */
	if (sy.n_frames && symbol) {
		outer_raw = symbol;
		outer = demangle(symbol); /* NULL: not mangled */
	}
	for (size_t i = 0; i < sy.n_frames; i++) {
		const struct line_frame *lf = &sy.frames[i];
		const char *fn = lf->function ? lf->function : lf->raw;
		const char *raw = lf->raw ? lf->raw : fn;

		if (i == sy.n_frames - 1 && outer_raw) {
			fn = outer ? outer : outer_raw;
			raw = outer_raw;
		}
		if (!fn || !*fn)
			fn = raw = "[unknown]";
		if (pm_function(m, fn, raw, lf->file, &lines[i].function) < 0) {
			free(outer);
			return -ENOMEM;
		}
		lines[i].line = lf->line;
	}
	free(outer);
	if (sy.n_frames && ends_with(sy.frames[0].file, ".go"))
		type = PM_FRAME_GO;
	if (sy.n_frames)
		return pm_location(m, mapping, f->address, type, lines, sy.n_frames, ret);
	return name_only(m, mapping, f->address, type,
			 symbolize_frame_name(sc->reg, &id, symbol, f->address, fallback,
					      sizeof(fallback)),
			 NULL, ret);
}

/* A frame named at ingest: kernel, or interpreter (its key is a hash of
 * the name and system name, so equal keys are equal frames). */
static int named_frame(struct pmodel *m, const struct rawframe *f, enum pm_frame_type type,
		       uint32_t *ret)
{
	char name[RAWSTACK_MAX_NAME + 1] = "[unknown]", sys[RAWSTACK_MAX_NAME + 1] = "";

	if (pm_find_location(m, 0, f->address, ret))
		return 0;
	if (f->name_len) {
		memcpy(name, f->name, f->name_len);
		name[f->name_len] = '\0';
	}
	if (f->system_name_len) {
		memcpy(sys, f->system_name, f->system_name_len);
		sys[f->system_name_len] = '\0';
	}
	return name_only(m, 0, f->address, type, name, f->system_name_len ? sys : NULL, ret);
}

int pm_add_export_sample(struct pmodel *m, const struct symbolize_ctx *sc, const struct export_sample *s)
{
	uint32_t locs[RAWSTACK_MAX_FRAMES];
	struct pm_process p = { .pid = s->pid, .start = s->start };
	struct pm_sample smp = {
		.tid = s->tid,
		.count = s->count,
		.weight = s->weight,
		.first_ns = s->first_ns,
		.last_ns = s->last_ns ? s->last_ns : s->first_ns,
	};
	struct rawstack_iter it;
	struct rawframe f;
	size_t n = 0;
	bool user_seen = false;
	const char *exe_base;
	int r;

	r = rawstack_iter_init(&it, s->raw, s->raw_len);
	if (r < 0)
		return r;
	while ((r = rawstack_next(&it, &f)) > 0) {
		if (f.kind == RAW_KERNEL) {
			r = named_frame(m, &f, PM_FRAME_KERNEL, &locs[n]);
		} else if (rawframe_interp_of(f.kind)) {
			r = named_frame(m, &f, PM_FRAME_INTERP + rawframe_interp_of(f.kind) - 1,
					&locs[n]);
			user_seen = true;
		} else if (f.kind == RAW_USER_FILE) {
			/* Every user frame but the leaf is a return address. */
			r = user_frame(m, sc, &f, user_seen, &locs[n]);
			user_seen = true;
		} else {
			r = pm_find_location(m, 0, f.address, &locs[n])
				    ? 0
				    : name_only(m, 0, f.address, PM_FRAME_NATIVE, "[unknown]",
						NULL, &locs[n]);
			user_seen = true;
		}
		if (r < 0)
			return r;
		n++;
	}
	if (r < 0)
		return r;
	exe_base = s->exe_path ? strrchr(s->exe_path, '/') : NULL;
	exe_base = exe_base ? exe_base + 1 : s->exe_path;
	if (pm_stack(m, locs, n, &smp.stack) < 0 || pm_string(m, s->comm, &p.comm) < 0 ||
	    pm_string(m, exe_base, &p.exe_name) < 0 || pm_string(m, s->exe_path, &p.exe_path) < 0 ||
	    pm_string(m, s->container_id, &p.container_id) < 0 ||
	    pm_string(m, s->host, &p.host_name) < 0 || pm_string(m, s->host_id, &p.host_id) < 0 ||
	    pm_string(m, s->pod_uid, &p.pod_uid) < 0 ||
	    pm_string(m, s->command_line, &p.command_line) < 0 ||
	    pm_string(m, s->thread_name, &smp.thread_name) < 0 ||
	    pm_process(m, &p, &smp.process) < 0)
		return -ENOMEM;
	if (s->span && pm_link(m, s->span, &smp.link) < 0)
		return -ENOMEM;
	if (s->frequency_hz && !m->period_ns)
		m->period_ns = 1000000000ull / s->frequency_hz;
	return pm_sample(m, &smp);
}
