"""PHP frames end to end (issue 31): the real sensor and symbolizer
profile Debian's php8.2 running tests/workload/php_frames.php, a known
call graph ({main} -> run -> branch_a -> Worker::spin, a method; run ->
branch_b -> crc32, a C function; 3:1 by CPU time, which the program
measures itself), while Excimer (php-excimer's ExcimerProfiler) samples
the same run. In the symbolizer's folded output, queried after the
process exited (so the names survived it):
  - >= 95 % of the program's samples (its main thread's: Excimer's timer
    thread runs no PHP) carry a complete PHP chain: rooted
    at {main}, every caller -> callee an edge of the program's call graph
    (an internal function as a leaf), every user frame with a line;
  - branch_a's share of branch_a + branch_b within 5 points of the
    design's 75 %, of the program's own measured CPU split, and of
    Excimer's (there: 5 points, or 3 standard deviations of sampling noise
    when a loaded host leaves Excimer few log entries);
  - >= 90 % of the leaf frames of Worker::spin and branch_b are on the
    hot lines (spin's loop; branch_b's crc32 call);
  - the PHP frames replace execute_ex, and crc32's C frames sit above
    the crc32 frame.
Both BPF walks of the native stack (bpf_loop and tail calls) run the PHP
walker. The workload waits on stdin until its process has its entry in the
sensor's interp_procs map: samples before that have no PHP frames by
design. Also: a closure called back by array_map (C) gets its own run
above array_map's C frames; the Loader's offsets against php8.2-dev's
headers (when installed) and the VM's registers in execute_ex's
disassembly."""
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import time
from collections import Counter

import pytest

from conftest import Symbolizer, symbols_pb2, wait_for
from test_cpython_procs import cpython_map_id, entries
from test_otlp import Receiver, attr_map, free_port

PHP = "/usr/bin/php8.2"
WORKLOAD = pathlib.Path(__file__).resolve().parents[1] / "workload" / "php_frames.php"
HEADERS = "/usr/include/php/20220829"
SECONDS = 12

pytestmark = pytest.mark.skipif(not os.path.exists(PHP), reason="no php8.2")

# The call graph: caller -> callees (user functions); any frame may call
# an internal function, which is then the leaf.
EDGES = {
    "{main}": {"run"},
    "run": {"branch_a", "branch_b"},
    "branch_a": {"Worker::spin", "cpu"},
    "branch_b": {"cpu"},
}


def line(marker):
    src = WORKLOAD.read_text().splitlines()
    return next(i + 1 for i, l in enumerate(src) if l.rstrip().endswith("// " + marker))


def folded(sym, pid, since=0):
    r = sym.symbols.Folded(symbols_pb2.ProfileQuery(since_unix_s=since), timeout=10)
    return [(list(s.frames), s.count) for s in r.stacks if s.pid == pid]


INTERNAL = ("crc32", "getrusage", "hrtime", "ExcimerProfiler::start", "ExcimerProfiler::stop",
            "<unknown php frame>")


def php_frames(frames):
    """(name, line or None, is_user) of the PHP frames, root first: user
    frames end in "(file.php:LINE)" / "(file.php)"; an internal function
    is the program's one named right after a user frame (the C frames
    above it may have the same name: libc's getrusage)."""
    out = []
    for f in frames:
        m = re.fullmatch(r"(.+) \((.+\.php)(?::(\d+))?\)", f)
        if m:
            out.append((m.group(1), int(m.group(3)) if m.group(3) else None, True))
        elif f in INTERNAL and out and out[-1][2]:
            out.append((f, None, False))
    return out


def complete(chain):
    if not chain or chain[0][0] != "{main}":
        return False
    for i, (name, ln, user) in enumerate(chain):
        if user and ln is None:
            return False
        if i == 0:
            continue
        parent = chain[i - 1][0]
        if user and name not in EDGES.get(parent, ()):
            return False
        if not user and (name == "<unknown php frame>" or i != len(chain) - 1):
            return False
    return True


@pytest.mark.parametrize("walk", ["loop", "tail"])
def test_php_frames_under_sonde_and_excimer(symbolizer, start_sensor, tmp_path, walk):
    out = tmp_path / "excimer.json"
    os.chmod(tmp_path, 0o777)
    php = subprocess.Popen([PHP, str(WORKLOAD), str(out), str(SECONDS)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert php.stdout.readline().strip() == "ready"
        sensor = start_sensor(symbolizer.address, "--pid", str(php.pid), "--frequency", "199",
                              "--bpf-walk", walk)
        try:
            wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor")
            map_id = cpython_map_id(sensor.proc.pid)
            wait_for(lambda: php.pid in entries(map_id), 60, "php's BPF entry", interval=0.2)
        except AssertionError:
            raise AssertionError(sensor.logtext() + symbolizer.logtext())
        php.stdin.write("\n")
        php.stdin.flush()
        assert php.wait(SECONDS + 60) == 0
    finally:
        php.kill()
        php.wait()
    time.sleep(2.0)  # the sensor's flush
    sensor.stop()
    stacks = wait_for(lambda: folded(symbolizer, php.pid), 30, "php's samples", interval=1.0)
    result = json.loads(out.read_text())

    # Excimer's timer thread (rooted at clone3/start_thread) runs no PHP:
    # the walker leaves other threads than the main one alone.
    timer = sum(c for f, c in stacks if f[:1] == ["clone3"] or "start_thread" in f[:2])
    stacks = [(f, c) for f, c in stacks if not (f[:1] == ["clone3"] or "start_thread" in f[:2])]
    total = sum(c for _, c in stacks)
    ok = sum(c for f, c in stacks if complete(php_frames(f)))
    bad = sorted(((c, f) for f, c in stacks if not complete(php_frames(f))), reverse=True)[:5]
    names = lambda f: [n for n, _, _ in php_frames(f)]
    a = sum(c for f, c in stacks if "branch_a" in names(f))
    b = sum(c for f, c in stacks if "branch_b" in names(f))
    ex = result["excimer"]
    ex_a, ex_b = ex["branch_a"]["inclusive"], ex["branch_b"]["inclusive"]
    own = 100 * result["a"] / (result["a"] + result["b"])
    share, ex_share = 100 * a / (a + b), 100 * ex_a / (ex_a + ex_b)
    print(f"{total} samples of the main thread ({timer} of Excimer's timer thread left out), "
          f"{ok} complete ({100 * ok / total:.1f} %); branch_a {share:.1f} % "
          f"(sonde {a}:{b}), program {own:.1f} %, Excimer {ex_share:.1f} % ({ex_a}:{ex_b})")
    for c, f in bad[:3]:
        print(f"  incomplete: {c} {';'.join(f)}")
    assert total >= 300, total
    assert ok >= 0.95 * total, (ok, total, bad)
    # Excimer's shares rest on its log entries, one per signal it handled;
    # on a loaded host its timer's overruns fold several periods into one
    # entry (a few hundred entries in a run instead of ~2,000), and its share
    # then spreads by more than 5 points by chance alone. Its bound is 5
    # points or three standard deviations of both shares' sampling noise,
    # whichever is larger; the program's own split (exact) keeps 5.
    n_ex = result["excimer_entries"]
    p = share / 100
    sd = 100 * math.sqrt(p * (1 - p) * (1 / max(n_ex, 1) + 1 / max(a + b, 1)))
    ex_bound = max(5.0, 3 * sd)
    print(f"Excimer: {n_ex} log entries; its bound {ex_bound:.1f} points")
    assert abs(share - 75) <= 5 and abs(share - own) <= 5 and abs(share - ex_share) <= ex_bound, \
        (share, own, ex_share, ex_bound)

    hot = {"Worker::spin": {line("HOT_FOR"), line("HOT_SPIN")}, "branch_b": {line("CALL_CRC")}}
    leaves = on_hot = 0
    where = Counter()
    for f, c in stacks:
        users = [(n, ln) for n, ln, u in php_frames(f) if u]
        if users and users[-1][0] in hot:
            leaves += c
            on_hot += c if users[-1][1] in hot[users[-1][0]] else 0
            where[users[-1]] += c
    print(f"leaf frames of spin and branch_b: {leaves}, on the hot lines {on_hot}: "
          f"{sorted(where.items())}")
    assert leaves > 100 and on_hot >= 0.9 * leaves, (on_hot, leaves)

    # The splice: no execute_ex left where PHP frames are; crc32's own C
    # code above the crc32 frame.
    assert not any("execute_ex" in x for f, _ in stacks for x in f if "run" in names(f))
    crc = [(f, c) for f, c in stacks if names(f)[-1:] == ["crc32"]]
    above = sum(c for f, c in crc if f.index("crc32") + 1 < len(f))
    assert crc and above >= 0.5 * sum(c for _, c in crc), crc[:3]
    call = f"branch_b ({WORKLOAD}:{line('CALL_CRC')})"
    assert any(call in f for f, _ in crc), crc[:3]


OFFSETS = {  # php_layout.c's table for 8.2, as offsetof() expressions
    "eg_current_execute_data": "offsetof(zend_executor_globals, current_execute_data)",
    "ex_opline": "offsetof(zend_execute_data, opline)",
    "ex_func": "offsetof(zend_execute_data, func)",
    "ex_call_info": "offsetof(zend_execute_data, This) + offsetof(zval, u1.type_info)",
    "ex_prev": "offsetof(zend_execute_data, prev_execute_data)",
    "fn_type": "offsetof(zend_function, type)",
    "fn_flags": "offsetof(zend_function, common.fn_flags)",
    "fn_name": "offsetof(zend_function, common.function_name)",
    "fn_scope": "offsetof(zend_function, common.scope)",
    "op_filename": "offsetof(zend_function, op_array.filename)",
    "op_line_start": "offsetof(zend_function, op_array.line_start)",
    "op_opcodes": "offsetof(zend_function, op_array.opcodes)",
    "op_last": "offsetof(zend_function, op_array.last)",
    "ce_name": "offsetof(zend_class_entry, name)",
    "str_len": "offsetof(zend_string, len)",
    "str_val": "offsetof(zend_string, val)",
    "op_lineno": "offsetof(zend_op, lineno)",
    "SONDE_PHP_CALL_TOP": "ZEND_CALL_TOP",
    "SONDE_PHP_OP_SIZE": "sizeof(zend_op)",
}


def layout_table():
    src = (pathlib.Path(__file__).resolve().parents[2] / "symbolizer" / "interp" / "php" /
           "php_layout.c").read_text()
    table = dict(re.findall(r"\.(\w+) = (\d+),", src.split("php82 = {", 1)[1].split("};", 1)[0]))
    hdr = (pathlib.Path(__file__).resolve().parents[2] / "bpf" / "php.h").read_text()
    table["SONDE_PHP_CALL_TOP"] = str(1 << int(re.search(r"SONDE_PHP_CALL_TOP \(1u << (\d+)\)",
                                                         hdr).group(1)))
    table["SONDE_PHP_OP_SIZE"] = re.search(r"SONDE_PHP_OP_SIZE (\d+)", hdr).group(1)
    return table


@pytest.mark.skipif(not os.path.isdir(HEADERS) or not shutil.which("cc"),
                    reason="no php8.2-dev headers")
def test_layout_matches_the_headers(tmp_path):
    table = layout_table()
    body = "".join(f'printf("{k} %zu\\n", (size_t)({e}));\n' for k, e in OFFSETS.items())
    c = tmp_path / "off.c"
    c.write_text('#include "php.h"\n#include "zend_globals.h"\n#include <stdio.h>\n'
                 f"int main(void) {{\n{body}return 0;\n}}\n")
    inc = [f"-I{HEADERS}{d}" for d in ("", "/main", "/Zend", "/TSRM")]
    subprocess.run(["cc", *inc, "-o", str(tmp_path / "off"), str(c)], check=True)
    got = dict(l.split() for l in subprocess.run([str(tmp_path / "off")], capture_output=True,
                                                 text=True, check=True).stdout.splitlines())
    assert got == {k: table[k] for k in OFFSETS}, (got, table)


def test_vm_registers_in_execute_ex():
    """SONDE_PHP_VM_REGS: execute_ex loads the frame into r14 and the
    opline from it into r15, and dispatches through r15."""
    syms = subprocess.run(["nm", "-D", "--defined-only", PHP], capture_output=True, text=True,
                          check=True).stdout
    addr = int(next(l.split()[0] for l in syms.splitlines() if l.endswith(" execute_ex")), 16)
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={addr}",
                          f"--stop-address={addr + 0x60}", PHP], capture_output=True, text=True,
                         check=True).stdout
    assert "mov    %rdi,%r14" in asm and "mov    (%rdi),%r15" in asm, asm
    assert "jmp    *(%r15)" in asm, asm


CALLBACK = """<?php
class Mapper
{
    public function each(array $xs): array
    {
        return array_map(function ($x) { // CALL_MAP
            $t = 0;
            for ($i = 0; $i < 300; $i++) { // HOT_FOR
                $t += ($x * $i) % 7; // HOT_CLOSURE
            }
            return $t;
        }, $xs);
    }
}
$m = new Mapper();
$xs = range(1, 1000);
echo "ready\\n";
fgets(STDIN);
$end = hrtime(true) + 4e9;
while (hrtime(true) < $end) {
    $m->each($xs); // CALL_EACH
}
"""


def otlp_frame_types(recv):
    """function name -> profile.frame.type over what recv got."""
    types = {}
    for req in recv.snapshot():
        d = req.dictionary
        for loc in d.location_table[1:]:
            t = attr_map(req, loc.attribute_indices).get("profile.frame.type")
            for ln in loc.lines:
                types[d.string_table[d.function_table[ln.function_index].name_strindex]] = t
    return types


def test_closure_called_back_from_c(start_sensor, tmp_path):
    """array_map (C) calling a closure: the closure's run replaces the
    inner execute_ex, above array_map's C frames; the outer run
    ({main}, Mapper::each, array_map) the outer execute_ex. The OTLP
    export gives the PHP frames the frame type php."""
    script = tmp_path / "callback.php"
    script.write_text(CALLBACK)
    src = CALLBACK.splitlines()
    at = lambda m: next(i + 1 for i, l in enumerate(src) if l.rstrip().endswith("// " + m))
    recv = Receiver(free_port())
    recv.start()
    symbolizer = Symbolizer(tmp_path, ["--otlp-endpoint", f"127.0.0.1:{recv.port}",
                                       "--otlp-insecure", "--otlp-interval", "1"])
    php = subprocess.Popen([PHP, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True)
    try:
        assert php.stdout.readline().strip() == "ready"
        sensor = start_sensor(symbolizer.address, "--pid", str(php.pid), "--frequency", "199")
        wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor")
        map_id = cpython_map_id(sensor.proc.pid)
        wait_for(lambda: php.pid in entries(map_id), 60, "php's BPF entry", interval=0.2)
        php.stdin.write("\n")
        php.stdin.flush()
        assert php.wait(60) == 0
        time.sleep(2.0)
        sensor.stop()
        stacks = wait_for(lambda: folded(symbolizer, php.pid), 30, "php's samples", interval=1.0)
        types = wait_for(lambda: (lambda t: t if "array_map" in t else None)(
            otlp_frame_types(recv)), 30, "the PHP frames over OTLP", interval=0.5)
    finally:
        php.kill()
        php.wait()
        symbolizer.stop()
        recv.stop()
    outer = [f"{{main}} ({script}:{at('CALL_EACH')})", f"Mapper::each ({script}:{at('CALL_MAP')})",
             "array_map"]
    closure = {f"Mapper::{{closure}} ({script}:{at(m)})" for m in ("HOT_FOR", "HOT_CLOSURE")}
    total = sum(c for f, c in stacks if "array_map" in f)
    good = 0
    for f, c in stacks:
        here = [k for k, x in enumerate(f) if x in closure]
        if not here or "array_map" not in f:
            continue
        i = f.index("array_map")
        # The outer run in order, then C frames (array_map's, the call
        # back), then the closure on its loop: no execute_ex left.
        if f[i - 2:i + 1] == outer and i + 1 < here[0] and "execute_ex" not in f:
            good += c
    print(f"{total} samples under array_map, {good} with the closure above its C frames")
    for f, c in sorted(stacks, key=lambda x: -x[1])[:2]:
        print(c, ";".join(f))
    assert total > 100 and good >= 0.8 * total, (good, total)
    for name in (*outer, *closure):
        assert types.get(name) == "php", (name, types)
    assert types.get("zend_call_function") == "native", types
    # execute_ex itself shows only in a sample between a closure's frame
    # leaving (the VM's current frame is array_map's again) and its
    # execute_ex returning: a native frame then.
    assert types.get("execute_ex", "native") == "native", types


PHASES = """<?php
function leaf_a($n) { $t = 0; for ($i = 0; $i < $n; $i++) { $t += $i % 7; } return $t; }
function leaf_b($n) { $t = 0; for ($i = 0; $i < $n; $i++) { $t += $i % 11; } return $t; }
function phase_a() { return leaf_a(20000); }
function phase_b() { return leaf_b(20000); }
echo "ready\n";
fgets(STDIN);
$b = false;
/* The flag file is looked for once every 256 calls: {main} is nearly
 * always third in the walk, under phase_x and leaf_x. */
for ($k = 1; ; $k++) {
    if (!$b && ($k & 255) == 0 && file_exists($argv[1])) {
        $b = true;
    }
    $b ? phase_b() : phase_a();
}
"""

def test_names_after_a_symbolizer_restart(start_sensor, tmp_path):
    """A new connection is a session that knows no function records: the
    sensor empties php_funcs and voids the walkers' per-CPU memo of
    records sent (interp_conn_gen, bpf/interp_span.h), so the walker sends
    each record again. The symbolizer is killed while the program runs
    phase_a, a new one (empty cache) takes over, then the program moves
    to phase_b: {main} was sent in the first session only, at the same
    place in the walk, so without the memo's reset it stays unnamed in
    phase_b's stacks (0 of 204 named in one run). (Stacks first seen while the sensor had no
    symbolizer are defined before the records sent again and stay
    unnamed in the new session: only phase_b's count.)"""
    os.chmod(tmp_path, 0o777)
    home = tmp_path / "sym"
    home.mkdir()
    script = tmp_path / "phases.php"
    script.write_text(PHASES)
    symbolizer = Symbolizer(home)
    flag = tmp_path / "phase_b"
    php = subprocess.Popen([PHP, str(script), str(flag)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    chain = lambda st, leaf: sum(c for f, c in st if [n for n, _, _ in php_frames(f)] ==
                                 ["{main}", f"phase_{leaf}", f"leaf_{leaf}"])
    total = lambda st, leaf: sum(c for f, c in st if f"leaf_{leaf}" in ";".join(f))
    try:
        assert php.stdout.readline().strip() == "ready"
        sensor = start_sensor(symbolizer.address, "--pid", str(php.pid), "--frequency", "199")
        wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor")
        map_id = cpython_map_id(sensor.proc.pid)
        wait_for(lambda: php.pid in entries(map_id), 60, "php's BPF entry", interval=0.2)
        php.stdin.write("\n")
        php.stdin.flush()
        before = wait_for(lambda: (lambda st: st if chain(st, "a") >= 50 else None)(
            folded(symbolizer, php.pid)), 30, "phase_a's samples", interval=1.0)
        symbolizer.proc.kill()
        symbolizer.proc.wait()
        symbolizer.stop()
        shutil.rmtree(home / "cache", ignore_errors=True)
        symbolizer = Symbolizer(home)
        wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor to reconnect")
        time.sleep(2)
        flag.touch()
        after = wait_for(lambda: (lambda st: st if total(st, "b") >= 200 else None)(
            folded(symbolizer, php.pid)), 60, "phase_b's samples", interval=1.0)
        assert sensor.proc.poll() is None, sensor.logtext()
    finally:
        php.kill()
        php.wait()
        symbolizer.stop()
    print(f"phase_a before the restart: {chain(before, 'a')} of {total(before, 'a')} samples "
          f"named; phase_b after it: {chain(after, 'b')} of {total(after, 'b')}")
    assert chain(after, "b") >= 0.9 * total(after, "b"), sorted(after, key=lambda x: -x[1])[:3]
