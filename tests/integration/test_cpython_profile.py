"""Python stacks end to end (issue 5, step 5): the real sensor and
symbolizer profile python3.11 (Debian's stripped executable, and pyenv's
build whose interpreter is libpython3.11.so) and python3.13 (Debian 13's,
fetched by tests/run, on its own glibc) running nested functions and a
method on the main thread and a generator on a second thread. In the
symbolizer's folded output:
  - >= 95 % of each thread's samples carry its expected Python chain, in
    place of _PyEval_EvalFrameDefault, and no stack mixes the two threads;
  - the leaf frame's most common line is its hot statement;
  - a script that burns CPU for 1 s and exits is fully named afterwards;
  - zlib on a large buffer shows the Python caller above libz's frames.
Each workload waits on stdin until its process has its entry in the
sensor's interp_procs map (the symbolizer has analysed the interpreter and
sent its config): samples before that have no Python frames by design."""
import os
import pathlib
import subprocess
import time
from collections import Counter

import pytest

from conftest import symbols_pb2, wait_for
from test_cpython_procs import cpython_map_id, entries

DEBIAN = "/usr/bin/python3.11"
PYENV = "/root/.pyenv/versions/3.11.7/bin/python3.11"
PY313 = os.environ.get("SONDE_PYTHON313", "")
PYTHONS = [p for p in (DEBIAN, PYENV, PY313) if p and os.path.exists(p)]

THREADS = """\
import sys, threading
class Worker:
    def spin(self, n):
        t = 0
        for i in range(n):
            t += (i * i * i) % 7 + (i << 3) % 11 - (i ^ 5)  # HOT_METHOD
        return t
def middle():
    w = Worker()
    while True:
        w.spin(20000)  # CALL_SPIN
def outer():
    middle()  # CALL_MIDDLE
def gen(n):
    for i in range(n):
        yield (i * i * i) % 7 + (i << 3) % 11 - (i ^ 5)  # HOT_GEN
def consume():
    s = 0
    for v in gen(20000):  # CALL_GEN
        s += v
    return s
def b_loop():
    while True:
        consume()  # CALL_CONSUME
print("ready", flush=True)
sys.stdin.readline()
threading.Thread(target=b_loop, daemon=True).start()
outer()  # CALL_OUTER
"""

BURN = """\
import sys, time
def burn_leaf(n):
    t = 0
    for i in range(n):
        t += (i * i * i) % 7 + (i << 3) % 11 - (i ^ 5)  # HOT_BURN
    return t
def burn():
    end = time.process_time() + 1.0  # CPU time: ~199 samples however loaded
    while time.process_time() < end:
        burn_leaf(20000)  # CALL_BURN_LEAF
sys.stdin.readline()
burn()  # CALL_BURN
"""

ZLIB = """\
import os, sys, zlib
def compress_all(buf):
    while True:
        zlib.compress(buf, 9)  # CALL_ZLIB
def main():
    compress_all(os.urandom(1 << 20))  # CALL_COMPRESS_ALL
print("ready", flush=True)
sys.stdin.readline()
main()  # CALL_MAIN
"""


def line(src, marker):
    return next(i + 1 for i, l in enumerate(src.splitlines()) if l.endswith("# " + marker))


def folded(sym, pid):
    r = sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
    return [(list(s.frames), s.count) for s in r.stacks if s.pid == pid]


def name_of(frame):
    return frame.split(" (", 1)[0]


def python_chain(frames):
    """Names of the frames named like Python frames, root first."""
    return [name_of(f) for f in frames if f.endswith(".py)") or ".py:" in f]


def ends_with_chain(frames, chain):
    """The Python frames end with chain, or with chain less its leaf (a
    sample in the caller between two calls)."""
    c = python_chain(frames)
    return c[-len(chain):] == chain or c[-len(chain) + 1:] == chain[:-1]


def start(tmp, python, src, name):
    path = pathlib.Path(tmp) / name
    path.write_text(src)
    return path, subprocess.Popen([python, str(path)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)


def profile(symbolizer, start_sensor, py, *extra):
    """A sensor following py; returns once BPF has py's interpreter entry,
    then lets the workload start (a line on its stdin)."""
    sensor = start_sensor(symbolizer.address, "--pid", str(py.pid), "--frequency", "199", *extra)
    try:
        wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor to connect")
        map_id = cpython_map_id(sensor.proc.pid)
        wait_for(lambda: py.pid in entries(map_id), 60, "the interpreter's BPF entry",
                 interval=0.2)
    except AssertionError:
        raise AssertionError(sensor.logtext())
    py.stdin.write("\n")
    py.stdin.flush()
    return sensor


@pytest.mark.parametrize("python", PYTHONS)
def test_threads_nested_method_generator(symbolizer, start_sensor, tmp_path, python):
    path, py = start(tmp_path, python, THREADS, "threads.py")
    try:
        assert py.stdout.readline().strip() == "ready"
        sensor = profile(symbolizer, start_sensor, py)

        def enough():
            st = folded(symbolizer, py.pid)
            return st if sum(c for f, c in st if "Worker.spin" in python_chain(f)) >= 200 else None
        stacks = wait_for(enough, 60, "200 samples in Worker.spin", interval=1.0)
        time.sleep(1.0)
        stacks = folded(symbolizer, py.pid)
        sensor.stop()
    finally:
        py.kill()
        py.wait()
    a_chain = ["<module>", "outer", "middle", "Worker.spin"]
    b_chain = ["b_loop", "consume", "gen"]
    total = sum(c for _, c in stacks)
    a = sum(c for f, c in stacks if "middle" in python_chain(f))
    b = sum(c for f, c in stacks if "consume" in python_chain(f))
    a_ok = sum(c for f, c in stacks if ends_with_chain(f, a_chain))
    b_ok = sum(c for f, c in stacks if ends_with_chain(f, b_chain))
    mixed = [f for f, _ in stacks if "middle" in python_chain(f) and "consume" in python_chain(f)]
    print(f"{python}: {total} samples, thread A {a} ({a_ok} with the chain), "
          f"thread B {b} ({b_ok} with the chain)")
    assert not mixed, mixed[:3]
    # Every sample of the main thread (it spins in outer() from its start).
    a_all = sum(c for f, c in stacks if not any(n in python_chain(f) for n in ("consume", "gen")))
    assert a_ok >= 0.95 * a_all - 3, (a_ok, a, a_all, stacks[:5])
    assert b_ok >= 0.95 * b and b > 100, (b_ok, b)
    for leaf, marker in (("Worker.spin", "HOT_METHOD"), ("gen", "HOT_GEN")):
        lines = Counter()
        for f, c in stacks:
            py_frames = [x for x in f if name_of(x) == leaf]
            if py_frames and ":" in py_frames[-1]:
                lines[int(py_frames[-1].rsplit(":", 1)[1].rstrip(")"))] += c
        assert lines.most_common(1)[0][0] == line(THREADS, marker), (leaf, lines)
    # The call sites of the callers are exact too.
    for caller, marker in (("middle", "CALL_SPIN"), ("outer", "CALL_MIDDLE"),
                           ("consume", "CALL_GEN")):
        want = f"{caller} ({path}:{line(THREADS, marker)})"
        assert any(want in f for f, _ in stacks), (want, stacks[:3])
    assert not any("_PyEval_EvalFrameDefault" in f for fr, _ in stacks for f in fr
                   if "middle" in python_chain(fr))


@pytest.mark.parametrize("python", PYTHONS)
def test_exited_script_is_named(symbolizer, start_sensor, tmp_path, python):
    path, py = start(tmp_path, python, BURN, "burn.py")
    sensor = profile(symbolizer, start_sensor, py)
    assert py.wait(30) == 0
    time.sleep(2.0)  # the sensor's flush
    sensor.stop()
    chain = ["<module>", "burn", "burn_leaf"]

    def named():
        st = folded(symbolizer, py.pid)
        n = sum(c for f, c in st if ends_with_chain(f, chain))
        return (st, n) if n >= 50 else None  # 1 s at 199 Hz on a busy 2-CPU machine
    stacks, n = wait_for(named, 30, "the burn's samples", interval=1.0)
    burning = sum(c for f, c in stacks if "burn" in python_chain(f))
    print(f"{python}: {n} of {burning} samples in burn() carry the chain")
    assert n >= 0.95 * burning, (n, burning)
    want = f"burn_leaf ({path}:{line(BURN, 'HOT_BURN')})"
    assert any(want in f for f, _ in stacks), stacks[:3]


@pytest.mark.parametrize("python", [p for p in PYTHONS if p != PYENV])
def test_python_above_zlib(symbolizer, start_sensor, tmp_path, python):
    path, py = start(tmp_path, python, ZLIB, "zlib_hot.py")
    try:
        assert py.stdout.readline().strip() == "ready"
        sensor = profile(symbolizer, start_sensor, py)

        def enough():
            st = folded(symbolizer, py.pid)
            return st if sum(c for f, c in st if "compress_all" in python_chain(f)) >= 100 else None
        stacks = wait_for(enough, 60, "100 samples in compress_all", interval=1.0)
        sensor.stop()
    finally:
        py.kill()
        py.wait()
    call = f"compress_all ({path}:{line(ZLIB, 'CALL_ZLIB')})"
    mixed = 0
    for f, c in stacks:
        if call in f:
            below = f[f.index(call) + 1:]
            if any(x in ("deflate", "deflate_slow", "longest_match", "fill_window") or
                   "libz" in x for x in below):
                mixed += c
    total = sum(c for f, c in stacks if "compress_all" in python_chain(f))
    print(f"{python}: {mixed} of {total} samples show libz under compress_all")
    assert mixed >= 0.8 * total, (mixed, total, stacks[:3])
