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
