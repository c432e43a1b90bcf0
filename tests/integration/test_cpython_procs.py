"""CPython processes get their BPF entry (issue 5, step 2): the real
sensor and symbolizer follow a Debian python3.11 (stripped, not PIE) and
a child pyenv python3.11 (libpython3.11.so, PIE); the sensor's
interp_procs map (read with bpftool through the sensor's own map fds)
holds, for each, the address of its _PyRuntime as nm -D and
/proc/PID/maps give it, and the 3.11 layout. The entries go when the
processes exit."""
import json
import os
import subprocess

import pytest

from conftest import wait_for

DEBIAN = "/usr/bin/python3.11"
PYENV = "/root/.pyenv/versions/3.11.7/bin/python3.11"
LIBPYTHON = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"

PARENT = f"""
import subprocess, sys, threading
def spin():
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
sys.stdin.readline()
child = subprocess.Popen([{PYENV!r}, "-c", "while True: pass"])
print(child.pid, flush=True)
sys.stdin.readline()
child.kill()
child.wait()
"""


def nm_value(path, name):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    return int(next(l.split()[0] for l in out.splitlines() if l.split()[-1] == name), 16)


def load_base(pid, path):
    """Start of the offset-0 mapping of path (its first segment has vaddr 0)."""
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and f[5] == path and int(f[2], 16) == 0:
            return int(f[0].split("-")[0], 16)
    raise AssertionError(f"{path} not mapped by {pid}")


def cpython_map_id(sensor_pid):
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
                if info.get("name") == "interp_procs":
                    return i
    raise AssertionError("the sensor has no interp_procs map")


def entries(map_id):
    """pid -> (runtime_addr, major, minor, tstate_native_thread_id)"""
    out = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", map_id],
                                    capture_output=True, text=True, check=True).stdout or "[]")
    ret = {}
    for e in out:
        key = bytes(int(b, 16) for b in e["key"])
        val = bytes(int(b, 16) for b in e["value"])
        pid = int.from_bytes(key, "little")
        ret[pid] = (int.from_bytes(val[:8], "little"), val[8], val[9],
                    int.from_bytes(val[8 + 8:8 + 10], "little"))
    return ret


@pytest.mark.skipif(not (os.path.exists(DEBIAN) and os.path.exists(PYENV)), reason="no python3.11s")
def test_cpython_entries(symbolizer, start_sensor):
    parent = subprocess.Popen([DEBIAN, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        sensor = start_sensor(symbolizer.address, "--pid", str(parent.pid))
        wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor to connect")
        map_id = cpython_map_id(sensor.proc.pid)
        want = nm_value(DEBIAN, "_PyRuntime")  # not PIE: the address itself
        wait_for(lambda: parent.pid in entries(map_id), 30, "the parent's entry")
        addr, major, minor, tid_off = entries(map_id)[parent.pid]
        assert (addr, major, minor, tid_off) == (want, 3, 11, 160)
        # A child started now, mapping another file with the same role.
        parent.stdin.write("\n")
        parent.stdin.flush()
        child = int(parent.stdout.readline())
        wait_for(lambda: child in entries(map_id), 30, "the pyenv child's entry")
        want = load_base(child, LIBPYTHON) + nm_value(LIBPYTHON, "_PyRuntime")
        assert entries(map_id)[child][:3] == (want, 3, 11)
        parent.stdin.write("\n")
        parent.stdin.flush()
        parent.wait(10)
        wait_for(lambda: not ({parent.pid, child} & set(entries(map_id))), 30,
                 "the entries to go with their processes")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
