"""What a symbolizer sends the root sensor is bounded by the sensor (issue
27, hole 4; sensor/validate.h, docs/security.md "Symbolizer → sensor").
fake_symbolizer.py plays a compromised symbolizer against the real sensor
(real BPF, real uprobes, real processes of another user):

- a ProbePlan whose entry uprobe sits in the .rodata of a Go server run by
  `nobody` (a breakpoint there would overwrite that process's constant
  data with 0xCC), and one whose uprobe lies beyond the executable's size,
  are refused and counted; the process's .rodata bytes stay as in the file;
  a valid plan for another Go server is still attached (control);
- InterpreterConfigs with a wrong layout size, an out-of-range struct
  offset, an unknown kind, another format version and a runtime offset far
  outside the interpreter's image are refused and counted: the python3.11
  run by `nobody` gets no interp_procs entry, while a valid config for
  another python3.11 gives its entry the right _PyRuntime address
  (control).

And the sensor checks who serves a unix: symbolizer socket (issue 27, hole
8; --symbolizer-uid): a listener run by `nobody` at the path the sensor is
pointed at gets connections but not one byte, and the sensor's log says
why; with --symbolizer-uid nobody the same listener gets the stream
(control), and the real symbolizer (listening as root, then user sonde) is
accepted by default."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import SENSOR, SRC, make_tmp, wait_for
import go_plan
from test_cpython_procs import cpython_map_id, entries, load_base, nm_value
from test_go_probes import Rig as GoProbesRig, build_gohttp
from test_interp_config import OFFSETS, PYTHON, binutils_runtime_offset

FAKE = SRC / "tests" / "integration" / "fake_symbolizer.py"


@pytest.fixture(scope="module")
def gohttp():
    yield from build_gohttp("sonde-trust-gohttp.")


class Rig(GoProbesRig):
    """fake_symbolizer.py with the given plans/configs, and the real sensor
    connected to it; processes the test starts are killed by pid at the end
    (start() and stop() are test_go_probes.Rig's)."""

    def __init__(self, tmp, fake_args, sensor_args=()):
        self.tmp = tmp
        self.rec = tmp / "records.jsonl"
        sock = tmp / "fake.sock"
        self.fake_log = open(tmp / "fake.log", "w")
        self.fake = subprocess.Popen([sys.executable, str(FAKE), "--listen", f"unix:{sock}",
                                      "--quiet", "--reads", "0", "--record", str(self.rec),
                                      *fake_args], stdout=self.fake_log, stderr=subprocess.STDOUT)
        wait_for(sock.exists, 30, "the fake symbolizer to listen")
        self.sensor_log = tmp / "sensor.log"
        self.sensor = subprocess.Popen([str(SENSOR), "--symbolizer", f"unix:{sock}", "--unwind-rows",
                                        "0", "--flush-ms", "200", *sensor_args],
                                       stdout=open(self.sensor_log, "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: "sampling" in self.log(), 30, "the sensor to start")
        self.procs = []

    def log(self):
        if self.sensor.poll() is not None:
            raise AssertionError(f"sensor exited {self.sensor.returncode}: "
                                 f"{self.sensor_log.read_text()[-3000:]}")
        return self.sensor_log.read_text()

    def stats(self):
        """The sensor's last SensorStats (as the fake recorded them), or {}."""
        if not self.rec.exists():
            return {}
        st = [json.loads(line) for line in self.rec.read_text().splitlines()]
        st = [o for o in st if o["kind"] == "stats"]
        return st[-1] if st else {}


def copy_with_tail(src, dst, tail):
    """src with tail appended: the same program, another file ID."""
    shutil.copyfile(src, dst)
    with open(dst, "ab") as f:
        f.write(tail)
    os.chmod(dst, 0o755)
    return dst


def rodata_zeros(binary, n=16):
    """(file offset, vaddr) of n zero bytes inside .rodata: bytes a uprobe
    there would turn into 0xCC in the process (and `add %al,(%rax)`, an
    instruction the kernel's uprobe decoder takes)."""
    for line in subprocess.run(["readelf", "-SW", str(binary)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 5 and f[1] == ".rodata":
            addr, off, size = int(f[3], 16), int(f[4], 16), int(f[5], 16)
            data = open(binary, "rb").read()[off:off + size]
            i = data.find(b"\0" * n, 4096)
            assert i > 0, "no zeros in .rodata"
            return off + i, addr + i
    raise AssertionError(f"no .rodata in {binary}")


def proc_bytes(pid, addr, n):
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(addr)
        return f.read(n)


def test_probe_plan_offsets_outside_the_text_are_refused(gohttp):
    tmp = make_tmp("sonde-trust-plans.")
    victim = copy_with_tail(gohttp, tmp / "victim-gohttp", b"\1" * 4096)
    beyond = copy_with_tail(gohttp, tmp / "beyond-gohttp", b"\2" * 4096)
    good = go_plan.plan_for(str(gohttp), str(gohttp))
    # The same program before its tail: the same offsets hold in the copies.
    bad_data = json.loads(json.dumps(good))
    bad_data["path"] = str(victim)
    data_off, data_addr = rodata_zeros(victim)
    server = next(ps for ps in bad_data["probes"] if ps["probe"] == "go_http_server")
    assert server["attaches"][0]["program"] == "server_enter"
    server["attaches"][0]["file_offset"] = data_off
    bad_beyond = json.loads(json.dumps(good))
    bad_beyond["path"] = str(beyond)
    client = next(ps for ps in bad_beyond["probes"] if ps["probe"] == "go_http_client")
    client["attaches"][0]["file_offset"] = os.path.getsize(beyond) + 0x10000
    args = []
    for name, plan in (("good", good), ("data", bad_data), ("beyond", bad_beyond)):
        (tmp / f"{name}.json").write_text(json.dumps(plan))
        args += ["--probe-plan", str(tmp / f"{name}.json")]

    rig = Rig(tmp, args, ["--go-probes"])
    try:
        ok = rig.start([str(gohttp), "server"], stdout=subprocess.PIPE, text=True)
        int(ok.stdout.readline())
        bad = rig.start([str(victim), "server"], stdout=subprocess.PIPE, text=True,
                        user="nobody", group="nogroup")
        int(bad.stdout.readline())
        far = rig.start([str(beyond), "server"], stdout=subprocess.PIPE, text=True,
                        user="nobody", group="nogroup")
        int(far.stdout.readline())
        want = proc_bytes(bad.pid, data_addr, 16)
        assert want == b"\0" * 16

        # Control: the valid plan is loaded and attached.
        wait_for(lambda: f"pid {ok.pid}: go_http_server attached" in rig.log(), 30,
                 "the valid plan's server probe")
        wait_for(lambda: f"pid {ok.pid}: go_http_client attached" in rig.log(), 30,
                 "the valid plan's client probe")

        def settled():
            attacked = (f"pid {bad.pid}: go_http_server attached" in rig.log() or
                        proc_bytes(bad.pid, data_addr, 16) != want)
            return attacked or rig.stats().get("probe_plans_refused", 0) >= 2
        wait_for(settled, 30, "the bad plans to be applied or refused")
        got = proc_bytes(bad.pid, data_addr, 16)
        assert got == want, f"a uprobe went into nobody's .rodata: {got.hex()}"
        log = rig.log()
        for pid in (bad.pid, far.pid):
            assert f"pid {pid}: go_http" not in log, log[-3000:]
        assert "refusing the symbolizer's plan" in log
        assert "outside the file's executable mappings" in log
        st = wait_for(lambda: rig.stats().get("probe_plans_refused", 0) >= 2 and rig.stats(), 10,
                      "SensorStats counting the refusals")
        assert st["probe_plans_refused"] == 2, st
        # Only the valid plan's file has objects loaded.
        assert st["go_probe_files"] == 1 and st["go_probe_links"] > 0, st
    finally:
        rig.stop()
        subprocess.run(["rm", "-rf", str(tmp)])


LAYOUT_311 = dict(major=3, minor=11, runtime_interpreters_head=40, interp_threads_head=16,
                  tstate_next=8, tstate_native_thread_id=160, tstate_cframe=56,
                  cframe_current_frame=8, frame_code=32, frame_previous=48, frame_prev_instr=56,
                  frame_owner=69, code_qualname=128, code_filename=112, code_firstlineno=72,
                  code_linetable=136, code_code_adaptive=184, ascii_data=48, bytes_data=32,
                  var_size=16, frame_is_entry=68, flags=0, pad=0)
FIELDS = list(LAYOUT_311)  # in struct sonde_cpython_offsets order


def layout(**change):
    v = dict(LAYOUT_311, **change)
    return OFFSETS.pack(*(v[k] for k in FIELDS)).hex()


@pytest.mark.skipif(not os.path.exists(PYTHON), reason="no python3.11")
def test_interpreter_configs_out_of_range_are_refused():
    tmp = make_tmp("sonde-trust-configs.")
    good_py = copy_with_tail(PYTHON, tmp / "python3.11-good", b"\1" * 4096)
    bad_py = copy_with_tail(PYTHON, tmp / "python3.11-bad", b"\2" * 4096)
    ro = binutils_runtime_offset(PYTHON)
    valid = {"runtime_offset": ro, "layout": layout()}
    bad = [
        dict(valid, layout=layout()[:-2]),                        # 43 bytes
        dict(valid, layout=layout(interp_threads_head=60000)),    # past any PyInterpreterState
        dict(valid, layout=layout(code_qualname=0xfff0)),         # past any code object
        dict(valid, kind=99),                                     # no such kind
        dict(valid, kind=5),                                      # PHP's: not its config size
        dict(valid, format_version=3),
        dict(valid, runtime_offset=os.path.getsize(bad_py) + (64 << 20)),  # outside the image
    ]
    (tmp / "good.json").write_text(json.dumps({"path": str(good_py), "configs": [valid]}))
    (tmp / "bad.json").write_text(json.dumps({"path": str(bad_py), "configs": bad}))
    rig = Rig(tmp, ["--interp-config", str(tmp / "good.json"),
                    "--interp-config", str(tmp / "bad.json")])
    try:
        env = dict(os.environ, PYTHONHOME="/usr")
        ok = rig.start([str(good_py), "-c", "import time; time.sleep(600)"], env=env)
        victim = rig.start([str(bad_py), "-c", "import time; time.sleep(600)"], env=env,
                           user="nobody", group="nogroup")
        map_id = cpython_map_id(rig.sensor.pid)
        # Control: the valid config makes the entry, at _PyRuntime (not PIE).
        wait_for(lambda: ok.pid in entries(map_id), 30, "the valid config's entry")
        assert entries(map_id)[ok.pid] == (nm_value(PYTHON, "_PyRuntime"), 3, 11, 160)
        wait_for(lambda: victim.pid in entries(map_id) or
                 rig.stats().get("interpreter_configs_refused", 0) >= len(bad), 30,
                 "the bad configs to be applied or refused")
        assert victim.pid not in entries(map_id), entries(map_id)[victim.pid]
        assert rig.stats()["interpreter_configs_refused"] == len(bad), rig.stats()
        assert "refusing the symbolizer's InterpreterConfig" in rig.log()
    finally:
        rig.stop()
        subprocess.run(["rm", "-rf", str(tmp)])


PERL = "/usr/bin/perl"
PERL_FIELDS = ["major", "minor", "interp_curcop", "interp_curstackinfo", "si_cxstack", "si_prev",
               "si_cxix", "cx_size", "cx_typeoff", "cx_oldcop", "cx_sub_cv", "cx_retop",
               "cop_line", "cop_file", "sv_any", "xcv_stash", "xcv_gv", "xcv_file", "xcv_flags",
               "xgv_namehek", "xgv_stash", "hv_aux_name", "hv_aux_name_count", "hek_len",
               "hek_key", "cvf_named", "interp_op", "pad"]  # struct sonde_perl_offsets
PERL_536 = dict(zip(PERL_FIELDS, [5, 36, 208, 224, 8, 16, 32, 104, 0, 16, 72, 48, 36, 48, 0, 32,
                                  56, 64, 92, 32, 40, 32, 60, 4, 8, 0x8000, 8, 0]))


def perl_layout(**change):
    v = dict(PERL_536, **change)
    return __import__("struct").pack("<BB26H", *(v[k] for k in PERL_FIELDS)).hex()


def perl_runtime_offset(path):
    """PL_curinterp's address (nm -D) in the executable segment's file
    coordinates (readelf -lW)."""
    vaddr = nm_value(path, "PL_curinterp")
    for line in subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD" and " R E " in line:
            return vaddr - int(f[2], 16) + int(f[1], 16)
    raise AssertionError("no executable segment")


@pytest.mark.skipif(not os.path.exists(PERL), reason="no perl")
def test_perl_configs_out_of_range_are_refused():
    """As above for kind Perl (6): the sensor checks its limits table."""
    tmp = make_tmp("sonde-trust-perl.")
    good = copy_with_tail(PERL, tmp / "perl-good", b"\1" * 4096)
    bad_perl = copy_with_tail(PERL, tmp / "perl-bad", b"\2" * 4096)
    valid = {"kind": 6, "format_version": 1, "runtime_offset": perl_runtime_offset(PERL),
             "layout": perl_layout()}
    bad = [
        dict(valid, layout=perl_layout()[:-2]),               # 53 bytes
        dict(valid, layout=perl_layout(minor=38)),            # no 5.38 layout
        dict(valid, layout=perl_layout(cx_size=300)),         # past any PERL_CONTEXT
        dict(valid, layout=perl_layout(hek_key=0xfff0)),      # past any HEK
        dict(valid, layout=perl_layout(cvf_named=0x4000)),    # not CVf_NAMED
        dict(valid, runtime_offset=os.path.getsize(bad_perl) + (64 << 20)),  # outside the image
    ]
    (tmp / "good.json").write_text(json.dumps({"path": str(good), "configs": [valid]}))
    (tmp / "bad.json").write_text(json.dumps({"path": str(bad_perl), "configs": bad}))
    rig = Rig(tmp, ["--interp-config", str(tmp / "good.json"),
                    "--interp-config", str(tmp / "bad.json")])
    try:
        ok = rig.start([str(good), "-e", "sleep 600"])
        victim = rig.start([str(bad_perl), "-e", "sleep 600"], user="nobody", group="nogroup")
        map_id = cpython_map_id(rig.sensor.pid)
        # Control: the valid config makes the entry, at PL_curinterp of
        # this PIE's load address.
        wait_for(lambda: ok.pid in entries(map_id), 30, "the valid config's entry")
        base = load_base(ok.pid, str(good))
        assert entries(map_id)[ok.pid][:3] == (base + nm_value(PERL, "PL_curinterp"), 5, 36)
        wait_for(lambda: victim.pid in entries(map_id) or
                 rig.stats().get("interpreter_configs_refused", 0) >= len(bad), 30,
                 "the bad configs to be applied or refused")
        assert victim.pid not in entries(map_id), entries(map_id)[victim.pid]
        assert rig.stats()["interpreter_configs_refused"] == len(bad), rig.stats()
    finally:
        rig.stop()
        subprocess.run(["rm", "-rf", str(tmp)])


# A plain Unix listener (run as nobody): logs each connection and each
# chunk of bytes that arrives on it.
LISTENER = r"""
import os, socket, sys, threading
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(16)

def note(text):
    with open(log, "a") as f:
        f.write(text + "\n")

def serve(c):
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            note(f"bytes {len(b)}")
    except OSError:
        pass
    c.close()

while True:
    c, _ = s.accept()
    note("conn")
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def test_sensor_refuses_a_symbolizer_socket_served_by_another_user(symbolizer, start_sensor):
    d = make_tmp("sonde-trust-peer.")
    os.chown(d, 65534, 65534)
    path, log = d / "symbolizer.sock", d / "listener.log"
    fake = subprocess.Popen([sys.executable, "-c", LISTENER, str(path), str(log)], user="nobody",
                            group="nogroup")
    try:
        wait_for(path.exists, 15, "nobody's listener")
        sensor = start_sensor(f"unix:{path}")
        wait_for(lambda: log.exists() and "conn" in log.read_text(), 30,
                 "the sensor to connect to nobody's socket")
        time.sleep(3)  # the sensor retries meanwhile
        assert "bytes" not in log.read_text(), "the sensor sent data to nobody's listener"
        text = wait_for(lambda: "refusing the symbolizer at" in sensor.logtext() and
                        sensor.logtext(), 10, "the sensor to say why")
        assert "served by uid 65534" in text and "--symbolizer-uid" in text, text
        assert "connected to the symbolizer" not in text
        # (Stopped by its pid: with no symbolizer, a clean stop waits 15 s
        # for one to send its last samples to.)
        sensor.proc.kill()
        sensor.stop()

        # Control: told to accept nobody, the sensor streams to it.
        sensor = start_sensor(f"unix:{path}", "--symbolizer-uid", "nobody")
        wait_for(lambda: "bytes" in log.read_text(), 30, "the sensor's bytes at nobody's listener")
        assert "refusing the symbolizer" not in sensor.logtext()
        sensor.proc.kill()
        sensor.stop()

        # Control: the real symbolizer is accepted by default.
        sensor = start_sensor(symbolizer.address)
        wait_for(lambda: symbolizer.status().sensors_connected == 1, 30,
                 "the sensor to connect to the real symbolizer")
        assert "refusing the symbolizer" not in sensor.logtext()
    finally:
        fake.kill()
        fake.wait()
        subprocess.run(["rm", "-rf", str(d)])
