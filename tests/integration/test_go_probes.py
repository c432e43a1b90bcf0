"""Go probes (issue 7, docs/go-probes.md), the sensor's half: a real Go
net/http server and client built with Debian's Go 1.19, the real sensor
with --go-probes, and fake_symbolizer.py playing the symbolizer with a
ProbePlan this test computes itself from the binary (go_plan.py: objdump
for the entry and every RET, DWARF for the field offsets). The records
the sensor forwards are decoded with Python's struct and checked against
what the client did and measured."""
import collections
import json
import os
import pathlib
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from conftest import SENSOR, SONDE, SRC, go_env, make_tmp, wait_for
import go_plan

N = int(os.environ.get("SONDE_GO_PROBE_REQUESTS", "300"))
PATHS = ["/ok", "/created", "/missing", "/fail", "/slow", "/nested"]
FAKE = SRC / "tests" / "integration" / "fake_symbolizer.py"


def build_gohttp(prefix, *flags):
    """Builds tests/workload/gohttp into a fresh directory; yields it, then removes it."""
    tmp = make_tmp(prefix)
    env = go_env(tmp)
    out = tmp / "gohttp"
    subprocess.run([go_plan.GO, "build", *flags, "-o", str(out), "."], check=True, env=env,
                   cwd=SRC / "tests" / "workload" / "gohttp", timeout=300)
    yield out
    subprocess.run(["rm", "-rf", str(tmp)])


@pytest.fixture(scope="module")
def gohttp():
    yield from build_gohttp("sonde-gohttp.")


@pytest.fixture(scope="module")
def gohttp_pie():
    """The same program as a position-independent executable (Go's
    -buildmode=pie: its table in .data.rel.ro.gopclntab, and loaded at a
    random base, so every uprobe is placed by file offset)."""
    yield from build_gohttp("sonde-gohttp-pie.", "-buildmode=pie")


def span_samples(path):
    """[(pid, trace_id, span_id, count)] of the sample counts tagged with a span."""
    out = []
    for line in path.read_text().splitlines():
        o = json.loads(line)
        if o["kind"] == "span_samples":
            out += [(s["pid"], s["trace_id"], s["span_id"], s["count"]) for s in o["samples"]]
    return out


def read_records(path):
    procs, events, lost = {}, [], 0
    if not path.exists():
        return procs, events, lost
    for line in path.read_text().splitlines():
        o = json.loads(line)
        if o["kind"] == "process":
            procs[o["pid"]] = o
        elif o["kind"] == "probe_events":
            lost += o["records_lost"]
            events += [go_plan.decode(bytes.fromhex(r)) for r in o["records"]]
    return procs, events, lost


class Rig:
    """fake symbolizer + sensor, and the processes the test starts (stopped
    by their own PIDs at the end)."""

    def __init__(self, tmp, binary, frequency=19):
        self.tmp = tmp
        self.rec = tmp / "records.jsonl"
        plan = tmp / "plan.json"
        plan.write_text(json.dumps(go_plan.plan_for(str(binary), str(binary))))
        sock = tmp / "fake.sock"
        self.fake_log = open(tmp / "fake.log", "w")
        self.fake = subprocess.Popen([sys.executable, str(FAKE), "--listen", f"unix:{sock}", "--quiet",
                                      "--reads", "0", "--probe-plan", str(plan), "--record",
                                      str(self.rec)], stdout=self.fake_log, stderr=subprocess.STDOUT)
        wait_for(sock.exists, 30, "the fake symbolizer to listen")
        self.sensor_log = tmp / "sensor.log"
        self.sensor = subprocess.Popen([str(SENSOR), "--symbolizer", f"unix:{sock}", "--go-probes",
                                        "--unwind-rows", "0", "--flush-ms", "200",
                                        "--frequency", str(frequency)],
                                       stdout=open(self.sensor_log, "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: "sampling" in self.log(), 30, "the sensor to start")
        self.procs = []

    def log(self):
        if self.sensor.poll() is not None:
            raise AssertionError(f"sensor exited {self.sensor.returncode}: {self.sensor_log.read_text()[-3000:]}")
        return self.sensor_log.read_text()

    def attached(self, pid, probe):
        return wait_for(lambda: f"pid {pid}: {probe} attached" in self.log(), 30,
                        f"{probe} on pid {pid}")

    def start(self, args, **kw):
        p = subprocess.Popen(args, **kw)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.sensor.poll() is None:
            self.sensor.terminate()
            self.sensor.wait(30)
        self.fake.terminate()
        self.fake.wait(15)
        self.fake_log.close()


def run_client(rig, binary, port, n):
    """Runs the client for n requests once its probes are attached;
    returns it (ended) and its results, one per request."""
    client = rig.start([str(binary), "client", f"http://127.0.0.1:{port}", str(n)],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rig.attached(client.pid, "go_http_client")
    out, _ = client.communicate("go\n", timeout=300)
    assert client.returncode == 0
    return client, [json.loads(line) for line in out.splitlines()]


@pytest.fixture
def rig(gohttp, request):
    tmp = make_tmp("sonde-goprobes.")
    r = Rig(tmp, gohttp, getattr(request, "param", 19))
    yield r
    r.stop()
    if r.sensor.returncode not in (0, None):
        print(r.sensor_log.read_text()[-3000:])
    subprocess.run(["rm", "-rf", str(tmp)])


def test_http_server_and_client_spans(rig, gohttp):
    server = rig.start([str(gohttp), "server"], stdout=subprocess.PIPE, text=True,
                       env=dict(os.environ, OTEL_SERVICE_NAME="go-probe-test"))
    port = int(server.stdout.readline())
    rig.attached(server.pid, "go_http_server")
    rig.attached(server.pid, "go_http_client")
    client, results = run_client(rig, gohttp, port, N)
    assert len(results) == N
    n_nested = sum(r["path"] == "/nested" for r in results)

    def complete():
        _, ev, _ = read_records(rig.rec)
        return len(ev) >= 2 * (N + n_nested)
    wait_for(complete, 30, f"{2 * (N + n_nested)} records")
    time.sleep(1)  # nothing more may come: exactly N, not at least N
    procs, events, lost = read_records(rig.rec)
    assert lost == 0

    srv = sorted((e for e in events if e["kind"] == go_plan.SERVER), key=lambda e: e["start"])
    cli = sorted((e for e in events if e["kind"] == go_plan.CLIENT and e["pid"] == client.pid),
                 key=lambda e: e["start"])
    inner = [e for e in events if e["kind"] == go_plan.CLIENT and e["pid"] == server.pid]
    assert all(e["pid"] == server.pid for e in srv)
    assert len(cli) == N and len(inner) == n_nested and len(srv) == N + n_nested
    assert len(events) == 2 * (N + n_nested)

    # Client spans, in order: what the client asked and got, and its
    # duration within 1 ms of what the client measured around Do().
    diffs = []
    for e, r in zip(cli, results):
        assert (e["method"], e["path"], e["status"]) == (r["method"], r["path"], r["status"])
        assert e["host"] == f"127.0.0.1:{port}" and e["scheme"] == "http"
        diffs.append(abs((e["end"] - e["start"]) - r["dur_ns"]))
    # roundTrip is all of Do() but the redirect check and the return; a
    # loaded machine (load average 6 on 2 CPUs) now and then deschedules
    # the client between the two: all within 1 ms but for one in a hundred.
    late = sum(d >= 1_000_000 for d in diffs)
    assert late <= len(diffs) // 100, f"client span vs measured: {late} over 1 ms, max {max(diffs)} ns"

    # Server spans: the inner /ok calls of /nested lie inside their
    # /nested span; the others pair with the client's requests in order.
    nested = [e for e in srv if e["path"] == "/nested"]
    outer = [e for e in srv if not any(n["start"] < e["start"] and e["end"] < n["end"] for n in nested)]
    assert len(outer) == N
    sdiffs = []
    n_remote = 0
    for i, (e, r) in enumerate(zip(outer, results)):
        assert (e["method"], e["path"], e["status"]) == (r["method"], r["path"], r["status"])
        assert e["host"] == f"127.0.0.1:{port}"
        if r["traceparent"]:
            # The incoming traceparent: its trace, its span as parent.
            _, trace_id, parent, fl = r["traceparent"].split("-")
            assert (e["trace_id"], e["parent"]) == (trace_id, parent)
            assert e["flags"] & (go_plan.HAS_PARENT | go_plan.REMOTE_PARENT) == \
                go_plan.HAS_PARENT | go_plan.REMOTE_PARENT
            assert bool(e["flags"] & go_plan.SAMPLED) == bool(int(fl, 16) & 1)
            n_remote += 1
        else:
            assert not e["flags"] & go_plan.HAS_PARENT
        d = e["end"] - e["start"]
        assert d <= r["dur_ns"], "a server span longer than the client's call"
        if i > 0:  # the first request also connects
            sdiffs.append(r["dur_ns"] - d)
    # The client measures the server's span plus the loopback round trip
    # and two goroutine wake-ups, which a loaded 2-CPU machine delays now
    # and then (beside other builds its p90 reaches about 1 ms): the
    # median is within 1 ms, nine in ten within 2 ms.
    sdiffs.sort()
    med, p90 = sdiffs[len(sdiffs) // 2], sdiffs[len(sdiffs) * 9 // 10]
    print(f"measured - server span: median {med / 1e3:.0f} us, "
          f"p90 {p90 / 1e3:.0f} us, max {sdiffs[-1] / 1e3:.0f} us")
    assert med < 1_000_000 and p90 < 2_000_000, f"server span vs measured: median {med}, p90 {p90} ns"
    assert collections.Counter((e["method"], e["path"], e["status"]) for e in srv) == \
        collections.Counter((r["method"], r["path"], r["status"]) for r in results) + \
        collections.Counter({("GET", "/ok", 200): n_nested})

    # A client call made inside a handler has that handler's span as parent.
    by_span = {e["span_id"]: e for e in srv}
    for e in inner:
        assert e["flags"] & go_plan.HAS_PARENT
        parent = by_span[e["parent"]]
        assert parent["path"] == "/nested" and parent["trace_id"] == e["trace_id"]
        assert parent["g"] == e["g"] and parent["start"] < e["start"] and e["end"] < parent["end"]
        assert (e["method"], e["path"], e["status"]) == ("GET", "/ok", 200)
    assert n_remote == sum(bool(r["traceparent"]) for r in results) > 0
    assert not any(e["flags"] & go_plan.HAS_PARENT for e in cli)
    # The inner /ok server spans had no traceparent: new traces.
    assert not any(e["flags"] & go_plan.HAS_PARENT for e in srv if e not in outer)
    assert len({e["span_id"] for e in events}) == len(events)

    # The sensor's own counters agree (SensorStats, sent at each flush).
    def stats():
        st = [json.loads(line) for line in rig.rec.read_text().splitlines()]
        st = [o for o in st if o["kind"] == "stats"]
        return st[-1] if st and st[-1]["go_probe_records"] >= len(events) else None
    st = wait_for(stats, 10, "SensorStats with the probe records")
    assert st["go_probe_records"] == len(events) and st["go_probe_records_lost"] == 0
    assert st["go_probe_files"] == 1 and st["go_probe_attach_failures"] == 0
    assert st["go_probe_links"] > 0

    assert procs[server.pid]["otel_service_name"] == "go-probe-test"
    assert procs[client.pid]["otel_service_name"] == ""
    print(f"{N} requests ({n_nested} nested): |client span - measured| max {max(diffs) / 1e3:.0f} us "
          f"({late} over 1 ms), "
          f"measured - server span max {max(sdiffs) / 1e3:.0f} us")


def test_pie_server_and_client_spans(gohttp_pie):
    """A PIE build: the plan's offsets hold at its random load address, and
    the spans are those the client made."""
    tmp = make_tmp("sonde-goprobes-pie.")
    rig = Rig(tmp, gohttp_pie)
    try:
        server = rig.start([str(gohttp_pie), "server"], stdout=subprocess.PIPE, text=True)
        port = int(server.stdout.readline())
        rig.attached(server.pid, "go_http_server")
        base = next(int(line.split("-")[0], 16) for line in open(f"/proc/{server.pid}/maps")
                    if line.split()[-1] == str(gohttp_pie) and line.split()[2] == "00000000")
        assert base >= 0x10000000000, f"not loaded at a PIE base: {base:#x}"
        n = 40
        client, results = run_client(rig, gohttp_pie, port, n)
        n_nested = sum(r["path"] == "/nested" for r in results)
        wait_for(lambda: len(read_records(rig.rec)[1]) >= 2 * (n + n_nested), 30, "the records")
        time.sleep(1)
        _, events, lost = read_records(rig.rec)
        assert lost == 0 and len(events) == 2 * (n + n_nested)
        cli = sorted((e for e in events if e["kind"] == go_plan.CLIENT and e["pid"] == client.pid),
                     key=lambda e: e["start"])
        assert [(e["method"], e["path"], e["status"]) for e in cli] == \
            [(r["method"], r["path"], r["status"]) for r in results]
        srv = [e for e in events if e["kind"] == go_plan.SERVER]
        assert all(e["pid"] == server.pid for e in srv) and len(srv) == n + n_nested
        assert collections.Counter((e["method"], e["path"], e["status"]) for e in srv) == \
            collections.Counter((r["method"], r["path"], r["status"]) for r in results) + \
            collections.Counter({("GET", "/ok", 200): n_nested})
        print(f"PIE at {base:#x}: {len(cli)} client spans, {len(srv)} server spans")
    finally:
        rig.stop()
        subprocess.run(["rm", "-rf", str(tmp)])


def bpf_links(pid):
    """BPF links the process holds (fdinfo shows link_type)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if "link_type:" in pathlib.Path(f"/proc/{pid}/fdinfo/{fd}").read_text():
                n += 1
        except OSError:
            pass
    return n


def go_spans_pids():
    """The pids in the go_spans maps (bpftool; key: u32 pid, u32 pad, u64 g)."""
    out = subprocess.run(["bpftool", "-j", "map", "dump", "name", "go_spans"], capture_output=True,
                         text=True).stdout
    pids = set()
    try:
        dumps = json.loads(out) if out.strip() else []
    except json.JSONDecodeError:
        return pids
    for e in dumps:
        for el in (e.get("elements", [e]) if isinstance(e, dict) else []):
            key = el.get("key")
            if isinstance(key, list) and len(key) >= 4:
                pids.add(int.from_bytes(bytes(int(b, 16) for b in key[:4]), "little"))
    return pids


def test_detached_on_exit(rig, gohttp):
    base = bpf_links(rig.sensor.pid)
    server = rig.start([str(gohttp), "server"], stdout=subprocess.PIPE, text=True)
    server_port = int(server.stdout.readline())
    rig.attached(server.pid, "go_http_server")
    rig.attached(server.pid, "go_http_client")
    plan = json.loads((rig.tmp / "plan.json").read_text())
    n_uprobes = sum(len(ps["attaches"]) for ps in plan["probes"])
    assert bpf_links(rig.sensor.pid) == base + n_uprobes
    # Killed mid-request: its span and per-call state must not outlive it
    # (a later process with its pid and goroutine address would inherit
    # them as a parent).
    def slow_request():
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{server_port}/burn?ms=5000", timeout=10).read()
        except OSError:
            pass  # the server is killed under it
    threading.Thread(target=slow_request, daemon=True).start()
    wait_for(lambda: server.pid in go_spans_pids() or None, 10, "the request's span in go_spans")
    server.kill()
    server.wait()
    wait_for(lambda: bpf_links(rig.sensor.pid) == base, 10, "the uprobes to be detached")
    wait_for(lambda: server.pid not in go_spans_pids() or None, 10, "its go_spans entry removed")
    rig.log()  # still running


BURN_MS, BURNS, HZ = 300, 4, 199


@pytest.mark.parametrize("rig", [HZ], indirect=True)
def test_cpu_samples_carry_the_span(rig, gohttp):
    """A handler that burns CPU: the samples taken while it runs carry its
    span's trace and span IDs (SampleCount.trace_id/span_id), and no
    sample carries a span it was not taken in."""
    server = rig.start([str(gohttp), "server"], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    rig.attached(server.pid, "go_http_server")
    for _ in range(BURNS):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/burn?ms={BURN_MS}", timeout=30) as r:
            assert r.status == 200
    wait_for(lambda: len([e for e in read_records(rig.rec)[1] if e["path"] == "/burn"]) == BURNS,
             30, "the /burn spans")
    time.sleep(1)  # the last samples' flush
    spans = {(e["trace_id"], e["span_id"]): e for e in read_records(rig.rec)[1]}
    tagged = span_samples(rig.rec)
    per_span = collections.Counter()
    for pid, trace_id, span_id, count in tagged:
        assert pid == server.pid
        e = spans.get((trace_id, span_id))
        assert e is not None, "a sample tagged with a span that never was"
        assert e["kind"] == go_plan.SERVER and e["path"] == "/burn"
        per_span[span_id] += count
    # Each burn runs BURN_MS of wall time, ~60 samples at HZ on an idle
    # machine; a loaded one gives the handler a share of a CPU only (load
    # average 6 on 2 CPUs: a third). Every span must get some.
    want = BURN_MS / 1000 * HZ
    print(f"samples per /burn span: {sorted(per_span.values())} (about {want:.0f} when idle)")
    assert len(per_span) == BURNS
    assert all(n >= want / 6 for n in per_span.values())


def test_real_symbolizer_end_to_end(gohttp, start_sensor, symbolizer):
    """The whole chain with the real symbolizer: it analyses the Go binary
    and sends the plan, the sensor loads and attaches it, the records come
    back as spans (`sonde spans`)."""
    n = 60
    sensor = start_sensor(symbolizer.address, "--go-probes", "--unwind-rows", "0", "--flush-ms", "200")
    procs = []
    try:
        server = subprocess.Popen([str(gohttp), "server"], stdout=subprocess.PIPE, text=True,
                                  env=dict(os.environ, OTEL_SERVICE_NAME="e2e-server"))
        procs.append(server)
        port = int(server.stdout.readline())

        def attached(pid, probe):
            if sensor.proc.poll() is not None:
                raise AssertionError(f"sensor exited: {sensor.logtext()}")
            return f"pid {pid}: {probe} attached" in sensor.log_path.read_text()
        wait_for(lambda: attached(server.pid, "go_http_server"), 60, "the plan and the attach")
        client = subprocess.Popen([str(gohttp), "client", f"http://127.0.0.1:{port}", str(n)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(client)
        wait_for(lambda: attached(client.pid, "go_http_client"), 30, "the client's attach")
        out, _ = client.communicate("go\n", timeout=120)
        results = [json.loads(line) for line in out.splitlines()]
        n_nested = sum(r["path"] == "/nested" for r in results)

        def spans():
            out = subprocess.run([str(SONDE), "spans", "--json", "--limit", "10000",
                                  "--symbolizer", symbolizer.address],
                                 capture_output=True, text=True, timeout=30, check=True).stdout
            got = [json.loads(line) for line in out.splitlines()]
            return got if len(got) >= 2 * (n + n_nested) else None
        got = wait_for(spans, 30, f"{2 * (n + n_nested)} spans from the symbolizer", interval=0.5)
        assert len(got) == 2 * (n + n_nested)
        srv = [s for s in got if s["kind"] == "server"]
        cli = [s for s in got if s["kind"] == "client" and s["service"] != "e2e-server"]
        assert len(srv) == n + n_nested and len(cli) == n
        assert {s["service"] for s in srv} == {"e2e-server"}
        assert collections.Counter((s["method"], s["path"], s["status_code"]) for s in cli) == \
            collections.Counter((r["method"], r["path"], r["status"]) for r in results)
        remote = [s for s in srv if s.get("remote_parent")]
        assert len(remote) == sum(bool(r["traceparent"]) for r in results)

        # The sensor's probe counters reach `sonde status` (SensorStats).
        def status():
            st = json.loads(subprocess.run([str(SONDE), "status", "--json", "--symbolizer",
                                            symbolizer.address], capture_output=True, text=True,
                                           timeout=30, check=True).stdout)
            return st if st["go_probe_records"] >= 2 * (n + n_nested) else None
        st = wait_for(status, 30, "the probe counters in sonde status", interval=0.5)
        assert st["go_probe_files"] == 1 and st["go_probe_attach_failures"] == 0
        assert st["go_probe_records"] == 2 * (n + n_nested) and st["go_probe_records_lost"] == 0
        # The server still runs with both probes (one link per uprobe of
        # the plan, computed here independently); the client exited.
        plan = go_plan.plan_for(str(gohttp), str(gohttp))
        assert st["go_probe_links"] == sum(len(ps["attaches"]) for ps in plan["probes"])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
