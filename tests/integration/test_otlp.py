"""OTLP profiles export: a real OTLP gRPC receiver (Debian's python3-grpcio)
next to a symbolizer exporting every 2 s and a sensor profiling the test
workload and a kernel-heavy dd. Every request must decode and carry the
expected attributes; the receiver goes away for 20 s and comes back; after
the sensor stops, the samples received equal the samples the symbolizer
stored (its Top RPC over everything stored).

The receiver is built from the official opentelemetry-proto files alone
(otlp_official): it serves the Export method those files declare and
decodes each request of the default layout whole (dictionary, resources,
scopes, profiles, samples, stacks, locations, lines, functions, mappings,
attributes, links) with the classes of the release that layout follows
(v1.11.0, Debian sid's package), refusing any field they do not declare;
requests of `--otlp-profiles-layout 1.5.0` are decoded with v1.5.0's."""
import concurrent.futures
import json
import shutil
import socket
import subprocess
import threading
import time

import grpc

import otlp_official
from conftest import SONDE, SYMBOLIZER, WORKLOAD, Sensor, Symbolizer, make_tmp, symbols_pb2, wait_for

CURRENT = otlp_official.CURRENT
REQUEST = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest"
RESPONSE = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceResponse"
HZ = 99
# The messages of the default layout that every run of the workload sends
# (all but common.v1's ArrayValue and KeyValueList, which sonde never sends).
MESSAGES = {"opentelemetry.proto." + m for m in (
    "collector.profiles.v1development.ExportProfilesServiceRequest",
    "profiles.v1development.ProfilesDictionary", "profiles.v1development.ResourceProfiles",
    "profiles.v1development.ScopeProfiles", "profiles.v1development.Profile",
    "profiles.v1development.ValueType", "profiles.v1development.Sample",
    "profiles.v1development.Stack", "profiles.v1development.Location",
    "profiles.v1development.Line", "profiles.v1development.Function",
    "profiles.v1development.Mapping", "profiles.v1development.KeyValueAndUnit",
    "profiles.v1development.Link", "resource.v1.Resource", "common.v1.KeyValue",
    "common.v1.AnyValue", "common.v1.InstrumentationScope")}
# The attribute keys sonde may send, all of the OpenTelemetry semantic
# conventions (docs/exports.md, "What is sent"): resource attributes, and
# those of the dictionary's attribute table (mappings, locations, samples).
RESOURCE_KEYS = {"host.name", "host.id", "process.pid", "process.executable.name",
                 "process.executable.path", "process.command_line", "container.id", "k8s.pod.uid"}
DICTIONARY_KEYS = {"process.executable.build_id.gnu", "process.executable.build_id.htlhash",
                   "profile.frame.type", "thread.id", "thread.name"}


class Receiver:
    """An OTLP profiles receiver built from an official release's files
    (release, default otlp_official.CURRENT): serves the Export method they
    declare and decodes each request whole with their classes; one that
    does not decode or has a field they do not declare is recorded and
    answered INVALID_ARGUMENT."""

    release = CURRENT

    def __init__(self, port=0):
        self.lock = threading.Lock()
        self.requests = []
        self.bad = []
        self.metadata = []
        self.port = port
        self.server = None

    @classmethod
    def decode(cls, raw):
        return cls.release.decode(REQUEST, raw, "request")

    def _handler(self):
        service, method = self.release.export_path(otlp_official.PROFILES_SERVICE)[1:].split("/")
        return grpc.method_handlers_generic_handler(service, {
            method: grpc.unary_unary_rpc_method_handler(
                self._export, request_deserializer=lambda b: b,
                response_serializer=lambda m: m.SerializeToString())})

    def _export(self, raw, context):
        try:
            req = self.decode(raw)
        except Exception as e:  # noqa: BLE001 - any decode error is a failure
            with self.lock:
                self.bad.append(repr(e))
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "does not decode")
        with self.lock:
            self.requests.append(req)
            self.metadata.append(dict(context.invocation_metadata()))
        return self.release.message_class(RESPONSE)()

    def start(self):
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(4),
                                  options=[("grpc.max_receive_message_length", 64 << 20)])
        self.server.add_generic_rpc_handlers((self._handler(),))
        self.port = self.server.add_insecure_port(f"127.0.0.1:{self.port}")
        assert self.port
        self.server.start()

    def stop(self):
        self.server.stop(0).wait()

    def snapshot(self):
        with self.lock:
            return list(self.requests)


class CountingProxy:
    """Forwards TCP connections to the receiver and counts the bytes the
    symbolizer sends: with gzip they are far fewer than the protobuf bytes
    the receiver decodes. A receiver that is down makes it close the
    connection, as the receiver itself would."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.sent = 0
        self.lock = threading.Lock()
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            u = socket.create_connection(("127.0.0.1", self.upstream), timeout=2)
        except OSError:
            c.close()
            return
        u.settimeout(None)
        threading.Thread(target=self._pump, args=(u, c, False), daemon=True).start()
        self._pump(c, u, True)

    def _pump(self, src, dst, count):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if count:
                    with self.lock:
                        self.sent += len(b)
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.lsock.close()


def stop_all(sensor, procs, sym, recv):
    """A test's sensor, workloads, symbolizer and receiver, stopped."""
    sensor.stop()
    for p in procs:
        p.kill()
        p.wait()
    sym.stop()
    recv.stop()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def strings(req):
    return req.dictionary.string_table


def attr_map(req, indices):
    d = req.dictionary
    out = {}
    for i in indices:
        kv = d.attribute_table[i]
        v = kv.value
        out[strings(req)[kv.key_strindex]] = v.string_value if v.HasField("string_value") else v.int_value
    return out


def sample_total(reqs):
    """Samples in the requests: values are counts (samples/count)."""
    total = 0
    for req in reqs:
        for rp in req.resource_profiles:
            for sp in rp.scope_profiles:
                for p in sp.profiles:
                    assert p.period > 0
                    for s in p.samples:
                        total += sum(s.values)
    return total


def sample_shape(s):
    """A sample's shape (opentelemetry-proto's Sample comment): values
    with a timestamp each, or one aggregated value without."""
    if s.timestamps_unix_nano:
        assert len(s.values) == len(s.timestamps_unix_nano), s
        return "timed"
    assert len(s.values) == 1, s
    return "aggregated"


def official_parts(req):
    """[(resource attributes, scope)] per ResourceProfiles of a request the
    official classes decoded; every attribute key is one of the semantic
    conventions' names sonde sends, every value a kind it sends."""
    out = []
    for rp in req.resource_profiles:
        assert len(rp.scope_profiles) == 1, rp
        res = otlp_official.attributes(rp.resource.attributes)
        assert res.keys() <= RESOURCE_KEYS, res.keys() - RESOURCE_KEYS
        out.append((res, rp.scope_profiles[0].scope))
    keys = set()
    for kv in req.dictionary.attribute_table[1:]:
        otlp_official.any_value(kv.value)
        keys.add(strings(req)[kv.key_strindex])
    assert keys <= DICTIONARY_KEYS, keys - DICTIONARY_KEYS
    return out


def check_indices(req):
    """Every index into the dictionary is in its table."""
    d = req.dictionary
    n_str, n_attr = len(d.string_table), len(d.attribute_table)

    def strs(*ix):
        assert all(0 <= i < n_str for i in ix), (ix, n_str)

    def attrs(ix):
        assert all(0 < i < n_attr for i in ix), (list(ix), n_attr)
    for kv in d.attribute_table[1:]:
        strs(kv.key_strindex, kv.unit_strindex)
        assert kv.key_strindex > 0, kv
    for m in d.mapping_table:
        strs(m.filename_strindex)
        attrs(m.attribute_indices)
    for f in d.function_table:
        strs(f.name_strindex, f.system_name_strindex, f.filename_strindex)
    for loc in d.location_table:
        attrs(loc.attribute_indices)
    for ln in d.link_table[1:]:
        assert len(ln.trace_id) == 16 and len(ln.span_id) == 8, ln
    for rp in req.resource_profiles:
        for p in rp.scope_profiles[0].profiles:
            strs(p.sample_type.type_strindex, p.sample_type.unit_strindex,
                 p.period_type.type_strindex, p.period_type.unit_strindex)
            attrs(p.attribute_indices)
            for s in p.samples:
                attrs(s.attribute_indices)
                assert 0 <= s.link_index < len(d.link_table), s


def functions_with_lines(req):
    """{function name: set of (file, line)} over every location's lines."""
    d = req.dictionary
    out = {}
    for loc in d.location_table[1:]:
        for ln in loc.lines:
            f = d.function_table[ln.function_index]
            out.setdefault(strings(req)[f.name_strindex], set()).add(
                (strings(req)[f.filename_strindex], ln.line))
    return out


def frame_types(req):
    return {attr_map(req, loc.attribute_indices).get("profile.frame.type")
            for loc in req.dictionary.location_table[1:]}


def check_request(req, work_pid):
    """Structure every request must have."""
    d = req.dictionary
    assert d.string_table[0] == ""
    assert len(d.mapping_table) >= 1 and d.mapping_table[0] == type(d.mapping_table[0])()
    assert len(d.location_table[0].lines) == 0 and len(d.stack_table[0].location_indices) == 0
    for st in d.stack_table:
        for i in st.location_indices:
            assert 0 < i < len(d.location_table)
    for loc in d.location_table[1:]:
        assert 0 <= loc.mapping_index < len(d.mapping_table)
        for ln in loc.lines:
            assert 0 < ln.function_index < len(d.function_table)
        assert attr_map(req, loc.attribute_indices).get("profile.frame.type") in {
            "native", "kernel", "cpython", "go"}
    for m in d.mapping_table[1:]:
        a = attr_map(req, m.attribute_indices)
        assert len(a.get("process.executable.build_id.htlhash", "")) == 32, a
    assert req.resource_profiles
    check_indices(req)
    for rp, (res, scope) in zip(req.resource_profiles, official_parts(req)):
        assert scope.name == "sonde" and scope.version, scope
        assert res["host.name"] == socket.gethostname()
        # machine-id(5): 32 lowercase hex digits.
        assert len(res["host.id"]) == 32 and int(res["host.id"], 16) >= 0, res
        assert type(res["process.pid"]) is int and res["process.pid"] > 0, res
        assert res["process.executable.name"]
        # Opt-in only: the sensor runs without --command-line here.
        assert "process.command_line" not in res
        assert 1 <= len(rp.scope_profiles[0].profiles) <= 2
        shapes = []
        for p in rp.scope_profiles[0].profiles:
            # Counts of samples, each worth a period of CPU time.
            assert strings(req)[p.sample_type.type_strindex] == "samples"
            assert strings(req)[p.sample_type.unit_strindex] == "count"
            assert strings(req)[p.period_type.type_strindex] == "cpu"
            assert strings(req)[p.period_type.unit_strindex] == "nanoseconds"
            assert p.period == 1_000_000_000 // HZ
            assert p.time_unix_nano > 1_600_000_000 * 10**9
            assert p.original_payload_format == "" and not p.original_payload
            assert p.samples
            # One sample shape per Profile.
            kinds = {sample_shape(s) for s in p.samples}
            assert len(kinds) == 1, kinds
            shapes.append(kinds.pop())
            for s in p.samples:
                assert 0 < s.stack_index < len(d.stack_table)
                assert all(v > 0 for v in s.values)
                for t in s.timestamps_unix_nano:
                    assert abs(t / 1e9 - time.time()) < 600
                ta = attr_map(req, s.attribute_indices)
                assert ta.get("thread.id", 1) > 0
        # A second Profile only for the other shape.
        assert len(shapes) == len(set(shapes)), shapes
        if res["process.pid"] == work_pid:
            assert res["process.executable.path"] == str(WORKLOAD)
            assert res["process.executable.name"] == WORKLOAD.name


def _ld(field, payload):
    """A length-delimited protobuf field (field numbers < 16, lengths < 128)."""
    assert field < 16 and len(payload) < 128
    return bytes([field << 3 | 2, len(payload)]) + payload


def test_official_receiver_refuses_undeclared_fields():
    """The receiver's check can fail: a Sample deep in a request with a
    field v1.11.0 does not declare (number 15), or with a declared field
    on another wire type (values, 4, as fixed64), is refused, and the same
    request without it decodes."""
    sample = CURRENT.message_class("opentelemetry.proto.profiles.v1development.Sample")(
        stack_index=1, values=[3]).SerializeToString()

    def request(sample_bytes):
        # request.resource_profiles(1).scope_profiles(2).profiles(2).samples(2)
        return _ld(1, _ld(2, _ld(2, _ld(2, sample_bytes))))
    req = Receiver.decode(request(sample))
    assert list(req.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].values) == [3]
    for extra in (bytes([15 << 3, 1]), bytes([4 << 3 | 1]) + (3).to_bytes(8, "little")):
        try:
            Receiver.decode(request(sample + extra))
        except AssertionError as e:
            assert "samples[0]" in str(e) and CURRENT.tag in str(e), e
        else:
            raise AssertionError(f"{extra.hex()} in a Sample was not refused")


def test_otlp_export_backlog_and_totals():
    tmp = make_tmp()
    recv = Receiver(free_port())
    recv.start()
    proxy = CountingProxy(recv.port)
    sym = Symbolizer(tmp, ["--otlp-endpoint", f"127.0.0.1:{proxy.port}", "--otlp-insecure",
                           "--otlp-interval", "2"])
    work = subprocess.Popen([str(WORKLOAD), "60"])
    dd = subprocess.Popen(["dd", "if=/dev/zero", "of=/dev/null", "bs=64k"],
                          stderr=subprocess.DEVNULL)
    sensor = Sensor(tmp, sym.address, ["--pid", str(work.pid), "--pid", str(dd.pid),
                                       "--frequency", str(HZ)])
    try:
        # (a) The workload's functions with file and line, native and
        # kernel frames, once its files are analysed.
        def named():
            for req in recv.snapshot():
                fl = functions_with_lines(req)
                if (any(f.endswith("workload.c") and line > 0 for f, line in fl.get("leaf_a_compute", ()))
                        and {"native", "kernel"} <= frame_types(req)):
                    return req
            return None
        req = wait_for(named, 30, "a request with leaf_a_compute at a source line and kernel frames",
                       interval=0.5)
        for r in recv.snapshot():
            check_request(r, work.pid)
        maps = {strings(req)[m.filename_strindex]: attr_map(req, m.attribute_indices)
                for m in req.dictionary.mapping_table[1:]}
        assert str(WORKLOAD) in maps, maps.keys()
        assert len(maps[str(WORKLOAD)].get("process.executable.build_id.gnu", "")) >= 32
        assert sensor.proc.poll() is None, sensor.logtext()

        # (c) The receiver is down for 20 s; the symbolizer keeps the backlog.
        recv.stop()
        n_before = len(recv.snapshot())
        time.sleep(20)
        assert sym.proc.poll() is None, sym.logtext()
        st_down = sym.status()
        assert st_down.HasField("otlp") and st_down.otlp.backlog_requests >= 5, st_down.otlp
        assert st_down.otlp.failures >= 1
        recv2 = Receiver(recv.port)
        recv2.requests, recv2.bad = recv.snapshot(), list(recv.bad)
        recv2.start()
        recv = recv2
        wait_for(lambda: len(recv.snapshot()) >= n_before + 8, 30,
                 "the backlog (about 10 requests) to arrive", interval=0.5)

        # (b) Stop the sensor; once the last window is out, everything
        # stored was received.
        assert sensor.stop() == 0, sensor.logtext()
        time.sleep(3)  # the sensor's last batch is stored, then exported at the next tick

        def stored():
            return sym.symbols.Top(symbols_pb2.ProfileQuery(), timeout=10).total_samples

        def totals_equal():
            s, r = stored(), sample_total(recv.snapshot())
            return (s, r) if s == r and s > 0 else None
        try:
            s, r = wait_for(totals_equal, 15, "received samples to equal stored samples", interval=1)
        except AssertionError:
            raise AssertionError(f"stored {stored()} received {sample_total(recv.snapshot())}; "
                                 f"{sym.logtext()}")
        reqs = recv.snapshot()
        for r_ in reqs:
            check_request(r_, work.pid)
        # gzip: the wire carried less than the messages decoded
        payload = sum(r_.ByteSize() for r_ in reqs)
        print(f"OTLP: {len(reqs)} requests, {s} samples stored = received, "
              f"{payload} protobuf bytes, {proxy.sent} bytes on the wire, decoded whole by "
              f"official {CURRENT.tag} ({CURRENT.origin}); "
              f"status while down: {st_down.otlp}")
        # The official classes decoded every message of the layout.
        seen = set()
        for r_ in reqs:
            otlp_official.message_names(r_, seen)
        assert MESSAGES <= seen, MESSAGES - seen
        # (uncompressed, the wire would carry more than the payload)
        assert proxy.sent < payload * 0.8
        assert not recv.bad
        st = sym.status().otlp
        assert st.samples == s and st.dropped_samples == 0 and st.backlog_requests == 0, st
    finally:
        sensor.stop()
        for p in (work, dd):
            p.kill()
            p.wait()
        sym.stop()
        recv.stop()
        proxy.close()
    log = (tmp / "symbolizer.log").read_text()
    shutil.rmtree(tmp, ignore_errors=True)
    assert "OTLP export to" in log and "failed" in log and "works again" in log, log[-3000:]


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _pki(d):
    """A CA, a receiver certificate for localhost, a client certificate."""
    d.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=otlp-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    for name, san, usage in (("receiver", "DNS:localhost", "serverAuth"),
                             ("client", "DNS:sonde-symbolizer", "clientAuth")):
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\nextendedKeyUsage={usage}\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout",
                 f"{name}.key", "-out", f"{name}.csr", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt",
                 cwd=d)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


class TlsReceiver(Receiver):
    """The receiver behind mutual TLS (the client certificate required)."""

    def __init__(self, pki):
        super().__init__()
        self.pki = pki

    def start(self):
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(4))
        self.server.add_generic_rpc_handlers((self._handler(),))
        creds = grpc.ssl_server_credentials(
            [((self.pki / "receiver.key").read_bytes(), (self.pki / "receiver.crt").read_bytes())],
            root_certificates=(self.pki / "ca.crt").read_bytes(), require_client_auth=True)
        self.port = self.server.add_secure_port("127.0.0.1:0", creds)
        self.server.start()


def test_otlp_mutual_tls_by_name():
    """TLS to a receiver named localhost (resolved before the sandbox,
    checked against the certificate), with a client certificate; the
    counters in `sonde status --json`."""
    tmp = make_tmp()
    pki = _pki(tmp / "pki")
    recv = TlsReceiver(pki)
    recv.start()
    sym = Symbolizer(tmp, ["--otlp-endpoint", f"localhost:{recv.port}", "--otlp-interval", "1",
                           "--otlp-ca", str(pki / "ca.crt"), "--otlp-cert", str(pki / "client.crt"),
                           "--otlp-key", str(pki / "client.key")])
    work = subprocess.Popen([str(WORKLOAD), "30"])
    sensor = Sensor(tmp, sym.address, ["--pid", str(work.pid), "--frequency", str(HZ)])
    try:
        wait_for(lambda: sample_total(recv.snapshot()) > 100, 20, "samples over TLS", interval=0.5)
        assert sensor.stop() == 0, sensor.logtext()
        time.sleep(2)

        def totals_equal():
            s = sym.symbols.Top(symbols_pb2.ProfileQuery(), timeout=10).total_samples
            return s if s == sample_total(recv.snapshot()) else None
        s = wait_for(totals_equal, 10, "received samples to equal stored samples", interval=1)
        for r in recv.snapshot():
            check_request(r, work.pid)
        out = subprocess.run([str(SONDE), "status", "--symbolizer", sym.address, "--json"],
                             capture_output=True, text=True, check=True).stdout
        st = json.loads(out)["otlp"]
        assert st["samples"] == s and st["requests"] == len(recv.snapshot()), st
        assert st["dropped_samples"] == 0 and st["backlog_requests"] == 0, st
    finally:
        stop_all(sensor, [work], sym, recv)
    shutil.rmtree(tmp, ignore_errors=True)


def test_otlp_sandbox_rule():
    """With --otlp-endpoint the sandbox allows TCP sockets, and Landlock
    still refuses a connect to any other port; --print-policy says so.
    (The allowed port itself is used by the tests above.)"""
    tmp = make_tmp()
    port = free_port()
    base = [str(SYMBOLIZER), "--listen", f"unix:{tmp}/s.sock", "--cache", str(tmp / "c" / "cache.db"),
            "--otlp-endpoint", f"127.0.0.1:{port}", "--otlp-insecure"]
    try:
        p = subprocess.run(base + ["--print-policy"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert f"TCP bind: none, TCP connect: port {port} only" in p.stdout, p.stdout
        assert "allow socket AF_INET/AF_INET6 SOCK_STREAM" in p.stdout
        assert f"allow connect  # Landlock: TCP port {port} only\n" in p.stdout
        assert f"otlp: export to 127.0.0.1:{port} every 10 s, plaintext" in p.stdout
        p = subprocess.run(base + ["--sandbox-selftest"], capture_output=True, text=True, timeout=60)
        out = p.stdout
        assert "ALLOWED socket(AF_INET)" in out, out + p.stderr
        assert "denied connect 127.0.0.1:22: Permission denied" in out, out
        allowed = [ln for ln in out.splitlines() if ln.startswith("ALLOWED")]
        assert allowed == ["ALLOWED socket(AF_INET)"], out
        # The layout: named in the policy; an unknown one is refused.
        p = subprocess.run(base + ["--otlp-profiles-layout", "1.5.0", "--print-policy"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0 and "profiles in the v1.5.0 layout" in p.stdout, p.stdout + p.stderr
        p = subprocess.run(base + ["--otlp-profiles-layout", "1.7", "--print-policy"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "--otlp-profiles-layout" in p.stderr, p.stderr
        # Plaintext is never implicit.
        p = subprocess.run(base[:-1] + ["--print-policy"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "--otlp-insecure" in p.stderr, p.stderr
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class OfficialV150Receiver(Receiver):
    """A receiver built from the official v1.5.0 files alone (the same
    service, method and request name as v1.11.0's, another layout): each
    request is decoded whole with their classes and refused when it has a
    field they do not declare."""

    release = otlp_official.V150


def v150_stack(p, s):
    """Sample s's locations in v1.5.0's Profile p, leaf first."""
    assert 0 <= s.locations_start_index and s.locations_length >= 0, s
    assert s.locations_start_index + s.locations_length <= len(p.location_indices), s
    return [p.location_table[i] for i in
            p.location_indices[s.locations_start_index:s.locations_start_index + s.locations_length]]


def v150_attrs(p, indices):
    for i in indices:
        assert 0 <= i < len(p.attribute_table), (i, len(p.attribute_table))
    return otlp_official.attributes(p.attribute_table[i] for i in indices)


def v150_check_profile(p):
    """One Profile of v1.5.0: its own tables, every index inside them, one
    sample shape; returns {function: {(file, line)}} over its samples'
    stacks and the frame types met."""
    st = p.string_table
    assert st[0] == ""
    assert len(p.sample_type) == 1
    assert (st[p.sample_type[0].type_strindex], st[p.sample_type[0].unit_strindex]) == ("samples", "count")
    assert (st[p.period_type.type_strindex], st[p.period_type.unit_strindex]) == ("cpu", "nanoseconds")
    assert p.sample_type[0].aggregation_temporality == 1  # DELTA
    assert p.period == 1_000_000_000 // HZ and p.time_nanos > 1_600_000_000 * 10**9
    assert len(p.profile_id) == 16 and p.original_payload_format == ""
    assert p.sample
    # One shape: one value each (the one sample type), all with
    # timestamps or none.
    assert {len(s.value) for s in p.sample} == {1}
    assert len({bool(s.timestamps_unix_nano) for s in p.sample}) == 1
    funcs, types = {}, set()
    for s in p.sample:
        assert s.value[0] > 0
        assert all(abs(t / 1e9 - time.time()) < 600 for t in s.timestamps_unix_nano)
        ta = v150_attrs(p, s.attribute_indices)
        assert ta.get("thread.id", 1) > 0
        assert not s.HasField("link_index") or 0 <= s.link_index < len(p.link_table)
        for loc in v150_stack(p, s):
            types.add(v150_attrs(p, loc.attribute_indices)["profile.frame.type"])
            if loc.HasField("mapping_index"):
                m = p.mapping_table[loc.mapping_index]
                assert len(v150_attrs(p, m.attribute_indices)["process.executable.build_id.htlhash"]) == 32
                assert st[m.filename_strindex].startswith("/")
            for ln in loc.line:
                f = p.function_table[ln.function_index]
                funcs.setdefault(st[f.name_strindex], set()).add((st[f.filename_strindex], ln.line))
    assert types <= {"native", "kernel", "cpython", "go"}, types
    return funcs, types


def v150_total(reqs):
    return sum(s.value[0] for req in reqs for rp in req.resource_profiles
               for p in rp.scope_profiles[0].profiles for s in p.sample)


def test_otlp_v150_layout_official():
    """--otlp-profiles-layout 1.5.0: a real recorded profile of the C
    workload, received by a receiver built from the official v1.5.0 files
    only, decodes whole with them (no undeclared field) and resolves: the
    workload's functions with their source lines through each Profile's
    own tables, one sample shape per Profile, the value types, host.name;
    every stored sample arrives."""
    tmp = make_tmp()
    recv = OfficialV150Receiver()
    recv.start()
    sym = Symbolizer(tmp, ["--otlp-endpoint", f"127.0.0.1:{recv.port}", "--otlp-insecure",
                           "--otlp-interval", "1", "--otlp-profiles-layout", "1.5.0"])
    work = subprocess.Popen([str(WORKLOAD), "40"])
    sensor = Sensor(tmp, sym.address, ["--pid", str(work.pid), "--frequency", str(HZ)])
    try:
        def named():
            assert not recv.bad, f"the official v1.5.0 classes refused a request: {recv.bad[0]}"
            for req in recv.snapshot():
                for rp in req.resource_profiles:
                    res = otlp_official.attributes(rp.resource.attributes)
                    for p in rp.scope_profiles[0].profiles:
                        funcs, _ = v150_check_profile(p)
                        if res["process.pid"] == work.pid and any(
                                f.endswith("workload.c") and line > 0
                                for f, line in funcs.get("leaf_a_compute", ())):
                            return req
            return None
        wait_for(named, 30, "a v1.5.0 Profile with leaf_a_compute at a source line", interval=0.5)
        assert sensor.stop() == 0, sensor.logtext()
        time.sleep(2)

        def totals_equal():
            s = sym.symbols.Top(symbols_pb2.ProfileQuery(), timeout=10).total_samples
            return s if s > 0 and s == v150_total(recv.snapshot()) else None
        try:
            total = wait_for(totals_equal, 15, "received samples to equal stored samples", interval=1)
        except AssertionError:
            raise AssertionError(f"received {v150_total(recv.snapshot())}; {sym.logtext()}")
        reqs = recv.snapshot()
        funcs_all, types_all = {}, set()
        for req in reqs:
            assert req.resource_profiles
            for rp in req.resource_profiles:
                res = otlp_official.attributes(rp.resource.attributes)
                assert res["host.name"] == socket.gethostname()
                assert rp.scope_profiles[0].scope.name == "sonde"
                assert "process.command_line" not in res
                # A second Profile only for the other shape.
                assert 1 <= len(rp.scope_profiles[0].profiles) <= 2
                for p in rp.scope_profiles[0].profiles:
                    funcs, types = v150_check_profile(p)
                    types_all |= types
                    if res["process.pid"] == work.pid:
                        assert res["process.executable.path"] == str(WORKLOAD)
                        for f, fl in funcs.items():
                            funcs_all.setdefault(f, set()).update(fl)
        for f in ("leaf_a_compute", "main"):
            assert any(file.endswith("workload.c") and line > 0 for file, line in funcs_all.get(f, ())), \
                (f, sorted(funcs_all)[:40])
        assert "native" in types_all
        assert not recv.bad, recv.bad
        print(f"OTLP v1.5.0 layout: {len(reqs)} requests ({sum(r.ByteSize() for r in reqs)} protobuf "
              f"bytes) decoded whole by official {otlp_official.V150.tag}, {total} samples stored = "
              f"received, frame types {sorted(types_all)}")
    finally:
        stop_all(sensor, [work], sym, recv)
    shutil.rmtree(tmp, ignore_errors=True)
