"""Issue 27, the smaller holes: target text that is not UTF-8 (hole 7),
the store private to the service user (hole 5), Landlock failing closed
and socket and cache set-up that follows no symlink (hole 8; the
deployment files are checked in test_security.py). Real services, real
processes, Debian's python3-grpcio."""
import grpc
import os
import pathlib
import pwd
import shutil
import subprocess
import sys
import time

import pytest

from conftest import (BUILD, SYMBOLIZER, Sensor, Symbolizer, sensor_may_connect, symbols_pb2, symbols_pb2_grpc,
                      wait_for)

# A process whose name is not UTF-8: prctl(PR_SET_NAME) takes any bytes,
# and the kernel shows them as they are in comm and /proc/PID/status.
BAD_NAME = b"\xff\xfesonde\xc0\xafx\xed\xa0\x80"
BAD_ESCAPED = "\\xff\\xfesonde\\xc0\\xafx\\xed\\xa0\\x80"
BURNER = r"""
import ctypes, sys
libc = ctypes.CDLL(None)
if libc.prctl(15, ctypes.c_char_p(%r), 0, 0, 0) != 0:
    sys.exit("prctl failed")
print("ready", flush=True)
x = 0
while True:
    x = (x * 31 + 7) %% 1000003
""" % BAD_NAME


def test_invalid_utf8_thread_name(tmp_path):
    """A thread named with invalid UTF-8 bytes burns CPU under the real
    sensor and symbolizer: python3-grpcio's Folded and Top still decode
    (before the fix Folded failed with "Exception deserializing
    response"), and the name shows escaped as \\xNN."""
    burner = subprocess.Popen([sys.executable, "-c", BURNER], stdout=subprocess.PIPE, text=True)
    sym = sensor = None
    try:
        assert burner.stdout.readline().strip() == "ready"
        assert pathlib.Path(f"/proc/{burner.pid}/comm").read_bytes().rstrip(b"\n") == BAD_NAME[:15]
        sym = Symbolizer(tmp_path)
        sensor = Sensor(tmp_path, sym.address, ["--pid", str(burner.pid), "--frequency", "99"])
        q = symbols_pb2.ProfileQuery(pid=burner.pid)

        def have_samples():
            return sym.symbols.Folded(q, timeout=10).total_samples >= 20
        wait_for(have_samples, 60, "samples of the badly named process")
        folded = sym.symbols.Folded(q, timeout=10)
        comms = {s.comm for s in folded.stacks} | {s.frames[0] for s in folded.stacks if s.frames}
        want = BAD_ESCAPED[:len("\\xff\\xfesonde\\xc0\\xafx\\xed\\xa0")]  # comm keeps 15 bytes
        assert any(c.startswith(want) for c in comms), comms
        top = sym.symbols.Top(q, timeout=10)
        assert top.total_samples > 0 and top.entries
        # The whole-host views decode too.
        sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
        sym.symbols.Top(symbols_pb2.ProfileQuery(), timeout=10)
        sym.status()
        # The sensor sent the name escaped, and the symbolizer did not
        # end the stream over it.
        assert sensor.proc.poll() is None, sensor.logtext()
    finally:
        burner.kill()
        burner.wait()
        if sensor:
            sensor.stop()
        if sym:
            sym.stop()


CLIENT_USER = "sondeclient27"


@pytest.fixture
def client_user():
    """A local user in the symbolizer's socket group (the group
    deploy/systemd/README.md tells clients to join), removed afterwards."""
    subprocess.run(["userdel", CLIENT_USER], capture_output=True)
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "-G", "sonde", CLIENT_USER],
                   check=True)
    try:
        yield pwd.getpwnam(CLIENT_USER)
    finally:
        subprocess.run(["userdel", CLIENT_USER], capture_output=True)


def run_as(pw, code, tmp):
    """Runs python code as pw with its groups, with the generated stubs
    copied where pw can read them; returns the CompletedProcess."""
    stubs = tmp / "stubs"
    if not stubs.exists():
        stubs.mkdir(mode=0o755)
        for f in pathlib.Path(symbols_pb2.__file__).parent.glob("*_pb2*.py"):
            shutil.copy(f, stubs / f.name)
        for f in stubs.iterdir():
            f.chmod(0o644)
    return subprocess.run([sys.executable, "-c", code], user=pw.pw_uid, group=pw.pw_gid,
                          extra_groups=os.getgrouplist(pw.pw_name, pw.pw_gid), capture_output=True,
                          text=True, timeout=60, cwd="/", env={"PYTHONPATH": str(stubs)})


def start_symbolizer(tmp, sock, cache, *extra, umask=None, wrapper=()):
    """A sonde-symbolizer as the test launches it (optionally under a
    wrapper and a umask); returns (Popen, log path)."""
    log = tmp / f"symbolizer.{time.monotonic_ns()}.log"
    old = os.umask(umask) if umask is not None else None
    try:
        with open(log, "w") as f:
            p = subprocess.Popen([*wrapper, str(SYMBOLIZER), "--listen", f"unix:{sock}", "--cache", str(cache),
                                  "--user", "sonde", *extra], stdout=f, stderr=subprocess.STDOUT)
    finally:
        if old is not None:
            os.umask(old)
    return p, log


def wait_answers(p, log, sock):
    channel = grpc.insecure_channel(f"unix:{sock}")
    stub = symbols_pb2_grpc.SymbolsStub(channel)

    def up():
        assert p.poll() is None, log.read_text()
        try:
            stub.Status(symbols_pb2.StatusRequest(), timeout=1)
            return True
        except grpc.RpcError:
            return False
    try:
        wait_for(up, 15, "the symbolizer to answer")
    except BaseException:
        channel.close()
        raise
    return channel, stub


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_store_private_to_service_user(tmp_path, client_user):
    """The cache and the profile store are the service user's alone: with
    a umask of 000, in a directory laid out as the systemd unit lays it
    out (a root-owned CacheDirectory, 0711, and the symbolizer's own
    subdirectory), and with an older store's 0750 directory and 0644 file
    already there, a member of the socket group cannot open cache.db or
    the profile database (EACCES), while the Symbols API still answers it.
    Before the fix the directories were 0750 and the files 0644: the
    group member read every profile from disk."""
    sonde = pwd.getpwnam("sonde")
    cache_root = tmp_path / "var-cache-sonde"      # CacheDirectory=sonde: root's
    cache_root.mkdir()
    cache_root.chmod(0o711)
    cache = cache_root / "symbolizer" / "cache.db"
    store = tmp_path / "store"                     # an older store
    store.mkdir()
    (store / "profiles.db").write_bytes(b"")
    os.chown(store / "profiles.db", sonde.pw_uid, sonde.pw_gid)
    (store / "profiles.db").chmod(0o644)
    os.chown(store, sonde.pw_uid, sonde.pw_gid)
    store.chmod(0o750)
    sock = tmp_path / "s.sock"
    # The capabilities the systemd unit leaves it (CapabilityBoundingSet=).
    unit_caps = ["setpriv", "--bounding-set=-all,+chown,+fowner,+setuid,+setgid,+setpcap", "--inh-caps=-all"]
    for start in range(2):  # creating the directory, then finding it
        p, log = start_symbolizer(tmp_path, sock, cache, "--client-group", "sonde",
                                  "--profiles", str(store / "profiles.db"), umask=0, wrapper=unit_caps)
        try:
            channel, stub = wait_answers(p, log, sock)
            stub.Folded(symbols_pb2.ProfileQuery(), timeout=10)  # the store flushes before a query
            channel.close()
        finally:
            if start == 0:
                stop(p)
    try:
        code = f"""
import errno
for path in ({str(cache)!r}, {str(store / 'profiles.db')!r}):
    try:
        open(path, 'rb').read(16)
        print('READ', path)
    except PermissionError as e:
        print('EACCES' if e.errno == errno.EACCES else e, path)
import grpc, symbols_pb2, symbols_pb2_grpc
ch = grpc.insecure_channel('unix:{sock}')
r = symbols_pb2_grpc.SymbolsStub(ch).Status(symbols_pb2.StatusRequest(), timeout=10)
print('status ok')
"""
        r = run_as(client_user, code, tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.count("EACCES") == 2 and "READ" not in r.stdout, r.stdout
        assert "status ok" in r.stdout, r.stdout
        for d in (cache.parent, store):
            st = d.stat()
            assert st.st_uid == sonde.pw_uid and st.st_mode & 0o777 == 0o700, (d, oct(st.st_mode))
        files = list(cache.parent.iterdir()) + list(store.iterdir())
        assert {"cache.db", "profiles.db"} <= {f.name for f in files}, files
        for f in files:
            st = f.lstat()
            assert st.st_uid == sonde.pw_uid and st.st_mode & 0o077 == 0, (f, oct(st.st_mode))
    finally:
        stop(p)


NO_LANDLOCK_C = r"""
/* Runs argv[1..] with landlock_create_ruleset answering ENOSYS, as on a
 * kernel without Landlock. */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	scmp_filter_ctx c = seccomp_init(SCMP_ACT_ALLOW);

	if (argc < 2 || !c ||
	    seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(landlock_create_ruleset), 0) < 0 ||
	    seccomp_load(c) < 0) {
		fprintf(stderr, "no-landlock: cannot install the filter\n");
		return 126;
	}
	execv(argv[1], argv + 1);
	perror("no-landlock: execv");
	return 127;
}
"""


@pytest.fixture
def no_landlock(tmp_path):
    src = tmp_path / "no-landlock.c"
    src.write_text(NO_LANDLOCK_C)
    exe = tmp_path / "no-landlock"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(src), "-lseccomp"], check=True)
    # Landlock is really gone under the wrapper.
    probe = subprocess.run([str(exe), str(SYMBOLIZER), "--listen", f"unix:{tmp_path}/p.sock", "--cache",
                            str(tmp_path / "p" / "c.db"), "--print-policy"], capture_output=True, text=True)
    assert "landlock: unavailable (Function not implemented)" in probe.stdout, probe.stdout + probe.stderr
    return exe


def test_landlock_missing_fails_closed(tmp_path, no_landlock):
    """Without Landlock the symbolizer refuses to start (before the fix
    it only warned and ran), says why, and starts with
    --allow-unsandboxed. `sonde record` passes no such flag: it fails
    closed too."""
    sock = tmp_path / "s.sock"
    cache = tmp_path / "cache" / "cache.db"
    p, log = start_symbolizer(tmp_path, sock, cache, wrapper=[str(no_landlock)])
    try:
        rc = p.wait(30)
    finally:
        stop(p)
    text = log.read_text()
    assert rc != 0, text
    assert "Landlock is not available" in text and "--allow-unsandboxed" in text, text
    assert not sock.exists() or not wait_answers_quiet(sock)

    p, log = start_symbolizer(tmp_path, sock, cache, "--allow-unsandboxed", wrapper=[str(no_landlock)])
    try:
        channel, stub = wait_answers(p, log, sock)
        stub.Status(symbols_pb2.StatusRequest(), timeout=10)
        channel.close()
        assert "--allow-unsandboxed: files are guarded by the uid and seccomp only" in log.read_text()
    finally:
        stop(p)
    # The old opt-in is still accepted (a no-op now) and refuses too.
    p, log = start_symbolizer(tmp_path, sock, cache, "--require-sandbox", wrapper=[str(no_landlock)])
    try:
        assert p.wait(30) != 0, log.read_text()
    finally:
        stop(p)
    # sonde record under the same wrapper: the symbolizer it starts
    # inherits the filter and refuses; record fails.
    r = subprocess.run([str(no_landlock), str(BUILD / "cli" / "sonde"), "record", "-o", str(tmp_path / "out.folded"),
                        "--", "true"], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, r.stdout + r.stderr


def wait_answers_quiet(sock):
    try:
        with grpc.insecure_channel(f"unix:{sock}") as ch:
            symbols_pb2_grpc.SymbolsStub(ch).Status(symbols_pb2.StatusRequest(), timeout=1)
            return True
    except grpc.RpcError:
        return False


def test_cache_setup_follows_no_symlink(tmp_path):
    """Root hands the database directory and files to the service user
    without following symlinks. Planted in the user's own cache directory
    (what a compromised symbolizer could do before a restart), cache.db-wal
    and cache.db-shm are symlinks to root-owned 0600 files: the symbolizer
    refuses to start and the files keep their owner and mode (before the
    fix root chown'ed them to sonde). A cache directory that is itself a
    symlink, or that belongs to another user, is refused."""
    sonde = pwd.getpwnam("sonde")
    victims = []
    for name in ("victim-wal", "victim-shm"):
        v = tmp_path / name
        v.write_text("root's secret\n")
        v.chmod(0o600)
        victims.append(v)
    d = tmp_path / "cache"
    d.mkdir()
    os.chown(d, sonde.pw_uid, sonde.pw_gid)
    d.chmod(0o700)
    (d / "cache.db-wal").symlink_to(victims[0])
    (d / "cache.db-shm").symlink_to(victims[1])
    sock = tmp_path / "s.sock"
    p, log = start_symbolizer(tmp_path, sock, d / "cache.db")
    try:
        rc = p.wait(30)
    finally:
        stop(p)
    for v in victims:
        st = v.stat()
        assert st.st_uid == 0 and st.st_gid == 0 and st.st_mode & 0o7777 == 0o600, (v, st)
    assert rc != 0 and "a symlink: refusing" in log.read_text(), log.read_text()

    # The directory itself a symlink (to a directory of the user's).
    real = tmp_path / "real"
    real.mkdir()
    os.chown(real, sonde.pw_uid, sonde.pw_gid)
    (tmp_path / "link").symlink_to(real)
    p, log = start_symbolizer(tmp_path, sock, tmp_path / "link" / "cache.db")
    try:
        rc = p.wait(30)
    finally:
        stop(p)
    assert rc != 0 and "symlink is refused" in log.read_text(), log.read_text()
    # A directory of another user (nobody).
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 65534, 65534)
    p, log = start_symbolizer(tmp_path, sock, other / "cache.db")
    try:
        rc = p.wait(30)
    finally:
        stop(p)
    assert rc != 0 and "neither root nor sonde" in log.read_text(), log.read_text()


class RawSensor:
    """The Ingest stream with messages as bytes: a compromised or old
    sensor can put any bytes in a protobuf string, which grpcio would not
    serialize from Python. Placeholders of the same length are swapped
    for the bytes after serializing."""

    def __init__(self, address):
        import queue
        import threading
        from conftest import ingest_pb2
        self.pb = ingest_pb2
        self.channel = grpc.insecure_channel(address)
        self.q = queue.Queue()
        call = self.channel.stream_stream("/sonde.v1.Ingest/Connect", request_serializer=lambda b: b,
                                          response_deserializer=ingest_pb2.SymbolizerMessage.FromString)
        self.responses = call(iter(self.q.get, None))
        self.welcome = threading.Event()
        self.error = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for m in self.responses:
                if m.HasField("welcome"):
                    self.welcome.set()
        except grpc.RpcError as e:
            self.error = e

    def send(self, raw_swaps=(), **kind):
        data = self.pb.SensorMessage(**kind).SerializeToString()
        for placeholder, raw in raw_swaps:
            assert len(placeholder) == len(raw) and data.count(placeholder) == 1
            data = data.replace(placeholder, raw)
        self.q.put(data)

    def close(self):
        self.q.put(None)
        self.responses.cancel()
        self.channel.close()


def test_symbolizer_escapes_what_a_sensor_sends(symbolizer):
    """The symbolizer does not trust the sensor to have escaped names: a
    sensor that sends a process name, exe path, OTEL_SERVICE_NAME and a
    thread name with invalid UTF-8 (bytes swapped in after serializing)
    does not break python3-grpcio's Folded, Top, Pprof or Status (before
    the fix Folded failed with "Exception deserializing response")."""
    pb = None
    s = RawSensor(symbolizer.address)
    try:
        pb = s.pb
        s.send(hello=pb.Hello(protocol_version=1, sensor_version="raw", hostname="raw", frequency_hz=19))
        assert s.welcome.wait(10), f"no Welcome: {s.error}"
        pid = 4242
        s.send(process=pb.ProcessUpdate(pid=pid, comm="QQQQQQ", exe_path="/opt/EEEEEE/app",
                                        otel_service_name="SSSSSS"),
               raw_swaps=[(b"QQQQQQ", b"\xff\xfeab\xc0\xaf"), (b"EEEEEE", b"\xe2\x82x\xf8yz"),
                          (b"SSSSSS", b"svc\xed\xa0\x80")])
        now = time.time_ns()
        s.send(stacks=pb.StackBatch(
            stacks=[pb.StackDef(id=1, user=[pb.Frame(address=0x1234)])],
            samples=[pb.SampleCount(stack_id=1, pid=pid, tid=pid + 1, count=7, first_unix_ns=now,
                                    last_unix_ns=now, comm="RRRRRR")]),
            raw_swaps=[(b"RRRRRR", b"t\xf4\x90\x80\x80h")])
        q = symbols_pb2.ProfileQuery(pid=pid)
        wait_for(lambda: symbolizer.symbols.Folded(q, timeout=10).total_samples >= 7, 20,
                 "the raw sensor's samples")
        folded = symbolizer.symbols.Folded(q, timeout=10)
        names = {st.comm for st in folded.stacks} | {st.frames[0] for st in folded.stacks}
        assert any("\\xff\\xfeab\\xc0\\xaf" in n or "t\\xf4\\x90\\x80\\x80h" in n for n in names), names
        symbolizer.symbols.Top(q, timeout=10)
        symbolizer.symbols.Pprof(q, timeout=10)
        symbolizer.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
        symbolizer.status()
        assert s.error is None, s.error
    finally:
        s.close()


def test_sensor_sends_valid_utf8(tmp_path):
    """The sensor escapes before packing: a minimal Ingest server keeps
    every message the real sensor sends about the badly named burner as
    bytes, and python-protobuf (which rejects invalid UTF-8 in a string
    field) parses them all; the ProcessUpdate and SampleCount carry the
    escaped name."""
    from concurrent import futures
    from conftest import ingest_pb2
    raw_msgs = []

    def connect(request_iterator, context):
        for raw in request_iterator:
            raw_msgs.append(raw)
            if len(raw_msgs) == 1:
                yield ingest_pb2.SymbolizerMessage(welcome=ingest_pb2.Welcome(
                    protocol_version=1, max_message_bytes=16 << 20, max_read_bytes=4 << 20))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("sonde.v1.Ingest", {
        "Connect": grpc.stream_stream_rpc_method_handler(
            connect, request_deserializer=lambda b: b,
            response_serializer=ingest_pb2.SymbolizerMessage.SerializeToString)}),))
    sock = tmp_path / "ingest.sock"
    server.add_insecure_port(f"unix:{sock}")
    server.start()
    sensor_may_connect(sock)
    burner = subprocess.Popen([sys.executable, "-c", BURNER], stdout=subprocess.PIPE, text=True)
    sensor = None
    try:
        assert burner.stdout.readline().strip() == "ready"
        sensor = Sensor(tmp_path, f"unix:{sock}", ["--pid", str(burner.pid), "--frequency", "99"])

        def seen():
            comms = set()
            for raw in list(raw_msgs):
                m = ingest_pb2.SensorMessage.FromString(raw)  # DecodeError on invalid UTF-8
                if m.HasField("process") and m.process.pid == burner.pid:
                    comms.add(("process", m.process.comm))
                if m.HasField("stacks"):
                    comms |= {("sample", s.comm) for s in m.stacks.samples if s.pid == burner.pid}
            return comms if {k for k, _ in comms} == {"process", "sample"} else None
        comms = wait_for(seen, 60, "a ProcessUpdate and samples of the burner")
        want = BAD_ESCAPED[:len("\\xff\\xfesonde\\xc0\\xafx\\xed\\xa0")]
        assert all(c.startswith(want) for _, c in comms), comms
    finally:
        burner.kill()
        burner.wait()
        if sensor:
            sensor.stop()
        server.stop(0)


SWAP_SHIM_C = r"""
/* LD_PRELOAD: the first time the symbolizer names SWAP_PATH in a
 * chown/chmod/fstatat/fchownat/open call, move the socket there aside and put a
 * symlink to SWAP_VICTIM in its place: the race a user who can write the
 * socket's directory would run, made deterministic. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void swap(const char *path)
{
	static int done;
	const char *target = getenv("SWAP_PATH"), *victim = getenv("SWAP_VICTIM");
	char aside[4200];

	if (done || !target || !victim || !path || strcmp(path, target))
		return;
	done = 1;
	snprintf(aside, sizeof(aside), "%s.aside", path);
	if (rename(path, aside) == 0 && symlink(victim, path) == 0)
		fprintf(stderr, "swap-shim: %s is now a symlink to %s\n", path, victim);
}

#define NEXT(name, type) ((type)dlsym(RTLD_NEXT, name))
int chown(const char *p, uid_t u, gid_t g)
{ swap(p); return NEXT("chown", int (*)(const char *, uid_t, gid_t))(p, u, g); }
int chmod(const char *p, mode_t m)
{ swap(p); return NEXT("chmod", int (*)(const char *, mode_t))(p, m); }
int fchownat(int d, const char *p, uid_t u, gid_t g, int f)
{ swap(p); return NEXT("fchownat", int (*)(int, const char *, uid_t, gid_t, int))(d, p, u, g, f); }
int fstatat(int d, const char *p, struct stat *st, int f)
{ swap(p); return NEXT("fstatat", int (*)(int, const char *, struct stat *, int))(d, p, st, f); }
int fstatat64(int d, const char *p, struct stat64 *st, int f)
{ swap(p); return NEXT("fstatat64", int (*)(int, const char *, struct stat64 *, int))(d, p, st, f); }
#define OPEN(name) \
int name(const char *p, int f, ...) \
{ \
	va_list ap; \
	mode_t m; \
	va_start(ap, f); \
	m = va_arg(ap, mode_t); /* read always: harmless without O_CREAT */ \
	va_end(ap); \
	swap(p); \
	return NEXT(#name, int (*)(const char *, int, ...))(p, f, m); \
}
OPEN(open)
OPEN(open64)
"""


def test_socket_setup_follows_no_symlink(tmp_path):
    """Root gives the socket its group without following a symlink: when
    the socket is swapped for a symlink to a root-owned 0600 file just
    before that step (an LD_PRELOAD shim runs the race deterministically),
    the file keeps its owner, group and mode and the symbolizer refuses to
    start. Before the fix root's chown() and chmod() followed the link:
    the file became group sonde, mode 0660."""
    src = tmp_path / "swap.c"
    src.write_text(SWAP_SHIM_C)
    shim = tmp_path / "swap.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(shim), str(src), "-ldl"], check=True)
    victim = tmp_path / "victim"
    victim.write_text("root's secret\n")
    victim.chmod(0o600)
    sock = tmp_path / "s.sock"
    log = tmp_path / "swap.log"
    env = dict(os.environ, LD_PRELOAD=str(shim), SWAP_PATH=str(sock), SWAP_VICTIM=str(victim))
    with open(log, "w") as f:
        p = subprocess.Popen([str(SYMBOLIZER), "--listen", f"unix:{sock}", "--cache", str(tmp_path / "c" / "c.db"),
                              "--user", "sonde"], stdout=f, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: "is now a symlink" in log.read_text(), 15, "the shim to swap the socket")
        wait_for(lambda: p.poll() is not None or "listening on" in log.read_text(), 15,
                 "the symbolizer to stop or listen")
        rc = p.poll()
    finally:
        stop(p)
    st = victim.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (0, 0, 0o600), (oct(st.st_mode), st.st_gid)
    assert rc not in (None, 0) and "no longer the socket bound there" in log.read_text(), log.read_text()
