#!/usr/bin/python3
"""BPF cost per sample of the HotSpot walk (issue 29) in one run: the
same Java workload profiled at --hz by

  walk      sonde's sensor (--pid) with the default symbolizer: libjvm is
            recognised, BPF walks the Java frames;
  native    the same with the symbolizer's --interpreters none: native
            unwinding only (it stops at the first Java frame);
  bpftrace  bpftrace's frame-pointer walk,
            profile:hz:HZ /pid == N/ { @s[ustack(perf)] = count(); }

all three at once on one workload (so that they see the same load; each
sonde sensor with its own symbolizer and fresh cache), --rounds times,
a new JVM each round. The column is run_time_ns of the perf_event programs (kernel.bpf_stats_enabled,
restored afterwards) over --seconds after --settle seconds, per sample of
the workload (the programs also run, and return at once, on CPUs running
other tasks: that cost is included alike). The workload runs at nice
--nice (default -20) so that a busy machine still gives it a CPU: with
20 runnable tasks on 2 CPUs it otherwise gets a tenth of the samples and
the per-sample figure is mostly other tasks' early returns.

With a BPF build that counts the walker's reads (SONDE_HOTSPOT_COUNT_READS
in bpf/meson.build's bpf_cflags), the walk rows also give reads of target
memory per claimed sample.

  tests/bench/jvm_overhead.py --build build [--rounds 3] [--seconds 10]
       [--settle 10] [--hz 199] [--modes walk,native,bpftrace] [--base BUILD]

--base BUILD adds a fourth tracer, "base": BUILD's sensor and symbolizer
walking the same JVM at once (another branch's walk against this one's,
under the same load).

Target (issue 29): walk <= 2x native.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
DEPTH = 12


def java_script():
    """One source file java runs as it is (JEP 330): f0's loop is
    compiled, the chain above it inlined into its callers' nmethods."""
    chain = "".join(f"    static long f{k}(int n) {{ return f{k - 1}(n) + 1; }}\n"
                    for k in range(1, DEPTH))
    return ("public class Spin {\n"
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


def bpf_objects(pid):
    """The prog and map ids whose fds pid holds."""
    progs, maps = set(), set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            for line in open(f"/proc/{pid}/fdinfo/{fd}"):
                if line.startswith("prog_id:"):
                    progs.add(line.split()[1])
                elif line.startswith("map_id:"):
                    maps.add(line.split()[1])
        except OSError:
            continue
    return progs, maps


def bpftool(*args):
    out = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True).stdout
    return json.loads(out or "null")


def percpu_map(map_id):
    """A per-CPU array map's values, each summed over the CPUs, or None."""
    if map_id is None:
        return None
    out = []
    for e in bpftool("map", "dump", "id", str(map_id)) or []:
        vals = e.get("formatted", e).get("values", [])
        out.append(sum(int(v["value"]) if not isinstance(v["value"], list)
                       else int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little")
                       for v in vals))
    return out


def wait_config(sensor, pid, timeout=300):
    """Waits until the sensor's interp_procs map holds pid (libjvm's
    analysis takes seconds, more on a busy machine), then 2 s more (the
    first samples send the methods' records)."""
    end = time.time() + timeout
    while time.time() < end:
        for i in bpf_objects(sensor)[1]:
            m = bpftool("map", "show", "id", i) or {}
            if m.get("name") == "interp_procs":
                for e in bpftool("map", "dump", "id", i) or []:
                    if e.get("formatted", {}).get("key") == pid:
                        time.sleep(2)
                        return
        time.sleep(1)
    raise SystemExit(f"no interpreter config for {pid} in {timeout} s")


def taken(build, sock):
    out = subprocess.run([str(build / "cli/sonde"), "status", "--json", "--symbolizer", sock],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["samples_taken"]


def stop(procs):
    for p in reversed(procs):
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def ids_of(pid):
    """pid's perf_event program ids and its maps' ids by name."""
    progs, maps = bpf_objects(pid)
    perf = [int(i) for i in progs
            if (bpftool("prog", "show", "id", i) or {}).get("type") == "perf_event"]
    named = {}
    for i in maps:
        m = bpftool("map", "show", "id", i) or {}
        named[m.get("name")] = i
    return perf, named


def snapshot(tracer_ids, counts):
    """(run_time_ns, run_cnt) per tracer from one bpftool call, then the
    sample counts and read counters: as close together as the tools allow."""
    stats = {p["id"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0))
             for p in bpftool("prog", "show") or []}
    runs = [(sum(stats.get(i, (0, 0))[0] for i in perf), sum(stats.get(i, (0, 0))[1] for i in perf))
            for perf, _ in tracer_ids]
    return runs, [c() for c in counts], [percpu_map(named.get("hotspot_reads"))
                                         for _, named in tracer_ids]


def window(tracer_ids, counts, a):
    """Per tracer (ns per sample, samples, runs, reads or None) over one
    --seconds window; None when kernel.bpf_stats_enabled was off at its
    end (another bench restored it meanwhile)."""
    # (set again: another bench ending meanwhile may have reset it)
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    runs0, s0, r0 = snapshot(tracer_ids, counts)
    time.sleep(a.seconds)
    runs1, s1, r1 = snapshot(tracer_ids, counts)
    if open("/proc/sys/kernel/bpf_stats_enabled").read().strip() != "1":
        return None
    out = []
    for k in range(len(tracer_ids)):
        n = s1[k] - s0[k]
        if not n or runs1[k][1] == runs0[k][1]:
            return None
        reads = None
        if r0[k] and r1[k] and r1[k][1] > r0[k][1]:
            reads = [(r1[k][i] - r0[k][i]) / (r1[k][1] - r0[k][1])
                     for i in range(len(r1[k]))]
        elif r0[k] and r1[k] and len(r1[k]) >= 48 and r1[k][46] > r0[k][46]:
            # a native-only sensor of a measurement build: nothing claimed
            reads = [r1[k][i] - r0[k][i] for i in range(len(r1[k]))]
            reads[1] = runs1[k][1] - runs0[k][1]
        out.append(((runs1[k][0] - runs0[k][0]) / n, n, runs1[k][1] - runs0[k][1], reads))
    return out


def one(build, tmp, modes, a):
    """One round: every mode's tracer on one workload at once, so that all
    see the same load. Returns {mode: window()'s tuple}."""
    def build_of(m):
        return pathlib.Path(a.base).resolve() if m == "base" else build

    d = pathlib.Path(tempfile.mkdtemp(prefix="jvmb.", dir=tmp))
    d.chmod(0o755)
    (d / "Spin.java").write_text(java_script())
    (d / "Spin.java").chmod(0o644)
    procs, tracers, counts = [], [], []
    try:
        for m in modes:
            if m == "bpftrace":
                continue
            only = ["--interpreters", "none"] if m == "native" else []
            procs.append(subprocess.Popen([str(build_of(m) / "symbolizer/sonde-symbolizer"), "--listen",
                                           f"unix:{d}/{m}.sock", "--cache",
                                           f"{d}/{m}-cache/cache.db", "--user", "sonde", *only],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1)
        work = subprocess.Popen(["nice", "-n", str(a.nice), JAVA, str(d / "Spin.java")], cwd=d,
                                stdout=subprocess.DEVNULL)
        procs.append(work)
        for m in modes:
            if m == "bpftrace":
                prog = (f"profile:hz:{a.hz} /pid == {work.pid}/ "
                        "{ @s[ustack(perf)] = count(); @n = count(); }")
                t = subprocess.Popen(["bpftrace", "-e", prog], stdout=subprocess.DEVNULL,
                                     stderr=open(d / "bpftrace.log", "w"))
                counts.append(None)  # AT_n, once bpftrace made it
            else:
                sock = f"unix:{d}/{m}.sock"
                t = subprocess.Popen([str(build_of(m) / "sensor/sonde-sensor"), "--symbolizer", sock,
                                      "--pid", str(work.pid), "--frequency", str(a.hz)],
                                     stdout=open(d / f"sensor-{m}.log", "w"),
                                     stderr=subprocess.STDOUT)
                counts.append(lambda sock=sock: taken(build, sock))  # noqa: E731
            procs.append(t)
            tracers.append(t)
        time.sleep(a.settle)  # JIT warm-up
        if "walk" in modes:
            wait_config(tracers[modes.index("walk")].pid, work.pid)
        if "base" in modes:
            wait_config(tracers[modes.index("base")].pid, work.pid)
        ids = [ids_of(t.pid) for t in tracers]
        if "bpftrace" in modes:
            # bpftrace's count is exact; the sensors' (their Status) lag by
            # up to a flush: all sample the same thread at the same rate,
            # so its count is every tracer's denominator.
            at_n = ids[modes.index("bpftrace")][1].get("AT_n")
            counts = [lambda: (percpu_map(at_n) or [0])[0]] * len(tracers)
        for _ in range(5):
            got = window(ids, counts, a)
            if got:
                return dict(zip(modes, got))
            print("(bpf_stats reset during the window: measuring again)", flush=True)
        raise SystemExit("kernel.bpf_stats_enabled kept being reset")
    finally:
        stop(procs)
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--modes", default="walk,native,bpftrace")
    ap.add_argument("--base", help="another build whose walk runs at once as the mode 'base' "
                    "(added to --modes): the same workload, load and windows")
    ap.add_argument("--hz", type=int, default=199)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--settle", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nice", type=int, default=-20)
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    modes = a.modes.split(",")
    if a.base and "base" not in modes:
        modes.append("base")
    before = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    tmp = tempfile.mkdtemp(prefix="sonde-jvmbench.", dir="/tmp")
    os.chmod(tmp, 0o755)
    res = {m: [] for m in modes}
    try:
        for _ in range(a.rounds):
            got = one(build, tmp, modes, a)
            for m in modes:
                ns, n, runs, reads = got[m]
                res[m].append(ns)
                extra = (f", per claimed sample {reads[0]:.1f} reads, {reads[2]:.1f} steps "
                         f"({reads[3]:.1f} interpreted)" if reads else "")
                if reads and len(reads) >= 48 and reads[46] and not reads[2]:
                    extra = (f", not claimed: {reads[46] / (reads[1] or 1):.2f} a program run, "
                             f"{reads[45] / reads[46]:.0f} ns each, {reads[47] / reads[46]:.1f} "
                             "user frames")
                    reads = None
                if reads and len(reads) >= 16:
                    extra += ("\n         phases (ns per claimed sample, timer included): "
                              f"program {reads[4]:.0f} = begin {reads[5]:.0f} + head "
                              f"{reads[6]:.0f} + java {reads[7]:.0f} (in steps "
                              f"{reads[13]:.0f}) + tail {reads[8]:.0f} + fill/send "
                              f"{reads[9]:.0f}; frames: user {reads[12]:.1f}, before the "
                              f"first step {reads[10]:.1f}, after the last {reads[11]:.1f}, "
                              f"kernel {reads[15]:.1f}; jit_begin {reads[26]:.0f}")
                if reads and len(reads) >= 26:
                    names = ["interp(range)", "interp(blob)", "nmethod", "stub", "not mine"]
                    extra += "\n         steps: " + ", ".join(
                        f"{nm} {reads[17 + 2 * k]:.2f} x {reads[16 + 2 * k] / reads[17 + 2 * k]:.0f} ns"
                        for k, nm in enumerate(names) if reads[17 + 2 * k])
                    if len(reads) >= 34 and reads[33]:
                        extra += (f", from the per-CPU pcs {reads[33]:.2f} x "
                                  f"{reads[32] / reads[33]:.0f} ns")
                    if len(reads) >= 40:
                        extra += (f"\n         per-CPU pc misses: other pc {reads[34]:.3f}, tgid/exact "
                                  f"{reads[35]:.3f}, connection {reads[36]:.3f}, blob changed "
                                  f"{reads[37]:.3f}; scope cache hits {reads[38]:.3f}, misses "
                                  f"{reads[39]:.3f}")
                    if len(reads) >= 45 and reads[43] + reads[44]:
                        extra += (f"\n         per-CPU pc hits: {reads[43]:.2f} nmethods, {reads[44]:.2f} "
                                  f"stubs; ns per hit: check {reads[40] / (reads[43] + reads[44]):.0f}, "
                                  f"nmethod frames {reads[41] / max(reads[43], 1e-9):.0f}, step "
                                  f"{reads[42] / (reads[43] + reads[44]):.0f}")
                    extra += (f"\n         blob steps: find {reads[27]:.0f} ns ({reads[30]:.1f} "
                              f"segmap reads), header {reads[28]:.0f}, nmethod frames "
                              f"{reads[29]:.0f}")
                print(f"{m:8s} {ns:8.0f} ns/sample over {n} samples ({runs} program runs){extra}",
                      flush=True)
    finally:
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={before}"])
        shutil.rmtree(tmp, ignore_errors=True)
    med = {m: sorted(v)[len(v) // 2] for m, v in res.items()}
    print("\n| mode | ns/sample (rounds) | median | / native |\n|---|---|---|---|")
    for m in modes:
        rel = f"{med[m] / med['native']:.2f}x" if "native" in med else "-"
        print(f"| {m} | {' / '.join(f'{v:,.0f}' for v in res[m])} | {med[m]:,.0f} | {rel} |")
    print(f"\n{DEPTH}-deep Java chain over a hot loop, {a.hz} Hz, nice {a.nice}, "
          f"{a.rounds} rounds of {a.seconds:g} s")


if __name__ == "__main__":
    main()
