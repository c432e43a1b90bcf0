/* scanbudget.c - the per-process token bucket of maps bytes (scanbudget.h). */
#include "scanbudget.h"

void scan_budget_init(struct scan_budget *b, uint64_t now_ns)
{
	b->bytes = SCAN_BUDGET_BURST;
	b->at_ns = now_ns;
}

static void refill(struct scan_budget *b, uint64_t now_ns)
{
	uint64_t dt = now_ns > b->at_ns ? now_ns - b->at_ns : 0;
	/* Capped before the multiplication (an hour fills any bucket), so
	 * it cannot overflow. */
	uint64_t add = (dt > 3600000000000ull ? 3600000000000ull : dt) *
		       SCAN_BUDGET_BYTES_PER_SEC / 1000000000ull;

	if (b->bytes + (int64_t)add > (int64_t)SCAN_BUDGET_BURST)
		b->bytes = SCAN_BUDGET_BURST;
	else
		b->bytes += (int64_t)add;
	if (now_ns > b->at_ns)
		b->at_ns = now_ns;
}

bool scan_budget_allows(struct scan_budget *b, uint64_t now_ns)
{
	refill(b, now_ns);
	return b->bytes > 0;
}

void scan_budget_spend(struct scan_budget *b, uint64_t bytes, uint64_t now_ns)
{
	refill(b, now_ns);
	/* bytes is bounded by PROCS_MAX_MAPS_BYTES (procs.c): no overflow. */
	b->bytes -= (int64_t)bytes;
}
