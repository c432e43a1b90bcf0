/* v8_ops.h - V8's entry of the interpreter ops table (interp_ops.h). */
#pragma once

#include "interp_ops.h"

extern const struct interp_ops v8_ops;
