"""Python frames spliced into native stacks by the real symbolizer (issue 5,
step 4), over the real Ingest protocol: a sensor played by Python maps
Debian's stripped python3.11 and sends code object records (built from
code objects compiled by this python3.11: name, file, first line, line
table) and a stack whose native frames are python3.11's own exported
functions, with two _PyEval_EvalFrameDefault frames and two runs of Python
frames. Each eval frame is replaced by its run with the line of the
sampled instruction (co_lines()); a code object never sent, one whose
record was damaged and one sent with another checksum are
'<unknown python frame>'; the session survives the damaged record. The
OTLP export carries the same Python frames, of frame type cpython."""
import dis
import struct
import subprocess

from conftest import Symbolizer, ingest_pb2, make_tmp, symbols_pb2, wait_for
from pysensor import PySensor
from test_otlp import Receiver, attr_map, free_port, sample_total

PYTHON = "/usr/bin/python3.11"
HEADER = struct.Struct("<HBBIQQHHHBB")
Q, F, T = 128, 256, 1024
SIZE = HEADER.size + Q + F + T
FILE = "/srv/app/hot.py"

SRC = '''\
def leaf(n):
    t = 0
    for i in range(n):
        t += i * i
    return t

def mid(n):
    return leaf(n) + 1

def outer(n):
    x = [mid(n) for _ in range(3)]
    return x
'''


def record(code, addr, checksum, size=SIZE):
    q, f, t = code.co_qualname.encode(), code.co_filename.encode(), code.co_linetable
    h = HEADER.pack(size, 1, 11, code.co_firstlineno, addr, checksum, len(q), len(f), len(t), 0, 0)
    return h + q.ljust(Q, b"\0") + f.ljust(F, b"\0") + t.ljust(T, b"\0")


def offset_of(code, opname, line):
    """Byte offset of the first instruction opname on source line `line`."""
    for ins in dis.get_instructions(code):
        if ins.opname == opname and ins.positions.lineno == line:
            return ins.offset
    raise AssertionError(f"no {opname} on line {line} of {code.co_qualname}")


def file_offset(sym):
    """File offset of an exported symbol of python3.11 (+0x10: inside it)."""
    nm = subprocess.run(["nm", "-D", "--defined-only", PYTHON], capture_output=True, text=True,
                        check=True).stdout
    vaddr = next(int(l.split()[0], 16) for l in nm.splitlines() if l.split()[-1] == sym)
    for l in subprocess.run(["readelf", "-lW", PYTHON], capture_output=True, text=True,
                            check=True).stdout.splitlines():
        f = l.split()
        if f and f[0] == "LOAD":
            off, va, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if va <= vaddr < va + filesz:
                return vaddr - va + off + 0x10
    raise AssertionError(sym)


def folded(sym):
    r = sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
    return [([s.comm] + list(s.frames), s.count) for s in r.stacks]


def test_python_frames_replace_the_eval_loop():
    mod = compile(SRC, FILE, "exec")
    codes = {c.co_name: c for c in mod.co_consts if hasattr(c, "co_code")}
    listcomp = next(c for c in codes["outer"].co_consts if hasattr(c, "co_code"))
    leaf, mid, outer = codes["leaf"], codes["mid"], codes["outer"]
    addr = {"leaf": 0x7f0000010000, "mid": 0x7f0000020000, "outer": 0x7f0000030000,
            "listcomp": 0x7f0000040000, "module": 0x7f0000050000, "damaged": 0x7f0000060000,
            "other": 0x7f0000070000}
    hot = offset_of(leaf, "BINARY_OP", 4)          # t += i * i
    call_leaf = offset_of(mid, "CALL", 8)          # return leaf(n) + 1
    call_mid = offset_of(listcomp, "CALL", 11)     # mid(n) in the comprehension
    call_comp = offset_of(outer, "CALL", 11)

    tmp = make_tmp()
    recv = Receiver(free_port())
    recv.start()
    sym = Symbolizer(tmp, ["--otlp-endpoint", f"127.0.0.1:{recv.port}", "--otlp-insecure",
                           "--otlp-interval", "1"])
    try:
        ps = PySensor(sym.address, {PYTHON: open(PYTHON, "rb").read()})
        ps.hello()
        ps.process(777, "python3.11", [PYTHON])
        recs = [ingest_pb2.InterpreterRecord(pid=777, kind=1, data=record(c, addr[k], addr[k] ^ 1))
                for k, c in (("leaf", leaf), ("mid", mid), ("outer", outer), ("listcomp", listcomp))]
        recs.append(ingest_pb2.InterpreterRecord(pid=777, kind=1, data=record(leaf, addr["damaged"], 0,
                                                                      size=SIZE - 1)[:-1]))
        recs.append(ingest_pb2.InterpreterRecord(pid=777, kind=1, data=record(mid, addr["other"], 5)))
        ps.send(interp_records=ingest_pb2.InterpreterRecords(records=recs))

        py = ps.ids[PYTHON]
        native = [("PyNumber_Add", 0), ("_PyEval_EvalFrameDefault", 1),
                  ("_PyFunction_Vectorcall", 0), ("_PyEval_EvalFrameDefault", 1),
                  ("Py_RunMain", 0), ("Py_BytesMain", 0)]
        user = [ingest_pb2.Frame(file_id=py, address=file_offset(n)) for n, _ in native]
        def P(code, offset, checksum=0, entry=False):
            """A CPython InterpFrame: the walker's word (bpf/cpython.h), the checksum."""
            word = offset << 48 | (1 << 47 if entry else 0) | code
            return ingest_pb2.InterpFrame(kind=1, words=[word, checksum] if checksum else [word])
        python = [  # leaf first; the inner run ends at mid (an entry frame)
            P(code=addr["leaf"], offset=hot, checksum=addr["leaf"] ^ 1),
            P(code=addr["mid"], offset=call_leaf, entry=True),
            P(code=addr["listcomp"], offset=call_mid, checksum=addr["listcomp"] ^ 1),
            P(code=addr["outer"], offset=call_comp),
            P(code=addr["module"], offset=0),                     # never sent
            P(code=addr["damaged"], offset=0),                    # refused
            P(code=addr["other"], offset=0, checksum=6, entry=True),  # reused address
        ]
        now = __import__("time").time_ns()
        ps.send(stacks=ingest_pb2.StackBatch(
            stacks=[ingest_pb2.StackDef(id=1, user=user, interp=python, pid=777)],
            samples=[ingest_pb2.SampleCount(stack_id=1, pid=777, tid=777, count=9, first_unix_ns=now,
                                            last_unix_ns=now, comm="hot")]))

        def got():
            return [f for f, _ in folded(sym) if f[0] == "hot"] or None
        frames = wait_for(got, 60, "the stack in the store", interval=0.5)[0]
        unknown = "<unknown python frame>"
        assert frames == [
            "hot", "Py_BytesMain", "Py_RunMain",
            unknown, unknown, unknown,
            f"outer ({FILE}:11)", f"outer.<locals>.<listcomp> ({FILE}:11)",
            "_PyFunction_Vectorcall",
            f"mid ({FILE}:8)", f"leaf ({FILE}:4)",
            "PyNumber_Add"], frames

        wait_for(lambda: sample_total(recv.snapshot()) == 9 or None, 30, "9 samples over OTLP",
                 interval=0.5)
        types = {}
        for req in recv.snapshot():
            d = req.dictionary
            for loc in d.location_table[1:]:
                t = attr_map(req, loc.attribute_indices).get("profile.frame.type")
                for ln in loc.lines:
                    fn = req.dictionary.string_table[d.function_table[ln.function_index].name_strindex]
                    types[fn] = t
        for py in (f"leaf ({FILE}:4)", f"mid ({FILE}:8)", f"outer ({FILE}:11)", unknown):
            assert types.get(py) == "cpython", (py, types)
        assert types.get("PyNumber_Add") == "native", types
        assert "_PyEval_EvalFrameDefault" not in types, types
        ps.close()
        assert sym.proc.poll() is None
    finally:
        recv.stop()
        sym.stop()
