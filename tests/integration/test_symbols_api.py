"""The Symbols API from a third-party client (Debian's python3-grpcio), as
docs/symbols-api.md shows it: Upload a file the symbolizer has not seen,
then Symbolize it by file ID with source frames; options; and the
Upload checks (file ID must be the bytes' htlhash, sizes, order); the
first query after an upload answered before the whole source index is
built, as the whole index answers it."""
import random
import subprocess
import time

import grpc
import pytest

from conftest import SYMBOLIZER, WORKLOAD, htlhash, symbols_pb2

CHUNK = 4 << 20



def upload(stub, data, file_id, name):
    up = None
    for off in range(0, len(data), CHUNK):
        up = stub.Upload(symbols_pb2.UploadRequest(file_id=file_id, size=len(data), offset=off,
                                                   data=data[off:off + CHUNK], name=name), timeout=120)
    return up


def nm_function(path, name):
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[2] == name:
            return int(p[0], 16)
    raise AssertionError(f"{name} not in {path}")


def test_upload_then_symbolize_with_frames(symbolizer):
    data = WORKLOAD.read_bytes()
    fid = htlhash(data)
    addr = nm_function(str(WORKLOAD), "leaf_b_hash")
    req = symbols_pb2.SymbolizeRequest(queries=[symbols_pb2.SymbolizeQuery(file_id=fid, addresses=[addr])])
    r = symbolizer.symbols.Symbolize(req, timeout=30).results[0]
    assert r.unknown_file and r.error
    up = upload(symbolizer.symbols, data, fid, "sonde-workload")
    assert up.complete and not up.error, up.error
    r = symbolizer.symbols.Symbolize(req, timeout=30).results[0]
    assert not r.error and not r.unknown_file
    sym = r.symbols[0]
    assert sym.function == "leaf_b_hash" and sym.offset == 0
    assert [f.function for f in sym.frames][-1] == "leaf_b_hash"
    assert sym.frames[0].file.endswith("tests/workload/workload.c") and sym.frames[0].line > 0
    # A second upload of a known file is answered at once.
    again = symbolizer.symbols.Upload(symbols_pb2.UploadRequest(file_id=fid, size=len(data), offset=0,
                                                                data=data[:16]), timeout=30)
    assert again.complete


def frames_of(result):
    return [(s.function, [(f.function, f.file, f.line) for f in s.frames]) for s in result.symbols]


def test_first_answer_from_the_units_it_needs(symbolizer):
    """The symbolizer's own binary (60 DWARF units): the query that follows
    its upload is answered from an index of only the units its addresses
    fall in (symbols.c first_answer) while the worker builds the whole
    index; a later query, from the whole index, gets the same frames."""
    data = SYMBOLIZER.read_bytes()
    fid = htlhash(data)
    out = subprocess.run(["nm", "--defined-only", "-S", str(SYMBOLIZER)], capture_output=True, text=True,
                         check=True).stdout
    # Three addresses in each of ten of the project's own functions (built
    # with -g): few units, so the first answer is not declined for wanting
    # most of them.
    own = ("line_index", "index_", "symbols_", "analysis_", "cache_", "elf_", "unwind_", "profile_")
    funcs = [(int(p[0], 16), int(p[1], 16)) for p in (l.split() for l in out.splitlines())
             if len(p) == 4 and p[2] in "tT" and int(p[1], 16) > 0 and p[3].startswith(own)]
    rng = random.Random(7)
    addrs = [start + rng.randrange(size) for start, size in rng.sample(funcs, 10) for _ in range(3)]
    up = upload(symbolizer.symbols, data, fid, "sonde-symbolizer")
    assert up.complete and not up.error, up.error
    req = symbols_pb2.SymbolizeRequest(queries=[symbols_pb2.SymbolizeQuery(file_id=fid, addresses=addrs)])
    first = symbolizer.symbols.Symbolize(req, timeout=30).results[0]
    assert not first.error
    log = symbolizer.logtext()
    assert log.count("first answer for sonde-symbolizer: 30 addresses") == 1, log
    time.sleep(2)  # the whole index is built (well under a second here)
    whole = symbolizer.symbols.Symbolize(req, timeout=30).results[0]
    assert symbolizer.logtext().count("first answer for") == 1, "the second query had no whole index"
    assert sum(bool(s.frames and s.frames[0].line) for s in whole.symbols) == 30
    assert frames_of(first) == frames_of(whole)


def test_options_and_inline_chain(symbolizer):
    """libc's strcat at 0x9d5a0-ish has an inlined ifunc selector: with
    inlines the chain has two frames, without only the function; demangle
    off gives raw names."""
    import json
    import subprocess
    lib = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    data = open(lib, "rb").read()
    fid = htlhash(data)
    upload(symbolizer.symbols, data, fid, "libc.so.6")
    out = subprocess.run(["llvm-symbolizer", "--output-style=JSON", f"--obj={lib}", "0x9d5a0"],
                         capture_output=True, text=True).stdout
    want = [(f["FunctionName"], f["FileName"], f["Line"]) for f in json.loads(out)[0]["Symbol"]]
    q = symbols_pb2.SymbolizeQuery(file_id=fid, addresses=[0x9d5a0])
    full = symbolizer.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[q]), timeout=30).results[0]
    got = [(f.function, f.file, f.line) for f in full.symbols[0].frames]
    assert got == want
    outer = symbolizer.symbols.Symbolize(symbols_pb2.SymbolizeRequest(
        queries=[q], options=symbols_pb2.SymbolizeOptions(lines=False, inlines=False, demangle=True)),
        timeout=30).results[0]
    assert [(f.function, f.file, f.line) for f in outer.symbols[0].frames] == [(want[-1][0], "", 0)]


def test_upload_refuses_a_wrong_file_id(symbolizer):
    data = WORKLOAD.read_bytes()
    wrong = bytes(16)
    with pytest.raises(grpc.RpcError) as e:
        upload(symbolizer.symbols, data, wrong, "x")
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "htlhash" in e.value.details()


def test_upload_limits(symbolizer):
    stub = symbolizer.symbols
    fid = bytes(range(16))
    with pytest.raises(grpc.RpcError) as e:
        stub.Upload(symbols_pb2.UploadRequest(file_id=fid, size=(1 << 30) + 1, offset=0, data=b"x"), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        stub.Upload(symbols_pb2.UploadRequest(file_id=fid, size=100, offset=50, data=b"x"), timeout=10)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as e:
        stub.Upload(symbols_pb2.UploadRequest(file_id=fid, size=100, offset=0, data=b"x" * 101), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    ok = stub.Upload(symbols_pb2.UploadRequest(file_id=fid, size=100, offset=0, data=b"x" * 10), timeout=10)
    assert ok.received == 10 and not ok.complete
    with pytest.raises(grpc.RpcError) as e:
        stub.Upload(symbols_pb2.UploadRequest(file_id=fid, size=100, offset=20, data=b"x"), timeout=10)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
