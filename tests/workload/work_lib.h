/* work_lib.h - the shared-library half of the test workload. */
#pragma once

#include <stdint.h>

uint64_t work_lib_entry(uint64_t n);
