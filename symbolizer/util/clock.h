/* clock.h - the symbolizer's one clock for deadlines and timers. */
#pragma once

#include <stdint.h>

/* Milliseconds of CLOCK_MONOTONIC: only differences mean anything. */
int64_t clock_now_ms(void);
/* Microseconds of the same clock. */
int64_t clock_now_us(void);
