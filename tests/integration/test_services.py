"""The services' contracts: privilege drop, socket mode, bad input over
RPC and in files, peers that vanish, restarts and the cache."""
import os
import pathlib
import pwd
import signal
import stat
import subprocess
import time

import grpc
import pytest

from conftest import (SONDE, SYMBOLIZER, WORK_LIB, WORKLOAD, Sensor, Symbolizer, make_tmp, parse_folded,
                      symbols_pb2, wait_for)
from pysensor import PySensor

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def folded(sym):
    r = sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
    return [([s.comm] + list(s.frames), s.count) for s in r.stacks]


def test_symbolizer_drops_to_user_and_socket_mode(symbolizer):
    uid = pwd.getpwnam("sonde").pw_uid
    status = pathlib.Path(f"/proc/{symbolizer.proc.pid}/status").read_text()
    uids = next(l for l in status.splitlines() if l.startswith("Uid:")).split()[1:]
    assert uids == [str(uid)] * 4, status
    caps = next(l for l in status.splitlines() if l.startswith("CapEff:")).split()[1]
    assert int(caps, 16) == 0
    assert stat.S_IMODE(os.stat(symbolizer.sock).st_mode) == 0o660


def test_symbolizer_refuses_root(tmp_path):
    p = subprocess.run([str(SYMBOLIZER), "--listen", f"unix:{tmp_path}/s.sock", "--cache",
                        str(tmp_path / "c.db"), "--user", "root"], capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert "root" in p.stderr


def test_malformed_and_oversized_messages(symbolizer):
    raw = symbolizer.channel.unary_unary("/sonde.v1.Symbols/Status")
    with pytest.raises(grpc.RpcError) as e:
        raw(b"\xff\xff\xff\xff\x0f", timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    big = symbols_pb2.SymbolizeRequest(queries=[symbols_pb2.SymbolizeQuery(path="/x", addresses=[2**63] * 2_200_000)])
    with pytest.raises(grpc.RpcError) as e:
        symbolizer.symbols.Symbolize(big, timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    many = symbols_pb2.SymbolizeRequest(queries=[symbols_pb2.SymbolizeQuery(path="/x", addresses=[1] * 200_000)])
    with pytest.raises(grpc.RpcError) as e:
        symbolizer.symbols.Symbolize(many, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert symbolizer.status().version  # still serving


def test_bad_elf_gives_error_and_basename_frames(symbolizer, tmp_path):
    rnd = os.urandom(70000)
    files = {
        "/opt/bad/libgarbage.so": rnd,
        "/opt/bad/libtrunc.so": open(LIBC, "rb").read()[:3000],
        "/opt/bad/libhdr.so": b"\x7fELF\x02\x01\x01" + b"\xff" * 5000,
    }
    s = PySensor(symbolizer.address, files)
    s.hello()
    s.process(4242, "bad", list(files))
    for i, p in enumerate(files):
        s.stack(i + 1, 4242, [(p, 0x1234 + i)])
    s.close()
    names = {f[-1] for f, _ in folded(symbolizer)}
    for i, p in enumerate(files):
        assert f"{os.path.basename(p)}+0x{0x1234 + i:x}" in names, names
    st = symbolizer.status()
    assert st.files_failed >= 3, st
    r = symbolizer.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[
        symbols_pb2.SymbolizeQuery(path="/opt/bad/libgarbage.so", addresses=[0x10])]), timeout=10)
    assert r.results[0].error


def test_vanishing_sensor_leaves_others_served(symbolizer):
    libc = open(LIBC, "rb").read()
    gone = PySensor(symbolizer.address, {LIBC: libc})
    gone.hello()
    gone.process(100, "gone", [LIBC])
    gone.abort()  # mid-stream, no half-close
    other = PySensor(symbolizer.address, {LIBC: libc})
    other.hello()
    other.process(200, "other", [LIBC])
    other.stack(1, 200, [(LIBC, 0x1000)])
    other.close()
    assert any(f[0] == "pytest" for f, _ in folded(symbolizer))
    assert symbolizer.status().sensors_connected == 0


def test_cache_survives_restart(tmp_path):
    libc = open(LIBC, "rb").read()
    sym = Symbolizer(tmp_path)
    try:
        s = PySensor(sym.address, {LIBC: libc})
        s.hello()
        s.process(300, "first", [LIBC])
        s.stack(1, 300, [(LIBC, 0x30000)])
        s.close()
        assert s.reads, "the first symbolizer must have read libc"
        analysed = sym.status().files_analysed
        assert analysed >= 1
    finally:
        sym.stop()
    sym = Symbolizer(tmp_path)
    try:
        s = PySensor(sym.address, {LIBC: libc})
        s.hello()
        s.process(301, "second", [LIBC])
        s.stack(1, 301, [(LIBC, 0x30000)])
        s.close()
        assert not s.reads, f"libc was analysed again after a restart: {len(s.reads)} reads"
        st = sym.status()
        assert st.cache_hits >= 1 and st.files_analysed == analysed, st
    finally:
        sym.stop()


def test_sensor_reconnects_after_symbolizer_restart(tmp_path, start_sensor, start_workload):
    sym = Symbolizer(tmp_path)
    work = start_workload(20)
    try:
        sensor = start_sensor(sym.address, "--pid", str(work.pid), "--frequency", "49")
        wait_for(lambda: sym.status().samples_received > 0, 20, "samples before the restart")
        sym.proc.send_signal(signal.SIGKILL)
        sym.proc.wait()
        sym.stop()
        time.sleep(1)
        sym = Symbolizer(tmp_path)
        t0 = time.monotonic()
        wait_for(lambda: sym.status().sensors_connected == 1, 10, "the sensor to reconnect")
        reconnect = time.monotonic() - t0
        wait_for(lambda: sym.status().samples_received > 0, 10, "samples after the restart")
        print(f"sensor reconnected {reconnect:.2f} s after the symbolizer came back")
        assert sensor.proc.poll() is None, sensor.logtext()
    finally:
        sym.stop()


def test_half_full_buffer_is_sent_before_the_flush_timer(symbolizer, start_sensor, start_workload):
    """With a flush interval far longer than the test, stacks still arrive
    within seconds: a buffer half full is sent before the timer
    (sensor/main.c buffers_half_full). The workload has three hot stacks
    on two threads, so a bound of 4 (stack, pid, tid) entries is half
    full at every drain. The first drain comes when a quarter of the ring
    is full: about 5 s here when idle, 25 s and more on a loaded machine,
    so the workload outlives a generous wait."""
    work = start_workload(150)
    sensor = start_sensor(symbolizer.address, "--pid", str(work.pid), "--frequency", "199",
                          "--flush-ms", "600000", "--buffer-stacks", "4")
    t0 = time.monotonic()
    # Drains come at a quarter ring (seconds at 199 Hz) or while
    # processes are being made: allow a few, far from 600 s.
    wait_for(lambda: symbolizer.status().samples_received > 100, 120,
             "samples long before the 600 s flush")
    print(f"100 samples received {time.monotonic() - t0:.1f} s after the sensor's start")
    assert sensor.proc.poll() is None, sensor.logtext()


def other_index_format(db):
    # As an older symbolizer would leave it: its version in meta, and
    # index blobs of that version (the header's second u32).
    db.execute("UPDATE meta SET value = 2 WHERE key = 'line_index_version'")
    db.execute("UPDATE lines SET idx = substr(idx, 1, 4) || x'02000000' || substr(idx, 9) "
               "WHERE idx IS NOT NULL")


def damaged_index(db):
    # Cut in half: the blob no longer deserialises; meta is untouched.
    db.execute("UPDATE lines SET idx = substr(idx, 1, length(idx) / 2) WHERE idx IS NOT NULL")


def missing_index(db):
    # As a symbolizer killed after storing a file's symbols and before
    # storing its index leaves it.
    db.execute("DELETE FROM lines")


@pytest.mark.parametrize("spoil", [other_index_format, damaged_index, missing_index])
def test_cache_with_unusable_index_is_analysed_again(spoil):
    """A source index that does not load must not lose the file's lines
    for good. A cache whose indexes another LINE_INDEX_VERSION built (meta
    says so) forgets its analyses at open; a damaged index blob forgets
    its file's analysis when it is looked up; a file with symbols and no
    index row is forgotten at open. Each way the CLI uploads the file
    again and the answer keeps its lines."""
    import json
    import sqlite3
    from test_symbolize import nm_functions
    tmp = make_tmp()
    lib = str(WORK_LIB)
    start, size, _ = nm_functions(lib, True)[0]
    addrs = [hex(start), hex(start + size // 2)]

    def symbolize(sym):
        p = subprocess.run([str(SONDE), "symbolize", "--json", "--symbolizer", sym.address, "--file", lib,
                            *addrs], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return [json.loads(ln) for ln in p.stdout.splitlines()]
    sym = Symbolizer(tmp)
    try:
        first = symbolize(sym)
    finally:
        sym.stop()
    assert all(f["line"] > 0 for r in first for f in r["frames"]), first
    db = sqlite3.connect(str(sym.cache))
    spoil(db)
    db.commit()
    db.close()
    sym = Symbolizer(tmp)
    try:
        again = symbolize(sym)
        log = sym.logtext()
    finally:
        sym.stop()
    assert again == first, (again, first)
    assert "analysed again" in log, log


def bpf_prog_ids_held_by(pid):
    """IDs of the BPF programs process pid holds a descriptor of, from
    /proc/PID/fdinfo (a program's fd shows "prog_id:"; a link's, since
    5.19, "prog_id:" too): this process's own, not other tests' or users'."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            text = open(f"/proc/{pid}/fdinfo/{fd}").read()
        except OSError:
            continue  # closed meanwhile
        ids.update(l.split()[1] for l in text.splitlines() if l.startswith("prog_id:"))
    return ids


def bpf_prog_ids():
    out = subprocess.run(["bpftool", "prog", "show"], capture_output=True, text=True, check=True).stdout
    return {l.split(":")[0] for l in out.splitlines() if l and l[0].isdigit()}


def test_sensor_kill9_leaves_no_bpf_programs(symbolizer, start_sensor):
    # Only the sensor's own programs are watched: other programs of the
    # machine (other tests, other sensors) come and go meanwhile.
    sensor = start_sensor(symbolizer.address, "--frequency", "19")
    wait_for(lambda: symbolizer.status().sensors_connected == 1, 20, "the sensor to connect")
    mine = bpf_prog_ids_held_by(sensor.proc.pid)
    assert mine, "the sensor holds no BPF program"
    assert mine <= bpf_prog_ids(), (mine, "not listed by bpftool")
    sensor.proc.send_signal(signal.SIGKILL)
    sensor.proc.wait()
    wait_for(lambda: not (mine & bpf_prog_ids()), 10, "the sensor's BPF programs to go away")


def test_status_cli(symbolizer):
    out = subprocess.run([str(SONDE), "status", "--symbolizer", symbolizer.address], capture_output=True,
                         text=True, timeout=20)
    assert out.returncode == 0 and "files_analysed" in out.stdout, out.stderr
    # One column of values, the longest key included.
    block = out.stdout.split("\n\n")[0].splitlines()
    assert any(l.startswith("go_probe_attach_failures ") for l in block), block
    assert all(len(l) > 25 and l[24] == " " and l[25] != " " for l in block), block
    js = subprocess.run([str(SONDE), "status", "--json", "--symbolizer", symbolizer.address],
                        capture_output=True, text=True, timeout=20)
    import json
    assert "samples_received" in json.loads(js.stdout)
    down = subprocess.run([str(SONDE), "status", "--symbolizer", "unix:/nonexistent/sock"],
                          capture_output=True, text=True, timeout=40)
    assert down.returncode != 0 and "cannot reach the symbolizer" in down.stderr


def test_whole_host_top_and_folded_commands(symbolizer, start_sensor, tmp_path):
    start_sensor(symbolizer.address, "--frequency", "49")
    # The workload runs only once the sensor streams: a sensor that is
    # slow to start on a busy host must not miss all of it.
    wait_for(lambda: symbolizer.status().sensors_connected >= 1, 20, "the sensor to connect")
    work = subprocess.run([str(WORKLOAD), "3"])
    assert work.returncode == 0
    wait_for(lambda: symbolizer.status().samples_received > 100, 20, "whole-host samples")
    # On a cold cache the whole host's files (80 or so) are analysed first;
    # stacks wait for their files (up to 10 s), so the workload's may come
    # a few seconds after its samples.
    out = tmp_path / "host.folded"

    def folded_has_leaf():
        f = subprocess.run([str(SONDE), "folded", "--symbolizer", symbolizer.address, "-o", str(out)],
                           capture_output=True, text=True, timeout=30)
        assert f.returncode == 0, f.stderr
        return any("leaf_b_hash" in frames for frames, _ in parse_folded(out.read_text()))
    wait_for(folded_has_leaf, 20, "the workload's stacks in the store", interval=0.5)
    # The first of them may be a single stack, under top's cut; the rest
    # follow as their files' analyses end.
    last = []

    def top_has_leaf():
        top = subprocess.run([str(SONDE), "top", "--symbolizer", symbolizer.address], capture_output=True,
                             text=True, timeout=30)
        assert top.returncode == 0 and "FUNCTION" in top.stdout, top.stderr
        last[:] = [top.stdout]
        return "leaf_b_hash" in top.stdout
    try:
        wait_for(top_has_leaf, 15, "the workload's leaf in top", interval=0.5)
    except AssertionError as e:
        raise AssertionError(f"{e}: {last[0] if last else ''}") from None


def test_source_index_rebuilt_for_files_analysed_before_it(tmp_path):
    """A cache from a symbolizer without source indexes (schema 4 or
    older) has files but no lines: opening it forgets those files once, so
    the files a sensor maps are analysed again and exports get lines."""
    import sqlite3
    tmp = make_tmp()
    work = subprocess.Popen([str(WORKLOAD), "30"])
    sym, sensor = Symbolizer(tmp), None
    try:
        sensor = Sensor(tmp, sym.address, ["--pid", str(work.pid)])
        wait_for(lambda: sym.status().files_analysed >= 2, 20, "the workload's files analysed")
        sensor.stop()
        sym.stop()
        db = sqlite3.connect(str(sym.cache))
        files = db.execute("SELECT count(*) FROM files").fetchone()[0]
        db.execute("DELETE FROM lines")
        db.execute("PRAGMA user_version = 4")
        db.commit()
        db.close()
        assert files >= 2

        sym = Symbolizer(tmp)
        sensor = Sensor(tmp, sym.address, ["--pid", str(work.pid)])

        def lines():
            db = sqlite3.connect(str(sym.cache))
            try:
                return db.execute("SELECT count(*) FROM lines").fetchone()[0]
            finally:
                db.close()
        wait_for(lambda: lines() >= 2, 20, "the source indexes rebuilt")
    finally:
        work.kill()
        work.wait()
        if sensor:
            sensor.stop()
        sym.stop()
