#!/usr/bin/python3
"""Writes the seed corpus of fuzz-perl-meta (tests/fuzz/corpus/perl_meta/):
byte 0 (bit 0: fix the header; bits 4-7: the pid), a frame word (u64 LE,
bpf/perl5.h's SONDE_PERL_FRAME), then a struct sonde_perl_meta record:
a sub, the main program's and an eval's COP, full slots with cut flags,
hostile names, lengths past their slots, a short record, a lexical sub
without a package.

  /usr/bin/python3 tests/fuzz/make-perl-meta-corpus.py
"""
import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "perl_meta"
HEADER = "<HBBIQQHHHBB"  # size, version, type, pad, addr, checksum, 3 lengths, flags, pad


def rec(typ, addr, name=b"", pkg=b"", file=b"", flags=0, csum=77):
    h = struct.pack(HEADER, 544, 1, typ, 0, addr, csum, len(name), len(pkg), len(file), flags, 0)
    return h + name.ljust(128, b"\0") + pkg.ljust(128, b"\0") + file.ljust(256, b"\0")


def word(addr, typ, line, entry):
    return struct.pack("<Q", (min(line, 0xffff) << 48) | ((1 << 47) if entry else 0) |
                       (addr & 0x7ffffffffff8) | typ)


SEEDS = {
    "00-sub": b"\x10" + word(0x55d0a0b0c0d8, 0, 12, 0) +
    rec(1, 0x55d0a0b0c0d8, b"area", b"Shape", b"/tmp/branches.pl"),
    "01-main": b"\x20" + word(0x55d0a0b0c100, 1, 40, 1) +
    rec(2, 0x55d0a0b0c100, file=b"/tmp/branches.pl"),
    "02-eval": b"\x20" + word(0x55d0a0b0c100, 2, 3, 0) + rec(2, 0x55d0a0b0c100, file=b"(eval 1)"),
    "03-cut": b"\x31" + word(0x1000, 0, 0xffff, 1) +
    rec(1, 0x1000, b"n" * 128, b"p" * 128, b"f" * 256, flags=7),
    "04-hostile": b"\x41" + word(0x2000, 0, 1, 0) +
    rec(1, 0x2000, b"a;b\n\xff\xfe", b"P;Q", b"x\x01y"),
    "05-bad-lengths": b"\x50" + word(0x3000, 0, 1, 0) +
    struct.pack(HEADER, 544, 1, 1, 0, 0x3000, 0, 129, 300, 999, 0, 0),
    "06-short": b"\x01" + word(0x4000, 1, 1, 0) + struct.pack("<HBB", 544, 1, 2),
    "07-lexical-no-package": b"\x60" + word(0x5008, 0, 8, 0) +
    rec(1, 0x5008, b"helper", b"", b"lib/Mod.pm"),
}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in SEEDS.items():
        (OUT / name).write_bytes(data)


if __name__ == "__main__":
    main()
