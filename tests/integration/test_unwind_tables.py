"""Unwind tables over the real Ingest protocol: a Python sensor maps libc
and receives its UnwindTable (rows decode as bpf/unwind.h's 12-byte
little-endian struct, sorted and consistent); a second symbolizer on the
same cache sends the table again with no ReadRange at all, within 1 s;
a file with no usable table gets one UnwindTable with error set; a file
a client uploaded gets its table too (computed after its source index),
the same rows as from a sensor's bytes."""
import struct
import subprocess
import threading
import time

import grpc

from conftest import SONDE, Symbolizer, ingest_pb2, wait_for
from pysensor import PySensor

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
ROW = struct.Struct("<IBBhi")  # pc, cfa_kind, fp_kind, fp_off, cfa_off
SP, FP, PLT, SIGNAL, STOP, UNSUPPORTED = 1, 2, 3, 4, 5, 6


class TableSensor(PySensor):
    """PySensor that also collects UnwindTable chunks."""

    def __init__(self, address, files):
        self.tables = {}       # file_id -> list of chunks
        self.table_done = {}   # file_id -> monotonic time of the last chunk
        self.lock = threading.Lock()
        super().__init__(address, files)

    def _serve(self):
        try:
            for m in self._responses:
                if m.HasField("unwind_table"):
                    t = m.unwind_table
                    with self.lock:
                        self.tables.setdefault(t.file_id, []).append(t)
                        if t.last:
                            self.table_done[t.file_id] = time.monotonic()
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

    def rows(self, fid):
        chunks = self.tables[fid]
        assert chunks[0].first and chunks[-1].last
        assert all(c.format_version == 1 for c in chunks)
        data = b"".join(c.rows for c in chunks)
        assert len(data) % ROW.size == 0
        rows = [ROW.unpack_from(data, i) for i in range(0, len(data), ROW.size)]
        assert len(rows) == chunks[0].total_rows
        return rows


def check_rows(rows, size):
    assert len(rows) > 1000
    for prev, cur in zip(rows, rows[1:]):
        assert cur[0] > prev[0], "rows not sorted"
        assert cur[1:] != prev[1:], "identical neighbours not merged"
    for pc, kind, fp_kind, fp_off, cfa_off in rows:
        assert pc < size
        assert SP <= kind <= UNSUPPORTED and fp_kind in (0, 1)
        if kind in (SP, FP):
            assert 0 < cfa_off < 1 << 20
        else:
            assert cfa_off == 0 and fp_kind == 0 and fp_off == 0
        if fp_kind == 1:
            assert fp_off < 0
    assert rows[-1][1] == UNSUPPORTED  # ends the last range
    kinds = {r[1] for r in rows}
    assert {SP, SIGNAL, STOP, PLT} <= kinds, kinds


def test_unwind_table_sent_and_cached(tmp_path):
    libc = open(LIBC, "rb").read()
    sym = Symbolizer(tmp_path)
    try:
        s = TableSensor(sym.address, {LIBC: libc})
        s.hello()
        fid = s.ids[LIBC]
        s.process(4242, "pytest", [LIBC])
        wait_for(lambda: fid in s.table_done, 20, "libc's unwind table")
        assert s.reads, "the table was not computed from the sensor's bytes"
        rows = s.rows(fid)
        check_rows(rows, len(libc))
        # Once per session per file: a second update sends nothing new.
        s.process(4243, "pytest2", [LIBC])
        n_chunks = len(s.tables[fid])
        time.sleep(0.8)
        assert len(s.tables[fid]) == n_chunks, "the table was sent twice to one session"
        st = sym.status()
        assert st.unwind_tables_built >= 1
        s.send(stats=ingest_pb2.SensorStats(unwind_tables_loaded=1, unwind_rows_loaded=len(rows),
                                            bpf_map_bytes=123456))
        wait_for(lambda: sym.status().bpf_map_bytes == 123456, 5, "SensorStats in Status")
        assert sym.status().unwind_rows_loaded == len(rows)
        s.close()
    finally:
        sym.stop()

    # Restart on the same cache: the table comes from SQLite, at once.
    sym = Symbolizer(tmp_path)
    try:
        s = TableSensor(sym.address, {LIBC: libc})
        s.hello()
        t0 = time.monotonic()
        s.process(4242, "pytest", [LIBC])
        wait_for(lambda: fid in s.table_done, 5, "libc's table after a restart")
        elapsed = s.table_done[fid] - t0
        assert elapsed < 1.0, f"cached table took {elapsed:.2f} s"
        assert not s.reads, f"libc was read again: {len(s.reads)} ReadRange"
        assert s.rows(fid) == rows
        s.close()
    finally:
        sym.stop()


def sensor_rows(sym, libc):
    """libc's table as a new Python sensor mapping it receives: (rows,
    ReadRange count)."""
    s = TableSensor(sym.address, {LIBC: libc})
    try:
        s.hello()
        fid = s.ids[LIBC]
        s.process(4242, "pytest", [LIBC])
        wait_for(lambda: fid in s.table_done, 20, "libc's unwind table")
        return s.rows(fid), len(s.reads)
    finally:
        s.close()


def test_uploaded_file_gets_its_table(tmp_path):
    """An upload's analysis leaves the unwind table to the index worker
    (the client waits for its answers, not for the table); the table still
    reaches the cache and a sensor that maps the file, without a read."""
    libc = open(LIBC, "rb").read()
    for d in "ab":
        (tmp_path / d).mkdir()
    sym = Symbolizer(tmp_path / "a")
    try:
        out = subprocess.run([str(SONDE), "symbolize", "--json", "--symbolizer", sym.address,
                              "--file", LIBC, "0x28000"], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        wait_for(lambda: sym.status().unwind_tables_built >= 1, 20,
                 "the uploaded file's unwind table in the cache")
        rows, reads = sensor_rows(sym, libc)
        assert reads == 0, f"libc was read from the sensor: {reads} ReadRange"
        check_rows(rows, len(libc))
    finally:
        sym.stop()
    sym = Symbolizer(tmp_path / "b")
    try:
        expect, reads = sensor_rows(sym, libc)
        assert reads, "the table was not computed from the sensor's bytes"
    finally:
        sym.stop()
    assert rows == expect


def test_unwind_error_for_a_file_without_tables(tmp_path):
    # An ELF file of another machine: analysed, but no x86-64 table.
    junk = bytearray(open("/usr/bin/true", "rb").read())
    junk[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
    path = "/opt/not-x86/true"
    sym = Symbolizer(tmp_path)
    try:
        s = TableSensor(sym.address, {path: bytes(junk)})
        s.hello()
        fid = s.ids[path]
        s.process(77, "junk", [path])
        wait_for(lambda: fid in s.table_done, 20, "an UnwindTable with error")
        chunks = s.tables[fid]
        assert len(chunks) == 1 and chunks[0].first and chunks[0].last
        assert chunks[0].error and not chunks[0].rows
        s.close()
    finally:
        sym.stop()


def test_stack_outcomes_in_status(tmp_path):
    libc = open(LIBC, "rb").read()
    sym = Symbolizer(tmp_path)
    try:
        s = TableSensor(sym.address, {LIBC: libc})
        s.hello()
        fid = s.ids[LIBC]
        s.process(555, "outcomes", [LIBC])
        now = time.time_ns()
        batch = ingest_pb2.StackBatch(
            stacks=[ingest_pb2.StackDef(id=1, user=[ingest_pb2.Frame(file_id=fid, address=0x28000)],
                                        outcome=ingest_pb2.STACK_OUTCOME_COMPLETE),
                    ingest_pb2.StackDef(id=2, user=[ingest_pb2.Frame(file_id=fid, address=0x28010)],
                                        outcome=ingest_pb2.STACK_OUTCOME_NO_TABLE),
                    ingest_pb2.StackDef(id=3, kernel=[0xffffffff81000000])],
            samples=[ingest_pb2.SampleCount(stack_id=1, pid=555, tid=555, count=7, first_unix_ns=now),
                     ingest_pb2.SampleCount(stack_id=2, pid=555, tid=555, count=2, first_unix_ns=now),
                     ingest_pb2.SampleCount(stack_id=3, pid=556, tid=556, count=1, first_unix_ns=now)])
        s.send(stacks=batch)
        wait_for(lambda: sym.status().outcomes.complete == 7, 10, "outcome counts")
        st = sym.status()
        assert st.outcomes.no_table == 2 and st.outcomes.no_user_stack == 1
        top = st.processes[0]
        assert top.pid == 555 and top.comm == "outcomes" and top.outcomes.complete == 7
        s.close()
    finally:
        sym.stop()
