#!/usr/bin/python3
"""BPF cost per sample with and without the CPython walk (issue 5).

The same workload (python3.11 spinning in a chain of DEPTH Python
functions) is profiled at --hz by sonde's sensor (--pid) twice, each time
with a fresh symbolizer cache:
  python  the interpreter runs as .../python3.11: the Loader recognises it,
          the sensor gets its InterpreterConfig and BPF walks the frames;
  native  the same bytes as .../spinner (not an interpreter's name): no
          config, native unwinding only.
Reports run_time_ns / run_cnt of the sensor's own perf_event programs
(kernel.bpf_stats_enabled; restored afterwards) over --seconds, after the
config has had time to arrive.

  sudo tests/bench/cpython_overhead.py --build build [--hz 199] [--seconds 10] [--rounds 3]
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

PYTHON = "/usr/bin/python3.11"
DEPTH = 12
WORKLOAD = """
import sys
def f0(n):
    t = 0
    for i in range(n):
        t += i * i
    return t
""" + "".join(f"def f{k}(n):\n    return f{k - 1}(n) + 1\n" for k in range(1, DEPTH)) + f"""
while True:
    f{DEPTH - 1}(10000)
"""


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


def one(build, tmp, mode, hz, seconds):
    d = pathlib.Path(tempfile.mkdtemp(prefix=f"cpyb.{mode}.", dir=tmp))
    d.chmod(0o755)
    exe = d / ("python3.11" if mode == "python" else "spinner")
    shutil.copy(PYTHON, exe)
    script = d / "spin.py"
    script.write_text(WORKLOAD)
    sock = f"unix:{d}/s.sock"
    procs = []
    try:
        procs.append(subprocess.Popen([str(build / "symbolizer/sonde-symbolizer"), "--listen", sock,
                                       "--cache", f"{d}/cache/cache.db", "--user", "sonde"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1)
        work = subprocess.Popen([str(exe), str(script)])
        procs.append(work)
        sen = subprocess.Popen([str(build / "sensor/sonde-sensor"), "--symbolizer", sock,
                                "--pid", str(work.pid), "--frequency", str(hz)],
                               stdout=open(d / "sensor.log", "w"), stderr=subprocess.STDOUT)
        procs.append(sen)
        time.sleep(5)  # analysis, unwind table, interpreter config
        t0, n0 = sensor_progs(sen.pid)
        s0 = taken(build, sock)
        time.sleep(seconds)
        t1, n1 = sensor_progs(sen.pid)
        s1 = taken(build, sock)
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
    ap.add_argument("--hz", type=int, default=199)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    before = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    tmp = tempfile.mkdtemp(prefix="sonde-cpybench.", dir="/tmp")
    os.chmod(tmp, 0o755)
    res = {"native": [], "python": []}
    try:
        for _ in range(a.rounds):
            for mode in ("native", "python"):
                ns, n, runs = one(build, tmp, mode, a.hz, a.seconds)
                res[mode].append(ns)
                print(f"{mode:7s} {ns:8.0f} ns/sample over {n} samples ({runs} program runs)",
                      flush=True)
    finally:
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={before}"])
        shutil.rmtree(tmp, ignore_errors=True)
    med = {m: sorted(v)[len(v) // 2] for m, v in res.items()}
    print(f"\n| workload | mode | BPF ns/sample (median of {a.rounds}) |\n|---|---|---|")
    for m in ("native", "python"):
        print(f"| python3.11, {DEPTH} Python frames + native, {a.hz} Hz | {m} | {med[m]:.0f} |")
    print(f"\nPython walk: +{med['python'] - med['native']:.0f} ns/sample")


if __name__ == "__main__":
    main()
