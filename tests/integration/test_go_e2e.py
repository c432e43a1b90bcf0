"""Go auto-instrumentation end to end (issue 7, docs/go-probes.md), with
nothing played: the real sensor (--go-probes) following a Go net/http
server and client (tests/workload/gohttp, Debian's Go 1.19), the real
symbolizer planning the probes from the executable it reads through the
sensor, and an OTLP receiver getting TraceService/Export. N requests give
exactly N client spans and N server spans (plus one of each per /nested
call) at the receiver, with the semantic-convention attributes and the
client's durations within 1 ms of what it measured; `sonde spans` lists
them; the CPU samples of a /burn handler carry its trace ID in the pprof
export."""
import collections
import gzip
import json
import os
import subprocess
import time
import urllib.request

import pytest

from conftest import SONDE, SRC, Sensor, Symbolizer, go_env, make_tmp, wait_for
from test_probe_events import TraceReceiver
from test_span_samples import _pprof_module
import go_plan

N = int(os.environ.get("SONDE_GO_E2E_REQUESTS", "1000"))


# (toolchain, linker flags): Debian 12's Go 1.19 and the newest Go in
# bookworm-backports (1.23), each with DWARF (struct offsets from it) and
# stripped (-s -w: functions from .gopclntab, offsets from the table).
BUILDS = [(go_plan.GO, ""), (go_plan.GO, "-s -w"), (go_plan.GO_NEW, ""), (go_plan.GO_NEW, "-s -w")]


@pytest.fixture(scope="module", params=BUILDS,
                ids=lambda b: b[0].split("/")[-3] + ("-stripped" if b[1] else ""))
def gohttp(request):
    go, ldflags = request.param
    tmp = make_tmp("sonde-gohttp.")
    env = go_env(tmp)
    out = tmp / "gohttp"
    subprocess.run([go, "build", "-ldflags=" + ldflags, "-o", str(out), "."], check=True, env=env,
                   cwd=SRC / "tests" / "workload" / "gohttp", timeout=300)
    yield out, "table" if ldflags else "dwarf"
    subprocess.run(["rm", "-rf", str(tmp)])


def attrs(span):
    return {kv.key: (kv.value.string_value or kv.value.int_value) for kv in span.attributes}


def test_go_spans_end_to_end(gohttp):
    gohttp, offsets_from = gohttp
    tmp = make_tmp()
    recv = TraceReceiver()
    sym = Symbolizer(tmp, ["--otlp-endpoint", f"127.0.0.1:{recv.port}", "--otlp-insecure",
                           "--otlp-interval", "1"])
    procs = []
    sensor = None
    try:
        server = subprocess.Popen([str(gohttp), "server"], stdout=subprocess.PIPE, text=True,
                                  env=dict(os.environ, OTEL_SERVICE_NAME="shop"))
        procs.append(server)
        port = int(server.stdout.readline())
        client = subprocess.Popen([str(gohttp), "client", f"http://127.0.0.1:{port}", str(N)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(client)
        sensor = Sensor(tmp, sym.address, ["--go-probes", "--frequency", "199", "--flush-ms", "250",
                                           "--pid", str(server.pid), "--pid", str(client.pid)])
        for pid, probe in ((server.pid, "go_http_server"), (server.pid, "go_http_client"),
                           (client.pid, "go_http_client")):
            wait_for(lambda: f"pid {pid}: {probe} attached" in sensor.logtext() or None, 90,
                     f"{probe} on pid {pid} (plan from the symbolizer)", interval=0.5)

        assert f"probe plan made (offsets from {offsets_from})" in sym.logtext(), sym.logtext()[-1500:]

        out, _ = client.communicate("go\n", timeout=600)
        assert client.returncode == 0
        results = [json.loads(line) for line in out.splitlines()]
        assert len(results) == N
        n_nested = sum(r["path"] == "/nested" for r in results)
        want = 2 * (N + n_nested)
        try:
            wait_for(lambda: len(recv.spans()) >= want or None, 60, f"{want} spans at the receiver",
                     interval=0.5)
        except AssertionError:
            raise AssertionError(f"{len(recv.spans())} of {want} spans at the receiver; sensor: "
                                 f"{sensor.logtext()[-1500:]}; symbolizer: {sym.logtext()[-1500:]}")
        time.sleep(3)  # exactly, not at least
        spans = recv.spans()
        assert len(spans) == want, (len(spans), want)
        cli = sorted((s for res, s in spans if res["process.pid"] == client.pid),
                     key=lambda s: s.start_time_unix_nano)
        srv = [(res, s) for res, s in spans if res["process.pid"] == server.pid]
        assert len(cli) == N and all(s.kind == 3 for s in cli)
        assert sum(s.kind == 2 for _, s in srv) == N + n_nested
        assert sum(s.kind == 3 for _, s in srv) == n_nested
        assert all(res["service.name"] == "shop" for res, _ in srv)
        names = collections.Counter(res["service.name"] for res, s in spans if res["process.pid"] == client.pid)
        assert set(names) == {"gohttp"}, names

        diffs = []
        for s, r in zip(cli, results):
            a = attrs(s)
            assert (a["http.request.method"], a["url.path"]) == (r["method"], r["path"])
            assert a["http.response.status_code"] == r["status"]
            assert a["url.full"] == f"http://127.0.0.1:{port}{r['path']}"
            assert a["server.address"] == "127.0.0.1"
            assert (s.status.code == 2) == (r["status"] >= 400)
            diffs.append(r["dur_ns"] - (s.end_time_unix_nano - s.start_time_unix_nano))
        # The probes run inside the client's own measurement around Do():
        # no span is longer than it (50 us for the two clocks' reads).
        # What the client's side adds is its own scheduling: on this
        # shared 2-CPU machine a preempted client goroutine now and then
        # adds milliseconds (seen: 1.5 ms once in 1,000, more under a
        # heavier load), so the bound is on most of them, and the median.
        within = sum(0 <= d < 1_000_000 for d in diffs)
        median = sorted(diffs)[len(diffs) // 2]
        assert min(diffs) > -50_000 and within >= len(diffs) * 0.98 and median < 500_000, \
            f"measured - client span: {within}/{len(diffs)} within [0, 1 ms), median {median} ns, " \
            f"min {min(diffs)} ns, max {max(diffs)} ns"
        got = collections.Counter((attrs(s)["http.request.method"], attrs(s)["url.path"],
                                   attrs(s)["http.response.status_code"]) for _, s in srv if s.kind == 2)
        assert got == collections.Counter((r["method"], r["path"], r["status"]) for r in results) + \
            collections.Counter({("GET", "/ok", 200): n_nested})
        # An incoming traceparent: the server span joins that trace.
        by_trace = {s.trace_id.hex(): s for _, s in srv if s.kind == 2}
        n_remote = 0
        for r in results:
            if r["traceparent"]:
                _, trace_id, parent, _ = r["traceparent"].split("-")
                s = by_trace[trace_id]
                assert s.parent_span_id.hex() == parent and s.flags & 0x300 == 0x300
                n_remote += 1
        assert n_remote > 0
        # A client call inside a handler: its parent is the handler's span.
        server_spans = {s.span_id: s for _, s in srv if s.kind == 2}
        for _, s in srv:
            if s.kind == 3:
                parent = server_spans[s.parent_span_id]
                assert attrs(parent)["url.path"] == "/nested" and parent.trace_id == s.trace_id

        listed = subprocess.run([str(SONDE), "spans", "--json", "--limit", "10000", "--symbolizer",
                                 sym.address], capture_output=True, text=True, timeout=30, check=True)
        assert len(listed.stdout.splitlines()) == want

        # CPU samples of a handler that burns CPU carry its trace ID.
        for _ in range(3):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/burn?ms=300", timeout=30) as resp:
                assert resp.status == 200
        wait_for(lambda: sum(attrs(s).get("url.path") == "/burn" for _, s in recv.spans()) == 3 or None,
                 30, "the 3 /burn spans", interval=0.5)
        burn_traces = {s.trace_id.hex() for _, s in recv.spans() if attrs(s).get("url.path") == "/burn"}
        profile_pb2 = _pprof_module()
        pb = tmp / "p.pb.gz"
        per_trace = collections.Counter()

        def burn_samples():
            """Samples per trace ID in the server's pprof profile; true
            once every /burn trace has its share (each burns 300 ms of
            its thread's CPU time: 60 samples at 199 Hz, a third of them
            asked for)."""
            subprocess.run([str(SONDE), "pprof", "--symbolizer", sym.address, "--pid", str(server.pid),
                            "-o", str(pb)], check=True, capture_output=True, timeout=60)
            prof = profile_pb2.Profile.FromString(gzip.decompress(pb.read_bytes()))
            st = prof.string_table
            per_trace.clear()
            for smp in prof.sample:
                labels = {st[lb.key]: st[lb.str] for lb in smp.label if lb.str}
                if "trace_id" in labels:
                    per_trace[labels["trace_id"]] += smp.value[0]
            return all(per_trace[t] >= 300 / 1000 * 199 / 3 for t in burn_traces)
        try:
            wait_for(burn_samples, 20, "the /burn samples in the store", interval=1.0)
        except AssertionError:
            pass  # the assertions below say what is missing
        print(f"{N} requests, {n_nested} nested: measured - client span: {within}/{N} within 1 ms, "
              f"median {median / 1e3:.0f} us, max {max(diffs) / 1e3:.0f} us; "
              f"samples per /burn trace {dict(per_trace)}")
        assert set(per_trace) >= burn_traces, (per_trace, burn_traces)
        assert all(per_trace[t] >= 300 / 1000 * 199 / 3 for t in burn_traces)
        assert sensor.proc.poll() is None, sensor.logtext()
        assert sym.proc.poll() is None, sym.logtext()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if sensor:
            sensor.stop()
        recv.server.stop(0)
        sym.stop()
