#!/usr/bin/python3
"""Writes the seed corpus of fuzz-ruby-meta (tests/fuzz/corpus/ruby_meta/):
inputs of fuzz-ruby-meta.c (flags byte, u32 pc index, then a record laid
out as bpf/ruby.h's struct sonde_ruby_meta): an iseq of a method with a
line table that needs a succinct index block (its positions and lines as
ruby3.1 laid out Worker#heavy's, stretched past 54 words), a block, a
cfunc of a singleton class, a record whose slots were cut, one with
hostile bytes in its names.

  /usr/bin/python3 tests/fuzz/make-ruby-meta-corpus.py
"""
import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "ruby_meta"
SIZE = 1920


def succ_table(positions, iseq_size):
    imm = [0] * 6
    rank = 0
    k = 0
    for x in range(54):
        while k < len(positions) and positions[k] <= x:
            k += 1
            rank += 1
        imm[x // 9] |= rank << ((x % 9) * 7)
    out = struct.pack("<6Q", *imm)
    blocks = (iseq_size - 54 + 511) // 512 if iseq_size > 54 else 0
    for b in range(min(blocks, 2)):
        bits = [0] * 8
        start = rank
        for x in positions:
            if 54 + 512 * b <= x < 54 + 512 * (b + 1):
                bit = x - 54 - 512 * b
                bits[bit // 64] |= 1 << (bit % 64)
                rank += 1
        small, sub = 0, 0
        for s in range(1, 8):
            sub += bin(bits[s - 1]).count("1")
            small |= sub << ((s - 1) * 9)
        out += struct.pack("<IIQ8Q", start, 0, small, *bits)
    return out


def record(typ, label, base, klass, path, flags=0, positions=(), lines=(), iseq_size=0,
           first=1, cut_lengths=False):
    succ = succ_table(list(positions), iseq_size) if positions else b""
    lt = b"".join(struct.pack("<iiI", l, 0, 0) for l in lines)
    head = struct.pack("<HBBIQQIIHHHHHHBB2x", SIZE, 1, typ, first, 0x7f00deadbee0, 0x1234,
                       iseq_size, len(lines), len(label), len(base), len(klass), len(path),
                       len(succ), len(lt), flags, 12)
    body = (label.ljust(96, b"\0") + base.ljust(64, b"\0") + klass.ljust(96, b"\0") +
            path.ljust(256, b"\0") + succ.ljust(208, b"\0") + lt.ljust(1152, b"\0"))
    rec = head + body
    assert len(rec) == SIZE, len(rec)
    if cut_lengths:
        rec = rec[:32] + struct.pack("<HHHH", 200, 64, 96, 300) + rec[40:]
    return rec


def seed(name, pc, rec, flags=0):
    (OUT / name).write_bytes(bytes([flags]) + struct.pack("<I", pc) + rec)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    pos = [0, 3, 9, 14, 20, 27, 33, 60, 70, 300, 590, 700]
    lines = [3, 3, 4, 4, 4, 5, 6, 7, 7, 8, 9, 10]
    seed("method", 28, record(1, b"heavy", b"heavy", b"Worker", b"/srv/prog.rb",
                              positions=pos, lines=lines, iseq_size=720, first=3))
    seed("method-block", 650, record(1, b"heavy", b"heavy", b"Worker", b"/srv/prog.rb",
                                     positions=pos, lines=lines, iseq_size=720, first=3))
    seed("block", 5, record(1, b"block in light", b"light", b"Worker", b"prog.rb", flags=1,
                            positions=[0, 4], lines=[14, 15], iseq_size=10, first=14))
    seed("main-one-entry", 9, record(1, b"<main>", b"<main>", b"", b"prog.rb",
                                     positions=[0], lines=[1], iseq_size=26))
    seed("cfunc", 0, record(2, b"crc32", b"", b"Zlib", b"", flags=1))
    seed("cut", 3, record(1, b"x" * 96, b"x" * 64, b"K" * 96, b"p" * 256, flags=0x1e,
                          positions=pos, lines=lines, iseq_size=5000))
    seed("bad-lengths", 3, record(1, b"a", b"a", b"", b"p", cut_lengths=True))
    seed("hostile", 1, record(2, b"a;b\n\xff\xfe", b"", b"K\x01\x7f;", b""), flags=1)


if __name__ == "__main__":
    main()
