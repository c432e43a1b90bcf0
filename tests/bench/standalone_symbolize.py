#!/usr/bin/env python3
"""`sonde symbolize --file` with no symbolizer running (issue 33) against
llvm-symbolizer, as a non-root user, for the same addresses of one file
(default libc, its debug file from libc6-dbg).

Each round runs, in this order:
  llvm-symbolizer --obj=FILE ADDR...   (JSON output)
  sonde cold    a private symbolizer with an empty cache (SONDE_CACHE in a
                fresh directory): start, upload by descriptor, analysis,
                index, answers, stop
  sonde warm    the same with the user's cache from earlier runs: start,
                answers from the cache, stop
Every figure is the median wall time of --rounds rounds, each command a
separate process as a user would run it; the ratio is to llvm-symbolizer.
A private symbolizer finishes storing a new file's index after its CLI
has exited; the next command waits (unmeasured) until it has.

  sudo tests/bench/standalone_symbolize.py [--build DIR] [--file PATH] [--n N...] [--rounds R]
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from statistics import median

SRC = pathlib.Path(__file__).resolve().parents[2]
USER = "sonde-bench33"


def addresses(path, n):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    funcs = sorted({int(p[0], 16) for p in (l.split() for l in out.splitlines()) if len(p) == 3 and p[1] in "Tt"})
    step = max(1, len(funcs) // n)
    return ["0x%x" % (a + 4) for a in funcs[::step]][:n]


def demote(uid):
    def fn():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return fn


def timed(argv, uid, env):
    t0 = time.monotonic()
    p = subprocess.run(argv, preexec_fn=demote(uid), env=env, cwd="/", stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=600)
    elapsed = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{argv[0]} failed: {p.stderr[-2000:]}")
    settle(uid)
    return elapsed


def settle(uid):
    """Waits (unmeasured) for a private symbolizer that is still storing
    what it analysed after its CLI exited, so runs do not overlap."""
    for _ in range(600):
        if subprocess.run(["pgrep", "-u", str(uid), "-x", "sonde-symbolize"], capture_output=True).returncode:
            return
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(SRC / "build"))
    ap.add_argument("--file", default="/usr/lib/x86_64-linux-gnu/libc.so.6")
    ap.add_argument("--n", type=int, nargs="+", default=[10, 1000])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (it makes a user to run as)")
    sonde = str(pathlib.Path(args.build).resolve() / "cli" / "sonde")
    if pathlib.Path("/run/sonde/symbolizer.sock").exists():
        sys.exit("a sonde service runs at the default address: stop it first")
    subprocess.run(["userdel", USER], capture_output=True)
    home = pathlib.Path(tempfile.mkdtemp(prefix="sonde-bench33."))
    subprocess.run(["useradd", "--system", "--home-dir", str(home), "--shell", "/usr/sbin/nologin", USER],
                   check=True, capture_output=True)
    uid = int(subprocess.run(["id", "-u", USER], capture_output=True, text=True, check=True).stdout)
    os.chown(home, uid, uid)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    rows = []
    try:
        for n in args.n:
            addrs = addresses(args.file, n)
            llvm, cold, warm = [], [], []
            # One unmeasured warm-up: the user's cache holds the file.
            timed([sonde, "symbolize", "--json", "--file", args.file, *addrs], uid, env)
            for r in range(args.rounds):
                llvm.append(timed(["llvm-symbolizer", "--output-style=JSON", f"--obj={args.file}", *addrs],
                                  uid, env))
                cold_dir = home / f"cold{n}.{r}"
                cold_dir.mkdir()
                os.chown(cold_dir, uid, uid)
                cold.append(timed([sonde, "symbolize", "--json", "--file", args.file, *addrs], uid,
                                  dict(env, SONDE_CACHE=str(cold_dir / "cache.db"))))
                warm.append(timed([sonde, "symbolize", "--json", "--file", args.file, *addrs], uid, env))
                shutil.rmtree(cold_dir, ignore_errors=True)
            rows.append((n, median(llvm), median(cold), median(warm)))
    finally:
        subprocess.run(["userdel", USER], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
    print(f"file: {args.file}, {args.rounds} rounds, medians, as a non-root user, no symbolizer running")
    print("| addresses | llvm-symbolizer | sonde cold | ratio | sonde warm | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n, l, c, w in rows:
        print(f"| {n} | {l * 1000:.0f} ms | {c * 1000:.0f} ms | {c / l:.2f} | {w * 1000:.0f} ms | {w / l:.2f} |")


if __name__ == "__main__":
    main()
