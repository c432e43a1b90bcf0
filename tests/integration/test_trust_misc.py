"""Issue 27, the smaller holes: target text that is not UTF-8 (hole 7),
the store private to the service user (hole 5), Landlock failing closed,
socket and cache set-up that follows no symlink, and the deployment files
(hole 8). Real services, real processes, Debian's python3-grpcio."""
import ctypes
import grpc
import os
import pathlib
import pwd
import grp
import shutil
import subprocess
import sys
import time

import pytest

from conftest import (SYMBOLIZER, SENSOR, SRC, BUILD, Symbolizer, Sensor, make_tmp, wait_for,
                      symbols_pb2, symbols_pb2_grpc)

# A process whose name is not UTF-8: prctl(PR_SET_NAME) takes any bytes,
# and the kernel shows them as they are in comm and /proc/PID/status.
BAD_NAME = b"\xff\xfesonde\xc0\xafx\xed\xa0\x80"
BAD_ESCAPED = "\\xff\\xfesonde\\xc0\\xafx\\xed\\xa0\\x80"
BURNER = r"""
import ctypes, sys
libc = ctypes.CDLL(None)
if libc.prctl(15, ctypes.c_char_p(%r), 0, 0, 0) != 0:
    sys.exit("prctl failed")
print("ready", flush=True)
x = 0
while True:
    x = (x * 31 + 7) %% 1000003
""" % BAD_NAME


def test_invalid_utf8_thread_name(tmp_path):
    """A thread named with invalid UTF-8 bytes burns CPU under the real
    sensor and symbolizer: python3-grpcio's Folded and Top still decode
    (before the fix Folded failed with "Exception deserializing
    response"), and the name shows escaped as \\xNN."""
    burner = subprocess.Popen([sys.executable, "-c", BURNER], stdout=subprocess.PIPE, text=True)
    sym = sensor = None
    try:
        assert burner.stdout.readline().strip() == "ready"
        assert pathlib.Path(f"/proc/{burner.pid}/comm").read_bytes().rstrip(b"\n") == BAD_NAME[:15]
        sym = Symbolizer(tmp_path)
        sensor = Sensor(tmp_path, sym.address, ["--pid", str(burner.pid), "--frequency", "99"])
        q = symbols_pb2.ProfileQuery(pid=burner.pid)

        def have_samples():
            return sym.symbols.Folded(q, timeout=10).total_samples >= 20
        wait_for(have_samples, 60, "samples of the badly named process")
        folded = sym.symbols.Folded(q, timeout=10)
        comms = {s.comm for s in folded.stacks} | {s.frames[0] for s in folded.stacks if s.frames}
        want = BAD_ESCAPED[:len("\\xff\\xfesonde\\xc0\\xafx\\xed\\xa0")]  # comm keeps 15 bytes
        assert any(c.startswith(want) for c in comms), comms
        top = sym.symbols.Top(q, timeout=10)
        assert top.total_samples > 0 and top.entries
        # The whole-host views decode too.
        sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
        sym.symbols.Top(symbols_pb2.ProfileQuery(), timeout=10)
        sym.status()
        # The sensor sent the name escaped, and the symbolizer did not
        # end the stream over it.
        assert sensor.proc.poll() is None, sensor.logtext()
    finally:
        burner.kill()
        burner.wait()
        if sensor:
            sensor.stop()
        if sym:
            sym.stop()
