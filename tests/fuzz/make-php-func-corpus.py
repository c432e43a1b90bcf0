#!/usr/bin/python3
"""Seeds for fuzz-php-func: records (php_func.h's layout, bpf/php.h's
struct sonde_php_meta) of the kinds of functions PHP has (a method, a
script's top level, a closure, eval()'d code, an internal function, a
static method of an internal class), each with a line to name, plus cut
names and a record of an unknown version.
Usage: make-php-func-corpus.py OUTDIR"""
import os
import struct
import sys

HEADER = struct.Struct("<HBBIQQIHHHB5x")
N, C, F = 128, 128, 256
SIZE = HEADER.size + N + C + F


def record(kind, name, cls, file, addr, flags=0, version=1, fn_flags=0):
    n, c, f = name.encode()[:N], cls.encode()[:C], file.encode()[:F]
    h = HEADER.pack(SIZE, version, kind, fn_flags, addr, addr * 31 + 7, 10, len(n), len(c),
                    len(f), flags)
    return h + n.ljust(N, b"\0") + c.ljust(C, b"\0") + f.ljust(F, b"\0")


def main(out):
    assert HEADER.size == 40
    os.makedirs(out, exist_ok=True)
    seeds = [
        ("method", 14, record(2, "spin", "Worker", "/srv/app/worker.php", 0x7f0010)),
        ("main", 65, record(2, "", "", "/srv/app/index.php", 0x7f0020)),
        ("closure", 7, record(2, "{closure}", "App\\Http\\Kernel", "/srv/app/k.php", 0x7f0030,
                              fn_flags=0x400000)),
        ("eval", 1, record(4, "", "", "/srv/app/x.php(3) : eval()'d code", 0x7f0040)),
        ("internal", 0, record(1, "crc32", "", "", 0x7f0050)),
        ("static", 0, record(1, "stop", "ExcimerProfiler", "", 0x7f0060)),
        ("cut", 3, record(2, "n" * N, "c" * C, "/" + "f" * (F - 1), 0x7f0070, flags=7)),
        ("utf8", 3, record(2, "fünf", "Ça", "/srv/é.php", 0x7f0080)),
        ("version", 3, record(2, "f", "", "/x.php", 0x7f0090, version=2)),
        ("big-line", 0xffff, record(2, "f", "", "/x.php", 0x7f00a0)),
    ]
    for i, (name, line, rec) in enumerate(seeds):
        with open(os.path.join(out, f"{i:02d}-{name}"), "wb") as fh:
            fh.write(bytes([1 | (i % 4) << 4]) + struct.pack("<I", line) + rec)


if __name__ == "__main__":
    main(sys.argv[1])
