"""Go stacks through the sensor, against Go's own profiler.

Go binaries have no .eh_frame, and Go leaves small leaf functions without
a frame pointer, so the sensor unwinds them with tables compiled from the
binary's .gopclntab (docs/unwind-tables.md). The reference is the one the
Go runtime itself gives: the workload (tests/workload/gowork) takes its
own CPU profile with runtime/pprof while a sensor profiles it, and the two
profiles' shares must agree within 5 points for the chains Go's profile
puts at 2 % or more: each leaf function's share of all samples, and each
caller;leaf pair's share of that leaf's samples (leaves with PAIR_MIN
samples or more). Both sides count inlined frames as frames (sonde's from
its pprof export; its folded stacks name functions only). A walk that
skipped the caller of a frameless leaf would put main.leaf under the
goroutine's closure instead of main.spinner and main.recurse, and fail.
Built stripped (-s -w): names and tables come from .gopclntab alone; Go
1.19 and 1.23 lay out prologues differently.

Work the runtime does on the thread's system stack (the scavenger, GC
marking, some allocations: runtime.systemstack switches stacks) is
followed back to the goroutine that asked for it, as Go's profiler does:
every such stack (Go 1.23's profile has about 4 % of them here) must go on
to the goroutine's root, runtime.goexit, not end at runtime.systemstack."""
import collections
import gzip
import subprocess

import pytest

from conftest import SONDE, Symbolizer, make_tmp, run_held, symbols_pb2, wait_for
from test_span_samples import _pprof_module
from test_symbolize_go import build

SECONDS = 8
HZ = 99
# A caller;leaf share is compared for leaves with this many samples in
# Go's profile: the two profilers sample the work at different moments, and
# with ~100 samples of a leaf their shares of its callers differed by up to
# 7.6 points from run to run, either way (a 30 s run: 4 points, the other
# way round).
PAIR_MIN = 150


def pprof_stacks(profile_pb2, path):
    """A pprof file as (frames root first, inlined frames expanded, count)."""
    prof = profile_pb2.Profile.FromString(gzip.decompress(path.read_bytes()))
    st = prof.string_table
    names = {f.id: st[f.name] for f in prof.function}
    locs = {loc.id: [names[ln.function_id] for ln in loc.line] for loc in prof.location}
    out = []
    for s in prof.sample:
        frames = []
        for lid in reversed(s.location_id):
            frames += reversed(locs[lid])  # a location's lines: innermost first
        out.append((frames, s.value[0]))
    return out


def shares(stacks):
    """Leaf shares of all samples, caller;leaf shares of the leaf's samples."""
    total = sum(c for _, c in stacks) or 1
    leaf, pair = collections.Counter(), collections.Counter()
    for frames, c in stacks:
        if frames:
            leaf[frames[-1]] += c
        if len(frames) >= 2:
            pair[(frames[-2], frames[-1])] += c
    got = {(k,): 100.0 * v / total for k, v in leaf.items()}
    got.update({k: 100.0 * v / leaf[k[1]] for k, v in pair.items()})
    return got, leaf


# (Go, -ldflags, -buildmode): stripped builds (names and tables from the
# table's own section), and a stripped cgo PIE linked by the system linker,
# whose table lies inside .data.rel.ro with its pointers (text start,
# moduledata's) in relocations: names, inlined frames and tables all come
# from that table.
BUILDS = {
    "1.19": ("1.19", "-s -w", "exe"),
    "1.23": ("1.23", "-s -w", "exe"),
    "1.23-cgo-pie": ("1.23", "-linkmode=external -s -w", "pie"),
}


@pytest.mark.parametrize("version", list(BUILDS))
def test_go_stacks_match_go_profiler(version):
    tmp = make_tmp()
    exe = tmp / "gowork"
    go, ldflags, mode = BUILDS[version]
    build(f"/usr/lib/go-{go}/bin/go", tmp, exe, ldflags, mode=mode, workload="gowork")
    sym = Symbolizer(tmp)
    sensor = None
    try:
        # A first run caches the binary's table, as on a node that ran it
        # before; until a new binary's table arrives it is walked with
        # frame pointers (test_symbolize_go covers that start).
        _, sensor = run_held(tmp, sym, [str(exe), str(tmp / "warm.pb.gz"), "1"], HZ)
        sensor.stop()
        wait_for(lambda: sym.status().sensors_connected == 0, 15, "the sensor to go")
        pid, sensor = run_held(tmp, sym, [str(exe), str(tmp / "go.pb.gz"), str(SECONDS)], HZ)

        def stored():
            r = sym.symbols.Folded(symbols_pb2.ProfileQuery(pid=pid), timeout=30)
            return sum(s.count for s in r.stacks)
        wait_for(lambda: stored() > 0.9 * HZ * SECONDS, 30, "the run's samples")
        sensor.stop()
        sensor = None
        profile_pb2 = _pprof_module()  # compiled once for both profiles
        # sonde's pprof export, which has the inlined frames (folded
        # stacks name functions only), as Go's has.
        subprocess.run([str(SONDE), "pprof", "--symbolizer", sym.address, "--pid", str(pid),
                        "-o", str(tmp / "sonde.pb.gz")], check=True, capture_output=True, timeout=60)
        # (.symtab spells assembly functions with their ABI, "x.abi0")
        mine = [([f.removesuffix(".abi0") for f in frames if not f.endswith("_[k]")], c)
                for frames, c in pprof_stacks(profile_pb2, tmp / "sonde.pb.gz")]
        o = next(p.outcomes for p in sym.status().processes if p.pid == pid)
        total = o.complete + o.truncated + o.no_table + o.read_error
        print(f"go{version}: {o.complete}/{total} complete, {o.no_table} without a table, "
              f"{o.read_error} read errors, {o.truncated} truncated")
        assert o.complete >= 0.99 * total, o

        # Go's pseudo-frames (runtime._GC, _System, _ExternalCode) stand
        # for stacks its profiler did not unwind.
        theirs = [(f, c) for f, c in pprof_stacks(profile_pb2, tmp / "go.pb.gz")
                  if not any(x.startswith("runtime._") for x in f)]
        through = [f for f, c in mine for _ in range(c) if "runtime.systemstack" in f]
        whole = sum(f[0] == "runtime.goexit" for f in through)
        print(f"go{version}: {len(through)} samples through runtime.systemstack, {whole} of them "
              f"from runtime.goexit; roots {collections.Counter(f[0] for f in through).most_common(4)}")
        assert len(through) >= 10 and whole >= 0.95 * len(through)
        (gp, go_leaves), (sp, _) = shares(theirs), shares(mine)
        ranked = [k for k, v in sorted(gp.items(), key=lambda kv: -kv[1])
                  if v >= 2 and (len(k) == 1 or go_leaves[k[1]] >= PAIR_MIN)]
        report = ", ".join(f"{';'.join(k)}: sonde {sp.get(k, 0):.1f}% go {gp[k]:.1f}%" for k in ranked)
        print(f"go{version}: {sum(c for _, c in mine)} samples, Go's profile "
              f"{sum(c for _, c in theirs)}; {report}")
        assert ("main.spinner", "main.leaf") in ranked, report
        bad = [k for k in ranked if abs(sp.get(k, 0) - gp[k]) > 5]
        assert not bad, f"go{version}: {report}"
    finally:
        if sensor:
            sensor.stop()
        sym.stop()


def in_order(frames, names):
    """names are among frames, in that order (.symtab spells assembly
    functions "x.abi0")."""
    it = iter(f.removesuffix(".abi0") for f in frames)
    return all(any(f == n for f in it) for n in names)


@pytest.mark.parametrize("go", ["1.19", "1.23"])
def test_cgo_stacks_reach_the_goroutine(go):
    """C called through cgo runs on the thread's g0 stack
    (runtime.asmcgocall): its frames unwind with gcc's .eh_frame, and the
    walk goes on from asmcgocall to the goroutine that made the call (the
    g it keeps on the g0 stack, where Go 1.19-1.21 and 1.22+ differ), up to
    runtime.goexit. Go's own profiler does not follow C frames at all
    without a cgo traceback function; a walk that did not follow it would
    end at runtime.asmcgocall."""
    tmp = make_tmp()
    exe = tmp / "gocgo"
    build(f"/usr/lib/go-{go}/bin/go", tmp, exe, None, workload="gocgo")
    sym = Symbolizer(tmp)
    sensor = None
    try:
        _, sensor = run_held(tmp, sym, [str(exe), "1"], HZ)  # caches its tables
        sensor.stop()
        wait_for(lambda: sym.status().sensors_connected == 0, 15, "the sensor to go")
        pid, sensor = run_held(tmp, sym, [str(exe), "6"], HZ)

        def in_c():
            r = sym.symbols.Folded(symbols_pb2.ProfileQuery(pid=pid), timeout=30)
            return [([f for f in s.frames if not f.endswith("_[k]")], s.count) for s in r.stacks
                    if "c_leaf" in s.frames]
        wait_for(lambda: sum(c for _, c in in_c()) > 0.8 * HZ * 6, 30, "the run's samples")
        sensor.stop()
        sensor = None
        stacks = in_c()
        total = sum(c for _, c in stacks)
        whole = sum(c for f, c in stacks if f[0].removesuffix(".abi0") == "runtime.goexit" and
                    in_order(f, ["main.cwork", "runtime.cgocall", "runtime.asmcgocall", "c_spin"]))
        top = collections.Counter()
        for f, c in stacks:
            top[";".join(f)] += c
        print(f"go{go} cgo: {total} samples in c_leaf, {whole} from runtime.goexit through "
              f"main.cwork; {top.most_common(2)}")
        assert total > 300 and whole >= 0.95 * total, top.most_common(4)
        o = next(p.outcomes for p in sym.status().processes if p.pid == pid)
        assert o.complete >= 0.99 * (o.complete + o.truncated + o.no_table + o.read_error), o
    finally:
        if sensor:
            sensor.stop()
        sym.stop()
