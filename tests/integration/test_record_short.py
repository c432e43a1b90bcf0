"""sonde record on a short command: as many samples as its CPU time at the
rate, and whole stacks from its first milliseconds on.

The command waits for "go" until the sensor's first flush is over: that
flush sends the kernel's symbols, up to a second of the sensor's loop on a
loaded host, and a command started during it ran that long with its exec
unhandled, its image not scanned and without unwind tables. A program
built without frame pointers (sonde-unwind-workload) then has stacks that
stop at the leaf: with the command started as soon as the sensor was
connected, 25-100 % of a 1 s run's samples did on a 2-CPU VM at load 10-12,
and the assertion on rooted stacks below failed."""
import subprocess

from conftest import BUILD, SONDE, make_tmp, parse_folded

UNWIND_WORKLOAD = BUILD / "tests" / "workload" / "sonde-unwind-workload"
HZ = 199
MILLISECONDS = 1000
# The first user frame of a stack unwound to its root: the process's entry
# or a thread's start (ld.so's start-up frames count: they are rooted too).
ROOTS = {"_start", "__libc_start_main", "__libc_start_call_main", "clone", "clone3",
         "start_thread"}


def children_cpu_seconds(stat_text):
    """cutime + cstime of a /proc/PID/stat: the CPU time of the children
    it waited for, in seconds."""
    fields = stat_text.rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / 100.0


def record_short(milliseconds):
    """sonde record on the workload, run by a shell that writes its own
    /proc stat after waiting for it: the workload's CPU time."""
    tmp = make_tmp()
    out, stat = tmp / "short.folded", tmp / "shell.stat"
    script = f'"$0" {milliseconds} && cat /proc/$$/stat > {stat}'
    proc = subprocess.run([str(SONDE), "record", "-F", str(HZ), "-o", str(out), "--",
                           "sh", "-c", script, str(UNWIND_WORKLOAD)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return parse_folded(out.read_text()), children_cpu_seconds(stat.read_text())


def first_user_frame(frames):
    user = [f for f in frames[1:] if not f.endswith("_[k]")]
    return user[0] if user else None


def test_record_short_command_counts_and_whole_stacks():
    # The files analysed first (record shares the host's cache): a new
    # file's table waits for its analysis, which is not what this measures.
    record_short(100)
    stacks, cpu_s = record_short(MILLISECONDS)
    ours = [(frames, c) for frames, c in stacks if frames[0].startswith("sonde-unwind-w")]
    total = sum(c for _, c in ours)
    rooted = sum(c for frames, c in ours if first_user_frame(frames) in ROOTS)
    expected = cpu_s * HZ
    print(f"{total} samples of the workload for {cpu_s:.2f} s of CPU at {HZ} Hz "
          f"({expected:.0f} expected), {rooted} of them rooted")
    # A CPU's timer samples whatever runs on it: on a loaded host the count
    # of one process varies by a few percent around CPU time x Hz (perf's
    # per-task timer does not), never by 15.
    assert total >= 0.85 * expected, f"{total} samples, {expected:.0f} expected"
    assert rooted >= 0.9 * total, f"only {rooted} of {total} samples unwound to their root"
