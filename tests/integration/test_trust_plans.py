"""What a symbolizer sends the root sensor is bounded by the sensor (issue
27, hole 4; sensor/validate.h, docs/security.md "Symbolizer → sensor").
fake_symbolizer.py plays a compromised symbolizer against the real sensor
(real BPF, real uprobes, real processes of another user):

- a ProbePlan whose entry uprobe sits in the .rodata of a Go server run by
  `nobody` (a breakpoint there would overwrite that process's constant
  data with 0xCC), and one whose uprobe lies beyond the executable's size,
  are refused and counted; the process's .rodata bytes stay as in the file;
  a valid plan for another Go server is still attached (control);
- for each interpreter kind (CPython, HotSpot, V8, Ruby, PHP, Perl: one
  table, RUNTIMES, and one test over it), InterpreterConfigs with a field
  of the kind's limits table one past its bound, a layout a byte short or
  long or of another kind's size, an unknown kind, another format
  version, and a runtime offset outside the runtime's image or too close
  to its end for the walker's first read are refused and counted: a copy
  of the runtime (python3.11, java's libjvm.so, node, libruby, php8.2,
  perl) run by `nobody` gets no interp_procs entry, while the real
  symbolizer's config for another copy gives it its entry (control).

And the sensor checks who serves a unix: symbolizer socket (issue 27, hole
8; --symbolizer-uid): a listener run by `nobody` at the path the sensor is
pointed at gets connections but not one byte, and the sensor's log says
why; with --symbolizer-uid nobody the same listener gets the stream
(control), and the real symbolizer (listening as root, then user sonde) is
accepted by default."""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import SENSOR, SRC, Symbolizer, make_tmp, wait_for
import go_plan
from test_cpython_procs import cpython_map_id
from test_go_probes import Rig as GoProbesRig, build_gohttp
from test_interp_config import PYTHON, ConfigSensor

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


# ---- InterpreterConfigs: one table of runtimes, one test over it ----
#
# Per kind: the file whose config the symbolizer sends, how to run that
# runtime from a private copy of the file (a copy per role, so the valid
# and the bad configs name different file IDs), and the fields of its
# limits table (bpf/<runtime>.h) set one past a bound. Every kind also gets
# the cases of bad_configs() that every limits table shares. The valid
# config is the one the real symbolizer computes for the runtime's own
# file (a copy with a tail has the same offsets).

JDK = "/usr/lib/jvm/java-17-openjdk-amd64"
PERL = "/usr/bin/perl"
NODE = "/usr/bin/node"
RUBY = "/usr/bin/ruby3.1"
LIBRUBY = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1"
PHP = "/usr/bin/php8.2"
LIBJVM = os.path.join(JDK, "lib/server/libjvm.so")
TAILS = {"good": b"\1" * 4096, "bad": b"\2" * 4096}
IMAGE_SLACK = 2 << 20  # every kind's image_slack (SONDE_*_IMAGE_SLACK)


def python_target(tmp, role):
    py = copy_with_tail(PYTHON, tmp / f"python3.11-{role}", TAILS[role])
    return py, [str(py), "-c", "import time; time.sleep(600)"], dict(os.environ, PYTHONHOME="/usr")


def perl_target(tmp, role):
    perl = copy_with_tail(PERL, tmp / f"perl-{role}", TAILS[role])
    return perl, [str(perl), "-e", "sleep 600"], None


def java_target(tmp, role):
    """A JDK home of symlinks but for bin/java and lib/server/libjvm.so:
    the launcher takes its home from /proc/self/exe, the JVM its own
    path from libjvm.so's."""
    home = tmp / f"jdk-{role}"
    (home / "bin").mkdir(parents=True)
    (home / "lib" / "server").mkdir(parents=True)
    for sub, keep in (("", ("bin", "lib")), ("lib", ("server",)), ("lib/server", ("libjvm.so",))):
        for name in os.listdir(os.path.join(JDK, sub)):
            if name not in keep:
                os.symlink(os.path.join(JDK, sub, name), home / sub / name)
    shutil.copy2(os.path.join(JDK, "bin", "java"), home / "bin" / "java")
    jvm = copy_with_tail(LIBJVM, home / "lib/server/libjvm.so", TAILS[role])
    classes = tmp / "classes"
    if not os.path.exists(os.path.join(JDK, "bin", "javac")):
        pytest.skip("no javac")
    if not classes.exists():
        classes.mkdir()
        (classes / "Sleep.java").write_text(
            "public class Sleep { public static void main(String[] a) throws Exception "
            "{ Thread.sleep(600000); } }\n")
        subprocess.run([os.path.join(JDK, "bin", "javac"), "-d", str(classes),
                        str(classes / "Sleep.java")], check=True)
    return jvm, [str(home / "bin" / "java"), "-Xmx32m", "-XX:+UseSerialGC", "-cp", str(classes),
                 "Sleep"], None


def node_target(tmp, role):
    node = copy_with_tail(NODE, tmp / f"node-{role}", TAILS[role])
    return node, [str(node), "-e", "setTimeout(() => {}, 600000)"], None


def ruby_target(tmp, role):
    """Debian's ruby with its libruby from a directory of its own
    (LD_LIBRARY_PATH: ruby3.1 has no RUNPATH)."""
    lib = tmp / f"ruby-{role}"
    lib.mkdir()
    so = copy_with_tail(LIBRUBY, lib / os.path.basename(LIBRUBY), TAILS[role])
    return so, [RUBY, "-e", "sleep 600"], dict(os.environ, LD_LIBRARY_PATH=str(lib))


def php_target(tmp, role):
    php = copy_with_tail(PHP, tmp / f"php8.2-{role}", TAILS[role])
    return php, [str(php), "-r", "sleep(600);"], None


Runtime = collections.namedtuple("Runtime", "kind header struct file target fields")
# name -> Runtime: its kind, the header and struct of its layout, the
# file the config names, its target(tmp, role), and fields: (layout
# field, a value past its bound).
RUNTIMES = {
    "cpython": Runtime(1, "cpython.h", "sonde_cpython_offsets", PYTHON, python_target, [
        ("interp_threads_head", 60000),      # past any PyInterpreterState
        ("runtime_interpreters_head", 0xfff0),  # the root read, past _PyRuntime
        ("code_qualname", 0xfff0),           # past any code object
        ("minor", 9),                        # no 3.9 layout
        ("flags", 0x8000),                   # an unknown flag
        ("pad", 1)]),
    "hotspot": Runtime(2, "hotspot.h", "sonde_hotspot_offsets", LIBJVM, java_target, [
        ("major", 10), ("major", 22),        # JDK 11-21 only
        ("nmethod_dependencies", 1024),      # past any nmethod
        ("heap_log2_segment", 0xffff),       # past any CodeHeap
        ("frame_bcp_slot", 0),               # fp itself: no slot
        ("frame_sender_sp_slot", 17),        # past the interpreter frame
        ("cmethod_has_lines", 0), ("cmethod_has_lines", 0x81),
        ("nmethod_compile_id4", 128)]),      # past the blob header BPF reads
    "v8": Runtime(3, "v8.h", "sonde_v8_offsets", NODE, node_target, [
        ("blob_size", 0), ("blob_size", (64 << 20) + 1),  # the builtins' code range
        ("fp_function", 7), ("fp_function", 128),          # frame slots 8..127
        ("scope_fv_shift", 31),
        ("string_rep_mask", 16),
        ("type_sfi", 4096), ("type_code", 0),
        ("deopt_inlining", 32),                           # deoptimization data indices < 32
        ("bytecode_sizes", (1 << 30) + 1),                # the bytecode lengths' offset
        ("pad0", 1), ("pad1", 1)]),
    "ruby": Runtime(4, "ruby.h", "sonde_ruby_offsets", LIBRUBY, ruby_target, [
        ("major", 2), ("minor", 2),          # Ruby 3.1 only
        ("vm_ptr_off", 4096),                # the root read, past ruby_current_vm_ptr
        ("vm_mark_object_ary", 0xffff), ("ractor_running_ec", 4096),  # past rb_vm_t, rb_ractor_t
        ("cfp_size", 47), ("cfp_size", 97),  # the walker steps by it
        ("insn_info_size", 17),
        ("ids_index", 16),
        ("id_classpath", 0),
        ("pad", 1)]),
    "php": Runtime(5, "php.h", "sonde_php_offsets", PHP, php_target, [
        ("major", 7), ("minor", 3),          # PHP 8.2 only
        ("eg_current_execute_data", 4096),   # the root read, past executor_globals
        ("ex_prev", 1024), ("op_filename", 0xffff),
        ("flags", 0x2),                      # an unknown flag
        ("pad", 1)]),
    "perl": Runtime(6, "perl5.h", "sonde_perl_offsets", PERL, perl_target, [
        ("minor", 38),                       # no 5.38 layout
        ("interp_curstackinfo", 8192),       # past the interpreter struct
        ("cx_size", 300),                    # past any PERL_CONTEXT
        ("hek_key", 0xfff0),                 # past any HEK
        ("cvf_named", 0x4000),               # not CVf_NAMED
        ("pad", 1)]),
}


def layout_fields(kind):
    """{field: (offset, size)} of kind's offsets struct as its header
    declares it (__u8/__u16/__u32 fields, C's natural alignment), and the
    struct's size."""
    rt = next(rt for rt in RUNTIMES.values() if rt.kind == kind)
    src = (SRC / "bpf" / rt.header).read_text()
    body = re.search(r"struct %s \{(.*?)\n\};" % rt.struct, src, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields, off, align = {}, 0, 1
    for bits, names in re.findall(r"__u(8|16|32)\s+([^;]+);", body):
        size = int(bits) // 8
        align = max(align, size)
        for name in names.split(","):
            off = -(-off // size) * size
            fields[name.strip()] = (off, size)
            off += size
    return fields, -(-off // align) * align


def with_field(layout, kind, field, value):
    off, size = layout_fields(kind)[0][field]
    b = bytearray(layout)
    b[off:off + size] = value.to_bytes(size, "little")
    return bytes(b)


def bad_configs(name, valid, file_size):
    """The configs for the victim's file: valid with one thing out of
    bounds each."""
    rt = RUNTIMES[name]
    layout = bytes.fromhex(valid["layout"])
    other = next(o.kind for o in RUNTIMES.values() if layout_fields(o.kind)[1] != len(layout))
    bad = [dict(valid, layout=with_field(layout, rt.kind, f, v).hex()) for f, v in rt.fields]
    return bad + [
        dict(valid, layout=layout[:-1].hex()),                  # a byte short
        dict(valid, layout=(layout + b"\0").hex()),             # a byte long
        dict(valid, layout=bytes(layout_fields(other)[1]).hex()),  # another kind's size
        dict(valid, kind=99),                                   # no such kind
        dict(valid, format_version=valid["format_version"] + 1),
        dict(valid, runtime_offset=file_size + (64 << 20)),     # outside the image
        # Inside the image, but the walker's first read (8 bytes at the
        # root plus its offset) would end past it.
        dict(valid, runtime_offset=file_size + IMAGE_SLACK - 4),
    ]


@pytest.fixture(scope="module")
def real_configs():
    """kind -> the InterpreterConfig the real symbolizer sends for each
    installed runtime's own file."""
    present = [rt for rt in RUNTIMES.values() if os.path.exists(rt.file)]
    tmp = make_tmp("sonde-trust-real.")
    sym = Symbolizer(tmp)
    try:
        s = ConfigSensor(sym.address, {rt.file: open(rt.file, "rb").read() for rt in present})
        s.hello()
        for i, rt in enumerate(present):
            s.process(7000 + i, os.path.basename(rt.file), [rt.file])
        try:
            wait_for(lambda: all(s.ids[rt.file] in s.configs for rt in present), 90,
                     "the symbolizer's configs")
        except AssertionError:
            pass  # the test of a kind without one fails, the others run
        configs = {rt.kind: s.configs[s.ids[rt.file]][0] for rt in present
                   if s.ids[rt.file] in s.configs}
        s.close()
    finally:
        sym.stop()
        subprocess.run(["rm", "-rf", str(tmp)])
    return configs


def interp_entries(map_id):
    """pid -> (runtime_addr, kind, config bytes) of the interp_procs map
    (struct sonde_interp_proc)."""
    out = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", map_id],
                                    capture_output=True, text=True, check=True).stdout or "[]")
    ret = {}
    for e in out:
        val = bytes(int(b, 16) for b in e["value"])
        n = int.from_bytes(val[76:80], "little")
        ret[int.from_bytes(bytes(int(b, 16) for b in e["key"]), "little")] = (
            int.from_bytes(val[:8], "little"), int.from_bytes(val[72:76], "little"), val[8:8 + n])
    return ret


def exec_bias(pid, path):
    """Start minus file offset of path's first executable mapping in pid:
    the sensor's runtime address is this plus the runtime offset."""
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and f[5] == str(path) and "x" in f[1]:
            return int(f[0].split("-")[0], 16) - int(f[2], 16)
    raise AssertionError(f"{path} not mapped executable by {pid}")


@pytest.mark.parametrize("name", list(RUNTIMES))
def test_interpreter_configs_out_of_range_are_refused(name, real_configs):
    """For each kind: the bad configs for a copy of the runtime's file are
    refused and counted, and that copy, run by `nobody`, gets no
    interp_procs entry; the valid config for another copy, run by root,
    gives it its entry: the kind, the layout as sent, the runtime address
    at the runtime offset of its executable mapping (control)."""
    rt = RUNTIMES[name]
    if not os.path.exists(rt.file):
        pytest.skip(f"no {rt.file}")
    assert rt.kind in real_configs, f"the symbolizer sent no config for {rt.file}"
    c = real_configs[rt.kind]
    assert c.kind == rt.kind and not c.error, c
    assert len(c.layout) == layout_fields(rt.kind)[1], "bpf/%s does not parse" % rt.header
    valid = {"kind": c.kind, "format_version": c.format_version,
             "runtime_offset": c.runtime_offset, "layout": c.layout.hex()}
    tmp = make_tmp(f"sonde-trust-{name}.")
    good_file, good_argv, good_env = rt.target(tmp, "good")
    bad_file, bad_argv, bad_env = rt.target(tmp, "bad")
    bad = bad_configs(name, valid, os.path.getsize(bad_file))
    (tmp / "good.json").write_text(json.dumps({"path": str(good_file), "configs": [valid]}))
    (tmp / "bad.json").write_text(json.dumps({"path": str(bad_file), "configs": bad}))
    rig = Rig(tmp, ["--interp-config", str(tmp / "good.json"),
                    "--interp-config", str(tmp / "bad.json")])
    try:
        ok = rig.start(good_argv, env=good_env, stdout=subprocess.DEVNULL)
        victim = rig.start(bad_argv, env=bad_env, stdout=subprocess.DEVNULL, user="nobody",
                           group="nogroup")
        map_id = cpython_map_id(rig.sensor.pid)
        wait_for(lambda: ok.pid in interp_entries(map_id), 60, "the valid config's entry")
        addr, kind, config = interp_entries(map_id)[ok.pid]
        assert (kind, config.hex()) == (rt.kind, valid["layout"])
        assert addr == exec_bias(ok.pid, good_file) + c.runtime_offset, hex(addr)
        wait_for(lambda: victim.pid in interp_entries(map_id) or
                 rig.stats().get("interpreter_configs_refused", 0) >= len(bad), 60,
                 "the bad configs to be applied or refused")
        assert victim.poll() is None, "the victim exited: nothing was attacked"
        assert victim.pid not in interp_entries(map_id), interp_entries(map_id)[victim.pid]
        assert rig.stats()["interpreter_configs_refused"] == len(bad), rig.stats()
        assert "refusing the symbolizer's InterpreterConfig" in rig.log()
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
