#!/usr/bin/python3
"""Benchmark (not a test): the memory profile's cost on a page-fault-heavy
workload, tests/workload/memory_workload.c touching MIB_EACH MiB of heap
and as much of anonymous maps (one fault a page: THP off for the maps; the
heap follows the machine's THP setting), ROUNDS times per mode:

  none      no sensor
  cpu       sonde-sensor at 19 Hz (CPU samples only)
  memory    sonde-sensor --memory (one fault in 64 of a task sampled)
  memory-1  sonde-sensor --memory --memory-every 1 (every fault: worst case)
  reserved  sonde-sensor --memory-reserved (brk/mmap on raw syscall
            tracepoints: every syscall of the machine runs them)

With --syscalls, a syscall-heavy run too: dd bs=1 of 2 MiB (4 Mi
syscalls) without a sensor and under --memory-reserved, its CPU time and
the syscall programs' ns per run.

The sensor profiles the whole machine (no --pid), as deployed, and sends
to tests/integration/fake_symbolizer.py. Per mode: the workload's median
CPU time (user + system: the fault programs run in its faults) and its
ratio to "none", its median wall time, the sensor's CPU seconds over the
workload runs (its threads' schedstat run times), and, with
kernel.bpf_stats_enabled, the fault programs' runs and mean ns per run
(every fault of every process on the machine runs them; most return
after the countdown).

  sudo tests/bench/memory_overhead.py [--build DIR] [--mib N] [--rounds N]

Ratios matter, not absolute times: this machine is shared and noisy.
"""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

SRC = pathlib.Path(__file__).resolve().parents[2]


def cpu_s(pid):
    """CPU seconds of pid's live threads (schedstat run time)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def fault_prog_stats(prefix="sonde_fault"):
    """(runs, run ns) summed over the loaded programs named prefix*."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    runs = ns = 0
    for p in json.loads(out.stdout or "[]"):
        if p.get("name", "").startswith(prefix):
            runs += p.get("run_cnt", 0)
            ns += p.get("run_time_ns", 0)
    return runs, ns


def wait_line(path, text, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if text in pathlib.Path(path).read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise RuntimeError(f"no '{text}' in {path}")


def run_workload(exe, mib):
    """(wall seconds, CPU seconds) of one run: the CPU time holds what the
    fault programs add to each fault, and less of the machine's load."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    subprocess.run([exe, str(mib), "0"], check=True, capture_output=True)
    wall = time.monotonic() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def run_dd():
    """CPU seconds of dd copying 2 MiB a byte at a time."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=2097152"], check=True,
                   capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def measure(args, mode, tmp):
    exe = str(pathlib.Path(args.build) / "tests/workload/sonde-memory-workload")
    sensor = fake = None
    sock = f"{tmp}/fake.sock"
    log = f"{tmp}/sensor-{mode}.log"
    if mode != "none":
        fake = subprocess.Popen(["/usr/bin/python3", str(SRC / "tests/integration/fake_symbolizer.py"),
                                 "--listen", "unix:" + sock, "--quiet"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)
        cmd = [str(pathlib.Path(args.build) / "sensor/sonde-sensor"), "--symbolizer", "unix:" + sock,
               "--symbolizer-uid", "0", "--no-drop-privileges"]
        if mode.startswith("memory"):
            cmd.append("--memory")
        if mode == "memory-1":
            cmd += ["--memory-every", "1"]
        if mode == "reserved":
            cmd.append("--memory-reserved")
        sensor = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
        wait_line(log, "sampling", 60)
        time.sleep(1)
    try:
        c0 = cpu_s(sensor.pid) if sensor else 0
        prefix = "sonde_sys" if mode == "reserved" else "sonde_fault"
        r0 = fault_prog_stats(prefix)
        times = [run_workload(exe, args.mib) for _ in range(args.rounds)]
        c1 = cpu_s(sensor.pid) if sensor else 0
        r1 = fault_prog_stats(prefix)
        if args.syscalls and mode in ("none", "reserved"):
            s0 = fault_prog_stats("sonde_sys")
            dd = [run_dd() for _ in range(args.rounds)]
            s1 = fault_prog_stats("sonde_sys")
            print(json.dumps({"mode": mode, "dd_cpu_s": statistics.median(dd),
                              "sys_prog_runs": s1[0] - s0[0],
                              "sys_prog_ns": (s1[1] - s0[1]) / max(1, s1[0] - s0[0])}), file=sys.stderr)
    finally:
        for p in (sensor, fake):
            if p:
                p.terminate()
                p.wait()
    runs, ns = r1[0] - r0[0], r1[1] - r0[1]
    return {"mode": mode, "wall_s": statistics.median(w for w, _ in times),
            "cpu_s": statistics.median(c for _, c in times), "sensor_cpu_s": c1 - c0,
            "prog_runs": runs, "prog_ns": ns / runs if runs else 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(SRC / "build"))
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="none,cpu,memory,memory-1,reserved")
    ap.add_argument("--syscalls", action="store_true")
    args = ap.parse_args()
    # Others may be measuring with it on: it is put back as it was.
    stats_was = pathlib.Path("/proc/sys/kernel/bpf_stats_enabled").read_text().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=False)
    tmp = tempfile.mkdtemp(prefix="sonde-memory-bench.")
    rows = []
    try:
        for mode in args.modes.split(","):
            rows.append(measure(args, mode, tmp))
            print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={stats_was}"], check=False)
    base = rows[0]["cpu_s"]
    faults = 2 * args.mib * 256 * args.rounds
    print(f"workload: {args.rounds} x {2 * args.mib} MiB touched ({faults} first-touch faults)")
    print("| mode | workload CPU (median) | vs none | workload wall | sensor CPU | fault program runs | ns/run |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['cpu_s']:.2f} s | {r['cpu_s'] / base:.2f}x | {r['wall_s']:.2f} s | "
              f"{r['sensor_cpu_s']:.2f} s | {r['prog_runs']} | {r['prog_ns']:.0f} |")


if __name__ == "__main__":
    main()
