#!/usr/bin/python3
"""BPF cost per sample of each interpreter walker against native-only
unwinding of the same workload (docs/interpreters.md, docs/benchmarks.md).

For each runtime of --runtime (default: all in RUNTIMES) and each round,
the runtime's workload (a chain of DEPTH functions of its language around
a hot loop) is profiled by two sensors at once, each with its own
symbolizer and a fresh cache:
  walk    the default symbolizer: the Loader recognises the runtime, the
          sensor gets its InterpreterConfig and BPF walks its frames;
  native  the symbolizer with --interpreters none: no config, native
          unwinding only, same binary, same workload, same moments;
and a third sensor whose --pid is an idle process: what a run of the
program on another task costs (the --pid test, then return), which the
other two also pay on every CPU tick not of the workload.

Once the walk sensor has the config in BPF and both sensors' unwind
tables are still (settle, at most --settle seconds), --windows windows of
--window seconds each give, per sensor, the run time of its perf_event
programs (kernel.bpf_stats_enabled) less its runs on other tasks at the
baseline's cost, over the workload's samples (its CPU time times the
sensor's frequency). Both sensors are measured over the same windows, so
the machine's load weighs on both alike; the walk/native ratio is taken
per window. The two sensors run 2 Hz apart (see one()) and the order
alternates by round: an even --rounds is balanced.

  sudo tests/bench/interp_overhead.py --build build [--runtime cpython,...]
       [--hz 199] [--window 3] [--windows 6] [--rounds 4] [--settle 60]
       [--versus OTHER_BUILD]  (OTHER_BUILD's walk in place of native-only)

Prints each round's windows (walk/native ns per sample), then per runtime
the medians over all windows of all rounds, with quartiles and range.
A runtime is one RUNTIMES entry: its script's file name, the script, and
the command that runs it. The issues' target is walk <= 2x native.
"""
import argparse
import ctypes
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


def bpftool(*args):
    out = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True).stdout
    return json.loads(out or "null")


def sensor_ids(pid, key):
    """The BPF program or map ids (key "prog_id" or "map_id") whose fds
    sensor pid holds."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            for line in open(f"/proc/{pid}/fdinfo/{fd}"):
                if line.startswith(key + ":"):
                    ids.add(line.split()[1])
        except OSError:
            continue
    return ids


def sensor_progs(pid):
    """(run_time_ns, run_cnt) summed over the perf_event programs whose fds
    the sensor holds (tail-called programs and global functions count in
    their caller's time)."""
    t = n = 0
    for i in sensor_ids(pid, "prog_id"):
        p = bpftool("prog", "show", "id", i) or {}
        if p.get("type") == "perf_event":
            t += p.get("run_time_ns", 0)
            n += p.get("run_cnt", 0)
    return t, n


def map_entries(pid, name):
    """Entries of the sensor's map called name (a hash or trie), or -1."""
    for i in sensor_ids(pid, "map_id"):
        m = bpftool("map", "show", "id", i) or {}
        if m.get("name") == name:
            return len(bpftool("map", "dump", "id", i) or [])
    return -1


def cpu_ticks(pid):
    """utime + stime of process pid (all its threads), in clock ticks."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def settle(walk, native, timeout):
    """Waits until the walk sensor has the workload's interpreter config in
    BPF (interp_procs) and both sensors' unwind tables (unwind_lpm) have
    stopped changing for 2 s: the analysis is over and the figures that
    follow are of a steady state. Returns the seconds it took."""
    t0 = time.monotonic()
    last, stable = None, 0
    while time.monotonic() - t0 < timeout:
        time.sleep(0.5)
        now = (map_entries(walk, "interp_procs") > 0,
               map_entries(walk, "unwind_lpm"), map_entries(native, "unwind_lpm"))
        stable = stable + 1 if now == last and now[0] and now[1] > 0 and now[2] > 0 else 0
        last = now
        if stable >= 4:
            return time.monotonic() - t0
    raise SystemExit(f"not settled after {timeout} s (walk config, unwind rows: {last})")


def start_symbolizer(build, d, name, only):
    return subprocess.Popen([str(build / "symbolizer/sonde-symbolizer"), "--listen", f"unix:{d}/{name}.sock",
                             "--cache", f"{d}/{name}-cache/cache.db", "--user", "sonde", *only],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_sensor(build, d, name, sock, pid, hz):
    return subprocess.Popen([str(build / "sensor/sonde-sensor"), "--symbolizer", f"unix:{d}/{sock}.sock",
                             "--pid", str(pid), "--frequency", str(hz), "--flush-ms", "1000",
                             "--node-name", name],
                            stdout=open(d / f"{name}.log", "w"), stderr=subprocess.STDOUT)


def taken(build, d, sock):
    """Samples the sensors of symbolizer sock took (their SensorStats, a
    flush behind)."""
    out = subprocess.run([str(build / "cli/sonde"), "status", "--json", "--symbolizer",
                          f"unix:{d}/{sock}.sock"], capture_output=True, text=True).stdout
    try:
        return json.loads(out)["samples_taken"]
    except (ValueError, KeyError):
        return 0


def one(build, tmp, runtime, a, first):
    """One round of runtime: the workload profiled by three sensors at once
    (walk, native, and a baseline whose --pid is an idle process), read
    over --windows windows of --window seconds after the settle. Returns
    a list of (walk ns, native ns) per window and a line for the log."""
    name, text, argv = RUNTIMES[runtime]
    d = pathlib.Path(tempfile.mkdtemp(prefix=f"interpb.{runtime}.", dir=tmp))
    d.chmod(0o755)
    script = d / name
    script.write_text(text)
    script.chmod(0o644)
    procs = []
    try:
        procs.append(start_symbolizer(build, d, "w", []))
        # --versus: the "native" role is another build's walk (A/B of
        # two walkers over the same windows).
        other = a.versus or build
        procs.append(start_symbolizer(other, d, "n", [] if a.versus else ["--interpreters", "none"]))
        idle = subprocess.Popen(["sleep", "100000"])
        procs.append(idle)
        time.sleep(1)
        work = subprocess.Popen([*argv, str(script)], cwd=d, stdout=subprocess.DEVNULL)
        procs.append(work)
        # At the same frequency the two sensors' timers keep one phase
        # for the whole run, and the program that runs just after the
        # other finds the sample's memory in the caches: a bias of
        # 10-30 % that changes from run to run. At frequencies 2 Hz apart
        # the phases drift through each other twice a second. Which
        # sensor gets the lower one, and starts first, alternates by round.
        hz = {"walk": a.hz, "native": a.hz - 2} if first == "walk" else \
             {"walk": a.hz - 2, "native": a.hz}
        if first == "walk":
            sw = start_sensor(build, d, "walk", "w", work.pid, hz["walk"])
            sn = start_sensor(other, d, "native", "n", work.pid, hz["native"])
        else:
            sn = start_sensor(other, d, "native", "n", work.pid, hz["native"])
            sw = start_sensor(build, d, "walk", "w", work.pid, hz["walk"])
        sb = start_sensor(other, d, "base", "n", idle.pid, a.hz - 5)
        procs += [sw, sn, sb]
        waited = settle(sw.pid, sn.pid, a.settle)
        time.sleep(1)  # the first records of the walk (names) go out

        def snap():
            return (sensor_progs(sw.pid), sensor_progs(sn.pid), sensor_progs(sb.pid),
                    cpu_ticks(work.pid))

        tick = os.sysconf("SC_CLK_TCK")
        s0, tw0, tn0 = snap(), taken(build, d, "w"), taken(build, d, "n")
        prev, out = s0, []
        for _ in range(a.windows):
            time.sleep(a.window)
            cur = snap()
            # Samples of the workload: its CPU time over the clock's
            # period (cpu-clock at --hz has a fixed period of 1/hz s).
            cpu = (cur[3] - prev[3]) / tick
            bt, br = cur[2][0] - prev[2][0], cur[2][1] - prev[2][1]
            other = bt / max(br, 1)  # a run on another task: the --pid test, return
            per = []
            for k, role in enumerate(("walk", "native")):
                n = cpu * hz[role]
                t, r = cur[k][0] - prev[k][0], cur[k][1] - prev[k][1]
                per.append((t - max(r - n, 0) * other) / max(n, 1))
            # No figure when the workload hardly ran, or a program's stats
            # did not move (stats off).
            if cpu * a.hz >= 30 and min(cur[k][0] - prev[k][0] for k in (0, 1, 2)) > 0:
                out.append((per[0], per[1], cpu * a.hz, other))
            prev = cur
        tw1, tn1 = taken(build, d, "w"), taken(build, d, "n")
        est = (cur[3] - s0[3]) / tick * a.hz
        log = (f"settled in {waited:.0f} s; samples {est:.0f} by CPU time, "
               f"{tw1 - tw0} / {tn1 - tn0} taken by walk / native (a flush behind)")
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        # The walk sensor's totals at its exit: samples walked and the
        # walker's records (a record per sample would mean its "already
        # sent" map does not work).
        totals = [ln.split("log_totals: ", 1)[1].strip() for ln in open(d / "walk.log", errors="replace")
                  if "log_totals: " in ln and " samples of configured processes" in ln
                  and " 0 samples of configured" not in ln] if (d / "walk.log").exists() else []
        if os.environ.get("INTERPB_LOGS"):
            for f in ("walk", "native"):
                for ln in open(d / f"{f}.log", errors="replace"):
                    if "samples taken" in ln or "unwind tables loaded" in ln or "bpf error" in ln:
                        print(f"  {f}: {ln.strip()}")
        shutil.rmtree(d, ignore_errors=True)
    return out, log + "".join(f"; walk sensor: {t}" for t in totals)


def enable_stats():
    """Turns BPF run-time stats on for as long as the returned fd is open
    (BPF_ENABLE_STATS: a reference of its own, so another benchmark
    setting kernel.bpf_stats_enabled back to 0 meanwhile does not stop
    them). None when the kernel refuses (then the sysctl is used)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(8)  # union bpf_attr.enable_stats.type = BPF_STATS_RUN_TIME (0)
    fd = libc.syscall(321, 32, attr, 8)  # __NR_bpf (x86-64), BPF_ENABLE_STATS
    return fd if fd >= 0 else None


def quant(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runtime", default=",".join(RUNTIMES))
    ap.add_argument("--hz", type=int, default=199)
    ap.add_argument("--window", type=float, default=3)
    ap.add_argument("--windows", type=int, default=6)
    ap.add_argument("--settle", type=float, default=60, help="longest wait for the analysis")
    ap.add_argument("--seconds", type=float, help="measured seconds a round: sets --windows")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--first", type=int, default=0, help="1: the native sensor starts first in odd rounds")
    ap.add_argument("--versus", help="another build whose walk takes the native side (an A/B of two walkers)")
    a = ap.parse_args()
    if a.versus:
        a.versus = pathlib.Path(a.versus).resolve()
    if a.seconds:
        a.windows = max(1, round(a.seconds / a.window))
    build = pathlib.Path(a.build).resolve()
    runtimes = a.runtime.split(",")
    for r in runtimes:
        if r not in RUNTIMES:
            ap.error(f"unknown runtime {r!r} (have {', '.join(RUNTIMES)})")
    stats_fd = enable_stats()
    before = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    if stats_fd is None:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    tmp = tempfile.mkdtemp(prefix="sonde-interpbench.", dir="/tmp")
    os.chmod(tmp, 0o755)
    res = {r: [] for r in runtimes}
    try:
        for k in range(a.rounds):
            for r in runtimes:
                w, log = one(build, tmp, r, a, "walk" if (k + a.first) % 2 == 0 else "native")
                res[r] += w
                print(f"{r:8s} round {k + 1} ({'walk' if (k + a.first) % 2 == 0 else 'native'} first): " + ", ".join(
                    f"{x:.0f}/{y:.0f}" for x, y, _, _ in w) + f" ns walk/native; {log}; "
                    f"other-task run {quant([o for *_, o in w], 0.5):.0f} ns", flush=True)
    finally:
        if stats_fd is not None:
            os.close(stats_fd)
        elif before != "1":
            subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={before}"])
        shutil.rmtree(tmp, ignore_errors=True)
    if a.versus:
        print(f"\n(--versus: the native columns are {a.versus}'s walk)")
    print("\n| runtime | native ns/sample | walk ns/sample | walk / native: median (quartiles, range) |"
          "\n|---|---|---|---|")
    for r in runtimes:
        ratio = [x / max(y, 1) for x, y, _, _ in res[r]]
        nat = [y for _, y, _, _ in res[r]]
        walk = [x for x, _, _, _ in res[r]]
        print(f"| {r} | {quant(nat, .5):,.0f} ({quant(nat, .25):,.0f}-{quant(nat, .75):,.0f}) "
              f"| {quant(walk, .5):,.0f} ({quant(walk, .25):,.0f}-{quant(walk, .75):,.0f}) "
              f"| {quant(ratio, .5):.2f}× ({quant(ratio, .25):.2f}-{quant(ratio, .75):.2f}, "
              f"{min(ratio):.2f}-{max(ratio):.2f}) |")
    print(f"\n{DEPTH} frames of the runtime's language over a hot loop, {a.hz} Hz, "
          f"{a.rounds} rounds of {a.windows} windows of {a.window:g} s")


if __name__ == "__main__":
    main()
