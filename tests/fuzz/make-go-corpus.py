#!/usr/bin/env python3
"""Writes the seed corpora of fuzz-go-buildinfo and fuzz-go-plan
(tests/fuzz/corpus/go_buildinfo/, go_plan/).

go_buildinfo: the .go.buildinfo of tests/workload/gohttp built with Go 1.19,
and copies of it: cut short, the version's length varint overlong, the
pre-1.18 flags (pointers, not inline strings), an empty version, a
control character in it, bytes flipped (fixed seed).

go_plan: small ELF files assembled with gcc (a real Go binary is megabytes):
that .go.buildinfo, and the two hooked functions under their Go names in
.symtab with a RET and a RET imm16; the same as go1.16 (no register ABI),
with .symtab stripped (nothing to find), and cut short; and go1.17 and
go1.16 with the pre-1.18 layout (pointers to the version string)."""
import os
import pathlib
import random
import subprocess
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
GO = "/usr/lib/go-1.19/bin/go"

# Before Go 1.18: the header, then pointers to the version's and the
# module info's string headers {data, len}.
POINTERS = r'''
	.ascii "\377 Go buildinf:"
	.byte 8, 0
	.quad ver_hdr, 0
	.section .rodata
ver_hdr:
	.quad ver_str, {n}
ver_str:
	.ascii "{ver}"
'''

ASM = r'''
	.section .go.buildinfo,"aw"
	.balign 16
{buildinfo}
	.text
	.globl "net/http.serverHandler.ServeHTTP"
	.type "net/http.serverHandler.ServeHTTP",@function
"net/http.serverHandler.ServeHTTP":
	push %rbp
	cmp $1, %rax
	je 1f
	pop %rbp
	ret
1:	pop %rbp
	ret $8
	.size "net/http.serverHandler.ServeHTTP", .-"net/http.serverHandler.ServeHTTP"
	.globl "net/http.(*Transport).roundTrip"
	.type "net/http.(*Transport).roundTrip",@function
"net/http.(*Transport).roundTrip":
	mov %rbx, %rax
	ret
	.size "net/http.(*Transport).roundTrip", .-"net/http.(*Transport).roundTrip"
	.globl _start
_start:
	ud2
'''


def section(path, name):
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True).stdout
    for line in out.splitlines():
        p = line.replace("[ ", "[").split()
        if len(p) > 6 and p[1] == name:
            off, size = int(p[4], 16), int(p[5], 16)
            return path.read_bytes()[off:off + size]
    raise SystemExit(f"{name} not in {path}")


def with_version(bi, ver):
    """bi with its inline version string (a one-byte varint at 32) replaced."""
    n = bi[32]
    return bi[:32] + bytes([len(ver)]) + ver + bi[33 + n:]


def elf(tmp, bi, name, strip=False):
    """An ELF with the hooked functions; bi: the buildinfo's bytes, or a
    version string for the pre-1.18 pointer layout."""
    s = pathlib.Path(tmp) / (name + ".s")
    exe = pathlib.Path(tmp) / name
    if isinstance(bi, str):
        info = POINTERS.replace("{n}", str(len(bi))).replace("{ver}", bi)
    else:
        info = "\t.byte " + ",".join(str(b) for b in bi)
    s.write_text(ASM.replace("{buildinfo}", info))
    # Assembled apart under a fixed name, so that the FILE symbol is the
    # same each time (the corpus is reproducible).
    subprocess.run(["gcc", "-c", "-o", name + ".o", name + ".s"], check=True, cwd=tmp)
    subprocess.run(["gcc", "-nostdlib", "-static", "-Wl,--build-id=none", "-Wl,-z,norelro",
                    "-Wl,-z,noseparate-code", "-o", name, name + ".o"], check=True, cwd=tmp)
    if strip:
        subprocess.run(["strip", "-s", str(exe)], check=True)
    return exe.read_bytes()


def main():
    rng = random.Random(7)
    bout, pout = HERE / "corpus" / "go_buildinfo", HERE / "corpus" / "go_plan"
    bout.mkdir(parents=True, exist_ok=True)
    pout.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        exe = pathlib.Path(tmp) / "gohttp"
        env = dict(os.environ, GOTOOLCHAIN="local", GOPROXY="off", GOFLAGS="-mod=mod",
                   GOCACHE=str(pathlib.Path(tmp) / "cache"), GOPATH=str(pathlib.Path(tmp) / "gopath"),
                   HOME=tmp)
        subprocess.run([GO, "build", "-buildvcs=false", "-o", str(exe), "."], check=True, env=env,
                       cwd=HERE.parent / "workload" / "gohttp")
        bi = section(exe, ".go.buildinfo")
        assert bi[:14] == b"\xff Go buildinf:" and bi[15] & 2, "not a Go 1.18+ buildinfo"
        (bout / "go1.19").write_bytes(bi)
        (bout / "cut-in-version").write_bytes(bi[:36])
        (bout / "header-only").write_bytes(bi[:32])
        (bout / "varint-overlong").write_bytes(bi[:32] + b"\xff" * 10 + b"\x01" + bi[33:])
        (bout / "varint-two-bytes").write_bytes(bi[:32] + bytes([0x88, 0x00]) + bi[33:])
        (bout / "pre-1.18-flags").write_bytes(bi[:15] + bytes([bi[15] & ~2]) + bi[16:])
        (bout / "empty-version").write_bytes(bi[:32] + b"\x00" + bi[33:])
        (bout / "control-char").write_bytes(with_version(bi, b"go1.19\n8"))
        (bout / "long-version").write_bytes(with_version(bi, b"go1.19.8-" + b"x" * 60))
        for i in range(3):
            bad = bytearray(bi[:96])
            for _ in range(8):
                bad[rng.randrange(len(bad))] = rng.randrange(256)
            (bout / f"flip{i}").write_bytes(bytes(bad))

        good = elf(tmp, bi, "go119")
        (pout / "go1.19-symtab").write_bytes(good)
        (pout / "go1.16-symtab").write_bytes(elf(tmp, with_version(bi, b"go1.16.15"), "go116"))
        (pout / "go1.19-stripped").write_bytes(elf(tmp, bi, "go119s", strip=True))
        (pout / "go1.19-cut").write_bytes(good[:len(good) // 2])
        (pout / "go1.17-pointers").write_bytes(elf(tmp, "go1.17.13", "go117p"))
        (pout / "go1.16-pointers").write_bytes(elf(tmp, "go1.16.15", "go116p"))


if __name__ == "__main__":
    main()
