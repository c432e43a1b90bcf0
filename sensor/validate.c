/* validate.c - checks on what the symbolizer sends (validate.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cpython.h"
#include "fileid.h"
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

static int check_cpython_layout(const struct sonde_cpython_offsets *o, const char **ret_reason)
{
	const uint16_t fields[] = {
		o->tstate_next,	       o->tstate_native_thread_id, o->tstate_cframe,
		o->cframe_current_frame, o->frame_code,		   o->frame_previous,
		o->frame_prev_instr,     o->frame_owner,	   o->code_qualname,
		o->code_filename,	       o->code_firstlineno,	   o->code_linetable,
		o->code_code_adaptive,   o->ascii_data,		   o->bytes_data,
		o->var_size,	       o->frame_is_entry,
	};
	const uint16_t known = SONDE_CPYTHON_TSTATE_FRAME | SONDE_CPYTHON_ENTRY_SHIM |
			       SONDE_CPYTHON_ENTRY_ALL | SONDE_CPYTHON_LASTI_INDEX |
			       SONDE_CPYTHON_PTHREAD_ID;

	if (o->major != 3 || o->minor < VALIDATE_CPYTHON_MINOR_MIN ||
	    o->minor > VALIDATE_CPYTHON_MINOR_MAX)
		return refuse(ret_reason, "not a CPython 3.10-3.13 layout");
	if (o->runtime_interpreters_head >= VALIDATE_CPYTHON_RUNTIME_OFF_MAX ||
	    o->interp_threads_head >= VALIDATE_CPYTHON_RUNTIME_OFF_MAX)
		return refuse(ret_reason, "a runtime or interpreter offset out of bounds");
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (fields[i] >= VALIDATE_CPYTHON_FIELD_OFF_MAX)
			return refuse(ret_reason, "a thread, frame, code or string offset out of bounds");
	if (o->flags & ~known)
		return refuse(ret_reason, "unknown layout flags");
	if (o->pad)
		return refuse(ret_reason, "layout padding not zero");
	return 0;
}

int validate_interp_config(const Sonde__V1__InterpreterConfig *c, uint64_t file_size,
			   const char **ret_reason)
{
	struct sonde_cpython_offsets o;
	uint64_t image_end;
	int r;

	if (!c)
		return refuse(ret_reason, "no config");
	r = validate_file_id(&c->file_id, ret_reason);
	if (r < 0)
		return r;
	if (c->kind != SONDE__V1__INTERPRETER_CONFIG__KIND__CPYTHON)
		return refuse(ret_reason, "unknown interpreter kind");
	if (c->format_version != SONDE_CPYTHON_FORMAT_VERSION)
		return refuse(ret_reason, "format version not the sensor's");
	if (c->layout.len != sizeof(o) || !c->layout.data)
		return refuse(ret_reason, "layout size not sizeof(struct sonde_cpython_offsets)");
	memcpy(&o, c->layout.data, sizeof(o));
	r = check_cpython_layout(&o, ret_reason);
	if (r < 0)
		return r;
	/* The first read (the interpreters list head, 8 bytes) inside the
	 * image: no overflow, as file sizes and the bounds are far below
	 * 2^63. */
	image_end = file_size + VALIDATE_CPYTHON_IMAGE_SLACK;
	if (file_size > (UINT64_MAX >> 1) || c->runtime_offset >= image_end ||
	    image_end - c->runtime_offset < (uint64_t)o.runtime_interpreters_head + 8)
		return refuse(ret_reason, "runtime offset outside the file's image");
	return 0;
}
