"""`sonde symbolize --file` without a running symbolizer (issue 33): with
nothing at the default address (or with --local, whatever runs there) the
CLI starts a private, sandboxed symbolizer on a temporary socket with the
caller's cache, answers, and stops it. As a non-root user, on libc (its
debug file from libc6-dbg): the same functions and lines as
llvm-symbolizer, with the cache in the user's home, no temporary directory
left behind and no symbolizer left running; the time against
llvm-symbolizer's for the same addresses is printed (the ratio and its
target are tests/bench/standalone_symbolize.py's, docs/benchmarks.md) and
bounded loosely here, as the machine is shared."""
import json
import os
import pathlib
import shutil
import subprocess
import time
from statistics import median

import pytest

from conftest import SONDE, SYMBOLIZER, Symbolizer, make_tmp, wait_for

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
USER = "sonde-t33solo"
N_ADDRS = 10


@pytest.fixture
def user():
    subprocess.run(["userdel", USER], capture_output=True)
    home = make_tmp("sonde-t33home.")
    subprocess.run(["useradd", "--system", "--home-dir", str(home), "--shell", "/usr/sbin/nologin", USER],
                   check=True, capture_output=True)
    uid = int(subprocess.run(["id", "-u", USER], capture_output=True, text=True, check=True).stdout)
    os.chown(home, uid, uid)
    home.chmod(0o700)
    try:
        yield uid, home
    finally:
        # A private symbolizer may still be storing what it analysed.
        wait_for(lambda: subprocess.run(["pgrep", "-u", str(uid)], capture_output=True).returncode != 0, 60,
                 f"the processes of {USER} to end")
        subprocess.run(["userdel", USER], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def demote(uid):
    def fn():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return fn


def addresses():
    """Every 40th exported function of libc, 4 bytes in."""
    out = subprocess.run(["nm", "-D", "--defined-only", LIBC], capture_output=True, text=True, check=True).stdout
    funcs = sorted({int(p[0], 16) for p in (l.split() for l in out.splitlines()) if len(p) == 3 and p[1] == "T"})
    return [a + 4 for a in funcs[::max(1, len(funcs) // N_ADDRS)]][:N_ADDRS]


def run_as(uid, home, argv, env_extra=None):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), **(env_extra or {})}
    t0 = time.monotonic()
    p = subprocess.run(argv, preexec_fn=demote(uid), env=env, cwd="/", capture_output=True, text=True,
                       timeout=120)
    return p, time.monotonic() - t0


def llvm_frames(uid, home, addrs):
    p, elapsed = run_as(uid, home, ["llvm-symbolizer", "--output-style=JSON", f"--obj={LIBC}",
                                    *("0x%x" % a for a in addrs)])
    assert p.returncode == 0, p.stderr
    return [[(f["FunctionName"], f["Line"]) for f in r["Symbol"]] for r in json.loads(p.stdout)], elapsed


def sonde_frames(uid, home, addrs, extra=()):
    p, elapsed = run_as(uid, home, [str(SONDE), "symbolize", "--json", *extra, "--file", LIBC,
                                    *("0x%x" % a for a in addrs)])
    assert p.returncode == 0, p.stderr
    return [[(f["function"], f["line"]) for f in json.loads(l)["frames"]] for l in p.stdout.splitlines()], elapsed


def leftovers():
    return sorted(pathlib.Path("/tmp").glob("sonde-symbolize.*"))


def private_symbolizers(uid):
    out = subprocess.run(["pgrep", "-u", str(uid), "-f", str(SYMBOLIZER)], capture_output=True, text=True).stdout
    return out.split()


def test_symbolize_without_a_daemon_as_a_user(user):
    uid, home = user
    if run_as(uid, home, ["test", "-x", str(SONDE)])[0].returncode:
        pytest.skip("the build tree is not readable by other users")
    if pathlib.Path("/run/sonde/symbolizer.sock").exists():
        pytest.skip("a sonde service runs at the default address")
    before = leftovers()
    addrs = addresses()
    want, _ = llvm_frames(uid, home, addrs)
    assert sum(1 for w in want if w and w[0][1]) >= N_ADDRS // 2, "libc6-dbg is not installed"
    got, cold = sonde_frames(uid, home, addrs)
    assert got == want
    # The user's own cache, the user's file; nothing left behind.
    cache = home / ".cache" / "sonde" / "cache.db"
    assert cache.is_file() and cache.stat().st_uid == uid
    assert leftovers() == before
    # It stores the index after the answers, then exits by itself.
    wait_for(lambda: private_symbolizers(uid) == [], 60, "the private symbolizer to exit")
    # Warm (analysed already): timed against llvm-symbolizer, alternating.
    ours, theirs = [], []
    for _ in range(3):
        got, t = sonde_frames(uid, home, addrs)
        assert got == want
        ours.append(t)
        theirs.append(llvm_frames(uid, home, addrs)[1])
    ratio = median(ours) / median(theirs)
    print(f"standalone sonde symbolize: cold {cold:.2f} s, warm {median(ours):.2f} s; "
          f"llvm-symbolizer {median(theirs):.2f} s; ratio {ratio:.2f}")
    assert ratio < 3, (ours, theirs)
    assert leftovers() == before
    wait_for(lambda: private_symbolizers(uid) == [], 60, "the private symbolizers to exit")


def test_local_even_with_a_symbolizer_running(user, tmp_path):
    """--local starts a private one although --symbolizer names a running
    one (which never sees the file)."""
    uid, home = user
    sym = Symbolizer(tmp_path)
    try:
        addrs = addresses()[:3]
        p, _ = run_as(uid, home, [str(SONDE), "symbolize", "--json", "--local", "--symbolizer", sym.address,
                                  "--file", LIBC, *("0x%x" % a for a in addrs)])
        assert p.returncode == 0, p.stderr
        assert all(json.loads(l)["frames"] for l in p.stdout.splitlines())
        assert "upload" not in sym.logtext()
    finally:
        sym.stop()


def test_named_symbolizer_unreachable_is_an_error(user):
    """Only the default address falls back: a symbolizer the caller named
    and that does not answer is reported."""
    uid, home = user
    p, _ = run_as(uid, home, [str(SONDE), "symbolize", "--json", "--symbolizer", f"unix:{home}/none.sock",
                              "--file", LIBC, "0x1000"])
    assert p.returncode != 0 and "cannot reach the symbolizer" in p.stderr
