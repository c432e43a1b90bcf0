"""Stacks a sensor first sees while its symbolizer is down are stored and
named by the next one: the sensor follows a shell; the symbolizer is killed; the
shell then runs the frame-pointer workload (a new process, new files, new
stacks, none of them ever told to a symbolizer); a new symbolizer (a fresh
cache, which never saw the workload) is started, and the workload's
samples from while it was down are stored with the named chains. About 20 s."""
import os
import signal
import subprocess
import time

from conftest import WORKLOAD, Sensor, Symbolizer, contains_chain, make_tmp, symbols_pb2, wait_for

HZ = 99
CHAINS = [
    ["main", "run_main_thread", "chain_a", "a_middle", "leaf_a_compute"],
    ["thread_b", "b_middle", "leaf_b_hash"],
    ["main", "run_main_thread", "chain_c", "work_lib_entry", "work_lib_leaf"],
]


def workload_stacks(sym):
    r = sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=30)
    return [s for s in r.stacks if s.comm.startswith("sonde-work")]


def test_stacks_seen_while_disconnected_are_named_after_restart():
    tmp = make_tmp()
    shell = subprocess.Popen(["sh", "-c", f"read go; exec {WORKLOAD} 3"], stdin=subprocess.PIPE, text=True,
                             stdout=subprocess.DEVNULL)
    sym = Symbolizer(tmp)
    sensor = Sensor(tmp, sym.address, ["--pid", str(shell.pid), "--frequency", str(HZ)])
    try:
        wait_for(lambda: sym.status().sensors_connected == 1, 15, "the sensor to connect")
        sym.proc.send_signal(signal.SIGKILL)
        sym.proc.wait()
        sym.stop()
        started = time.monotonic()
        shell.stdin.write("go\n")
        shell.stdin.close()
        # Its CPU time says how many samples to expect: the stored ones
        # were 50-95 % of CPU time x HZ here with a symbolizer up all
        # along (cpu-clock on a shared VM); none would be if the samples
        # taken while it was down were lost.
        _, status, usage = os.wait4(shell.pid, 0)
        shell.returncode = os.waitstatus_to_exitcode(status)
        assert shell.returncode == 0
        ran = time.monotonic() - started
        want = 0.25 * HZ * (usage.ru_utime + usage.ru_stime)
        sym = Symbolizer(tmp)  # same cache, which never saw the workload
        wait_for(lambda: sym.status().sensors_connected == 1, 15, "the sensor to reconnect")
        counted = {}

        def stored():
            mine = workload_stacks(sym)
            counted["total"] = sum(s.count for s in mine)
            counted["named"] = sum(s.count for s in mine if any(contains_chain(list(s.frames), c)
                                                                for c in CHAINS))
            counted["sample"] = [";".join(s.frames) for s in mine[:5]]
            return counted["total"] >= want and counted["named"] >= 0.9 * counted["total"]
        try:
            wait_for(stored, 30, "the workload's named stacks", interval=1.0)
        except AssertionError:
            pass  # said below
        print(f"workload ran {ran:.1f} s while no symbolizer was up; after the restart "
              f"{counted.get('named')} of {counted.get('total')} of its samples have a named chain")
        print(f"workload: {usage.ru_utime + usage.ru_stime:.2f} s of CPU time, {want:.0f} samples "
              f"expected at least")
        assert counted["total"] >= want, counted
        assert counted["named"] >= 0.9 * counted["total"], counted
        assert sensor.proc.poll() is None, sensor.logtext()
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
        sensor.stop()
        sym.stop()
