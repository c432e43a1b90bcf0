"""The root sensor's side of the trust boundary (issue 27, holes 1-3),
each checked by performing the attack or the forbidden call for real:
an unprivileged user cannot make the sensor open a file of its choosing
(map_files only, regular files only, the maps line's dev/inode), the
first /proc scan runs only after the privilege drop, and the running
sensor's own seccomp filter refuses what its mode does not need."""
import grp
import os
import pathlib
import pwd
import re
import shutil
import socket
import sqlite3
import subprocess
import time

import pytest

from conftest import SENSOR, Symbolizer, htlhash, symbols_pb2, wait_for

NOBODY = 65534



# The attacker: maps /dev/zero (a character device, so the map_files open
# is not a regular file) private and executable, writes a spin loop at
# OFFSET in it, chroots into DIR (where dev/zero is a symlink the test
# planted) and spins in the mapping. Run as nobody under `unshare -Ur`.
ATTACKER_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned long off = strtoul(argv[2], NULL, 0);
	size_t len = (off / 4096 + 2) * 4096;
	int fd = open("/dev/zero", O_RDONLY);
	unsigned char *m;

	if (fd < 0) { perror("open"); return 1; }
	m = mmap(NULL, len, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) { perror("mmap"); return 1; }
	m[off] = 0xeb; /* jmp . */
	m[off + 1] = 0xfe;
	if (chroot(argv[1]) < 0 || chdir("/") < 0) { perror("chroot"); return 1; }
	printf("ready %lx\n", (unsigned long)m);
	fflush(stdout);
	((void (*)(void))(m + off))();
	return 0;
}
"""

SECRET_C = r"""
int sonde_secret_xyzzy_function(int x)
{
	int s = 0;
	for (int i = 0; i < x; i++)
		s += i * x;
	return s;
}
int sonde_secret_plugh_helper(int x) { return x + 42; }
"""


def _compile(src, out, *flags):
    c = out.with_suffix(".c")
    c.write_text(src)
    subprocess.run(["gcc", "-O1", "-o", str(out), str(c), *flags], check=True)


def _file_offset(lib, name):
    """The file offset of function name in lib (st_value through its
    section's address and offset)."""
    syms = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True, check=True).stdout
    addr = next(int(ln.split()[0], 16) for ln in syms.splitlines() if ln.endswith(" " + name))
    for ln in subprocess.run(["readelf", "-SW", str(lib)], capture_output=True, text=True,
                             check=True).stdout.splitlines():
        m = re.search(r"\]\s+\.text\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", ln)
        if m:
            sh_addr, sh_off, sh_size = (int(v, 16) for v in m.groups())
            assert sh_addr <= addr < sh_addr + sh_size
            return addr - sh_addr + sh_off
    raise AssertionError("no .text")


@pytest.fixture
def secrets(tmp_path):
    """A root-only library (0600 in a 0700 directory) and the attacker's
    binary and chroot directories, one per target."""
    vault = pathlib.Path("/root") / f"sonde-vault.{os.getpid()}.{time.monotonic_ns()}"
    vault.mkdir(mode=0o700)
    try:
        lib = vault / "libsecret.so"
        _compile(SECRET_C, lib, "-shared", "-fPIC")
        lib.chmod(0o600)
        attacker = tmp_path / "attacker"
        _compile(ATTACKER_C, attacker)
        attacker.chmod(0o755)
        yield {"lib": lib, "attacker": attacker,
               "lib_offset": _file_offset(lib, "sonde_secret_xyzzy_function")}
    finally:
        shutil.rmtree(vault, ignore_errors=True)


def _start_attacker(tmp_path, attacker, target, offset):
    """As nobody, in its own user namespace: a chroot directory whose
    dev/zero is a symlink to target, and the attacker inside it."""
    root = tmp_path / f"chroot-{target.name}"
    root.mkdir()
    (root / "dev").mkdir()
    os.symlink(str(target), root / "dev" / "zero")
    for p in (root, root / "dev"):
        os.lchown(p, NOBODY, NOBODY)
    os.lchown(root / "dev" / "zero", NOBODY, NOBODY)

    def demote():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    p = subprocess.Popen(["unshare", "-Ur", str(attacker), str(root), hex(offset)], preexec_fn=demote,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
    line = p.stdout.readline()
    assert line.startswith("ready"), (line, p.stderr.read() if p.poll() is not None else "")
    return p


def test_chroot_symlink_attack_reaches_no_secret(tmp_path, secrets):
    """Hole 1: a process maps /dev/zero executable and chroots where
    /dev/zero is a symlink to /etc/shadow (or to a root-only library).
    The sensor must not hash, register or serve either file: map_files
    is a character device, and nothing falls back to the path text."""
    shadow_id = htlhash(pathlib.Path("/etc/shadow").read_bytes())
    lib_id = htlhash(secrets["lib"].read_bytes())
    sym = Symbolizer(tmp_path)
    attackers, sensor = [], None
    try:
        attackers.append(_start_attacker(tmp_path, secrets["attacker"], pathlib.Path("/etc/shadow"), 0))
        attackers.append(_start_attacker(tmp_path, secrets["attacker"], secrets["lib"],
                                         secrets["lib_offset"]))
        args = ["--frequency", "99", "--flush-ms", "500"]
        for a in attackers:
            args += ["--pid", str(a.pid)]
        sensor = subprocess.Popen([str(SENSOR), "--symbolizer", sym.address, *args],
                                  stdout=open(tmp_path / "sensor.log", "w"), stderr=subprocess.STDOUT)
        # The spinning attackers' samples are stored: the sensor scanned
        # them, sent their mappings and flushed more than once.
        wait_for(lambda: sym.status().samples_stored >= 100, 30, "samples of the attackers")
        time.sleep(2)  # any analysis of a registered file is done by now
        st = sym.status()
        folded = sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
        top = sym.symbols.Top(symbols_pb2.ProfileQuery(), timeout=10)
        res = sym.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[
            symbols_pb2.SymbolizeQuery(file_id=lib_id, addresses=[secrets["lib_offset"]])]),
            timeout=10)
    finally:
        for a in attackers:
            a.kill()
            a.wait()
        if sensor:
            sensor.terminate()
            sensor.wait(30)
        sym.stop()
    log = (tmp_path / "sensor.log").read_text()
    assert sensor.returncode == 0, log
    db = sqlite3.connect(f"file:{sym.cache}?mode=ro", uri=True)
    ids = {bytes(r[0]) for r in db.execute("SELECT file_id FROM files")}
    db.close()
    assert ids, "the symbolizer analysed nothing at all"
    text = str(folded) + str(top) + str(res) + str(st)
    problems = []
    if shadow_id in ids:
        problems.append("/etc/shadow was registered and served")
    if lib_id in ids:
        problems.append("the root-only library was registered and served")
    if "sonde_secret" in text:
        problems.append("the root-only library's names reached a client: " +
                        ", ".join(sorted(set(re.findall(r"sonde_secret\w*", text)))))
    assert not problems, problems


def test_first_scan_runs_after_the_privilege_drop(tmp_path, start_workload):
    """Hole 2: no file of a target's /proc is opened before the sensor
    has dropped its capabilities and loaded its seccomp filter. strace -f
    records the sensor's opens and its filter load in one ordered trace."""
    work = start_workload(20)
    sym = Symbolizer(tmp_path)
    trace = tmp_path / "strace.out"
    p = None
    try:
        p = subprocess.Popen(["strace", "-f", "-qq", "-o", str(trace), "-e",
                              "trace=openat,readlink,readlinkat,capset,seccomp", str(SENSOR),
                              "--symbolizer", sym.address, "--pid", str(work.pid), "--flush-ms", "500"],
                             stdout=open(tmp_path / "sensor.log", "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: sym.status().samples_stored > 0, 40, "samples of the workload")
    finally:
        if p:
            # The sensor itself (strace's child) stops cleanly on SIGTERM.
            kids = pathlib.Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
            for k in kids:
                os.kill(int(k), 15)
            try:
                p.wait(40)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        sym.stop()
    lines = trace.read_text().splitlines()
    load = next((i for i, ln in enumerate(lines) if "SECCOMP_SET_MODE_FILTER" in ln), None)
    assert load is not None, "no seccomp filter loaded:\n" + "\n".join(lines[-20:])
    capset = max(i for i, ln in enumerate(lines[:load]) if "capset(" in ln)
    target = [i for i, ln in enumerate(lines) if f'"/proc/{work.pid}/' in ln]
    assert target, "the workload's /proc was never read"
    early = [lines[i] for i in target if i < load]
    assert not early, f"read before the drop (capset at line {capset}, filter at {load}): {early[:5]}"


def _selftest(sym_address, *args):
    p = subprocess.run([str(SENSOR), "--symbolizer", sym_address, "--sandbox-selftest", *args],
                       capture_output=True, text=True, timeout=120)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(("denied", "ALLOWED"))]
    return p, {ln.split(" ", 1)[1].rpartition(": ")[0]: ln.split(" ", 1)[0] for ln in lines}


SELFTEST_ATTEMPTS = ("bpf(BPF_PROG_LOAD)", "bpf(BPF_LINK_CREATE)", "perf_event_open", "bind",
                     "tgkill(1, 1, 0)", "kill(1, 0)", "prlimit64(1)", "open /etc/passwd for writing",
                     "execve", "fcntl(F_SETOWN, 1)", "fcntl(F_SETSIG)", "fcntl(F_SETFL, O_ASYNC)")
ROOT_SOCKET_ATTEMPT = "connect to a root-owned 0600 Unix socket"


@pytest.fixture
def root_socket(tmp_path):
    """A listening Unix socket owned by root, mode 0600: what the system
    bus, docker.sock or systemd's private socket are to a uid-0 peer."""
    path = tmp_path / "root-only.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    os.chmod(path, 0o600)
    s.listen(4)
    try:
        yield path
    finally:
        s.close()


def test_sensor_selftest_denies_everything(tmp_path, root_socket):
    """Hole 3: the running sensor (real set-up, real capability drop, its
    own filter answering EPERM where it would kill) without --go-probes is
    refused program loads, links, perf events, bind, an INET socket for a
    unix: symbolizer, signals and prlimit64 to pid 1, a write open, exec,
    the fcntl calls that would make a pipe signal another process
    (F_SETOWN, F_SETSIG, O_ASYNC), and, no longer being uid 0, a connect()
    to a root-owned 0600 Unix socket (EACCES from the kernel)."""
    p, got = _selftest(f"unix:{tmp_path}/none.sock", "--sandbox-selftest-socket", str(root_socket))
    assert p.returncode == 0, p.stdout + p.stderr
    for a in SELFTEST_ATTEMPTS + ("socket(AF_INET) for a unix: symbolizer", ROOT_SOCKET_ATTEMPT):
        assert got.get(a) == "denied", (a, p.stdout)
    assert "Permission denied" in next(ln for ln in p.stdout.splitlines() if ROOT_SOCKET_ATTEMPT in ln)
    assert "ALLOWED" not in p.stdout
    # A tcp: symbolizer gets INET sockets, not Unix ones.
    p, got = _selftest("tcp:127.0.0.1:1", "--insecure")
    assert p.returncode == 0, p.stdout + p.stderr
    for a in SELFTEST_ATTEMPTS + ("socket(AF_UNIX) for a tcp: symbolizer",):
        assert got.get(a) == "denied", (a, p.stdout)


def test_sensor_selftest_go_probes_allows_only_loads(tmp_path):
    """--go-probes loads and attaches probes at run time: the filter lets
    BPF_PROG_LOAD, BPF_LINK_CREATE and perf_event_open through, and still
    refuses the rest."""
    p, got = _selftest(f"unix:{tmp_path}/none.sock", "--go-probes")
    assert p.returncode != 0, p.stdout
    for a in ("bpf(BPF_PROG_LOAD)", "bpf(BPF_LINK_CREATE)", "perf_event_open"):
        assert got.get(a) == "ALLOWED", (a, p.stdout)
    for a in SELFTEST_ATTEMPTS[3:] + ("socket(AF_INET) for a unix: symbolizer",):
        assert got.get(a) == "denied", (a, p.stdout)


def test_go_probes_sensor_keeps_its_documented_capabilities(tmp_path, start_workload):
    """--go-probes keeps CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN on top of
    the default four (docs/security.md, 'The sensor's privileges')."""
    work = start_workload(10)
    sym = Symbolizer(tmp_path)
    sensor = subprocess.Popen([str(SENSOR), "--symbolizer", sym.address, "--pid", str(work.pid),
                               "--go-probes"], stdout=open(tmp_path / "sensor.log", "w"),
                              stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "privileges dropped" in (tmp_path / "sensor.log").read_text(), 30, "the drop")
        want = sum(1 << c for c in (2, 19, 34, 40, 38, 39, 21))
        for t in os.listdir(f"/proc/{sensor.pid}/task"):
            st = dict(ln.split(":\t", 1) for ln in
                      pathlib.Path(f"/proc/{sensor.pid}/task/{t}/status").read_text().splitlines()
                      if ":\t" in ln)
            assert int(st["CapEff"], 16) == want, (t, st["CapEff"])
            assert int(st["CapBnd"], 16) == want and st["Seccomp"].strip() == "2"
    finally:
        sensor.terminate()
        sensor.wait(30)
        sym.stop()
    assert sensor.returncode == 0, (tmp_path / "sensor.log").read_text()


def _status(pid, tid):
    return dict(ln.split(":\t", 1) for ln in
                pathlib.Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines() if ":\t" in ln)


def test_running_sensor_is_its_own_user_on_every_thread(tmp_path, start_workload):
    """Review finding 1: after set-up every thread of the sensor (main,
    uplink, gRPC's) has the sensor user's uid and gid in all four slots
    and the symbolizer socket's group (user sonde's) as its only
    supplementary group, still with its kept capabilities; and it still
    works as that user: it reconnects to a restarted symbolizer (the
    socket is root:sonde 0660) and serves its file ranges (/proc/self/fd
    reopens with the process no longer dumpable)."""
    user = pwd.getpwnam("sonde-sensor")
    sym_group = pwd.getpwnam("sonde").pw_gid
    work = start_workload(60)
    sym = Symbolizer(tmp_path)
    log = tmp_path / "sensor.log"
    sensor = subprocess.Popen([str(SENSOR), "--symbolizer", sym.address, "--pid", str(work.pid),
                               "--flush-ms", "500"], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: sym.status().samples_stored > 0, 40, "samples of the workload")
        tids = os.listdir(f"/proc/{sensor.pid}/task")
        assert len(tids) > 1
        for t in tids:
            st = _status(sensor.pid, t)
            assert st["Uid"].split() == [str(user.pw_uid)] * 4, (t, st["Name"], st["Uid"])
            assert st["Gid"].split() == [str(user.pw_gid)] * 4, (t, st["Name"], st["Gid"])
            assert st["Groups"].split() == [str(sym_group)], (t, st["Name"], st["Groups"])
            assert int(st["CapEff"], 16) == sum(1 << c for c in (2, 19, 34, 40)), (t, st["CapEff"])
            assert st["NoNewPrivs"].strip() == "1" and st["Seccomp"].strip() == "2"
        wait_for(lambda: sym.status().files_analysed >= 1, 40, "a file analysed from served ranges")
        # A new symbolizer on the same socket path: the sensor, now
        # sonde-sensor, must connect to it again.
        sym.stop()
        before = log.read_text().count("connected to the symbolizer")
        sym = Symbolizer(tmp_path)
        wait_for(lambda: log.read_text().count("connected to the symbolizer") > before, 60,
                 "a reconnect as sonde-sensor")
        wait_for(lambda: sym.status().samples_received > 0, 40, "samples after the reconnect")
    finally:
        sensor.terminate()
        sensor.wait(30)
        sym.stop()
    text = log.read_text()
    assert sensor.returncode == 0, text
    assert "blocked system call" not in text


def test_sensor_without_its_user_does_not_start(tmp_path):
    """Fail closed: a sensor whose --user does not exist refuses to start
    (it would otherwise stay uid 0)."""
    p = subprocess.run([str(SENSOR), "--symbolizer", f"unix:{tmp_path}/none.sock",
                        "--user", "sonde-no-such-user", "--duration", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, p.stdout + p.stderr
    assert "no such user" in p.stderr
    assert "privileges dropped" not in p.stderr and "sampling" not in p.stderr


def test_uplink_connects_only_after_the_privilege_drop(tmp_path):
    """Review finding 3: the sensor connects to the symbolizer (and so
    parses its first message) only after its seccomp filter is loaded and
    it has switched user: strace -f orders the filter load, setresuid and
    the first connect() to the symbolizer's socket."""
    sym = Symbolizer(tmp_path)
    trace = tmp_path / "strace.out"
    p = None
    try:
        p = subprocess.Popen(["strace", "-f", "-qq", "-o", str(trace), "-e",
                              "trace=connect,seccomp,setresuid", str(SENSOR),
                              "--symbolizer", sym.address, "--flush-ms", "500", "--duration", "6"],
                             stdout=open(tmp_path / "sensor.log", "w"), stderr=subprocess.STDOUT)
        p.wait(90)
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        sym.stop()
    lines = trace.read_text().splitlines()
    path = sym.address.split(":", 1)[1]
    load = next((i for i, ln in enumerate(lines) if "SECCOMP_SET_MODE_FILTER" in ln), None)
    assert load is not None, "no seccomp filter loaded:\n" + "\n".join(lines[-20:])
    conns = [i for i, ln in enumerate(lines) if "connect(" in ln and f'"{path}"' in ln]
    assert conns, "never connected to the symbolizer:\n" + "\n".join(lines[-20:])
    assert conns[0] > load, f"connected (line {conns[0]}) before the filter load (line {load})"
    switched = [i for i, ln in enumerate(lines) if "setresuid(" in ln and "= 0" in ln]
    assert switched and conns[0] > max(switched), (lines[conns[0]], switched)
