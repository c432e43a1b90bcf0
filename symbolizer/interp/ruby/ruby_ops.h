/* ruby_ops.h - Ruby's (MRI/YARV) entry of the interpreter ops table
 * (interp_ops.h, docs/interpreters.md "Ruby"). */
#pragma once

#include "interp_ops.h"

extern const struct interp_ops ruby_ops;
