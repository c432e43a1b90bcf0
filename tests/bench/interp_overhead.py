#!/usr/bin/python3
"""BPF cost per sample of each interpreter walker against native-only
unwinding of the same workload (docs/interpreters.md).

For each runtime of --runtime (default: all in RUNTIMES), the runtime's
workload (a chain of DEPTH functions of its language around a hot loop)
is profiled at --hz by sonde's sensor (--pid) twice per round, each time
with a fresh symbolizer cache:
  walk    the default symbolizer: the Loader recognises the runtime, the
          sensor gets its InterpreterConfig and BPF walks its frames;
  native  the symbolizer with --interpreters none: no config, native
          unwinding only, same binary, same workload.
Reports run_time_ns / run_cnt of the sensor's own perf_event programs
(kernel.bpf_stats_enabled; restored afterwards) per sample of the workload,
over --seconds after --settle seconds (analysis, config, JIT warm-up).

  sudo tests/bench/interp_overhead.py --build build [--runtime cpython,...]
       [--hz 199] [--seconds 10] [--settle 6] [--rounds 3]

A runtime is one RUNTIMES entry: its script's file name, the script, and
the command that runs it. The issue targets are walk <= 2x native.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

DEPTH = 12


def python_script():
    return """
def f0(n):
    t = 0
    for i in range(n):
        t += i * i
    return t
""" + "".join(f"def f{k}(n):\n    return f{k - 1}(n) + 1\n" for k in range(1, DEPTH)) + f"""
while True:
    f{DEPTH - 1}(10000)
"""


def perl_script():
    return """
sub f0 { my ($n) = @_; my $t = 0; for my $i (1 .. $n) { $t += $i * $i; } return $t; }
""" + "".join(f"sub f{k} {{ return f{k - 1}($_[0]) + 1; }}\n" for k in range(1, DEPTH)) + f"""
while (1) {{ f{DEPTH - 1}(10000); }}
"""


def php_script():
    return """<?php
function f0($n) {
    $t = 0;
    for ($i = 0; $i < $n; $i++) {
        $t += $i * $i;
    }
    return $t;
}
""" + "".join(f"function f{k}($n) {{\n    return f{k - 1}($n) + 1;\n}}\n" for k in range(1, DEPTH)) + f"""
while (true) {{
    f{DEPTH - 1}(10000);
}}
"""


def java_script():
    """One source file java runs as it is (JEP 330): f0 is compiled, the
    chain above it inlined into its callers' nmethods or interpreted."""
    chain = "".join(f"    static long f{k}(int n) {{ return f{k - 1}(n) + 1; }}\n"
                    for k in range(1, DEPTH))
    return (
        "public class Spin {\n"
        "    static long f0(int n) {\n"
        "        long t = 0;\n"
        "        for (int i = 0; i < n; i++) t += (long) i * i;\n"
        "        return t;\n"
        "    }\n" + chain +
        "    static volatile long sink;\n"
        "    public static void main(String[] a) {\n"
        f"        while (true) sink += f{DEPTH - 1}(10000);\n"
        "    }\n"
        "}\n")


# name: (the script's file name, the script, argv before the script's path)
def ruby_script():
    return """
def f0(n)
  t = 0
  i = 0
  while i < n
    t += i * i
    i += 1
  end
  t
end
""" + "".join(f"def f{k}(n)\n  f{k - 1}(n) + 1\nend\n" for k in range(1, DEPTH)) + f"""
loop {{ f{DEPTH - 1}(10000) }}
"""


def js_script():
    return """'use strict';
function f0(n) {
  let t = 0;
  for (let i = 0; i < n; i++) t += i * i;
  return t;
}
""" + "".join(f"function f{k}(n) {{ return f{k - 1}(n) + 1; }}\n" for k in range(1, DEPTH)) + f"""
for (;;) f{DEPTH - 1}(10000);
"""


RUNTIMES = {
    "cpython": ("spin.py", python_script(), ["/usr/bin/python3.11"]),
    "jvm": ("Spin.java", java_script(), ["/usr/lib/jvm/java-17-openjdk-amd64/bin/java"]),
    "ruby": ("spin.rb", ruby_script(), ["/usr/bin/ruby3.1"]),
    "perl": ("spin.pl", perl_script(), ["/usr/bin/perl"]),
    "php": ("spin.php", php_script(), ["/usr/bin/php8.2"]),
    "v8": ("spin.js", js_script(), ["/usr/bin/node"]),
}


def sensor_progs(pid):
    """(run_time_ns, run_cnt) summed over the perf_event programs whose fds
    the sensor holds (tail-called programs count in their caller's time)."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            for line in open(f"/proc/{pid}/fdinfo/{fd}"):
                if line.startswith("prog_id:"):
                    ids.add(line.split()[1])
        except OSError:
            continue
    t = n = 0
    for i in ids:
        p = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", i],
                                      capture_output=True, text=True).stdout or "{}")
        if p.get("type") == "perf_event":
            t += p.get("run_time_ns", 0)
            n += p.get("run_cnt", 0)
    return t, n


def taken(build, sock):
    """Samples the sensor took (its SensorStats, as the symbolizer's Status
    reports them; up to a flush behind, at both ends alike)."""
    out = subprocess.run([str(build / "cli/sonde"), "status", "--json", "--symbolizer", sock],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["samples_taken"]


def one(build, tmp, runtime, mode, a):
    name, text, argv = RUNTIMES[runtime]
    hz, seconds = a.hz, a.seconds
    d = pathlib.Path(tempfile.mkdtemp(prefix=f"interpb.{runtime}.{mode}.", dir=tmp))
    d.chmod(0o755)
    script = d / name
    script.write_text(text)
    script.chmod(0o644)
    sock = f"unix:{d}/s.sock"
    only = ["--interpreters", "none"] if mode == "native" else []
    procs = []
    try:
        procs.append(subprocess.Popen([str(build / "symbolizer/sonde-symbolizer"), "--listen", sock,
                                       "--cache", f"{d}/cache/cache.db", "--user", "sonde", *only],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1)
        work = subprocess.Popen([*argv, str(script)], cwd=d, stdout=subprocess.DEVNULL)
        procs.append(work)
        sen = subprocess.Popen([str(build / "sensor/sonde-sensor"), "--symbolizer", sock,
                                "--pid", str(work.pid), "--frequency", str(hz)],
                               stdout=open(d / "sensor.log", "w"), stderr=subprocess.STDOUT)
        procs.append(sen)
        time.sleep(a.settle)  # analysis, unwind table, interpreter config, JIT
        t0, n0 = sensor_progs(sen.pid)
        s0 = taken(build, sock)
        time.sleep(seconds)
        t1, n1 = sensor_progs(sen.pid)
        s1 = taken(build, sock)
        if s1 == s0:
            raise SystemExit(f"{runtime} {mode}: no samples counted (the sensor reports them "
                             "every few seconds: use a longer --seconds)")
        # Per sample of the workload: the program also runs (and returns
        # at once) on CPUs running other tasks; that cost is included.
        return (t1 - t0) / max(1, s1 - s0), s1 - s0, n1 - n0
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runtime", default=",".join(RUNTIMES))
    ap.add_argument("--hz", type=int, default=199)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--settle", type=float, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    runtimes = a.runtime.split(",")
    for r in runtimes:
        if r not in RUNTIMES:
            ap.error(f"unknown runtime {r!r} (have {', '.join(RUNTIMES)})")
    before = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    tmp = tempfile.mkdtemp(prefix="sonde-interpbench.", dir="/tmp")
    os.chmod(tmp, 0o755)
    res = {(r, m): [] for r in runtimes for m in ("native", "walk")}
    try:
        for _ in range(a.rounds):
            for r in runtimes:
                for mode in ("native", "walk"):
                    ns, n, runs = one(build, tmp, r, mode, a)
                    res[(r, mode)].append(ns)
                    print(f"{r:8s} {mode:7s} {ns:8.0f} ns/sample over {n} samples ({runs} program runs)",
                          flush=True)
    finally:
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={before}"])
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: sorted(v)[len(v) // 2] for k, v in res.items()}
    print("\n| runtime | native ns/sample | walk ns/sample | walk / native |"
          "\n|---|---|---|---|")
    for r in runtimes:
        nat, walk = med[(r, "native")], med[(r, "walk")]
        print(f"| {r} | {nat:.0f} | {walk:.0f} | {walk / max(nat, 1):.2f}x |")
    print(f"\n{DEPTH} frames of the runtime's language over a hot loop, {a.hz} Hz, "
          f"median of {a.rounds} rounds")


if __name__ == "__main__":
    main()
