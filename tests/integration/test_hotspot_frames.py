"""Java frames end to end (issue 29): the real sensor and symbolizer
profile Debian's OpenJDK 17 (and, in the JIT case, the JDKs tests/run
fetches: Debian 13's 21 in SONDE_JDK21, Debian 11's 11 in SONDE_JDK11, by
tests/workload/fetch-jdk, each compiling Work and reading its recording
with its own javac and jfr) running tests/workload/java/Work.java (a hot
C2-compiled loop whose inlined callee calls two compiled methods on the
main thread, a method excluded from compilation on a second thread), started
with defaults (no -XX:+PreserveFramePointer, no agent, no perf map), and
the JVM's own Flight Recorder samples the same process in the same run
(-XX:StartFlightRecording with execution samples only, every 1 ms: at
the profile settings' 10 ms JFR kept 300-1,000 samples of a thread in 20 s
and its leaf shares moved by 4 points from run to run; jfr print --json
--stack-depth 64). Checked:
  - >= 95 % of the samples of each Java thread carry its complete Java
    chain from the thread's root method (Work.main; Thread.run) down;
  - per thread, the leaf methods' shares agree with JFR's within 5 points
    (8 under -Xint). Per thread, because JFR drops the samples whose top
    frame it cannot decode, far more often in compiled code than in the
    interpreter, which skews its split between the two threads (both
    splits are printed). Where JFR's share of a thread's samples is under
    half of sonde's (JFR dropping most of that thread's samples, as it
    did with short compiled loops), its shares are no reference, and only
    the top leaf method is compared (docs/interpreters.md, "HotSpot");
  - the method C2 inlines (mix, into spin) is its own frame between its
    caller and its callees: spin -> mix -> hash (or half);
  - a JVM that runs 4 s and exits is fully named in the profile read
    after it exited, and its methods' system names (the descriptor:
    Work.spin(I)J) are in OTLP's and pprof's function tables.
The workload waits on stdin until its process has its entry in the
sensor's interp_procs map (libjvm analysed, config sent): samples before
that have no Java frames by design."""
import collections
import gzip
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from conftest import SRC, Symbolizer, symbols_pb2, wait_for
from test_cpython_procs import cpython_map_id, entries
from test_otlp import Receiver
from test_span_samples import _pprof_module

# A JDK home per release: bin/java, bin/javac and bin/jfr run it.
JDKS = {"17": "/usr/lib/jvm/java-17-openjdk-amd64",
        "21": os.environ.get("SONDE_JDK21", ""), "11": os.environ.get("SONDE_JDK11", "")}
JDK = JDKS["17"]
WORK = SRC / "tests" / "workload" / "java" / "Work.java"
# JFR's settings: execution samples only (the same in JDK 11-21's .jfc
# format), every millisecond.
JFC = """<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="sonde" description="execution samples">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting>
    <setting name="period">1 ms</setting>
  </event>
</configuration>
"""
FLAGS = ["-XX:CompileCommand=quiet", "-XX:CompileCommand=exclude,Work::slow",
         "-XX:CompileCommand=inline,Work::mix", "-XX:CompileCommand=dontinline,Work::hash",
         "-XX:CompileCommand=dontinline,Work::half"]
# Each thread's Java chain, root first (the lambda's hidden class has an
# address in its name: Work$$Lambda$14/0x... in 17, Work$$Lambda/0x... in
# 21). JDK 21's Thread.run calls the task through Thread.runWith.
CHAINS = {
    "java": ["Work.main", "Work.outer", "Work.middle"],
    "slow": ["java.lang.Thread.run", "Work$$Lambda", "Work.slowLoop", "Work.slow"],
}
CHAINS_21 = dict(CHAINS, slow=["java.lang.Thread.run", "java.lang.Thread.runWith",
                               "Work$$Lambda", "Work.slowLoop", "Work.slow"])

# The system names (package.Class.method and the JVM's descriptor) of
# the main thread's methods.
SYSTEM_NAMES = {
    "Work.main": "Work.main([Ljava/lang/String;)V",
    "Work.outer": "Work.outer()V",
    "Work.middle": "Work.middle()V",
    "Work.spin": "Work.spin(I)J",
    "Work.mix": "Work.mix(J)J",
    "Work.hash": "Work.hash(J)J",
    "Work.half": "Work.half(J)J",
}


def tool(jdk, name):
    return f"{jdk}/bin/{name}"


def has_jdk(jdk):
    return bool(jdk) and all(shutil.which(tool(jdk, t)) for t in ("java", "javac", "jfr"))


pytestmark = pytest.mark.skipif(not has_jdk(JDK), reason="no OpenJDK 17")


def chains(jdk):
    return CHAINS_21 if jdk == JDKS["21"] else CHAINS


def compiled(tmp, jdk):
    out = pathlib.Path(tmp) / "classes"
    out.mkdir(exist_ok=True)
    subprocess.run([tool(jdk, "javac"), "-d", str(out), str(WORK)], check=True)
    return out


def name_of(frame):
    return frame.split(" (", 1)[0]


def is_java(frame):
    return name_of(frame).startswith(("Work.", "Work$", "java.", "jdk."))


def java_names(frames):
    return [name_of(f) for f in frames if is_java(f)]


def has_chain(frames, chain):
    """The Java frames start with chain (the thread's root method first)."""
    names = java_names(frames)
    return len(names) >= len(chain) and all(
        n.startswith(c) for n, c in zip(names, chain))


def thread_of(comm, frames):
    """The thread a stack is of, by its comm; JDK 11 leaves the threads the
    JVM starts for itself (JFR's sampler, ...) named after the process,
    as the main thread is: those (started at thread_native_entry) are
    "java (vm)"."""
    if comm == "java" and any(f.startswith("thread_native_entry(") for f in frames):
        return "java (vm)"
    return comm


def folded(sym, pid):
    r = sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
    return [(thread_of(s.comm, s.frames), list(s.frames), s.count)
            for s in r.stacks if s.pid == pid]


def run(symbolizer, start_sensor, tmp, seconds, extra=(), jdk=JDK):
    """Runs Work on jdk for seconds under the sensor and JFR; returns
    (folded stacks of its pid, the JFR file)."""
    classes = compiled(tmp, jdk)
    rec = pathlib.Path(tmp) / "work.jfr"
    jfc = pathlib.Path(tmp) / "samples.jfc"
    jfc.write_text(JFC)
    java = subprocess.Popen(
        [tool(jdk, "java"), *FLAGS, *extra, f"-XX:StartFlightRecording=filename={rec},settings={jfc}",
         "-cp", str(classes), "Work", str(seconds), "wait"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        # JFR says it started on stdout first.
        for _ in range(20):
            if java.stdout.readline().strip() == "ready":
                break
        else:
            raise AssertionError("Work did not start")
        sensor = start_sensor(symbolizer.address, "--pid", str(java.pid), "--frequency", "199")
        try:
            wait_for(lambda: symbolizer.status().sensors_connected == 1, 30, "the sensor")
            map_id = cpython_map_id(sensor.proc.pid)
            wait_for(lambda: java.pid in entries(map_id), 90, "the JVM's BPF entry",
                     interval=0.2)
        except AssertionError:
            raise AssertionError(sensor.logtext())
        java.stdin.write("\n")
        java.stdin.flush()
        assert java.wait(seconds + 60) == 0
        time.sleep(2.0)  # the sensor's last flush
        sensor.stop()
    finally:
        java.kill()
        java.wait()
    stacks = wait_for(lambda: folded(symbolizer, java.pid), 30, "the JVM's stacks", interval=1.0)
    return stacks, rec


def jfr_samples(rec, jdk):
    """(thread name, Java frame names root first) per jdk.ExecutionSample."""
    out = subprocess.run([tool(jdk, "jfr"), "print", "--json", "--stack-depth", "64", "--events",
                          "jdk.ExecutionSample", str(rec)], check=True, capture_output=True,
                         text=True).stdout
    samples = []
    for e in json.loads(out)["recording"]["events"]:
        v = e["values"]
        if not v.get("stackTrace") or not v.get("sampledThread"):
            continue  # JFR records some samples without a stack
        names = [f["method"]["type"]["name"].replace("/", ".") + "." + f["method"]["name"]
                 for f in v["stackTrace"]["frames"]]
        samples.append((v["sampledThread"]["javaName"], list(reversed(names)), 1))
    return samples


def jfr_top_lines(rec, method, jdk):
    """Counter of the line numbers JFR gives method's top frames."""
    out = subprocess.run([tool(jdk, "jfr"), "print", "--json", "--stack-depth", "1", "--events",
                          "jdk.ExecutionSample", str(rec)], check=True, capture_output=True,
                         text=True).stdout
    lines = collections.Counter()
    for e in json.loads(out)["recording"]["events"]:
        if not e["values"].get("stackTrace") or not e["values"]["stackTrace"]["frames"]:
            continue
        f = e["values"]["stackTrace"]["frames"][0]
        if f["method"]["type"]["name"].replace("/", ".") + "." + f["method"]["name"] == method:
            lines[f["lineNumber"]] += 1
    return lines


def leaf_shares(samples, thread):
    """Per cent of thread's samples whose leaf is each Java method (samples
    with a native leaf left out: JFR has none)."""
    got = collections.Counter()
    for t, frames, count in samples:
        if t == thread and frames and is_java(frames[-1]):
            got[name_of(frames[-1])] += count
    total = sum(got.values())
    return {k: 100.0 * v / total for k, v in got.items()}, total


def jfr_thread(comm):
    return "main" if comm == "java" else comm


def compare(stacks, rec, tolerance, jdk=JDK):
    ours = [(jfr_thread(c), f, n) for c, f, n in stacks]
    theirs = jfr_samples(rec, jdk)
    total = sum(n for t, _, n in ours if t in ("main", "slow"))
    jtotal = sum(n for t, _, n in theirs if t in ("main", "slow"))
    for thread in ("main", "slow"):
        a, na = leaf_shares(ours, thread)
        b, nb = leaf_shares(theirs, thread)
        print(f"{thread}: sonde {na} samples {sorted(a.items(), key=lambda x: -x[1])[:4]}")
        print(f"{thread}: JFR {nb} samples {sorted(b.items(), key=lambda x: -x[1])[:4]}")
        assert na >= 100 and nb >= 30, (thread, na, nb)
        count = sum(n for t, _, n in ours if t == thread)
        jcount = sum(n for t, _, n in theirs if t == thread)
        if jcount / jtotal < 0.5 * count / total:
            # JFR keeps only the samples whose top frame it can decode
            # (a PcDesc with a scope near the pc): on a thread in compiled
            # code without safepoint polls it drops most of them, and
            # what it keeps is skewed towards the call sites. Its leaf
            # shares there are no reference; the leaf most samples end
            # in still is.
            print(f"{thread}: JFR walked {jcount} of {jtotal} samples to sonde's "
                  f"{count} of {total}: comparing the top leaf only")
            assert max(a, key=a.get) == max(b, key=b.get), (thread, a, b)
            continue
        for m in set(a) | set(b):
            if max(a.get(m, 0), b.get(m, 0)) >= 5:
                assert abs(a.get(m, 0) - b.get(m, 0)) <= tolerance, (thread, m, a, b)
    split = {t: sum(n for th, _, n in ours if th == t) for t in ("main", "slow")}
    jsplit = collections.Counter(t for t, _, _ in theirs)
    print(f"thread split: sonde {split}, JFR {dict(jsplit)}")


def check_chains(stacks, jdk=JDK):
    for comm, chain in chains(jdk).items():
        mine = [(f, n) for c, f, n in stacks if c == comm]
        total = sum(n for _, n in mine)
        ok = sum(n for f, n in mine if has_chain(f, chain))
        print(f"{comm}: {ok} of {total} samples carry {chain}")
        assert total >= 100 and ok >= 0.95 * total, (comm, ok, total,
                                                      [f for f, _ in mine if not has_chain(f, chain)][:3])


@pytest.mark.parametrize("release", ["17", "21", "11"])
def test_jit_frames_against_jfr(symbolizer, start_sensor, tmp_path, release):
    jdk = JDKS[release]
    if not has_jdk(jdk):
        pytest.skip(f"no JDK {release} (tests/run fetches it: tests/workload/fetch-jdk "
                    f"{release}, in SONDE_JDK{release})")
    stacks, rec = run(symbolizer, start_sensor, tmp_path, 20, jdk=jdk)
    check_chains(stacks, jdk)
    compare(stacks, rec, 5.0, jdk)
    # The inlined method is its own frame, with its caller and callee.
    inlined = sum(n for c, f, n in stacks
                  if java_names(f)[-3:] in (["Work.spin", "Work.mix", "Work.hash"],
                                            ["Work.spin", "Work.mix", "Work.half"]))
    hashing = sum(n for c, f, n in stacks if java_names(f)[-1:] in (["Work.hash"], ["Work.half"]))
    print(f"{inlined} of {hashing} samples in hash and half show spin -> mix -> them")
    assert hashing >= 50 and inlined >= 0.95 * hashing, (inlined, hashing)
    # Lines: the interpreted leaf's most common line is JFR's; the inlined
    # method's frame has its call site.
    ours = collections.Counter()
    for _, fr, n in stacks:
        if fr and name_of(fr[-1]) == "Work.slow" and ":" in fr[-1]:
            ours[int(fr[-1].rsplit(":", 1)[1].rstrip(")"))] += n
    theirs = jfr_top_lines(rec, "Work.slow", jdk)
    print(f"Work.slow lines: sonde {ours.most_common(3)}, JFR {theirs.most_common(3)}")
    assert ours and theirs and ours.most_common(1)[0][0] == theirs.most_common(1)[0][0]
    src = WORK.read_text().splitlines()
    call_hash = next(i + 1 for i, l in enumerate(src) if l.endswith("// CALL_HASH"))
    assert any(f == f"Work.mix (Work.java:{call_hash})" for _, fr, _ in stacks for f in fr), \
        sorted({f for _, fr, _ in stacks for f in fr if f.startswith("Work.mix")})


def test_interpreted_frames_against_jfr(symbolizer, start_sensor, tmp_path):
    stacks, rec = run(symbolizer, start_sensor, tmp_path, 20, ["-Xint"])
    check_chains(stacks)
    compare(stacks, rec, 8.0)


def java_system_names(names, system_names):
    """{name: system name} of the Java functions of an export's function
    table (names and system names as strings)."""
    return {n: sn for n, sn in zip(names, system_names) if is_java(n)}


def check_system_names(got):
    """The known methods of Work's main thread have their descriptor as
    their system name, whatever the frame's line: those of its chain
    always, the leaves when sampled."""
    print("system names:", sorted(set(got.values()))[:12])
    for method, sys_name in SYSTEM_NAMES.items():
        seen = {sn for n, sn in got.items() if name_of(n) == method}
        if seen or method in CHAINS["java"]:
            assert seen == {sys_name}, (method, seen)


def otlp_functions(reqs):
    names, sys_names = [], []
    for req in reqs:
        st = req.dictionary.string_table
        for f in req.dictionary.function_table:
            names.append(st[f.name_strindex])
            sys_names.append(st[f.system_name_strindex])
    return java_system_names(names, sys_names)


def pprof_functions(symbolizer):
    profile_pb2 = _pprof_module()
    r = symbolizer.symbols.Pprof(symbols_pb2.ProfileQuery(), timeout=30)
    prof = profile_pb2.Profile.FromString(gzip.decompress(r.profile))
    st = prof.string_table
    return java_system_names([st[f.name] for f in prof.function],
                             [st[f.system_name] for f in prof.function])


def test_exited_jvm_is_named(start_sensor, tmp_path):
    """Also: the system names (the descriptor) in OTLP and pprof."""
    recv = Receiver()
    recv.start()
    symbolizer = Symbolizer(tmp_path, ["--otlp-endpoint", f"127.0.0.1:{recv.port}",
                                       "--otlp-insecure", "--otlp-interval", "1"])
    try:
        stacks, _ = run(symbolizer, start_sensor, tmp_path, 4)
        check_exited(stacks)
        check_system_names(pprof_functions(symbolizer))
        got = wait_for(lambda: (lambda f: f if all(any(name_of(n) == m for n in f)
                                                   for m in CHAINS["java"]) else None)(
                           otlp_functions(recv.snapshot())), 20, "the main chain in OTLP",
                       interval=0.5)
        check_system_names(got)
    finally:
        symbolizer.stop()
        recv.stop()


def check_exited(stacks):
    # Read after the JVM exited: every sample of the main thread with Java
    # frames is named from the records BPF copied while it ran.
    print("comms:", collections.Counter(c for c, _, _ in stacks))
    main = [(f, n) for c, f, n in stacks if c == "java" and java_names(f)]
    total = sum(n for _, n in main)
    ok = sum(n for f, n in main if has_chain(f, CHAINS["java"]))
    unknown = sum(n for c, f, n in stacks for x in f if "<unknown java frame>" in x)
    print(f"after exit: {ok} of {total} main-thread samples named, {unknown} unknown frames")
    assert total >= 20 and ok >= 0.95 * total and unknown == 0, (ok, total, unknown)
