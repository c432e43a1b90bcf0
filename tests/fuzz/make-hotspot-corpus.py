#!/usr/bin/python3
"""Seeds for fuzz-hotspot-vmstructs and fuzz-hotspot-method.

vmstructs: a small synthetic libjvm.so (an x86-64 ELF shared object) with
what symbolizer/interp/hotspot/ reads: .dynsym naming gHotSpotVMStructs,
gHotSpotVMTypes and gHotSpotVMIntConstants in .data, their entries with
names in .rodata, pointers filled by R_X86_64_RELATIVE relocations, and a
static initializer (named by .init_array) that stores the field offsets
with `movq $imm32, disp32(%rip)` - the shape of Debian's OpenJDK 17, with
its values; and one with the offsets as constant data in the table and
JDK 11's names where they differ (GenericGrowableArray::_len,
InstanceKlass::_source_file_name_index), the shape of Debian's OpenJDK
11. Written as the fuzz target's input: u8 0 (the path "libjvm.so"), u32
file size, then (u32 offset, u16 length, bytes) records.

method: records as bpf/hotspot.h lays them out (a method with a line
table, one with JDK 20+'s numbers, one without, one with hostile text),
prefixed by the target's 3-byte header.

  tests/fuzz/make-hotspot-corpus.py tests/fuzz/corpus
"""
import pathlib
import struct
import sys

OFFSETS = [  # (type, field, offset): JDK 17's
    ("GrowableArrayBase", "_len", 0), ("GrowableArray<int>", "_data", 8),
    ("CodeHeap", "_memory", 8), ("CodeHeap", "_segmap", 120),
    ("CodeHeap", "_log2_segment_size", 256), ("VirtualSpace", "_low", 16),
    ("VirtualSpace", "_high", 24), ("CodeBlob", "_name", 96), ("CodeBlob", "_frame_size", 28),
    ("CodeBlob", "_frame_complete_offset", 20), ("CodeBlob", "_code_begin", 32),
    ("CompiledMethod", "_method", 112), ("CompiledMethod", "_scopes_data_begin", 120),
    ("nmethod", "_metadata_offset", 260), ("nmethod", "_scopes_pcs_offset", 268),
    ("nmethod", "_dependencies_offset", 272), ("nmethod", "_compile_id", 304),
    ("PcDesc", "_pc_offset", 0),
    ("PcDesc", "_scope_decode_offset", 4), ("Method", "_constMethod", 8),
    ("ConstMethod", "_constants", 8), ("ConstMethod", "_flags", 28),
    ("ConstMethod", "_code_size", 32), ("ConstMethod", "_name_index", 34),
    ("ConstMethod", "_signature_index", 36), ("ConstantPool", "_pool_holder", 24),
    ("ConstantPool", "_source_file_name_index", 54), ("Klass", "_name", 24),
    ("Symbol", "_length", 4), ("Symbol", "_body", 6),
]
STATICS = [("CodeCache", "_heaps", 0x2e00), ("CodeCache", "_high_bound", 0x2e18),
           ("CodeCache", "_low_bound", 0x2e20), ("Abstract_VM_Version", "_vm_major_version", 0x2e40)]
TYPES = [("HeapBlock", 16), ("ConstMethod", 48), ("ConstantPool", 72), ("PcDesc", 16)]
JDK11_NAMES = {("GrowableArrayBase", "_len"): ("GenericGrowableArray", "_len"),
               ("ConstantPool", "_source_file_name_index"):
               ("InstanceKlass", "_source_file_name_index")}
JDK11_SOURCE = 298  # InstanceKlass::_source_file_name_index
INTS = [("ConstMethod::_has_linenumber_table", 1), ("frame::interpreter_frame_last_sp_offset", -2),
        ("frame::interpreter_frame_sender_sp_offset", -1)]

TEXT, RODATA, RELA, DYNSYM, DYNSTR = 0x1000, 0x1800, 0x600, 0x200, 0x400
DATA, SIZE = 0x2000, 0x3400


def libjvm(constant=False):
    """JDK 17's shape, or with constant: JDK 11's."""
    f = bytearray(SIZE)
    relocs = []
    rodata = bytearray()

    def string(s):
        at = RODATA + len(rodata)
        rodata.extend(s.encode() + b"\0")
        return at

    def ptr(at, value):
        relocs.append((at, value))
        struct.pack_into("<Q", f, at, value)

    structs = DATA + 0x100
    entries = [(t, n, o, 0) for t, n, o in OFFSETS] + [(t, n, 0, a) for t, n, a in STATICS]
    if constant:
        entries = [JDK11_NAMES.get((t, n), (t, n)) + (JDK11_SOURCE if (t, n) in JDK11_NAMES
                                                      and o else o, a)
                   for t, n, o, a in entries]
    code = bytearray()
    for i, (t, n, off, addr) in enumerate(entries):
        e = structs + i * 48
        ptr(e, string(t))
        ptr(e + 8, string(n))
        struct.pack_into("<i", f, e + 24, 1 if addr else 0)
        if addr:
            ptr(e + 40, addr)
        elif constant:
            struct.pack_into("<Q", f, e + 32, off)
        else:
            rip = TEXT + len(code) + 11
            code += b"\x48\xc7\x05" + struct.pack("<ii", e + 32 - rip, off)
    code += b"\xc3"
    types = structs + (len(entries) + 1) * 48
    for i, (t, size) in enumerate(TYPES):
        ptr(types + i * 40, string(t))
        struct.pack_into("<Q", f, types + i * 40 + 32, size)
    ints = types + (len(TYPES) + 1) * 40
    for i, (n, v) in enumerate(INTS):
        ptr(ints + i * 16, string(n))
        struct.pack_into("<i", f, ints + i * 16 + 8, v)
    assert ints + (len(INTS) + 1) * 16 < 0x2e00
    struct.pack_into("<i", f, 0x2e40, 11 if constant else 17)
    ptr(DATA, structs)
    ptr(DATA + 8, types)
    ptr(DATA + 16, ints)
    init_array = 0x2f00
    ptr(init_array, TEXT)
    f[TEXT:TEXT + len(code)] = code
    f[RODATA:RODATA + len(rodata)] = rodata
    assert RODATA + len(rodata) < 0x2000 and TEXT + len(code) < RODATA
    relocs.sort()
    for i, (at, value) in enumerate(relocs):
        struct.pack_into("<QQq", f, RELA + i * 24, at, 8, value)  # R_X86_64_RELATIVE
    rela_size = len(relocs) * 24
    assert RELA + rela_size < TEXT
    dynstr = b"\0gHotSpotVMStructs\0gHotSpotVMTypes\0gHotSpotVMIntConstants\0"
    f[DYNSTR:DYNSTR + len(dynstr)] = dynstr
    syms = [(1, DATA), (19, DATA + 8), (35, DATA + 16)]
    for i, (name, value) in enumerate(syms):
        struct.pack_into("<IBBHQQ", f, DYNSYM + (i + 1) * 24, name, 0x11, 0, 8, value, 8)
    shstr = b"\0.dynsym\0.dynstr\0.rela.dyn\0.text\0.rodata\0.init_array\0.data\0.shstrtab\0"
    shstr_at = 0x2f80
    f[shstr_at:shstr_at + len(shstr)] = shstr

    def name(s):
        return shstr.index(s.encode() + b"\0")
    sections = [
        (0, 0, 0, 0, 0, 0, 0, 0, 0),
        (name(".dynsym"), 11, 2, DYNSYM, (len(syms) + 1) * 24, 2, 1, 8, 24),
        (name(".dynstr"), 3, 2, DYNSTR, len(dynstr), 0, 0, 1, 0),
        (name(".rela.dyn"), 4, 2, RELA, rela_size, 1, 0, 8, 24),
        (name(".text"), 1, 6, TEXT, len(code), 0, 0, 16, 0),
        (name(".rodata"), 1, 2, RODATA, len(rodata), 0, 0, 1, 0),
        (name(".init_array"), 14, 3, init_array, 8, 0, 0, 8, 8),
        (name(".data"), 1, 3, DATA, 0xe00, 0, 0, 64, 0),
        (name(".shstrtab"), 3, 0, shstr_at, len(shstr), 0, 0, 1, 0),
    ]
    shoff = SIZE - 64 * len(sections)
    assert shoff >= shstr_at + len(shstr)
    for i, (n, typ, flags, at, size, link, info, align, entsize) in enumerate(sections):
        struct.pack_into("<IIQQQQIIQQ", f, shoff + i * 64, n, typ, flags, at if typ != 0 else 0,
                         at, size, link, info, align, entsize)
    phoff = 64
    phdrs = [(1, 5, 0, 0, DATA, DATA), (1, 6, DATA, DATA, 0x1000, 0x2000)]
    for i, (typ, flags, off, vaddr, filesz, memsz) in enumerate(phdrs):
        struct.pack_into("<IIQQQQQQ", f, phoff + i * 56, typ, flags, off, vaddr, vaddr, filesz,
                         memsz, 0x1000)
    f[0:16] = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    struct.pack_into("<HHIQQQIHHHHHH", f, 16, 3, 62, 1, 0, phoff, shoff, 0, 64, 56, len(phdrs),
                     64, len(sections), len(sections) - 1)
    return bytes(f)


def as_input(image):
    out = bytearray(b"\0") + struct.pack("<I", len(image))
    for at in range(0, len(image), 0x1000):
        chunk = image[at:at + 0x1000]
        out += struct.pack("<IH", at, len(chunk)) + chunk
    return bytes(out)


def method(name, klass, sig, source, lines, flags=0x20, code_size=64):
    body = bytearray(1256)
    struct.pack_into("<HBBHHQQHHHHH", body, 0, 1256, 1, flags, code_size, 0, 0x7f0000001000,
                     0x7f0000002000, len(klass), len(name), len(sig), len(source), len(lines))
    body[40:40 + len(klass)] = klass
    body[296:296 + len(name)] = name
    body[424:424 + len(sig)] = sig
    body[680:680 + len(source)] = source
    body[744:744 + len(lines)] = lines
    return body


def main():
    out = pathlib.Path(sys.argv[1])
    (out / "hotspot_vmstructs").mkdir(parents=True, exist_ok=True)
    (out / "hotspot_method").mkdir(parents=True, exist_ok=True)
    (out / "hotspot_vmstructs" / "synthetic-jdk17").write_bytes(as_input(libjvm()))
    (out / "hotspot_vmstructs" / "synthetic-jdk11").write_bytes(as_input(libjvm(True)))
    lines = bytes([0x0a, 0x21, 0x29, 0xff, 0x40, 0x10, 0xff, 0xc8, 0x04, 0x06, 0x00])
    seeds = {
        "lines": method(b"hot", b"com/example/Work", b"(I)J", b"Work.java", lines),
        # bci 0 line 10, bci 40 line 20 escaped, in JDK 20+'s numbers
        "lines-jdk20": method(b"hot", b"com/example/Work", b"(I)J", b"Work.java",
                              bytes([0x0a, 0xff, 0x51, 0x15, 0x00]), flags=0x60),
        "no-lines": method(b"run", b"java/lang/Thread", b"()V", b"", b"", flags=0),
        "hostile": method(b"a;b\nc\xc0\x80", b"x/\xff/y", b"(;)", b"W;.java", b"\xff\xff\xff",
                          flags=0x3f),
    }
    for k, rec in seeds.items():
        (out / "hotspot_method" / k).write_bytes(bytes([1, 9, 0]) + rec)


if __name__ == "__main__":
    main()
