"""The security properties of docs/security.md, checked on the real services:
the symbolizer's sandbox, the sensor's kept capabilities, who may call what
over Unix sockets (peer credentials) and TCP (mutual TLS), rate limits, and
the deploy/ units and manifests."""
import grp
import os
import pathlib
import pwd
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import grpc
import pytest
import yaml

from conftest import (SENSOR, SRC, SYMBOLIZER, WORKLOAD, Symbolizer, ingest_pb2, ingest_pb2_grpc,
                      symbols_pb2, symbols_pb2_grpc, wait_for)
from pysensor import PySensor

# The sensor's kept set without --go-probes (sensor/privileges.c,
# docs/security.md): no CAP_BPF/CAP_PERFMON, map operations on its own fds
# need none.
CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE, CAP_SYSLOG, CAP_CHECKPOINT_RESTORE = 2, 19, 34, 40
SENSOR_CAPS = sum(1 << c for c in (CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE, CAP_SYSLOG, CAP_CHECKPOINT_RESTORE))


def proc_status(pid, tid=None):
    path = f"/proc/{pid}/task/{tid}/status" if tid else f"/proc/{pid}/status"
    out = {}
    for line in pathlib.Path(path).read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def every_thread(pid):
    return [proc_status(pid, t) for t in os.listdir(f"/proc/{pid}/task")]


# ---- symbolizer sandbox ----

def test_symbolizer_runs_unprivileged_and_confined(symbolizer):
    # Under load first: gRPC's threads are what allow-lists miss.
    for _ in range(20):
        symbolizer.status()
    threads = every_thread(symbolizer.proc.pid)
    assert len(threads) > 3
    for st in threads:
        uids = st["Uid"].split()
        assert all(u != "0" for u in uids), st["Uid"]
        for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(st[k], 16) == 0, (k, st[k], st["Name"])
        assert st["NoNewPrivs"] == "1"
        assert st["Seccomp"] == "2"
    assert symbolizer.proc.poll() is None


def test_sandbox_selftest_denies_everything(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("readable by everyone, outside every rule\n")
    outside.chmod(0o644)
    p = subprocess.run([str(SYMBOLIZER), "--listen", f"unix:{tmp_path}/s.sock", "--cache",
                        str(tmp_path / "c" / "cache.db"), "--sandbox-selftest=" + str(outside)],
                       capture_output=True, text=True, timeout=60)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(("denied", "ALLOWED"))]
    assert p.returncode == 0, p.stdout + p.stderr
    assert not [ln for ln in lines if ln.startswith("ALLOWED")], p.stdout
    what = "\n".join(lines)
    for attempt in ("ptrace", "/proc/1/mem", "/etc/shadow", "/etc/passwd", str(outside), "socket(AF_INET)",
                    "connect", "execve", "fork", "setuid(0)", "capset"):
        assert attempt in what, f"{attempt} not tried:\n{what}"
    # /etc/passwd is world-readable: only Landlock can refuse it.
    assert re.search(r"denied open /etc/passwd: Permission denied", what)


def test_print_policy(tmp_path):
    p = subprocess.run([str(SYMBOLIZER), "--listen", f"unix:{tmp_path}/s.sock", "--cache",
                        str(tmp_path / "c" / "cache.db"), "--debug-dir", "/usr/lib/debug",
                        "--max-memory", "2G", "--max-open-files", "1024", "--print-policy"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "user: sonde" in out
    assert re.search(r"landlock: ABI \d+", out)
    assert f"read-write: {tmp_path}/c" in out
    assert "read-only: /usr/lib/debug" in out
    assert "allow epoll_wait" in out and "allow futex" in out
    assert "data 2147483648 bytes" in out and "nofile 1024" in out
    assert not (tmp_path / "s.sock").exists()   # printed and exited before listening


def _build_with_debug(tmp_path):
    """A stripped program with a GNU build ID whose static function is
    named only in its separate debug file."""
    src = tmp_path / "secret.c"
    src.write_text(textwrap.dedent("""
        __attribute__((noinline)) static int sonde_only_in_debug_file(int x) { return x * 7 + 1; }
        int main(int argc, char **argv) { (void)argv; return sonde_only_in_debug_file(argc); }
    """))
    full = tmp_path / "secret.full"
    subprocess.run(["cc", "-O1", "-g", "-Wl,--build-id=sha1", "-o", str(full), str(src)], check=True)
    debug = tmp_path / "secret.debug"
    subprocess.run(["objcopy", "--only-keep-debug", str(full), str(debug)], check=True)
    stripped = tmp_path / "secret"
    subprocess.run(["objcopy", "--strip-all", str(full), str(stripped)], check=True)
    nm = subprocess.run(["nm", str(full)], capture_output=True, text=True, check=True).stdout
    addr = int(next(ln.split()[0] for ln in nm.splitlines() if "sonde_only_in_debug_file" in ln), 16)
    bid = subprocess.run(["readelf", "-n", str(stripped)], capture_output=True, text=True, check=True).stdout
    build_id = re.search(r"Build ID: ([0-9a-f]+)", bid).group(1)
    return stripped, debug, addr, build_id


def _symbolize_with_debug_dir(tmp_path, debug_dir, stripped, addr):
    sym = Symbolizer(tmp_path / "sym", extra=["--debug-dir", str(debug_dir), "--verbose"])
    try:
        s = PySensor(sym.address, {str(stripped): stripped.read_bytes()})
        s.hello()
        s.process(4242, "secret", [str(stripped)])
        def ask():
            r = sym.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[
                symbols_pb2.SymbolizeQuery(path=str(stripped), addresses=[addr])]), timeout=30)
            # The ProcessUpdate travels on the stream, the query on its own
            # call: ask again until the symbolizer has seen the path.
            return r if r.results[0].error != "unknown file" else None
        resp = wait_for(ask, 15, "the symbolizer to know the file")
        s.close()
        names = [x.function for x in resp.results[0].symbols]
        return names, resp.results[0].error, sym.logtext(), sym.proc.poll()
    finally:
        sym.stop()


def test_debug_dir_symlink_out_is_denied(tmp_path):
    stripped, debug, addr, build_id = _build_with_debug(tmp_path)
    (tmp_path / "sym").mkdir(mode=0o755)
    # Positive control: the debug file inside the debug directory is used.
    inside = tmp_path / "debug-in"
    (inside / ".build-id" / build_id[:2]).mkdir(parents=True)
    shutil.copy(debug, inside / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug")
    names, err, log, rc = _symbolize_with_debug_dir(tmp_path, inside, stripped, addr)
    assert "sonde_only_in_debug_file" in names, (names, err, log)

    # The same file, world-readable but outside every rule, behind a
    # symlink in the debug directory: Landlock refuses the open.
    shutil.rmtree(tmp_path / "sym")
    (tmp_path / "sym").mkdir(mode=0o755)
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    shutil.copy(debug, outside / "secret.debug")
    (outside / "secret.debug").chmod(0o644)
    linked = tmp_path / "debug-link"
    (linked / ".build-id" / build_id[:2]).mkdir(parents=True)
    os.symlink(outside / "secret.debug", linked / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug")
    names, err, log, rc = _symbolize_with_debug_dir(tmp_path, linked, stripped, addr)
    assert "sonde_only_in_debug_file" not in names, names
    assert "merged" not in log
    assert rc is None, "the symbolizer died: " + log            # a denial, not a crash
    assert "blocked system call" not in log and ": error:" not in log, log

    # And /etc/shadow behind the symlink: the analysis goes on without it.
    os.unlink(linked / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug")
    os.symlink("/etc/shadow", linked / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug")
    shutil.rmtree(tmp_path / "sym")
    (tmp_path / "sym").mkdir(mode=0o755)
    names, err, log, rc = _symbolize_with_debug_dir(tmp_path, linked, stripped, addr)
    assert rc is None and "shadow" not in log.replace("/etc/shadow", "") and "merged" not in log


# ---- sensor ----

def test_sensor_keeps_exactly_the_documented_capabilities(symbolizer, start_sensor):
    work = subprocess.Popen([str(WORKLOAD), "4"])
    try:
        sensor = start_sensor(symbolizer.address, "--pid", str(work.pid), "--frequency", "99")
        wait_for(lambda: "privileges dropped" in sensor.logtext(), 20, "the sensor to drop privileges")
        wait_for(lambda: symbolizer.status().samples_received > 0, 20, "samples")
        sensor_user = pwd.getpwnam("sonde-sensor")
        for st in every_thread(sensor.proc.pid):
            assert st["Uid"].split() == [str(sensor_user.pw_uid)] * 4, (st["Name"], st["Uid"])
            assert st["Gid"].split() == [str(sensor_user.pw_gid)] * 4, (st["Name"], st["Gid"])
            assert int(st["CapEff"], 16) == SENSOR_CAPS, (st["Name"], st["CapEff"])
            assert int(st["CapPrm"], 16) == SENSOR_CAPS
            assert int(st["CapBnd"], 16) == SENSOR_CAPS
            assert int(st["CapInh"], 16) == 0 and int(st["CapAmb"], 16) == 0
            assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2"
        # Still fully working after the drop: files analysed from its ranges.
        wait_for(lambda: symbolizer.status().files_analysed >= 1, 30, "an analysis")
    finally:
        work.wait()
    rc = sensor.stop()
    log = sensor.log_path.read_text()
    assert rc == 0, log
    assert "blocked system call" not in log


def test_sensor_no_drop_privileges_flag(symbolizer, start_sensor):
    sensor = start_sensor(symbolizer.address, "--no-drop-privileges", "--duration", "30")
    wait_for(lambda: "sampling" in sensor.logtext(), 20, "the sensor to start")
    assert proc_status(sensor.proc.pid)["Seccomp"] == "0"


# ---- Unix sockets: peer credentials ----

def _stub_dir(tmp_path):
    """The generated stubs, readable by user nobody."""
    d = tmp_path / "stubs"
    d.mkdir(mode=0o755)
    for mod in (ingest_pb2, ingest_pb2_grpc, symbols_pb2, symbols_pb2_grpc):
        shutil.copy(mod.__file__, d)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


PEER_CLIENT = r"""
import os, sys, grpc
sys.path.insert(0, sys.argv[2])
import ingest_pb2, ingest_pb2_grpc, symbols_pb2, symbols_pb2_grpc
ch = grpc.insecure_channel(sys.argv[1])
out = []
try:
    symbols_pb2_grpc.SymbolsStub(ch).Status(symbols_pb2.StatusRequest(), timeout=10)
    out.append("status=OK")
except grpc.RpcError as e:
    out.append("status=" + e.code().name)
def msgs():
    yield ingest_pb2.SensorMessage(hello=ingest_pb2.Hello(protocol_version=1, sensor_version="evil",
                                                          hostname="x", frequency_hz=19))
try:
    for _ in ingest_pb2_grpc.IngestStub(ch).Connect(msgs(), timeout=10):
        pass
    out.append("ingest=OK")
except grpc.RpcError as e:
    out.append("ingest=" + e.code().name)
print(" ".join(out), os.getuid(), os.getgroups())
"""


def _run_as(uid, groups, address, stubs):
    def demote():
        os.setgroups(groups)
        os.setgid(groups[0] if groups else 65534)
        os.setuid(uid)
    p = subprocess.run([sys.executable, "-c", PEER_CLIENT, address, str(stubs)], preexec_fn=demote,
                       capture_output=True, text=True, timeout=60, cwd="/")
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_unix_peer_credentials(tmp_path):
    nobody = pwd.getpwnam("nobody").pw_uid
    sonde_gid = grp.getgrnam("sonde").gr_gid
    clients = grp.getgrnam("nogroup").gr_gid
    sym = Symbolizer(tmp_path, extra=["--client-group", "nogroup"])
    try:
        stubs = _stub_dir(tmp_path)
        # In the socket's group (passes the 0660 mode) but not root, not a
        # --sensor-uid and not in a --client-group: nothing.
        out = _run_as(nobody, [sonde_gid], sym.address, stubs)
        assert "status=PERMISSION_DENIED" in out and "ingest=PERMISSION_DENIED" in out, out
        # A read-only client (--client-group): Symbols yes, Ingest no.
        out = _run_as(nobody, [sonde_gid, clients], sym.address, stubs)
        assert "status=OK" in out and "ingest=PERMISSION_DENIED" in out, out
        # Not in the socket's group at all: the file mode stops it first.
        out = _run_as(nobody, [clients], sym.address, stubs)
        assert "status=UNAVAILABLE" in out or "status=PERMISSION_DENIED" in out, out
        assert sym.status().sensors_connected == 0
        assert stat_mode(sym.sock) == 0o660
    finally:
        sym.stop()


def test_unix_sensor_uid(tmp_path):
    nobody = pwd.getpwnam("nobody").pw_uid
    sonde_gid = grp.getgrnam("sonde").gr_gid
    sym = Symbolizer(tmp_path, extra=["--sensor-uid", str(nobody)])
    try:
        out = _run_as(nobody, [sonde_gid], sym.address, _stub_dir(tmp_path))
        # A sensor may stream (the stream ends OK after Hello and half-close)
        # but is not a Symbols client.
        assert "ingest=OK" in out and "status=PERMISSION_DENIED" in out, out
    finally:
        sym.stop()


def stat_mode(path):
    return os.stat(path).st_mode & 0o777


def test_rate_limit_symbols_calls(tmp_path):
    sym = Symbolizer(tmp_path, extra=["--rate-symbols", "5"])
    try:
        codes = []
        for _ in range(40):
            try:
                sym.symbols.Status(symbols_pb2.StatusRequest(), timeout=5)
                codes.append("OK")
            except grpc.RpcError as e:
                codes.append(e.code().name)
        assert "RESOURCE_EXHAUSTED" in codes and codes[0] == "OK", codes
        time.sleep(1.0)
        sym.status()   # refilled
    finally:
        sym.stop()


# ---- TCP: mutual TLS ----

def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_ca(d, name):
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=d)


def _make_cert(d, ca, name, san, client):
    ext = d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\nextendedKeyUsage={'clientAuth' if client else 'serverAuth'}\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", f"{name}.crt", cwd=d)


@pytest.fixture
def pki(tmp_path):
    d = tmp_path / "pki"
    d.mkdir()
    _make_ca(d, "sonde-ca")
    _make_ca(d, "other-ca")
    _make_cert(d, "sonde-ca", "symbolizer", "IP:127.0.0.1,DNS:localhost", client=False)
    _make_cert(d, "sonde-ca", "sonde-sensor", "DNS:sonde-sensor", client=True)
    _make_cert(d, "sonde-ca", "reader", "DNS:reader", client=True)
    _make_cert(d, "other-ca", "intruder", "DNS:sonde-sensor", client=True)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tls_symbolizer(tmp_path, pki):
    port = _free_port()
    sym = Symbolizer(tmp_path, extra=["--listen", f"tcp:127.0.0.1:{port}", "--tls-cert", str(pki / "symbolizer.crt"),
                                      "--tls-key", str(pki / "symbolizer.key"),
                                      "--tls-client-ca", str(pki / "sonde-ca.crt")])
    sym.port = port
    yield sym
    sym.stop()


def _tls_channel(pki, port, cert=None):
    creds = grpc.ssl_channel_credentials(
        root_certificates=(pki / "sonde-ca.crt").read_bytes(),
        private_key=(pki / f"{cert}.key").read_bytes() if cert else None,
        certificate_chain=(pki / f"{cert}.crt").read_bytes() if cert else None)
    return grpc.secure_channel(f"127.0.0.1:{port}", creds)


def _status_code(channel):
    try:
        symbols_pb2_grpc.SymbolsStub(channel).Status(symbols_pb2.StatusRequest(), timeout=5)
        return "OK"
    except grpc.RpcError as e:
        return e.code().name
    finally:
        channel.close()


def test_tcp_requires_a_valid_client_certificate(tls_symbolizer, pki):
    port = tls_symbolizer.port
    assert _status_code(_tls_channel(pki, port)) == "UNAVAILABLE"              # no certificate
    assert _status_code(_tls_channel(pki, port, "intruder")) == "UNAVAILABLE"  # another CA
    assert _status_code(grpc.insecure_channel(f"127.0.0.1:{port}")) == "UNAVAILABLE"  # plaintext
    assert _status_code(_tls_channel(pki, port, "reader")) == "OK"             # a valid client


def test_tcp_reader_cannot_stream_sensor_data(tls_symbolizer, pki):
    ch = _tls_channel(pki, tls_symbolizer.port, "reader")

    def msgs():
        yield ingest_pb2.SensorMessage(hello=ingest_pb2.Hello(protocol_version=1, sensor_version="r",
                                                              hostname="x", frequency_hz=19))
    with pytest.raises(grpc.RpcError) as e:
        for _ in ingest_pb2_grpc.IngestStub(ch).Connect(msgs(), timeout=10):
            pass
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    ch.close()


def test_real_sensor_over_tcp_mtls(tls_symbolizer, pki, start_sensor):
    # Runs until killed: on a loaded machine loading the sensor's BPF can
    # take longer than a short workload lives.
    work = subprocess.Popen([str(WORKLOAD), "120"])
    try:
        sensor = start_sensor(f"tcp:127.0.0.1:{tls_symbolizer.port}", "--pid", str(work.pid), "--frequency", "99",
                              "--tls-ca", str(pki / "sonde-ca.crt"), "--tls-cert", str(pki / "sonde-sensor.crt"),
                              "--tls-key", str(pki / "sonde-sensor.key"), "--tls-server-name", "localhost")
        wait_for(lambda: tls_symbolizer.status().samples_received > 0, 30,
                 "samples over TCP+mTLS: " + sensor.logtext())
    finally:
        work.kill()
        work.wait()
    # The CLI over TCP with a reader certificate.
    env = dict(os.environ, SONDE_TLS_CA=str(pki / "sonde-ca.crt"), SONDE_TLS_CERT=str(pki / "reader.crt"),
               SONDE_TLS_KEY=str(pki / "reader.key"))
    from conftest import SONDE
    p = subprocess.run([str(SONDE), "status", "--symbolizer", f"tcp:127.0.0.1:{tls_symbolizer.port}"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "samples_received" in p.stdout, p.stdout + p.stderr


def test_sensor_refuses_plaintext_tcp(tmp_path):
    p = subprocess.run([str(SENSOR), "--symbolizer", "tcp:127.0.0.1:1", "--duration", "1"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--insecure" in p.stdout + p.stderr


def test_symbolizer_refuses_plaintext_tcp(tmp_path):
    p = subprocess.run([str(SYMBOLIZER), "--listen", f"tcp:127.0.0.1:{_free_port()}", "--cache",
                        str(tmp_path / "c.db")], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--insecure" in p.stderr


# ---- deploy/ ----

DEPLOY = SRC / "deploy"


def test_systemd_units_verify():
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    units = sorted((DEPLOY / "systemd").glob("*.service"))
    assert {u.name for u in units} >= {"sonde-symbolizer.service", "sonde-sensor.service"}
    # The units name /usr/bin binaries: verify against a copy that points
    # at the build (verify checks that ExecStart exists).
    tmp = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"sonde-units.{os.getpid()}"
    tmp.mkdir(exist_ok=True)
    try:
        copies = []
        for u in units:
            text = u.read_text().replace("/usr/bin/sonde-symbolizer", str(SYMBOLIZER)) \
                                .replace("/usr/bin/sonde-sensor", str(SENSOR))
            (tmp / u.name).write_text(text)
            copies.append(str(tmp / u.name))
        p = subprocess.run(["systemd-analyze", "verify", "--man=no", *copies], capture_output=True, text=True,
                           timeout=60)
        msgs = [ln for ln in (p.stdout + p.stderr).splitlines()
                if ln.strip() and "sonde" in ln and "ExecStart" not in ln]
        if p.returncode != 0 and "System has not been booted with systemd" in p.stderr:
            pytest.skip("systemd-analyze cannot run here: " + p.stderr.strip())
        assert p.returncode == 0 and not msgs, p.stdout + p.stderr
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sym = (DEPLOY / "systemd" / "sonde-symbolizer.service").read_text()
    for opt in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
                "PrivateDevices=yes", "CapabilityBoundingSet=\n", "SystemCallFilter=@system-service",
                "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "CacheDirectory=sonde", "MemoryMax="):
        assert opt in sym, opt
    # The cache directory belongs to the service user: with User=root,
    # systemd's CacheDirectory is root's, so --cache names a subdirectory
    # the symbolizer creates and hands to --user (0700); the parent only
    # lets it pass, and root keeps CAP_CHOWN plus fchownat for the hand-over.
    directive = dict(re.findall(r"^(User|CacheDirectory|CacheDirectoryMode|UMask)=(.*)$", sym, re.M))
    assert directive["User"] == "root"
    exec_start = re.search(r"^ExecStart=(.*)$", sym, re.M).group(1).split()
    cache = exec_start[exec_start.index("--cache") + 1]
    cache_root = "/var/cache/" + directive["CacheDirectory"]
    assert cache.startswith(cache_root + "/") and cache.count("/") > cache_root.count("/") + 1, cache
    assert int(directive["CacheDirectoryMode"], 8) & 0o044 == 0, directive  # no reading the list
    assert directive["UMask"] == "0077"
    assert exec_start[exec_start.index("--user") + 1] == "sonde"
    assert "--allow-unsandboxed" not in exec_start and "--require-sandbox" not in exec_start
    assert "CAP_CHOWN" in sym and re.search(r"^SystemCallFilter=.*\bfchownat\b", sym, re.M)
    sen = (DEPLOY / "systemd" / "sonde-sensor.service").read_text()
    caps = re.search(r"^CapabilityBoundingSet=(.*)$", sen, re.M).group(1).split()
    assert set(caps) == {"CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH", "CAP_SYSLOG",
                         "CAP_CHECKPOINT_RESTORE", "CAP_SETPCAP", "CAP_SETUID", "CAP_SETGID",
                         "CAP_SYS_RESOURCE"}, caps


def _k8s_docs():
    docs = []
    for f in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            if d:
                assert "apiVersion" in d and "kind" in d and "metadata" in d, (f, d)
                docs.append(d)
    return docs


def test_kubernetes_manifests():
    docs = _k8s_docs()
    kinds = {d["kind"] for d in docs}
    assert {"DaemonSet", "Deployment", "Service", "PersistentVolumeClaim"} <= kinds, kinds
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec.get("hostPID") is True
    # Nothing is pinned: no host /sys/fs/bpf (read-write, it would let the
    # pod pin or replace objects other tools share).
    for v in spec.get("volumes", []):
        assert not (v.get("hostPath", {}).get("path", "")).startswith("/sys/fs/bpf"), v
    for c in spec["containers"]:
        sc = c["securityContext"]
        assert not any(m["mountPath"].startswith("/sys/fs/bpf") for m in c.get("volumeMounts", []))
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, sc
        assert not sc.get("privileged", False)
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert set(sc["capabilities"]["add"]) == {"BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH", "SYSLOG",
                                                  "CHECKPOINT_RESTORE", "SETPCAP", "SETUID", "SETGID",
                                                  "SYS_RESOURCE"}
    dep = next(d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
        assert "--tls-client-ca" in " ".join(c.get("args", []))
        assert "--allow-unsandboxed" not in c.get("args", [])
    if shutil.which("yamllint"):
        p = subprocess.run(["yamllint", "-d", "{extends: relaxed, rules: {line-length: {max: 140}}}",
                            str(DEPLOY / "kubernetes")], capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
