#!/usr/bin/env python3
"""Writes the seed and regression corpus of fuzz-dwarf-index into
tests/fuzz/corpus/dwarf_index/: tiny static programs with DWARF 4 and 5
(gcc and clang, one with compressed sections, one stripped with a
MiniDebugInfo .gnu_debugdata), then truncated copies and
copies with bytes flipped inside .debug_info, .debug_line, .debug_abbrev
and .debug_rnglists (fixed seed, so the corpus is reproducible)."""
import pathlib
import random
import subprocess
import tempfile

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "dwarf_index"
SRC = r"""
static inline __attribute__((always_inline)) int sq(int x) { return x * x; }
static inline __attribute__((always_inline)) int add_sq(int a, int b) { return sq(a) + sq(b); }
__attribute__((noinline)) int leaf(volatile int *p) { return add_sq(p[0], p[1]) + 1; }
namespace_free_function_marker: ;
"""
SRC = SRC.replace("namespace_free_function_marker: ;\n", "")
SRC += r"""
void _start(void) {
    volatile int v[2] = {3, 4};
    for (;;) { v[0] = leaf(v); }
}
"""


def sections(path):
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True).stdout
    secs = {}
    for line in out.splitlines():
        p = line.replace("[ ", "[").split()
        if len(p) > 6 and p[0].startswith("[") and p[1].startswith(".debug"):
            secs[p[1]] = (int(p[4], 16), int(p[5], 16))
    return secs


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(4)
    with tempfile.TemporaryDirectory() as tmp:
        c = pathlib.Path(tmp) / "t.c"
        c.write_text(SRC)
        builds = {
            "gcc-dwarf5": ["gcc", "-O2", "-g", "-gdwarf-5"],
            "gcc-dwarf4": ["gcc", "-O2", "-g", "-gdwarf-4"],
            "clang-dwarf5": ["clang", "-O2", "-g", "-gdwarf-5"],
            "gcc-zlib": ["gcc", "-O2", "-g", "-gz=zlib"],
        }
        for name, cmd in builds.items():
            exe = pathlib.Path(tmp) / name
            subprocess.run(cmd + [f"-ffile-prefix-map={tmp}=/src", "-nostdlib", "-static", "-o", str(exe),
                                  str(c)], check=True)
            data = exe.read_bytes()
            (OUT / f"{name}.elf").write_bytes(data)
            (OUT / f"{name}.half").write_bytes(data[:len(data) // 2])
            (OUT / f"{name}.head").write_bytes(data[:2048])
            for sec, (off, size) in sections(exe).items():
                if size == 0:
                    continue
                bad = bytearray(data)
                for _ in range(max(1, size // 16)):
                    bad[off + rng.randrange(size)] = rng.randrange(256)
                (OUT / f"{name}.flip{sec}").write_bytes(bytes(bad))
                cut = bytearray(data)
                cut[off + size // 2: off + size] = bytes(size - size // 2)
                (OUT / f"{name}.zero{sec}").write_bytes(bytes(cut))
        # MiniDebugInfo: stripped, with the symbols in an xz'd ELF file.
        exe = pathlib.Path(tmp) / "gcc-dwarf5"
        mini = pathlib.Path(tmp) / "mini"
        subprocess.run(["objcopy", "--only-keep-debug", str(exe), str(mini)], check=True)
        subprocess.run(["objcopy", "-S", "--remove-section", ".comment", str(mini)], check=True)
        subprocess.run(["xz", "-f", str(mini)], check=True)
        stripped = pathlib.Path(tmp) / "stripped"
        subprocess.run(["strip", "--strip-all", "-o", str(stripped), str(exe)], check=True)
        subprocess.run(["objcopy", "--add-section", f".gnu_debugdata={mini}.xz", str(stripped)], check=True)
        data = stripped.read_bytes()
        (OUT / "minidebuginfo.elf").write_bytes(data)
        xz = pathlib.Path(f"{mini}.xz").read_bytes()
        at = data.find(xz[:16])
        if at >= 0:
            for i in range(3):
                bad = bytearray(data)
                for _ in range(8):
                    bad[at + rng.randrange(len(xz))] = rng.randrange(256)
                (OUT / f"minidebuginfo.flip{i}").write_bytes(bytes(bad))
            (OUT / "minidebuginfo.cut").write_bytes(data[:at + len(xz) // 2])
    (OUT / "garbage").write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    (OUT / "elf-header-only").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(57))


if __name__ == "__main__":
    main()
