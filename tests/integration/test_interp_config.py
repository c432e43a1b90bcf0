"""Interpreter configs over the real Ingest protocol (issue 5, step 1): a
Python sensor maps Debian's stripped python3.11 and libc; the symbolizer
analyses both and sends an InterpreterConfig for python3.11 only, whose
runtime offset matches nm -D and readelf -lW and whose layout is the 3.11
table of bpf/cpython.h; a second symbolizer on the same cache sends it
again from SQLite without reading the file."""
import struct
import subprocess
import threading
import time

import grpc
import pytest

from conftest import SYMBOLIZER, Symbolizer, ingest_pb2, wait_for
from pysensor import PySensor

PYTHON = "/usr/bin/python3.11"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
# struct sonde_cpython_offsets (bpf/cpython.h): two u8, 19 offsets, flags, pad.
OFFSETS = struct.Struct("<BB21H")


class ConfigSensor(PySensor):
    """PySensor that also collects InterpreterConfig messages."""

    def __init__(self, address, files):
        self.configs = {}
        self.lock = threading.Lock()
        super().__init__(address, files)

    def _serve(self):
        try:
            for m in self._responses:
                if m.HasField("interpreter_config"):
                    c = m.interpreter_config
                    with self.lock:
                        self.configs.setdefault(c.file_id, []).append(c)
                    continue
                if m.HasField("welcome"):
                    self.welcome.set()
                elif m.HasField("read_range"):
                    r = m.read_range
                    self._last_activity = time.monotonic()
                    self.reads.append((r.file_id, r.offset, r.length))
                    data = self.files.get(r.file_id)
                    self.send(file_range=ingest_pb2.FileRange(
                        request_id=r.request_id, file_id=r.file_id, offset=r.offset,
                        data=data[r.offset:r.offset + r.length] if data else b"",
                        error="" if data else "unknown file"))
        except grpc.RpcError as e:
            self.error = e


def binutils_runtime_offset(path):
    """_PyRuntime's address (nm -D) in the executable segment's file
    coordinates (readelf -lW)."""
    nm = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                        check=True).stdout
    vaddr = int(next(l.split()[0] for l in nm.splitlines() if l.split()[-1] == "_PyRuntime"), 16)
    for line in subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD" and " R E " in line:
            return vaddr - int(f[2], 16) + int(f[1], 16)
    raise AssertionError("no executable segment")


def check_config(c, path):
    assert c.kind == 1  # SONDE_INTERP_CPYTHON (bpf/interp.h)
    assert c.format_version == 2 and not c.error
    assert c.runtime_offset == binutils_runtime_offset(path)
    off = OFFSETS.unpack(c.layout)
    assert off[:2] == (3, 11)
    # tstate_native_thread_id and frame_code of 3.11 (cpython_layout.c).
    assert off[5] == 160 and off[8] == 32 and off[21] == 0  # 3.11: no flags


@pytest.mark.skipif(not __import__("os").path.exists(PYTHON), reason="no python3.11")
def test_interpreter_config_sent_and_cached(tmp_path):
    files = {PYTHON: open(PYTHON, "rb").read(), LIBC: open(LIBC, "rb").read()}
    sym = Symbolizer(tmp_path)
    try:
        s = ConfigSensor(sym.address, files)
        s.hello()
        py = s.ids[PYTHON]
        s.process(4242, "python3.11", [PYTHON, LIBC])
        wait_for(lambda: py in s.configs, 30, "python3.11's InterpreterConfig")
        assert s.reads, "the config was not computed from the sensor's bytes"
        check_config(s.configs[py][0], PYTHON)
        # Once per session per file, and none for libc.
        s.process(4243, "python3.11", [PYTHON, LIBC])
        time.sleep(1.0)
        assert len(s.configs[py]) == 1, "sent twice to one session"
        assert s.ids[LIBC] not in s.configs
        s.close()
    finally:
        sym.stop()

    sym = Symbolizer(tmp_path)
    try:
        s = ConfigSensor(sym.address, files)
        s.hello()
        t0 = time.monotonic()
        s.process(4242, "python3.11", [PYTHON])
        wait_for(lambda: py in s.configs, 5, "the config after a restart")
        assert time.monotonic() - t0 < 1.0
        assert not s.reads, f"python3.11 was read again: {len(s.reads)} ReadRange"
        check_config(s.configs[py][0], PYTHON)
        s.close()
    finally:
        sym.stop()


def test_interpreters_option_leaves_a_runtime_out(tmp_path):
    """--interpreters none: the Data is still analysed and cached, but no
    sensor gets a config (the walker never runs: native frames only);
    --interpreters cpython sends it again from the same cache."""
    files = {PYTHON: open(PYTHON, "rb").read()}
    bad = subprocess.run([str(SYMBOLIZER), "--interpreters", "cpython,nope"],
                         capture_output=True, text=True, timeout=10)
    assert bad.returncode != 0 and "bad --interpreters" in bad.stderr
    sym = Symbolizer(tmp_path, extra=["--interpreters", "none"])
    try:
        s = ConfigSensor(sym.address, files)
        s.hello()
        py = s.ids[PYTHON]
        s.process(4242, "python3.11", [PYTHON])
        wait_for(lambda: s.reads, 30, "the analysis of python3.11")
        time.sleep(3.0)
        assert py not in s.configs, "a config of a kind left out was sent"
        s.close()
    finally:
        sym.stop()
    sym = Symbolizer(tmp_path, extra=["--interpreters", "cpython"])
    try:
        s = ConfigSensor(sym.address, files)
        s.hello()
        s.process(4242, "python3.11", [PYTHON])
        wait_for(lambda: py in s.configs, 10, "the config with --interpreters cpython")
        s.close()
    finally:
        sym.stop()
