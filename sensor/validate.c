/* validate.c - checks on what the symbolizer sends (validate.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fileid.h"
#include "interp_kinds.h"
#include "validate.h"

static int refuse(const char **ret_reason, const char *reason)
{
	if (ret_reason)
		*ret_reason = reason;
	return -EBADMSG;
}

/* A protobuf string that is set, non-empty and shorter than size. */
static bool name_ok(const char *s, size_t size)
{
	return s && s[0] && strnlen(s, size) < size;
}

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

int validate_file_id(const ProtobufCBinaryData *id, const char **ret_reason)
{
	if (!id || id->len != FILEID_LEN)
		return refuse(ret_reason, "file ID is not 16 bytes");
	return 0;
}

static const struct validate_probe_def *find_def(const struct validate_probe_def *defs,
						 size_t n_defs, const char *name)
{
	for (size_t i = 0; i < n_defs; i++)
		if (!strcmp(defs[i].name, name))
			return &defs[i];
	return NULL;
}

static int check_consts(const Sonde__V1__ProbeSet *ps, const struct validate_probe_def *d,
			const char **ret_reason)
{
	if (ps->n_consts > VALIDATE_MAX_CONSTS)
		return refuse(ret_reason, "too many consts");
	for (size_t k = 0; k < ps->n_consts; k++) {
		const Sonde__V1__ProbeConst *c = ps->consts[k];

		if (!c || !name_ok(c->name, VALIDATE_MAX_NAME))
			return refuse(ret_reason, "a const without a name or with a long one");
		if (!in_list(c->name, d->consts, d->n_consts))
			return refuse(ret_reason, "a const the probe object does not declare");
		for (size_t j = 0; j < k; j++)
			if (!strcmp(ps->consts[j]->name, c->name))
				return refuse(ret_reason, "a const given twice");
		if (ends_with(c->name, "_off") ? c->value >= VALIDATE_GO_FIELD_OFF_MAX : c->value > 1)
			return refuse(ret_reason, "a const value out of bounds");
	}
	return 0;
}

static int check_attaches(const Sonde__V1__ProbeSet *ps, const struct validate_probe_def *d,
			  const char **ret_reason)
{
	if (ps->n_attaches == 0 || ps->n_attaches > VALIDATE_MAX_ATTACHES)
		return refuse(ret_reason, "no attaches or too many");
	for (size_t k = 0; k < ps->n_attaches; k++) {
		const Sonde__V1__ProbeAttach *a = ps->attaches[k];

		if (!a || !name_ok(a->program, VALIDATE_MAX_NAME))
			return refuse(ret_reason, "an attach without a program name or with a long one");
		if (!in_list(a->program, d->programs, d->n_programs))
			return refuse(ret_reason, "a program the probe object does not have");
		if (a->symbol && strnlen(a->symbol, VALIDATE_MAX_SYMBOL) >= VALIDATE_MAX_SYMBOL)
			return refuse(ret_reason, "a symbol name over 127 bytes");
	}
	return 0;
}

int validate_probe_plan(const Sonde__V1__ProbePlan *pp, const struct validate_probe_def *defs,
			size_t n_defs, const char **ret_reason)
{
	size_t applicable = 0;
	int r;

	if (!pp)
		return refuse(ret_reason, "no plan");
	r = validate_file_id(&pp->file_id, ret_reason);
	if (r < 0)
		return r;
	if (pp->n_probes == 0 || pp->n_probes > VALIDATE_MAX_PROBES)
		return refuse(ret_reason, "no probe sets or too many");
	for (size_t i = 0; i < pp->n_probes; i++) {
		const Sonde__V1__ProbeSet *ps = pp->probes[i];
		const struct validate_probe_def *d;

		if (!ps)
			return refuse(ret_reason, "an empty probe set");
		if (ps->error && ps->error[0])
			continue; /* not applicable: nothing of it is used */
		if (!name_ok(ps->probe, VALIDATE_MAX_NAME) ||
		    !(d = find_def(defs, n_defs, ps->probe)))
			return refuse(ret_reason, "a probe the sensor does not have");
		for (size_t j = 0; j < i; j++)
			if (pp->probes[j] && !(pp->probes[j]->error && pp->probes[j]->error[0]) &&
			    !strcmp(pp->probes[j]->probe, ps->probe))
				return refuse(ret_reason, "a probe given twice");
		r = check_consts(ps, d, ret_reason);
		if (r == 0)
			r = check_attaches(ps, d, ret_reason);
		if (r < 0)
			return r;
		applicable++;
	}
	if (applicable == 0)
		return refuse(ret_reason, "no applicable probe set");
	return 0;
}

int validate_probe_offsets(const uint64_t *offsets, size_t n_offsets,
			   const struct validate_exec_range *ranges, size_t n_ranges,
			   const char **ret_reason)
{
	if (n_ranges == 0)
		return refuse(ret_reason, "the file is not mapped executable by a tracked process");
	for (size_t i = 0; i < n_offsets; i++) {
		bool inside = false;

		for (size_t k = 0; k < n_ranges && !inside; k++) {
			const struct validate_exec_range *m = &ranges[k];

			/* end > start from /proc; offset + length cannot wrap
			 * for a real mapping, but the subtraction form needs no
			 * such promise. */
			inside = m->end > m->start && offsets[i] >= m->offset &&
				 offsets[i] - m->offset < m->end - m->start;
		}
		if (!inside)
			return refuse(ret_reason,
				      "an attach offset outside the file's executable mappings");
	}
	return 0;
}

/* Field f of a config (little-endian, 1, 2 or 4 bytes; in bounds: the
 * limits tables are checked against their structs' sizes). */
static uint32_t field_value(const uint8_t *config, const struct sonde_interp_field *f)
{
	uint32_t v = 0;

	for (uint32_t i = f->size; i-- > 0;)
		v = v << 8 | config[f->offset + i];
	return v;
}

/* Every field of config within lim's bounds; the end of the furthest
 * read a SONDE_INTERP_ROOT field asks for (its value plus its span, or 8)
 * into *ret_end. */
static int check_fields(const struct sonde_interp_limits *lim, const uint8_t *config,
			uint64_t *ret_end, const char **ret_reason)
{
	uint64_t end = 8;

	for (uint32_t i = 0; i < lim->n_fields; i++) {
		const struct sonde_interp_field *f = &lim->fields[i];
		uint32_t v;

		if (f->offset + f->size > lim->config_size || (f->size != 1 && f->size != 2 && f->size != 4))
			return refuse(ret_reason, "the sensor's limits table is wrong");
		v = field_value(config, f);
		if (f->rule == SONDE_INTERP_BITS ? (v & ~f->max) != 0 : v < f->min || v > f->max)
			return refuse(ret_reason, f->why);
		if (f->rule == SONDE_INTERP_ROOT && (uint64_t)v + (f->span ? f->span : 8) > end)
			end = (uint64_t)v + (f->span ? f->span : 8);
	}
	*ret_end = end;
	return 0;
}

int validate_interp_config(const Sonde__V1__InterpreterConfig *c, uint64_t file_size,
			   const char **ret_reason)
{
	const struct sonde_interp_limits *lim;
	uint64_t image_end, end;
	int r;

	if (!c)
		return refuse(ret_reason, "no config");
	r = validate_file_id(&c->file_id, ret_reason);
	if (r < 0)
		return r;
	lim = sonde_interp_limits_of(c->kind);
	if (!lim)
		return refuse(ret_reason, "unknown interpreter kind");
	if (c->format_version != lim->format_version)
		return refuse(ret_reason, "format version not the sensor's");
	if (c->layout.len != lim->config_size || !c->layout.data ||
	    lim->config_size > SONDE_INTERP_CONFIG_MAX)
		return refuse(ret_reason, "layout size not the kind's config size");
	r = check_fields(lim, c->layout.data, &end, ret_reason);
	if (r < 0)
		return r;
	/* The walker's reads at the root (8 bytes at the root plus its
	 * offset, or a field's span) inside the image: no overflow, as file
	 * sizes and the bounds are far below 2^63. */
	image_end = file_size + lim->image_slack;
	if (file_size > (UINT64_MAX >> 1) || c->runtime_offset >= image_end ||
	    image_end - c->runtime_offset < end)
		return refuse(ret_reason, "runtime offset outside the file's image");
	return 0;
}
