"""The BPF CPython walk (issue 5, step 3): under the real sensor and
symbolizer, Debian's stripped python3.11 runs nested functions on two
threads. The walker finds each sampled thread's state and frames: every
hot function's code object (id() in CPython is its address) is in the
sensor's cpython_codes map for that process, its metadata was sent as a
record, and most samples carry interpreter frames (the sensor's exit
summary counts them)."""
import json
import os
import re
import subprocess

import pytest

from conftest import SRC, wait_cpu, wait_for  # noqa: F401

PYTHON = "/usr/bin/python3.11"
SCRIPT = r"""
import threading
def leaf_a(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def middle_a():
    while True:
        leaf_a(10000)
def leaf_b(n):
    x = 1.0
    for i in range(n):
        x = x * 1.0000001
    return x
def outer_b():
    while True:
        leaf_b(10000)
threading.Thread(target=outer_b, daemon=True).start()
print(id(leaf_a.__code__), id(middle_a.__code__), id(leaf_b.__code__), id(outer_b.__code__),
      flush=True)
middle_a()
"""


def sensor_map(sensor_pid, name):
    for fd in os.listdir(f"/proc/{sensor_pid}/fdinfo"):
        try:
            text = open(f"/proc/{sensor_pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("map_id:"):
                i = line.split()[1]
                info = json.loads(subprocess.run(["bpftool", "-j", "map", "show", "id", i],
                                                 capture_output=True, text=True, check=True).stdout)
                if info.get("name") == name:
                    return i
    raise AssertionError(f"the sensor has no {name} map")


def codes_seen(map_id):
    """set of (tgid, code address) in cpython_codes"""
    out = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", map_id],
                                    capture_output=True, text=True, check=True).stdout or "[]")
    ret = set()
    for e in out:
        key = bytes(int(b, 16) for b in e["key"])
        ret.add((int.from_bytes(key[:4], "little"), int.from_bytes(key[8:16], "little")))
    return ret


@pytest.mark.skipif(not os.path.exists(PYTHON), reason="no python3.11")
def test_cpython_walk(symbolizer, start_sensor):
    py = subprocess.Popen([PYTHON, "-c", SCRIPT], stdout=subprocess.PIPE, text=True)
    try:
        codes = [int(x) for x in py.stdout.readline().split()]
        sensor = start_sensor(symbolizer.address, "--pid", str(py.pid), "--frequency", "199")
        try:
            wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor to connect")
        except AssertionError:
            raise AssertionError(sensor.logtext())
        map_id = sensor_map(sensor.proc.pid, "cpython_codes")
        wait_for(lambda: {(py.pid, c) for c in codes} <= codes_seen(map_id), 30,
                 "the four hot code objects in cpython_codes")
        wait_cpu(py.pid, 2)
        assert sensor.stop() == 0
        log = sensor.log_path.read_text()
        m = re.search(r"cpython: (\d+) samples of configured processes, (\d+) with (\d+) "
                      r"interpreter frames, (\d+) code object records", log)
        assert m, log[-2000:]
        configured, samples, frames, records = map(int, m.groups())
        taken = int(re.search(r"samples taken (\d+)", log).group(1))
        print(f"taken {taken}, configured {configured}, with frames {samples}, frames {frames}, "
              f"records {records}")
        assert configured > 150 and configured > 0.5 * taken, (configured, taken)
        # Two spinning threads: nearly every sample (once the config is
        # loaded) finds its thread and frames.
        assert samples >= 0.95 * configured, (samples, configured)
        # Each stack is two Python frames deep (leaf under its caller).
        assert frames >= 2 * samples * 0.95, (frames, samples)
        # Once per code object (the module's and threading's are few).
        assert 4 <= records < 100, records
    finally:
        py.kill()
        py.wait()
