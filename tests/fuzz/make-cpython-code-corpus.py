#!/usr/bin/python3.11
"""Seeds for fuzz-cpython-code: records (cpython_code.h's layout) of a few
real code objects of this python3.11, each with an instruction offset to
name, plus a cut name, a cut line table and a 3.10-marked record.
Usage: make-cpython-code-corpus.py OUTDIR"""
import os
import struct
import sys
import textwrap

HEADER = struct.Struct("<HBBIQQHHHBB")
Q, F, T = 128, 256, 1024
SIZE = HEADER.size + Q + F + T


def record(code, minor=11, flags=0, tcut=None):
    q = code.co_qualname.encode()[:Q]
    f = code.co_filename.encode()[:F]
    t = code.co_linetable[:T if tcut is None else tcut]
    if tcut is not None:
        flags |= 4
    h = HEADER.pack(SIZE, 1, minor, code.co_firstlineno, id(code), hash(code) & (2**64 - 1),
                    len(q), len(f), len(t), flags, 0)
    return h + q.ljust(Q, b"\0") + f.ljust(F, b"\0") + t.ljust(T, b"\0")


def main(out):
    os.makedirs(out, exist_ok=True)
    codes = [textwrap.dedent.__code__, textwrap.TextWrapper._wrap_chunks.__code__,
             os.walk.__code__, main.__code__]
    n = 0
    for c in codes:
        for off in (0, len(c.co_code) // 2 & ~1):
            with open(os.path.join(out, f"{n:02d}-{c.co_name}"), "wb") as fh:
                fh.write(bytes([1 | (n % 4) << 4]) + struct.pack("<I", off) + record(c))
            n += 1
    c = textwrap.TextWrapper._wrap_chunks.__code__
    for name, data in (("cut-table", record(c, tcut=7)), ("py310", record(c, minor=10)),
                       ("cut-name", record(c, flags=1))):
        with open(os.path.join(out, f"{n:02d}-{name}"), "wb") as fh:
            fh.write(bytes([0]) + struct.pack("<I", 40) + data)
        n += 1


if __name__ == "__main__":
    main(sys.argv[1])
