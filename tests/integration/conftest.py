"""Fixtures for the integration tests: the real services, built by
tests/run, run as root against the real kernel; clients are Debian's
python3-grpcio with stubs generated from proto/ at test time."""
import grpc
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

SRC = pathlib.Path(os.environ.get("SONDE_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("SONDE_BUILD", SRC / "build"))
SONDE = BUILD / "cli" / "sonde"
SENSOR = BUILD / "sensor" / "sonde-sensor"
SYMBOLIZER = BUILD / "symbolizer" / "sonde-symbolizer"
WORKLOAD = BUILD / "tests" / "workload" / "sonde-workload"
WORK_LIB = BUILD / "tests" / "workload" / "libsonde_work.so"


def _generate_stubs():
    out = pathlib.Path(tempfile.mkdtemp(prefix="sonde-stubs."))
    subprocess.run(["protoc", f"-I{SRC / 'proto' / 'sonde' / 'v1'}", f"--python_out={out}",
                    f"--grpc_out={out}", "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    "ingest.proto", "symbols.proto"], check=True, cwd=SRC)
    sys.path.insert(0, str(out))


_generate_stubs()
import ingest_pb2  # noqa: E402
import ingest_pb2_grpc  # noqa: E402
import symbols_pb2  # noqa: E402
import symbols_pb2_grpc  # noqa: E402


def htlhash(data):
    """The file ID of data's bytes (common/fileid.h): SHA-256 of the first
    and last 4096 bytes and the size as a big-endian u64, first 16 bytes."""
    return hashlib.sha256(data[:4096] + data[-4096:] + len(data).to_bytes(8, "big")).digest()[:16]


def wait_for(predicate, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Symbolizer:
    """A sonde-symbolizer on a private Unix socket, dropped to user sonde."""

    def __init__(self, tmp, extra=()):
        self.dir = pathlib.Path(tmp)
        self.sock = self.dir / "symbolizer.sock"
        self.address = f"unix:{self.sock}"
        # A directory the symbolizer creates, so it hands it to user sonde.
        self.cache = self.dir / "cache" / "cache.db"
        self.log = open(self.dir / "symbolizer.log", "w+")
        self.proc = subprocess.Popen([str(SYMBOLIZER), "--listen", self.address, "--cache", str(self.cache),
                                      "--user", "sonde", *extra], stdout=self.log, stderr=subprocess.STDOUT)
        self.channel = None
        wait_for(self._answers, 15, "the symbolizer to answer Status")

    def _answers(self):
        """A fresh channel per try: a channel that tried before the
        listener was up waits out gRPC's reconnect backoff (1 s, 1.6 s,
        ...), which would be timed as the symbolizer's start."""
        if self.proc.poll() is not None:
            raise AssertionError(f"sonde-symbolizer exited with {self.proc.returncode}: {self.logtext()}")
        if self.channel:
            self.channel.close()
        self.channel = grpc.insecure_channel(self.address)
        self.symbols = symbols_pb2_grpc.SymbolsStub(self.channel)
        try:
            self.symbols.Status(symbols_pb2.StatusRequest(), timeout=1)
            return True
        except grpc.RpcError:
            return False

    def status(self):
        return self.symbols.Status(symbols_pb2.StatusRequest(), timeout=10)

    def logtext(self):
        self.log.flush()
        return (self.dir / "symbolizer.log").read_text()[-4000:]

    def stop(self):
        if self.channel:
            self.channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Sensor:
    def __init__(self, tmp, address, args=()):
        self.log_path = pathlib.Path(tmp) / f"sensor.{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "w")
        # Tests wait for what a flush sends: a second, not the default 5 s.
        if "--flush-ms" not in args:
            args = ["--flush-ms", "1000", *args]
        self.proc = subprocess.Popen([str(SENSOR), "--symbolizer", address, *args],
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def logtext(self):
        self.log.flush()
        return self.log_path.read_text()[-4000:]

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def run_held(tmp, sym, cmd, hz):
    """Runs cmd to its end under a sensor (at hz) that follows it from its
    exec; returns its pid and the sensor, still running. cmd waits in a
    shell until the shell's own tables (sh, libc) are loaded: the sensor's
    start-up is over, and what follows the exec is what is measured."""
    proc = subprocess.Popen(["sh", "-c", 'read go; exec "$@"', "sh"] + cmd, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    sensor = Sensor(tmp, sym.address, ["--pid", str(proc.pid), "--frequency", str(hz)])
    try:
        wait_for(lambda: sym.status().sensors_connected >= 1, 15, "the sensor to connect")
        wait_for(lambda: sym.status().unwind_tables_loaded >= 2, 15, "the shell's tables to load")
        proc.stdin.write("go\n")
        proc.stdin.close()
        proc.wait(120)
    except BaseException:
        proc.kill()
        sensor.stop()
        raise
    return proc.pid, sensor


def make_tmp(prefix="sonde-test."):
    """A directory user sonde can reach: pytest's own tmp_path sits under a
    0700 directory of root's, which the dropped symbolizer cannot enter."""
    d = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    d.chmod(0o755)
    return d


_go_cache = None


def go_env(tmp):
    """The environment of a test's `go build`: the local toolchain, no
    network, GOPATH and HOME in tmp, and one build cache for the whole run.
    Go keys its cache by toolchain, flags, environment and inputs, so
    sharing it changes no binary; it only spares each test recompiling the
    standard library (10-20 s a build here)."""
    global _go_cache
    if _go_cache is None:
        _go_cache = make_tmp("sonde-gocache.")
    return dict(os.environ, GOTOOLCHAIN="local", GOPROXY="off", GOFLAGS="-mod=mod",
                GOCACHE=str(_go_cache), GOPATH=str(tmp / "gopath"), HOME=str(tmp))


@pytest.fixture(scope="session", autouse=True)
def _remove_go_cache():
    yield
    if _go_cache is not None:
        shutil.rmtree(_go_cache, ignore_errors=True)


@pytest.fixture
def tmp_path():
    d = make_tmp()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def symbolizer(tmp_path):
    s = Symbolizer(tmp_path)
    yield s
    s.stop()


def sensor_may_connect(path):
    """A test's own Unix listener: the sensor connects as sonde-sensor
    (group sonde) after set-up, so the socket must let it (the real
    symbolizer's is root:sonde 0660)."""
    os.chmod(path, 0o666)


@pytest.fixture
def start_sensor(tmp_path):
    sensors = []

    def start(address, *args):
        s = Sensor(tmp_path, address, args)
        sensors.append(s)
        return s
    yield start
    for s in sensors:
        s.stop()



def cpu_seconds(pid):
    """user + system CPU time of process pid so far, in seconds"""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_cpu(pid, seconds, timeout=120):
    """Waits until process pid has run for seconds more of CPU time: a
    sample count that depends on it holds however loaded the machine is."""
    start = cpu_seconds(pid)
    wait_for(lambda: cpu_seconds(pid) - start >= seconds, timeout,
             f"{seconds} s of CPU time in process {pid}", interval=0.1)

@pytest.fixture
def start_workload():
    """Starts tests/workload's CPU burner for the given seconds; whatever
    is still running is killed at teardown."""
    procs = []

    def start(seconds):
        p = subprocess.Popen([str(WORKLOAD), str(seconds)])
        procs.append(p)
        return p
    yield start
    for p in procs:
        p.kill()
        p.wait()


def parse_folded(text):
    """folded text -> list of (frames, count)"""
    stacks = []
    for line in text.splitlines():
        if not line.strip():
            continue
        frames, _, count = line.rpartition(" ")
        stacks.append((frames.split(";"), int(count)))
    return stacks


def contains_chain(frames, chain):
    n = len(chain)
    return any(frames[i:i + n] == chain for i in range(len(frames) - n + 1))
