"""The symbolizer's half of the Go probes (docs/go-probes.md) over the real
Ingest protocol: a sensor played by Python forwards go_http records
(bpf/probes/go_http.h, packed here with struct) as ProbeEvents; the
symbolizer decodes them into spans that `sonde spans --json` lists and
an OTLP TraceService receiver gets, with the semantic-convention
attributes, wall-clock times, parents and service names. Damaged records
are rejected and counted, never crash the service."""
import concurrent.futures
import json
import struct
import subprocess
import time

import grpc

import otlp_official
from conftest import SONDE, WORKLOAD, Symbolizer, ingest_pb2, make_tmp, wait_for
from pysensor import PySensor
from test_otlp import free_port


class TraceReceiver:
    """An OTLP TraceService receiver that decodes each request with the
    official opentelemetry-proto classes of both releases otlp_official
    holds (v1.11.0 from Debian sid, kept; v1.5.0 installed: traces are
    stable since v1.0, so a receiver on either reads them) and refuses one
    with a field either does not declare (recorded in bad, answered
    INVALID_ARGUMENT)."""

    REQUEST = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
    RESPONSE = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse"

    def __init__(self):
        self.requests = []
        self.bad = []
        self.port = free_port()
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        path = otlp_official.CURRENT.export_path(otlp_official.TRACE_SERVICE)
        assert path == otlp_official.V150.export_path(otlp_official.TRACE_SERVICE)
        service, method = path[1:].split("/")
        handler = grpc.method_handlers_generic_handler(
            service, {method: grpc.unary_unary_rpc_method_handler(
                self._export, request_deserializer=lambda b: b,
                response_serializer=lambda m: m.SerializeToString())})
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port(f"127.0.0.1:{self.port}")
        self.server.start()

    def _export(self, raw, context):
        try:
            otlp_official.V150.decode(self.REQUEST, raw)
            req = otlp_official.CURRENT.decode(self.REQUEST, raw)
        except Exception as e:  # noqa: BLE001 - any decode or check failure
            self.bad.append(repr(e))
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, repr(e)[:200])
        self.requests.append(req)
        return otlp_official.CURRENT.message_class(self.RESPONSE)()

    def spans(self):
        assert not self.bad, self.bad
        out = []
        for req in list(self.requests):
            for rs in req.resource_spans:
                res = otlp_official.attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    assert ss.scope.name == "sonde", ss.scope
                    for s in ss.spans:
                        assert len(s.trace_id) == 16 and len(s.span_id) == 8, s
                        assert len(s.parent_span_id) in (0, 8), s
                        otlp_official.attributes(s.attributes)  # keys once, known value kinds
                        out.append((res, s))
        return out


def record(kind, pid, trace, span, start, end, method, path, host=b"", scheme=b"", status=200,
           parent=b"", flags=0x2, version=1, path_len=None):
    if parent:
        flags |= 0x1
    b = struct.pack("<IIII", version, kind, pid, pid + 1)
    b += struct.pack("<QQQ", 0xc000100000 + span[0], start, end)
    b += trace + span + parent.ljust(8, b"\0")
    b += struct.pack("<Ii", flags, status)
    b += struct.pack("<IIII", len(method), len(path) if path_len is None else path_len, len(host),
                     len(scheme))
    b += method.ljust(16, b"\0") + path[:128].ljust(128, b"\0") + host.ljust(64, b"\0") + scheme.ljust(8, b"\0")
    assert len(b) == 312
    return b


def test_probe_records_become_spans():
    tmp = make_tmp()
    recv = TraceReceiver()
    sym = Symbolizer(tmp, ["--otlp-endpoint", f"127.0.0.1:{recv.port}", "--otlp-insecure",
                           "--otlp-interval", "1"])
    try:
        ps = PySensor(sym.address, {str(WORKLOAD): WORKLOAD.read_bytes()})
        ps.hello()
        ps.send(process=ingest_pb2.ProcessUpdate(
            pid=500, comm="shop", exe_path="/srv/shop-server", otel_service_name="checkout"))
        ps.send(process=ingest_pb2.ProcessUpdate(
            pid=600, comm="cli", exe_path="/usr/local/bin/loadgen"))
        mono = time.monotonic_ns()
        offset = time.time_ns() - mono
        trace = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")
        srv_span = bytes.fromhex("00f067aa0ba902b7")
        recs = [
            # A server span whose parent came from an incoming traceparent.
            record(1, 500, trace, srv_span, mono, mono + 2_500_000, b"GET", b"/cart/7",
                   host=b"shop.local:8080", status=200, parent=bytes.fromhex("1111111111111111"),
                   flags=0x2 | 0x4),
            # A client call made while serving it: parent = the server span.
            record(2, 500, trace, bytes.fromhex("2222222222222222"), mono + 100_000, mono + 900_000,
                   b"POST", b"/charge", host=b"pay:9000", scheme=b"http", status=502, parent=srv_span),
            # Another process: no OTEL_SERVICE_NAME, the executable's name; a
            # path cut by BPF's bound with invalid UTF-8 in it.
            record(1, 600, bytes.fromhex("77" * 16), bytes.fromhex("33" * 8), mono, mono + 1000,
                   b"PUT", b"/x\xff" + b"y" * 200, host=b"[::1]:80", status=404, path_len=900),
            # Damaged: version, kind, size.
            record(1, 500, trace, srv_span, mono, mono + 1, b"GET", b"/", version=9),
            record(7, 500, trace, srv_span, mono, mono + 1, b"GET", b"/"),
            record(1, 500, trace, srv_span, mono, mono + 1, b"GET", b"/")[:200],
        ]
        ps.send(probe_events=ingest_pb2.ProbeEvents(
            monotonic_to_unix_ns=offset, records=recs, records_lost=3))

        out = subprocess.run([str(SONDE), "spans", "--json", "--symbolizer", sym.address],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        spans = [json.loads(line) for line in out.splitlines()]
        assert len(spans) == 3, out
        by_id = {s["span_id"]: s for s in spans}
        srv = by_id[srv_span.hex()]
        assert srv["kind"] == "server" and srv["service"] == "checkout"
        assert srv["trace_id"] == trace.hex() and srv["parent_span_id"] == "1111111111111111"
        assert srv["remote_parent"] is True
        assert (srv["method"], srv["path"], srv["status_code"]) == ("GET", "/cart/7", 200)
        assert srv["server_address"] == "shop.local"
        assert abs(srv["start_unix_ns"] - (mono + offset)) < 1000
        assert srv["end_unix_ns"] - srv["start_unix_ns"] == 2_500_000
        cli = by_id["2222222222222222"]
        assert cli["kind"] == "client" and cli["parent_span_id"] == srv_span.hex()
        assert cli["url_full"] == "http://pay:9000/charge" and cli["server_address"] == "pay"
        other = by_id["33" * 8]
        assert other["service"] == "loadgen" and other["server_address"] == "::1"
        assert other["path"].startswith("/x?yyy") and other["path"].endswith("...")
        st = subprocess.run([str(SONDE), "spans", "--symbolizer", sym.address, "--pid", "600"],
                            capture_output=True, text=True, timeout=30, check=True)
        assert st.stdout.count("\n") == 1 and "loadgen" in st.stdout
        assert "3 received, 3 records rejected, 3 lost" in st.stderr, st.stderr

        # The same spans at the OTLP receiver.
        wait_for(lambda: len(recv.spans()) == 3 or None, 20, "3 spans at the OTLP traces receiver",
                 interval=0.5)
        got = {s.span_id.hex(): (res, s) for res, s in recv.spans()}
        res, s = got[srv_span.hex()]
        attrs = {kv.key: (kv.value.string_value or kv.value.int_value) for kv in s.attributes}
        assert res["service.name"] == "checkout" and res["process.pid"] == 500
        assert s.kind == 2 and s.parent_span_id.hex() == "1111111111111111"
        assert s.flags & 0x300 == 0x300
        assert attrs == {"http.request.method": "GET", "url.path": "/cart/7",
                         "server.address": "shop.local", "http.response.status_code": 200}
        assert s.end_time_unix_nano - s.start_time_unix_nano == 2_500_000
        res, s = got["2222222222222222"]
        attrs = {kv.key: (kv.value.string_value or kv.value.int_value) for kv in s.attributes}
        assert s.kind == 3 and s.status.code == 2  # a client's 502 is an error
        assert attrs["url.full"] == "http://pay:9000/charge"
        assert got["33" * 8][0]["service.name"] == "loadgen"
        st = sym.status()
        assert st.otlp.spans == 3 and st.otlp.dropped_spans == 0, st.otlp
        assert sym.proc.poll() is None, sym.logtext()
        ps.close()
    finally:
        recv.server.stop(0)
        sym.stop()
