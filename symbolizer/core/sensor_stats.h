/* sensor_stats.h - what the connected and past sensors reported, for
 * Status and pprof: the counters of sessions that ended, the samples'
 * stack outcomes overall and per process, and, through a provider the
 * ingest handler installs, the counters of the sessions still connected.
 * The ingest handler writes the fields; readers only read them.
 *
 * Everything runs on the rpc loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct hmap;

struct sensor_counters {
	uint64_t samples_taken, samples_lost, samples_dropped;
	/* the accounting identity (ingest.proto SensorStats), per session */
	uint64_t session_taken, session_dropped, samples_unconfirmed;
	/* latest values, summed over connected sensors only */
	uint64_t unwind_tables_loaded, unwind_rows_loaded, bpf_map_bytes;
	uint64_t samples_waiting; /* held until their stacks' files are analysed */
	uint64_t processes;       /* latest, summed over connected sensors */
	/* Go probes: latest, summed over connected sensors */
	uint64_t go_files, go_links, go_attach_failures, go_records, go_records_lost;
	/* refused by the sensors' checks (sensor/validate.h) */
	uint64_t plans_refused, configs_refused;
};

/* How user stacks ended, by samples: index = sonde.v1.StackOutcome
 * (0 unspecified = no user stack). */
#define SENSOR_STATS_N_OUTCOMES 5
#define SENSOR_STATS_MAX_OUTCOME_PIDS 65536u /* pids counted one by one */

struct outcome_counts {
	uint64_t n[SENSOR_STATS_N_OUTCOMES];
	uint64_t total;
};

struct proc_outcome {
	uint64_t key; /* proc_outcome_key(): the session's and the pid */
	uint32_t pid;
	uint32_t uid; /* the process's owner (access.h decides who sees it) */
	const char *node; /* profile_node_name() of its sensor's node; borrowed */
	char comm[17];
	struct outcome_counts c;
	int64_t exited_ms; /* 0: running; else forgotten PROC_OUTCOME_KEEP_MS later */
};
/* The proc_outcomes key of pid as one sensor session sees it: a pid
 * names a process of one host only. */
static inline uint64_t proc_outcome_key(uint64_t session_id, uint32_t pid)
{
	return session_id << 32 | pid;
}
/* How long `sonde status` still shows an exited process's outcomes. Without
 * it the table filled with every short-lived pid, up to the bound. */
#define PROC_OUTCOME_KEEP_MS 120000

/* A node with a connected sensor. */
struct sensor_node {
	const char *node, *host_name, *machine_id;
	uint32_t sensors;
};

/* The connected sessions' part, installed by the ingest handler. */
struct sensor_stats_live {
	/* Adds the connected sessions' counters to *sum. */
	void (*add)(void *ctx, struct sensor_counters *sum);
	/* The sampling rate of the connected sensors; 0 if none is
	 * connected or they differ. */
	uint32_t (*frequency_hz)(void *ctx);
	/* Up to max connected nodes (sensors that sent Hello) into out, one
	 * per node name, sorted by name; returns how many. The strings are
	 * borrowed until the loop thread next runs a handler; 0 also when out
	 * of memory. */
	size_t (*nodes)(void *ctx, struct sensor_node *out, size_t max);
	void *ctx; /* borrowed */
};

struct sensor_stats {
	uint64_t sensors_connected;
	struct sensor_counters past; /* of sessions that ended */
	uint64_t stacks_received, samples_received;
	uint64_t samples_not_stored; /* no memory for them (never in the store) */
	struct outcome_counts outcomes;
	struct hmap *proc_outcomes; /* proc_outcome_key() -> struct proc_outcome (owned) */
	struct sensor_stats_live live; /* zero: no session's part */
};

/* NULL on out of memory. */
struct sensor_stats *sensor_stats_new(void);
/* Accepts NULL. */
void sensor_stats_free(struct sensor_stats *st);
/* The counters of every sensor, past and connected, into *ret. */
void sensor_stats_sum(const struct sensor_stats *st, struct sensor_counters *ret);
/* The connected sensors' sampling rate (sensor_stats_live); 0: unknown. */
uint32_t sensor_stats_frequency_hz(const struct sensor_stats *st);
/* Drops the per-process outcomes of processes gone PROC_OUTCOME_KEEP_MS
 * before now_ms (clock_now_ms() time). */
void sensor_stats_forget_exited(struct sensor_stats *st, int64_t now_ms);
