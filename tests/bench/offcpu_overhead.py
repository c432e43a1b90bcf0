#!/usr/bin/python3
"""Benchmark (not a test): what off-CPU profiling costs a workload that
context-switches all the time (issue 32; docs/benchmarks.md), one run.

tests/bench/pingpong.c: two processes pass a byte over two pipes, each
round trip two blocking reads and two switches per process. Modes, one
after the other:
  none        no profiler
  cpu         sonde-sensor --pid (CPU samples only, default 19 Hz)
  off-cpu     sonde-sensor --pid --off-cpu (blocks under the default
              --off-cpu-min-us 1000 walked but not sent: every block here)
  off-cpu-0   sonde-sensor --pid --off-cpu --off-cpu-min-us 0 (every block
              sent: the ring, the sensor and the symbolizer see each one)
  bpftrace    a sched_switch kstack/ustack count one-liner on the workload
Prints round trips/s, the profiler's CPU seconds (sensor; bpftrace's
process) and the BPF run time of its sched_switch program, per second.

  sudo tests/bench/offcpu_overhead.py [--build DIR] [--seconds S]
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from unwind_overhead import proc_cpu_s  # schedstat ns, not 10 ms ticks

SRC = pathlib.Path(__file__).resolve().parents[2]
ONELINER = ('tracepoint:sched:sched_switch /comm == "pingpong"/ '
            '{ @[kstack, ustack] = count(); }')


def wait_for(pred, seconds, what):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.2)
    sys.exit(f"timed out waiting for {what}")


def bpf_ns(parts):
    """Run time of the programs whose (15-byte) names contain one of parts."""
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True,
                                      text=True, check=True).stdout)
    return sum(p.get("run_time_ns", 0) for p in progs
               if any(x in p.get("name", "") for x in parts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(SRC / "build"))
    ap.add_argument("--seconds", type=float, default=5)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    build = pathlib.Path(args.build)
    stats_before = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sonde-offcpu-bench."))
    tmp.chmod(0o755)
    procs = []
    try:
        pp = tmp / "pingpong"
        subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(pp),
                        str(SRC / "tests" / "bench" / "pingpong.c")], check=True)
        sock = tmp / "sym.sock"
        sym = subprocess.Popen([str(build / "symbolizer" / "sonde-symbolizer"), "--listen", f"unix:{sock}",
                                "--cache", str(tmp / "cache" / "cache.db"), "--user", "sonde"],
                               stdout=open(tmp / "symbolizer.log", "w"), stderr=subprocess.STDOUT)
        procs.append(sym)
        wait_for(sock.exists, 15, "the symbolizer")
        rows = []
        for mode in ("none", "cpu", "off-cpu", "off-cpu-0", "bpftrace"):
            # Stopped before exec until the profiler is ready, so it
            # follows both processes from the start.
            r, w = os.pipe()
            work = subprocess.Popen(["sh", "-c", f"read x <&{r}; exec {pp} {args.seconds}"],
                                    stdout=subprocess.PIPE, text=True, pass_fds=(r,))
            prof, names = None, ()
            if mode in ("cpu", "off-cpu", "off-cpu-0"):
                extra = {"cpu": [], "off-cpu": ["--off-cpu"],
                         "off-cpu-0": ["--off-cpu", "--off-cpu-min-us", "0"]}[mode]
                log = tmp / f"sensor.{mode}.log"
                prof = subprocess.Popen([str(build / "sensor" / "sonde-sensor"), "--symbolizer",
                                         f"unix:{sock}", "--pid", str(work.pid), *extra],
                                        stdout=open(log, "w"), stderr=subprocess.STDOUT)
                wait_for(lambda: "sampling" in log.read_text(), 30, "the sensor")
                names = ("sonde_offcpu",)
            elif mode == "bpftrace":
                log = tmp / "bpftrace.log"
                prof = subprocess.Popen(["bpftrace", "-e", ONELINER], stdout=open(log, "w"),
                                        stderr=subprocess.STDOUT)
                wait_for(lambda: "Attaching" in log.read_text(), 30, "bpftrace")
                time.sleep(1)
                names = ("sched_switch", "sched_sched")
            b0 = bpf_ns(names) if names else 0
            c0 = proc_cpu_s(prof.pid) if prof else 0
            os.write(w, b"go\n")
            os.close(w)
            os.close(r)
            rate = float(work.communicate(timeout=args.seconds + 60)[0].strip())
            cpu = (proc_cpu_s(prof.pid) - c0) / args.seconds if prof else 0
            bpf = (bpf_ns(names) - b0) / 1e9 / args.seconds if names else 0
            if prof:
                prof.terminate()
                prof.wait(60)
            rows.append((mode, rate, cpu, bpf))
            print(f"{mode}: {rate:.0f} round trips/s, profiler CPU {cpu:.3f} s/s, BPF {bpf:.3f} s/s",
                  file=sys.stderr)
        none = rows[0][1]
        print(f"\npingpong (2 processes, 2 pipes), {args.seconds:g} s per mode, one run\n")
        print("| mode | round trips/s | vs none | profiler CPU (s/s) | its sched_switch BPF (s/s) |")
        print("|---|---|---|---|---|")
        for mode, rate, cpu, bpf in rows:
            print(f"| {mode} | {rate:.0f} | {rate / none:.2f}x | {cpu:.3f} | {bpf:.3f} |")
    finally:
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={stats_before}"])
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
