#!/usr/bin/python3
"""Benchmark (not a test): the cost of profiling a CPU-bound workload on
every CPU, side by side in one run, at 19 Hz and 99 Hz:

  sonde   sensor + symbolizer, unwinding with .eh_frame tables
  bpftrace profile:hz:N { @[ustack, kstack] = count(); }  (frame pointers only,
          aggregates in the kernel)
  perf    perf record -g -a (frame pointers, writes every sample to a file)

sonde's cache is warmed by an unmeasured run first (--cold: not). For
each, once its start-up is over (a second in which it used under 10 ms of
CPU, at most 30 s): CPU seconds of the tool's processes, peak RSS, BPF map memory,
BPF run time per sample (kernel.bpf_stats_enabled), and the workload's
slowdown against an unprofiled run. The workload is Debian's xz -9 (no
frame pointers) on a fixed input, one instance per CPU.

  sudo tests/bench/unwind_overhead.py [--build DIR] [--rounds N] [--mb MB] [--cold]

With --rounds N each tool's run alternates with an unprofiled one and
every figure is the median of N.

  sudo tests/bench/unwind_overhead.py --slowdown N [--hz 99] [--mb MB]

measures only the workload's slowdown under sonde, closely: N pairs of
runs (unprofiled, sonde; the order alternating between pairs so that a
drift in the machine's speed cancels), each pair's ratio, and their mean
with a 95 % confidence interval.

Ratios matter, not absolute times: this machine is shared and noisy.
"""
import argparse
import itertools
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SRC = pathlib.Path(__file__).resolve().parents[2]


def clk():
    return os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    """CPU time of pid's threads, in seconds: the sum of their schedstat
    run times (nanoseconds), plus the ticks of exited threads and reaped
    children, which only /proc/PID/stat keeps. Only where no cgroup can be
    made (CpuGroup): every thread's 10 ms ticks are truncated apart, so the
    exited-thread term alone moved by 10-30 ms over a 12 s run of sonde's
    ~20 threads against a cgroup's count of the same run."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks_all = (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / clk()
    ns = 0
    ticks_live = 0.0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            ns += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
            g = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
            ticks_live += (int(g[11]) + int(g[12])) / clk()
        except OSError:
            pass  # the thread ended meanwhile
    return ns / 1e9 + max(0.0, ticks_all - ticks_live)


GROUP_SEQ = itertools.count()
BPF_PROG_TYPE_PERF_EVENT = "7"  # enum bpf_prog_type, as fdinfo prints it


class CpuGroup:
    """The CPU time of a tool's processes, from a cgroup of their own: the
    kernel counts every thread's run time there to the nanosecond (v1
    cpuacct.usage) or microsecond (v2 cpu.stat), exited threads and
    children included. Without a cgroup hierarchy to write to: proc_cpu_s."""

    def __init__(self, name, pids):
        self.pids, self.dir, self.v2 = pids, None, False
        roots = [(m[1], m[2] == "cgroup2") for m in
                 (line.split() for line in open("/proc/mounts"))
                 if (m[2] == "cgroup" and "cpuacct" in m[3].split(",")) or m[2] == "cgroup2"]
        for root, v2 in sorted(roots, key=lambda r: r[1]):  # v1 cpuacct first
            d = pathlib.Path(root) / name
            try:
                d.mkdir()
                for pid in pids:
                    (d / "cgroup.procs").write_text(str(pid))
            except OSError:
                if d.exists():
                    self.dir = d
                    self.close()
                self.dir = None
                continue
            self.dir, self.v2 = d, v2
            break
        if self.dir is None:
            print(f"no cgroup for {name}: CPU time from /proc (ticks, coarse)", file=sys.stderr)

    def cpu_s(self):
        if self.dir is None:
            return sum(proc_cpu_s(p) for p in self.pids)
        if self.v2:
            for line in (self.dir / "cpu.stat").read_text().splitlines():
                k, v = line.split()
                if k == "usage_usec":
                    return int(v) / 1e6
        return int((self.dir / "cpuacct.usage").read_text()) / 1e9

    def close(self):
        """After the processes exited: the cgroup can go."""
        if self.dir is not None:
            try:
                self.dir.rmdir()
            except OSError as e:
                print(f"cgroup {self.dir} left behind: {e}", file=sys.stderr)
            self.dir = None


def proc_hwm_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def bpf_progs():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
    return {p["id"]: p for p in json.loads(out or "[]")}


def bpf_maps():
    out = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True).stdout
    return {m["id"]: m for m in json.loads(out or "[]")}


def run_workload(inp, ncpu, cpu=None, tool=None):
    """Wall seconds of ncpu xz runs side by side; their CPU seconds
    (user + system, from wait4) appended to cpu when given. tool.mark()
    runs STEADY_AFTER_S after the start, when the tool has seen the new
    processes (their scans, tables, first flushes)."""
    t0 = time.monotonic()
    procs = [subprocess.Popen(["xz", "-9", "-T1", "-c", str(inp)], stdout=subprocess.DEVNULL)
             for _ in range(ncpu)]
    if tool:
        time.sleep(STEADY_AFTER_S)
        tool.mark()
    used = 0.0
    for p in procs:
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        used += ru.ru_utime + ru.ru_stime
    if cpu is not None:
        cpu.append(used)
    return time.monotonic() - t0


# The steady-state rate is measured from this long after the workload's
# start to its end: before it, sonde does per-process work (a scan of the
# new process, its tables loaded, the young-process drains) that a
# frame-pointer profiler aggregating in the kernel does not.
STEADY_AFTER_S = 2.5


class Tool:
    def __init__(self, name, hz, build, tmp):
        self.name, self.hz, self.build, self.tmp = name, hz, pathlib.Path(build), tmp
        self.pids = []

    def start(self):
        self.progs0, self.maps0 = set(bpf_progs()), set(bpf_maps())
        if self.name == "sonde":
            sock = f"unix:{self.tmp}/bench.sock"
            sym = subprocess.Popen([str(self.build / "symbolizer/sonde-symbolizer"), "--listen", sock,
                                    "--cache", f"{self.tmp}/cache/cache.db", "--user", "sonde"],
                                   stderr=subprocess.DEVNULL)
            time.sleep(1)
            sen = subprocess.Popen([str(self.build / "sensor/sonde-sensor"), "--symbolizer", sock,
                                    "--frequency", str(self.hz)], stderr=subprocess.DEVNULL)
            self.pids = [sym, sen]
        elif self.name == "bpftrace":
            prog = f"profile:hz:{self.hz} {{ @[ustack, kstack] = count(); }}"
            self.pids = [subprocess.Popen(["bpftrace", "-e", prog], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)]
        elif self.name == "perf":
            self.pids = [subprocess.Popen(["perf", "record", "-q", "-g", "-a", "-F", str(self.hz),
                                           "-e", "cpu-clock", "-o", f"{self.tmp}/perf.data"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        # A group per process, for the split printed on stderr.
        self.groups = [CpuGroup(f"sonde-bench.{os.getpid()}.{next(GROUP_SEQ)}.{self.name}", [p.pid])
                       for p in self.pids]
        # Measure the steady state: wait until start-up work (LLVM for
        # bpftrace; for sonde hashing the host's files, loading their
        # tables) is over, i.e. a second in which the tool used < 10 ms.
        time.sleep(1)
        self.settle_s = 1.0
        prev = self.cpu_s()
        while self.settle_s < 30:
            time.sleep(1)
            self.settle_s += 1
            cur = self.cpu_s()
            if cur - prev < 0.010:
                break
            prev = cur
        self.split0 = [g.cpu_s() for g in self.groups]
        self.cpu0 = sum(self.split0)
        self.stats0 = self.bpf_run()

    def cpu_s(self):
        return sum(g.cpu_s() for g in self.groups)

    def bpf_run(self):
        """Run time and count of the tool's perf_event programs, from the
        fdinfo of the descriptors it holds: bpftool would be a process
        started inside the measured window, which sonde (tracking every
        new process) pays for and the other tools do not."""
        progs = {}
        for p in self.pids:
            try:
                fds = os.listdir(f"/proc/{p.pid}/fdinfo")
            except OSError:
                continue
            for fd in fds:
                try:
                    text = open(f"/proc/{p.pid}/fdinfo/{fd}").read()
                except OSError:
                    continue
                info = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
                if info.get("prog_type", "").strip() == BPF_PROG_TYPE_PERF_EVENT:
                    progs[info["prog_id"].strip()] = (int(info.get("run_time_ns", "0")),
                                                      int(info.get("run_cnt", "0")))
        return sum(v[0] for v in progs.values()), sum(v[1] for v in progs.values())

    def map_bytes(self):
        now = bpf_maps()
        return sum(int(m.get("bytes_memlock", 0)) for i, m in now.items() if i not in self.maps0)

    def mark(self):
        self.mark_at = (time.monotonic(), self.cpu_s())

    def stop(self):
        now, split = time.monotonic(), [g.cpu_s() for g in self.groups]
        cpu = sum(split)
        res = {"cpu_s": cpu - self.cpu0,
               "cpu_split_s": [round(b - a, 4) for a, b in zip(self.split0, split)],
               "settle_s": self.settle_s,
               "rss_kib": max(proc_hwm_kib(p.pid) for p in self.pids[-1:]),
               "map_bytes": self.map_bytes()}
        t_mark, cpu_mark = getattr(self, "mark_at", (now, cpu))
        res["steady_ms_s"] = 1000.0 * (cpu - cpu_mark) / (now - t_mark) if now > t_mark else 0.0
        ns, cnt = self.bpf_run()
        ns0, cnt0 = self.stats0
        res["ns_per_sample"] = (ns - ns0) / (cnt - cnt0) if cnt > cnt0 else 0
        res["samples"] = cnt - cnt0
        # Whole-life CPU (start-up, exit and everything between), from
        # wait4's rusage: bpftrace does its user-space work (symbolizing
        # the in-kernel map) at exit, sonde as it goes, both after loading.
        life = 0.0
        for p in reversed(self.pids):
            p.send_signal(signal.SIGINT)
            deadline = time.monotonic() + 60
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    life += ru.ru_utime + ru.ru_stime
                    p.returncode = status
                    break
                if time.monotonic() > deadline:
                    p.kill()
                    _, _, ru = os.wait4(p.pid, 0)
                    life += ru.ru_utime + ru.ru_stime
                    break
                time.sleep(0.05)
        res["life_cpu_s"] = life
        for g in self.groups:
            g.close()
        return res


# Two-sided 95 % Student t quantiles by degrees of freedom (beyond 30: 2.0).
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 19: 2.09, 24: 2.06, 29: 2.05}


def mean_ci(ratios):
    """Mean of the ratios and the half-width of its 95 % interval."""
    n = len(ratios)
    # Missing df rows take the next smaller df's (wider) quantile.
    t = T95[max(k for k in T95 if k <= n - 1)] if n - 1 < 30 else 2.0
    return statistics.mean(ratios), t * statistics.stdev(ratios) / n ** 0.5


def slowdown(args, inp, ncpu, tmp):
    """Wall time is what a user sees; the workload's own CPU time is the
    steadier figure on a shared VM (time stolen by neighbours is in the
    wall time, not in it), and it includes the BPF programs, which run in
    the workload's context. Time the sensor and symbolizer take from the
    workload's CPUs shows only in the wall time; their own CPU time is
    printed beside it."""
    wall, cpu, tool_cpu, sonde_cpu = [], [], [], []
    print("| pair | unprofiled wall s | sonde wall s | wall ratio | unprofiled CPU s | sonde CPU s | CPU ratio | sonde processes CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for i in range(args.slowdown):
        got, used = {}, {}
        for which in (("none", "sonde") if i % 2 == 0 else ("sonde", "none")):
            c = []
            if which == "none":
                got["none"] = run_workload(inp, ncpu, c)
            else:
                t = Tool("sonde", args.hz, args.build, tmp)
                t.start()
                got["sonde"] = run_workload(inp, ncpu, c)
                tool_cpu.append(t.stop()["cpu_s"])
            used[which] = c[0]
        sonde_cpu.append(used["sonde"])
        wall.append(got["sonde"] / got["none"])
        cpu.append(used["sonde"] / used["none"])
        print(f"| {i + 1} | {got['none']:.3f} | {got['sonde']:.3f} | {wall[-1]:.4f} | "
              f"{used['none']:.3f} | {used['sonde']:.3f} | {cpu[-1]:.4f} | {tool_cpu[-1]:.3f} |",
              flush=True)
    print(f"\nxz -9 on {args.mb} MB, {ncpu} instances (one per CPU), sonde at {args.hz} Hz, "
          f"{len(wall)} pairs:")
    for name, r in (("wall time", wall), ("workload CPU time", cpu)):
        mean, half = mean_ci(r) if len(r) > 1 else (r[0], float("nan"))
        print(f"- {name}: mean {100 * (mean - 1):+.2f}% (95% CI {100 * (mean - half - 1):+.2f}% to "
              f"{100 * (mean + half - 1):+.2f}%), median {100 * (statistics.median(r) - 1):+.2f}%")
    print(f"- sonde's processes: {statistics.mean(tool_cpu):.3f} CPU s per run, "
          f"{100 * sum(tool_cpu) / sum(sonde_cpu):.2f}% of the workload's CPU time under sonde")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(SRC / "build"))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--mb", type=int, default=24, help="size of the xz input")
    ap.add_argument("--slowdown", type=int, default=0, metavar="N",
                    help="only the workload's slowdown under sonde, from N paired runs")
    ap.add_argument("--hz", type=int, default=99, help="sampling frequency for --slowdown")
    ap.add_argument("--cold", action="store_true",
                    help="measure sonde with an empty cache (default: warm it first, as a "
                         "restarted sonde finds it)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    for tool in ("bpftrace", "perf", "xz"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing (apt-get install bpftrace linux-perf xz-utils)")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sonde-bench.", dir="/tmp"))
    tmp.chmod(0o755)
    inp = tmp / "input"
    with open(inp, "wb") as f:
        for i in range(args.mb * 16):
            f.write((b"%08d " % i) * 1000 + os.urandom(56000))
    ncpu = os.cpu_count()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    rows = []
    try:
        if not args.cold:
            # The symbolizer's cache outlives restarts: analyse the host's
            # files once, unmeasured, so the runs below see the steady state.
            t = Tool("sonde", 19, args.build, tmp)
            t.start()
            run_workload(inp, ncpu)
            t.stop()
        if args.slowdown:
            slowdown(args, inp, ncpu, tmp)
            return
        for hz in (19, 99):
            # Rounds interleave the unprofiled run and the tools, so that a
            # burst of load elsewhere on the machine hits them alike; each
            # figure is the median over the rounds.
            times = {n: [] for n in ("none", "sonde", "bpftrace", "perf")}
            results = {n: [] for n in ("sonde", "bpftrace", "perf")}
            for _ in range(args.rounds):
                times["none"].append(run_workload(inp, ncpu))
                for name in ("sonde", "bpftrace", "perf"):
                    t = Tool(name, hz, args.build, tmp)
                    t.start()
                    times[name].append(run_workload(inp, ncpu, tool=t))
                    res = t.stop()
                    res["wall_s"] = times[name][-1]
                    results[name].append(res)
            base = statistics.median(times["none"])
            for name in ("sonde", "bpftrace", "perf"):
                res = {k: statistics.median(r[k] for r in results[name])
                       for k in results[name][0] if k != "cpu_split_s"}
                res["slowdown_pct"] = 100.0 * (statistics.median(times[name]) / base - 1)
                rows.append((hz, name, res, base))
                # Per process (sonde: symbolizer, sensor), each round.
                split = [r["cpu_split_s"] for r in results[name]]
                print(f"{hz} Hz {name}: {res} CPU s per process {split} times {times[name]} "
                      f"unprofiled {times['none']}", file=sys.stderr)
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nworkload: xz -9 on {args.mb} MB, {ncpu} instances (one per CPU); unprofiled run "
          f"{rows[0][3]:.1f} s at 19 Hz, {rows[-1][3]:.1f} s at 99 Hz\n")
    # Total CPU = the tool's own processes + the BPF programs' run time
    # (spent in the profiled tasks' context, so no process shows it).
    for _, _, r, _ in rows:
        r["total_s"] = r["cpu_s"] + r["ns_per_sample"] * r["samples"] / 1e9
    print("| Hz | tool | process CPU s | BPF CPU s | total CPU s | total vs bpftrace | process CPU ms/s, steady | steady total vs bpftrace | process CPU s, whole life | start-up s | RSS MiB | BPF maps MiB | BPF ns/sample | samples | workload slowdown |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for hz, name, r, _ in rows:
        bt = next(x for h, n, x, _ in rows if h == hz and n == "bpftrace")
        ratio = f"{r['total_s'] / bt['total_s']:.2f}x" if bt["total_s"] > 0 else "n/a"
        # Steady total: the processes' rate after the start plus the BPF
        # programs' rate over the whole run (per sample, so the same then).
        def steady(x):
            return x["steady_ms_s"] + (x["total_s"] - x["cpu_s"]) * 1000.0 / (x["wall_s"] or 1)
        sratio = f"{steady(r) / steady(bt):.2f}x" if steady(bt) > 0 else "n/a"
        print(f"| {hz} | {name} | {r['cpu_s']:.3f} | {r['total_s'] - r['cpu_s']:.3f} | {r['total_s']:.3f} | "
              f"{ratio} | {r['steady_ms_s']:.2f} | {sratio} | {r['life_cpu_s']:.2f} | {r['settle_s']:.0f} | {r['rss_kib'] / 1024:.1f} | {r['map_bytes'] / 2**20:.1f} | "
              f"{r['ns_per_sample']:.0f} | {r['samples']} | {r['slowdown_pct']:+.2f}% |")


if __name__ == "__main__":
    main()
