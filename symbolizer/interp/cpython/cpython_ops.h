/* cpython_ops.h - CPython 3.10-3.13 as an entry of the interpreter ops
 * table (interp_ops.h): files named python3.X or libpython3.X*.so whose
 * dynamic symbols include _PyRuntime (Debian's stripped python3.11 exports
 * it too), the walker's offsets (cpython_layout.h, bpf/cpython.h), code
 * object records (cpython_code.h) and frame words (SONDE_CPYTHON_FRAME;
 * words[1], when present, a code object checksum to match). Runs of
 * Python frames replace _PyEval_EvalFrameDefault frames.
 */
#pragma once

#include "interp_ops.h"

extern const struct interp_ops cpython_ops;
