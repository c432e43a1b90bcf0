#!/usr/bin/python3
"""Writes the seed corpora of fuzz-proc-maps and fuzz-proc-stat
(tests/fuzz/corpus/proc_maps/, proc_stat/) from this machine's kernel.

proc_maps: this process's /proc/self/maps after it mapped, executable,
files whose names a target could choose: spaces, parentheses, a name
ending in " (deleted)", a newline (the kernel writes it as \\012), a
path of about 4000 bytes; one of them deleted while mapped. Then
hand-made edge lines: no path, inode 0 with " (deleted)", a 4096-byte
path (over the cap), bad fields.

proc_stat: this process's /proc/self/stat with its comm set
(prctl(PR_SET_NAME)) to names with spaces, ')' and a newline, and a
kernel thread's stat; each file is one comm prefix for the second check
of fuzz-proc-stat.c too.

  /usr/bin/python3 tests/fuzz/make-proc-corpus.py
"""
import ctypes
import mmap
import os
import pathlib
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "corpus"
PR_SET_NAME, PR_GET_NAME = 15, 16

TRICKY = ["a b c.so", "x (deleted)", "p) (q", "new\nline", "tab\there", "d" * 200]


def proc_maps():
    out = OUT / "proc_maps"
    out.mkdir(parents=True, exist_ok=True)
    keep = []
    with tempfile.TemporaryDirectory(prefix="sonde-maps.") as tmp:
        deep = pathlib.Path(tmp)
        while len(str(deep)) < 3800:
            deep = deep / ("n" * 200)
        deep.mkdir(parents=True)
        paths = [pathlib.Path(tmp) / n for n in TRICKY] + [deep / "long.so", pathlib.Path(tmp) / "gone.so"]
        for p in paths:
            p.write_bytes(b"\x90" * 8192)
            with open(p, "rb") as f:
                keep.append(mmap.mmap(f.fileno(), 8192, prot=mmap.PROT_READ | mmap.PROT_EXEC,
                                      flags=mmap.MAP_PRIVATE))
        os.unlink(paths[-1])
        text = pathlib.Path("/proc/self/maps").read_bytes()
    for m in keep:
        m.close()
    lines = text.splitlines(keepends=True)
    (out / "self-maps").write_bytes(text)
    (out / "tricky-names").write_bytes(b"".join(l for l in lines if b"sonde-maps." in l))
    (out / "special").write_bytes(b"".join(l for l in lines if b"[" in l))
    edge = [
        b"7f0000000000-7f0000001000 r-xp 00000000 00:00 0 \n",
        b"7f0000000000-7f0000001000 r-xp 00000000 00:00 0\n",
        b"7f0000000000-7f0000001000 r-xs 00001000 fe:01 1234  (deleted)\n",
        b"7f0000000000-7f0000001000 r-xp 00001000 fe:01 0    /x (deleted)\n",
        b"7f0000000000-7f0000001000 r-xp 00001000 fe:01 99   /y (deleted) (deleted)\n",
        b"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n",
        b"7f0000001000-7f0000000000 r-xp 00000000 00:00 0 /end-before-start\n",
        b"7f00000000000000a-7f0000001000 r-xp 00000000 00:00 0 /seventeen-digits\n",
        b"7f0000000000-7f0000001000 rwxq 00000000 00:00 0 /bad-perms\n",
        b"7f0000000000-7f0000001000 r-xp 00000000 100000000:00 1 /major-over-32-bits\n",
        b"7f0000000000-7f0000001000 r-xp 00000000 00:00 +1 /signed-inode\n",
        b"7f0000000000-7f0000001000 r-xp 0x000000 00:00 1 /0x-offset\n",
        b"7f0000000000-7f0000001000 r-xp 00000000 fe:01 7 /" + b"p" * 4094 + b"\n",
        b"7f0000000000-7f0000001000 r-xp 00000000 fe:01 7 /" + b"p" * 4095 + b"\n",
        b"7f0000000000-7f0000001000 r-xp 00000000 fe:01 7 /nul\0inside\n",
        b"0-0 ---p 0 0:0 0",  # last: no newline
    ]
    (out / "edge-cases").write_bytes(b"".join(edge))


def proc_stat():
    out = OUT / "proc_stat"
    out.mkdir(parents=True, exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    old = ctypes.create_string_buffer(16)
    libc.prctl(PR_GET_NAME, old, 0, 0, 0)
    names = {"plain": b"python3", "spaces": b"a b c d e f g", "parens": b"x) S 1 2 (y",
             "close-last": b"))))))))", "newline": b"l1\nl2", "empty": b""}
    try:
        for label, name in names.items():
            libc.prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
            (out / f"comm-{label}").write_bytes(pathlib.Path("/proc/self/stat").read_bytes())
    finally:
        libc.prctl(PR_SET_NAME, old, 0, 0, 0)
    (out / "kthreadd").write_bytes(pathlib.Path("/proc/2/stat").read_bytes())
    (out / "no-close-paren").write_bytes(b"1 (init S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5\n")
    (out / "short").write_bytes(b"1 (init) S 0 1 1 0\n")
    (out / "ppid-over-32-bits").write_bytes(b"1 (x) S 4294967296 1 1 0 -1 4 0 0 0 0 0 0 0 0 20 0 1 0 5 6\n")


def main():
    proc_maps()
    proc_stat()


if __name__ == "__main__":
    main()
