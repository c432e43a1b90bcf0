"""Symbols.Symbolize from a third-party gRPC client (Debian's python3-grpcio)
agrees with nm on 1,000 addresses of libc and of the workload."""
import bisect
import random
import subprocess
import time

import pytest

from conftest import WORK_LIB, WORKLOAD, make_tmp, symbols_pb2, wait_for

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def nm_functions(path, dynamic):
    """[(start, size, name)] of defined function symbols, as nm sees them."""
    args = ["nm", "--defined-only", "-S"] + (["-D"] if dynamic else []) + [path]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[2] not in "TtWiu":
            continue
        start, size = int(parts[0], 16), int(parts[1], 16)
        if start and size:
            syms.append((start, size, parts[3].split("@")[0]))
    return sorted(syms)


def expected_names(syms, starts, addr):
    """(start, names) of the innermost symbol covering addr, as nm lists them:
    among the symbols that contain addr, those with the greatest start."""
    i = bisect.bisect_right(starts, addr)
    best, names = None, set()
    for start, size, name in syms[max(0, i - 64):i]:
        if start <= addr < start + size:
            if best is None or start > best:
                best, names = start, {name}
            elif start == best:
                names.add(name)
    return best, names


def pick_addresses(syms, n, rng):
    chosen = [syms[rng.randrange(len(syms))] for _ in range(n)]
    return [start + rng.randrange(size) for start, size, _ in chosen]


@pytest.fixture(scope="module")
def seen():
    """A symbolizer that has seen libc and the workload through a real sensor."""
    from conftest import Sensor, Symbolizer
    tmp = make_tmp()
    sym = Symbolizer(tmp)
    work = subprocess.Popen([str(WORKLOAD), "6"])
    sensor = Sensor(tmp, sym.address, ["--pid", str(work.pid), "--frequency", "99"])
    try:
        wait_for(lambda: sym.status().files_analysed >= 3, 30,
                 "libc, the workload and its library to be analysed")
        yield sym
    finally:
        work.wait()
        sensor.stop()
        sym.stop()


@pytest.mark.parametrize("path,dynamic", [(LIBC, True), (str(WORKLOAD), False), (str(WORK_LIB), False)])
def test_symbolize_agrees_with_nm(seen, path, dynamic):
    syms = nm_functions(path, dynamic)
    assert len(syms) >= 2, f"nm found no functions in {path}"
    starts = [s for s, _, _ in syms]
    rng = random.Random(path)
    addrs = pick_addresses(syms, 1000, rng)
    t0 = time.monotonic()
    resp = seen.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[
        symbols_pb2.SymbolizeQuery(path=path, addresses=addrs)]), timeout=30)
    elapsed = time.monotonic() - t0
    assert len(resp.results) == 1
    result = resp.results[0]
    assert not result.error, result.error
    assert len(result.symbols) == len(addrs)
    bad = []
    for addr, sym in zip(addrs, result.symbols):
        start, want = expected_names(syms, starts, addr)
        if sym.address != addr or sym.function not in want or sym.offset != addr - start:
            bad.append((hex(addr), sym.function, sym.offset, sorted(want), addr - start))
    print(f"{path}: 1000 addresses in {elapsed * 1000:.1f} ms, {len(bad)} disagreements")
    assert not bad, f"{len(bad)} of 1000 disagree with nm, e.g. {bad[:5]}"


def test_symbolize_by_file_id_and_unknown_file(seen):
    import hashlib
    import os
    data = open(LIBC, "rb").read()
    size = len(data)
    fid = hashlib.sha256(data[:4096] + data[-4096:] + size.to_bytes(8, "big")).digest()[:16]
    syms = nm_functions(LIBC, True)
    start, _, name = next(s for s in syms if s[2] == "malloc")
    resp = seen.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[
        symbols_pb2.SymbolizeQuery(file_id=fid, addresses=[start + 1]),
        symbols_pb2.SymbolizeQuery(file_id=os.urandom(16), addresses=[start])]), timeout=30)
    assert resp.results[0].symbols[0].function in {n for s, _, n in syms if s == start}
    assert resp.results[0].symbols[0].offset == 1
    assert resp.results[1].error, "an unknown file ID must give an error, not a guess"


def test_cli_symbolize(seen):
    from conftest import SONDE
    syms = nm_functions(str(WORKLOAD), False)
    start, _, name = next(s for s in syms if s[2] == "leaf_b_hash")
    out = subprocess.run([str(SONDE), "symbolize", "--symbolizer", seen.address, "--path", str(WORKLOAD),
                          hex(start + 4)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "leaf_b_hash+0x4" in out.stdout
    js = subprocess.run([str(SONDE), "symbolize", "--json", "--symbolizer", seen.address, "--path",
                         str(WORKLOAD), hex(start)], capture_output=True, text=True, timeout=30)
    import json
    doc = json.loads(js.stdout)
    assert doc["symbols"][0]["function"] == "leaf_b_hash"


def test_source_frames_of_files_a_sensor_maps(seen):
    """Files analysed through a sensor get source frames too: the workload
    from its own DWARF (its debug sections fetched from the sensor), libc
    from its separate debug file under /usr/lib/debug (libc6-dbg), both
    agreeing with llvm-symbolizer."""
    import json
    for path in (str(WORKLOAD), LIBC):
        syms = nm_functions(path, path == LIBC)
        rng = random.Random(7)
        addrs = pick_addresses(syms, 200, rng)
        # The index is built on the symbolizer's worker thread: a query
        # waits for it.
        resp = seen.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[
            symbols_pb2.SymbolizeQuery(path=path, addresses=addrs)]), timeout=30)
        result = resp.results[0]
        assert not result.error, result.error
        out = subprocess.run(["llvm-symbolizer", "--output-style=JSON", f"--obj={path}"],
                             input="\n".join(hex(a) for a in addrs), capture_output=True, text=True,
                             check=True).stdout
        want = [[(f["FunctionName"], f["FileName"], f["Line"]) for f in json.loads(l)["Symbol"]]
                for l in out.splitlines()]
        got = [[(f.function, f.file, f.line) for f in s.frames] for s in result.symbols]
        same = sum(g == w for g, w in zip(got, want))
        bad = [(hex(a), g, w) for a, g, w in zip(addrs, got, want) if g != w]
        print(f"{path}: {same}/{len(addrs)} frame chains agree with llvm-symbolizer")
        assert same >= 0.99 * len(addrs), bad[:5]
        with_lines = sum(bool(s.frames) and s.frames[0].line > 0 for s in result.symbols)
        print(f"{path}: {with_lines}/{len(addrs)} with a source line")
        assert with_lines >= 0.8 * len(addrs)


def test_cli_reads_addresses_from_stdin(tmp_path):
    """`sonde symbolize --file` with addresses on stdin: blanks around them,
    0x/0X or none, CRLF, blank lines, no newline at the end, more than one
    read's worth of input; the answers are those for the same addresses
    given as arguments. A line that is not an address is named and the
    exit code is 2."""
    import json
    from conftest import SONDE, Symbolizer
    syms = nm_functions(str(WORKLOAD), False)
    addrs = pick_addresses(syms, 40, random.Random(3))
    sym = Symbolizer(tmp_path)
    try:
        def run(args, stdin=None):
            return subprocess.run([str(SONDE), "symbolize", "--json", "--symbolizer", sym.address,
                                   "--file", str(WORKLOAD), *args], input=stdin,
                                  capture_output=True, text=True, timeout=120)
        want = run([hex(a) for a in addrs])
        assert want.returncode == 0, want.stderr
        lines = [s for i, a in enumerate(addrs) for s in
                 ([f"  {a:#x}\t", f"0X{a:X}\r", f"{a:x}"][i % 3], *([""] if i % 5 == 0 else []))]
        # Padding lines of blanks make the input span several reads.
        text = "\n".join(lines[:20]) + "\n" + (" " * 200 + "\n") * 2000 + "\n".join(lines[20:])
        got = run([], text)
        assert got.returncode == 0, got.stderr
        assert got.stdout == want.stdout
        assert [json.loads(l)["address"] for l in got.stdout.splitlines()] == [hex(a) for a in addrs]
        bad = run([], f"{addrs[0]:#x}\nnot-an-address\n")
        assert bad.returncode == 2 and "'not-an-address' is not a hex address" in bad.stderr
        long = run([], "1" * 300 + "\n")
        assert long.returncode == 2 and "is not a hex address" in long.stderr
    finally:
        sym.stop()
