/* unwind_lib.h - the shared-library chain of the unwinding workload. */
#pragma once

#include <stdint.h>

uint64_t unwind_lib_entry(uint64_t n);
