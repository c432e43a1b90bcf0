/* uplink.c - connection thread, request dispatch and writes. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "fileserve.h"
#include "goprobes.h"
#include "log.h"
#include "rpc_client.h"
#include "uplink.h"
#include "validate.h"

#define UPLINK_PATH "/sonde.v1.Ingest/Connect"
#define UPLINK_PROTOCOL_VERSION 1
/* A bound on one wait for the channel to be ready (it retries inside it);
 * not under ~3.03 s, for gRPC's timer list (CONNECT_ATTEMPT_TIMEOUT_MS in
 * common/rpc_client.c). */
#define UPLINK_CONNECT_TIMEOUT_MS 5000
#define UPLINK_BACKOFF_MIN_MS 100
#define UPLINK_BACKOFF_MAX_MS 2000
/* The channel's own reconnect backoff while a symbolizer is down: it sets
 * how soon after a restart the sensor is back (docs/reliability.md: within
 * 2 s). One attempt a second at most costs a dead peer nothing. */
#define UPLINK_CHANNEL_BACKOFF_MAX_MS 1000
/* A symbolizer that takes nothing for this long (stopped, hung, its
 * window full) is given up: the write fails, the stream is cancelled and
 * reopened, and the main loop goes back to draining the ring (samples go
 * to the bounded buffer, its drops counted) instead of waiting for good. */
#define UPLINK_WRITE_TIMEOUT_MS 10000
#define UPLINK_MAX_MESSAGE (4u << 20)
/* A refused plan or config is logged once per this interval (the rest
 * only counted): a symbolizer that sends nothing but bad ones must not
 * fill the journal. */
#define UPLINK_REFUSAL_LOG_INTERVAL_MS 10000


#define UPLINK_MAX_PEER_UIDS 4
/* Hello.loaded_tables: the symbolizer takes at most 65,536. */
#define UPLINK_MAX_LOADED_TABLES 65536

struct uplink {
	struct rpc_channel *ch; /* NULL between connections when peer-checked */
	/* unix: with uplink_set_peer_uids(): each connection is a socket
	 * connected and checked here, then handed to gRPC. */
	char *target;
	struct rpc_channel_opts ch_opts;
	uint32_t peer_uids[UPLINK_MAX_PEER_UIDS];
	size_t n_peer_uids; /* 0: no check (tcp:, where TLS authenticates) */
	uint64_t peers_refused;
	struct timespec last_peer_log;
	struct fileids *fileids;
	struct unwind_maps *unwind; /* may be NULL */
	struct goprobes *goprobes;  /* may be NULL */
	uplink_interp_fn on_interp; /* may be NULL */
	void *on_interp_ctx;
	int wake_fd;                /* eventfd of the main loop; -1: none */
	pthread_t thread;
	bool started;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rpc_stream *stream; /* NULL while not connected */
	uint64_t gen;              /* of stream; 0 when none */
	uint64_t n_connections;
	unsigned writers;          /* main-thread writes in flight on stream */
	bool stop;
	bool finishing;     /* we half-closed: do not reconnect */
	bool thread_done;
	bool ended_cleanly;
	uint32_t max_message_bytes, max_read_bytes;
	atomic_uint_fast64_t read_ranges;
	/* Refused by validate.c (connection thread only writes them). */
	atomic_uint_fast64_t plans_refused, configs_refused;
	struct timespec last_refusal_log;

	Sonde__V1__Hello hello;
	char hostname[256];
	char boot_id[64];
	char machine_id[64];
	char node_name[256];
	char release[65];
	uint8_t kernel_build_id[64];
};

/* Tells the main loop something happened it should act on now. */
static void wake_main(struct uplink *u)
{
	if (u->wake_fd >= 0)
		eventfd_write(u->wake_fd, 1);
}

static void deadline_in(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

static long ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* The first line of path (a boot or machine ID), or "". */
static void read_id_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");

	buf[0] = '\0';
	if (!f)
		return;
	if (fgets(buf, (int)size, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* The running kernel's GNU build ID from /sys/kernel/notes (kernel
 * output: a run of ELF notes). Returns its length, 0 if none. */
static size_t read_kernel_build_id(uint8_t *out, size_t cap)
{
	uint8_t buf[4096];
	size_t n, off = 0;
	FILE *f = fopen("/sys/kernel/notes", "re");

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	while (off + 12 <= n) {
		uint32_t namesz, descsz, type;
		size_t name_off = off + 12, desc_off;

		memcpy(&namesz, buf + off, 4);
		memcpy(&descsz, buf + off + 4, 4);
		memcpy(&type, buf + off + 8, 4);
		if (namesz > n || descsz > n)
			return 0;
		desc_off = name_off + ((namesz + 3u) & ~3u);
		if (desc_off + descsz > n)
			return 0;
		if (type == 3 && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0) {
			if (descsz == 0 || descsz > cap)
				return 0;
			memcpy(out, buf + desc_off, descsz);
			return descsz;
		}
		off = desc_off + ((descsz + 3u) & ~3u);
	}
	return 0;
}

struct uplink *uplink_new(const char *target, struct fileids *fileids, uint32_t frequency_hz,
			  uint64_t start_unix_ns, const char *node_name)
{
	struct rpc_channel_opts opts = {
		.max_message_bytes = UPLINK_MAX_MESSAGE + 4096,
		.reconnect_min_ms = UPLINK_BACKOFF_MIN_MS,
		.reconnect_max_ms = UPLINK_CHANNEL_BACKOFF_MAX_MS,
	};
	struct uplink *u = calloc(1, sizeof(*u));
	pthread_condattr_t ca;
	struct utsname un;

	if (!u)
		return NULL;
	u->target = strdup(target);
	u->ch_opts = opts;
	if (u->target)
		u->ch = rpc_channel_new(target, &opts);
	if (!u->ch) {
		log_error("cannot create a channel to %.200s", target);
		free(u->target);
		free(u);
		return NULL;
	}
	u->fileids = fileids;
	u->wake_fd = -1;
	pthread_mutex_init(&u->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&u->cond, &ca);
	pthread_condattr_destroy(&ca);

	if (gethostname(u->hostname, sizeof(u->hostname) - 1) < 0)
		u->hostname[0] = '\0';
	read_id_file("/proc/sys/kernel/random/boot_id", u->boot_id, sizeof(u->boot_id));
	/* systemd's machine-id(5); D-Bus's copy where it is missing. */
	read_id_file("/etc/machine-id", u->machine_id, sizeof(u->machine_id));
	if (!u->machine_id[0])
		read_id_file("/var/lib/dbus/machine-id", u->machine_id, sizeof(u->machine_id));
	snprintf(u->node_name, sizeof(u->node_name), "%s", node_name ? node_name : u->hostname);
	if (uname(&un) == 0)
		snprintf(u->release, sizeof(u->release), "%s", un.release);
	sonde__v1__hello__init(&u->hello);
	u->hello.protocol_version = UPLINK_PROTOCOL_VERSION;
	u->hello.sensor_version = (char *)SONDE_VERSION;
	u->hello.hostname = u->hostname;
	u->hello.boot_id = u->boot_id;
	u->hello.machine_id = u->machine_id;
	u->hello.node_name = u->node_name;
	u->hello.kernel_release = u->release;
	u->hello.kernel_build_id.data = u->kernel_build_id;
	u->hello.kernel_build_id.len = read_kernel_build_id(u->kernel_build_id,
							    sizeof(u->kernel_build_id));
	u->hello.frequency_hz = frequency_hz;
	u->hello.sensor_start_unix_ns = start_unix_ns;
	return u;
}

/* ---- requests from the symbolizer ---- */

enum uplink_state {
	STATE_HANDSHAKE = 1 << 0, /* Hello sent, waiting for Welcome */
	STATE_READY = 1 << 1,
};

struct handler {
	Sonde__V1__SymbolizerMessage__KindCase kind;
	const char *name;
	unsigned states; /* where it is allowed */
	/* 0, or a negative errno that ends the stream. */
	int (*fn)(struct uplink *u, struct rpc_stream *s, const Sonde__V1__SymbolizerMessage *m);
};

static int handle_welcome(struct uplink *u, struct rpc_stream *s,
			  const Sonde__V1__SymbolizerMessage *m)
{
	const Sonde__V1__Welcome *w = m->welcome;

	if (!w || w->protocol_version != UPLINK_PROTOCOL_VERSION) {
		log_warn("symbolizer speaks protocol %u, not %u", w ? w->protocol_version : 0,
			 UPLINK_PROTOCOL_VERSION);
		return -EPROTO;
	}
	pthread_mutex_lock(&u->lock);
	u->max_message_bytes = w->max_message_bytes;
	u->max_read_bytes = w->max_read_bytes;
	pthread_mutex_unlock(&u->lock);
	return 0;
}

static const char *read_error_text(int r)
{
	switch (r) {
	case -ENOENT:
		return "file ID not registered";
	case -ESTALE:
		return "file changed since it was registered";
	case -ENOMEM:
		return "out of memory";
	default:
		return "read failed";
	}
}

/* sensor_serve_read_range() does the state checks; here the shape. */
static int handle_read_range(struct uplink *u, struct rpc_stream *s,
			     const Sonde__V1__SymbolizerMessage *m)
{
	const Sonde__V1__ReadRange *rr = m->read_range;
	Sonde__V1__SensorMessage out = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__FileRange fr = SONDE__V1__FILE_RANGE__INIT;
	struct fileid id;
	uint32_t max_read;
	void *data = NULL;
	size_t len = 0;
	int r;

	if (!rr || rr->file_id.len != FILEID_LEN) {
		log_warn("ReadRange with a %zu-byte file ID", rr ? rr->file_id.len : 0);
		return -EPROTO;
	}
	memcpy(id.bytes, rr->file_id.data, FILEID_LEN);
	pthread_mutex_lock(&u->lock);
	max_read = u->max_read_bytes;
	pthread_mutex_unlock(&u->lock);
	if (max_read == 0 || max_read > FILESERVE_MAX_READ)
		max_read = FILESERVE_MAX_READ;

	r = sensor_serve_read_range(u->fileids, &id, rr->offset, rr->length, max_read, &data, &len);
	if (r == -EPROTO) {
		log_warn("ReadRange %llu: offset %llu length %u is outside what was announced",
			 (unsigned long long)rr->request_id, (unsigned long long)rr->offset,
			 rr->length);
		return r;
	}
	fr.request_id = rr->request_id;
	fr.file_id = rr->file_id;
	fr.offset = rr->offset;
	if (r < 0) {
		char hex[FILEID_HEX_LEN + 1];

		log_debug("ReadRange %llu for %s: %s", (unsigned long long)rr->request_id,
			  fileid_to_hex(&id, hex), read_error_text(r));
		fr.error = (char *)read_error_text(r);
	} else {
		fr.data.data = data;
		fr.data.len = len;
	}
	out.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_FILE_RANGE;
	out.file_range = &fr;
	r = rpc_stream_write(s, &out.base, false);
	free(data);
	atomic_fetch_add(&u->read_ranges, 1);
	return r < 0 ? r : 0;
}

/* Shape checks only; unwind_maps_add_chunk() checks the table against the
 * sensor's own state. A bad table is rejected and counted there, and the
 * stream goes on: only a message malformed at the protobuf level (file ID
 * not 16 bytes) ends it, as for ReadRange. */
static int handle_unwind_table(struct uplink *u, struct rpc_stream *s,
			       const Sonde__V1__SymbolizerMessage *m)
{
	const Sonde__V1__UnwindTable *t = m->unwind_table;
	struct unwind_chunk c = {0};
	char hex[FILEID_HEX_LEN + 1];
	struct fileid id;
	int r;

	if (!t || t->file_id.len != FILEID_LEN) {
		log_warn("UnwindTable with a %zu-byte file ID", t ? t->file_id.len : 0);
		return -EPROTO;
	}
	if (!u->unwind)
		return 0;
	memcpy(c.file_id, t->file_id.data, FILEID_LEN);
	c.format_version = t->format_version;
	c.first = t->first;
	c.last = t->last;
	c.total_rows = t->total_rows;
	c.rows = t->rows.data;
	c.rows_len = t->rows.len;
	c.has_error = t->error && t->error[0];
	c.table_version = t->table_version;
	r = unwind_maps_add_chunk(u->unwind, &c);
	if (r < 0 && c.first) {
		memcpy(id.bytes, c.file_id, FILEID_LEN);
		log_debug("unwind table for %s rejected: %d", fileid_to_hex(&id, hex), r);
	}
	if (r == 0 && c.last)
		wake_main(u); /* its stats go out now, not at the next flush */
	return 0;
}

/* A message validate.c refused: counted, logged at most once per
 * UPLINK_REFUSAL_LOG_INTERVAL_MS, not applied; the stream goes on (only a
 * message malformed at the protobuf level, a file ID not 16 bytes, ends
 * it, as for ReadRange). */
static void refuse(struct uplink *u, atomic_uint_fast64_t *counter, const char *what,
		   const ProtobufCBinaryData *file_id, const char *reason)
{
	uint64_t n = atomic_fetch_add(counter, 1) + 1;
	char hex[FILEID_HEX_LEN + 1] = "?";
	struct fileid id;

	if (u->last_refusal_log.tv_sec &&
	    ms_since(&u->last_refusal_log) < UPLINK_REFUSAL_LOG_INTERVAL_MS)
		return;
	clock_gettime(CLOCK_MONOTONIC, &u->last_refusal_log);
	if (file_id && file_id->len == FILEID_LEN) {
		memcpy(id.bytes, file_id->data, FILEID_LEN);
		fileid_to_hex(&id, hex);
	}
	log_warn("refusing the symbolizer's %s for %s: %s (%" PRIu64 " refused so far; "
		 "next log in %d s at most)", what, hex, reason, n,
		 UPLINK_REFUSAL_LOG_INTERVAL_MS / 1000);
}

/* Checked (validate_probe_plan), then queued for the main thread, which
 * owns the process table: it checks the offsets against the file's
 * executable mappings before it loads and attaches. */
static int handle_probe_plan(struct uplink *u, struct rpc_stream *s,
			     const Sonde__V1__SymbolizerMessage *m)
{
	const Sonde__V1__ProbePlan *pp = m->probe_plan;
	const struct validate_probe_def *defs;
	const char *reason = NULL;
	size_t n_defs;
	int r;

	(void)s;
	if (!pp || validate_file_id(&pp->file_id, NULL) < 0) {
		log_warn("ProbePlan with a %zu-byte file ID", pp ? pp->file_id.len : 0);
		return -EPROTO;
	}
	if (!u->goprobes) {
		static bool said;

		if (!said)
			log_info("a Go probe plan arrived; Go probes are off (--go-probes)");
		said = true;
		return 0;
	}
	if (!(pp->error && pp->error[0])) {
		defs = goprobes_catalog(u->goprobes, &n_defs);
		if (validate_probe_plan(pp, defs, n_defs, &reason) < 0) {
			refuse(u, &u->plans_refused, "ProbePlan", &pp->file_id, reason);
			return 0;
		}
	}
	r = goprobes_queue_plan(u->goprobes, pp);
	if (r < 0)
		log_warn_errno(r, "ProbePlan not queued");
	if (r == 0)
		wake_main(u);
	return 0;
}

/* Checked (validate_interp_config, against the registered file's size),
 * then handed to interp_maps (when set), which keeps the config for the
 * processes that map the file. */
static int handle_interpreter_config(struct uplink *u, struct rpc_stream *s,
				     const Sonde__V1__SymbolizerMessage *m)
{
	const Sonde__V1__InterpreterConfig *c = m->interpreter_config;
	struct fileid_info info;
	const char *reason = NULL;
	struct fileid id;
	int fd = -1;

	(void)s;
	if (!c || validate_file_id(&c->file_id, NULL) < 0) {
		log_warn("InterpreterConfig with a %zu-byte file ID", c ? c->file_id.len : 0);
		return -EPROTO;
	}
	if (!u->on_interp || (c->error && c->error[0]))
		return 0;
	memcpy(id.bytes, c->file_id.data, FILEID_LEN);
	if (fileids_open(u->fileids, &id, &fd, &info) < 0) {
		refuse(u, &u->configs_refused, "InterpreterConfig", &c->file_id,
		       "file ID not registered");
		return 0;
	}
	close(fd);
	if (validate_interp_config(c, info.size, &reason) < 0) {
		refuse(u, &u->configs_refused, "InterpreterConfig", &c->file_id, reason);
		return 0;
	}
	u->on_interp(u->on_interp_ctx, c);
	wake_main(u); /* the main thread makes the entries */
	return 0;
}

static const struct handler handlers[] = {
	{SONDE__V1__SYMBOLIZER_MESSAGE__KIND_WELCOME, "Welcome", STATE_HANDSHAKE, handle_welcome},
	{SONDE__V1__SYMBOLIZER_MESSAGE__KIND_READ_RANGE, "ReadRange", STATE_READY,
	 handle_read_range},
	{SONDE__V1__SYMBOLIZER_MESSAGE__KIND_UNWIND_TABLE, "UnwindTable", STATE_READY,
	 handle_unwind_table},
	{SONDE__V1__SYMBOLIZER_MESSAGE__KIND_PROBE_PLAN, "ProbePlan", STATE_READY, handle_probe_plan},
	{SONDE__V1__SYMBOLIZER_MESSAGE__KIND_INTERPRETER_CONFIG, "InterpreterConfig", STATE_READY,
	 handle_interpreter_config},
};

/* Reads and handles one message. Returns 0, -ENODATA at a clean end, or
 * another negative errno that ends the stream. */
static int dispatch_one(struct uplink *u, struct rpc_stream *s, enum uplink_state state)
{
	Sonde__V1__SymbolizerMessage *m = NULL;
	const struct handler *h = NULL;
	int r;

	r = rpc_stream_read(s, &sonde__v1__symbolizer_message__descriptor,
			    (ProtobufCMessage **)&m);
	if (r < 0)
		return r;
	for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
		if (handlers[i].kind == m->kind_case)
			h = &handlers[i];
	if (!h) {
		log_warn("unknown symbolizer message kind %d, ending the stream", (int)m->kind_case);
		r = -EPROTO;
	} else if (!(h->states & state)) {
		log_warn("%s not allowed now, ending the stream", h->name);
		r = -EPROTO;
	} else {
		r = h->fn(u, s, m);
	}
	rpc_message_free(&m->base);
	return r;
}

/* ---- connection thread ---- */

static int handshake(struct uplink *u, struct rpc_stream *s)
{
	Sonde__V1__SensorMessage msg = SONDE__V1__SENSOR_MESSAGE__INIT;
	int r;

	Sonde__V1__LoadedTable *lt = NULL, **ltp = NULL;
	struct unwind_loaded *loaded = NULL;
	size_t n = 0;

	/* The tables still in the BPF maps: a restarted symbolizer sends
	 * only the others. Without memory the list is empty: all come again. */
	if (u->unwind) {
		loaded = calloc(UPLINK_MAX_LOADED_TABLES, sizeof(*loaded));
		if (loaded)
			n = unwind_maps_loaded(u->unwind, loaded, UPLINK_MAX_LOADED_TABLES);
		lt = calloc(n ? n : 1, sizeof(*lt));
		ltp = calloc(n ? n : 1, sizeof(*ltp));
		if (!lt || !ltp)
			n = 0;
	}
	for (size_t i = 0; i < n; i++) {
		sonde__v1__loaded_table__init(&lt[i]);
		lt[i].file_id.data = loaded[i].file_id;
		lt[i].file_id.len = FILEID_LEN;
		lt[i].table_version = loaded[i].table_version;
		ltp[i] = &lt[i];
	}
	u->hello.n_loaded_tables = n;
	u->hello.loaded_tables = ltp;
	if (n)
		log_info("Hello lists %zu unwind tables loaded before", n);
	msg.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_HELLO;
	msg.hello = &u->hello;
	r = rpc_stream_write(s, &msg.base, false);
	u->hello.n_loaded_tables = 0;
	u->hello.loaded_tables = NULL;
	free(ltp);
	free(lt);
	free(loaded);
	if (r < 0)
		return r;
	return dispatch_one(u, s, STATE_HANDSHAKE);
}

static bool peer_uid_allowed(const struct uplink *u, uint32_t uid)
{
	for (size_t i = 0; i < u->n_peer_uids; i++)
		if (u->peer_uids[i] == uid)
			return true;
	return false;
}

/* A new connection to a unix: symbolizer, its listener checked before
 * gRPC sees the socket: SO_PEERCRED of a connected Unix socket holds the
 * credentials of the process that called listen() on the other end, and
 * it is this very socket that carries the stream (no second connection
 * by path that a swapped socket file could redirect). The channel of the
 * last connection is freed first: it cannot reconnect. Returns 0 with
 * u->ch set, or a negative errno (logged, refusals at most once per
 * UPLINK_REFUSAL_LOG_INTERVAL_MS). Connection thread only. */
static int connect_checked(struct uplink *u)
{
	struct rpc_peer peer;
	char allowed[64] = "";
	int fd = -1, r;

	rpc_channel_free(u->ch);
	u->ch = NULL;
	r = rpc_unix_connect(u->target, &fd);
	if (r < 0) {
		log_debug("connect %.200s: %s", u->target, strerror(-r));
		return r;
	}
	r = rpc_unix_peer(fd, &peer);
	if (r == 0 && !peer_uid_allowed(u, peer.uid))
		r = -EPERM;
	if (r < 0) {
		close(fd);
		u->peers_refused++;
		if (u->last_peer_log.tv_sec &&
		    ms_since(&u->last_peer_log) < UPLINK_REFUSAL_LOG_INTERVAL_MS)
			return r;
		clock_gettime(CLOCK_MONOTONIC, &u->last_peer_log);
		for (size_t i = 0, n = 0; i < u->n_peer_uids && n < sizeof(allowed) - 1; i++) {
			int w = snprintf(allowed + n, sizeof(allowed) - n, "%s%" PRIu32,
					 i ? ", " : "", u->peer_uids[i]);

			n = w < 0 ? sizeof(allowed) - 1 : n + (size_t)w; /* cut: stop */
		}
		if (r == -EPERM)
			log_warn("refusing the symbolizer at %.200s: its socket is served by uid "
				 "%" PRIu32 " (pid %" PRId32 "), not uid %s (--symbolizer-uid); "
				 "nothing sent (%" PRIu64 " refused so far)", u->target, peer.uid,
				 peer.pid, allowed, u->peers_refused);
		else
			log_warn_errno(r, "refusing the symbolizer at %.200s: no peer credentials",
				       u->target);
		return r;
	}
	u->ch = rpc_channel_new_from_fd(u->target, fd, &u->ch_opts);
	if (!u->ch) {
		log_warn("cannot create a channel on the symbolizer's socket");
		return -ENOMEM;
	}
	return 0;
}

/* Sleeps ms unless stopped. Returns true if stopped. */
static bool backoff_sleep(struct uplink *u, int ms)
{
	struct timespec ts;
	bool stop;

	deadline_in(&ts, ms);
	pthread_mutex_lock(&u->lock);
	while (!u->stop && pthread_cond_timedwait(&u->cond, &u->lock, &ts) != ETIMEDOUT)
		;
	stop = u->stop;
	pthread_mutex_unlock(&u->lock);
	return stop;
}

static void *conn_main(void *arg)
{
	struct uplink *u = arg;
	int backoff = UPLINK_BACKOFF_MIN_MS;
	bool was_connected = false;

	for (;;) {
		struct rpc_error err = {0};
		struct rpc_stream *s;
		struct timespec opened;
		bool finishing;
		int r, waited = 0;

		pthread_mutex_lock(&u->lock);
		if (u->stop || u->finishing) {
			pthread_mutex_unlock(&u->lock);
			break;
		}
		pthread_mutex_unlock(&u->lock);

		clock_gettime(CLOCK_MONOTONIC, &opened);
		if (u->n_peer_uids && connect_checked(u) < 0)
			goto retry; /* logged there; our backoff paces the attempts */
		s = rpc_stream_open(u->ch, UPLINK_PATH, UPLINK_CONNECT_TIMEOUT_MS, &err);
		if (!s) {
			log_debug("connect: %.200s", err.message);
			/* The open waited for the channel, which retries on
			 * its own backoff meanwhile: that wait counts toward
			 * ours, so a symbolizer that comes back is seen by the
			 * channel's next attempt, not after a sleep on top. */
			waited = (int)ms_since(&opened);
			goto retry;
		}
		rpc_stream_set_write_timeout(s, UPLINK_WRITE_TIMEOUT_MS);
		r = handshake(u, s);
		if (r < 0) {
			log_warn_errno(r, "handshake with the symbolizer failed");
			rpc_stream_cancel(s);
			rpc_stream_close(s, 1000, NULL);
			goto retry;
		}
		backoff = UPLINK_BACKOFF_MIN_MS;
		if (u->unwind) /* chunks of the old stream will not be finished */
			unwind_maps_connection_reset(u->unwind);
		pthread_mutex_lock(&u->lock);
		u->stream = s;
		u->gen = ++u->n_connections;
		pthread_cond_broadcast(&u->cond);
		pthread_mutex_unlock(&u->lock);
		wake_main(u); /* a new connection gets everything at once */
		log_info("%s the symbolizer", was_connected ? "reconnected to" : "connected to");
		was_connected = true;

		do
			r = dispatch_one(u, s, STATE_READY);
		while (r == 0);

		pthread_mutex_lock(&u->lock);
		u->gen = 0;
		finishing = u->finishing;
		if (r != -ENODATA)
			rpc_stream_cancel(s); /* wakes writers */
		while (u->writers > 0)
			pthread_cond_wait(&u->cond, &u->lock);
		u->stream = NULL;
		pthread_mutex_unlock(&u->lock);
		r = rpc_stream_close(s, 1000, &err) == 0 && r == -ENODATA;
		if (finishing) {
			pthread_mutex_lock(&u->lock);
			u->ended_cleanly = r;
			pthread_mutex_unlock(&u->lock);
			break;
		}
		log_warn("stream to the symbolizer ended%s, reconnecting",
			 r ? "" : " abnormally");
	retry:
		if (backoff_sleep(u, waited >= backoff ? 0 : backoff - waited))
			break;
		backoff = backoff * 2 > UPLINK_BACKOFF_MAX_MS ? UPLINK_BACKOFF_MAX_MS : backoff * 2;
	}
	pthread_mutex_lock(&u->lock);
	u->thread_done = true;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

void uplink_set_goprobes(struct uplink *u, struct goprobes *gp)
{
	u->goprobes = gp;
}

void uplink_set_unwind_maps(struct uplink *u, struct unwind_maps *um)
{
	u->unwind = um;
}

void uplink_set_interp_handler(struct uplink *u, uplink_interp_fn fn, void *ctx)
{
	u->on_interp = fn;
	u->on_interp_ctx = ctx;
}

void uplink_set_wakeup(struct uplink *u, int efd)
{
	u->wake_fd = efd;
}

int uplink_set_peer_uids(struct uplink *u, const uint32_t *uids, size_t n)
{
	if (strncmp(u->target, "unix:", 5) != 0 || n == 0 || n > UPLINK_MAX_PEER_UIDS)
		return -EINVAL;
	memcpy(u->peer_uids, uids, n * sizeof(*uids));
	u->n_peer_uids = n;
	/* The path channel of uplink_new() is not used: every connection
	 * is made and checked by connect_checked(). */
	rpc_channel_free(u->ch);
	u->ch = NULL;
	return 0;
}


int uplink_start(struct uplink *u)
{
	int r = pthread_create(&u->thread, NULL, conn_main, u);

	if (r)
		return -r;
	u->started = true;
	return 0;
}

uint64_t uplink_generation(struct uplink *u)
{
	uint64_t g;

	pthread_mutex_lock(&u->lock);
	g = u->finishing ? 0 : u->gen;
	pthread_mutex_unlock(&u->lock);
	return g;
}

size_t uplink_max_message_bytes(struct uplink *u)
{
	size_t m;

	pthread_mutex_lock(&u->lock);
	m = u->max_message_bytes;
	pthread_mutex_unlock(&u->lock);
	if (m == 0 || m > UPLINK_MAX_MESSAGE)
		m = UPLINK_MAX_MESSAGE;
	return m;
}

/* Pins the stream of connection gen for a write. NULL if it is gone. */
static struct rpc_stream *writer_enter(struct uplink *u, uint64_t gen)
{
	struct rpc_stream *s = NULL;

	pthread_mutex_lock(&u->lock);
	if (gen != 0 && u->gen == gen && u->stream) {
		s = u->stream;
		u->writers++;
	}
	pthread_mutex_unlock(&u->lock);
	return s;
}

static void writer_leave(struct uplink *u)
{
	pthread_mutex_lock(&u->lock);
	u->writers--;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
}

int uplink_send(struct uplink *u, uint64_t gen, const Sonde__V1__SensorMessage *msg, bool more)
{
	struct rpc_stream *s = writer_enter(u, gen);
	int r;

	if (!s)
		return -ENOTCONN;
	r = rpc_stream_write(s, &msg->base, more);
	if (r == -ETIMEDOUT)
		log_warn("the symbolizer took nothing for %d s, reconnecting",
			 UPLINK_WRITE_TIMEOUT_MS / 1000);
	if (r < 0)
		rpc_stream_cancel(s); /* the reader notices and reconnects */
	writer_leave(u);
	return r < 0 ? -EPIPE : 0;
}

bool uplink_finish(struct uplink *u, uint64_t gen, int timeout_ms)
{
	struct rpc_stream *s = writer_enter(u, gen);
	struct timespec start;
	bool clean;

	if (!s)
		return false;
	pthread_mutex_lock(&u->lock);
	u->finishing = true;
	pthread_mutex_unlock(&u->lock);
	/* The reader keeps answering ReadRange until the symbolizer, done
	 * with the files it still needed, ends the stream. */
	rpc_stream_close_send(s);
	writer_leave(u);

	clock_gettime(CLOCK_MONOTONIC, &start);
	pthread_mutex_lock(&u->lock);
	while (!u->thread_done) {
		long left = timeout_ms - ms_since(&start);
		struct timespec step;

		if (left <= 0) {
			log_warn("symbolizer did not end the stream in %d ms, cancelling",
				 timeout_ms);
			if (u->stream)
				rpc_stream_cancel(u->stream);
			while (!u->thread_done)
				pthread_cond_wait(&u->cond, &u->lock);
			break;
		}
		deadline_in(&step, left < 100 ? (int)left : 100);
		pthread_cond_timedwait(&u->cond, &u->lock, &step);
	}
	clean = u->ended_cleanly;
	pthread_mutex_unlock(&u->lock);
	return clean;
}

void uplink_free(struct uplink *u)
{
	if (!u)
		return;
	if (u->started) {
		pthread_mutex_lock(&u->lock);
		u->stop = true;
		if (u->stream)
			rpc_stream_cancel(u->stream);
		pthread_cond_broadcast(&u->cond);
		pthread_mutex_unlock(&u->lock);
		pthread_join(u->thread, NULL);
	}
	rpc_channel_free(u->ch);
	pthread_cond_destroy(&u->cond);
	pthread_mutex_destroy(&u->lock);
	free(u->target);
	free(u);
}

uint64_t uplink_read_ranges(struct uplink *u)
{
	return atomic_load(&u->read_ranges);
}

uint64_t uplink_plans_refused(struct uplink *u)
{
	return atomic_load(&u->plans_refused);
}

uint64_t uplink_configs_refused(struct uplink *u)
{
	return atomic_load(&u->configs_refused);
}
