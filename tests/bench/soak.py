#!/usr/bin/python3
"""Soak: both services for 10 minutes under churn and steady load, their
RSS sampled every 10 s (docs/benchmarks.md, "Soak").

  - sonde-symbolizer on loopback TCP with mutual TLS and a Unix socket;
  - sonde-sensor (real BPF) at 999 Hz following a spawner (--pid) that
    keeps one workload running the whole time and starts short-lived
    processes (/bin/true; one in ten the workload for 0 s) at --churn
    per second;
  - tests/load/sonde-load playing --sensors sensors at 20 Hz x 8 CPUs
    into the same symbolizer.

Prints the RSS series and, per service, the first, last and largest
sample and the drift (last vs first, and last vs the sample at 1 minute,
after start-up), plus what the spawner and sonde-load did.

  sudo tests/bench/soak.py [--build DIR] [--minutes 10] [--sensors 20] [--churn 20]
"""
import argparse
import os
import pathlib
import subprocess
import sys
import time

SRC = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "tests" / "load"))

SPAWNER = r"""
import os, sys, time
rate, seconds, workload = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
sys.stdin.readline()
steady = os.posix_spawn(workload, [workload, str(int(seconds))], {})
t0 = time.monotonic()
n = 0
running = set()
while time.monotonic() - t0 < seconds:
    argv = [workload, "0"] if n % 10 == 0 else ["/bin/true"]
    running.add(os.posix_spawn(argv[0], argv, {}))
    n += 1
    while running:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if not pid:
            break
        running.discard(pid)
    time.sleep(max(0.0, t0 + n / rate - time.monotonic()))
for pid in running:
    os.waitpid(pid, 0)
os.waitpid(steady, 0)
print(f"spawned {n} short-lived processes in {time.monotonic() - t0:.0f} s", flush=True)
"""


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("SONDE_BUILD", str(SRC / "build")))
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--sensors", type=int, default=20)
    ap.add_argument("--churn", type=float, default=20, help="short-lived processes per second")
    ap.add_argument("--interval", type=float, default=10)
    args = ap.parse_args()
    build = pathlib.Path(args.build).resolve()
    os.environ["SONDE_BUILD"] = str(build)
    import harness

    seconds = args.minutes * 60
    sym = harness.TlsSymbolizer()
    spawner = sensor = load = None
    try:
        spawner = subprocess.Popen([sys.executable, "-c", SPAWNER, str(args.churn), str(seconds),
                                    str(build / "tests" / "workload" / "sonde-workload")],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        sensor_log = open(sym.dir / "sensor.log", "w")
        sensor = subprocess.Popen([str(build / "sensor" / "sonde-sensor"), "--symbolizer",
                                   f"unix:{sym.dir / 'sym.sock'}", "--pid", str(spawner.pid),
                                   "--frequency", "999"], stdout=sensor_log, stderr=subprocess.STDOUT)
        time.sleep(3)
        load = subprocess.Popen([str(harness.LOAD), *sym.load_args(), "--sensors", str(args.sensors),
                                 "--duration", str(int(seconds)), "--warm-timeout", "300"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        spawner.stdin.write("go\n")
        spawner.stdin.flush()
        t0 = time.monotonic()
        series = []
        print("t_s  symbolizer_rss_mib  sensor_rss_mib", flush=True)
        while time.monotonic() - t0 < seconds:
            time.sleep(args.interval - (time.monotonic() - t0) % args.interval)
            s = (round(time.monotonic() - t0), rss_kib(sym.proc.pid) / 1024, rss_kib(sensor.pid) / 1024)
            series.append(s)
            print(f"{s[0]:4d}  {s[1]:8.1f}  {s[2]:8.1f}", flush=True)
            if sensor.poll() is not None or sym.proc.poll() is not None:
                raise RuntimeError("a service exited during the soak")
        spawned = spawner.stdout.readline().strip()
        out, err = load.communicate(timeout=600)
        result = harness.parse_result(out)
        print()
        print(f"soak: {args.minutes:g} min; {spawned} (sensor --pid, 999 Hz); sonde-load: {args.sensors} sensors "
              f"at 20 Hz x 8 CPUs, {result['sent']:,.0f} samples sent, {result['lost']:,.0f} lost, "
              f"p99 {result['p99_ms']:.0f} ms")
        print("| service | RSS MiB first (10 s) | at 1 min | last | max | drift last vs first | drift last vs 1 min |")
        print("|---|---|---|---|---|---|---|")
        at1 = next((s for s in series if s[0] >= 60), series[0])
        for name, k in (("sonde-symbolizer", 1), ("sonde-sensor", 2)):
            first, last, top, one = series[0][k], series[-1][k], max(s[k] for s in series), at1[k]
            print(f"| {name} | {first:.1f} | {one:.1f} | {last:.1f} | {top:.1f} | "
                  f"{100 * (last - first) / first:+.1f}% | {100 * (last - one) / one:+.1f}% |")
    finally:
        for p in (load, sensor):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        if spawner and spawner.poll() is None:
            spawner.kill()
            spawner.wait()
        sym.stop()


if __name__ == "__main__":
    main()
