#!/usr/bin/python3
"""Writes the seed corpus of fuzz-minidebuginfo (tests/fuzz/corpus/
minidebuginfo/): .gnu_debugdata section bytes. Debian ships no
MiniDebugInfo, so the real one is made as Fedora makes it (GDB's manual,
"MiniDebugInfo"; as tests/integration/test_minidebuginfo.py does): a small
program's symbols-only ELF file, xz-compressed. Then xz variants (no
check, CRC32, SHA-256, several blocks, two streams), damaged copies (cut,
bytes flipped: fixed seed), an lzma-alone stream (not xz), an xz stream
of something that is not ELF, and 3 MiB of zeros (the output buffer
grows twice). The decompression bomb (MINIDEBUG_MAX_OUT + 1 bytes) is
tests/unit/test-minidebug.c's: under the fuzzer's sanitizers its 64 MiB
take about 10 s, which libFuzzer reports as a slow unit and which would
stall every run.

  /usr/bin/python3 tests/fuzz/make-minidebuginfo-corpus.py
"""
import lzma
import pathlib
import random
import subprocess
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "corpus" / "minidebuginfo"
SRC = r"""
static __attribute__((noinline)) int local_leaf(volatile int *p) { return p[0] * 3 + p[1]; }
static __attribute__((noinline)) int local_mid(volatile int *p) { return local_leaf(p) + 1; }
int exported(volatile int *p) { return local_mid(p); }
void _start(void) { volatile int v[2] = {1, 2}; for (;;) v[0] = exported(v); }
"""


def symbols_only_elf(tmp):
    c, exe, mini, keep = tmp / "t.c", tmp / "t", tmp / "mini", tmp / "keep"
    c.write_text(SRC)
    keep.write_text("local_leaf\nlocal_mid\n")
    subprocess.run(["gcc", "-O2", "-g", "-nostdlib", "-static", f"-ffile-prefix-map={tmp}=/src",
                    "-o", str(exe), str(c)], check=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(exe), str(mini)], check=True)
    subprocess.run(["objcopy", "-S", "--remove-section", ".comment", f"--keep-symbols={keep}",
                    str(mini)], check=True)
    return mini.read_bytes()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(27)
    with tempfile.TemporaryDirectory() as tmp:
        elf = symbols_only_elf(pathlib.Path(tmp))
    # symbols-elf.xz as xz(1) makes it (preset 6: an 8 MiB dictionary, which
    # liblzma allocates whole for each stream, about 20 ms a run under the
    # sanitizers); the variants with preset 0 (256 KiB, a third of that).
    real = lzma.compress(elf)
    xz = lzma.compress(elf, preset=0)
    seeds = {
        "symbols-elf.xz": real,
        "preset0.xz": xz,
        "check-none.xz": lzma.compress(elf, preset=0, check=lzma.CHECK_NONE),
        "check-crc32.xz": lzma.compress(elf, preset=0, check=lzma.CHECK_CRC32),
        "check-sha256.xz": lzma.compress(elf, preset=0, check=lzma.CHECK_SHA256),
        "two-streams.xz": xz + xz,
        "not-elf.xz": lzma.compress(b"not an ELF file\n" * 64, preset=0),
        "empty.xz": lzma.compress(b"", preset=0),
        "lzma-alone": lzma.compress(elf, format=lzma.FORMAT_ALONE, preset=0),
        "cut-half": xz[:len(xz) // 2],
        "cut-footer": xz[:-6],
        "header-only": xz[:12],
    }
    blocks = subprocess.run(["xz", "-0", "-c", "--block-size=256", "-T1"], input=elf,
                            capture_output=True, check=True).stdout
    seeds["blocks-256.xz"] = blocks
    for i in range(3):
        bad = bytearray(xz)
        for _ in range(4):
            bad[rng.randrange(12, len(bad) - 12)] = rng.randrange(256)
        seeds[f"flipped{i}.xz"] = bytes(bad)
    seeds["zeros-3MiB.xz"] = lzma.compress(bytes(3 << 20), preset=0)
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)


if __name__ == "__main__":
    main()
