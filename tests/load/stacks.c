/* stacks.c - a pool of realistic stacks: 10-60 user frames in a few files
 * (a program's own code and some of its libraries), return addresses
 * inside real functions, and a kernel part on some of them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen.h"

#define FILES_PER_STACK 4

static void stack_done(struct lg_stack *s)
{
	free(s->frames);
	free(s->frame_ptrs);
	free(s->kernel);
}

static int stack_build(struct lg_stack *s, const struct lg_files *fs, uint64_t *rng)
{
	const struct lg_file *mine[FILES_PER_STACK];
	size_t depth = LG_MIN_DEPTH + lg_rand(rng) % (LG_MAX_DEPTH - LG_MIN_DEPTH + 1);
	size_t nk = fs->n_ksyms && lg_rand(rng) % 3 == 0 ? 1 + lg_rand(rng) % LG_MAX_KFRAMES : 0;

	for (size_t i = 0; i < FILES_PER_STACK; i++)
		mine[i] = &fs->f[lg_rand(rng) % fs->n];
	sonde__v1__stack_def__init(&s->def);
	s->frames = calloc(depth, sizeof(*s->frames));
	s->frame_ptrs = calloc(depth, sizeof(*s->frame_ptrs));
	s->kernel = nk ? calloc(nk, sizeof(*s->kernel)) : NULL;
	if (!s->frames || !s->frame_ptrs || (nk && !s->kernel))
		return -ENOMEM;
	for (size_t i = 0; i < depth; i++) {
		/* Runs of frames in one file, as calls inside a library go. */
		const struct lg_file *f = mine[(i / 6 + lg_rand(rng) % 2) % FILES_PER_STACK];
		size_t k = lg_rand(rng) % f->n_funcs;
		uint64_t in = f->func_size[k] > 1 ? 1 + lg_rand(rng) % (f->func_size[k] - 1) : 0;

		sonde__v1__frame__init(&s->frames[i]);
		s->frames[i].file_id.data = (uint8_t *)f->id_bytes;
		s->frames[i].file_id.len = FILEID_LEN;
		s->frames[i].address = f->func_off[k] + in;
		s->frame_ptrs[i] = &s->frames[i];
	}
	for (size_t i = 0; i < nk; i++)
		s->kernel[i] = fs->kaddr[lg_rand(rng) % fs->n_ksyms] + lg_rand(rng) % 64;
	s->def.n_user = depth;
	s->def.user = s->frame_ptrs;
	s->def.n_kernel = nk;
	s->def.kernel = s->kernel;
	s->def.outcome = SONDE__V1__STACK_OUTCOME__STACK_OUTCOME_COMPLETE;
	return 0;
}

int lg_pool_build(struct lg_pool *p, const struct lg_files *fs, size_t n, uint64_t seed)
{
	uint64_t rng = seed ? seed : 1;

	memset(p, 0, sizeof(*p));
	p->s = calloc(n ? n : 1, sizeof(*p->s));
	if (!p->s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		p->n = i + 1;
		if (stack_build(&p->s[i], fs, &rng) < 0) {
			lg_pool_done(p);
			return -ENOMEM;
		}
	}
	return 0;
}

void lg_pool_done(struct lg_pool *p)
{
	for (size_t i = 0; p->s && i < p->n; i++)
		stack_done(&p->s[i]);
	free(p->s);
	memset(p, 0, sizeof(*p));
}
