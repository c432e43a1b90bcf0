#!/usr/bin/python3
"""Writes the seed corpus of fuzz-v8-lines (tests/fuzz/corpus/v8_lines/):
a Code record with a small source position table (V8's zigzag VLQ
entries), a script source chunk, the table alone and a cut record, in
fuzz-v8-lines.c's input format (flags byte, frame word 1, record)."""
import pathlib
import struct


def vlq(v):
    v = (v << 1) if v >= 0 else ((-v) << 1) - 1
    out = b""
    while True:
        b = v & 0x7f
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def table(entries):
    pc = pp = 0
    out = b""
    for c, o, i in entries:
        pos = ((o + 1) << 1) | ((i + 1) << 31)
        out += vlq(-(c - pc) - 1) + vlq(pos - pp)
        pc, pp = c, pos
    return out


if __name__ == "__main__":
    d = pathlib.Path(__file__).resolve().parent / "corpus" / "v8_lines"
    d.mkdir(parents=True, exist_ok=True)
    code = 0x7f0000001231
    t = table([(0, 4, -1), (40, 120, -1), (300, 200, 0)])
    coderec = struct.pack("<HBBHHQQQ", 1056, 1, 0, len(t), 0, code, 0x1234561, 0x5551)
    coderec += t.ljust(1024, b"\0")
    src = (b"x" * 99 + b"\n") * 15
    srcrec = struct.pack("<HBBHHIIQ", 1560, 1, 0, len(src), 0, len(src), 0, 0x5551)
    srcrec += src.ljust(1536, b"\0")
    w1 = struct.pack("<Q", (((code >> 3) & 0xffffffff) << 32) | 50)
    (d / "00-code").write_bytes(bytes([0x11]) + w1 + coderec)
    (d / "01-source").write_bytes(bytes([0x10]) + w1 + srcrec)
    (d / "02-table").write_bytes(bytes([0x17]) + w1 + t)
    (d / "03-cut-table").write_bytes(bytes([0x11]) + w1 + coderec[:40])
    # An interpreted frame's: a BytecodeArray's table as Node 20 built it
    # (bytecode offset -> script offset), the frame at bytecode 12.
    ba = 0x45485636b1
    bt = bytes.fromhex("012c022c0434040c05000a24051014230b430880010424")
    barec = struct.pack("<HBBHHQQQ", 1056, 1, 2, len(bt), 0, ba, 0x1234561, 0x5551)
    barec += bt.ljust(1024, b"\0")
    w1 = struct.pack("<Q", (((ba >> 3) & 0xffffffff) << 32) | 12)
    (d / "04-bytecode").write_bytes(bytes([0x11]) + w1 + barec)
