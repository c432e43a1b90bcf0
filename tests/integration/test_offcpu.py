"""Off-CPU profiles (issue 32): sonde record --off-cpu on a program whose
main thread sleeps in one function, blocks on a pipe in another and
computes in a third, measuring its own time in each. sonde's off-CPU
weights of the two blocked functions must match the program's shares
within 5 points, with the kernel frames of the wait; the pprof file
(decoded by npm pprof-format) and the OTLP export (a receiver built from
the official protos) carry the type and its units."""
import collections
import subprocess
import time

import pytest

from conftest import BUILD, SONDE, Sensor, Symbolizer, make_tmp, parse_folded, wait_for
from test_pprof import decode

WORKLOAD = BUILD / "tests" / "workload" / "sonde-offcpu-workload"
SECONDS = 6
COMM = "sonde-offcpu-wo"  # the 15 bytes of comm
FUNCS = ("offcpu_sleep", "offcpu_pipe_wait", "offcpu_compute")


@pytest.fixture(scope="module")
def recorded():
    tmp = make_tmp()
    out = tmp / "p.folded"
    proc = subprocess.run([str(SONDE), "record", "--off-cpu", "-F", "99", "-o", str(out),
                           "-o", str(tmp / "p.pb.gz"), "--", str(WORKLOAD), str(SECONDS)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    spent = [int(x) for x in proc.stdout.split("\n")[0].split()] if proc.stdout[:1].isdigit() else None
    return proc, tmp, spent


def own_shares(proc):
    """The workload's own line: the first of sonde record's stdout that
    is three numbers (the workload prints it before record's tables)."""
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            s, p, c = (int(x) for x in parts)
            return {"offcpu_sleep": 100.0 * s / (s + p), "offcpu_pipe_wait": 100.0 * p / (s + p)}
    raise AssertionError("no workload line in: " + proc.stdout[-2000:])


def by_function(stacks):
    """Off-CPU weight of the main thread's stacks through each function."""
    got = collections.Counter()
    total = 0
    for frames, weight in stacks:
        if frames[0] != COMM:
            continue
        total += weight
        for f in FUNCS:
            if f in frames:
                got[f] += weight
    return got, total


def test_offcpu_shares_match_the_program(recorded):
    proc, tmp, _ = recorded
    theirs = own_shares(proc)
    stacks = parse_folded((tmp / "p.off-cpu.folded").read_text())
    got, total = by_function(stacks)
    assert total > 0.5 * SECONDS * 1e9, f"only {total} ns off-CPU recorded"
    ours = {f: 100.0 * got[f] / total for f in theirs}
    report = ", ".join(f"{f}: sonde {ours[f]:.1f}% program {theirs[f]:.1f}%" for f in theirs)
    print(f"off-CPU shares ({total / 1e9:.2f} s): {report}")
    for f in theirs:
        assert abs(ours[f] - theirs[f]) <= 5, report
    # Computing is not off-CPU time (preemption is not counted).
    assert 100.0 * got["offcpu_compute"] / total < 2, report


def test_offcpu_kernel_frames_show_the_wait(recorded):
    _, tmp, _ = recorded
    stacks = parse_folded((tmp / "p.off-cpu.folded").read_text())
    waits = {"offcpu_sleep": collections.Counter(), "offcpu_pipe_wait": collections.Counter()}
    for frames, weight in stacks:
        for f, c in waits.items():
            if f in frames:
                c["all"] += weight
                if any(x.endswith("_[k]") and "nanosleep" in x for x in frames):
                    c["nanosleep"] += weight
                # anon_pipe_read on 6.16+
                if any(x.endswith("pipe_read_[k]") for x in frames):
                    c["pipe_read"] += weight
    assert waits["offcpu_sleep"]["nanosleep"] >= 0.95 * waits["offcpu_sleep"]["all"] > 0, waits
    assert waits["offcpu_pipe_wait"]["pipe_read"] >= 0.95 * waits["offcpu_pipe_wait"]["all"] > 0, waits


def test_record_prints_each_type(recorded):
    proc, tmp, _ = recorded
    assert "== cpu ==" in proc.stdout and "== off-cpu ==" in proc.stdout, proc.stdout[-3000:]
    assert "ns off the CPU" in proc.stdout, proc.stdout[-3000:]
    # CPU samples went to the file as named, and show the compute phase.
    cpu = parse_folded((tmp / "p.folded").read_text())
    assert any("offcpu_compute" in f for f, _ in cpu), cpu[:5]


def test_offcpu_pprof_types_and_units(recorded):
    _, tmp, _ = recorded
    prof = decode(tmp / "p.off-cpu.pb.gz")
    assert prof["sample_types"] == [["samples", "count"], ["off_cpu", "nanoseconds"]], prof["sample_types"]
    assert prof["period_type"] == ["events", "count"] and prof["default_sample_type"] == "off_cpu"
    total = sum(s["values"][1] for s in prof["samples"])
    assert total > 0.5 * SECONDS * 1e9, total
    cpu = decode(tmp / "p.pb.gz")
    assert cpu["sample_types"][0] == ["samples", "count"] and cpu["sample_types"][1][0] == "cpu"


def test_offcpu_otlp_profile_types():
    from test_otlp import Receiver
    recv = Receiver()
    recv.start()
    tmp = make_tmp()
    sym = Symbolizer(tmp, ["--otlp-endpoint", f"127.0.0.1:{recv.port}", "--otlp-insecure",
                           "--otlp-interval", "1"])
    work = subprocess.Popen([str(WORKLOAD), "4"], stdout=subprocess.DEVNULL)
    sensor = Sensor(tmp, sym.address, ["--pid", str(work.pid), "--off-cpu", "--frequency", "49"])
    try:
        work.wait(timeout=60)

        def types():
            seen = {}
            for req in recv.snapshot():
                strings = req.dictionary.string_table
                for rp in req.resource_profiles:
                    for sp in rp.scope_profiles:
                        for p in sp.profiles:
                            st = (strings[p.sample_type.type_strindex], strings[p.sample_type.unit_strindex])
                            pt = (strings[p.period_type.type_strindex], strings[p.period_type.unit_strindex])
                            seen.setdefault(st, [pt, 0])
                            seen[st][1] += sum(sum(s.values) for s in p.samples)
            return seen

        wait_for(lambda: ("off_cpu", "nanoseconds") in types() and ("samples", "count") in types(), 30,
                 "OTLP profiles of both types")
        seen = types()
        assert seen[("off_cpu", "nanoseconds")][0] == ("events", "count"), seen
        assert seen[("samples", "count")][0] == ("cpu", "nanoseconds"), seen
        assert seen[("off_cpu", "nanoseconds")][1] > 1e9, seen
    finally:
        sensor.stop()
        sym.stop()
        recv.stop()
        if work.poll() is None:
            work.kill()
