"""Uploads by descriptor (common/fd_upload_wire.h, docs/symbols-api.md): a
local client hands its file over as a sealed memfd on the socket beside the
symbolizer's Unix socket, then calls Upload with by_descriptor. The CLI
does so by itself; the answers are those of a chunked upload. The
descriptor socket takes only what it can trust (a memfd sealed against
writes, growing and shrinking, whose bytes are the file ID named, from a
peer the Symbols policy lets in), closes everything else it is sent, and
holds nothing once the Upload call took it."""
import fcntl
import grp
import json
import os
import pwd
import shutil
import socket
import struct
import subprocess
import sys

import grpc
import pytest

import fd_wire
from conftest import SONDE, WORKLOAD, Symbolizer, symbols_pb2
from fd_wire import hello, sealed_memfd
from test_symbols_api import htlhash, nm_function


def fd_path(sym):
    return str(sym.sock) + ".fd"


def hand_over(sym, payload, fds):
    """Sends payload with fds on sym's descriptor socket: (status, message)."""
    return fd_wire.hand_over(fd_path(sym), payload, fds)


def memfds_held(sym):
    """The memfds among the symbolizer's open descriptors."""
    d = f"/proc/{sym.proc.pid}/fd"
    n = 0
    for f in os.listdir(d):
        try:
            n += os.readlink(f"{d}/{f}").startswith("/memfd:")
        except OSError:
            pass
    return n


def symbolize_cli(sym, addr, env=None):
    """sonde symbolize --json --file WORKLOAD ADDR: the one result."""
    out = subprocess.run([str(SONDE), "symbolize", "--json", "--symbolizer", sym.address, "--file",
                          str(WORKLOAD), hex(addr)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_cli_hands_the_file_over_by_descriptor(tmp_path):
    addr = nm_function(str(WORKLOAD), "leaf_b_hash")
    answers = {}
    for mode in ("descriptor", "chunks"):
        (tmp_path / mode).mkdir()
        sym = Symbolizer(tmp_path / mode)
        try:
            answers[mode] = symbolize_cli(sym, addr, {"SONDE_UPLOAD": mode})
            log = sym.logtext()
            assert "analysed uploaded sonde-workload" in log, log
            assert ("upload of sonde-workload by descriptor" in log) == (mode == "descriptor"), log
            assert memfds_held(sym) == 0, "the descriptor was kept after the Upload call"
            assert os.stat(fd_path(sym)).st_mode & 0o777 == 0o660
        finally:
            sym.stop()
    frames = answers["descriptor"]["frames"]
    assert frames[-1]["function"] == "leaf_b_hash", frames
    assert frames[0]["file"].endswith("tests/workload/workload.c") and frames[0]["line"] > 0
    assert answers["descriptor"] == answers["chunks"]


def test_cli_falls_back_to_chunks_without_a_descriptor_socket(tmp_path):
    """A symbolizer without the descriptor socket (an older one; here the
    socket file is gone): the CLI sends chunks and gets the same answer."""
    addr = nm_function(str(WORKLOAD), "leaf_b_hash")
    sym = Symbolizer(tmp_path)
    try:
        os.unlink(fd_path(sym))
        frames = symbolize_cli(sym, addr)["frames"]
        assert frames[-1]["function"] == "leaf_b_hash", frames
        log = sym.logtext()
        assert "analysed uploaded sonde-workload" in log and "by descriptor" not in log, log
    finally:
        sym.stop()


def test_descriptor_socket_refuses_what_it_cannot_trust(tmp_path):
    data = WORKLOAD.read_bytes()
    fid = htlhash(data)
    sym = Symbolizer(tmp_path)
    fds = []
    try:
        def refused(payload, send, why):
            status, msg = hand_over(sym, payload, send)
            assert status != 0 and why in msg, (status, msg)

        plain = os.open(str(WORKLOAD), os.O_RDONLY | os.O_CLOEXEC)
        unsealed = sealed_memfd(data, seals=0)
        growable = sealed_memfd(data, seals=fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_WRITE)
        good = sealed_memfd(data)
        r, w = os.pipe()
        fds += [plain, unsealed, growable, good, r, w]
        refused(hello(fid, len(data)), [plain], "not a memfd sealed")
        refused(hello(fid, len(data)), [r], "not a memfd sealed")
        refused(hello(fid, len(data)), [unsealed], "sealed against")
        refused(hello(fid, len(data)), [growable], "sealed against")
        refused(hello(bytes(16), len(data)), [good], "htlhash")
        refused(hello(fid, len(data) - 1), [good], "size differs")
        refused(hello(fid, 0), [good], "size must be")
        refused(b"NOTSONDE" + fid + struct.pack("=Q", len(data)), [good], "not a sonde")
        refused(hello(fid, len(data))[:20], [good], "not a sonde")
        refused(hello(fid, len(data)), [good, good], "exactly one")
        # No descriptor at all: socket.send_fds with none sends no control data.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(fd_path(sym))
            s.sendall(hello(fid, len(data)))
            r_ = s.recv(128)
            assert struct.unpack("=I", r_[:4])[0] != 0 and b"exactly one" in r_
        # Everything refused was closed.
        assert memfds_held(sym) == 0
        # Upload by descriptor with nothing held: a clear error.
        with pytest.raises(grpc.RpcError) as e:
            sym.symbols.Upload(symbols_pb2.UploadRequest(file_id=fid, size=len(data), by_descriptor=True,
                                                         name="sonde-workload"), timeout=30)
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "descriptor" in e.value.details()
        # The real thing: held until the Upload call takes it, then analysed.
        assert hand_over(sym, hello(fid, len(data)), [good]) == (0, "held for Upload")
        assert memfds_held(sym) == 1
        up = sym.symbols.Upload(symbols_pb2.UploadRequest(file_id=fid, size=len(data), by_descriptor=True,
                                                          name="sonde-workload"), timeout=60)
        assert up.complete and not up.error, up.error
        assert memfds_held(sym) == 0
        addr = nm_function(str(WORKLOAD), "leaf_b_hash")
        res = sym.symbols.Symbolize(symbols_pb2.SymbolizeRequest(
            queries=[symbols_pb2.SymbolizeQuery(file_id=fid, addresses=[addr])]), timeout=30).results[0]
        assert not res.error and res.symbols[0].function == "leaf_b_hash"
        # Data alongside by_descriptor is a contradiction.
        with pytest.raises(grpc.RpcError) as e:
            sym.symbols.Upload(symbols_pb2.UploadRequest(file_id=bytes(range(16)), size=10, by_descriptor=True,
                                                         data=b"x"), timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        for fd in fds:
            os.close(fd)
        sym.stop()


def test_descriptor_socket_asks_the_symbols_policy(tmp_path):
    """As for Symbols calls: in the socket's group is not enough; a
    --client-group member may hand over; outside the group the file mode
    refuses the connection."""
    nobody = pwd.getpwnam("nobody").pw_uid
    sonde_gid = grp.getgrnam("sonde").gr_gid
    clients = grp.getgrnam("nogroup").gr_gid
    sym = Symbolizer(tmp_path, extra=["--client-group", "nogroup"])
    # nobody must be able to read the file it hands over, and the script.
    copy = tmp_path / "workload-copy"
    copy.write_bytes(WORKLOAD.read_bytes())
    copy.chmod(0o644)
    script = tmp_path / "fd_wire.py"
    shutil.copy(fd_wire.__file__, script)
    script.chmod(0o644)
    tmp_path.chmod(0o755)
    fid = htlhash(copy.read_bytes()).hex()

    def run_as(groups):
        def demote():
            os.setgroups(groups)
            os.setgid(groups[0])
            os.setuid(nobody)
        p = subprocess.run([sys.executable, str(script), fd_path(sym), str(copy), fid], preexec_fn=demote,
                           capture_output=True, text=True, timeout=60, cwd="/")
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    try:
        out = run_as([sonde_gid])
        assert out.startswith("status 1 ") and "not a Symbols client" in out, out
        assert run_as([sonde_gid, clients]) == "status 0 held for Upload"
        assert run_as([clients]).startswith("connect 13"), "the 0660 mode let a stranger in"
    finally:
        sym.stop()
