"""sonde record on the test workload, compared with perf record -g on the
same workload in the same test."""
import collections
import os
import re
import subprocess
import time

import pytest

from conftest import SONDE, WORKLOAD, contains_chain, make_tmp, parse_folded

SECONDS = 8
HZ = 199
CHAINS = {
    "a": ["main", "run_main_thread", "chain_a", "a_middle", "leaf_a_compute"],
    "b": ["thread_b", "b_middle", "leaf_b_hash"],
    "c": ["main", "run_main_thread", "chain_c", "work_lib_entry", "work_lib_leaf"],
}
LEAVES = {"leaf_a_compute", "leaf_b_hash", "work_lib_leaf"}


def perf_attach(pid, data):
    """perf record -g on an already running process, until it exits."""
    return subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(HZ), "-g",
                             "-o", str(data), "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def perf_stacks(data):
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,tid,ip,sym"], check=True,
                         capture_output=True, text=True).stdout
    stacks = []
    for block in out.split("\n\n"):
        lines = [l.split() for l in block.strip().splitlines()]
        if len(lines) < 2:
            continue
        frames = [l[1] if len(l) > 1 else "[unknown]" for l in lines[1:]]
        stacks.append((lines[0][0], list(reversed(frames)), 1))  # root first, like folded
    return stacks


def new_workload_pid(before, timeout=30):
    """The pid of a workload process that was not running before."""
    exe = str(WORKLOAD.resolve())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for d in os.listdir("/proc"):
            if d.isdigit() and int(d) not in before:
                try:
                    if os.readlink(f"/proc/{d}/exe") == exe:
                        return int(d)
                except OSError:
                    pass
        time.sleep(0.02)
    raise AssertionError("the recorded workload never started")


def shares(stacks):
    total = sum(c for _, _, c in stacks)
    got = collections.Counter()
    for _, frames, count in stacks:
        for name, chain in CHAINS.items():
            if contains_chain(frames, chain):
                got[name] += count
    return {name: 100.0 * got[name] / total for name in CHAINS}, total


@pytest.fixture(scope="module")
def recorded():
    """sonde record on the workload, and perf record -g attached to the
    same process for as long as it runs: both sample one execution, so
    their shares agree however a loaded machine schedules its threads."""
    tmp = make_tmp()
    out, data = tmp / "workload.folded", tmp / "perf.data"
    before = {int(d) for d in os.listdir("/proc") if d.isdigit()}
    rec = subprocess.Popen([str(SONDE), "record", "-F", str(HZ), "-o", str(out), "--",
                            str(WORKLOAD), str(SECONDS), "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        perf = perf_attach(new_workload_pid(before), data)
        stdout, stderr = rec.communicate(timeout=120)
        _, perf_err = perf.communicate(timeout=60)
    finally:
        rec.kill()
    assert perf.returncode == 0, perf_err
    proc = subprocess.CompletedProcess(rec.args, rec.returncode, stdout, stderr)
    return proc, out, perf_stacks(data)


def test_record_exits_with_command_status(recorded):
    proc, _, _ = recorded
    assert proc.returncode == 3, proc.stderr[-3000:]


def test_record_prints_top_functions(recorded):
    proc, _, _ = recorded
    assert "FUNCTION" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    for leaf in LEAVES:
        assert leaf in proc.stdout, proc.stdout


def test_record_samples_end_in_workload_leaves(recorded):
    _, out, perf = recorded
    stacks = parse_folded(out.read_text())
    total = sum(c for _, c in stacks)
    # perf sampled the same execution's CPU time at the same rate from a
    # moment after its exec; far fewer means sampling or the pid filter is
    # broken (a loaded machine gives both fewer samples, not one).
    assert total > 0.8 * len(perf) > 0, f"only {total} samples, perf {len(perf)}"
    in_leaves = sum(c for frames, c in stacks if frames[-1] in LEAVES)
    assert in_leaves / total >= 0.90, f"{in_leaves}/{total} samples end in the workload's leaves"


def test_record_chains_match_perf(recorded):
    _, out, perf = recorded
    ours, n_ours = shares([(f[0], f[1:], c) for f, c in parse_folded(out.read_text())])
    theirs, n_theirs = shares(perf)
    report = ", ".join(f"{k}: sonde {ours[k]:.1f}% perf {theirs[k]:.1f}%" for k in CHAINS)
    print(f"chain shares ({n_ours} sonde samples, {n_theirs} perf samples): {report}")
    for name in CHAINS:
        assert ours[name] > 5, f"chain {name} missing from sonde's profile: {report}"
        assert abs(ours[name] - theirs[name]) <= 5, report


def test_record_folded_format(recorded):
    _, out, _ = recorded
    for line in out.read_text().splitlines():
        frames, sep, count = line.rpartition(" ")
        assert sep and count.isdigit() and int(count) > 0, line
        # "sonde": the forked child between fork and exec of the workload
        assert frames.split(";")[0] in ("sonde-workload", "workload-b", "sonde"), line


def test_record_help_and_bad_arguments():
    h = subprocess.run([str(SONDE), "record", "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "usage: sonde record" in h.stdout
    bad = subprocess.run([str(SONDE), "record", "-F", "12abc", "--all"], capture_output=True, text=True)
    assert bad.returncode == 2 and "-F" in bad.stderr
    none = subprocess.run([str(SONDE), "record"], capture_output=True, text=True)
    assert none.returncode == 2 and "--all" in none.stderr


def test_record_progress_only_on_a_terminal(recorded):
    # Not a terminal (the fixture's pipes): no progress line at all.
    proc, _, _ = recorded
    assert "\r" not in proc.stderr and "samples  " not in proc.stderr, proc.stderr[-2000:]
    # On a terminal (script(1) gives it a pty): the line is redrawn in
    # place with the samples so far, and erased at the end.
    tmp = make_tmp()
    cmd = f"{SONDE} record -F 99 -o {tmp / 'p.folded'} -- {WORKLOAD} 3"
    p = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True,
                       timeout=120, env={"TERM": "xterm", "PATH": "/usr/bin:/bin"})
    out = p.stdout.decode(errors="replace")  # bytes: text mode would turn \r into \n
    assert p.returncode == 0, out[-2000:]
    counts = [int(n) for n in re.findall(r"\r\x1b\[Ksonde record: \d+:\d\d  (\d+) samples  0 lost", out)]
    assert len(counts) >= 2 and counts[-1] > 0 and counts == sorted(counts), repr(out[-2000:])
    # The services say nothing on a good run (only warnings would show).
    assert "info:" not in out, out[-2000:]
