#!/usr/bin/python3
"""readelf_tables.py - a throwaway unwind table generator for tests: turns
`readelf --debug-dump=frames-interp -W FILE` into rows of bpf/unwind.h
(struct sonde_unwind_row, keyed by file offset), until the symbolizer's own
table compiler (symbolizer/unwind/) is there. Test-only: it trusts readelf.

  tests/integration/readelf_tables.py FILE [--dump]

Rules: CFA rsp+N / rbp+N -> SP / FP; an expression inside .plt/.plt.sec ->
PLT, elsewhere -> UNSUPPORTED; an FDE of a CIE with augmentation 'S' (the
signal trampoline) -> SIGNAL; ra undefined -> STOP; rbp at c-N -> FP_AT_CFA.
Gaps between FDEs get an UNSUPPORTED row (frame pointer fallback).
"""
import re
import struct
import subprocess
import sys

CFA_SP, CFA_FP, CFA_PLT, CFA_SIGNAL, CFA_STOP, CFA_UNSUPPORTED = 1, 2, 3, 4, 5, 6
FP_SAME, FP_AT_CFA = 0, 1
ROW = struct.Struct("<IBBhi")
assert ROW.size == 12


def _run(args):
    # readelf exits 1 on harmless warnings (e.g. unknown notes): use its output.
    return subprocess.run(args, capture_output=True, text=True,
                          errors="replace").stdout


def load_segments(path):
    segs = []
    for line in _run(["readelf", "-lW", path]).splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, vaddr, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            segs.append((vaddr, vaddr + filesz, off))
    return segs


def plt_ranges(path):
    out = []
    for line in _run(["readelf", "-SW", path]).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m and m.group(1) in (".plt", ".plt.sec", ".plt.got"):
            a = int(m.group(2), 16)
            out.append((a, a + int(m.group(3), 16)))
    return out


def to_offset(segs, vaddr):
    for lo, hi, off in segs:
        if lo <= vaddr < hi:
            return vaddr - lo + off
    return None


def parse_frames(path):
    """Yields (start, end, signal, [(loc, cfa, rbp, ra)]) per FDE, in vaddrs."""
    text = _run(["readelf", "--debug-dump=frames-interp", "-W", path])
    cies = {}       # offset -> [signal, initial (cfa, rbp, ra)]
    cur = None
    cie = None      # the CIE whose initial row is being read
    cols = None
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE \"([^\"]*)\"", line)
        if m:
            if cur:
                yield cur
            cur = None
            cie = [("S" in m.group(2)), None]
            cies[int(m.group(1), 16)] = cie
            cols = None
            continue
        m = re.match(r"^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)",
                     line)
        if m:
            if cur:
                yield cur
            c = cies.get(int(m.group(1), 16), [False, None])
            cur = (int(m.group(2), 16), int(m.group(3), 16), c[0], [])
            # An FDE without instructions of its own gets no table from
            # readelf: the CIE's initial rules apply from its start.
            if c[1]:
                cur[3].append((cur[0],) + c[1])
            cie = None
            cols = None
            continue
        f = line.split()
        if f and f[0] == "LOC":
            cols = f
            continue
        if cols and f and re.match(r"^[0-9a-f]+$", f[0]) and len(f) == len(cols):
            d = dict(zip(cols, f))
            r = (d.get("CFA"), d.get("rbp"), d.get("ra"))
            if cur is not None:
                if cur[3] and cur[3][0][0] == int(f[0], 16):
                    cur[3].pop(0)  # its own first row replaces the CIE's
                cur[3].append((int(f[0], 16),) + r)
            elif cie is not None and cie[1] is None:
                cie[1] = r
    if cur:
        yield cur


def rule(cfa, rbp, ra, signal, in_plt):
    """(cfa_kind, fp_kind, fp_off, cfa_off)"""
    if signal:
        return (CFA_SIGNAL, FP_SAME, 0, 0)
    if ra == "u":
        return (CFA_STOP, FP_SAME, 0, 0)
    if ra != "c-8":
        return (CFA_UNSUPPORTED, FP_SAME, 0, 0)
    fp_kind, fp_off = FP_SAME, 0
    if rbp and rbp.startswith("c"):
        fp_kind, fp_off = FP_AT_CFA, int(rbp[1:])
    elif rbp not in (None, "u", "s"):
        return (CFA_UNSUPPORTED, FP_SAME, 0, 0)
    m = re.match(r"^(rsp|rbp)([+-]\d+)$", cfa or "")
    if m:
        return (CFA_SP if m.group(1) == "rsp" else CFA_FP, fp_kind, fp_off, int(m.group(2)))
    if cfa == "exp" and in_plt:
        return (CFA_PLT, FP_SAME, 0, 0)
    return (CFA_UNSUPPORTED, FP_SAME, 0, 0)


def build_rows(path):
    """Returns a sorted list of (pc_offset, cfa_kind, fp_kind, fp_off, cfa_off)."""
    segs = load_segments(path)
    plts = plt_ranges(path)
    by_pc = {}
    ends = []
    for start, end, signal, locs in parse_frames(path):
        if not locs:
            continue
        for i, (loc, cfa, rbp, ra) in enumerate(locs):
            nxt = locs[i + 1][0] if i + 1 < len(locs) else end
            if nxt <= loc:
                continue
            off = to_offset(segs, loc)
            if off is None:
                continue
            in_plt = any(a <= loc < b for a, b in plts)
            by_pc[off] = rule(cfa, rbp, ra, signal, in_plt)
        e = to_offset(segs, end - 1)
        if e is not None:
            ends.append(e + 1)
    for e in ends:
        by_pc.setdefault(e, (CFA_UNSUPPORTED, FP_SAME, 0, 0))
    rows = []
    prev = None
    for pc in sorted(by_pc):
        r = by_pc[pc]
        if r == prev:
            continue  # the same rule continues
        if pc > 0xffffffff:
            break
        rows.append((pc,) + r)
        prev = r
    return rows


def pack(rows):
    return b"".join(ROW.pack(pc, k, fk, fo, co) for pc, k, fk, fo, co in rows)


def main():
    rows = build_rows(sys.argv[1])
    if "--dump" in sys.argv:
        for r in rows:
            print("%08x kind=%d fp=%d fp_off=%d cfa_off=%d" % r)
    print(len(rows), "rows", file=sys.stderr)


if __name__ == "__main__":
    main()
