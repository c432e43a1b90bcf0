"""A real sensor reconnecting to a restarted symbolizer (issue 33): its
Hello lists the unwind tables still in its BPF maps, the new symbolizer
(same cache) sends none of those again, and the profile after the restart
is still right (complete stacks with the workload's named chains: the
tables the sensor kept are the ones its BPF walker uses)."""
import re
import signal
import subprocess
import time

from conftest import BUILD, Sensor, Symbolizer, contains_chain, make_tmp, symbols_pb2, wait_for

UNWIND_WORKLOAD = BUILD / "tests" / "workload" / "sonde-unwind-workload"
CHAINS = [
    ["main", "run_main", "chain_lib", "unwind_lib_entry", "unwind_lib_middle", "unwind_lib_leaf"],
    ["main", "run_main", "recurse", "recurse"],
    ["thread_y", "y_middle", "y_leaf", "spin"],
]
SENT = re.compile(r"sensor \S+: (\d+) unwind tables sent \((\d+) rows\), (\d+) not sent")


def named_share(sym, pid, since):
    r = sym.symbols.Folded(symbols_pb2.ProfileQuery(since_unix_s=since, pid=pid), timeout=30)
    mine = [s for s in r.stacks if s.pid == pid]
    total = sum(s.count for s in mine)
    named = sum(s.count for s in mine if any(contains_chain(list(s.frames), c) for c in CHAINS))
    return named, total


def test_reconnect_is_not_sent_the_tables_it_has():
    tmp = make_tmp()
    work = subprocess.Popen([str(UNWIND_WORKLOAD), "60000"])
    sym = Symbolizer(tmp)
    sensor = Sensor(tmp, sym.address, ["--pid", str(work.pid), "--frequency", "99"])
    try:
        wait_for(lambda: sym.status().unwind_tables_loaded >= 3, 30, "the workload's tables")
        time.sleep(2)
        want = sym.status().unwind_tables_loaded
        sym.proc.send_signal(signal.SIGKILL)
        sym.proc.wait()
        sym.stop()
        sym = Symbolizer(tmp)  # same cache
        wait_for(lambda: sym.status().sensors_connected == 1, 15, "the sensor to reconnect")
        since = int(time.time()) + 1
        time.sleep(1)
        wait_for(lambda: named_share(sym, work.pid, since)[1] >= 300, 30,
                 "300 samples after the restart")
        listed = re.search(r"Hello lists (\d+) unwind tables", sensor.logtext())
        assert listed, sensor.logtext()
        assert sensor.stop() == 0, sensor.logtext()
        wait_for(lambda: SENT.search(sym.logtext()), 15, "the session's table count")
        sent, rows, skipped = map(int, SENT.search(sym.logtext()).groups())
        named, total = named_share(sym, work.pid, since)
        print(f"{want} tables loaded before the kill; the Hello listed {listed.group(1)}; "
              f"after the restart {sent} tables sent ({rows} rows), {skipped} not sent; "
              f"{named} of {total} samples after it have a named chain")
        assert int(listed.group(1)) >= want
        assert skipped >= want, f"only {skipped} of {want} tables were not sent again"
        assert rows == 0, f"{rows} rows of tables the sensor had were sent again"
        assert named >= 0.9 * total, f"{named} of {total} samples have a named chain"
    finally:
        work.kill()
        work.wait()
        sensor.stop()
        sym.stop()
