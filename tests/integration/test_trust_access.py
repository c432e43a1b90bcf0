"""Clients see only what their identity allows (docs/security.md, roles;
issue 27 hole 6): with a real whole-host sensor and real processes of two
users, a non-admin Symbols client sees its own processes' samples and
none of the other user's, root and an --admin-group member see all, and
Symbolize by path of another user's private (0600, in a 0700 directory)
library is answered for root only.

Clients are Debian's python3-grpcio, run as each user (setuid, with the
socket's group for the 0660 mode and --client-group or --admin-group)."""
import grp
import json
import os
import pathlib
import pwd
import shutil
import subprocess
import sys

import pytest

from conftest import (SONDE, WORKLOAD, Sensor, Symbolizer, htlhash, ingest_pb2, ingest_pb2_grpc,
                      symbols_pb2, symbols_pb2_grpc, wait_for)

USER_A, USER_B, ADMINS = "sonde-t3a", "sonde-t3b", "sonde-t3adm"

SECRET_C = r"""
#include <stdint.h>
/* Unique bytes: this file's ID is nobody else's. */
const char t3_secret_marker[] = "sonde test_trust_access private library";
__attribute__((noinline)) uint64_t t3_secret_function_b(uint64_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (uint64_t i = 0; i < n; i++)
		h = (h ^ i) * 1099511628211ull;
	return h;
}
"""

# Runs as the client's user: everything the Symbols API shows it, as JSON.
CLIENT = r"""
import gzip, json, sys, time, grpc
sys.path.insert(0, sys.argv[2])
import symbols_pb2, symbols_pb2_grpc
ch = grpc.insecure_channel(sys.argv[1])
s = symbols_pb2_grpc.SymbolsStub(ch)
out = {}
st = s.Status(symbols_pb2.StatusRequest(), timeout=30)
out["scoped"] = st.scoped
out["processes"] = [[p.pid, p.comm] for p in st.processes]
# Per pid: another test's process may name a thread with invalid UTF-8
# (issue 27 hole 7), which python3-grpcio cannot decode in a whole-host view.
for who, pid in (("a", int(sys.argv[5])), ("b", int(sys.argv[6]))):
    q = symbols_pb2.ProfileQuery(pid=pid)
    top = s.Top(symbols_pb2.ProfileQuery(pid=pid, limit=1000), timeout=30)
    out["top_" + who] = top.total_samples
    fo = s.Folded(q, timeout=30)
    out["folded_" + who] = [[f.comm, f.pid, f.count] for f in fo.stacks]
    pp = s.Pprof(q, timeout=30)
    raw = gzip.decompress(pp.profile) if pp.profile else b""
    out["pprof_" + who] = b"t3-burn-" + who.encode() in raw
q = symbols_pb2.SymbolizeQuery(path=sys.argv[3], addresses=[int(sys.argv[4])])
for _ in range(6):
    # On a busy machine the first analysis may outlast one call's wait.
    r = s.Symbolize(symbols_pb2.SymbolizeRequest(queries=[q]), timeout=60).results[0]
    if r.unknown_file or not r.error:
        break
    time.sleep(2)
out["sym_error"] = r.error
out["sym_unknown"] = r.unknown_file
out["sym_function"] = r.symbols[0].function if r.symbols else ""
print(json.dumps(out))
"""


def _uid(name):
    return pwd.getpwnam(name).pw_uid


@pytest.fixture
def users():
    """Two real users and an admin group, removed afterwards."""
    made = []
    # Left over from an interrupted run: start clean.
    for u in (USER_A, USER_B):
        subprocess.run(["userdel", u], capture_output=True)
    subprocess.run(["groupdel", ADMINS], capture_output=True)
    try:
        for u in (USER_A, USER_B):
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", u],
                           check=True, capture_output=True)
            made.append(("user", u))
        subprocess.run(["groupadd", "--system", ADMINS], check=True, capture_output=True)
        made.append(("group", ADMINS))
        yield _uid(USER_A), _uid(USER_B), grp.getgrnam(ADMINS).gr_gid
    finally:
        for kind, name in reversed(made):
            subprocess.run(["userdel" if kind == "user" else "groupdel", name], capture_output=True)


def _demote(uid, groups):
    def fn():
        os.setgroups(groups)
        os.setgid(groups[0])
        os.setuid(uid)
    return fn


def _stub_dir(tmp_path):
    d = tmp_path / "stubs"
    d.mkdir(mode=0o755)
    for mod in (ingest_pb2, ingest_pb2_grpc, symbols_pb2, symbols_pb2_grpc):
        shutil.copy(mod.__file__, d)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


def _secret_library(tmp_path, uid_b):
    """B's private library: 0600 in a 0700 directory, both B's."""
    src = tmp_path / "secret.c"
    src.write_text(SECRET_C)
    private = tmp_path / "private-b"
    private.mkdir(mode=0o700)
    lib = private / "libt3secret.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", "-o", str(lib), str(src)], check=True)
    nm = subprocess.run(["nm", str(lib)], check=True, capture_output=True, text=True).stdout
    addr = next(int(ln.split()[0], 16) for ln in nm.splitlines() if ln.endswith(" t3_secret_function_b"))
    os.chown(lib, uid_b, uid_b)
    os.chown(private, uid_b, uid_b)
    lib.chmod(0o600)
    return lib, addr


def _ask(sym, stubs, uid, groups, secret, addr, pid_a, pid_b):
    p = subprocess.run([sys.executable, "-c", CLIENT, sym.address, str(stubs), str(secret), str(addr),
                        str(pid_a), str(pid_b)],
                       preexec_fn=_demote(uid, groups), capture_output=True, text=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def test_each_user_sees_only_its_own_processes(tmp_path, users):
    uid_a, uid_b, admin_gid = users
    sonde_gid = grp.getgrnam("sonde").gr_gid
    clients = grp.getgrnam("nogroup").gr_gid
    stubs = _stub_dir(tmp_path)
    lib, addr = _secret_library(tmp_path, uid_b)
    # One binary under two names: the main threads' comms tell the users'
    # samples apart in every view.
    burn_a, burn_b = tmp_path / "t3-burn-a", tmp_path / "t3-burn-b"
    for b in (burn_a, burn_b):
        shutil.copy(WORKLOAD, b)
        b.chmod(0o755)

    sym = Symbolizer(tmp_path, extra=["--client-group", "nogroup", "--admin-group", ADMINS])
    procs = []
    sensor = None
    try:
        # B's process that maps the private library (dlopen: executable).
        holder = subprocess.Popen([sys.executable, "-c",
                                   "import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); time.sleep(600)",
                                   str(lib)], preexec_fn=_demote(uid_b, [uid_b]), cwd="/")
        procs.append(holder)
        a = subprocess.Popen([str(burn_a), "600"], preexec_fn=_demote(uid_a, [uid_a]), cwd="/",
                             stdout=subprocess.DEVNULL)
        b = subprocess.Popen([str(burn_b), "600"], preexec_fn=_demote(uid_b, [uid_b]), cwd="/",
                             stdout=subprocess.DEVNULL)
        procs += [a, b]
        wait_for(lambda: f"{lib}" in pathlib.Path(f"/proc/{holder.pid}/maps").read_text(), 15,
                 "the holder to map the library")
        # The whole host, as the daemon runs.
        sensor = Sensor(tmp_path, sym.address, ["--frequency", "99"])

        def sampled(pid, comm):
            q = symbols_pb2.ProfileQuery(pid=pid)
            return comm in {f.comm for f in sym.symbols.Folded(q, timeout=30).stacks}
        wait_for(lambda: sampled(a.pid, "t3-burn-a") and sampled(b.pid, "t3-burn-b"), 60,
                 "samples of both users' processes", interval=1)

        user_a = _ask(sym, stubs, uid_a, [sonde_gid, clients], lib, addr, a.pid, b.pid)
        root = _ask(sym, stubs, 0, [0], lib, addr, a.pid, b.pid)
        admin_a = _ask(sym, stubs, uid_a, [sonde_gid, admin_gid], lib, addr, a.pid, b.pid)

        # A non-admin sees its own processes and nothing of B's, even
        # when it names B's pid.
        assert "t3-burn-a" in {c for c, _, _ in user_a["folded_a"]}, user_a["folded_a"][:20]
        assert user_a["folded_b"] == [] and user_a["top_b"] == 0, user_a
        assert user_a["top_a"] > 0 and user_a["pprof_a"] and not user_a["pprof_b"]
        status_pids = {pid for pid, _ in user_a["processes"]}
        assert a.pid in status_pids and b.pid not in status_pids, user_a["processes"]
        assert all(_owner(pid) in (uid_a, None) for pid in status_pids), user_a["processes"]
        # B's private library: answered as if unknown, no name.
        assert user_a["sym_unknown"] and user_a["sym_function"] == "", user_a
        assert user_a["scoped"] is True
        # The CLI as A: the same scope, and says so.
        out = _cli(uid_a, [sonde_gid, clients], "folded", "--pid", str(b.pid), "--symbolizer", sym.address)
        assert "t3-burn-b" not in out and "workload" not in out, out[:2000]
        out = _cli(uid_a, [sonde_gid, clients], "folded", "--pid", str(a.pid), "--symbolizer", sym.address)
        assert "t3-burn-a" in out, out[:2000]
        out = _cli(uid_a, [sonde_gid, clients], "status", "--symbolizer", sym.address)
        assert "processes of your own uid only" in out, out

        # Root sees everything, and gets the library's names.
        for view in (root, admin_a):
            assert view["scoped"] is False
            assert "t3-burn-b" in {c for c, _, _ in view["folded_b"]}, view["folded_b"][:20]
            assert view["top_a"] >= user_a["top_a"]
            assert view["top_b"] > 0 and view["pprof_a"] and view["pprof_b"]
            pids = {pid for pid, _ in view["processes"]}
            assert a.pid in pids and b.pid in pids, view["processes"]
            # An --admin-group member gets what root gets.
            assert view["sym_function"] == "t3_secret_function_b", (view["sym_error"], view["sym_unknown"])
    finally:
        for p in procs:
            p.kill()
            p.wait()
        if sensor:
            sensor.stop()
        sym.stop()


def _cli(uid, groups, *args):
    p = subprocess.run([str(SONDE), *args], preexec_fn=_demote(uid, groups), capture_output=True, text=True,
                       timeout=60, cwd="/")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p.stdout


def _owner(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except FileNotFoundError:
        return None


def test_upload_of_a_known_file_needs_its_bytes(tmp_path, users):
    """A non-admin that names the ID of a file the symbolizer analysed for
    someone else is not told it is known: Upload asks for the bytes, and
    only after they came (and matched) does Symbolize answer it."""
    uid_a, uid_b, _ = users
    sonde_gid = grp.getgrnam("sonde").gr_gid
    clients = grp.getgrnam("nogroup").gr_gid
    stubs = _stub_dir(tmp_path)
    lib, addr = _secret_library(tmp_path, uid_b)
    sym = Symbolizer(tmp_path, extra=["--client-group", "nogroup"])
    try:
        data = lib.read_bytes()
        # Root uploads it (an admin: nothing to prove) and it is analysed.
        fid = htlhash(data)
        up = sym.symbols.Upload(symbols_pb2.UploadRequest(file_id=fid, size=len(data), offset=0, data=data,
                                                          name="libt3secret.so"), timeout=60)
        assert up.complete
        script = r"""
import sys, json, grpc
sys.path.insert(0, sys.argv[2])
import symbols_pb2, symbols_pb2_grpc
s = symbols_pb2_grpc.SymbolsStub(grpc.insecure_channel(sys.argv[1]))
fid = bytes.fromhex(sys.argv[3]); addr = int(sys.argv[4]); size = int(sys.argv[5])
def ask():
    q = symbols_pb2.SymbolizeQuery(file_id=fid, addresses=[addr])
    r = s.Symbolize(symbols_pb2.SymbolizeRequest(queries=[q]), timeout=60).results[0]
    return [r.unknown_file, r.symbols[0].function]
out = {"before": ask()}
# Naming the ID without the bytes: not complete.
up = s.Upload(symbols_pb2.UploadRequest(file_id=fid, size=size, offset=0, data=b""), timeout=30)
out["empty_complete"] = up.complete
out["after_empty"] = ask()
if len(sys.argv) > 6:
    data = open(sys.argv[6], "rb").read()
    up = s.Upload(symbols_pb2.UploadRequest(file_id=fid, size=size, offset=0, data=data), timeout=60)
    out["upload_complete"] = up.complete
    out["after_upload"] = ask()
print(json.dumps(out))
"""
        copy = tmp_path / "copy-for-a"
        copy.write_bytes(data)
        os.chown(copy, uid_a, uid_a)
        copy.chmod(0o600)
        base = [sys.executable, "-c", script, sym.address, str(stubs), fid.hex(), str(addr), str(len(data))]
        p = subprocess.run(base + [str(copy)], preexec_fn=_demote(uid_a, [sonde_gid, clients]),
                           capture_output=True, text=True, timeout=120, cwd="/")
        assert p.returncode == 0, p.stderr[-3000:]
        out = json.loads(p.stdout)
        assert out["before"] == [True, ""], out
        assert out["empty_complete"] is False and out["after_empty"] == [True, ""], out
        assert out["upload_complete"] is True, out
        assert out["after_upload"] == [False, "t3_secret_function_b"], out
    finally:
        sym.stop()



# Spawned as the sensor's --pid target (root), so the Go probes attach only
# to its children: B's HTTP server and A's client of it.
GO_PARENT = r"""
import os, subprocess, sys
uid_a, uid_b, gohttp, n = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
def demote(uid):
    def fn():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return fn
sys.stdin.readline()
srv = subprocess.Popen([gohttp, "server"], stdout=subprocess.PIPE, text=True, preexec_fn=demote(uid_b), cwd="/")
port = srv.stdout.readline().strip()
cli = subprocess.Popen([gohttp, "client", "http://127.0.0.1:" + port, n], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, text=True, preexec_fn=demote(uid_a), cwd="/")
print(srv.pid, cli.pid, flush=True)
sys.stdin.readline()
out, _ = cli.communicate("go\n", timeout=120)
print("done", flush=True)
sys.stdin.readline()
srv.kill()
srv.wait()
"""


@pytest.fixture(scope="module")
def gohttp():
    from test_go_probes import build_gohttp
    yield from build_gohttp("sonde-t3-gohttp.")


def test_spans_of_each_user(tmp_path, users, gohttp):
    """Go probe spans belong to their process's owner: B's server spans
    are not A's to see; A sees its client's; root sees both."""
    uid_a, uid_b, _ = users
    sonde_gid = grp.getgrnam("sonde").gr_gid
    clients = grp.getgrnam("nogroup").gr_gid
    n = 20
    sym = Symbolizer(tmp_path, extra=["--client-group", "nogroup"])
    parent = subprocess.Popen([sys.executable, "-c", GO_PARENT, str(uid_a), str(uid_b), str(gohttp), str(n)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sensor = Sensor(tmp_path, sym.address, ["--pid", str(parent.pid), "--go-probes", "--unwind-rows", "0",
                                            "--flush-ms", "200"])
    children = []
    try:
        wait_for(lambda: sym.status().sensors_connected >= 1, 30, "the sensor to connect")
        parent.stdin.write("go\n")
        parent.stdin.flush()
        srv_pid, cli_pid = map(int, parent.stdout.readline().split())
        children = [srv_pid, cli_pid]

        def attached(pid, probe):
            if sensor.proc.poll() is not None:
                raise AssertionError(f"sensor exited: {sensor.logtext()}")
            return f"pid {pid}: {probe} attached" in sensor.log_path.read_text()
        wait_for(lambda: attached(srv_pid, "go_http_server"), 60, "the server's attach")
        wait_for(lambda: attached(cli_pid, "go_http_client"), 60, "the client's attach")
        parent.stdin.write("go\n")
        parent.stdin.flush()
        assert parent.stdout.readline().strip() == "done"

        def spans(uid, groups):
            out = _cli(uid, groups, "spans", "--json", "--limit", "10000", "--symbolizer", sym.address)
            return [json.loads(line) for line in out.splitlines()]
        every = wait_for(lambda: (lambda g: g if {s["kind"] for s in g} == {"client", "server"} and
                                  len(g) >= 2 * n else None)(spans(0, [0])), 30, "both users' spans", 0.5)
        assert {s["pid"] for s in every} == {srv_pid, cli_pid}
        mine = spans(uid_a, [sonde_gid, clients])
        assert mine, "A sees no span of its own client"
        assert {s["pid"] for s in mine} == {cli_pid} and {s["kind"] for s in mine} == {"client"}, mine[:5]
        assert len(mine) == len([s for s in every if s["pid"] == cli_pid])
    finally:
        for pid in children:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        parent.kill()
        parent.wait()
        sensor.stop()
        sym.stop()


def test_tls_readers_see_no_process_admins_all(tmp_path):
    """Certificates: a plain reader (any certificate the client CA signed)
    owns no process, so it sees no samples and no process, but still
    gets world-readable files; a --tls-admin-name certificate sees all."""
    import test_security as ts
    pki = tmp_path / "pki"
    pki.mkdir()
    ts._make_ca(pki, "sonde-ca")
    ts._make_cert(pki, "sonde-ca", "symbolizer", "IP:127.0.0.1,DNS:localhost", client=False)
    ts._make_cert(pki, "sonde-ca", "reader", "DNS:reader", client=True)
    ts._make_cert(pki, "sonde-ca", "ops", "DNS:ops", client=True)
    port = ts._free_port()
    sym = Symbolizer(tmp_path, extra=["--listen", f"tcp:127.0.0.1:{port}", "--tls-cert", str(pki / "symbolizer.crt"),
                                      "--tls-key", str(pki / "symbolizer.key"),
                                      "--tls-client-ca", str(pki / "sonde-ca.crt"), "--tls-admin-name", "ops"])
    work = subprocess.Popen([str(WORKLOAD), "600"], stdout=subprocess.DEVNULL)
    sensor = Sensor(tmp_path, sym.address, ["--pid", str(work.pid), "--frequency", "99"])
    try:
        q = symbols_pb2.ProfileQuery(pid=work.pid)
        wait_for(lambda: sym.symbols.Folded(q, timeout=30).total_samples > 0, 60, "samples")
        maps = pathlib.Path(f"/proc/{work.pid}/maps").read_text()
        libc = next(ln.split()[-1] for ln in maps.splitlines() if "libc.so" in ln)
        assert os.stat(libc).st_mode & 0o004
        libc_q = symbols_pb2.SymbolizeQuery(path=libc, addresses=[0x1000])

        def view(cert):
            stub = symbols_pb2_grpc.SymbolsStub(ts._tls_channel(pki, port, cert))
            st = stub.Status(symbols_pb2.StatusRequest(), timeout=30)
            fo = stub.Folded(q, timeout=30)
            top = stub.Top(q, timeout=30)
            r = stub.Symbolize(symbols_pb2.SymbolizeRequest(queries=[libc_q]), timeout=60).results[0]
            return st, fo, top, r
        st, fo, top, r = view("reader")
        assert fo.total_samples == 0 and not fo.stacks and top.total_samples == 0
        assert st.scoped and not st.processes and st.samples_received > 0
        assert not r.unknown_file, r.error
        st, fo, top, r = view("ops")
        assert not st.scoped and work.pid in {p.pid for p in st.processes}
        assert fo.total_samples > 0 and top.total_samples > 0
        assert not r.unknown_file, r.error
    finally:
        work.kill()
        work.wait()
        sensor.stop()
        sym.stop()


# ---- Review of issue 27's scoping: uids of other hosts, file reports,
# per-process Status. A sensor played by Python (local over the Unix
# socket as root, or another node over TCP with the sensor certificate).

# Runs as the client's user: Status's processes and, per file ID, whether
# Symbolize answers it.
VIEW = r"""
import json, sys, grpc
sys.path.insert(0, sys.argv[2])
import symbols_pb2, symbols_pb2_grpc
s = symbols_pb2_grpc.SymbolsStub(grpc.insecure_channel(sys.argv[1]))
st = s.Status(symbols_pb2.StatusRequest(), timeout=30)
out = {"processes": [[p.pid, p.comm, p.outcomes.complete + p.outcomes.truncated + p.outcomes.no_table +
                      p.outcomes.read_error + p.outcomes.no_user_stack] for p in st.processes],
       "folded": {}, "files": {}}
for pid in sys.argv[4].split(",") if sys.argv[4] else []:
    out["folded"][pid] = s.Folded(symbols_pb2.ProfileQuery(pid=int(pid)), timeout=30).total_samples
addr = int(sys.argv[3])
for fid in sys.argv[5:]:
    q = symbols_pb2.SymbolizeQuery(file_id=bytes.fromhex(fid), addresses=[addr])
    r = s.Symbolize(symbols_pb2.SymbolizeRequest(queries=[q]), timeout=60).results[0]
    out["files"][fid] = "" if r.unknown_file else (r.symbols[0].function if r.symbols else "?")
print(json.dumps(out))
"""


class _Node:
    """A sensor over the real Ingest protocol on a given channel."""

    def __init__(self, channel, hostname):
        import queue
        import threading
        self._q = queue.Queue()
        self.channel = channel
        self.welcome = threading.Event()
        self._resp = ingest_pb2_grpc.IngestStub(channel).Connect(iter(self._q.get, None))

        def serve():
            try:
                for m in self._resp:
                    if m.HasField("welcome"):
                        self.welcome.set()
            except Exception:
                pass
        self._t = threading.Thread(target=serve, daemon=True)
        self._t.start()
        self._q.put(ingest_pb2.SensorMessage(hello=ingest_pb2.Hello(
            protocol_version=1, sensor_version="t8", hostname=hostname, frequency_hz=19)))
        assert self.welcome.wait(15), "no Welcome"

    def process(self, pid, uid, comm, files=()):
        """files: [(file ID, size, mode, owner uid, owner gid)]."""
        maps = [ingest_pb2.Mapping(start=0x10000000 * (i + 1), end=0x10000000 * (i + 1) + ((size + 4095) & ~4095),
                                   file_offset=0, file_id=fid, path=f"/t8/{i}.so", file_size=size,
                                   executable=True, file_mode=mode, file_uid=fu, file_gid=fg)
                for i, (fid, size, mode, fu, fg) in enumerate(files)]
        self._q.put(ingest_pb2.SensorMessage(process=ingest_pb2.ProcessUpdate(
            pid=pid, uid=uid, comm=comm, exe_path="/t8/exe", mappings=maps)))

    def sample(self, stack_id, pid, count, comm, fid=None, addr=0):
        now = __import__("time").time_ns()
        user = [ingest_pb2.Frame(file_id=fid, address=addr)] if fid else []
        self._q.put(ingest_pb2.SensorMessage(stacks=ingest_pb2.StackBatch(
            stacks=[ingest_pb2.StackDef(id=stack_id, user=user, kernel=[] if fid else [0xffffffff81000000])],
            samples=[ingest_pb2.SampleCount(stack_id=stack_id, pid=pid, tid=pid, count=count,
                                            first_unix_ns=now, last_unix_ns=now, comm=comm)])))

    def close(self):
        self._resp.cancel()
        self._t.join(10)
        self.channel.close()


def _lib(tmp_path, tag):
    """A library with unique bytes (its own file ID), uploaded by root
    (an admin's upload grants no one else), and its function's address."""
    d = tmp_path / f"lib-{tag}"
    d.mkdir()
    (d / "l.c").write_text(SECRET_C + f'const char t8_tag[] = "{tag}";\n')
    lib = d / f"lib{tag}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-g", "-o", str(lib), str(d / "l.c")], check=True)
    nm = subprocess.run(["nm", str(lib)], check=True, capture_output=True, text=True).stdout
    addr = next(int(ln.split()[0], 16) for ln in nm.splitlines() if ln.endswith(" t3_secret_function_b"))
    return lib.read_bytes(), addr


def _upload(sym, data):
    fid = htlhash(data)
    up = sym.symbols.Upload(symbols_pb2.UploadRequest(file_id=fid, size=len(data), offset=0, data=data,
                                                      name="lib.so"), timeout=60)
    assert up.complete
    return fid


def _analysed(sym, fid, addr):
    """Waits until root gets fid's analysis (before any sensor names it)."""
    def known():
        q = symbols_pb2.SymbolizeQuery(file_id=fid, addresses=[addr])
        r = sym.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[q]), timeout=60).results[0]
        return r.symbols and r.symbols[0].function == "t3_secret_function_b"
    wait_for(known, 60, "the upload's analysis", interval=0.5)


def _view(sym, stubs, uid, addr, pids=(), fids=()):
    groups = [grp.getgrnam("sonde").gr_gid, grp.getgrnam("nogroup").gr_gid] if uid else [0]
    p = subprocess.run([sys.executable, "-c", VIEW, sym.address, str(stubs), str(addr),
                        ",".join(map(str, pids)), *[f.hex() for f in fids]],
                       preexec_fn=_demote(uid, groups), capture_output=True, text=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def _pids(view):
    return {pid for pid, _, _ in view["processes"]}


def test_remote_node_uids_name_nobody_here(tmp_path, users):
    """A uid another node's sensor reports (over TCP) is that node's: a
    local user of the same uid sees none of its processes, samples or
    files; root does. Control: the same report from the local sensor
    (Unix socket) is the user's."""
    import test_security as ts
    uid_a, _, _ = users
    pki = tmp_path / "pki"
    pki.mkdir()
    ts._make_ca(pki, "sonde-ca")
    ts._make_cert(pki, "sonde-ca", "symbolizer", "IP:127.0.0.1,DNS:localhost", client=False)
    ts._make_cert(pki, "sonde-ca", "sonde-sensor", "DNS:sonde-sensor", client=True)
    port = ts._free_port()
    stubs = _stub_dir(tmp_path)
    sym = Symbolizer(tmp_path, extra=["--client-group", "nogroup", "--listen", f"tcp:127.0.0.1:{port}",
                                      "--tls-cert", str(pki / "symbolizer.crt"),
                                      "--tls-key", str(pki / "symbolizer.key"),
                                      "--tls-client-ca", str(pki / "sonde-ca.crt")])
    nodes = []
    try:
        data, addr = _lib(tmp_path, "remote")
        fid = _upload(sym, data)
        local_data, _ = _lib(tmp_path, "local")
        local_fid = _upload(sym, local_data)
        _analysed(sym, fid, addr)
        _analysed(sym, local_fid, addr)
        remote = _Node(ts._tls_channel(pki, port, "sonde-sensor"), "node-b")
        nodes.append(remote)
        local = _Node(grpc_insecure(sym.address), "here")
        nodes.append(local)
        rpid, lpid = 3999001, 3999002
        # Node B: a process of uid A's number, mapping a world-readable file.
        remote.process(rpid, uid_a, "t8-remote", [(fid, len(data), 0o644, uid_a, uid_a)])
        remote.sample(1, rpid, 5, "t8-remote", fid, addr)
        local.process(lpid, uid_a, "t8-local", [(local_fid, len(local_data), 0o644, uid_a, uid_a)])
        local.sample(1, lpid, 5, "t8-local", local_fid, addr)

        def stored(pid):
            return sym.symbols.Folded(symbols_pb2.ProfileQuery(pid=pid), timeout=30).total_samples > 0
        wait_for(lambda: stored(rpid) and stored(lpid), 60, "both nodes' samples stored", interval=0.5)
        root = _view(sym, stubs, 0, addr, [rpid, lpid], [fid, local_fid])
        assert {rpid, lpid} <= _pids(root)
        assert root["files"][fid.hex()] == "t3_secret_function_b", (root, sym.logtext())
        a = _view(sym, stubs, uid_a, addr, [rpid, lpid], [fid, local_fid])
        # The control: the local sensor's report of A's process is A's.
        assert lpid in _pids(a) and a["folded"][str(lpid)] > 0, a
        assert a["files"][local_fid.hex()] == "t3_secret_function_b", a
        # Node B's uid names nobody here.
        assert rpid not in _pids(a), a
        assert a["folded"][str(rpid)] == 0, a
        assert a["files"][fid.hex()] == "", a
    finally:
        for n in nodes:
            n.close()
        sym.stop()


def grpc_insecure(address):
    import grpc
    return grpc.insecure_channel(address)


def test_most_restrictive_file_report_wins(tmp_path, users):
    """A later report of a file ID with looser bits (0600, then 0644) or
    another owner does not open it to a non-admin. Control: a file only
    ever reported 0644 is readable."""
    uid_a, uid_b, _ = users
    stubs = _stub_dir(tmp_path)
    sym = Symbolizer(tmp_path, extra=["--client-group", "nogroup"])
    node = None
    try:
        libs = {t: _lib(tmp_path, t) for t in ("loosened", "chowned", "open")}
        addr = libs["open"][1]
        assert len({a for _, a in libs.values()}) == 1
        fids = {t: _upload(sym, d) for t, (d, _) in libs.items()}
        for f in fids.values():
            _analysed(sym, f, addr)
        size = {t: len(d) for t, (d, _) in libs.items()}
        node = _Node(grpc_insecure(sym.address), "here")
        # B's private file, mapped by B; then reported 0644, mapped by A.
        node.process(3999011, uid_b, "t8-b", [(fids["loosened"], size["loosened"], 0o600, uid_b, uid_b)])
        node.process(3999012, uid_a, "t8-a", [(fids["loosened"], size["loosened"], 0o644, uid_b, uid_b)])
        # B's private file, then reported as A's own (0600), mapped by A.
        node.process(3999013, uid_b, "t8-b", [(fids["chowned"], size["chowned"], 0o600, uid_b, uid_b)])
        node.process(3999014, uid_a, "t8-a", [(fids["chowned"], size["chowned"], 0o600, uid_a, uid_a)])
        # World-readable, root's, mapped by root only.
        node.process(3999015, 0, "t8-root", [(fids["open"], size["open"], 0o644, 0, 0)])
        # The control, sent last on the one stream: when A gets it, all came.
        a = wait_for(lambda: (lambda v: v if v["files"][fids["open"].hex()] == "t3_secret_function_b"
                              else None)(_view(sym, stubs, uid_a, addr, (), [fids[t] for t in
                                                                          ("loosened", "chowned", "open")])),
                     30, "A to get the world-readable file", interval=0.5)
        assert a["files"][fids["loosened"].hex()] == "", a
        assert a["files"][fids["chowned"].hex()] == "", a
        root = _view(sym, stubs, 0, addr, (), [fids["loosened"], fids["chowned"]])
        assert set(root["files"].values()) == {"t3_secret_function_b"}, root
    finally:
        if node:
            node.close()
        sym.stop()


def test_status_processes_follow_their_process_update(tmp_path, users):
    """Status's per-process list: a process whose first sample came before
    its ProcessUpdate becomes its owner's once the update comes; a pid that
    changes owner starts again (the new owner does not get the old counts,
    the old owner no longer sees it); the same pid from another sensor is
    another process."""
    uid_a, uid_b, _ = users
    stubs = _stub_dir(tmp_path)
    sym = Symbolizer(tmp_path, extra=["--client-group", "nogroup"])
    nodes = []
    pid = 3999021
    try:
        one = _Node(grpc_insecure(sym.address), "one")
        nodes.append(one)
        one.sample(1, pid, 7, "t8-early")
        wait_for(lambda: sym.status().samples_received >= 7, 30, "the early sample")
        one.process(pid, uid_a, "t8-late")
        one.sample(2, pid, 2, "t8-late")
        wait_for(lambda: sym.status().samples_received >= 9, 30, "the later sample")
        a = _view(sym, stubs, uid_a, 0)
        # Counts from before the update were root's (a pid nobody named
        # may have been another process): A's start with its update.
        assert [pid, "t8-late", 2] in a["processes"], a
        # The pid is now B's (reused): A sees it no more, B's counts start at 0.
        one.process(pid, uid_b, "t8-other")
        one.sample(3, pid, 1, "t8-other")
        wait_for(lambda: sym.status().samples_received >= 10, 30, "B's sample")
        assert pid not in _pids(_view(sym, stubs, uid_a, 0))
        b = _view(sym, stubs, uid_b, 0)
        assert [pid, "t8-other", 1] in b["processes"], b
        # Another sensor's process of the same pid is another process.
        two = _Node(grpc_insecure(sym.address), "two")
        nodes.append(two)
        two.process(pid, uid_a, "t8-second")
        two.sample(1, pid, 3, "t8-second")
        wait_for(lambda: sym.status().samples_received >= 13, 30, "the second sensor's sample")
        a = _view(sym, stubs, uid_a, 0)
        assert [p for p in a["processes"] if p[0] == pid] == [[pid, "t8-second", 3]], a
        root = _view(sym, stubs, 0, 0)
        assert sorted(p[1] for p in root["processes"] if p[0] == pid) == ["t8-other", "t8-second"], root
    finally:
        for n in nodes:
            n.close()
        sym.stop()
