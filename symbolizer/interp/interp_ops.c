/* interp_ops.c - the interpreter ops table, a session's Instances and the
 * splice (interp_ops.h). A new runtime adds its entry to `table`. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cpython_ops.h"
#include "hotspot_ops.h"
#include "interp_kinds.h"
#include "interp_ops.h"
#include "perl_ops.h"
#include "php_ops.h"
#include "ruby_ops.h"
#include "v8_ops.h"

static const struct interp_ops *const table[] = {
	&cpython_ops,
	&hotspot_ops,
	&ruby_ops,
	&perl_ops,
	&php_ops,
	&v8_ops,
};
#define N_OPS (sizeof(table) / sizeof(table[0]))

const struct interp_ops *interp_ops_of(uint32_t kind)
{
	for (size_t i = 0; i < N_OPS; i++)
		if (table[i]->kind == kind)
			return table[i];
	return NULL;
}

const struct interp_ops *interp_ops_for_path(const char *path)
{
	for (size_t i = 0; i < N_OPS; i++)
		if (table[i]->wants(path))
			return table[i];
	return NULL;
}

const char *interp_kind_name(uint32_t kind)
{
	return sonde_interp_kind_name(kind);
}

uint32_t interp_kinds_all(void)
{
	uint32_t mask = 0;

	for (size_t i = 0; i < N_OPS; i++)
		mask |= 1u << table[i]->kind;
	return mask;
}

static int kind_of_name(const char *name, size_t len)
{
	for (size_t i = 0; i < N_OPS; i++) {
		const char *n = interp_kind_name(table[i]->kind);

		if (n && strlen(n) == len && !memcmp(n, name, len))
			return (int)table[i]->kind;
	}
	return -EINVAL;
}

int interp_kinds_parse(const char *list, uint32_t *ret_mask)
{
	uint32_t mask = 0;
	const char *p = list;

	if (!strcmp(list, "all")) {
		*ret_mask = interp_kinds_all();
		return 0;
	}
	if (!strcmp(list, "none")) {
		*ret_mask = 0;
		return 0;
	}
	for (;;) {
		size_t len = strcspn(p, ",");
		int kind = kind_of_name(p, len);

		if (kind < 0)
			return -EINVAL;
		mask |= 1u << kind;
		if (!p[len])
			break;
		p += len + 1;
	}
	*ret_mask = mask;
	return 0;
}

struct interp_session {
	void *inst[N_OPS]; /* by index in table; NULL until a record */
};

struct interp_session *interp_session_new(void)
{
	return calloc(1, sizeof(struct interp_session));
}

void interp_session_free(struct interp_session *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < N_OPS; i++)
		table[i]->instance_free(s->inst[i]);
	free(s);
}

static int index_of(uint32_t kind)
{
	for (size_t i = 0; i < N_OPS; i++)
		if (table[i]->kind == kind)
			return (int)i;
	return -1;
}

int interp_session_put_record(struct interp_session *s, uint32_t kind, uint32_t pid,
			      const void *data, size_t len)
{
	int i = index_of(kind);

	if (i < 0)
		return -ENOENT;
	if (!s->inst[i] && !(s->inst[i] = table[i]->instance_new()))
		return -ENOMEM;
	return table[i]->record_put(s->inst[i], pid, data, len);
}

size_t interp_session_frame_name(const struct interp_session *s, uint32_t pid,
				 const struct interp_frame *f, char *buf, size_t len)
{
	int i = index_of(f->kind);
	size_t n;

	if (i < 0) {
		n = strlen("[unknown]");
		if (n >= len)
			n = len - 1;
		memcpy(buf, "[unknown]", n);
		buf[n] = '\0';
		return n;
	}
	return table[i]->frame_name(s ? s->inst[i] : NULL, pid, f, buf, len);
}

size_t interp_session_frame_system_name(const struct interp_session *s, uint32_t pid,
					const struct interp_frame *f, char *buf, size_t len)
{
	int i = index_of(f->kind);

	if (!len)
		return 0;
	buf[0] = '\0';
	if (i < 0 || !table[i]->frame_system_name)
		return 0;
	return table[i]->frame_system_name(s ? s->inst[i] : NULL, pid, f, buf, len);
}

int interp_session_expand(const struct interp_session *s, uint32_t pid,
			  const struct interp_frame *frames, uint32_t n, struct interp_frame **ret,
			  uint32_t *ret_n)
{
	struct interp_frame *out = malloc((n ? n : 1) * sizeof(*out)), *grown;
	uint32_t cap = n ? n : 1, at = 0;

	if (!out)
		return -ENOMEM;
	for (uint32_t k = 0; k < n && at < INTERP_MAX_FRAMES; k++) {
		int i = index_of(frames[k].kind);
		struct interp_frame one[INTERP_MAX_FRAMES];
		uint32_t m = 1;

		if (i >= 0 && table[i]->frame_expand)
			m = table[i]->frame_expand(s ? s->inst[i] : NULL, pid, &frames[k], one,
						   INTERP_MAX_FRAMES - at);
		else
			one[0] = frames[k];
		if (m == 0 || m > INTERP_MAX_FRAMES - at) {
			/* An entry's bug: the frame as it came. */
			m = 1;
			one[0] = frames[k];
		}
		if (at + m > cap) {
			cap = at + m > 2 * cap ? at + m : 2 * cap;
			grown = realloc(out, cap * sizeof(*out));
			if (!grown) {
				free(out);
				return -ENOMEM;
			}
			out = grown;
		}
		memcpy(out + at, one, m * sizeof(*one));
		at += m;
	}
	*ret = out;
	*ret_n = at;
	return 0;
}

/* The native frame a frame of a JIT kind stands for, + 1; 0: none. */
static uint32_t frame_pos(const struct interp_ops *ops, const struct interp_frame *f)
{
	return ops && ops->jit ? SONDE_INTERP_JIT_POS(f->words[0]) : 0;
}

/* The frames of idx[from, to) root first into order. */
static void splice_run(const uint32_t *idx, uint32_t from, uint32_t to, uint32_t *order,
		       uint32_t *n_order)
{
	for (uint32_t k = to; k-- > from;)
		order[(*n_order)++] = INTERP_ORDER_FRAME | idx[k];
}

/* The frames standing for native frame i (position i + 1), root first. */
static bool splice_at(const struct interp_ops *ops, const struct interp_frame *frames,
		      uint32_t n_frames, uint32_t i, uint32_t *order, uint32_t *n_order)
{
	bool any = false;

	for (uint32_t k = n_frames; k-- > 0;) {
		if (frame_pos(ops, &frames[k]) == i + 1) {
			order[(*n_order)++] = INTERP_ORDER_FRAME | k;
			any = true;
		}
	}
	return any;
}

void interp_splice(const char *const *syms, uint32_t n_native, const struct interp_frame *frames,
		   uint32_t n_frames, uint32_t *order, uint32_t *n_order)
{
	interp_splice_with(n_frames ? interp_ops_of(frames[0].kind) : NULL, syms, n_native, frames,
			   n_frames, order, n_order);
}

void interp_splice_with(const struct interp_ops *ops, const char *const *syms, uint32_t n_native,
			const struct interp_frame *frames, uint32_t n_frames, uint32_t *order,
			uint32_t *n_order)
{
	const char *splice = ops ? ops->splice_symbol : NULL;
	uint32_t bounds[INTERP_MAX_FRAMES + 1], idx[INTERP_MAX_FRAMES];
	uint32_t n_idx = 0, n_runs = 0, evals = 0, seen = 0;

	if (n_frames > INTERP_MAX_FRAMES)
		n_frames = INTERP_MAX_FRAMES;
	/* Frames with a native position (a JIT kind's) replace that frame;
	 * the others are split into runs for the splice symbol's frames. */
	for (uint32_t i = 0; i < n_frames; i++) {
		uint32_t pos = frame_pos(ops, &frames[i]);

		if (pos == 0 || pos > n_native)
			idx[n_idx++] = i;
	}
	for (uint32_t i = 0; splice && i < n_native; i++)
		if (syms[i] && !strcmp(syms[i], splice))
			evals++;
	bounds[0] = 0;
	for (uint32_t i = 0; i < n_idx; i++)
		if ((ops && ops->frame_ends_run(&frames[idx[i]])) || i + 1 == n_idx)
			bounds[++n_runs] = i + 1;
	for (uint32_t i = n_native; i-- > 0;) {
		if (ops && ops->jit && splice_at(ops, frames, n_frames, i, order, n_order))
			continue;
		if (n_runs && splice && syms[i] && !strcmp(syms[i], splice)) {
			if (++seen == evals) {
				splice_run(idx, 0, bounds[n_runs], order, n_order);
				n_runs = 0;
			} else {
				splice_run(idx, bounds[n_runs - 1], bounds[n_runs], order, n_order);
				n_runs--;
			}
			continue;
		}
		order[(*n_order)++] = i;
	}
	if (n_runs)
		splice_run(idx, 0, bounds[n_runs], order, n_order);
}
