/* events.c - libbpf ring_buffer behind a typed interface. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "events.h"

struct events {
	struct ring_buffer *rb;
	struct events_handlers h;
	uint64_t malformed;
	uint64_t interp;
};

static int on_record(void *ctx, void *data, size_t size)
{
	struct events *ev = ctx;
	uint32_t type;

	if (size < sizeof(type)) {
		ev->malformed++;
		return 0;
	}
	memcpy(&type, data, sizeof(type));
	switch (type) {
	case SONDE_REC_SAMPLE: {
		const struct sonde_sample *rec = data;

		/* The frame counts must fit the maximum and the record. */
		if (size < SONDE_SAMPLE_HEADER || rec->n_kernel > SONDE_MAX_KERNEL_FRAMES ||
		    rec->n_user > SONDE_MAX_USER_FRAMES || rec->profile >= SONDE_PROFILE_COUNT ||
		    rec->n_kernel + rec->n_user + rec->n_interp >
			    SONDE_MAX_KERNEL_FRAMES + SONDE_MAX_USER_FRAMES ||
		    size != SONDE_SAMPLE_SIZE(rec->n_kernel, rec->n_user + rec->n_interp))
			break;
		ev->h.on_sample(rec, ev->h.ctx);
		return 0;
	}
	case SONDE_REC_EXEC:
	case SONDE_REC_EXIT:
	case SONDE_REC_FORK:
	case SONDE_REC_MMAP:
		if (size != sizeof(struct sonde_proc_event))
			break;
		ev->h.on_proc(data, ev->h.ctx);
		return 0;
	case SONDE_REC_INTERP: {
		const struct sonde_interp_rec *rec = data;

		/* Opaque: only its sizes and kind are checked; the
		 * symbolizer decodes it. */
		if (size < sizeof(*rec) || rec->len > SONDE_INTERP_REC_MAX ||
		    size != sizeof(*rec) + rec->len || rec->kind == SONDE_INTERP_NONE ||
		    rec->kind >= SONDE_INTERP_KINDS)
			break;
		ev->interp++;
		if (ev->h.on_interp)
			ev->h.on_interp(rec, ev->h.ctx);
		return 0;
	}
	}
	ev->malformed++;
	return 0;
}

struct events *events_new(int map_fd, const struct events_handlers *handlers)
{
	struct events *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return NULL;
	ev->h = *handlers;
	ev->rb = ring_buffer__new(map_fd, on_record, ev, NULL);
	if (!ev->rb) {
		free(ev);
		return NULL;
	}
	return ev;
}

void events_free(struct events *ev)
{
	if (!ev)
		return;
	ring_buffer__free(ev->rb);
	free(ev);
}

int events_fd(struct events *ev)
{
	return ring_buffer__epoll_fd(ev->rb);
}

int events_consume(struct events *ev)
{
	return ring_buffer__consume(ev->rb);
}

uint64_t events_malformed(const struct events *ev)
{
	return ev->malformed;
}

uint64_t events_interp(struct events *ev)
{
	return ev->interp;
}
