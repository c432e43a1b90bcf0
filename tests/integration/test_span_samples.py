"""Samples taken while a traced request was served (Go probes,
docs/go-probes.md) keep their trace and span IDs through the symbolizer:
a sensor played by Python sends the same stack twice, once inside a span
and once outside, over the real Ingest protocol; the OTLP export links the
span's samples to a Link with those IDs and no others, and the pprof file
labels them trace_id/span_id. IDs of the wrong size end the stream."""
import gzip
import pathlib
import subprocess
import sys
import tempfile
import time

import grpc

from conftest import SONDE, SRC, WORKLOAD, Symbolizer, ingest_pb2, make_tmp, wait_for
from pysensor import PySensor
from test_otlp import Receiver, free_port, sample_total

TRACE = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")
SPAN = bytes.fromhex("00f067aa0ba902b7")


def _pprof_module():
    out = pathlib.Path(tempfile.mkdtemp(prefix="sonde-pprof-stubs."))
    subprocess.run(["protoc", f"-I{SRC / 'proto' / 'pprof'}", f"--python_out={out}", "profile.proto"],
                   check=True, cwd=SRC)
    sys.path.insert(0, str(out))
    import profile_pb2
    return profile_pb2


def _send(ps, pid, stack_id, offset, count, span):
    now = time.time_ns()
    sc = ingest_pb2.SampleCount(stack_id=stack_id, pid=pid, tid=pid, count=count, first_unix_ns=now,
                                last_unix_ns=now, comm="handler")
    if span:
        sc.trace_id, sc.span_id = TRACE, SPAN
    ps.send(stacks=ingest_pb2.StackBatch(
        stacks=[ingest_pb2.StackDef(id=stack_id, user=[ingest_pb2.Frame(file_id=ps.ids[str(WORKLOAD)],
                                                                        address=offset)])],
        samples=[sc]))


def test_span_ids_reach_otlp_and_pprof():
    tmp = make_tmp()
    recv = Receiver(free_port())
    recv.start()
    sym = Symbolizer(tmp, ["--otlp-endpoint", f"127.0.0.1:{recv.port}", "--otlp-insecure",
                           "--otlp-interval", "1"])
    try:
        ps = PySensor(sym.address, {str(WORKLOAD): WORKLOAD.read_bytes()})
        ps.hello()
        ps.process(4242, "gohttp", [str(WORKLOAD)])
        _send(ps, 4242, 1, 0x1100, 7, span=True)
        _send(ps, 4242, 2, 0x1100, 5, span=False)

        def both_received():
            return sample_total(recv.snapshot()) == 12 or None
        wait_for(both_received, 30, "12 samples at the OTLP receiver", interval=0.5)
        linked = unlinked = 0
        for req in recv.snapshot():
            links = req.dictionary.link_table
            assert len(links[0].trace_id) == 16 and not any(links[0].trace_id)
            for rp in req.resource_profiles:
                for sp in rp.scope_profiles:
                    for p in sp.profiles:
                        for s in p.samples:
                            n = sum(s.values)  # samples/count
                            if s.link_index:
                                assert links[s.link_index].trace_id == TRACE
                                assert links[s.link_index].span_id == SPAN
                                linked += n
                            else:
                                unlinked += n
        assert (linked, unlinked) == (7, 5)

        profile_pb2 = _pprof_module()
        out = pathlib.Path(tmp) / "p.pb.gz"
        subprocess.run([str(SONDE), "pprof", "--symbolizer", sym.address, "-o", str(out)], check=True,
                       capture_output=True, timeout=30)
        prof = profile_pb2.Profile.FromString(gzip.decompress(out.read_bytes()))
        st = prof.string_table
        by_trace = {}
        for s in prof.sample:
            labels = {st[lb.key]: st[lb.str] for lb in s.label if lb.str}
            key = (labels.get("trace_id"), labels.get("span_id"))
            by_trace[key] = by_trace.get(key, 0) + s.value[0]
        assert by_trace == {(TRACE.hex(), SPAN.hex()): 7, (None, None): 5}, by_trace
        ps.close()

        # A trace ID that is not 16 bytes is a protocol violation.
        bad = PySensor(sym.address, {str(WORKLOAD): WORKLOAD.read_bytes()})
        bad.hello()
        bad.send(stacks=ingest_pb2.StackBatch(
            stacks=[ingest_pb2.StackDef(id=1, kernel=[0xffffffff81000000])],
            samples=[ingest_pb2.SampleCount(stack_id=1, pid=1, tid=1, count=1, trace_id=b"short",
                                            span_id=SPAN)]))
        wait_for(lambda: bad.error is not None, 10, "the symbolizer to end the stream")
        assert bad.error.code() == grpc.StatusCode.INVALID_ARGUMENT, bad.error
        bad.abort()
        assert sym.proc.poll() is None, sym.logtext()
    finally:
        recv.stop()
        sym.stop()
