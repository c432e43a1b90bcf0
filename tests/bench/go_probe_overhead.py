#!/usr/bin/python3
"""Benchmark (not a test): what the Go probes cost a traced Go server, in
requests per second, in one run (issue 7; docs/benchmarks.md).

tests/workload/gohttp (Debian's Go 1.19) serves; `gohttp load URL S`
makes requests back to back on one connection for S seconds and prints
req/s. Per round, interleaved so that load elsewhere hits all alike:
  none       no sonde at all
  sensor     sonde-sensor following the server (--pid), no probes
  probes     sonde-sensor --go-probes following it: the real symbolizer
             plans the probes (server and client probes attached, so 2
             uprobe hits per request: the entry and one RET)
for two handlers: /ok (writes "ok": the request is almost nothing but
HTTP on loopback, the worst case) and /burn?ms=1 (1 ms of CPU: a handler
that does some work). Prints the median req/s and the ratio to "none".

  sudo tests/bench/go_probe_overhead.py [--build DIR] [--rounds N] [--seconds S]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from unwind_overhead import proc_cpu_s  # schedstat ns, not 10 ms ticks

SRC = pathlib.Path(__file__).resolve().parents[2]
GO = "/usr/lib/go-1.19/bin/go"


def build_gohttp(tmp):
    env = dict(os.environ, GOTOOLCHAIN="local", GOPROXY="off", GOFLAGS="-mod=mod",
               GOCACHE=str(tmp / "gocache"), GOPATH=str(tmp / "gopath"), HOME=str(tmp))
    out = tmp / "gohttp"
    subprocess.run([GO, "build", "-o", str(out), "."], check=True, env=env,
                   cwd=SRC / "tests" / "workload" / "gohttp")
    return out


def wait_for(pred, seconds, what):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.2)
    sys.exit(f"timed out waiting for {what}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(SRC / "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=4)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    build = pathlib.Path(args.build)
    # BPF run time per program (adds two clock reads per program run).
    stats_before = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sonde-gobench."))
    tmp.chmod(0o755)
    procs = []
    try:
        gohttp = build_gohttp(tmp)
        server = subprocess.Popen([str(gohttp), "server"], stdout=subprocess.PIPE, text=True)
        procs.append(server)
        port = int(server.stdout.readline())
        sock = tmp / "sym.sock"
        sym_log = open(tmp / "symbolizer.log", "w")
        sym = subprocess.Popen([str(build / "symbolizer" / "sonde-symbolizer"), "--listen", f"unix:{sock}",
                                "--cache", str(tmp / "cache" / "cache.db"), "--user", "sonde"],
                               stdout=sym_log, stderr=subprocess.STDOUT)
        procs.append(sym)
        wait_for(sock.exists, 15, "the symbolizer")

        def start_sensor(probes):
            log = tmp / f"sensor.{time.monotonic_ns()}.log"
            p = subprocess.Popen([str(build / "sensor" / "sonde-sensor"), "--symbolizer", f"unix:{sock}",
                                  "--pid", str(server.pid), *(["--go-probes"] if probes else [])],
                                 stdout=open(log, "w"), stderr=subprocess.STDOUT)
            if probes:
                wait_for(lambda: f"pid {server.pid}: go_http_server attached" in log.read_text(), 60,
                         "the probes to attach")
            else:
                wait_for(lambda: "sampling" in log.read_text(), 30, "the sensor")
            time.sleep(1)
            return p

        def load(path):
            out = subprocess.run([str(gohttp), "load", f"http://127.0.0.1:{port}{path}",
                                  str(args.seconds)], capture_output=True, text=True, check=True).stdout
            return float(out.strip())

        def bpf_ns():
            progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True,
                                              text=True, check=True).stdout)
            return sum(p.get("run_time_ns", 0) for p in progs
                       if p.get("name", "").startswith(("server_", "client_")))

        paths = ["/ok", "/burn?ms=1"]
        res = {(m, p): [] for m in ("none", "sensor", "probes") for p in paths}
        # Where a traced /ok request's extra time goes (probes mode): BPF
        # programs, sensor and symbolizer CPU, each per request.
        cost = {"bpf": [], "sensor": [], "symbolizer": []}
        for r in range(args.rounds):
            for mode in ("none", "sensor", "probes"):
                sensor = start_sensor(mode == "probes") if mode != "none" else None
                for p in paths:
                    if mode == "probes" and p == "/ok":
                        b0, s0, y0 = bpf_ns(), proc_cpu_s(sensor.pid), proc_cpu_s(sym.pid)
                    res[(mode, p)].append(load(p))
                    if mode == "probes" and p == "/ok":
                        n = res[(mode, p)][-1] * args.seconds
                        cost["bpf"].append((bpf_ns() - b0) / 1e3 / n)
                        cost["sensor"].append((proc_cpu_s(sensor.pid) - s0) * 1e6 / n)
                        cost["symbolizer"].append((proc_cpu_s(sym.pid) - y0) * 1e6 / n)
                if sensor:
                    sensor.terminate()
                    sensor.wait(30)
                print(f"round {r + 1} {mode}: " +
                      ", ".join(f"{p} {res[(mode, p)][-1]:.0f}" for p in paths), file=sys.stderr)
        print(f"\ngohttp server, one client connection, {args.seconds} s per run, median of "
              f"{args.rounds} interleaved rounds\n")
        print("| handler | none req/s | sensor req/s | vs none | sensor --go-probes req/s | vs none |")
        print("|---|---|---|---|---|---|")
        for p in paths:
            none = statistics.median(res[("none", p)])
            sen = statistics.median(res[("sensor", p)])
            prb = statistics.median(res[("probes", p)])
            print(f"| {p} | {none:.0f} | {sen:.0f} | {sen / none:.2f}x | {prb:.0f} | {prb / none:.2f}x |")
        none, prb = statistics.median(res[("none", "/ok")]), statistics.median(res[("probes", "/ok")])
        extra = 1e6 / prb - 1e6 / none
        bpf, sen, sy = (statistics.median(cost[k]) for k in ("bpf", "sensor", "symbolizer"))
        print(f"\n/ok with --go-probes, per request: {extra:.1f} us longer than untraced; "
              f"BPF programs {bpf:.1f} us, sensor CPU {sen:.1f} us, symbolizer CPU {sy:.1f} us; "
              f"the rest ({extra - bpf:.1f} us beyond the BPF run time) is the uprobe traps and "
              f"the CPU the services take from the server and the load generator")
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
