#!/usr/bin/python3
"""Writes the seed corpus of fuzz-interp-loader (tests/fuzz/corpus/
interp_loader/): records of fuzz-interp-loader.c (u8 name length, name,
u32 file size, then u32 offset + u16 length + bytes per range), made from
this machine's real interpreters, Debian's libpython3.11.so.1.0,
/usr/bin/python3.11 and libruby-3.1.so.3.1: the ranges the interpreter Loader reads (ELF header
and program headers, section headers, .shstrtab, .dynsym, .dynstr) at
their real offsets in an image of the file's real size, the rest absent,
as the service holds such a file. Variants: other names (an unknown
version, a free-threaded build, a non-interpreter), a range missing, the
symbol renamed, another machine, a header only.

  /usr/bin/python3 tests/fuzz/make-interp-corpus.py
"""
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "corpus" / "interp_loader"
LIBPYTHON = pathlib.Path("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0")
PYTHON = pathlib.Path("/usr/bin/python3.11")
LIBRUBY = pathlib.Path("/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1")


def ranges(data):
    """The (offset, bytes) ranges the Loader reads, from a 64-bit LE ELF."""
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
    out = [(0, data[:phoff + phentsize * phnum])]
    out.append((shoff, data[shoff:shoff + shentsize * shnum]))
    secs = {}
    for i in range(shnum):
        name, typ, _, _, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        secs[i] = (name, off, size)
    _, stroff, strsize = secs[shstrndx]
    out.append((stroff, data[stroff:stroff + strsize]))
    for name, off, size in secs.values():
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end] in (b".dynsym", b".dynstr"):
            out.append((off, data[off:off + size]))
    return out


def record(name, size, rngs):
    b = bytes([len(name)]) + name + struct.pack("<I", size)
    for off, chunk in rngs:
        for at in range(0, len(chunk), 0xffff):
            part = chunk[at:at + 0xffff]
            b += struct.pack("<IH", off + at, len(part)) + part
    return b


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for path, name in ((LIBPYTHON, b"/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"),
                       (PYTHON, b"/usr/bin/python3.11")):
        data = path.read_bytes()
        rngs = ranges(data)
        (OUT / path.name).write_bytes(record(name, len(data), rngs))
    # The variants (about 95 KiB each with the symbols, so only where the
    # Loader gets that far): libpython's.
    data = LIBPYTHON.read_bytes()
    name, size, rngs = b"libpython3.11.so.1.0", len(data), ranges(LIBPYTHON.read_bytes())
    heads = rngs[:3]  # headers and section names: enough to fail before the symbols
    (OUT / "as-3.99").write_bytes(record(b"python3.99", size, rngs))
    renamed = [(o, c.replace(b"_PyRuntime\0", b"_PyRuntimX\0")) for o, c in rngs]
    (OUT / "no-runtime").write_bytes(record(name, size, renamed))
    (OUT / "no-dynstr").write_bytes(record(name, size, rngs[:-1]))
    (OUT / "default-name-headers").write_bytes(record(b"", size, heads))
    (OUT / "as-3.13t-headers").write_bytes(record(b"libpython3.13t.so.1.0", size, heads))
    (OUT / "as-bash-headers").write_bytes(record(b"/usr/bin/bash", size, heads))
    (OUT / "header-only").write_bytes(record(name, size, rngs[:1]))
    arm = [(0, rngs[0][1][:0x12] + struct.pack("<H", 183) + rngs[0][1][0x14:])] + heads[1:]
    (OUT / "aarch64-headers").write_bytes(record(name, size, arm))
    # Ruby's: the whole Loader path, an unknown version, a renamed root.
    data = LIBRUBY.read_bytes()
    rngs = ranges(data)
    (OUT / "libruby-3.1.so.3.1").write_bytes(record(b"/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1",
                                                    len(data), rngs))
    (OUT / "as-ruby-3.9-headers").write_bytes(record(b"libruby-3.9.so.3.9", len(data), rngs[:3]))
    renamed = [(o, c.replace(b"ruby_current_vm_ptr\0", b"ruby_current_vm_ptX\0")) for o, c in rngs]
    (OUT / "ruby-no-vm-ptr").write_bytes(record(b"libruby.so.3.1.2", len(data), renamed))

if __name__ == "__main__":
    main()
