"""Ruby stacks end to end (issue 31): the real sensor and symbolizer profile
Debian's ruby3.1 (libruby-3.1.so.3.1) running a program with a known call
graph: <main> -> Object#run, which alternates two branches by time, 3:1,
by CPU time, Worker#heavy (a Ruby loop) and Worker.light (Zlib.crc32, a C extension,
called from a singleton method); heavy's loop is Integer#times with a
block (Ruby -> C -> Ruby). The same program runs under stackprof
(Debian's ruby-stackprof, cpu mode) in the same test. In the symbolizer's
folded output:
  - >= 95 % of the program's samples carry the complete Ruby chain,
    spliced in place of rb_vm_exec (Zlib.crc32 above Worker.light, then
    zlib's native frames above it; the block above Integer#times's
    native frames);
  - the branches' shares are within 5 points of the design (75/25) and of
    stackprof's;
  - >= 90 % of the leaf-most Ruby method frames are on their hot line;
  - after the process exited, its stacks are still named.
The workload waits on stdin until its process has its entry in the
sensor's interp_procs map."""
import json
import pathlib
import subprocess
import time

from conftest import wait_for
from test_cpython_procs import cpython_map_id, entries
from test_cpython_profile import folded, name_of

RUBY = "/usr/bin/ruby3.1"

PROGRAM = """\
require 'zlib'
$stdout.sync = true
CPU = Process::CLOCK_PROCESS_CPUTIME_ID  # the branches' weights are CPU time
class Worker
  def heavy(ms)
    s = 0
    deadline = Process.clock_gettime(CPU) + ms / 1000.0
    while Process.clock_gettime(CPU) < deadline
      2000.times { |i| s += (i * i) % 7 }  # HOT_HEAVY
    end
    s
  end

  def self.light(buf, ms)
    deadline = Process.clock_gettime(CPU) + ms / 1000.0
    c = 0
    while Process.clock_gettime(CPU) < deadline
      c ^= Zlib.crc32(buf)  # HOT_LIGHT
    end
    c
  end
end

def run(seconds)
  w = Worker.new
  buf = 'x' * (1 << 18)
  stop = Process.clock_gettime(CPU) + seconds
  while Process.clock_gettime(CPU) < stop
    w.heavy(30)  # CALL_HEAVY
    Worker.light(buf, 10)  # CALL_LIGHT
  end
end

if ENV['STACKPROF_OUT']
  require 'stackprof'
  r = StackProf.run(mode: :cpu, interval: 1000) { run(ENV['SECONDS'].to_f) }
  out = {}
  r[:frames].each_value { |f| out[f[:name]] = f[:total_samples] }
  File.write(ENV['STACKPROF_OUT'], JSON.generate({ 'samples' => r[:samples], 'frames' => out }))
else
  puts "ready"
  $stdin.gets
  run(1e9)  # CALL_RUN
end
"""

HEAVY = ["<main>", "Object#run", "Worker#heavy"]
LIGHT = ["<main>", "Object#run", "Worker.light", "Zlib.crc32"]
RUBY_FRAMES = {"<main>", "Object#run", "Worker#heavy", "Worker.light", "Zlib.crc32",
               "Process.clock_gettime", "Integer#times", "block in Worker#heavy"}
BLOCK = HEAVY + ["Integer#times", "block in Worker#heavy"]


def line(marker):
    return next(i + 1 for i, l in enumerate(PROGRAM.splitlines()) if l.endswith("# " + marker))


def ruby_chain(frames):
    """Names of the frames named like the program's Ruby frames, root first."""
    return [name_of(f) for f in frames if name_of(f) in RUBY_FRAMES]


def profile(symbolizer, start_sensor, rb):
    sensor = start_sensor(symbolizer.address, "--pid", str(rb.pid), "--frequency", "199")
    try:
        wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor to connect")
        map_id = cpython_map_id(sensor.proc.pid)
        wait_for(lambda: rb.pid in entries(map_id), 60, "the interpreter's BPF entry",
                 interval=0.2)
    except AssertionError:
        raise AssertionError(sensor.logtext())
    rb.stdin.write("\n")
    rb.stdin.flush()
    return sensor


def stackprof_shares(tmp):
    path = pathlib.Path(tmp) / "prog_sp.rb"
    out = pathlib.Path(tmp) / "stackprof.json"
    path.write_text("require 'json'\n" + PROGRAM)
    subprocess.run([RUBY, str(path)], check=True, timeout=300,
                   env={"STACKPROF_OUT": str(out), "SECONDS": "5", "PATH": "/usr/bin:/bin"})
    r = json.loads(out.read_text())
    heavy = r["frames"].get("Worker#heavy", 0)
    light = r["frames"].get("Worker.light", 0)
    return heavy, light


def test_ruby_frames(symbolizer, start_sensor, tmp_path):
    sp_heavy, sp_light = stackprof_shares(tmp_path)
    path = pathlib.Path(tmp_path) / "prog.rb"
    path.write_text(PROGRAM)
    rb = subprocess.Popen([RUBY, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True)
    try:
        assert rb.stdout.readline().strip() == "ready"
        sensor = profile(symbolizer, start_sensor, rb)

        def enough():
            st = folded(symbolizer, rb.pid)
            return st if sum(c for f, c in st if "Object#run" in ruby_chain(f)) >= 1200 else None
        wait_for(enough, 180, "1200 samples in Object#run", interval=1.0)
        sensor.stop()
        stacks = folded(symbolizer, rb.pid)
    finally:
        rb.kill()
        rb.wait()
    total = sum(c for _, c in stacks)
    heavy = sum(c for f, c in stacks if ruby_chain(f)[:3] == HEAVY)
    light = sum(c for f, c in stacks if ruby_chain(f)[:3] == LIGHT[:3])
    crc = sum(c for f, c in stacks if ruby_chain(f) == LIGHT)
    share = heavy / max(heavy + light, 1)
    sp_share = sp_heavy / max(sp_heavy + sp_light, 1)
    print(f"{total} samples: heavy {heavy}, light {light} ({crc} in Zlib.crc32); "
          f"heavy share {share:.3f}, stackprof's {sp_share:.3f} "
          f"({sp_heavy}:{sp_light} samples)")
    # The complete chain on >= 95 % of the program's samples.
    assert heavy + light >= 0.95 * total, (heavy, light, total, stacks[:5])
    assert abs(share - 0.75) <= 0.05, share
    assert abs(share - sp_share) <= 0.05, (share, sp_share)
    assert sp_heavy + sp_light > 800, (sp_heavy, sp_light)
    # Zlib.crc32 is spliced above Worker.light, zlib's native frames above it.
    assert crc >= 0.8 * light, (crc, light)
    above = sum(c for f, c in stacks if ruby_chain(f) == LIGHT and
                any("crc32" in x for x in f[[name_of(x) for x in f].index("Zlib.crc32") + 1:]))
    assert above >= 0.8 * crc, (above, crc, [f for f, _ in stacks if "Zlib.crc32" in
                                              ruby_chain(f)][:3])
    # Every rb_vm_exec replaced by its run, but in the instants when
    # Integer#times has called the VM for its block and the block's frame
    # is not pushed yet or popped already (the block is short: a few
    # percent of the samples).
    unspliced = [(f, c) for f, c in stacks if "rb_vm_exec" in f]
    print(f"{sum(c for _, c in unspliced)} samples with an rb_vm_exec left")
    for f, c in unspliced[:5]:
        print(c, ";".join(f))
    assert sum(c for _, c in unspliced) <= 0.05 * total, unspliced[:3]
    assert all(ruby_chain(f)[-1] == "Integer#times" for f, _ in unspliced), unspliced[:3]
    # Ruby -> C (Integer#times) -> Ruby (the block): the block's run sits
    # above times' native frames, not next to it.
    block = [(f, c) for f, c in stacks if ruby_chain(f)[:5] == BLOCK]
    nested = sum(c for f, c in block
                 if [name_of(x) for x in f].index("block in Worker#heavy") >
                 [name_of(x) for x in f].index("Integer#times") + 1)
    print(f"{sum(c for _, c in block)} samples in the block, {nested} with native frames "
          f"between Integer#times and it")
    assert sum(c for _, c in block) >= 0.5 * heavy, (len(block), heavy)
    assert nested >= 0.95 * sum(c for _, c in block), block[:3]
    # Lines: the leaf-most method frame on its hot line.
    hot = {"Worker#heavy": f"({path}:{line('HOT_HEAVY')})",
           "block in Worker#heavy": f"({path}:{line('HOT_HEAVY')})",
           "Worker.light": f"({path}:{line('HOT_LIGHT')})"}
    leaves = on_line = 0
    for f, c in stacks:
        methods = [x for x in f if name_of(x) in hot]
        if not methods:
            continue
        leaves += c
        if methods[-1].endswith(hot[name_of(methods[-1])]):
            on_line += c
    print(f"{on_line} of {leaves} leaf method frames on their hot line")
    assert on_line >= 0.9 * leaves, (on_line, leaves, stacks[:5])
    # Callers' lines are exact too.
    for want in (f"Object#run ({path}:{line('CALL_HEAVY')})",
                 f"Object#run ({path}:{line('CALL_LIGHT')})",
                 f"<main> ({path}:{line('CALL_RUN')})"):
        assert any(want in f for f, _ in stacks), (want, stacks[:3])
    # The process is gone: its frames are still named.
    time.sleep(1.0)
    after = folded(symbolizer, rb.pid)
    named = sum(c for f, c in after if ruby_chain(f)[:3] in (HEAVY, LIGHT[:3]))
    assert named >= 0.95 * sum(c for _, c in after), (named, after[:3])
