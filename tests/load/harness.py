"""Runs one sonde-symbolizer on loopback TCP with mutual TLS (a throwaway
CA and certificates made with openssl) and tests/load's sonde-load
against it. Used by tests/bench/scale.py, tests/bench/soak.py and
tests/integration/test_load.py. Run as root (the symbolizer drops to
user sonde; sonde-load reads /proc/kallsyms)."""
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

SRC = pathlib.Path(os.environ.get("SONDE_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("SONDE_BUILD", SRC / "build"))
SYMBOLIZER = BUILD / "symbolizer" / "sonde-symbolizer"
LOAD = BUILD / "tests" / "load" / "sonde-load"


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """CA, a server certificate for 127.0.0.1 and a sensor certificate."""
    d = pathlib.Path(d)
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=load-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    for name, san, usage in (("symbolizer", "IP:127.0.0.1,DNS:localhost", "serverAuth"),
                             ("sonde-sensor", "DNS:sonde-sensor", "clientAuth")):
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\nextendedKeyUsage={usage}\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TlsSymbolizer:
    """sonde-symbolizer on a private dir, listening on unix: and tcp: (mTLS)."""

    def __init__(self, extra=()):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="sonde-load.", dir="/tmp"))
        self.dir.chmod(0o755)
        self.pki = make_pki(self.dir / "pki")
        self.port = free_port()
        self.target = f"tcp:127.0.0.1:{self.port}"
        self.log_path = self.dir / "symbolizer.log"
        self.log = open(self.log_path, "w")
        self.extra = extra
        self._start()

    def _start(self):
        self.proc = subprocess.Popen(
            [str(SYMBOLIZER), "--listen", f"unix:{self.dir / 'sym.sock'}", "--listen", self.target,
             "--cache", str(self.dir / "cache" / "cache.db"), "--user", "sonde",
             "--tls-cert", str(self.pki / "symbolizer.crt"), "--tls-key", str(self.pki / "symbolizer.key"),
             "--tls-client-ca", str(self.pki / "ca.crt"), *self.extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"symbolizer exited: {self.logtext()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("symbolizer did not listen in 15 s")
            time.sleep(0.05)

    def restart(self):
        """Kills the symbolizer (SIGKILL, as a crash) and starts another on
        the same cache and addresses."""
        self.proc.kill()
        self.proc.wait()
        sock = self.dir / "sym.sock"
        if sock.exists():
            sock.unlink()
        self._start()

    def load_args(self):
        return ["--target", self.target, "--ca", str(self.pki / "ca.crt"),
                "--cert", str(self.pki / "sonde-sensor.crt"), "--key", str(self.pki / "sonde-sensor.key"),
                "--server-name", "localhost", "--symbolizer-pid", str(self.proc.pid)]

    def logtext(self):
        self.log.flush()
        return self.log_path.read_text()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def parse_result(stdout):
    """The RESULT line of sonde-load as a dict (numbers as float)."""
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            out = {}
            for kv in line.split()[1:]:
                k, _, v = kv.partition("=")
                try:
                    out[k] = float(v)
                except ValueError:
                    out[k] = v
            return out
    raise RuntimeError(f"no RESULT line in sonde-load output:\n{stdout[-2000:]}")


def run_load_restart(sym, *args, timeout=900):
    """run_load with --restart: restarts sym when sonde-load says RESTART
    (after its warm-up) and gives it the new pid."""
    p = subprocess.Popen([str(LOAD), *sym.load_args(), "--restart", *map(str, args)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = []
    import threading
    t = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
    t.start()
    out = []
    deadline = time.monotonic() + timeout
    for line in p.stdout:
        out.append(line)
        if line.strip() == "RESTART":
            sym.restart()
            p.stdin.write(f"{sym.proc.pid}\n")
            p.stdin.flush()
        if time.monotonic() > deadline:
            p.kill()
            break
    p.wait()
    t.join(10)
    stdout, stderr = "".join(out), "".join(err)
    if "RESULT " not in stdout:
        raise RuntimeError(f"sonde-load failed ({p.returncode}):\n{stderr[-3000:]}\n"
                           f"symbolizer log:\n{sym.logtext()}")
    row = next((line for line in stdout.splitlines() if line.startswith("| ")), "")
    return parse_result(stdout), row, stderr


def run_load(sym, *args, timeout=900):
    """Runs sonde-load against sym; returns (result dict, table row, stderr)."""
    p = subprocess.run([str(LOAD), *sym.load_args(), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    if "RESULT " not in p.stdout:
        raise RuntimeError(f"sonde-load failed ({p.returncode}):\n{p.stderr[-3000:]}\n"
                           f"symbolizer log:\n{sym.logtext()}")
    row = next((line for line in p.stdout.splitlines() if line.startswith("| ")), "")
    return parse_result(p.stdout), row, p.stderr
