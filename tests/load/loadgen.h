/* loadgen.h - the load generator's parts: real files of this machine
 * (files.c), a pool of realistic stacks over them (stacks.c), simulated
 * sensors speaking sonde.v1.Ingest (sensor_sim.c) and the measurements
 * (main.c). A test tool: it trusts the files it picks itself.
 */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fileid.h"
#include "ingest.pb-c.h"
#include "rpc_client.h"

#define LG_MAX_FILES 512
#define LG_MAX_SENSORS 4096
#define LG_MIN_DEPTH 10
#define LG_MAX_DEPTH 60
#define LG_MAX_KFRAMES 12

uint64_t lg_now_ns(void); /* CLOCK_MONOTONIC */
uint64_t lg_unix_ns(void);
uint64_t lg_rand(uint64_t *state); /* xorshift64*, state != 0 */

/* ---- files.c ---- */

struct lg_file {
	char path[PATH_MAX];
	int fd;
	uint64_t size;
	struct fileid id;
	uint8_t id_bytes[FILEID_LEN];
	uint64_t *func_off, *func_size; /* function starts as file offsets */
	size_t n_funcs;
};

struct lg_files {
	struct lg_file *f;
	size_t n;
	uint64_t *kaddr; /* kernel text symbol addresses, sorted */
	char **kname;
	size_t n_ksyms;
};

/* Picks up to max shared libraries under dir (sorted by name, ELF64 with
 * at least 50 defined functions), opens and hashes them, and reads up to
 * max_ksyms text symbols of /proc/kallsyms. Returns 0 or a negative errno. */
int lg_files_load(struct lg_files *fs, const char *dir, size_t max, size_t max_ksyms);
void lg_files_done(struct lg_files *fs);
/* The file with this ID, or NULL. */
const struct lg_file *lg_files_find(const struct lg_files *fs, const uint8_t *id, size_t len);

/* ---- stacks.c ---- */

/* One stack of the pool, as protobuf-c structs that point into the pool
 * (file IDs into lg_files). def.id is set per sensor before sending. */
struct lg_stack {
	Sonde__V1__StackDef def;
	Sonde__V1__Frame *frames;
	Sonde__V1__Frame **frame_ptrs;
	uint64_t *kernel;
};

struct lg_pool {
	struct lg_stack *s;
	size_t n;
};

/* n stacks, depth LG_MIN_DEPTH..LG_MAX_DEPTH user frames drawn from the
 * files' functions (a stack keeps to a few files, like a program and its
 * libraries) and 0..LG_MAX_KFRAMES kernel frames. Deterministic in seed. */
int lg_pool_build(struct lg_pool *p, const struct lg_files *fs, size_t n, uint64_t seed);
void lg_pool_done(struct lg_pool *p);

/* ---- sensor_sim.c ---- */

struct lg_config {
	const char *target;
	size_t n_sensors;
	unsigned hz, cpus, flush_ms, procs;
	size_t stacks_per_sensor;
	bool max_rate;
	size_t batch_entries; /* max-rate: SampleCounts per message */
	unsigned count_per_entry;
};

/* Send-time log: cum is the total of samples sent up to and including
 * the batch; main.c matches it against the store's counter. */
struct lg_sent {
	uint64_t t_ns, cum;
};

struct lg_shared {
	const struct lg_config *cfg;
	const struct lg_files *files;
	const struct lg_pool *pool;
	pthread_mutex_t lock;
	struct lg_sent *log; /* ring */
	size_t log_cap, log_head, log_len;
	uint64_t sent;          /* samples, under lock */
	uint64_t log_dropped;   /* ring full: batches not timed */
	atomic_bool measuring;  /* log sends from now on */
	atomic_bool stop;       /* writers stop sending */
	atomic_uint_fast64_t read_ranges, range_bytes, table_bytes, stream_errors;
	atomic_uint_fast64_t tables_received; /* UnwindTable first chunks */
	atomic_uint_fast64_t welcomed;
};

struct lg_sensor;

/* Opens the sensor's own connection and stream, starts its reader, sends
 * Hello, its processes and kernel symbols. NULL on failure (logged). */
struct lg_sensor *lg_sensor_start(struct lg_shared *sh, size_t index);
/* Sends the definitions of all its stacks with one sample each. Returns
 * 0 or a negative errno. */
int lg_sensor_warm(struct lg_sensor *s);
/* Writes the batch that is due at now_ns, if any; *ret_next_ns gets the
 * next due time. Returns 0 or a negative errno (stream broken). */
int lg_sensor_pump(struct lg_sensor *s, uint64_t now_ns, uint64_t *ret_next_ns);
/* Sends SensorStats, half-closes, waits (up to timeout_ms) for the
 * symbolizer to end the stream, frees everything. Returns 0 if it ended
 * cleanly. Accepts NULL. */
int lg_sensor_finish(struct lg_sensor *s, int timeout_ms);
uint64_t lg_sensor_sent(const struct lg_sensor *s);
/* Whether the symbolizer ended (or dropped) the stream. */
bool lg_sensor_stream_over(const struct lg_sensor *s);
/* After the symbolizer went away: a new connection and stream, whose
 * Hello lists the unwind tables received whole so far (the symbolizer
 * sends only the others); processes and kernel symbols again, and the
 * next batch defines every stack again. Returns 0 or a negative errno. */
int lg_sensor_reconnect(struct lg_sensor *s);
