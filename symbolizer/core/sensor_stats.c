/* sensor_stats.c - see sensor_stats.h. */
#include <stdlib.h>

#include "hmap.h"
#include "sensor_stats.h"

struct sensor_stats *sensor_stats_new(void)
{
	struct sensor_stats *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->proc_outcomes = hmap_new();
	if (!st->proc_outcomes) {
		free(st);
		return NULL;
	}
	return st;
}

void sensor_stats_free(struct sensor_stats *st)
{
	if (!st)
		return;
	hmap_free(st->proc_outcomes, free);
	free(st);
}

void sensor_stats_sum(const struct sensor_stats *st, struct sensor_counters *ret)
{
	*ret = st->past;
	if (st->live.add)
		st->live.add(st->live.ctx, ret);
}

uint32_t sensor_stats_frequency_hz(const struct sensor_stats *st)
{
	return st->live.frequency_hz ? st->live.frequency_hz(st->live.ctx) : 0;
}

void sensor_stats_forget_exited(struct sensor_stats *st, int64_t now_ms)
{
	struct hmap_iter it;
	void *val;

	hmap_iter_init(st->proc_outcomes, &it);
	while (hmap_next(st->proc_outcomes, &it, NULL, NULL, &val)) {
		struct proc_outcome *po = val;

		if (po->exited_ms && now_ms - po->exited_ms >= PROC_OUTCOME_KEEP_MS)
			free(hmap_remove_u64(st->proc_outcomes, po->key));
	}
}
