#!/usr/bin/env python3
"""Writes the seed and regression corpus of fuzz-pclntab into
tests/fuzz/corpus/pclntab/: the .gopclntab of tests/workload/go built
stripped with Go 1.19 and with Go 1.23 (a table with inline trees, magic
0xfffffff1), their first 64 KiB, and copies of those with bytes flipped
and ranges zeroed (fixed seed). For fuzz-elf and fuzz-dwarf-index: small
ELF files holding the Go 1.23 table in a .gopclntab section, and the Go
1.19 table the way a cgo PIE linked by the system linker holds it: inside
.data.rel.ro, its text start a relocation in .rela.dyn, beside a
.go.buildinfo section."""
import os
import pathlib
import random
import subprocess
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "corpus" / "pclntab"


def section(path, name):
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True).stdout
    for line in out.splitlines():
        p = line.replace("[ ", "[").split()
        if len(p) > 6 and p[1] == name:
            off, size = int(p[4], 16), int(p[5], 16)
            return path.read_bytes()[off:off + size]
    raise SystemExit(f"{name} not in {path}")


def write(version, rng):
    go = f"/usr/lib/go-{version}/bin/go"
    with tempfile.TemporaryDirectory() as tmp:
        exe = pathlib.Path(tmp) / "goworkload"
        env = dict(os.environ, GOTOOLCHAIN="local", GOPROXY="off", GOFLAGS="-mod=mod",
                   GOCACHE=str(pathlib.Path(tmp) / "cache"))
        subprocess.run([go, "build", "-ldflags=-s -w", "-o", str(exe), "."], check=True, env=env,
                       cwd=HERE.parent / "workload" / "go")
        tab = section(exe, ".gopclntab")
    name = f"go{version}"
    (OUT / name).write_bytes(tab)
    head = tab[:65536]
    (OUT / f"{name}.head").write_bytes(head)
    for i in range(4):
        bad = bytearray(head)
        for _ in range(64):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        (OUT / f"{name}.flip{i}").write_bytes(bytes(bad))
    cut = bytearray(head)
    cut[72:4096] = bytes(4096 - 72)
    (OUT / f"{name}.zero").write_bytes(bytes(cut))
    return tab


def elf_with_table(tab, out):
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        (t / "tab.bin").write_bytes(tab)
        (t / "go.s").write_text('\t.section .gopclntab,"a"\n\t.incbin "tab.bin"\n'
                                '\t.text\n\t.globl _start\n_start:\n\tud2\n')
        subprocess.run(["gcc", "-c", "-o", "go.o", "go.s"], check=True, cwd=tmp)
        subprocess.run(["gcc", "-nostdlib", "-static", "-Wl,--build-id=none", "-o", "go", "go.o"],
                       check=True, cwd=tmp)
        subprocess.run(["strip", "-s", "go"], check=True, cwd=tmp)
        out.write_bytes((t / "go").read_bytes())


# A PIE whose table has no section: .data.rel.ro holds some other data,
# then the table with its text start (header word 3) relocated.
CGO_PIE = """\t.section .go.buildinfo,"aw"
\t.ascii "\\377 Go buildinf:"
\t.section .data.rel.ro,"aw"
\t.quad _start, 0, _start
\t.incbin "tab.bin",0,24
\t.quad _start
\t.incbin "tab.bin",32
\t.text
\t.globl _start
_start:
\tud2
"""


def pie_with_embedded_table(tab, out):
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        (t / "tab.bin").write_bytes(tab)
        (t / "go.s").write_text(CGO_PIE)
        subprocess.run(["gcc", "-c", "-o", "go.o", "go.s"], check=True, cwd=tmp)
        subprocess.run(["gcc", "-nostdlib", "-pie", "-Wl,--build-id=none", "-o", "go", "go.o"],
                       check=True, cwd=tmp)
        subprocess.run(["strip", "-s", "go"], check=True, cwd=tmp)
        out.write_bytes((t / "go").read_bytes())


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    tab = write("1.19", rng)
    (OUT / "header-only").write_bytes(tab[:72])
    for target in ("elf", "dwarf_index"):
        pie_with_embedded_table(tab, HERE / "corpus" / target / "go1.19-cgo-pie")
    tab = write("1.23", rng)
    elf_with_table(tab, HERE / "corpus" / "elf" / "go1.23-pclntab-only")


if __name__ == "__main__":
    main()
