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
	case SONDE_REC_SAMPLE:
		if (size != sizeof(struct sonde_sample))
			break;
		ev->h.on_sample(data, ev->h.ctx);
		return 0;
	case SONDE_REC_EXEC:
	case SONDE_REC_EXIT:
	case SONDE_REC_FORK:
		if (size != sizeof(struct sonde_proc_event))
			break;
		ev->h.on_proc(data, ev->h.ctx);
		return 0;
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
