"""sonde symbolize --json --file agrees with llvm-symbolizer --output-style=JSON
on random addresses (fixed seed) drawn from the function ranges of at least
30 ELF files of this machine that have debug information: the project's own
binaries (built with -g), the test workloads, and the libraries under
/usr/lib/x86_64-linux-gnu whose debug files are under /usr/lib/debug
(libc6-dbg). Every file is uploaded by the CLI (the symbolizer finds the
separate debug files itself, by build ID, in its default --debug-dir).

Three measures per address, over all addresses:
  function   the containing (outermost) function's name
  file:line  the innermost frame's file and line
  chain      every frame (function, file, line), innermost first
Differences are printed (the first 40, and counts per file), never hidden.
"""
import json
import random
import subprocess
import time

import pytest

from conftest import BUILD, SONDE, Symbolizer, make_tmp

LLVM = "/usr/bin/llvm-symbolizer"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
SEED = 20261202
TOTAL = 24000
MIN_FILES = 30


def has_section(path, name):
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    return f" {name} " in out


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split()[-1]
    return None


def debug_file(path):
    """The file that holds path's DWARF: itself, or its /usr/lib/debug file."""
    if has_section(path, ".debug_info"):
        return path
    bid = build_id(path)
    if bid:
        d = f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
        try:
            if has_section(d, ".debug_info"):
                return d
        except OSError:
            pass
    return None


def function_ranges(path):
    out = subprocess.run(["nm", "--defined-only", "-S", path], capture_output=True, text=True).stdout
    ranges = set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "TtWi":
            start, size = int(p[0], 16), int(p[1], 16)
            if start and size:
                ranges.add((start, size))
    return sorted(ranges)


def candidate_files():
    own = [BUILD / "cli" / "sonde", BUILD / "symbolizer" / "sonde-symbolizer",
           BUILD / "sensor" / "sonde-sensor"]
    own += sorted((BUILD / "tests" / "unit").glob("test-*"))
    own += sorted((BUILD / "tests" / "fuzz").glob("*-replay"))
    own += sorted((BUILD / "tests" / "workload").glob("*sonde*"))
    libs = []
    import os
    for name in sorted(os.listdir(LIBDIR)):
        p = os.path.join(LIBDIR, name)
        if ".so" in name and os.path.isfile(p) and not os.path.islink(p):
            libs.append(p)
    files = []
    for p in [str(x) for x in own if x.is_file() and not x.name.endswith(".p")] + libs:
        d = debug_file(p)
        if not d:
            continue
        ranges = function_ranges(d)
        if len(ranges) >= 5:
            files.append((p, ranges))
    return files


def llvm_frames(path, addrs):
    out = subprocess.run([LLVM, "--output-style=JSON", f"--obj={path}"],
                         input="\n".join(hex(a) for a in addrs), capture_output=True, text=True,
                         check=True, timeout=600).stdout
    result = []
    for line in out.splitlines():
        doc = json.loads(line)
        for obj in (doc if isinstance(doc, list) else [doc]):
            frames = [(f["FunctionName"], f["FileName"], f["Line"]) for f in obj["Symbol"]]
            result.append([f for f in frames if f != ("", "", 0)])
    return result


def sonde_frames(address, path, addrs):
    out = subprocess.run([str(SONDE), "symbolize", "--json", "--symbolizer", address, "--file", path],
                         input="\n".join("%x" % a for a in addrs), capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    result = []
    for line in out.stdout.splitlines():
        doc = json.loads(line)
        result.append((int(doc["address"], 16),
                       [(f["function"], f["file"], f["line"]) for f in doc["frames"]]))
    return result


@pytest.fixture(scope="module")
def symbolizer():
    s = Symbolizer(make_tmp())
    yield s
    s.stop()


def test_accuracy_against_llvm_symbolizer(symbolizer):
    files = candidate_files()
    print(f"{len(files)} files with debug information")
    assert len(files) >= MIN_FILES, [p for p, _ in files]
    rng = random.Random(SEED)
    per_file = TOTAL // len(files) + 1
    n = fn_ok = line_ok = chain_ok = 0
    diffs, per_file_diffs = [], {}
    t_sonde = t_llvm = 0.0
    for path, ranges in files:
        addrs = []
        for _ in range(per_file):
            start, size = ranges[rng.randrange(len(ranges))]
            addrs.append(start + rng.randrange(size))
        t0 = time.monotonic()
        ours = sonde_frames(symbolizer.address, path, addrs)
        t1 = time.monotonic()
        theirs = llvm_frames(path, addrs)
        t_sonde += t1 - t0
        t_llvm += time.monotonic() - t1
        assert len(ours) == len(addrs) and len(theirs) == len(addrs), path
        bad = 0
        for addr, (got_addr, o), l in zip(addrs, ours, theirs):
            assert got_addr == addr
            n += 1
            f_same = [x[0] for x in o[-1:]] == [x[0] for x in l[-1:]]
            l_same = [x[1:] for x in o[:1]] == [x[1:] for x in l[:1]]
            c_same = o == l
            fn_ok += f_same
            line_ok += l_same
            chain_ok += c_same
            if not c_same:
                bad += 1
                if len(diffs) < 40:
                    diffs.append(f"{path} {hex(addr)}\n    sonde: {o}\n    llvm:  {l}")
        if bad:
            per_file_diffs[path] = bad
    print(f"{n} addresses from {len(files)} files; sonde {t_sonde:.1f} s (upload + "
          f"analysis + queries), llvm-symbolizer {t_llvm:.1f} s")
    print(f"function names agree: {fn_ok}/{n} = {100.0 * fn_ok / n:.3f}%")
    print(f"file:line agree:      {line_ok}/{n} = {100.0 * line_ok / n:.3f}%")
    print(f"inline chains agree:  {chain_ok}/{n} = {100.0 * chain_ok / n:.3f}%")
    # Each file's one query follows its upload: answered from the units
    # its addresses need (first answers) unless they needed too much DWARF.
    print(f"first answers: {symbolizer.logtext().count('first answer for')} of {len(files)} files")
    for path, bad in sorted(per_file_diffs.items()):
        print(f"  {bad} differences in {path}")
    for d in diffs:
        print(d)
    assert n >= 20000
    assert fn_ok >= 0.999 * n
    assert line_ok >= 0.99 * n
    assert chain_ok >= 0.99 * n
