"""--debuginfod (issue 33, docs/symbols-api.md): a stripped program whose
debug file no --debug-dir holds, served by Debian's own debuginfod server on
loopback. With the server up, `sonde symbolize --json` names its functions
(a static one too, which only the debug file's .symtab and DWARF know) with
their lines, and the debug file lands in the cache directory by build ID.
With the server stopped, or accepting connections and never answering, the
same query answers without lines within the fetch timeout, and the
symbolizer keeps answering. The symbolizer runs sandboxed as in production
(debug builds: a seccomp violation traps and names the call)."""
import json
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import SONDE, Symbolizer, htlhash, make_tmp, symbols_pb2, wait_for

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
static int __attribute__((noinline)) inner(int x) { return x * 3 + 1; }      /* line 4 */
int __attribute__((noinline)) middle(int x) { return inner(x) + 2; }        /* line 5 */
int main(int argc, char **argv)                                             /* line 6 */
{
	printf("%d\n", middle(argc));                                       /* line 8 */
	return 0;
}
"""
FUNCTIONS = ("inner", "middle", "main")
TIMEOUT_S = 3


def build_stripped(tmp, name="prog", source=PROGRAM):
    """The program with its debug info (the reference), its debug file
    (what the server holds) and the stripped binary (what is symbolized)."""
    (tmp / f"{name}.c").write_text(source)
    full, debug, stripped = tmp / name, tmp / "srv" / f"{name}.debug", tmp / f"{name}.stripped"
    debug.parent.mkdir(exist_ok=True)
    subprocess.run(["gcc", "-g", "-O1", "-Wl,--build-id", "-o", str(full), str(tmp / f"{name}.c")], check=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(full), str(debug)], check=True)
    subprocess.run(["strip", "--strip-all", "-o", str(stripped), str(full)], check=True)
    notes = subprocess.run(["readelf", "-n", str(stripped)], capture_output=True, text=True, check=True).stdout
    bid = next(l.split()[-1] for l in notes.splitlines() if "Build ID" in l)
    sections = subprocess.run(["readelf", "-SW", str(stripped)], capture_output=True, text=True).stdout
    assert ".debug_info" not in sections and " .symtab " not in sections
    return full, stripped, bid


def reference(full):
    """Each function's address + 1 and (name, line) as addr2line gives them
    from the unstripped program."""
    out = subprocess.run(["nm", "--defined-only", str(full)], capture_output=True, text=True, check=True).stdout
    addrs = {p[2]: int(p[0], 16) + 1 for p in (l.split() for l in out.splitlines())
             if len(p) == 3 and p[2] in FUNCTIONS}
    ref = {}
    for name, addr in addrs.items():
        fn, loc = subprocess.run(["addr2line", "-f", "-e", str(full), "%x" % addr], capture_output=True,
                                 text=True, check=True).stdout.splitlines()[:2]
        ref[addr] = (fn, int(loc.rsplit(":", 1)[1].split()[0]))
    assert sorted(fn for fn, _ in ref.values()) == sorted(FUNCTIONS), ref
    return ref


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Debuginfod:
    """Debian's debuginfod serving the debug files under a directory."""

    def __init__(self, tmp, served, bid):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(tmp / "debuginfod.log", "w")
        self.proc = subprocess.Popen(["debuginfod", "-F", str(served), "-p", str(self.port), "-d",
                                      str(tmp / "debuginfod.sqlite"), "-t", "0", "-g", "0"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self._has(bid), 60, "debuginfod to index the debug file")

    def _has(self, bid):
        assert self.proc.poll() is None, (self.proc.returncode, self.logtext())
        try:
            with urllib.request.urlopen(f"{self.url}/buildid/{bid}/debuginfo", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def logtext(self):
        self.log.flush()
        return pathlib_text(self.log.name)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def pathlib_text(name):
    with open(name) as f:
        return f.read()[-3000:]


def symbolize(sym, path, addrs):
    t0 = time.monotonic()
    out = subprocess.run([str(SONDE), "symbolize", "--json", "--symbolizer", sym.address, "--file", str(path)],
                         input="\n".join("%x" % a for a in addrs), capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - t0
    assert out.returncode == 0, out.stderr + sym.logtext()
    return [json.loads(l)["frames"] for l in out.stdout.splitlines()], elapsed


@pytest.fixture
def program():
    tmp = make_tmp()
    full, stripped, bid = build_stripped(tmp)
    yield tmp, full, stripped, bid
    shutil.rmtree(tmp, ignore_errors=True)


def test_names_and_lines_from_debuginfod(program):
    tmp, full, stripped, bid = program
    ref = reference(full)
    server = Debuginfod(tmp, tmp / "srv", bid)
    sym = Symbolizer(make_tmp(), ["--debuginfod", server.url, "--debuginfod-timeout", str(TIMEOUT_S)])
    try:
        addrs = sorted(ref)
        frames, _ = symbolize(sym, stripped, addrs)
        got = {a: (f[-1]["function"], f[-1]["line"]) if f else None for a, f in zip(addrs, frames)}
        assert got == ref, sym.logtext()
        # The symbol table's names (what profiles use): the debug file's
        # .symtab merged in, the static function too.
        fid = htlhash(stripped.read_bytes())
        r = sym.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[
            symbols_pb2.SymbolizeQuery(file_id=fid, addresses=addrs)]), timeout=30).results[0]
        assert [s.function for s in r.symbols] == [ref[a][0] for a in addrs]
        # Cached by build ID next to the SQLite cache; alive and sandboxed.
        assert (sym.cache.parent / "debuginfod" / bid / "debuginfo").is_file()
        assert sym.proc.poll() is None
        assert "sandbox on" in sym.logtext()
    finally:
        sym.stop()
        server.stop()
        shutil.rmtree(sym.dir, ignore_errors=True)


def test_sensor_file_named_from_debuginfod(program):
    """A file a sensor maps (here a sensor played by Python, serving the
    stripped program's bytes): its analysis job waits for the fetch, so
    the profile's frames carry the debug file's names, the static
    function's too."""
    from pysensor import PySensor
    tmp, full, stripped, bid = program
    ref = reference(full)
    server = Debuginfod(tmp, tmp / "srv", bid)
    sym = Symbolizer(make_tmp(), ["--debuginfod", server.url, "--debuginfod-timeout", str(TIMEOUT_S)])
    try:
        path = "/opt/t33/prog"
        inner = next(a for a, (fn, _) in ref.items() if fn == "inner")
        s = PySensor(sym.address, {path: stripped.read_bytes()})
        s.hello()
        s.process(4242, "prog", [path])
        # PIE text: file offset = vaddr; a leaf, so the address itself.
        s.stack(1, 4242, [(path, inner - 1), (path, next(a for a, (fn, _) in ref.items() if fn == "main"))])
        s.close()

        def leaf():
            r = sym.symbols.Folded(symbols_pb2.ProfileQuery(pid=4242), timeout=20)
            return next((st.frames for st in r.stacks if st.frames), None)
        frames = wait_for(leaf, 30, "the sensor's stack")
        assert frames[-1] == "inner" and frames[0] == "main", (frames, sym.logtext())
        assert (sym.cache.parent / "debuginfod" / bid / "debuginfo").is_file()
    finally:
        sym.stop()
        server.stop()
        shutil.rmtree(sym.dir, ignore_errors=True)


def test_server_stopped_answers_without_lines(program):
    tmp, full, stripped, bid = program
    ref = reference(full)
    server = Debuginfod(tmp, tmp / "srv", bid)
    url = server.url
    server.stop()
    sym = Symbolizer(make_tmp(), ["--debuginfod", url, "--debuginfod-timeout", str(TIMEOUT_S)])
    try:
        frames, elapsed = symbolize(sym, stripped, sorted(ref))
        assert all(not f or "line" not in f[-1] or not f[-1]["line"] for f in frames), frames
        assert elapsed < TIMEOUT_S + 10, elapsed
        assert sym.status() and sym.proc.poll() is None
        assert not (sym.cache.parent / "debuginfod" / bid / "debuginfo").exists()
    finally:
        sym.stop()
        shutil.rmtree(sym.dir, ignore_errors=True)


def test_size_cap(program):
    """A debug file over --debuginfod-max-size is not used."""
    tmp, full, stripped, bid = program
    ref = reference(full)
    size = (tmp / "srv" / "prog.debug").stat().st_size
    server = Debuginfod(tmp, tmp / "srv", bid)
    sym = Symbolizer(make_tmp(), ["--debuginfod", server.url, "--debuginfod-max-size", str(size // 2)])
    try:
        frames, _ = symbolize(sym, stripped, sorted(ref))
        assert all(not f or not f[-1].get("line") for f in frames), frames
        assert sym.proc.poll() is None
    finally:
        sym.stop()
        server.stop()
        shutil.rmtree(sym.dir, ignore_errors=True)


def test_server_that_never_answers_times_out(program):
    """A listener that accepts and sends nothing: the fetch ends at the
    timeout, the query is answered then without lines. The next file does
    not wait again: the servers count as down for a while."""
    tmp, full, stripped, bid = program
    ref = reference(full)
    _, other, other_bid = build_stripped(tmp, "other", PROGRAM.replace("x * 3 + 1", "x * 5 + 2"))
    assert other_bid != bid
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    sym = Symbolizer(make_tmp(), ["--debuginfod", url, "--debuginfod-timeout", str(TIMEOUT_S)])
    try:
        frames, elapsed = symbolize(sym, stripped, sorted(ref))
        assert all(not f or not f[-1].get("line") for f in frames), frames
        assert TIMEOUT_S - 1 <= elapsed < TIMEOUT_S + 10, elapsed
        assert sym.status() and sym.proc.poll() is None
        n_accepted = accepted(listener)
        frames, elapsed = symbolize(sym, other, sorted(ref))
        assert all(not f or not f[-1].get("line") for f in frames), frames
        assert accepted(listener) == 0 and n_accepted > 0, "the second file asked the server again"
        assert elapsed < TIMEOUT_S, elapsed
    finally:
        sym.stop()
        listener.close()
        shutil.rmtree(sym.dir, ignore_errors=True)


def accepted(listener):
    """Connections waiting on listener since the last call (taken)."""
    listener.setblocking(False)
    n = 0
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return n
        conn.close()
        n += 1


def test_url_must_name_an_address():
    """The sandbox allows no DNS: a host name (or https, whose certificate
    names a host) is refused at start."""
    from conftest import SYMBOLIZER
    for url in ("http://debuginfod.debian.net", "https://127.0.0.1:8002", "http://127.0.0.1:0"):
        out = subprocess.run([str(SYMBOLIZER), "--debuginfod", url, "--print-policy"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode != 0 and "IP address" in out.stderr, out
    out = subprocess.run([str(SYMBOLIZER), "--debuginfod", "http://127.0.0.1:8002", "--print-policy"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "TCP connect: port 8002 only" in out.stdout and "allow mkdir" in out.stdout
