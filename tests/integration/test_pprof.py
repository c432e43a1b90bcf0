"""pprof export, decoded by a decoder sonde did not write: the npm package
pprof-format, in Node (tests/pprof/decode.mjs; gunzip with Node's zlib).
Neither Go nor `go tool pprof` is needed.

The same samples are also written as folded stacks by the same symbolizer
(`sonde record -o x.pb.gz -o x.folded`: one recording; and `sonde pprof`
+ `sonde folded` against one running symbolizer), and the two must agree:
the same total, per comm, the same stacks, leaf and frame names (aliases of
one symbol, like open/__open, and gcc clones, foo/foo.constprop.0, count
as one name: the folded text and the pprof functions come from different
lookups; the differences are printed); the workload's
functions carry a source file and line; mappings carry build IDs; samples
carry pid/tid/comm labels."""
import collections
import json
import os
import re
import subprocess
import time

import pytest

from conftest import (SONDE, SRC, WORKLOAD, Sensor, Symbolizer, make_tmp, parse_folded,
                      symbols_pb2, wait_for)

HZ = 199
SECONDS = 4
WORKLOAD_FUNCTIONS = ("leaf_a_compute", "leaf_b_hash", "work_lib_leaf", "main")
KERNEL_MIN = 0xffff800000000000
PPROF_DIR = SRC / "tests" / "pprof"


def decode(path):
    if not (PPROF_DIR / "node_modules" / "pprof-format").is_dir():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=PPROF_DIR,
                       check=True, capture_output=True, timeout=300)
    p = subprocess.run(["node", str(PPROF_DIR / "decode.mjs"), str(path)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def frame_name(loc):
    """A pprof location as the folded output names it: the function the
    code is in (the last line; inlined callees come before it), kernel
    frames with _[k], unknown ones as basename+0xOFFSET."""
    kernel = loc["mapping"] == 0 and int(loc["address"], 16) >= KERNEL_MIN
    if loc["lines"]:
        name = loc["lines"][-1]["name"]
    else:
        name = "[unknown]"
    return name + "_[k]" if kernel else name


def pprof_stacks(prof):
    """Counter of (comm, frames root first) -> samples."""
    stacks = collections.Counter()
    for s in prof["samples"]:
        frames = tuple(frame_name(l) for l in reversed(s["locations"]))
        stacks[(s["labels"].get("comm", ""), frames)] += s["values"][0]
    return stacks


def folded_stacks(text):
    stacks = collections.Counter()
    for frames, count in parse_folded(text):
        stacks[(frames[0], tuple(frames[1:]))] += count
    return stacks


def gnu_build_id(path):
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def alias_map(prof):
    """name -> one name for all the function symbols at the same address of
    a mapped file or its debug file (libc's open, __open, __GI___open64...):
    the folded text
    and the pprof functions come from two lookups (symbol table, source
    index) that may pick different aliases of one function."""
    canon = {}
    for m in prof["mappings"]:
        # The symbolizer also reads the separate debug file (by build ID).
        bid = m["build_id"]
        debug = f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
        out = "".join(subprocess.run(["readelf", "-Ws", "--wide", path], capture_output=True,
                                     text=True).stdout
                      for path in (m["filename"], debug) if os.path.exists(path))
        groups = collections.defaultdict(set)
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 8 and f[3] in ("FUNC", "IFUNC") and f[6] != "UND":
                groups[int(f[1], 16)].add(f[7].split("@")[0])
        for names in groups.values():
            if len(names) > 1:
                first = min(names)
                for n in names:
                    canon.setdefault(n, first)
    return canon


# gcc's clone suffixes: the symbol table names foo.constprop.0 where the
# source index may name the function foo.
# Demangled names spell it "ns::f(long) (.isra.0)".
CLONE = re.compile(r"(\.(constprop|isra|part|cold|lto_priv)(\.\d+)?"
                   r"| \(\.(constprop|isra|part|cold|lto_priv)(\.\d+)?\))+$")


def canonical(stacks, canon):
    out = collections.Counter()
    for (comm, frames), n in stacks.items():
        out[(comm, tuple(canon_name(f, canon) for f in frames))] += n
    return out


def canon_name(f, canon):
    f = canon.get(f, f)
    base = CLONE.sub("", f)
    return canon.get(base, base)


def compare(prof, folded_text, hz):
    """The checks both ways of getting the two outputs share."""
    canon = alias_map(prof)
    raw_f, raw_p = folded_stacks(folded_text), pprof_stacks(prof)
    raw_names_f = {n for (_, fr) in raw_f for n in fr}
    raw_names_p = {n for (_, fr) in raw_p for n in fr}
    # Shown, not failed: the two lookups' choice among a symbol's names.
    print(f"names only in folded: {sorted(raw_names_f - raw_names_p)}; "
          f"only in pprof: {sorted(raw_names_p - raw_names_f)}")
    folded = canonical(raw_f, canon)
    ours = canonical(raw_p, canon)
    f_total = sum(folded.values())
    p_total = sum(ours.values())
    print(f"pprof {p_total} samples in {len(prof['samples'])} samples, folded {f_total} in {len(folded)} stacks")
    # Few samples still compare; a loaded machine gives the workload less CPU.
    assert f_total > 50, f"only {f_total} samples"
    assert p_total == f_total

    # Sample types, period, values.
    if hz:
        period = 1_000_000_000 // hz
        assert prof["sample_types"] == [["samples", "count"], ["cpu", "nanoseconds"]]
        assert prof["period_type"] == ["cpu", "nanoseconds"] and prof["period"] == period
        for s in prof["samples"]:
            assert s["values"][1] == s["values"][0] * period
    now = time.time_ns()
    assert now - 3600 * 10**9 < prof["time_nanos"] <= now
    assert prof["duration_nanos"] > 0

    # Per comm, and the names: leaves and every frame.
    comm_p, comm_f = collections.Counter(), collections.Counter()
    for (comm, _), n in ours.items():
        comm_p[comm] += n
    for (comm, _), n in folded.items():
        comm_f[comm] += n
    assert comm_p == comm_f, (comm_p, comm_f)
    leaves_p = {fr[-1] for (_, fr) in ours if fr}
    leaves_f = {fr[-1] for (_, fr) in folded if fr}
    assert leaves_p == leaves_f, (leaves_p ^ leaves_f)
    names_p = {n for (_, fr) in ours for n in fr}
    names_f = {n for (_, fr) in folded for n in fr}
    assert names_p == names_f, (names_p ^ names_f)
    # Every function of the table: the frames' names (kernel ones without
    # the folded suffix), plus callees inlined into them.
    funcs = {canon_name(f["name"], canon) for f in prof["functions"]}
    plain_f = {canon_name(n[:-4], canon) if n.endswith("_[k]") else n for n in names_f}
    assert plain_f <= funcs, plain_f - funcs
    inlined = {canon_name(ln["name"], canon)
               for s in prof["samples"] for l in s["locations"] for ln in l["lines"][:-1]}
    assert funcs - plain_f <= inlined, funcs - plain_f - inlined
    # Stack by stack: both are the same rows, symbolized twice.
    mismatched = (ours - folded) + (folded - ours)
    assert not mismatched, list(mismatched.items())[:5]

    # The workload's functions have a file and a line.
    for fn in WORKLOAD_FUNCTIONS:
        lines = [ln for s in prof["samples"] for l in s["locations"] for ln in l["lines"]
                 if ln["name"] == fn]
        assert lines, f"{fn} in no sample"
        assert all(ln["file"] and ln["line"] > 0 for ln in lines), (fn, lines[:3])

    # Mappings: build IDs; the workload's is its GNU build ID.
    assert prof["mappings"], "no mappings"
    for m in prof["mappings"]:
        assert m["build_id"] and m["filename"], m
        assert m["memory_limit"] > m["memory_start"], m
    work = [m for m in prof["mappings"] if m["filename"].endswith("/sonde-workload")]
    assert work, [m["filename"] for m in prof["mappings"]]
    want = gnu_build_id(WORKLOAD)
    assert work[0]["build_id"] == (want or work[0]["build_id"]), (work[0], want)
    assert re.fullmatch(r"[0-9a-f]+", work[0]["build_id"]), work[0]
    # Locations of the workload carry its mapping and a file offset.
    mapped = [l for s in prof["samples"] for l in s["locations"] if l["mapping"]]
    assert mapped and all(int(l["address"], 16) < 1 << 47 for l in mapped)

    # Labels: pid, tid, comm on every sample.
    for s in prof["samples"]:
        lab = s["labels"]
        assert isinstance(lab.get("pid"), int) and lab["pid"] > 0, lab
        assert isinstance(lab.get("tid"), int) and lab["tid"] > 0, lab
        assert isinstance(lab.get("comm"), str) and lab["comm"], lab
    return ours, folded


@pytest.fixture(scope="module")
def recorded():
    tmp = make_tmp()
    pb, folded = tmp / "workload.pb.gz", tmp / "workload.folded"
    proc = subprocess.run([str(SONDE), "record", "-F", str(HZ), "-o", str(pb), "-o", str(folded), "--",
                           str(WORKLOAD), str(SECONDS)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "samples to" in proc.stderr and "stacks to" in proc.stderr, proc.stderr
    return pb, folded


def test_record_pprof_matches_folded(recorded):
    pb, folded = recorded
    assert pb.read_bytes()[:2] == b"\x1f\x8b", "not gzip"
    assert not list(pb.parent.glob("*.tmp.*")), "a temporary file was left"
    prof = decode(pb)
    compare(prof, folded.read_text(), HZ)
    # pprof takes the first mapping as the program.
    assert prof["mappings"][0]["filename"].endswith("/sonde-workload"), prof["mappings"][0]
    # The recording's own time span, not the store's whole minute.
    assert SECONDS * 10**9 <= prof["duration_nanos"] < 50 * 10**9, prof["duration_nanos"]
    # Threads: the workload's second thread is its own tid and comm.
    tids = {s["labels"]["tid"] for s in prof["samples"] if s["labels"]["comm"] == "workload-b"}
    pids = {s["labels"]["pid"] for s in prof["samples"]}
    assert tids and not tids & pids, (tids, pids)


def test_pprof_command_against_a_running_symbolizer():
    """sonde pprof and sonde folded on one symbolizer, after the sensor is
    gone: the rate comes from -F (without it, counts only)."""
    tmp = make_tmp()
    sym = Symbolizer(tmp)
    sensor = None
    try:
        # The workload waits on a fifo until the sensor is connected (sh
        # execs it, so the pid stays), so its whole run is profiled.
        fifo = tmp / "go"
        os.mkfifo(fifo)
        work = subprocess.Popen(["sh", "-c", f'read go < {fifo}; exec "$@"', "sh", str(WORKLOAD),
                                 str(SECONDS)])
        sensor = Sensor(tmp, sym.address, ["--pid", str(work.pid), "--frequency", str(HZ)])
        wait_for(lambda: sym.status().sensors_connected == 1, 30, "the sensor to connect")
        with open(fifo, "w") as f:
            f.write("go\n")
        work.wait(SECONDS + 60)
        time.sleep(1.5)  # the sensor's last flush
        sensor.stop()
        wait_for(lambda: sym.status().sensors_connected == 0, 30, "the sensor's stream to end")
        env = dict(os.environ, SONDE_SYMBOLIZER=sym.address)
        pb, pb_counts = tmp / "p.pb.gz", tmp / "counts.pprof"
        r = subprocess.run([str(SONDE), "pprof", "-F", str(HZ), "-o", str(pb)], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        f = subprocess.run([str(SONDE), "folded"], env=env, capture_output=True, text=True, timeout=60)
        assert f.returncode == 0, f.stderr
        ours, _ = compare(decode(pb), f.stdout, HZ)
        assert {s["labels"]["pid"] for s in decode(pb)["samples"]} == {work.pid}

        # No rate given and no sensor connected: sample counts only.
        r = subprocess.run([str(SONDE), "pprof", "-o", str(pb_counts)], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        counts = decode(pb_counts)
        assert counts["sample_types"] == [["samples", "count"]] and counts["period_type"] is None
        assert sum(s["values"][0] for s in counts["samples"]) == sum(ours.values())

        # --pid filters (pid 1 has no samples); -o is required.
        r = subprocess.run([str(SONDE), "pprof", "--pid", "1", "-o", str(pb_counts)], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and decode(pb_counts)["samples"] == [], r.stderr
        r = subprocess.run([str(SONDE), "pprof"], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "-o FILE.pb.gz" in r.stderr

        # Any client (python3-grpcio): a window far in the future is an
        # empty profile, not an error.
        far = sym.symbols.Pprof(symbols_pb2.ProfileQuery(since_unix_s=2**64 - 1), timeout=30)
        assert far.total_samples == 0 and far.profile[:2] == b"\x1f\x8b"
        pb_far = tmp / "far.pb.gz"
        pb_far.write_bytes(far.profile)
        assert decode(pb_far)["samples"] == []
    finally:
        if sensor:
            sensor.stop()
        sym.stop()
