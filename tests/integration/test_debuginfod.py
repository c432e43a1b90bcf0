"""--debuginfod (issue 33, docs/symbols-api.md): a stripped program whose
debug file no --debug-dir holds, served by Debian's own debuginfod server on
loopback. With the server up, `sonde symbolize --json` names its functions
(a static one too, which only the debug file's .symtab and DWARF know) with
their lines, and the debug file lands in the cache directory by build ID.
With the server stopped, or accepting connections and never answering, the
same query answers without lines within the fetch timeout, and the
symbolizer keeps answering. Servers named by host name (resolved before the
sandbox) and over https (a TLS front made with Python's ssl and a throwaway
CA): lines with the right CA and name, refused within the timeout with
another name, an unknown CA or the system's CAs. The symbolizer runs
sandboxed as in production (debug builds: a seccomp violation traps and
names the call)."""
import json
import os
import select
import shutil
import socket
import ssl
import subprocess
import threading
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


def test_url_checks():
    """Host names and https are taken (the sandbox still allows only the
    servers' ports); other schemes, credentials, queries and port 0 are
    refused at start; --debuginfod-ca goes with an https URL."""
    from conftest import SYMBOLIZER
    for url in ("ftp://127.0.0.1/", "http://user:secret@127.0.0.1:8002", "http://127.0.0.1:8002/?x=1",
                "http://127.0.0.1:0", "debuginfod.debian.net"):
        out = subprocess.run([str(SYMBOLIZER), "--debuginfod", url, "--print-policy"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode != 0 and "http[s]://HOST" in out.stderr, out
    out = subprocess.run([str(SYMBOLIZER), "--debuginfod", "http://127.0.0.1:8002", "--debuginfod-ca", "/dev/null",
                          "--print-policy"], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "--debuginfod-ca needs an https://" in out.stderr, out
    out = subprocess.run([str(SYMBOLIZER), "--debuginfod", "http://127.0.0.1:8002", "--debuginfod",
                          "https://debuginfod.example.org/mirror/", "--print-policy"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "TCP connect: port 8002, 443 only" in out.stdout and "allow mkdir" in out.stdout, out.stdout
    assert ("debuginfod: https://debuginfod.example.org/mirror/ (TCP port 443, TLS with the CAs of "
            "/etc/ssl/certs/ca-certificates.crt)") in out.stdout, out.stdout


# ---- host names and https ----

def local_name():
    """A name other than localhost that resolves to 127.0.0.1 alone here
    (the machine's own, through /etc/hosts), else localhost: curl knows
    localhost without asking, so only another name shows that the
    addresses resolved at start are the ones used."""
    name = socket.gethostname()
    try:
        addrs = {a[4][0] for a in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)}
    except OSError:
        return "localhost"
    return name if addrs == {"127.0.0.1"} else "localhost"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=d)


def make_cert(d, ca, name, san):
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)


class TlsFront:
    """TLS on 127.0.0.1 with one certificate, each connection forwarded to
    the debuginfod server's port. Counts the connections over which a
    request came (curl checks the name only once the handshake is done)."""

    def __init__(self, pki, name, backend_port):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(str(pki / f"{name}.crt"), str(pki / f"{name}.key"))
        self.backend = backend_port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.requests = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        conn.settimeout(10)
        try:
            tls = self.ctx.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError):
            conn.close()
            return
        back = socket.create_connection(("127.0.0.1", self.backend), timeout=10)
        counted = False
        try:
            while True:
                ready, _, _ = select.select([tls, back], [], [], 10)
                if not ready:
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is tls and not counted:
                        counted = True
                        self.requests += 1
                    (back if s is tls else tls).sendall(data)
                while tls.pending():
                    back.sendall(tls.recv(65536))
        except (ssl.SSLError, OSError):
            return
        finally:
            back.close()
            tls.close()

    def close(self):
        """Ends the accepting thread too (shutdown wakes its accept(): a
        thread left blocked there holds up later tests' forks)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


@pytest.fixture(scope="module")
def served():
    """One stripped program and its debug file behind one debuginfod server
    and three TLS fronts: `good` (a certificate for the local name from
    test-ca), `wrong_name` (test-ca, another name), `unknown_ca` (the local
    name, from a CA the symbolizer is not given)."""
    tmp = make_tmp()
    full, stripped, bid = build_stripped(tmp)
    ref = reference(full)
    server = Debuginfod(tmp, tmp / "srv", bid)
    pki = tmp / "pki"
    pki.mkdir()
    name = local_name()
    make_ca(pki, "test-ca")
    make_ca(pki, "other-ca")
    make_cert(pki, "test-ca", "good", f"DNS:{name}")
    make_cert(pki, "test-ca", "wrong_name", "DNS:elsewhere.example")
    make_cert(pki, "other-ca", "unknown_ca", f"DNS:{name}")
    fronts = {k: TlsFront(pki, k, server.port) for k in ("good", "wrong_name", "unknown_ca")}
    try:
        yield dict(tmp=tmp, stripped=stripped, bid=bid, ref=ref, server=server, pki=pki, name=name, fronts=fronts)
    finally:
        for f in fronts.values():
            f.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def lines_of(sym, stripped, ref):
    addrs = sorted(ref)
    frames, elapsed = symbolize(sym, stripped, addrs)
    return {a: (f[-1]["function"], f[-1].get("line")) if f else None for a, f in zip(addrs, frames)}, elapsed


def run_symbolizer(args):
    return Symbolizer(make_tmp(), [*args, "--debuginfod-timeout", str(TIMEOUT_S)])


def test_host_name_resolved_before_the_sandbox(served):
    """http://localhost:PORT: the name is resolved at start (through
    /etc/hosts: inside the sandbox nothing could be), the log says to
    what, and the stripped program gets its names and lines."""
    url = f"http://localhost:{served['server'].port}"
    sym = run_symbolizer(["--debuginfod", url])
    try:
        got, _ = lines_of(sym, served["stripped"], served["ref"])
        assert got == served["ref"], sym.logtext()
        assert f"debuginfod: {url} (127.0.0.1" in sym.logtext() and "resolved once, at start" in sym.logtext()
        assert "sandbox on" in sym.logtext() and sym.proc.poll() is None
    finally:
        sym.stop()
        shutil.rmtree(sym.dir, ignore_errors=True)


def test_https_with_the_servers_ca(served):
    """https://NAME:PORT with --debuginfod-ca: the certificate and its name
    are checked against the CA read before the sandbox; lines come back
    and the file is cached by build ID."""
    front = served["fronts"]["good"]
    sym = run_symbolizer(["--debuginfod", f"https://{served['name']}:{front.port}/",
                          "--debuginfod-ca", str(served["pki"] / "test-ca.crt")])
    try:
        got, _ = lines_of(sym, served["stripped"], served["ref"])
        assert got == served["ref"], sym.logtext()
        assert front.requests >= 1
        assert (sym.cache.parent / "debuginfod" / served["bid"] / "debuginfo").is_file()
        assert sym.proc.poll() is None
    finally:
        sym.stop()
        shutil.rmtree(sym.dir, ignore_errors=True)


def test_https_refused_for_another_name_or_an_unknown_ca(served):
    """A certificate for another name, or from a CA the symbolizer was not
    given: no request goes out, the query is answered without lines well
    within the timeout, each server is named in a warning. Without
    --debuginfod-ca the system's CAs do not know test-ca either."""
    wrong, unknown, good = (served["fronts"][k] for k in ("wrong_name", "unknown_ca", "good"))
    name = served["name"]
    cases = [
        (["--debuginfod", f"https://{name}:{wrong.port}", "--debuginfod", f"https://{name}:{unknown.port}",
          "--debuginfod-ca", str(served["pki"] / "test-ca.crt")], [wrong, unknown]),
        (["--debuginfod", f"https://{name}:{good.port}"], [good]),
    ]
    for args, fronts in cases:
        before = [f.requests for f in fronts]
        sym = run_symbolizer(args)
        try:
            got, elapsed = lines_of(sym, served["stripped"], served["ref"])
            assert all(not v or not v[1] for v in got.values()), (got, sym.logtext())
            assert elapsed < TIMEOUT_S + 5, elapsed
            assert [f.requests for f in fronts] == before, sym.logtext()
            log = sym.logtext()
            for f in fronts:
                assert f"debuginfod: https://{name}:{f.port}: " in log and "not asked again" in log, log
            assert "certificate" in log.lower() or "ssl" in log.lower(), log
            assert not (sym.cache.parent / "debuginfod" / served["bid"] / "debuginfo").exists()
            assert sym.status() and sym.proc.poll() is None
        finally:
            sym.stop()
            shutil.rmtree(sym.dir, ignore_errors=True)


def test_debuginfod_urls_with_https_names_are_used(served, monkeypatch):
    """$DEBUGINFOD_URLS as distributions set it (https, a host name) is
    used now; a name that does not resolve and a URL of another scheme are
    left out with a warning, and the rest still serves."""
    front = served["fronts"]["good"]
    url = f"https://{served['name']}:{front.port}"
    monkeypatch.setenv("DEBUGINFOD_URLS", f"https://no-such-host.invalid ftp://127.0.0.1/ {url}")
    sym = run_symbolizer(["--debuginfod-ca", str(served["pki"] / "test-ca.crt")])
    try:
        got, _ = lines_of(sym, served["stripped"], served["ref"])
        assert got == served["ref"], sym.logtext()
        log = sym.logtext()
        assert "leaving https://no-such-host.invalid out" in log and "'ftp://127.0.0.1/'" in log, log
        assert f"debuginfod: {url} (" in log, log
    finally:
        sym.stop()
        shutil.rmtree(sym.dir, ignore_errors=True)


def test_sandbox_with_a_host_name_server(served):
    """With an https server named by host name, a compromised symbolizer
    can still connect only to that port: no other TCP port, no UDP (no
    DNS), no files outside its rules (the CA bundle was read before)."""
    from conftest import SYMBOLIZER
    tmp = make_tmp()
    port = served["fronts"]["good"].port
    try:
        p = subprocess.run([str(SYMBOLIZER), "--listen", f"unix:{tmp}/s.sock", "--cache", str(tmp / "c" / "cache.db"),
                            "--debuginfod", f"https://{served['name']}:{port}",
                            "--sandbox-selftest=/etc/ssl/certs/ca-certificates.crt"],
                           capture_output=True, text=True, timeout=60)
        out = p.stdout
        assert [ln for ln in out.splitlines() if ln.startswith("ALLOWED")] == ["ALLOWED socket(AF_INET)"], \
            out + p.stderr
        assert "denied connect 127.0.0.1:22: Permission denied" in out, out
        assert "denied socket(AF_INET, SOCK_DGRAM)" in out, out
        assert "denied open /etc/ssl/certs/ca-certificates.crt: Permission denied" in out, out
        p = subprocess.run([str(SYMBOLIZER), "--listen", f"unix:{tmp}/s.sock", "--cache", str(tmp / "c" / "cache.db"),
                            "--debuginfod", f"https://{served['name']}:{port}", "--print-policy"],
                           capture_output=True, text=True, timeout=30)
        assert f"TCP connect: port {port} only" in p.stdout, p.stdout
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
