/* hotspot_ops.h - the HotSpot JVM's entry of the interpreter ops table
 * (interp_ops.h, docs/interpreters.md). */
#pragma once

#include "interp_ops.h"

extern const struct interp_ops hotspot_ops;
