"""DWZ (issue 4, docs/symbols-api.md): debug files whose shared DWARF
`dwz -m` moved into one alternate file (.gnu_debugaltlink; Debian's
-dbgsym packages are built so). Two C++ programs (the inlining-heavy
tests/workload/cxx_workload.cc at -O2 and -O1), stripped, their debug
files run through dwz. `sonde symbolize --json` on the stripped files
must give, address for address, what it gives on the unstripped originals
(whose frames the accuracy test checks against llvm-symbolizer): with the
alternate found by its build ID, and by the absolute name in the link
when that is inside a debug directory. With the alternate outside every
debug directory, or named by a path that climbs out of one with "..", it
is not read, and inlined frames lose their names: that shows the
alternate is what supplies them."""
import json
import random
import shutil
import subprocess

import pytest

from conftest import SONDE, SRC, Symbolizer, make_tmp
from test_symbolize import nm_functions
from test_symbolize_accuracy import build_id

N_ADDRS = 300


def by_build_id(debug_dir, debug_file, bid):
    dst = debug_dir / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(debug_file, dst)


def addresses(path, n, seed):
    """n addresses inside the defined functions of path."""
    funcs = nm_functions(str(path), False)
    rnd = random.Random(seed)
    return [start + rnd.randrange(size) for start, size, _ in (rnd.choice(funcs) for _ in range(n))]


def symbolize(tmp, debug_dir, path, addrs):
    sym = Symbolizer(tmp, ["--debug-dir", str(debug_dir)])
    try:
        out = subprocess.run([str(SONDE), "symbolize", "--json", "--symbolizer", sym.address, "--file",
                              str(path)] + [hex(a) for a in addrs], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        return [json.loads(l)["frames"] for l in out.stdout.splitlines()], sym.logtext()
    finally:
        sym.stop()


@pytest.fixture(scope="module")
def dwz_files():
    tmp = make_tmp("sonde-dwz.")
    src = SRC / "tests" / "workload" / "cxx_workload.cc"
    alt_b = tmp / "dbg-b" / ".dwz" / "sonde-test" / "common.debug"
    alt_b.parent.mkdir(parents=True)
    progs = []
    for name, opt in (("one", "-O2"), ("two", "-O1")):
        orig = tmp / f"{name}.orig"
        subprocess.run(["g++", opt, "-g", "-o", str(orig), str(src)], check=True)
        stripped, debug = tmp / name, tmp / f"{name}.debug"
        subprocess.run(["objcopy", "--only-keep-debug", str(orig), str(debug)], check=True)
        subprocess.run(["objcopy", "--strip-debug", str(orig), str(stripped)], check=True)
        progs.append((orig, stripped, debug))
    # One multifile for both, named by its place in layout B.
    subprocess.run(["dwz", "-m", str(alt_b), "-M", str(alt_b)] + [str(d) for _, _, d in progs],
                   check=True, cwd=tmp)
    alt_bid = build_id(alt_b)
    for d in ("dbg-a", "dbg-b", "dbg-c", "dbg-d", "empty"):
        (tmp / d).mkdir(exist_ok=True)
    # D: fresh debug files whose link names a path that is inside dbg-d
    # only by "..": refused, though the file is there.
    d_debug = []
    for orig, _, debug in progs:
        dd = tmp / f"{orig.stem}.d.debug"
        subprocess.run(["objcopy", "--only-keep-debug", str(orig), str(dd)], check=True)
        d_debug.append(dd)
    alt_d = tmp / "dbg-b" / ".dwz" / "sonde-test" / "common-d.debug"
    subprocess.run(["dwz", "-m", str(alt_d), "-M", f"{tmp}/dbg-d/../dbg-b/.dwz/sonde-test/common-d.debug"]
                   + [str(d) for d in d_debug], check=True, cwd=tmp)
    for (_, stripped, _), dd in zip(progs, d_debug):
        by_build_id(tmp / "dbg-d", dd, build_id(stripped))
    for _, stripped, debug in progs:
        readelf = subprocess.run(["readelf", "-S", str(debug)], capture_output=True, text=True).stdout
        assert ".gnu_debugaltlink" in readelf, "dwz moved nothing into the multifile"
        for d in ("dbg-a", "dbg-b", "dbg-c"):
            by_build_id(tmp / d, debug, build_id(stripped))
    by_build_id(tmp / "dbg-a", alt_b, alt_bid)  # A: the alternate by build ID
    # B: only at the link's name (inside dbg-b). C: no alternate in dbg-c.
    subprocess.run(["chmod", "-R", "a+rX", str(tmp)], check=True)
    yield tmp, progs
    shutil.rmtree(tmp, ignore_errors=True)


def test_dwz_alternate_file(dwz_files):
    tmp, progs = dwz_files
    inlined = 0
    for i, (orig, stripped, _) in enumerate(progs):
        addrs = addresses(orig, N_ADDRS, 20261204 + i)
        want, _ = symbolize(make_tmp(), tmp / "empty", orig, addrs)
        inlined += sum(len(f) > 1 for f in want)
        assert all(fr["function"] for f in want for fr in f), "the reference has nameless frames"
        for layout in ("dbg-a", "dbg-b"):
            got, log = symbolize(make_tmp(), tmp / layout, stripped, addrs)
            diff = [(hex(a), w, g) for a, w, g in zip(addrs, want, got) if w != g]
            assert not diff, f"{layout}: {len(diff)} of {len(addrs)} differ, e.g. {diff[:3]}"
        # Without the alternate: what dwz moved out is gone. C: it is
        # outside every debug directory; D: its name climbs out with "..".
        for layout in ("dbg-c", "dbg-d"):
            got, _ = symbolize(make_tmp(), tmp / layout, stripped, addrs)
            nameless = sum(not fr["function"] for f in got for fr in f)
            print(f"{stripped.name}: {len(addrs)} addresses, {sum(len(f) > 1 for f in want)} with "
                  f"inlined frames, identical with the alternate; {layout}: {nameless} nameless frames")
            assert nameless > 0, f"{layout}: the alternate file was read, or supplied nothing"
    assert inlined > N_ADDRS // 4, "too few inlined frames to compare"
