/* check_unwind_table.h - what every fuzz target that builds an unwind
 * table asserts about it (aborting on a violation): rows strictly sorted,
 * each found by its own pc, and the table's own blob loads back. */
#pragma once

#include "unwind_table.h"

void check_unwind_table(const struct unwind_table *t);
