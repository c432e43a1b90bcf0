"""CPython line tables (symbolizer/interp/cpython_lines.c) against the
interpreter's own co_lines(), on every code object of Python's standard
library as this machine's python3.11 compiles it.

3.11's location table is checked directly. No 3.10 runs here, so its format
is checked by re-encoding the same ranges the way 3.10's compiler writes
them (byte deltas up to 254, line deltas up to +-127, -128 for none): this
tests the decoder against the documented format, not against a 3.10."""
import glob
import os
import pathlib
import shutil
import struct
import subprocess
import types

import pytest

from conftest import BUILD
from readelf_tables import load_segments

DUMP = BUILD / "tests" / "unit" / "cpython-dump"


def code_objects():
    for path in sorted(glob.glob("/usr/lib/python3.11/*.py")):
        try:
            src = open(path, "rb").read()
            top = compile(src, path, "exec")
        except (SyntaxError, ValueError):
            continue
        stack = [top]
        while stack:
            co = stack.pop()
            yield co
            stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))


def nonempty(ranges):
    return [r for r in ranges if r[0] != r[1]]


def merged(ranges):
    """No empty ranges, neighbours with one line merged: the same ranges
    however an encoder split them."""
    out = []
    for start, end, line in ranges:
        if start == end:
            continue
        if out and out[-1][2] == line and out[-1][1] == start:
            out[-1] = (out[-1][0], end, line)
        else:
            out.append((start, end, line))
    return out


def encode_310(ranges, first):
    """The 3.10 compiler's co_linetable for the same ranges."""
    out, cur = bytearray(), first
    for start, end, line in ranges:
        bdelta = end - start
        if line is None:
            ldelta = -128
        else:
            ldelta = line - cur
            while ldelta > 127:
                out += bytes([0, 127])
                ldelta -= 127
            while ldelta < -127:
                out += bytes([0, (-127) & 0xff])
                ldelta += 127
            cur = line
        while True:
            step = min(bdelta, 254)
            out += bytes([step, ldelta & 0xff])
            bdelta -= step
            ldelta = -128 if line is None else 0
            if bdelta == 0:
                break
    return bytes(out)


def run_dump(rows):
    p = subprocess.run([str(DUMP)], input="".join(rows), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def parse(line):
    assert not line.startswith("error"), line
    out = []
    for tok in line.split():
        s, e, l = tok.split(":")
        out.append((int(s), int(e), None if int(l) == -1 else int(l)))
    return out


def test_location_table_311_matches_co_lines():
    cos = list(code_objects())
    assert len(cos) > 5000, len(cos)
    rows = [f"311 {co.co_firstlineno} {co.co_linetable.hex()}\n" for co in cos]
    bad = []
    for co, got in zip(cos, run_dump(rows)):
        want = list(co.co_lines())
        if nonempty(parse(got)) != want:
            bad.append((co.co_filename, co.co_qualname, got[:200], want[:5]))
    print(f"{len(cos)} code objects, {len(bad)} differ")
    assert not bad, bad[:5]


def test_310_format_decodes_the_same_ranges():
    cos = list(code_objects())[:5000]
    rows, wants = [], []
    for co in cos:
        want = list(co.co_lines())
        rows.append(f"310 {co.co_firstlineno} {encode_310(want, co.co_firstlineno).hex()}\n")
        wants.append(want)
    bad = [(w[:3], g[:200]) for w, g in zip(wants, run_dump(rows)) if merged(parse(g)) != merged(w)]
    assert not bad, bad[:5]


def test_damaged_tables_are_errors_not_guesses():
    rows = [
        "311 1 f0\n",          # long form without its varint
        "311 1 e8c0\n",        # varint that never ends
        "311 1 00\n",          # no entry starts here
        "310 1 0a\n",          # half a pair
        "312 1 f8\n",          # unknown format
    ]
    out = run_dump(rows)
    assert all(line.startswith("error") for line in out), out


# Where each layout field is, as a C expression gdb evaluates on a build
# with DWARF.
GDB_FIELDS = {
    "runtime_interpreters_head": "&((_PyRuntimeState*)0)->interpreters.head",
    "interp_threads_head": "&((PyInterpreterState*)0)->threads.head",
    "tstate_next": "&((PyThreadState*)0)->next",
    "tstate_native_thread_id": "&((PyThreadState*)0)->native_thread_id",
    "tstate_cframe": "&((PyThreadState*)0)->cframe",
    "cframe_current_frame": "&((_PyCFrame*)0)->current_frame",
    "frame_code": "&((_PyInterpreterFrame*)0)->f_code",
    "frame_previous": "&((_PyInterpreterFrame*)0)->previous",
    "frame_prev_instr": "&((_PyInterpreterFrame*)0)->prev_instr",
    "frame_owner": "&((_PyInterpreterFrame*)0)->owner",
    "frame_is_entry": "&((_PyInterpreterFrame*)0)->is_entry",
    "code_qualname": "&((PyCodeObject*)0)->co_qualname",
    "code_filename": "&((PyCodeObject*)0)->co_filename",
    "code_firstlineno": "&((PyCodeObject*)0)->co_firstlineno",
    "code_linetable": "&((PyCodeObject*)0)->co_linetable",
    "code_code_adaptive": "&((PyCodeObject*)0)->co_code_adaptive",
    "ascii_data": "sizeof(PyASCIIObject)",
    "bytes_data": "&((PyBytesObject*)0)->ob_sval",
    "var_size": "&((PyVarObject*)0)->ob_size",
}
PYENV_LIBPYTHON = pathlib.Path("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0")


def test_layout_311_matches_the_dwarf_of_a_real_build():
    if not PYENV_LIBPYTHON.exists() or not shutil.which("gdb"):
        pytest.skip("no CPython 3.11 build with DWARF (pyenv) or no gdb here")
    p = subprocess.run([str(DUMP), "--layout", "3", "11"], capture_output=True, text=True, check=True)
    ours = dict((k, int(v)) for k, v in (l.split() for l in p.stdout.splitlines()))
    assert ours.pop("flags") == 0  # 3.11 is the shape the flags differ from
    assert set(ours) == set(GDB_FIELDS)
    cmd = ["gdb", "-batch", "-nx", str(PYENV_LIBPYTHON)]
    for expr in GDB_FIELDS.values():
        cmd += ["-ex", f"p (int)({expr})"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    theirs = [int(l.split("=")[1]) for l in out.splitlines() if l.startswith("$")]
    assert len(theirs) == len(GDB_FIELDS), out[-2000:]
    bad = {k: (ours[k], t) for k, t in zip(GDB_FIELDS, theirs) if ours[k] != t}
    assert not bad, bad


def test_version_from_interpreter_file_names():
    want = {
        "/usr/bin/python3.11": "3 11",
        "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0": "3 11",
        "libpython3.12.so": "3 12",
        "python3.13t": "none",  # free-threaded: another object header
        "libpython3.13t.so.1.0": "none",
        "python3.10d": "3 10",
        "/usr/bin/python3": "none",
        "python3.11-config": "none",
        "pythonx.y": "none",
        "libpython3.so": "none",
        "ruby3.1": "none",
    }
    for name, v in want.items():
        p = subprocess.run([str(DUMP), "--name", name], capture_output=True, text=True, check=True)
        assert p.stdout.strip() == v, (name, p.stdout)
    for v in ("12", "13", "10"):
        p = subprocess.run([str(DUMP), "--layout", "3", v], capture_output=True, text=True,
                           check=True)
        assert p.stdout.strip() != "none", v
    p = subprocess.run([str(DUMP), "--layout", "3", "14"], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "none"


# 3.13 describes itself: _PyRuntime starts with _Py_DebugOffsets (cookie
# "xdebugpy", then u64s). Byte positions of what the layout needs, in the
# shape 3.13's pycore_runtime.h gives that struct; "size" fields frame them.
DEBUG_OFFSETS_313 = {
    "runtime_interpreters_head": 40,
    "interp_threads_head": 72,
    "tstate_next": 168,
    "tstate_cframe": 184,            # current_frame
    "tstate_native_thread_id": 200,
    "frame_previous": 232,
    "frame_code": 240,               # executable
    "frame_prev_instr": 248,         # instr_ptr
    "frame_owner": 264,
    "code_filename": 280,
    "code_qualname": 296,
    "code_linetable": 304,
    "code_firstlineno": 312,
    "code_code_adaptive": 344,
    "var_size": 520,                 # bytes_object.ob_size
    "bytes_data": 528,               # bytes_object.ob_sval
    "ascii_data": 560,               # unicode_object.asciiobject_size
}


def runtime_bytes(path, n):
    """The first n bytes of _PyRuntime's initial value in the ELF file."""
    nm = subprocess.run(["nm", "-D", str(path)], capture_output=True, text=True, check=True)
    addr = next(int(l.split()[0], 16) for l in nm.stdout.splitlines()
                if l.split()[-1] == "_PyRuntime")
    for start, end, off in load_segments(str(path)):
        if start <= addr < end:
            with open(path, "rb") as f:
                f.seek(off + addr - start)
                return f.read(n)
    raise AssertionError("_PyRuntime is not in the file's data")


def test_layout_313_matches_the_debug_offsets_of_a_real_build():
    run = os.environ.get("SONDE_PYTHON313")
    if not run:
        pytest.skip("no python3.13 (tests/run fetches Debian 13's: tests/workload/fetch-python3.13)")
    binary = pathlib.Path(run).parent / "root" / "usr" / "bin" / "python3.13"
    raw = runtime_bytes(binary, 600)
    u64 = lambda at: struct.unpack_from("<Q", raw, at)[0]
    assert raw[:8] == b"xdebugpy", raw[:8]
    assert u64(8) >> 16 == 0x030D, hex(u64(8))       # 3.13
    assert u64(16) == 0                                # not free-threaded
    assert (u64(224), u64(272), u64(352)) == (80, 208, 16), "the struct's shape moved"
    p = subprocess.run([str(DUMP), "--layout", "3", "13"], capture_output=True, text=True,
                       check=True)
    ours = dict((k, int(v)) for k, v in (l.split() for l in p.stdout.splitlines()))
    bad = {k: (ours[k], u64(at)) for k, at in DEBUG_OFFSETS_313.items() if ours[k] != u64(at)}
    assert not bad, bad
