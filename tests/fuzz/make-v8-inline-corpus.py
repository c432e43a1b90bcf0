#!/usr/bin/python3
"""Writes the seed corpus of fuzz-v8-inline (tests/fuzz/corpus/v8_inline/):
inlining records as BPF copies them from an optimised Code's
deoptimization data (bpf/v8.h struct sonde_v8_inline), in
fuzz-v8-inline.c's input format (flags byte, inlining id, script offset,
record): two levels of inlining (round <- middle <- spin), a position not
inlined, a cycle, an id past the positions and a cut record."""
import pathlib
import struct

FNS = 16


def source_pos(offset, inlined):
    return ((offset + 1) << 1) | ((inlined + 1) << 31)


def record(fns, positions, code=0x7f0000001231, flags=0):
    fns = list(fns)
    out = struct.pack("<HBBHHQ", 1296, 1, flags, len(fns), 16 * len(positions), code)
    out += b"".join(struct.pack("<Q", f) for f, _ in fns).ljust(8 * FNS, b"\0")
    out += b"".join(struct.pack("<Q", s) for _, s in fns).ljust(8 * FNS, b"\0")
    pos = b"".join(struct.pack("<QiI", source_pos(o, p), fn, 0) for o, p, fn in positions)
    return out + pos.ljust(1024, b"\0")


def seed(flags, inlined, offset, rec):
    return bytes([flags]) + struct.pack("<ii", inlined, offset) + rec


if __name__ == "__main__":
    d = pathlib.Path(__file__).resolve().parent / "corpus" / "v8_inline"
    d.mkdir(parents=True, exist_ok=True)
    fns = [(0x5001, 0x6001), (0x5101, 0x6001)]
    two = record(fns, [(300, -1, 1), (120, 0, 0)])
    (d / "00-two-levels").write_bytes(seed(0xf0, 1, 40, two))
    (d / "01-not-inlined").write_bytes(seed(0xf0, -1, 40, two))
    (d / "02-cycle").write_bytes(seed(0xf0, 1, 40, record(fns, [(300, 1, 1), (120, 0, 0)])))
    (d / "03-id-past").write_bytes(seed(0x10, 5, 40, two))
    (d / "04-cut").write_bytes(seed(0x01, 1, 40, two[:100]))
    (d / "05-room-one").write_bytes(seed(0x00, 1, 40, two))
