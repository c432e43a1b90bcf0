"""MiniDebugInfo: a stripped binary whose .gnu_debugdata (xz) carries a
.symtab of its local functions, made as Fedora makes them (GDB's manual,
"MiniDebugInfo"), from the unwind workload. The local functions (recurse,
chain_lib: not in .dynsym) are named from it, both in the source frames and
in the symbol-table name of Symbolize."""
import json
import shutil
import subprocess

from conftest import BUILD, SONDE, Symbolizer, make_tmp, symbols_pb2

WORKLOAD = BUILD / "tests" / "workload" / "sonde-unwind-workload"


def local_functions(path):
    out = subprocess.run(["nm", "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
    return {p[2]: int(p[0], 16) for p in (l.split() for l in out.splitlines())
            if len(p) == 3 and p[1] == "t" and p[2] in ("recurse", "recurse_leaf", "chain_lib")}


def make_minidebuginfo(tmp):
    src = tmp / "orig"
    shutil.copy(WORKLOAD, src)
    funcs = local_functions(src)
    keep = tmp / "keep"
    keep.write_text("\n".join(funcs) + "\n")
    mini = tmp / "mini_debuginfo"
    subprocess.run(["objcopy", "--only-keep-debug", str(src), str(mini)], check=True)
    subprocess.run(["objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
                    f"--keep-symbols={keep}", str(mini)], check=True)
    subprocess.run(["xz", "-f", str(mini)], check=True)
    out = tmp / "stripped"
    subprocess.run(["strip", "--strip-all", "-R", ".comment", "-R", ".gnu_debuglink", "-o", str(out), str(src)],
                   check=True)
    subprocess.run(["objcopy", "--add-section", f".gnu_debugdata={mini}.xz", str(out)], check=True)
    return out, funcs


def test_local_functions_named_from_gnu_debugdata():
    tmp = make_tmp()
    path, funcs = make_minidebuginfo(tmp)
    assert funcs, "the workload has no local functions to test with"
    sections = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True).stdout
    assert ".gnu_debugdata" in sections and " .symtab " not in sections
    sym = Symbolizer(make_tmp())
    try:
        addrs = [a + 1 for a in funcs.values()]
        out = subprocess.run([str(SONDE), "symbolize", "--json", "--symbolizer", sym.address, "--file", str(path)],
                             input="\n".join("%x" % a for a in addrs), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        got = [json.loads(l)["frames"] for l in out.stdout.splitlines()]
        assert [g[-1]["function"] if g else None for g in got] == list(funcs), got
        # The symbol-table name (what profiles use) too.
        data = path.read_bytes()
        import hashlib
        fid = hashlib.sha256(data[:4096] + data[-4096:] + len(data).to_bytes(8, "big")).digest()[:16]
        r = sym.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[
            symbols_pb2.SymbolizeQuery(file_id=fid, addresses=addrs)]), timeout=30).results[0]
        assert [s.function for s in r.symbols] == list(funcs)
    finally:
        sym.stop()
        shutil.rmtree(tmp, ignore_errors=True)
