"""CPython line tables (symbolizer/interp/cpython_lines.c) against the
interpreter's own co_lines(), on every code object of Python's standard
library as this machine's python3.11 compiles it.

3.11's location table is checked directly. No 3.10 runs here, so its format
is checked by re-encoding the same ranges the way 3.10's compiler writes
them (byte deltas up to 254, line deltas up to +-127, -128 for none): this
tests the decoder against the documented format, not against a 3.10."""
import glob
import subprocess
import types

from conftest import BUILD

DUMP = BUILD / "tests" / "unit" / "cpython-lines-dump"


def code_objects():
    for path in sorted(glob.glob("/usr/lib/python3.11/*.py")):
        try:
            src = open(path, "rb").read()
            top = compile(src, path, "exec")
        except (SyntaxError, ValueError):
            continue
        stack = [top]
        while stack:
            co = stack.pop()
            yield co
            stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))


def nonempty(ranges):
    return [r for r in ranges if r[0] != r[1]]


def merged(ranges):
    """No empty ranges, neighbours with one line merged: the same ranges
    however an encoder split them."""
    out = []
    for start, end, line in ranges:
        if start == end:
            continue
        if out and out[-1][2] == line and out[-1][1] == start:
            out[-1] = (out[-1][0], end, line)
        else:
            out.append((start, end, line))
    return out


def encode_310(ranges, first):
    """The 3.10 compiler's co_linetable for the same ranges."""
    out, cur = bytearray(), first
    for start, end, line in ranges:
        bdelta = end - start
        if line is None:
            ldelta = -128
        else:
            ldelta = line - cur
            while ldelta > 127:
                out += bytes([0, 127])
                ldelta -= 127
            while ldelta < -127:
                out += bytes([0, (-127) & 0xff])
                ldelta += 127
            cur = line
        while True:
            step = min(bdelta, 254)
            out += bytes([step, ldelta & 0xff])
            bdelta -= step
            ldelta = -128 if line is None else 0
            if bdelta == 0:
                break
    return bytes(out)


def run_dump(rows):
    p = subprocess.run([str(DUMP)], input="".join(rows), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def parse(line):
    assert not line.startswith("error"), line
    out = []
    for tok in line.split():
        s, e, l = tok.split(":")
        out.append((int(s), int(e), None if int(l) == -1 else int(l)))
    return out


def test_location_table_311_matches_co_lines():
    cos = list(code_objects())
    assert len(cos) > 5000, len(cos)
    rows = [f"311 {co.co_firstlineno} {co.co_linetable.hex()}\n" for co in cos]
    bad = []
    for co, got in zip(cos, run_dump(rows)):
        want = list(co.co_lines())
        if nonempty(parse(got)) != want:
            bad.append((co.co_filename, co.co_qualname, got[:200], want[:5]))
    print(f"{len(cos)} code objects, {len(bad)} differ")
    assert not bad, bad[:5]


def test_310_format_decodes_the_same_ranges():
    cos = list(code_objects())[:5000]
    rows, wants = [], []
    for co in cos:
        want = list(co.co_lines())
        rows.append(f"310 {co.co_firstlineno} {encode_310(want, co.co_firstlineno).hex()}\n")
        wants.append(want)
    bad = [(w[:3], g[:200]) for w, g in zip(wants, run_dump(rows)) if merged(parse(g)) != merged(w)]
    assert not bad, bad[:5]


def test_damaged_tables_are_errors_not_guesses():
    rows = [
        "311 1 f0\n",          # long form without its varint
        "311 1 e8c0\n",        # varint that never ends
        "311 1 00\n",          # no entry starts here
        "310 1 0a\n",          # half a pair
        "312 1 f8\n",          # unknown format
    ]
    out = run_dump(rows)
    assert all(line.startswith("error") for line in out), out
