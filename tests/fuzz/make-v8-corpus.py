#!/usr/bin/python3
"""Writes the V8 seeds of fuzz-interp-loader (tests/fuzz/corpus/
interp_loader/v8-*): a small synthetic x86-64 ELF named node, with the
v8dbg_* constants V8's Loader reads (symbolizer/interp/v8/v8_loader.c) in
.dynsym and their values in .data, and the embedded builtins' symbols in
.symtab, as fuzz-interp-loader.c's records (u8 name length, name, u32
file size, then u32 offset + u16 length + bytes per range). Node's own
tables are megabytes; this keeps the checked-in seeds small. The values
are Node 20's (V8 11.3)."""
import pathlib
import struct

CONSTS = {
    "v8dbg_SmiShiftSize": 31, "v8dbg_HeapObjectTag": 1, "v8dbg_TaggedSize": 8,
    "v8dbg_off_fp_context_or_frame_type": -8, "v8dbg_off_fp_function": -16,
    "v8dbg_off_fp_bytecode_array": -32, "v8dbg_off_fp_bytecode_offset": -40,
    "v8dbg_class_Map__instance_type__uint16_t": 12,
    "v8dbg_class_JSFunction__shared__SharedFunctionInfo": 24,
    "v8dbg_class_JSFunction__raw_feedback_cell__FeedbackCell": 40,
    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object": 16,
    "v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject": 32,
    "v8dbg_class_Script__name__Object": 16, "v8dbg_class_String__length__int32_t": 12,
    "v8dbg_class_SeqOneByteString__chars__char": 16, "v8dbg_class_ThinString__actual__String": 16,
    "v8dbg_class_InstructionStream__instruction_start__uintptr_t": 16,
    "v8dbg_scopeinfo_idx_first_vars": 3, "v8dbg_StringRepresentationMask": 7,
    "v8dbg_SeqStringTag": 0, "v8dbg_ThinStringTag": 5, "v8dbg_OneByteStringTag": 8,
    "v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE": 262,
    "v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE": 261, "v8dbg_type_Script__SCRIPT_TYPE": 167,
    "v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE": 191, "v8dbg_type_Code__CODE_TYPE": 245,
    "v8dbg_FirstNonstringType": 128,
    "v8dbg_class_Code__source_position_table__ByteArray": 24,
    "v8dbg_class_FixedArrayBase__length__SMI": 8, "v8dbg_class_FixedArray__data__uintptr_t": 16,
    "v8dbg_class_Script__source__Object": 8,
    "v8dbg_class_BytecodeArray__data__uintptr_t": 54,
}
BASE, TEXT_OFF, TEXT_SIZE, DATA_OFF = 0x400000, 0x1000, 0x1000, 0x2000


def strtab(names):
    blob, offs = b"\0", {}
    for n in names:
        offs[n] = len(blob)
        blob += n.encode() + b"\0"
    return blob, offs


def syms(names_vals, offs, shndx):
    out = b"\0" * 24
    for name, value in names_vals:
        out += struct.pack("<IBBHQQ", offs[name], 0x11, 0, shndx, value, 4)
    return out


def build():
    data = b"".join(struct.pack("<i", v) for v in CONSTS.values())
    data += struct.pack("<I", TEXT_SIZE)  # v8_Default_embedded_blob_code_size_
    dyn_vals = [(n, BASE + DATA_OFF + 4 * i) for i, n in enumerate(CONSTS)]
    sym_vals = [("v8_Default_embedded_blob_code_", BASE + TEXT_OFF),
                ("v8_Default_embedded_blob_code_size_", BASE + DATA_OFF + 4 * len(CONSTS))]
    dynstr, doffs = strtab(CONSTS)
    symstr, soffs = strtab([n for n, _ in sym_vals])
    dynsym = syms(dyn_vals, doffs, 2)
    symtab = syms(sym_vals, soffs, 1)
    shstr, shoffs = strtab([".text", ".data", ".dynsym", ".dynstr", ".symtab", ".strtab",
                            ".shstrtab"])
    body = bytearray(DATA_OFF)
    body[TEXT_OFF:TEXT_OFF + 16] = b"\x55\x48\x89\xe5" + b"\xcc" * 12
    body += data
    secs = []
    for name, kind, blob, flags, addr, link, entsize in (
            (".text", 1, None, 6, BASE + TEXT_OFF, 0, 0),
            (".data", 1, None, 3, BASE + DATA_OFF, 0, 0),
            (".dynsym", 11, dynsym, 2, 0, 4, 24), (".dynstr", 3, dynstr, 2, 0, 0, 0),
            (".symtab", 2, symtab, 0, 0, 6, 24), (".strtab", 3, symstr, 0, 0, 0, 0),
            (".shstrtab", 3, shstr, 0, 0, 0, 0)):
        if name == ".text":
            off, size = TEXT_OFF, TEXT_SIZE
        elif name == ".data":
            off, size = DATA_OFF, len(data)
        else:
            while len(body) % 8:
                body.append(0)
            off, size = len(body), len(blob)
            body += blob
        secs.append((shoffs[name], kind, flags, addr, off, size, link, 1 if kind != 2 and kind != 11 else 1, 8, entsize))
    while len(body) % 8:
        body.append(0)
    shoff = len(body)
    sh = b"\0" * 64
    for s in secs:
        sh += struct.pack("<IIQQQQIIQQ", *s)
    body += sh
    phoff = 64
    ph = struct.pack("<IIQQQQQQ", 1, 5, 0, BASE, BASE, TEXT_OFF + TEXT_SIZE, TEXT_OFF + TEXT_SIZE, 0x1000)
    ph += struct.pack("<IIQQQQQQ", 1, 6, DATA_OFF, BASE + DATA_OFF, BASE + DATA_OFF, len(data), len(data), 0x1000)
    body[phoff:phoff + len(ph)] = ph
    ehdr = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack(
        "<HHIQQQIHHHHHH", 2, 62, 1, BASE + TEXT_OFF, phoff, shoff, 0, 64, 56, 2, 64, len(secs) + 1, len(secs))
    body[0:64] = ehdr
    return bytes(body)


def record(path, elf, pieces):
    out = bytes([len(path)]) + path.encode() + struct.pack("<I", len(elf))
    for off, length in pieces:
        out += struct.pack("<IH", off, length) + elf[off:off + length]
    return out


if __name__ == "__main__":
    elf = build()
    d = pathlib.Path(__file__).resolve().parent / "corpus" / "interp_loader"
    d.mkdir(parents=True, exist_ok=True)
    (d / "v8-node-whole").write_bytes(record("node", elf, [(0, len(elf))]))
    # The data segment missing: the values were not fetched.
    (d / "v8-node-no-data").write_bytes(record("libnode.so.115", elf,
                                               [(0, DATA_OFF), (DATA_OFF + 0x100, len(elf) - DATA_OFF - 0x100)]))
    pathlib.Path("/tmp/v8-seed.elf").write_bytes(elf)
