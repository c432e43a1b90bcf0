#!/usr/bin/python3
"""Writes the seed corpora of fuzz-probe-plan (tests/fuzz/corpus/
probe_plan/: packed SymbolizerMessages) and fuzz-fd-upload-hello
(fd_upload_hello/: u8 flags, u8 hello length, hello, control buffer).

probe_plan: ProbePlans shaped as symbolizer/probes/go_plan.c makes them
for tests/workload/gohttp (both probes, their real const and program
names, an entry and RETs), and ones the sensor must refuse or trim: an
error plan, a 15-byte file ID, an unknown probe, names over 63 bytes,
33 consts, no attaches, 9 probe sets, a set with an error.

fd_upload_hello: hellos as cli/symbolize.c sends them with one
SCM_RIGHTS descriptor as the kernel writes it, and with two or none
attached, MSG_CTRUNC, a short hello, a wrong magic, a control header
whose length runs past the buffer or is under a header's size.

  /usr/bin/python3 tests/fuzz/make-plan-hello-corpus.py
"""
import pathlib
import struct
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parents[1]
OUT = HERE / "corpus"

stubs = tempfile.mkdtemp(prefix="sonde-corpus-stubs.")
subprocess.run(["protoc", f"-I{SRC / 'proto/sonde/v1'}", f"--python_out={stubs}", "ingest.proto"],
               check=True)
sys.path.insert(0, stubs)
import ingest_pb2 as pb  # noqa: E402

FILE_ID = bytes(range(16))
SERVER_CONSTS = ["req_method_off", "req_url_off", "req_host_off", "req_header_off", "url_path_off",
                 "response_status_off", "header_lookup"]
CLIENT_CONSTS = ["req_method_off", "req_url_off", "req_host_off", "url_path_off", "url_host_off",
                 "url_scheme_off", "resp_status_code_off"]


def probe_set(probe, consts, enter, ret, fn, at, n_rets=3):
    s = pb.ProbeSet(probe=probe)
    for i, c in enumerate(consts):
        s.consts.add(name=c, value=8 * (i + 1))
    s.attaches.add(program=enter, file_offset=at, symbol=fn)
    for i in range(n_rets):
        s.attaches.add(program=ret, file_offset=at + 0x40 * (i + 1), symbol=fn, optional=i > 0)
    return s


def server():
    return probe_set("go_http_server", SERVER_CONSTS, "server_enter", "server_return",
                     "net/http.serverHandler.ServeHTTP", 0x2b4c80)


def client():
    return probe_set("go_http_client", CLIENT_CONSTS, "client_enter", "client_return",
                     "net/http.(*Client).do", 0x29a120)


def msg(plan):
    return pb.SymbolizerMessage(probe_plan=plan).SerializeToString()


def probe_plan():
    out = OUT / "probe_plan"
    out.mkdir(parents=True, exist_ok=True)
    seeds = {}
    seeds["gohttp-both"] = pb.ProbePlan(file_id=FILE_ID, go_version="go1.19.8", probes=[server(), client()])
    seeds["error-plan"] = pb.ProbePlan(file_id=FILE_ID, error="no .go.buildinfo")
    seeds["short-file-id"] = pb.ProbePlan(file_id=FILE_ID[:15], probes=[server()])
    s = server()
    s.probe = "go_grpc_server"
    seeds["unknown-probe"] = pb.ProbePlan(file_id=FILE_ID, probes=[s, client()])
    s = server()
    s.consts[0].name = "c" * 64
    s2 = client()
    s2.attaches[1].program = "p" * 64
    s2.attaches[0].symbol = "s" * 200
    seeds["long-names"] = pb.ProbePlan(file_id=FILE_ID, probes=[s, s2])
    s = server()
    for i in range(33 - len(s.consts)):
        s.consts.add(name=f"extra{i}", value=i)
    seeds["33-consts"] = pb.ProbePlan(file_id=FILE_ID, probes=[s, client()])
    s = server()
    del s.attaches[:]
    seeds["no-attaches"] = pb.ProbePlan(file_id=FILE_ID, probes=[s, client()])
    seeds["nine-sets"] = pb.ProbePlan(file_id=FILE_ID, probes=[server(), client()] * 4 + [server()])
    s = client()
    s.error = "net/http.(*Client).do not found"
    seeds["set-error"] = pb.ProbePlan(file_id=FILE_ID, probes=[server(), s])
    s = server()
    s.consts.add(name="", value=1)
    s.attaches.add(program="", file_offset=1)
    seeds["empty-names"] = pb.ProbePlan(file_id=FILE_ID, probes=[s])
    for name, plan in seeds.items():
        (out / name).write_bytes(msg(plan))
    (out / "welcome-not-a-plan").write_bytes(
        pb.SymbolizerMessage(welcome=pb.Welcome()).SerializeToString())


def cmsg(level, typ, data, space=True):
    hdr = struct.pack("<QII", 16 + len(data), level, typ) + data
    return hdr + bytes((-len(hdr)) % 8) if space else hdr


def fd_upload_hello():
    out = OUT / "fd_upload_hello"
    out.mkdir(parents=True, exist_ok=True)
    SOL_SOCKET, SCM_RIGHTS, SCM_CREDENTIALS = 1, 1, 2
    hello = b"SONDEFD1" + FILE_ID + struct.pack("<Q", 123456)
    one = cmsg(SOL_SOCKET, SCM_RIGHTS, struct.pack("<i", 5))
    two = cmsg(SOL_SOCKET, SCM_RIGHTS, struct.pack("<ii", 5, 6))
    eight = cmsg(SOL_SOCKET, SCM_RIGHTS, struct.pack("<8i", *range(5, 13)))

    def rec(flags, h, ctl):
        return bytes([flags, len(h)]) + h + ctl

    seeds = {
        "one-fd": rec(0, hello, one),
        "two-fds": rec(0, hello, two),
        "eight-fds-ctrunc": rec(1, hello, eight),
        "no-fd": rec(0, hello, b""),
        "creds-then-fd": rec(2, hello, cmsg(SOL_SOCKET, SCM_CREDENTIALS, struct.pack("<iII", 1, 0, 0)) + one),
        "short-hello": rec(0, hello[:31], one),
        "bad-magic": rec(0, b"SONDEFD2" + hello[8:], one),
        "len-past-buffer": rec(2, hello, struct.pack("<QII", 4096, SOL_SOCKET, SCM_RIGHTS) + bytes(8)),
        "len-under-header": rec(2, hello, struct.pack("<QII", 3, SOL_SOCKET, SCM_RIGHTS) + bytes(8)),
    }
    for name, data in seeds.items():
        (out / name).write_bytes(data)


def main():
    probe_plan()
    fd_upload_hello()
    subprocess.run(["rm", "-rf", stubs])


if __name__ == "__main__":
    main()
