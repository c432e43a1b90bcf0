#!/usr/bin/python3
"""Writes the seed corpora of the service fuzzers: tests/fuzz/corpus/
ingest, symbols_api (records of fuzz_service.h: u8 op, u16 length, bytes),
kallsyms, rawstack and unwind_chunks. Real-looking inputs: a session as a sensor sends it
(with a small real ELF, libsonde_work.so from the build, served back when
the symbolizer asks), Symbols API calls as the CLI makes them, an excerpt
of this machine's /proc/kallsyms, raw stacks as the store keeps them.

  /usr/bin/python3 tests/fuzz/make-service-corpus.py BUILD_DIR
"""
import hashlib
import pathlib
import struct
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parents[1]
BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else SRC / "build")
OUT = HERE / "corpus"

stubs = tempfile.mkdtemp(prefix="sonde-corpus-stubs.")
subprocess.run(["protoc", f"-I{SRC / 'proto/sonde/v1'}", f"--python_out={stubs}",
                "ingest.proto", "symbols.proto"], check=True)
sys.path.insert(0, stubs)
import ingest_pb2 as pb  # noqa: E402
import symbols_pb2 as spb  # noqa: E402


def fileid(data):
    head, tail = data[:4096], data[-4096:]
    return hashlib.sha256(head + tail + struct.pack(">Q", len(data))).digest()[:16]


def rec(op, payload):
    assert len(payload) < 65536
    return bytes([op]) + struct.pack("<H", len(payload)) + payload


def msg(**kw):
    return rec(0, pb.SensorMessage(**kw).SerializeToString())


def write(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


ELF = (BUILD / "tests/workload/libsonde_work.so").read_bytes()
ELF_ID = fileid(ELF)
ELF_PATH = "/opt/sonde/lib/libsonde_work.so"
FAKE_ID = bytes(range(16))


def hello(**kw):
    return msg(hello=pb.Hello(protocol_version=1, sensor_version="0.1.0", hostname="node-7",
                              boot_id="1c0b4e0c-2f7a-4e53-a3d5-6a1f0e8b9c21",
                              kernel_release="6.1.0-18-amd64", frequency_hz=19,
                              sensor_start_unix_ns=1764740000000000000, **kw))


def process(pid=4242, comm="workload", file_id=ELF_ID, size=len(ELF)):
    maps = [pb.Mapping(start=0x7f0000001000, end=0x7f0000002000, file_offset=0x1000,
                       file_id=file_id, path=ELF_PATH, file_size=size, executable=True),
            pb.Mapping(start=0x7ffd0000, end=0x7ffd2000, path="[vdso]", executable=True)]
    return msg(process=pb.ProcessUpdate(pid=pid, comm=comm, exe_path="/usr/bin/workload",
                                        start_time_ticks=123456,
                                        cgroup="0::/system.slice/docker-" + "ab" * 32 + ".scope",
                                        mappings=maps))


KSYMS = [(0xffffffff81000000, "_stext", ""), (0xffffffff81001000, "do_syscall_64", ""),
         (0xffffffff81002000, "asm_sysvec_apic_timer_interrupt", ""),
         (0xffffffffc0001000, "ext4_file_read_iter", "ext4")]


def kernel_symbols():
    half = len(KSYMS) // 2
    a = pb.KernelSymbols(first=True, symbols=[pb.KernelSymbol(address=x, name=n, module=m)
                                              for x, n, m in KSYMS[:half]])
    b = pb.KernelSymbols(last=True, symbols=[pb.KernelSymbol(address=x, name=n, module=m)
                                             for x, n, m in KSYMS[half:]])
    return msg(kernel_symbols=a) + msg(kernel_symbols=b)


def stacks(file_id=ELF_ID):
    defs = [pb.StackDef(id=1, kernel=[0xffffffff81001234, 0xffffffff81000010],
                        user=[pb.Frame(file_id=file_id, address=0x1139),
                              pb.Frame(file_id=file_id, address=0x1160),
                              pb.Frame(address=0x7ffd0000123)], outcome=1),
            pb.StackDef(id=2, user=[pb.Frame(file_id=file_id, address=0x1180)], outcome=2),
            pb.StackDef(id=3, kernel=[0xffffffffc0001100], outcome=0)]
    counts = [pb.SampleCount(stack_id=1, pid=4242, tid=4242, count=17,
                             first_unix_ns=1764740001000000000, last_unix_ns=1764740001900000000,
                             comm="workload"),
              pb.SampleCount(stack_id=2, pid=4242, tid=4243, count=3, comm="worker-1"),
              pb.SampleCount(stack_id=3, pid=0, tid=0, count=5, comm="swapper/0"),
              # off-CPU: 2 blocks, 35 ms in all
              pb.SampleCount(stack_id=1, pid=4242, tid=4242, count=2, comm="workload", profile=1,
                             weight=35000000)]
    return msg(stacks=pb.StackBatch(stacks=defs, samples=counts))


def stats():
    return msg(stats=pb.SensorStats(samples_taken=25, samples_lost=0, samples_dropped=0,
                                    processes=1, files=1))


TICK, HALF_CLOSE = rec(3, b""), rec(2, b"")
SERVE = rec(1, ELF)

# ---- ingest ----
write("ingest", "hello", hello())
write("ingest", "session", hello() + process() + kernel_symbols() + stacks() + stats() + TICK +
      HALF_CLOSE)
write("ingest", "session-served", hello() + process() + stacks() + SERVE + TICK + SERVE + SERVE +
      SERVE + SERVE + kernel_symbols() + stats() + HALF_CLOSE + SERVE + TICK)
write("ingest", "session-read-errors", hello() + process() + stacks() + rec(1, b"") + TICK +
      stats() + HALF_CLOSE)
write("ingest", "exit-and-redefine", hello() + process() + stacks(FAKE_ID) +
      msg(exit=pb.ProcessExit(pid=4242)) + stacks(FAKE_ID) + TICK)
write("ingest", "no-hello", process() + stacks())
write("ingest", "unknown-stack-id", hello() + msg(stacks=pb.StackBatch(
    samples=[pb.SampleCount(stack_id=99, pid=1, tid=1, count=1)])))
write("ingest", "bad-file-id", hello() + msg(process=pb.ProcessUpdate(
    pid=7, mappings=[pb.Mapping(start=1, end=2, file_id=b"short", file_size=10)])))
write("ingest", "symbols-without-first", hello() + msg(kernel_symbols=pb.KernelSymbols(
    last=True, symbols=[pb.KernelSymbol(address=1, name="x")])))
write("ingest", "undecodable", hello() + rec(0, b"\xff\xff\xff\xff\x0f"))
# A reconnect: the tables the sensor says it holds (one of a file it maps,
# one of a file it does not), a kernel build ID; and a malformed claim.
write("ingest", "reconnect-loaded-tables", hello(
    loaded_tables=[pb.LoadedTable(file_id=ELF_ID, table_version=0x1234),
                   pb.LoadedTable(file_id=FAKE_ID, table_version=1)],
    kernel_build_id=bytes(range(20))) + process() + kernel_symbols() + stacks() + TICK + SERVE +
    TICK)
write("ingest", "loaded-tables-bad-id", hello(loaded_tables=[pb.LoadedTable(file_id=b"abc")]))


def code_record(code, addr, size=1440):
    """A CPython code object record as BPF copies it (cpython_code.h)."""
    q, f, t = code.co_qualname.encode(), code.co_filename.encode(), code.co_linetable
    h = struct.pack("<HBBIQQHHHBB", size, 1, 11, code.co_firstlineno, addr, addr ^ 1, len(q),
                    len(f), len(t), 0, 0)
    return h + q.ljust(128, b"\0") + f.ljust(256, b"\0") + t.ljust(1024, b"\0")


# Python frames (issue 5): two records (one cut short), a stack whose
# native frames are replaced by the Python ones where the eval loop is.
PY_CODE = compile("def hot(n):\n    t = 0\n    for i in range(n):\n        t += i\n",
                  "/srv/hot.py", "exec").co_consts[0]
write("ingest", "python-frames", hello() + process() + msg(interp_records=pb.InterpreterRecords(
    records=[pb.InterpreterRecord(pid=4242, kind=1, data=code_record(PY_CODE, 0x7f1000)),
             pb.InterpreterRecord(pid=4242, kind=1, data=code_record(PY_CODE, 0x7f2000)[:100])])) +
      msg(stacks=pb.StackBatch(stacks=[pb.StackDef(
          id=1, user=[pb.Frame(file_id=ELF_ID, address=0x1139), pb.Frame(file_id=ELF_ID, address=0x1160)],
          # CPython frame words (bpf/cpython.h): offset << 48 | entry << 47 | code
          interp=[pb.InterpFrame(kind=1, words=[8 << 48 | 0x7f1000, 0x7f1001]),
                  pb.InterpFrame(kind=1, words=[1 << 47 | 0x7f2000])], pid=4242, outcome=1)],
          samples=[pb.SampleCount(stack_id=1, pid=4242, tid=4242, count=4, comm="python3")])) +
      SERVE + TICK + HALF_CLOSE)

# ---- symbols_api: 0 Symbolize, 1 Upload, 2 Top, 3 Folded, 4 Status ----
def call(op, m):
    return rec(op, m.SerializeToString())


upload = call(1, spb.UploadRequest(file_id=ELF_ID, size=len(ELF), offset=0, data=ELF,
                                   name="libsonde_work.so"))
sym_id = call(0, spb.SymbolizeRequest(queries=[spb.SymbolizeQuery(
    file_id=ELF_ID, addresses=[0x1139, 0x1160, 0x1180, 0x10, 0xffffffff])],
    options=spb.SymbolizeOptions(lines=True, inlines=True, demangle=True)))
write("symbols_api", "status", call(4, spb.StatusRequest()))
write("symbols_api", "upload-then-symbolize", upload + sym_id + call(0, spb.SymbolizeRequest(
    queries=[spb.SymbolizeQuery(file_id=ELF_ID, addresses=[0x1139], kind=1)],
    options=spb.SymbolizeOptions(compact=True))))
write("symbols_api", "upload-chunks", call(1, spb.UploadRequest(
    file_id=ELF_ID, size=len(ELF), offset=0, data=ELF[:8192], name="libsonde_work.so")) +
    call(1, spb.UploadRequest(file_id=ELF_ID, size=len(ELF), offset=8192, data=ELF[8192:])) +
    sym_id)
write("symbols_api", "upload-wrong-id", call(1, spb.UploadRequest(
    file_id=FAKE_ID, size=len(ELF), offset=0, data=ELF, name="x")))
write("symbols_api", "symbolize-unknown", call(0, spb.SymbolizeRequest(queries=[
    spb.SymbolizeQuery(path="/usr/lib/x86_64-linux-gnu/libc.so.6", addresses=[0x29d90]),
    spb.SymbolizeQuery(build_id="a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", addresses=[1]),
    spb.SymbolizeQuery(file_id=b"short", addresses=[1])])))
write("symbols_api", "top-folded", call(2, spb.ProfileQuery()) + call(3, spb.ProfileQuery()))
pq = spb.ProfileQuery(since_unix_s=1764740000, until_unix_s=1764743600, pid=4242, limit=5)
write("symbols_api", "top-folded-filtered", call(2, pq) + call(3, pq))

# ---- kallsyms ----
try:
    lines = pathlib.Path("/proc/kallsyms").read_text().splitlines()
except OSError:
    lines = []
pick = [l for l in lines[:40]] + [l for l in lines if "\t[" in l][:40]
if not any(int(l.split()[0], 16) for l in pick if l.split()):
    # Unprivileged or kptr_restrict: zeros; make plausible addresses.
    pick = [f"{0xffffffff81000000 + 0x40 * i:016x} {l.split()[1]} {' '.join(l.split()[2:])}"
            for i, l in enumerate(pick)]
write("kallsyms", "proc-kallsyms-excerpt", ("\n".join(pick) + "\n").encode())
write("kallsyms", "edge-cases", b"ffffffff81000000 T _stext\n"
      b"ffffffff81000010 t short\t[mod]\n"
      b"ffffffff81000020 W weak_sym\t[unterminated\n"
      b"ffffffffc0000000 T module_sym\tnobracket\n"
      b"0000000000000000 T zero\n"
      b"ffffffffffffffff T top\n"
      b"xyz T not_hex\n"
      b"ffffffff81000030 D data_symbol\n"
      b"ffffffff81000040 T \n"
      b"ffffffff81000050 T")


# ---- rawstack: u8 version 1, u16 count, frames ----
def raw(frames):
    out = bytearray([1]) + struct.pack("<H", len(frames))
    for f in frames:
        if f[0] == 1:
            out += bytes([1]) + f[1] + struct.pack("<Q", f[2])
        elif f[0] == 2:
            out += bytes([2]) + struct.pack("<Q", f[1])
        else:
            name = f[2].encode()
            out += bytes([3]) + struct.pack("<QB", f[1], len(name)) + name
    return bytes(out)


mixed = raw([(3, 0xffffffff81001234, "do_syscall_64"), (3, 0xffffffff81000010, ""),
             (1, ELF_ID, 0x1139), (1, ELF_ID, 0x1160), (2, 0x7ffd0000123)])
write("rawstack", "mixed", mixed)
write("rawstack", "empty", raw([]))
write("rawstack", "user-only", raw([(1, ELF_ID, 0x1180)] * 3))
write("rawstack", "truncated", mixed[:-5])
write("rawstack", "count-too-high", mixed[:1] + struct.pack("<H", 6) + mixed[3:])
write("rawstack", "trailing-bytes", mixed + b"\x00")
write("rawstack", "bad-version", b"\x02" + mixed[1:])


# ---- unwind_chunks: 0 SymbolizerMessage, 1 process, 2 exit, 3 reconnect ----
def uid(which):
    return bytes([which]) + bytes([0xa0 + which]) * 15


def rows(n, start=0x1000, step=0x10, unsorted=False):
    out = b""
    for i in range(n):
        pc = start + (n - i if unsorted else i) * step
        out += struct.pack("<IBBhi", pc, 1 + i % 2, i % 2, -16, 8 + 8 * (i % 4))
    return out


def table(which, data, first=True, last=True, total=None, version=1, error="", table_version=0):
    t = pb.UnwindTable(file_id=uid(which), format_version=version, first=first, last=last,
                       total_rows=total if total is not None else len(data) // 12, rows=data,
                       error=error, table_version=table_version)
    return rec(0, pb.SymbolizerMessage(unwind_table=t).SerializeToString())


def proc(pid, maps):
    out = struct.pack("<I", pid)
    for start, end, off, which in maps:
        out += struct.pack("<QQQB", start, end, off, which)
    return rec(1, out)


two = rows(300)
write("unwind_chunks", "versions", proc(7, [(0x400000, 0x500000, 0, 0)]) +
      table(0, rows(10), table_version=5) + table(0, rows(10), table_version=5) +
      table(0, rows(20), table_version=6) + rec(3, b"") + table(0, rows(20), table_version=6))
write("unwind_chunks", "two-chunks-and-process",
      proc(100, [(0x400000, 0x401000, 0, 0), (0x7f0000000000, 0x7f0000010000, 0x1000, 2)]) +
      table(0, two[:150 * 12], last=False, total=300) + table(0, two[150 * 12:], first=False) +
      table(2, rows(40)) + proc(101, [(0x500000, 0x510000, 0, 0)]) + rec(2, struct.pack("<I", 100)))
write("unwind_chunks", "rejections", table(1, rows(10)) + table(0, rows(10, unsorted=True)) +
      table(0, rows(10), version=9) + table(0, rows(10)[:-3]) + table(2, b"", error="no .eh_frame") +
      table(0, rows(5), first=False) + table(0, rows(4), total=7))
write("unwind_chunks", "reconnect-mid-table", table(0, two[:1200], last=False, total=300) + rec(3, b"") +
      table(0, two[1200:], first=False) + table(0, rows(3000)))
write("unwind_chunks", "welcome-and-read-range",
      rec(0, pb.SymbolizerMessage(welcome=pb.Welcome(protocol_version=1, max_message_bytes=16 << 20,
                                                     max_read_bytes=4 << 20)).SerializeToString()) +
      rec(0, pb.SymbolizerMessage(read_range=pb.ReadRange(request_id=1, file_id=uid(0), offset=0,
                                                          length=4096)).SerializeToString()))
print("corpora written under", OUT)
