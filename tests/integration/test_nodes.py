"""Node identity (issue 33): two sensors, each in a network namespace the
test makes (ip netns, one veth pair each to the symbolizer's namespace, so
their traffic runs only on that pair and their own loopback), stream over
TCP with mutual TLS to one symbolizer under their own --node-name, both
following the same workload process: the same pid arrives from two nodes,
as pids collide across a fleet. Top --node picks one node's samples,
the unfiltered answers keep the nodes apart (per-node entries, stacks and
Status processes), OTLP resources carry each node's host.name, and the
per-node totals add up to the whole: nothing is merged."""
import json
import os
import subprocess
import time

import pytest

from conftest import SENSOR, SONDE, WORKLOAD, Symbolizer, symbols_pb2, wait_for
import test_otlp as to
import test_security as ts

HZ = 49
NODES = ("node-a", "node-b")
# Addresses of the two veth pairs: .1 in the symbolizer's namespace, .2
# in the sensor's. A /30 each, from the benchmarking range (RFC 2544).
NETS = {"node-a": ("198.18.233.1", "198.18.233.2"), "node-b": ("198.18.233.5", "198.18.233.6")}


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Namespaces:
    """Per node: a network namespace sonde-test-<pid>-<i> with a veth
    pair to the root namespace. Removed (with the pairs) on close."""

    def __init__(self):
        self.names = {}
        tag = os.getpid() % 100000
        try:
            for i, node in enumerate(NODES):
                ns, outer, inner = f"sonde-t{tag}-{i}", f"sdt{tag}o{i}", f"sdt{tag}i{i}"
                here, there = NETS[node]
                _ip("netns", "add", ns)
                self.names[node] = (ns, outer)
                _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
                _ip("link", "set", inner, "netns", ns)
                _ip("addr", "add", f"{here}/30", "dev", outer)
                _ip("link", "set", outer, "up")
                _ip("-n", ns, "addr", "add", f"{there}/30", "dev", inner)
                _ip("-n", ns, "link", "set", inner, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def close(self):
        for ns, outer in self.names.values():
            subprocess.run(["ip", "link", "del", outer], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _pki(d):
    d.mkdir()
    ts._make_ca(d, "sonde-ca")
    ips = ",".join(f"IP:{NETS[n][0]}" for n in NODES)
    ts._make_cert(d, "sonde-ca", "symbolizer", f"{ips},DNS:localhost", client=False)
    ts._make_cert(d, "sonde-ca", "sonde-sensor", "DNS:sonde-sensor", client=True)
    for f in d.iterdir():
        f.chmod(0o644)
    return d


def _sensor(tmp, ns, node, port, pki, pid):
    here = NETS[node][0]
    # node-a opts in to command lines, node-b does not.
    extra = ["--command-line"] if node == "node-a" else []
    log = open(tmp / f"sensor-{node}.log", "w")
    proc = subprocess.Popen(["ip", "netns", "exec", ns, str(SENSOR), "--symbolizer", f"tcp:{here}:{port}",
                             "--node-name", node, "--pid", str(pid), "--frequency", str(HZ),
                             "--flush-ms", "1000", "--tls-ca", str(pki / "sonde-ca.crt"),
                             "--tls-cert", str(pki / "sonde-sensor.crt"),
                             "--tls-key", str(pki / "sonde-sensor.key"),
                             "--tls-server-name", "localhost", *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, log


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def _resources(reqs, pid, cmdlines=None):
    """{host.name: samples} over the OTLP resources of pid; with cmdlines
    (a dict), {host.name: set of process.command_line} there too."""
    out = {}
    for req in reqs:
        for rp in req.resource_profiles:
            res = {kv.key: kv.value for kv in rp.resource.attributes}
            if res["process.pid"].int_value != pid:
                continue
            host = res["host.name"].string_value
            assert len(res["host.id"].string_value) == 32, res
            if cmdlines is not None:
                cmdlines.setdefault(host, set()).add(
                    res["process.command_line"].string_value if "process.command_line" in res else None)
            n = sum(sum(s.values) for sp in rp.scope_profiles for p in sp.profiles for s in p.samples)
            out[host] = out.get(host, 0) + n
    return out


def test_two_nodes_same_pid_stay_apart(tmp_path):
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        pytest.skip("no ip netns")
    pki = _pki(tmp_path / "pki")
    recv = to.Receiver(to.free_port())
    recv.start()
    port = ts._free_port()
    listen = []
    for n in NODES:
        listen += ["--listen", f"tcp:{NETS[n][0]}:{port}"]
    nss = Namespaces()
    sym = work = None
    sensors = []
    try:
        sym = Symbolizer(tmp_path, extra=[*listen, "--tls-cert", str(pki / "symbolizer.crt"),
                                          "--tls-key", str(pki / "symbolizer.key"),
                                          "--tls-client-ca", str(pki / "sonde-ca.crt"),
                                          "--otlp-endpoint", f"127.0.0.1:{recv.port}",
                                          "--otlp-insecure", "--otlp-interval", "1"])
        work = subprocess.Popen([str(WORKLOAD), "600"], stdout=subprocess.DEVNULL)
        for node in NODES:
            sensors.append(_sensor(tmp_path, nss.names[node][0], node, port, pki, work.pid))

        def logs():
            return "\n".join((tmp_path / f"sensor-{n}.log").read_text()[-2000:] for n in NODES)

        def node_top(node):
            return sym.symbols.Top(symbols_pb2.ProfileQuery(pid=work.pid, node=node), timeout=30)
        for node in NODES:
            wait_for(lambda: node_top(node).total_samples >= 20, 90,
                     f"{node}'s samples over TCP+mTLS: {logs()}\n{sym.logtext()}")
        st = sym.status()
        assert [(n.node, n.sensors) for n in st.nodes] == [(n, 1) for n in NODES], st.nodes
        assert {n.host_name for n in st.nodes} == {os.uname().nodename}
        assert {(p.node, p.pid) for p in st.processes if p.pid == work.pid} == \
            {(n, work.pid) for n in NODES}
        for n in NODES:
            one = sym.symbols.Status(symbols_pb2.StatusRequest(node=n), timeout=10)
            assert one.processes and {p.node for p in one.processes} == {n}
        for _, (proc, _) in zip(NODES, sensors):
            assert _stop(proc) == 0
        # Whatever the sensors sent is stored and exported before this.
        wait_for(lambda: sym.status().samples_waiting == 0, 30, "waiting samples")
        time.sleep(3)

        whole = sym.symbols.Top(symbols_pb2.ProfileQuery(pid=work.pid), timeout=30)
        per = {n: node_top(n) for n in NODES}
        # Each node's view: its own samples, every function once.
        for n, top in per.items():
            assert top.total_samples > 0
            assert {e.node for e in top.entries} == {n}
            names = [e.function for e in top.entries]
            assert len(names) == len(set(names)), names
        assert sum(t.total_samples for t in per.values()) == whole.total_samples
        # The unfiltered view: the workload's leading function per node.
        lead = {n: per[n].entries[0].function for n in NODES}
        for n in NODES:
            mine = [e for e in whole.entries if e.function == lead[n] and e.node == n]
            assert len(mine) == 1 and mine[0].self == per[n].entries[0].self, whole.entries
        folded = sym.symbols.Folded(symbols_pb2.ProfileQuery(pid=work.pid), timeout=30)
        by_node = {}
        for s in folded.stacks:
            by_node[s.node] = by_node.get(s.node, 0) + s.count
        assert by_node == {n: per[n].total_samples for n in NODES}, by_node
        assert sym.symbols.Top(symbols_pb2.ProfileQuery(pid=work.pid, node="node-c"),
                               timeout=30).total_samples == 0

        # The CLI: --node, and the node shown when there are several.
        def cli(*args):
            p = subprocess.run([str(SONDE), *args, "--symbolizer", sym.address, "--pid", str(work.pid)],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stderr
            return p.stdout
        one = cli("top", "--node", "node-a", "--limit", "1000")
        assert "NODE" not in one and lead["node-a"] in one
        both = cli("top", "--limit", "1000")
        assert "NODE" in both and "node-a" in both and "node-b" in both
        roots = {ln.split(";", 1)[0] for ln in cli("folded").splitlines() if ln}
        assert roots == set(NODES), roots
        p = subprocess.run([str(SONDE), "status", "--json", "--node", "node-b", "--symbolizer", sym.address],
                           capture_output=True, text=True, timeout=60)
        st = json.loads(p.stdout)
        assert {x["node"] for x in st["processes"]} == {"node-b"}, st["processes"]

        # OTLP: a resource per node for the one pid, with its host.name;
        # each node's samples are that node's stored samples.
        def exported():
            got = _resources(recv.snapshot(), work.pid)
            return got if got == {n: per[n].total_samples for n in NODES} else None
        wait_for(exported, 30, f"OTLP per node: {_resources(recv.snapshot(), work.pid)} vs "
                               f"{ {n: per[n].total_samples for n in NODES} }")
        cmdlines = {}
        _resources(recv.snapshot(), work.pid, cmdlines)
        assert cmdlines == {"node-a": {f"{WORKLOAD} 600"}, "node-b": {None}}, cmdlines
        for req in recv.snapshot():
            for rp in req.resource_profiles:
                for p in rp.scope_profiles[0].profiles:
                    assert len({to.sample_shape(s) for s in p.samples}) == 1
    finally:
        for proc, log in sensors:
            _stop(proc)
            log.close()
        if work:
            work.kill()
            work.wait()
        if sym:
            sym.stop()
        recv.stop()
        nss.close()
