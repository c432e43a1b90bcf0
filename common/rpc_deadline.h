/* rpc_deadline.h - gRPC deadlines for the two files that wait on gRPC
 * (rpc_server.c, rpc_client.c); nothing outside common/rpc*.c includes
 * it, as it names gRPC's types.
 */
#pragma once

#include <grpc/support/time.h>

/* The monotonic time ms milliseconds from now; ms < 0: never. */
static inline gpr_timespec rpc_deadline_after_ms(int ms)
{
	if (ms < 0)
		return gpr_inf_future(GPR_CLOCK_MONOTONIC);
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}
