"""A compromised symbolizer asks the root sensor for bytes it may not have
(issue 27; docs/security.md, "Symbolizer -> sensor"). The attacker is an
Ingest server run as `nobody` (the sensor accepts it with --symbolizer-uid
nobody, as it would accept a symbolizer whose sandbox was broken into),
against the real sensor with real BPF following a real process:

- a ReadRange for the file ID of /etc/shadow (never mapped by anyone, so
  never registered) gets an error and no byte;
- a ReadRange of a registered file inside it is answered with the file's
  bytes (control: the attacker does reach the file server);
- a ReadRange past the registered file's size ends the stream (the sensor
  fails closed) and is not answered.
"""
import json
import os
import shutil
import subprocess

import pytest

from conftest import SRC, Sensor, htlhash, make_tmp, sensor_may_connect, wait_for



# The attacker: a minimal Ingest server. At the first ProcessUpdate with a
# registered mapping it sends the three ReadRanges; it writes one JSON line
# per event to argv[2].
ATTACKER = r'''
import json, queue, sys, threading
from concurrent import futures
import grpc
import ingest_pb2 as pb

sock, out_path, secret_hex = sys.argv[1], sys.argv[2], sys.argv[3]
out = open(out_path, "a", buffering=1)
conns = [0]

def note(**kw):
    out.write(json.dumps(kw) + "\n")

def connect(request_iterator, context):
    conns[0] += 1
    conn = conns[0]
    q = queue.Queue()
    note(kind="connect", conn=conn)

    def reader():
        asked = False
        try:
            for m in request_iterator:
                k = m.WhichOneof("kind")
                if k == "hello":
                    q.put(pb.SymbolizerMessage(welcome=pb.Welcome(
                        protocol_version=1, max_message_bytes=16 << 20, max_read_bytes=4 << 20)))
                elif k == "process" and not asked and conn == 1:
                    maps = [mp for mp in m.process.mappings if len(mp.file_id) == 16 and mp.file_size > 8192]
                    if not maps:
                        continue
                    asked = True
                    mp = maps[0]
                    note(kind="target", path=mp.path, size=mp.file_size, file_id=mp.file_id.hex())
                    q.put(pb.SymbolizerMessage(read_range=pb.ReadRange(
                        request_id=1, file_id=bytes.fromhex(secret_hex), offset=0, length=64)))
                    q.put(pb.SymbolizerMessage(read_range=pb.ReadRange(
                        request_id=2, file_id=mp.file_id, offset=0, length=64)))
                    past = pb.ReadRange(request_id=3, file_id=mp.file_id,
                                        offset=mp.file_size + 4096, length=64)
                elif k == "file_range":
                    fr = m.file_range
                    note(kind="file_range", conn=conn, request_id=fr.request_id,
                         error=fr.error, data=fr.data.hex())
                    if fr.request_id == 2:   # the control answered: now past the end
                        q.put(pb.SymbolizerMessage(read_range=past))
        except Exception as e:
            note(kind="reader_error", conn=conn, error=str(e))
        note(kind="stream_end", conn=conn)
        q.put(None)

    threading.Thread(target=reader, daemon=True).start()
    while True:
        msg = q.get()
        if msg is None:
            return
        yield msg

server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("sonde.v1.Ingest", {
    "Connect": grpc.stream_stream_rpc_method_handler(
        connect, request_deserializer=pb.SensorMessage.FromString,
        response_serializer=pb.SymbolizerMessage.SerializeToString)}),))
server.add_insecure_port("unix:" + sock)
server.start()
note(kind="listening")
server.wait_for_termination()
'''


def events(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def world_tmp():
    tmp = make_tmp("sonde-trust-reads.")
    os.chmod(tmp, 0o755)
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


def test_symbolizer_reads_only_registered_ranges(world_tmp):
    stubs = world_tmp / "stubs"
    stubs.mkdir()
    subprocess.run(["protoc", f"-I{SRC / 'proto' / 'sonde' / 'v1'}", f"--python_out={stubs}",
                    "ingest.proto"], check=True)
    (world_tmp / "attacker.py").write_text(ATTACKER)
    run = world_tmp / "run"   # nobody's: its socket and its notes
    run.mkdir()
    os.chown(run, 65534, 65534)
    sock, log = run / "evil.sock", run / "events.jsonl"
    secret = htlhash(open("/etc/shadow", "rb").read())
    attacker = subprocess.Popen(["/usr/bin/python3", str(world_tmp / "attacker.py"), str(sock), str(log),
                                 secret.hex()], user="nobody", group="nogroup",
                                env={"PYTHONPATH": str(stubs), "PATH": "/usr/bin:/bin"},
                                stdout=subprocess.DEVNULL, stderr=open(world_tmp / "attacker.err", "w"))
    target = subprocess.Popen(["sleep", "120"])
    sensor = None
    try:
        wait_for(lambda: any(e["kind"] == "listening" for e in events(log)), 30,
                 f"the attacker's Ingest server: {(world_tmp / 'attacker.err').read_text()[-1500:]}")
        sensor_may_connect(sock)
        sensor = Sensor(world_tmp, f"unix:{sock}", ["--symbolizer-uid", "nobody", "--pid", str(target.pid),
                                                     "--unwind-rows", "0"])
        wait_for(lambda: [e for e in events(log) if e["kind"] == "target"], 60,
                 f"a ProcessUpdate with a registered file: {sensor.logtext()[-1500:]}")
        # The out-of-range request ends the first stream.
        wait_for(lambda: any(e["kind"] == "stream_end" and e["conn"] == 1 for e in events(log)), 60,
                 f"the sensor to end the stream: {sensor.logtext()[-1500:]}")
        evs = events(log)
        why = f"{evs}\n{sensor.logtext()[-1500:]}"
        tgt = next(e for e in evs if e["kind"] == "target")
        answers = {e["request_id"]: e for e in evs if e["kind"] == "file_range" and e["conn"] == 1}
        assert 1 in answers and answers[1]["error"] and not answers[1]["data"], why
        with open(f"/proc/{target.pid}/root{tgt['path']}", "rb") as f:
            head = f.read(64)
        assert 2 in answers and bytes.fromhex(answers[2]["data"]) == head, why   # control
        assert 3 not in answers or (answers[3]["error"] and not answers[3]["data"]), why
        assert sensor.proc.poll() is None, sensor.logtext()
    finally:
        target.kill()
        target.wait()
        if sensor:
            sensor.stop()
        attacker.kill()
        attacker.wait()
