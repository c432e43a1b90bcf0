#!/usr/bin/python3
"""play_sensor.py - a throwaway sensor for end-to-end tests of sonde-symbolizer.

Plays the sensor side of Ingest.Connect over a real symbolizer: Hello, a
ProcessUpdate that maps real files of this machine (libc and bash, with
their real file IDs), answers ReadRange from those files, sends kernel
symbols and a StackBatch with frames at known function offsets, then
checks Top, Folded, Symbolize and Status.

  /usr/bin/python3 tests/integration/play_sensor.py unix:/path/to/sock [--bench]

Needs Debian's python3-grpcio and protoc + grpc_python_plugin.
"""
import hashlib
import os
import pathlib
import queue
import subprocess
import sys
import tempfile
import threading
import time

import grpc

SRC = pathlib.Path(__file__).resolve().parents[2]
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
BASH = "/usr/bin/bash"


def stubs():
    out = tempfile.mkdtemp(prefix="sonde-play.")
    subprocess.run(["protoc", f"-I{SRC / 'proto/sonde/v1'}", f"--python_out={out}", f"--grpc_out={out}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", "ingest.proto", "symbols.proto"],
                   check=True)
    sys.path.insert(0, out)


stubs()
import ingest_pb2 as ip  # noqa: E402
import ingest_pb2_grpc as ig  # noqa: E402
import symbols_pb2 as sp  # noqa: E402
import symbols_pb2_grpc as sg  # noqa: E402


def file_id(path):
    with open(path, "rb") as f:
        data = f.read()
    size = len(data)
    head = data[:4096]
    tail = data[-4096:] if size >= 4096 else data
    return hashlib.sha256(head + tail + size.to_bytes(8, "big")).digest()[:16], size


def nm(path, dynamic=True):
    out = subprocess.run(["nm", "--defined-only", "-S"] + (["-D"] if dynamic else []) + [path],
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "TtWi":
            syms.setdefault(p[3].split("@")[0], (int(p[0], 16), int(p[1], 16)))
    return syms


def load_segments(path):
    """[(offset, vaddr, filesz)] of PT_LOAD, via readelf."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
    segs = []
    for line in out.splitlines():
        p = line.split()
        if p and p[0] == "LOAD":
            segs.append((int(p[1], 16), int(p[2], 16), int(p[4], 16)))
    return segs


def vaddr_to_offset(segs, vaddr):
    for off, va, sz in segs:
        if va <= vaddr < va + sz:
            return vaddr - va + off
    raise ValueError(hex(vaddr))


class Sensor:
    def __init__(self, channel, files):
        self.files = files  # file_id -> path
        self.out = queue.Queue()
        self.reads = 0
        self.read_bytes = 0
        self.welcome = threading.Event()
        self.stub = ig.IngestStub(channel)
        self.call = self.stub.Connect(self._gen())
        self.thread = threading.Thread(target=self._recv, daemon=True)
        self.thread.start()

    def _gen(self):
        while True:
            m = self.out.get()
            if m is None:
                return
            yield m

    def send(self, **kw):
        self.out.put(ip.SensorMessage(**kw))

    def _recv(self):
        try:
            for m in self.call:
                if m.HasField("welcome"):
                    self.welcome.set()
                elif m.HasField("read_range"):
                    rr = m.read_range
                    path = self.files.get(rr.file_id)
                    if path is None:
                        self.send(file_range=ip.FileRange(request_id=rr.request_id, file_id=rr.file_id,
                                                          offset=rr.offset, error="not registered"))
                        continue
                    with open(path, "rb") as f:
                        f.seek(rr.offset)
                        data = f.read(rr.length)
                    self.reads += 1
                    self.read_bytes += len(data)
                    self.send(file_range=ip.FileRange(request_id=rr.request_id, file_id=rr.file_id,
                                                      offset=rr.offset, data=data))
        except grpc.RpcError as e:
            self.error = e

    def close(self):
        self.out.put(None)
        self.thread.join(30)
        return self.call.code(), self.call.details()


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else "unix:/run/sonde/symbolizer.sock"
    bench = "--bench" in sys.argv
    channel = grpc.insecure_channel(target)
    sym = sg.SymbolsStub(channel)
    libc_id, libc_size = file_id(LIBC)
    bash_id, bash_size = file_id(BASH)
    libc_syms = nm(LIBC)
    bash_syms = nm(BASH)
    libc_segs = load_segments(LIBC)
    bash_segs = load_segments(BASH)
    failures = []
    # Fresh pids per run: the store keeps earlier runs' samples (retention).
    pid1 = 100000 + int.from_bytes(os.urandom(3), "big")
    pid2 = pid1 + 1

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    # Hello must come first.
    bad = ig.IngestStub(channel).Connect(iter([ip.SensorMessage(exit=ip.ProcessExit(pid=1))]))
    try:
        list(bad)
        check(False, "message before Hello is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, f"message before Hello -> {e.code()}")

    before = sym.Status(sp.StatusRequest(), timeout=5)
    s = Sensor(channel, {libc_id: LIBC, bash_id: BASH})
    t0 = time.monotonic()
    s.send(hello=ip.Hello(protocol_version=1, sensor_version="play", hostname="play-host",
                          kernel_release=os.uname().release, frequency_hz=99))
    check(s.welcome.wait(10), "Welcome received")
    s.send(kernel_symbols=ip.KernelSymbols(first=True, last=False, symbols=[
        ip.KernelSymbol(address=0xffffffff81000000, name="_stext"),
        ip.KernelSymbol(address=0xffffffff81100000, name="do_syscall_64")]))
    s.send(kernel_symbols=ip.KernelSymbols(first=False, last=True, symbols=[
        ip.KernelSymbol(address=0xffffffff81200000, name="entry_SYSCALL_64"),
        ip.KernelSymbol(address=0xffffffff81050000, name="ksys_write"),
        ip.KernelSymbol(address=0xffffffffc0000000, name="mod_fn", module="mymod")]))
    maps = [
        ip.Mapping(start=0x555555554000, end=0x555555654000, file_offset=0, file_id=bash_id, path=BASH,
                   file_size=bash_size, executable=True),
        ip.Mapping(start=0x7ffff7c00000, end=0x7ffff7e00000, file_offset=0, file_id=libc_id, path=LIBC,
                   file_size=libc_size, executable=True),
    ]
    s.send(process=ip.ProcessUpdate(pid=pid1, comm="bash", exe_path=BASH, mappings=maps))

    def off(syms, segs, name, delta):
        start, _ = syms[name]
        return vaddr_to_offset(segs, start + delta)

    # Stack 1 (leaf first): libc write+4 (pc) <- bash main+16 (return address)
    # with kernel ksys_write+0x10 <- entry_SYSCALL_64+0x20.
    bash_main = "main" if "main" in bash_syms else next(iter(bash_syms))
    st1 = ip.StackDef(id=1, kernel=[0xffffffff81050010, 0xffffffff81200020], user=[
        ip.Frame(file_id=libc_id, address=off(libc_syms, libc_segs, "write", 4)),
        ip.Frame(file_id=bash_id, address=off(bash_syms, bash_segs, bash_main, 16))])
    # Stack 2: malloc+1 <- a raw address <- an offset past every symbol.
    st2 = ip.StackDef(id=2, user=[
        ip.Frame(file_id=libc_id, address=off(libc_syms, libc_segs, "malloc", 1)),
        ip.Frame(address=0x1234),
        ip.Frame(file_id=bash_id, address=0x10)])
    now_ns = time.time_ns()
    s.send(stacks=ip.StackBatch(stacks=[st1, st2], samples=[
        ip.SampleCount(stack_id=1, pid=pid1, tid=pid1, count=7, first_unix_ns=now_ns, comm="ba;sh\n"),
        ip.SampleCount(stack_id=2, pid=pid2, tid=pid2, count=3, first_unix_ns=now_ns, comm="other")]))
    s.send(stats=ip.SensorStats(samples_taken=100, samples_lost=2, samples_dropped=1))

    def analysed():
        return sym.Status(sp.StatusRequest(), timeout=5).files_analysed >= 2
    deadline = time.monotonic() + 30
    while not analysed() and time.monotonic() < deadline:
        time.sleep(0.02)
    t_analysed = time.monotonic() - t0
    check(analysed(), f"libc and bash analysed ({t_analysed * 1000:.0f} ms incl. round trips, "
                      f"{s.reads} reads, {s.read_bytes >> 10} KiB)")
    code, details = s.close()
    check(code == grpc.StatusCode.OK, f"stream ends OK after half-close ({code} {details})")

    top = sym.Top(sp.ProfileQuery(pid=pid1), timeout=10)
    names = {e.function: (e.self, e.total) for e in top.entries}
    top2 = sym.Top(sp.ProfileQuery(pid=pid2), timeout=10)
    names.update({e.function: (e.self, e.total) for e in top2.entries})
    print("top:", names)
    check(top.total_samples + top2.total_samples == 10,
          f"Top total_samples == 10 ({top.total_samples + top2.total_samples})")
    check(names.get("write") == (0, 7), f"write self/total 0/7, the kernel frames are the leaf ({names.get('write')})")
    check(names.get(bash_main, (0, 0))[1] == 7, f"{bash_main} total 7")
    check(names.get("ksys_write_[k]") == (7, 7), f"ksys_write_[k] 7/7 ({names.get('ksys_write_[k]')})")
    check(names.get("malloc") == (3, 3), f"malloc 3/3 ({names.get('malloc')})")
    check("bash" not in names and "other" not in names, "comm is not a function")

    lines = {}
    for pid in (pid1, pid2):
        folded = sym.Folded(sp.ProfileQuery(pid=pid), timeout=10)
        lines.update({";".join([st.comm] + list(st.frames)): (st.count, st.pid) for st in folded.stacks})
    print("folded:", lines)
    want1 = f"ba:sh;{bash_main};write;entry_SYSCALL_64_[k];ksys_write_[k]"
    check(lines.get(want1) == (7, pid1), f"folded stack 1 '{want1}'")
    want2 = "other;bash+0x10;[unknown];malloc"
    check(lines.get(want2) == (3, pid2), f"folded stack 2 '{want2}'")
    f_pid = sym.Folded(sp.ProfileQuery(pid=pid2), timeout=10)
    check(f_pid.total_samples == 3 and len(f_pid.stacks) == 1, "Folded pid filter")
    f_old = sym.Folded(sp.ProfileQuery(since_unix_s=1, until_unix_s=1000), timeout=10)
    check(f_old.total_samples == 0, "Folded window in the past is empty")

    mstart, msize = libc_syms["malloc"]
    r = sym.Symbolize(sp.SymbolizeRequest(queries=[
        sp.SymbolizeQuery(path=LIBC, addresses=[mstart, mstart + 5]),
        sp.SymbolizeQuery(file_id=libc_id, addresses=[vaddr_to_offset(libc_segs, mstart + 2)],
                          kind=sp.ADDRESS_KIND_FILE_OFFSET),
        sp.SymbolizeQuery(file_id=os.urandom(16), addresses=[1]),
        sp.SymbolizeQuery(path="/nonexistent", addresses=[1])]), timeout=15)
    r0 = r.results[0]
    check(not r0.error and r0.symbols[1].function == "malloc" and r0.symbols[1].offset == 5
          and r0.symbols[1].file_name == "libc.so.6", f"Symbolize by path: {r0.symbols[1]}")
    check(r.results[1].symbols[0].function == "malloc" and r.results[1].symbols[0].offset == 2,
          "Symbolize by file offset")
    check(r.results[2].error == "unknown file", "unknown file_id")
    check(r.results[3].error == "unknown file", "unknown path")
    try:
        sym.Symbolize(sp.SymbolizeRequest(queries=[sp.SymbolizeQuery(path=LIBC)] * 1001), timeout=5)
        check(False, "1001 queries refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "1001 queries refused")

    st = sym.Status(sp.StatusRequest(), timeout=5)
    print(st)
    check(st.samples_taken - before.samples_taken == 100 and st.samples_lost - before.samples_lost == 2
          and st.samples_dropped - before.samples_dropped == 1, "sensor counters kept after the session ended")
    check(st.stacks_received - before.stacks_received == 2
          and st.samples_received - before.samples_received == 10, "stacks/samples received")

    if bench:
        addrs = [s_ + (sz // 2) for s_, sz in list(libc_syms.values())[:1000]] * 100
        req = sp.SymbolizeRequest(queries=[sp.SymbolizeQuery(path=LIBC, addresses=addrs)])
        sym.Symbolize(req, timeout=30)
        n, t1 = 0, time.monotonic()
        while time.monotonic() - t1 < 3:
            sym.Symbolize(req, timeout=30)
            n += len(addrs)
        print(f"bench: {n / (time.monotonic() - t1):.0f} warm lookups/s (100k addresses per request)")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
