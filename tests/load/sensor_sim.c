/* sensor_sim.c - one simulated sensor: its own TCP connection and Ingest
 * stream, Hello, processes mapping the real files, a kernel symbol
 * snapshot, then stack batches as the real sensor sends them (each stack
 * defined once, then counted; one batch per flush interval) or, in
 * max-rate mode, large batches of counts of already-defined stacks as
 * fast as the symbolizer takes them. A reader thread answers ReadRange
 * from the real files and drops the unwind tables it is sent.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "log.h"
#include "rpc_testing.h"

#define INGEST_PATH "/sonde.v1.Ingest/Connect"
#define MAX_READ (4u << 20)
#define MAP_BASE 0x7f0000000000ull
#define MAP_STRIDE 0x10000000ull
#define THREADS_PER_PROC 8
#define REPACK_NS 1000000000ull

struct lg_sensor {
	struct lg_shared *sh;
	size_t index;
	struct rpc_channel *ch;
	struct rpc_stream *st;
	pthread_t reader;
	bool reader_started;
	atomic_bool welcomed, reader_done;
	char host[64];
	uint64_t rng;
	size_t k;                 /* stacks this sensor uses */
	Sonde__V1__StackDef *defs; /* copies of pool stacks with local ids */
	Sonde__V1__StackDef **def_ptrs;
	bool *defined;
	uint32_t *agg;
	Sonde__V1__SampleCount *counts;
	Sonde__V1__SampleCount **count_ptrs;
	size_t cap_counts;
	uint64_t next_ns, sent;
	/* Tables received whole (file index -> version; 0: none), listed in
	 * the Hello of a reconnect as the real sensor lists its BPF maps'. */
	uint64_t *table_version;
	uint64_t *table_pending; /* version of the table being received */
	uint8_t *packed; /* max-rate: the batch, packed once a second */
	size_t packed_len;
	uint64_t packed_samples, packed_at_ns;
};

static uint32_t stack_pid(const struct lg_sensor *s, size_t j)
{
	return 1000 + (uint32_t)(j % s->sh->cfg->procs);
}

/* ---- reader ---- */

static void serve_range(struct lg_sensor *s, const Sonde__V1__ReadRange *rr)
{
	Sonde__V1__SensorMessage out = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__FileRange fr = SONDE__V1__FILE_RANGE__INIT;
	const struct lg_file *f = lg_files_find(s->sh->files, rr->file_id.data, rr->file_id.len);
	uint8_t *buf = NULL;
	const char *error = NULL; /* fr.error's default is "", not NULL */
	uint64_t want = 0;
	ssize_t n = 0;

	fr.request_id = rr->request_id;
	fr.file_id = rr->file_id;
	fr.offset = rr->offset;
	if (!f)
		error = "file ID not registered";
	else if (rr->length > MAX_READ || rr->offset > f->size)
		error = "range outside the file";
	/* As the real sensor does: a range past the end is cut there. */
	else if (!(want = rr->length < f->size - rr->offset ? rr->length : f->size - rr->offset,
		   buf = malloc(want ? want : 1)))
		error = "out of memory";
	else if ((n = pread(f->fd, buf, want, (off_t)rr->offset)) != (ssize_t)want)
		error = "read failed";
	if (error) {
		fr.error = (char *)error;
	} else {
		fr.data.data = buf;
		fr.data.len = (size_t)n;
		atomic_fetch_add(&s->sh->range_bytes, (uint64_t)n);
	}
	out.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_FILE_RANGE;
	out.file_range = &fr;
	rpc_stream_write(s->st, &out.base, false);
	atomic_fetch_add(&s->sh->read_ranges, 1);
	free(buf);
}

/* Counts a table's bytes; remembers its version once it is whole. */
static void note_table(struct lg_sensor *s, const Sonde__V1__UnwindTable *t)
{
	const struct lg_files *fs = s->sh->files;
	size_t i;

	atomic_fetch_add(&s->sh->table_bytes, t->rows.len);
	if (t->first)
		atomic_fetch_add(&s->sh->tables_received, 1);
	for (i = 0; i < fs->n; i++)
		if (t->file_id.len == FILEID_LEN &&
		    memcmp(fs->f[i].id_bytes, t->file_id.data, FILEID_LEN) == 0)
			break;
	if (i == fs->n || (t->error && t->error[0]))
		return;
	if (t->first)
		s->table_pending[i] = t->table_version;
	if (t->last)
		s->table_version[i] = s->table_pending[i];
}

static void *reader_main(void *arg)
{
	struct lg_sensor *s = arg;

	for (;;) {
		Sonde__V1__SymbolizerMessage *m = NULL;
		int r = rpc_stream_read(s->st, &sonde__v1__symbolizer_message__descriptor,
					(ProtobufCMessage **)&m);

		if (r == -EBADMSG)
			continue;
		if (r < 0) {
			if (r != -ENODATA)
				atomic_fetch_add(&s->sh->stream_errors, 1);
			break;
		}
		switch (m->kind_case) {
		case SONDE__V1__SYMBOLIZER_MESSAGE__KIND_WELCOME:
			atomic_store(&s->welcomed, true);
			atomic_fetch_add(&s->sh->welcomed, 1);
			break;
		case SONDE__V1__SYMBOLIZER_MESSAGE__KIND_READ_RANGE:
			serve_range(s, m->read_range);
			break;
		case SONDE__V1__SYMBOLIZER_MESSAGE__KIND_UNWIND_TABLE:
			note_table(s, m->unwind_table);
			break;
		default:
			break;
		}
		rpc_message_free(&m->base);
	}
	atomic_store(&s->reader_done, true);
	return NULL;
}

/* ---- the first messages ---- */

static int send_msg(struct lg_sensor *s, Sonde__V1__SensorMessage *m)
{
	int r = rpc_stream_write(s->st, &m->base, false);

	if (r < 0)
		atomic_fetch_add(&s->sh->stream_errors, 1);
	return r;
}

static int send_hello(struct lg_sensor *s)
{
	Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__Hello h = SONDE__V1__HELLO__INIT;
	const struct lg_files *fs = s->sh->files;
	Sonde__V1__LoadedTable *lt = calloc(fs->n + 1, sizeof(*lt));
	Sonde__V1__LoadedTable **ltp = calloc(fs->n + 1, sizeof(*ltp));
	int r;

	if (!lt || !ltp) {
		free(lt);
		free(ltp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < fs->n; i++) {
		if (!s->table_version[i])
			continue;
		sonde__v1__loaded_table__init(&lt[h.n_loaded_tables]);
		lt[h.n_loaded_tables].file_id.data = (uint8_t *)fs->f[i].id_bytes;
		lt[h.n_loaded_tables].file_id.len = FILEID_LEN;
		lt[h.n_loaded_tables].table_version = s->table_version[i];
		ltp[h.n_loaded_tables] = &lt[h.n_loaded_tables];
		h.n_loaded_tables++;
	}
	h.loaded_tables = ltp;
	h.protocol_version = 1;
	h.sensor_version = "loadgen";
	h.hostname = s->host;
	h.boot_id = "00000000-0000-0000-0000-000000000000";
	h.kernel_release = "loadgen";
	/* Every simulated node runs this host's kernel (its kallsyms). */
	h.kernel_build_id.data = (uint8_t *)"sonde-load kernel..";
	h.kernel_build_id.len = 20;
	h.frequency_hz = s->sh->cfg->hz;
	h.sensor_start_unix_ns = lg_unix_ns();
	m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_HELLO;
	m.hello = &h;
	r = send_msg(s, &m);
	free(lt);
	free(ltp);
	return r;
}

/* Every simulated process maps every file, executable, at its own base. */
static int send_processes(struct lg_sensor *s)
{
	const struct lg_files *fs = s->sh->files;
	Sonde__V1__Mapping *maps = calloc(fs->n, sizeof(*maps));
	Sonde__V1__Mapping **ptrs = calloc(fs->n, sizeof(*ptrs));
	int r = -ENOMEM;

	if (!maps || !ptrs)
		goto cleanup;
	for (size_t i = 0; i < fs->n; i++) {
		sonde__v1__mapping__init(&maps[i]);
		maps[i].start = MAP_BASE + i * MAP_STRIDE;
		maps[i].end = maps[i].start + ((fs->f[i].size + 4095) & ~4095ull);
		maps[i].file_id.data = (uint8_t *)fs->f[i].id_bytes;
		maps[i].file_id.len = FILEID_LEN;
		maps[i].path = (char *)fs->f[i].path;
		maps[i].file_size = fs->f[i].size;
		maps[i].executable = true;
		ptrs[i] = &maps[i];
	}
	for (unsigned p = 0; p < s->sh->cfg->procs; p++) {
		Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
		Sonde__V1__ProcessUpdate u = SONDE__V1__PROCESS_UPDATE__INIT;

		u.pid = 1000 + p;
		u.comm = "loadworker";
		u.exe_path = (char *)fs->f[0].path;
		u.start_time_ticks = 1;
		u.cgroup = "0::/load";
		u.n_mappings = fs->n;
		u.mappings = ptrs;
		m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_PROCESS;
		m.process = &u;
		r = send_msg(s, &m);
		if (r < 0)
			goto cleanup;
	}
	r = 0;
cleanup:
	free(maps);
	free(ptrs);
	return r;
}

static int send_ksyms(struct lg_sensor *s)
{
	const struct lg_files *fs = s->sh->files;
	Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__KernelSymbols k = SONDE__V1__KERNEL_SYMBOLS__INIT;
	Sonde__V1__KernelSymbol *syms = calloc(fs->n_ksyms ? fs->n_ksyms : 1, sizeof(*syms));
	Sonde__V1__KernelSymbol **ptrs = calloc(fs->n_ksyms ? fs->n_ksyms : 1, sizeof(*ptrs));
	int r = -ENOMEM;

	if (!syms || !ptrs)
		goto cleanup;
	for (size_t i = 0; i < fs->n_ksyms; i++) {
		sonde__v1__kernel_symbol__init(&syms[i]);
		syms[i].address = fs->kaddr[i];
		syms[i].name = fs->kname[i];
		ptrs[i] = &syms[i];
	}
	k.first = k.last = true;
	k.n_symbols = fs->n_ksyms;
	k.symbols = ptrs;
	m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_KERNEL_SYMBOLS;
	m.kernel_symbols = &k;
	r = send_msg(s, &m);
cleanup:
	free(syms);
	free(ptrs);
	return r;
}

static int send_stats(struct lg_sensor *s)
{
	Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__SensorStats st = SONDE__V1__SENSOR_STATS__INIT;

	st.samples_taken = s->sent;
	st.processes = s->sh->cfg->procs;
	st.files = s->sh->files->n;
	m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_STATS;
	m.stats = &st;
	return send_msg(s, &m);
}

/* ---- set-up ---- */

static void sensor_free(struct lg_sensor *s)
{
	if (!s)
		return;
	if (s->reader_started) {
		rpc_stream_cancel(s->st);
		pthread_join(s->reader, NULL);
	}
	if (s->st)
		rpc_stream_close(s->st, 1000, NULL);
	rpc_channel_free(s->ch);
	free(s->defs);
	free(s->def_ptrs);
	free(s->defined);
	free(s->agg);
	free(s->counts);
	free(s->count_ptrs);
	free(s->packed);
	free(s->table_version);
	free(s->table_pending);
	free(s);
}

static int alloc_tables(struct lg_sensor *s)
{
	const struct lg_config *cfg = s->sh->cfg;
	size_t per_batch = (size_t)cfg->hz * cfg->cpus * cfg->flush_ms / 1000 + 1;

	s->k = cfg->stacks_per_sensor;
	if (s->k > s->sh->pool->n)
		s->k = s->sh->pool->n;
	s->cap_counts = s->k > per_batch ? s->k : per_batch;
	if (cfg->max_rate && cfg->batch_entries > s->cap_counts)
		s->cap_counts = cfg->batch_entries;
	s->defs = calloc(s->k, sizeof(*s->defs));
	s->def_ptrs = calloc(s->k, sizeof(*s->def_ptrs));
	s->defined = calloc(s->k, sizeof(*s->defined));
	s->agg = calloc(s->k, sizeof(*s->agg));
	s->counts = calloc(s->cap_counts, sizeof(*s->counts));
	s->table_version = calloc(s->sh->files->n + 1, sizeof(*s->table_version));
	s->table_pending = calloc(s->sh->files->n + 1, sizeof(*s->table_pending));
	if (!s->table_version || !s->table_pending)
		return -ENOMEM;
	s->count_ptrs = calloc(s->cap_counts, sizeof(*s->count_ptrs));
	if (!s->defs || !s->def_ptrs || !s->defined || !s->agg || !s->counts || !s->count_ptrs)
		return -ENOMEM;
	/* A random subset of the pool: sensors share many stacks, as nodes
	 * running the same software do. */
	for (size_t j = 0; j < s->k; j++) {
		s->defs[j] = s->sh->pool->s[lg_rand(&s->rng) % s->sh->pool->n].def;
		s->defs[j].id = (uint32_t)j + 1;
	}
	for (size_t i = 0; i < s->cap_counts; i++)
		sonde__v1__sample_count__init(&s->counts[i]);
	return 0;
}

static int sensor_connect(struct lg_sensor *s);

struct lg_sensor *lg_sensor_start(struct lg_shared *sh, size_t index)
{
	struct lg_sensor *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->sh = sh;
	s->index = index;
	s->rng = 0x9E3779B97F4A7C15ull ^ (index + 1) * 0xBF58476D1CE4E5B9ull;
	snprintf(s->host, sizeof(s->host), "load-%zu", index);
	if (alloc_tables(s) < 0 || sensor_connect(s) < 0)
		goto fail;
	return s;
fail:
	sensor_free(s);
	return NULL;
}

/* Drops the old stream (the symbolizer went away) and connects again:
 * Hello with the tables received so far, processes, kernel symbols; every
 * stack is defined again with its next count. */
int lg_sensor_reconnect(struct lg_sensor *s)
{
	if (s->reader_started) {
		rpc_stream_cancel(s->st);
		pthread_join(s->reader, NULL);
		s->reader_started = false;
	}
	if (s->st)
		rpc_stream_close(s->st, 1000, NULL);
	s->st = NULL;
	rpc_channel_free(s->ch);
	s->ch = NULL;
	atomic_store(&s->welcomed, false);
	atomic_store(&s->reader_done, false);
	memset(s->defined, 0, s->k * sizeof(*s->defined));
	memset(s->table_pending, 0, (s->sh->files->n + 1) * sizeof(*s->table_pending));
	return sensor_connect(s);
}

bool lg_sensor_stream_over(const struct lg_sensor *s)
{
	return atomic_load(&s->reader_done);
}

static int sensor_connect(struct lg_sensor *s)
{
	struct rpc_channel_opts opts = { .own_connection = true };
	struct lg_shared *sh = s->sh;
	size_t index = s->index;
	struct rpc_error err = { 0 };
	pthread_attr_t attr;
	uint64_t deadline;
	int r;

	s->ch = rpc_channel_new(sh->cfg->target, &opts);
	if (!s->ch)
		goto fail;
	s->st = rpc_stream_open(s->ch, INGEST_PATH, 10000, &err);
	if (!s->st) {
		log_error("sensor %zu: cannot open the stream: %s", index, err.message);
		goto fail;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256u << 10); /* hundreds of readers */
	r = pthread_create(&s->reader, &attr, reader_main, s);
	pthread_attr_destroy(&attr);
	if (r != 0)
		goto fail;
	s->reader_started = true;
	if (send_hello(s) < 0)
		goto fail;
	deadline = lg_now_ns() + 10000000000ull;
	while (!atomic_load(&s->welcomed)) {
		if (atomic_load(&s->reader_done) || lg_now_ns() > deadline) {
			log_error("sensor %zu: no Welcome", index);
			goto fail;
		}
		usleep(1000);
	}
	if (send_processes(s) < 0 || send_ksyms(s) < 0)
		goto fail;
	return 0;
fail:
	return -EIO;
}

/* ---- batches ---- */

/* Counts samples sent; logs the send time while measuring. */
static void note_sent(struct lg_sensor *s, uint64_t n, uint64_t t_ns)
{
	struct lg_shared *sh = s->sh;

	s->sent += n;
	pthread_mutex_lock(&sh->lock);
	sh->sent += n;
	if (atomic_load(&sh->measuring)) {
		if (sh->log_len == sh->log_cap) {
			sh->log_dropped++;
		} else {
			struct lg_sent *e = &sh->log[(sh->log_head + sh->log_len) % sh->log_cap];

			e->t_ns = t_ns;
			e->cum = sh->sent;
			sh->log_len++;
		}
	}
	pthread_mutex_unlock(&sh->lock);
}

/* Sends the counts in s->agg (and the definitions not sent yet). */
static int send_agg(struct lg_sensor *s, uint64_t unix_ns, uint64_t span_ns)
{
	Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__StackBatch b = SONDE__V1__STACK_BATCH__INIT;
	uint64_t n = 0;
	int r;

	for (size_t j = 0; j < s->k; j++) {
		Sonde__V1__SampleCount *c;

		if (!s->agg[j])
			continue;
		if (!s->defined[j]) {
			s->def_ptrs[b.n_stacks++] = &s->defs[j];
			s->defined[j] = true;
		}
		c = &s->counts[b.n_samples];
		c->stack_id = s->defs[j].id;
		c->pid = c->tid = stack_pid(s, j);
		c->count = s->agg[j];
		c->first_unix_ns = unix_ns - span_ns;
		c->last_unix_ns = unix_ns;
		c->comm = "loadworker";
		s->count_ptrs[b.n_samples++] = c;
		n += s->agg[j];
		s->agg[j] = 0;
	}
	if (!n)
		return 0;
	b.stacks = s->def_ptrs;
	b.samples = s->count_ptrs;
	m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_STACKS;
	m.stacks = &b;
	note_sent(s, n, lg_now_ns());
	r = send_msg(s, &m);
	return r < 0 ? r : 0;
}

int lg_sensor_warm(struct lg_sensor *s)
{
	for (size_t j = 0; j < s->k; j++)
		s->agg[j] = 1;
	return send_agg(s, lg_unix_ns(), 0);
}

/* Packs a max-rate batch: batch_entries counts cycling over the stacks,
 * THREADS_PER_PROC threads per process. */
static int repack(struct lg_sensor *s, uint64_t unix_ns)
{
	const struct lg_config *cfg = s->sh->cfg;
	Sonde__V1__SensorMessage m = SONDE__V1__SENSOR_MESSAGE__INIT;
	Sonde__V1__StackBatch b = SONDE__V1__STACK_BATCH__INIT;
	size_t n = cfg->batch_entries;

	for (size_t e = 0; e < n; e++) {
		Sonde__V1__SampleCount *c = &s->counts[e];
		size_t j = e % s->k;

		c->stack_id = s->defs[j].id;
		c->pid = stack_pid(s, j);
		c->tid = c->pid + (uint32_t)((e / s->k) % THREADS_PER_PROC) * 10000;
		c->count = cfg->count_per_entry;
		c->first_unix_ns = unix_ns - 1000000000ull;
		c->last_unix_ns = unix_ns;
		c->comm = "loadworker";
		s->count_ptrs[e] = c;
	}
	b.n_samples = n;
	b.samples = s->count_ptrs;
	m.kind_case = SONDE__V1__SENSOR_MESSAGE__KIND_STACKS;
	m.stacks = &b;
	free(s->packed);
	s->packed_len = protobuf_c_message_get_packed_size(&m.base);
	s->packed = malloc(s->packed_len);
	if (!s->packed)
		return -ENOMEM;
	protobuf_c_message_pack(&m.base, s->packed);
	s->packed_samples = (uint64_t)n * cfg->count_per_entry;
	return 0;
}

int lg_sensor_pump(struct lg_sensor *s, uint64_t now_ns, uint64_t *ret_next_ns)
{
	const struct lg_config *cfg = s->sh->cfg;
	uint64_t flush_ns = (uint64_t)cfg->flush_ms * 1000000ull;
	int r;

	if (cfg->max_rate) {
		if (!s->packed || now_ns - s->packed_at_ns >= REPACK_NS) {
			r = repack(s, lg_unix_ns());
			if (r < 0)
				return r;
			s->packed_at_ns = now_ns;
		}
		note_sent(s, s->packed_samples, now_ns);
		r = rpc_stream_write_raw(s->st, s->packed, s->packed_len);
		if (r < 0)
			atomic_fetch_add(&s->sh->stream_errors, 1);
		*ret_next_ns = now_ns;
		return r;
	}
	if (!s->next_ns) /* spread the sensors over the interval */
		s->next_ns = now_ns + flush_ns * s->index / cfg->n_sensors;
	if (now_ns < s->next_ns) {
		*ret_next_ns = s->next_ns;
		return 0;
	}
	s->next_ns += flush_ns;
	if (s->next_ns < now_ns)
		s->next_ns = now_ns + flush_ns; /* fell behind: skip, do not burst */
	*ret_next_ns = s->next_ns;
	/* hz x cpus samples a second, skewed: a few stacks are hot. */
	for (uint64_t i = 0, n = (uint64_t)cfg->hz * cfg->cpus * cfg->flush_ms / 1000; i < n; i++) {
		size_t a = lg_rand(&s->rng) % s->k, b = lg_rand(&s->rng) % s->k;

		s->agg[a < b ? a : b]++;
	}
	r = send_agg(s, lg_unix_ns(), flush_ns);
	if (r == 0)
		r = send_stats(s);
	return r;
}

uint64_t lg_sensor_sent(const struct lg_sensor *s)
{
	return s->sent;
}

int lg_sensor_finish(struct lg_sensor *s, int timeout_ms)
{
	uint64_t deadline;
	int r = 0;

	if (!s)
		return 0;
	send_stats(s);
	rpc_stream_close_send(s->st);
	/* The symbolizer ends the stream once what waited is stored. */
	deadline = lg_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (!atomic_load(&s->reader_done) && lg_now_ns() < deadline)
		usleep(2000);
	if (!atomic_load(&s->reader_done))
		r = -ETIMEDOUT;
	sensor_free(s);
	return r;
}
