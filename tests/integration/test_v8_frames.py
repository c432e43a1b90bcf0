"""Node.js / V8 frames end to end (issue 30): the real sensor and
symbolizer profile a default `node` (Debian's Node 20, V8 11.3, no flags)
running a known call graph (hot functions that V8 optimises, one async
hop per round: an await on setImmediate), and the same program runs under
V8's own sampling profiler (`node --cpu-prof`) in the same test as the
reference. In the symbolizer's folded output:
  - >= 95 % of the main thread's samples in the workload carry a complete
    JS chain (the async function at the root of the round, a leaf below);
  - the leaf-function shares (leafA, leafB, middle) agree with the
    .cpuprofile's within 5 points;
  - the names survive the process's exit.
The workload waits on stdin until its process has its entry in the
sensor's interp_procs map: samples before that have no JS frames by
design."""
import json
import pathlib
import shutil
import subprocess
import time
from collections import Counter

import pytest

from conftest import symbols_pb2, wait_for
from test_cpython_procs import cpython_map_id, entries

NODE = shutil.which("node") or "/usr/bin/node"

# leafA/leafB are big enough (bytecode) that TurboFan does not inline
# them into their caller: their frames are real frames.
WORKLOAD = """\
'use strict';
function leafA(n) {
  let s = 0;
  for (let i = 0; i < n; i++) {
    s = (s + i * 7) % 1000003;  // HOT_A
  }
  return s;
}
function leafB(n) {
  let s = 1;
  for (let i = 0; i < n; i++) {
    s = (s * 31 + i) % 999983;  // HOT_B
  }
  return s;
}
function middle(n) {
  return leafA(n * 2) + leafB(n);
}
async function round(deadline) {
  let acc = 0;
  while (Date.now() < deadline) {
    for (let k = 0; k < 50; k++) acc += middle(2000);
    await new Promise((r) => setImmediate(r));
  }
  return acc;
}
function main() {
  const secs = Number(process.argv[2]);
  const go = () => round(Date.now() + 1000 * secs).then((v) => { console.log('done', v); process.exit(0); });
  if (process.argv[3] === 'wait') {
    console.log('ready');
    process.stdin.once('data', () => { process.stdin.pause(); go(); });
  } else {
    go();
  }
}
main();
"""

LEAVES = ("leafA", "leafB", "middle", "round")


def folded(sym, pid):
    r = sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
    return [(list(s.frames), s.count) for s in r.stacks if s.pid == pid]


def name_of(frame):
    return frame.split(" (", 1)[0]


def js_chain(frames, script):
    """Names of the frames of script, root first."""
    return [name_of(f) for f in frames if f"({script}" in f]


def reference_shares(tmp, script, secs):
    """Self-time shares of the workload's functions under node --cpu-prof."""
    out = pathlib.Path(tmp) / "prof"
    subprocess.run([NODE, "--cpu-prof", "--cpu-prof-dir", str(out), str(script), str(secs)],
                   check=True, capture_output=True, timeout=120)
    prof = json.loads(next(out.glob("*.cpuprofile")).read_text())
    by_id = {n["id"]: n for n in prof["nodes"]}
    counts = Counter(prof["samples"])
    self_of = Counter()
    for nid, c in counts.items():
        self_of[by_id[nid]["callFrame"]["functionName"]] += c
    total = sum(self_of[f] for f in LEAVES)
    return {f: self_of[f] / total for f in LEAVES}, total


def test_node_frames_against_cpu_prof(symbolizer, start_sensor, tmp_path):
    script = pathlib.Path(tmp_path) / "calls.js"
    script.write_text(WORKLOAD)
    ref, ref_total = reference_shares(tmp_path, script, 6)
    node = subprocess.Popen([NODE, str(script), "8", "wait"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert node.stdout.readline().strip() == "ready"
        sensor = start_sensor(symbolizer.address, "--pid", str(node.pid), "--frequency", "199")
        try:
            wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor")
            map_id = cpython_map_id(sensor.proc.pid)
            wait_for(lambda: node.pid in entries(map_id), 90, "node's BPF entry", interval=0.2)
        except AssertionError:
            raise AssertionError(sensor.logtext())
        node.stdin.write("\n")
        node.stdin.flush()
        assert node.stdout.readline().startswith("done")
        assert node.wait(30) == 0
        time.sleep(2.0)  # the sensor's flush
        sensor.stop()
    finally:
        node.kill()
        node.wait()

    def enough():
        st = folded(symbolizer, node.pid)
        return st if sum(c for f, c in st if "round" in js_chain(f, script)) >= 300 else None
    # After the exit: the names come from the records BPF copied.
    stacks = wait_for(enough, 30, "300 samples in round()", interval=1.0)
    main_thread = [(f, c) for f, c in stacks if f and f[0].startswith("node")]
    in_round = [(f, c) for f, c in stacks if "round" in js_chain(f, script)]
    total = sum(c for _, c in in_round)
    complete = sum(c for f, c in in_round if js_chain(f, script)[-1] in LEAVES)
    leaf = Counter()
    for f, c in in_round:
        leaf[js_chain(f, script)[-1]] += c
    got = {f: leaf[f] / total for f in LEAVES}
    print(f"sonde: {total} samples in round(), {complete} complete; leaves {dict(leaf)}")
    print(f"--cpu-prof: {ref_total} samples; shares {ref}; sonde {got}")
    print("examples:", in_round[:3])
    assert complete >= 0.95 * total, (complete, total)
    for f in LEAVES:
        assert abs(got[f] - ref[f]) <= 0.05, (f, got, ref)
