#!/usr/bin/python3
"""Writes the seed corpus of fuzz-v8-baseline (tests/fuzz/corpus/
v8_baseline/): the records BPF copies for V8's baseline frames (bpf/v8.h
struct sonde_v8_baseline and struct sonde_v8_sizes), in fuzz-v8-baseline.c's
input format (flags byte, the frame's word 1, a count byte, the record).
The bytes are Node 20's (V8 11.3), as tests/unit/test-v8.c has them: its
kBytecodeSizes, and leaf()'s baseline offset table and bytecodes. Seeds:
the lengths, the baseline record (a pc in the loop, one in the prologue, a
return address), one with a Wide-prefixed bytecode, a cut table, and a
VLQ past 32 bits."""
import pathlib
import re
import struct

HERE = pathlib.Path(__file__).resolve().parent
TEST = (HERE.parent / "unit" / "test-v8.c").read_text()


def array(name):
    body = re.search(r"static const uint8_t " + name + r"\[\d+\] = \{(.*?)\};", TEST, re.S)
    return bytes(int(x, 16) for x in re.findall(r"0x[0-9a-f]{2}", body.group(1)))


SIZES = array("node20_sizes")
TABLE = array("leaf_offsets")
BYTECODES = array("leaf_bytecodes")
CODE, BA = 0x3d1659570a79, 0x3d16595709a1


def sizes_rec(sizes=SIZES):
    return struct.pack("<HBBHH", 776, 1, 0, len(sizes) // 3, len(sizes)) + sizes.ljust(768, b"\0")


def baseline_rec(table=TABLE, bytecodes=BYTECODES, flags=0):
    return (struct.pack("<HBBHHQQQ", 2048, 1, flags, len(table), len(bytecodes), CODE, BA, 0)
            + table.ljust(512, b"\0") + bytecodes.ljust(1504, b"\0"))


def seed(flags, pc, rec, count=194):
    return bytes([flags]) + struct.pack("<Q", (CODE >> 3 & 0xffffffff) << 32 | pc) + \
        bytes([count]) + rec


def main():
    out = HERE / "corpus" / "v8_baseline"
    out.mkdir(parents=True, exist_ok=True)
    wide = bytes([0x00, 0x0b, 0x03, 0x01, 0x0b, 0xf9, 0xff, 0xff, 0xff, 0xa9])
    seeds = {
        "00-sizes": seed(0x10, 120, sizes_rec()),
        "01-baseline": seed(0x15, 120, baseline_rec()),
        "02-prologue": seed(0x15, 10, baseline_rec()),
        "03-return-address": seed(0x11, 309, baseline_rec()),
        "04-wide": seed(0x15, 15, baseline_rec(bytes([10, 5, 0x81, 0x01, 7]), wide)),
        "05-cut-table": seed(0x15, 200, baseline_rec(TABLE[:10], flags=1)),
        "06-huge-vlq": seed(0x15, 12, baseline_rec(bytes([0xff] * 4 + [0x7f]))),
        "07-direct": seed(0x04, 24, TABLE + BYTECODES[:len(TABLE)]),
    }
    for name, data in seeds.items():
        (out / name).write_bytes(data)


if __name__ == "__main__":
    main()
