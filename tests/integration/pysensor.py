"""A sensor played by Python over the real Ingest protocol, for tests that
need exact control of what the symbolizer receives (bad files, vanishing
peers, counting ReadRange requests)."""
import hashlib
import queue
import threading
import time

import grpc

from conftest import ingest_pb2, ingest_pb2_grpc


def file_id(data):
    return hashlib.sha256(data[:4096] + data[-4096:] + len(data).to_bytes(8, "big")).digest()[:16]


class PySensor:
    def __init__(self, address, files):
        """files: {path: bytes} this sensor will serve."""
        self.files = {file_id(d): d for d in files.values()}
        self.ids = {p: file_id(d) for p, d in files.items()}
        self.reads = []
        self.plans = []  # ProbePlan messages received
        self.welcome = threading.Event()
        self.error = None
        self._last_activity = time.monotonic()
        self._q = queue.Queue()
        self.channel = grpc.insecure_channel(address)
        self._responses = ingest_pb2_grpc.IngestStub(self.channel).Connect(iter(self._q.get, None))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def send(self, **kind):
        self._last_activity = time.monotonic()
        self._q.put(ingest_pb2.SensorMessage(**kind))

    def _serve(self):
        try:
            for m in self._responses:
                if m.HasField("welcome"):
                    self.welcome.set()
                elif m.HasField("probe_plan"):
                    self.plans.append(m.probe_plan)
                elif m.HasField("read_range"):
                    r = m.read_range
                    self._last_activity = time.monotonic()
                    self.reads.append((r.file_id, r.offset, r.length))
                    data = self.files.get(r.file_id)
                    if data is None:
                        self.send(file_range=ingest_pb2.FileRange(request_id=r.request_id, file_id=r.file_id,
                                                                  offset=r.offset, error="unknown file"))
                    else:
                        self.send(file_range=ingest_pb2.FileRange(
                            request_id=r.request_id, file_id=r.file_id, offset=r.offset,
                            data=data[r.offset:r.offset + r.length]))
        except grpc.RpcError as e:
            self.error = e

    def hello(self):
        self.send(hello=ingest_pb2.Hello(protocol_version=1, sensor_version="pysensor", hostname="test",
                                         frequency_hz=19))
        assert self.welcome.wait(10), "no Welcome"

    def process(self, pid, comm, paths):
        maps = []
        base = 0x10000000
        for p in paths:
            size = len(self.files[self.ids[p]])
            maps.append(ingest_pb2.Mapping(start=base, end=base + ((size + 4095) & ~4095), file_offset=0,
                                           file_id=self.ids[p], path=p, file_size=size, executable=True))
            base += 0x10000000
        self.send(process=ingest_pb2.ProcessUpdate(pid=pid, comm=comm, exe_path=paths[0], mappings=maps))

    def stack(self, stack_id, pid, frames, count=1, now_ns=0):
        """frames: [(path, file offset)], leaf first."""
        now_ns = now_ns or time.time_ns()
        self.send(stacks=ingest_pb2.StackBatch(
            stacks=[ingest_pb2.StackDef(id=stack_id, user=[ingest_pb2.Frame(file_id=self.ids[p], address=a)
                                                          for p, a in frames])],
            samples=[ingest_pb2.SampleCount(stack_id=stack_id, pid=pid, tid=pid, count=count,
                                            first_unix_ns=now_ns, last_unix_ns=now_ns, comm="pytest")]))

    def close(self, timeout=20, quiet=1.0):
        """Half-closes and waits for the symbolizer to end the stream.
        grpcio cannot send after a half-close, so this first waits until
        the symbolizer has asked for no bytes for `quiet` seconds (the
        real sensor keeps answering after its half-close)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() - self._last_activity < quiet and time.monotonic() < deadline:
            time.sleep(0.05)
        self._q.put(None)
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the symbolizer did not end the stream"
        self.channel.close()

    def abort(self):
        self._responses.cancel()
        self._thread.join(10)
        self.channel.close()
