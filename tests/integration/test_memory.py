"""The memory profile (docs/memory.md): sonde record --memory on
tests/workload/memory_workload.c, which grows its heap with sbrk() in
grow_heap() and maps anonymous memory in map_and_touch(), touches every
page and prints the bytes of each. The profile must give each function
its bytes within 10 %, and the pprof file and the OTLP export must have a
value in bytes that adds up to them."""
import re
import subprocess

import pytest

from conftest import BUILD, SONDE, Sensor, Symbolizer, make_tmp, parse_folded, wait_for
from test_otlp import Receiver, free_port, strings
from test_pprof import decode

MEMORY_WORKLOAD = BUILD / "tests" / "workload" / "sonde-memory-workload"
MIB_EACH = 128
PAUSE_MS = 1500  # the sensor reads the new process's mappings meanwhile
TOLERANCE = 0.10
FUNCTIONS = {"heap_bytes": "grow_heap", "map_bytes": "map_and_touch"}


def parse_reported(text):
    reported = {k: int(v) for k, v in re.findall(r"^(heap_bytes|map_bytes)=(\d+)$", text, re.M)}
    assert set(reported) == set(FUNCTIONS), text
    return reported


@pytest.fixture(scope="module")
def recorded():
    tmp = make_tmp()
    folded, pb = tmp / "memory.folded", tmp / "memory.pb.gz"
    proc = subprocess.run([str(SONDE), "record", "--memory", "--no-cpu", "-o", str(folded), "-o", str(pb),
                           "--", str(MEMORY_WORKLOAD), str(MIB_EACH), str(PAUSE_MS)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    reported = parse_reported(proc.stdout)
    return reported, parse_folded(folded.read_text()), pb


def bytes_under(stacks, function):
    """The bytes of the stacks with function in them (its inclusive weight)."""
    return sum(count for frames, count in stacks if function in frames)


@pytest.mark.parametrize("key", sorted(FUNCTIONS))
def test_memory_attributes_growth_to_the_function(recorded, key):
    reported, stacks, _ = recorded
    got = bytes_under(stacks, FUNCTIONS[key])
    want = reported[key]
    assert abs(got - want) <= TOLERANCE * want, (
        f"{FUNCTIONS[key]}: {got} bytes in the profile, the workload grew by {want}; "
        f"top stacks: {sorted(stacks, key=lambda s: -s[1])[:5]}")


def test_memory_profile_is_mostly_the_workloads_growth(recorded):
    """What else the process touched (ld.so, libc, stdio) is small: the
    weights are bytes, not samples."""
    reported, stacks, _ = recorded
    total = sum(c for _, c in stacks)
    assert total <= (1 + TOLERANCE) * sum(reported.values()), total


def test_memory_pprof_counts_bytes(recorded):
    reported, _, pb = recorded
    prof = decode(pb)
    units = [unit for _, unit in prof["sample_types"]]
    assert "bytes" in units, prof["sample_types"]
    col = units.index("bytes")
    total = sum(s["values"][col] for s in prof["samples"])
    assert abs(total - sum(reported.values())) <= TOLERANCE * sum(reported.values()), total


def otlp_bytes(reqs):
    """The values of the OTLP profiles whose sample type is memory/bytes,
    and the (type, unit) pairs seen."""
    total, types = 0, set()
    for req in reqs:
        for rp in req.resource_profiles:
            for sp in rp.scope_profiles:
                for p in sp.profiles:
                    vt = (strings(req)[p.sample_type.type_strindex], strings(req)[p.sample_type.unit_strindex])
                    types.add(vt)
                    if vt[1] == "bytes":
                        total += sum(sum(s.values) for s in p.samples)
    return total, types


def run_followed(tmp, sym, sensor_args, mib):
    """Runs the workload under a sensor that follows it from its exec (it
    waits in a shell until the sensor is up, then pauses PAUSE_MS after
    the exec so that the sensor has the new binary's unwind tables before
    its first brk); returns what it reported and the sensor, still
    running."""
    out = tmp / "workload.out"
    proc = subprocess.Popen(["sh", "-c", 'read go; exec "$@"', "sh", str(MEMORY_WORKLOAD), str(mib), str(PAUSE_MS)],
                            stdin=subprocess.PIPE, stdout=open(out, "w"), text=True)
    sensor = Sensor(tmp, sym.address, ["--pid", str(proc.pid), "--no-cpu", *sensor_args])
    try:
        wait_for(lambda: sym.status().sensors_connected >= 1, 15, "the sensor to connect")
        wait_for(lambda: sym.status().unwind_tables_loaded >= 2, 15, "the shell's tables to load")
        proc.stdin.write("go\n")
        proc.stdin.close()
        assert proc.wait(120) == 0
    except BaseException:
        proc.kill()
        proc.wait()
        sensor.stop()
        raise
    return parse_reported(out.read_text()), sensor


def test_memory_reserved_counts_brk_and_mmap():
    """--memory-reserved: the bytes of brk growth and of the private
    anonymous maps, every call, by stack."""
    tmp = make_tmp()
    sym = Symbolizer(tmp)
    sensor = None
    try:
        reported, sensor = run_followed(tmp, sym, ["--memory-reserved"], 32)

        def folded():
            f = subprocess.run([str(SONDE), "folded", "--symbolizer", sym.address, "--type", "memory"],
                               capture_output=True, text=True, timeout=60)
            stacks = parse_folded(f.stdout)
            got = {k: bytes_under(stacks, fn) for k, fn in FUNCTIONS.items()}
            return got if all(abs(got[k] - reported[k]) <= TOLERANCE * reported[k] for k in FUNCTIONS) else None
        try:
            wait_for(folded, 60, "the reserved bytes of grow_heap and map_and_touch", interval=1)
        except AssertionError:
            f = subprocess.run([str(SONDE), "folded", "--symbolizer", sym.address, "--type", "memory"],
                               capture_output=True, text=True, timeout=60)
            raise AssertionError(f"reported {reported}; folded: {f.stdout[-3000:]} {f.stderr[-1000:]}")
    finally:
        if sensor:
            sensor.stop()
        sym.stop()


def test_memory_otlp_carries_bytes():
    tmp = make_tmp()
    recv = Receiver(free_port())
    recv.start()
    sym = Symbolizer(tmp, ["--otlp-endpoint", f"127.0.0.1:{recv.port}", "--otlp-insecure",
                           "--otlp-interval", "2"])
    sensor = None
    try:
        reported, sensor = run_followed(tmp, sym, ["--memory"], 64)
        want = sum(reported.values())

        def arrived():
            got, _ = otlp_bytes(recv.snapshot())
            return got if abs(got - want) <= TOLERANCE * want else None
        try:
            wait_for(arrived, 30, "the memory profile's bytes in OTLP", interval=1)
        except AssertionError:
            raise AssertionError(f"OTLP: {otlp_bytes(recv.snapshot())}, the workload grew by {want}; "
                                 f"{sym.logtext()}")
        _, types = otlp_bytes(recv.snapshot())
        assert ("memory", "bytes") in types, types
        assert not recv.bad
    finally:
        if sensor:
            sensor.stop()
        sym.stop()
        recv.stop()
