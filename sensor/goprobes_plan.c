/* goprobes_plan.c - a ProbePlan from the symbolizer into the sensor's own
 * bounded structs (see goprobes_plan.h). The symbolizer is less trusted
 * than the sensor: every count and name is checked before it is copied,
 * and only probes the sensor carries are kept. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goprobes_plan.h"
#include "log.h"

static const char *hex_id(const uint8_t *id, char *buf)
{
	for (int i = 0; i < FILEID_LEN; i++)
		sprintf(buf + 2 * i, "%02x", id[i]);
	return buf;
}

/* Copies a protobuf string if it fits; false otherwise. */
static bool copy_name(char *dst, size_t size, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n == 0 || n >= size)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

void goprobes_plan_free(struct goprobes_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_sets; i++) {
		free(p->sets[i].progs);
		free(p->sets[i].attaches);
	}
	free(p);
}

int goprobes_plan_from_msg(const Sonde__V1__ProbePlan *pp, const char *const *known, size_t n_known,
			   struct goprobes_plan **ret)
{
	char hex[2 * FILEID_LEN + 1];
	struct goprobes_plan *p;

	if (!pp || pp->file_id.len != FILEID_LEN)
		return -EPROTO;
	if (pp->error && pp->error[0]) {
		log_info("go probes: no plan for %s: %.200s", hex_id(pp->file_id.data, hex), pp->error);
		*ret = NULL;
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p->file_id, pp->file_id.data, FILEID_LEN);
	if (pp->n_probes > GOPROBES_PLAN_MAX_SETS)
		log_warn("go probes: plan for %s has %zu probes, keeping %d",
			 hex_id(p->file_id, hex), pp->n_probes, GOPROBES_PLAN_MAX_SETS);
	for (size_t i = 0; i < pp->n_probes && p->n_sets < GOPROBES_PLAN_MAX_SETS; i++) {
		const Sonde__V1__ProbeSet *ps = pp->probes[i];
		struct goprobes_plan_set *s = &p->sets[p->n_sets];
		bool found = false;

		if (!ps || (ps->error && ps->error[0])) {
			if (ps)
				log_info("go probes: %s: probe %.64s not applicable: %.200s",
					 hex_id(p->file_id, hex), ps->probe ? ps->probe : "?", ps->error);
			continue;
		}
		if (!copy_name(s->probe, sizeof(s->probe), ps->probe) ||
		    ps->n_consts > GOPROBES_PLAN_MAX_CONSTS ||
		    ps->n_attaches > GOPROBES_PLAN_MAX_ATTACHES || ps->n_attaches == 0) {
			log_warn("go probes: %s: refusing a probe set (name, %zu consts, %zu attaches "
				 "out of bounds)", hex_id(p->file_id, hex), ps->n_consts, ps->n_attaches);
			continue;
		}
		for (size_t k = 0; k < n_known; k++)
			if (!strcmp(known[k], s->probe)) {
				s->def = k;
				found = true;
			}
		if (!found) {
			log_warn("go probes: %s: refusing unknown probe '%.64s'", hex_id(p->file_id, hex),
				 s->probe);
			continue;
		}
		s->attaches = calloc(ps->n_attaches, sizeof(*s->attaches));
		if (!s->attaches)
			goto nomem;
		for (size_t k = 0; k < ps->n_consts; k++) {
			if (!ps->consts[k] ||
			    !copy_name(s->consts[k].name, GOPROBES_PLAN_MAX_NAME, ps->consts[k]->name))
				goto bad_name;
			s->consts[k].value = ps->consts[k]->value;
		}
		s->n_consts = ps->n_consts;
		for (size_t k = 0; k < ps->n_attaches; k++) {
			const Sonde__V1__ProbeAttach *a = ps->attaches[k];

			if (!a || !copy_name(s->attaches[k].program, GOPROBES_PLAN_MAX_NAME, a->program))
				goto bad_name;
			if (!a->symbol || !copy_name(s->attaches[k].symbol, sizeof(s->attaches[k].symbol),
						     a->symbol))
				snprintf(s->attaches[k].symbol, sizeof(s->attaches[k].symbol), "?");
			s->attaches[k].file_offset = a->file_offset;
			s->attaches[k].optional = a->optional;
		}
		s->n_attaches = ps->n_attaches;
		p->n_sets++;
		continue;
bad_name:
		log_warn("go probes: %s: probe %s: refusing a const or program without a name or "
			 "with a name over %d bytes", hex_id(p->file_id, hex), s->probe,
			 GOPROBES_PLAN_MAX_NAME - 1);
		free(s->attaches);
		memset(s, 0, sizeof(*s));
	}
	if (p->n_sets == 0) {
		goprobes_plan_free(p);
		p = NULL;
	}
	*ret = p;
	return 0;
nomem:
	goprobes_plan_free(p);
	return -ENOMEM;
}
