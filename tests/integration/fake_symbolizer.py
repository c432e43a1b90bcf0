#!/usr/bin/python3
"""fake_symbolizer.py - a throwaway Ingest server for testing sonde-sensor.

Accepts /sonde.v1.Ingest/Connect, answers Hello with Welcome, prints what
arrives, asks for one ReadRange per registered file (up to --reads) and checks
the returned bytes against the file itself. Ends the stream when the sensor
half-closes. With --tables it also sends an unwind table for every mapped
file, made by readelf_tables.py (a stand-in for the symbolizer's compiler),
and with --stacks COMM prints the top stacks of that comm, symbolized with
addr2line. With --probe-plan it sends a ProbePlan (docs/go-probes.md) for
the file mapped at the plan's path (repeatable: one plan per path), with
--interp-config the InterpreterConfigs of a JSON file (path, configs) for
the file mapped at that path, and with --record it appends what the
Go probe tests check (ProbeEvents, ProcessUpdate service names) to a file
as JSON lines. Stubs are generated at start into a temporary directory:

  sudo /usr/bin/python3 tests/integration/fake_symbolizer.py --listen unix:/tmp/sonde.sock

Needs Debian's python3-grpcio and python3-protobuf, protoc and
grpc_python_plugin (protobuf-compiler-grpc).
"""
import argparse
import collections
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_stubs():
    out = tempfile.mkdtemp(prefix="sonde-stubs-")
    subprocess.run(["protoc", "-I", os.path.join(ROOT, "proto"), "--python_out=" + out,
                    "--grpc_out=" + out,
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    os.path.join(ROOT, "proto/sonde/v1/ingest.proto")], check=True)
    sys.path.insert(0, out)
    from sonde.v1 import ingest_pb2, ingest_pb2_grpc  # noqa: E402
    return ingest_pb2, ingest_pb2_grpc


pb, pb_grpc = load_stubs()
import grpc  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import readelf_tables  # noqa: E402


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.kinds = collections.Counter()
        self.samples = 0
        self.stack_defs = 0
        self.outcomes = collections.Counter()
        self.max_user = 0
        self.kernel_stacks = 0
        self.pids = set()
        self.exits = set()
        self.ksyms = 0
        self.ranges_ok = 0
        self.ranges_bad = 0
        self.connections = 0
        self.top = collections.Counter()
        self.outcome_samples = collections.Counter()   # (comm, outcome) -> samples
        self.tables_sent = 0
        self.table_rows = 0
        self.last_stats = None
        self.stack_text = {}    # (conn, stack id) -> frames text
        self.paths = {}         # file_id -> path


STATS = Stats()


class Ingest(pb_grpc.IngestServicer):
    def __init__(self, args):
        self.args = args

    def Connect(self, request_iterator, context):
        out = queue.Queue()
        files = {}      # file_id -> (path, size, pid, start, end, offset)
        pending = {}    # request_id -> (file_id, offset, length, path)
        defs = {}
        next_req = [1]
        done = threading.Event()
        args = self.args
        with STATS.lock:
            STATS.connections += 1
        conn = STATS.connections

        def log(*a):
            if not args.quiet:
                print(f"[conn {conn}]", *a, flush=True)

        tables_done = set()
        plans_sent = set()

        def record(obj):
            if args.record:
                with STATS.lock, open(args.record, "a") as f:
                    f.write(json.dumps(obj) + "\n")

        configs_sent = set()

        def interp_config(fid, c):
            return pb.SymbolizerMessage(interpreter_config=pb.InterpreterConfig(
                file_id=fid, kind=c.get("kind", 1), format_version=c.get("format_version", 2),
                runtime_offset=c["runtime_offset"], layout=bytes.fromhex(c["layout"]),
                error=c.get("error", "")))

        def probe_plan(fid, plan):
            return pb.SymbolizerMessage(probe_plan=pb.ProbePlan(
                file_id=fid, go_version=plan.get("go_version", ""),
                probes=[pb.ProbeSet(
                    probe=ps["probe"],
                    consts=[pb.ProbeConst(name=k, value=v) for k, v in ps["consts"].items()],
                    attaches=[pb.ProbeAttach(program=a["program"], file_offset=a["file_offset"],
                                             symbol=a.get("symbol", ""),
                                             optional=a.get("optional", False))
                              for a in ps["attaches"]])
                        for ps in plan["probes"]]))
        table_jobs = queue.Queue()

        def table_worker():
            while True:
                job = table_jobs.get()
                if job is None:
                    return
                fid, fd, path = job
                cache = os.path.join(args.table_cache, fid.hex() + ".rows") if args.table_cache else None
                rows = None
                try:
                    if cache and os.path.exists(cache):
                        with open(cache) as f:
                            rows = [tuple(int(x) for x in ln.split()) for ln in f]
                    else:
                        rows = readelf_tables.build_rows(f"/proc/{os.getpid()}/fd/{fd}")
                        if cache:
                            os.makedirs(args.table_cache, exist_ok=True)
                            with open(cache + ".tmp", "w") as f:
                                f.writelines(" ".join(map(str, r)) + "\n" for r in rows)
                            os.rename(cache + ".tmp", cache)
                except Exception as e:  # noqa: BLE001 - a test tool
                    rows = None
                    log("table for", path, "failed:", e)
                finally:
                    os.close(fd)
                if not rows:
                    out.put(pb.SymbolizerMessage(unwind_table=pb.UnwindTable(
                        file_id=fid, format_version=1, first=True, last=True,
                        error="no usable table")))
                    continue
                data = readelf_tables.pack(rows)
                step = args.chunk_rows * 12
                for i in range(0, len(data), step):
                    out.put(pb.SymbolizerMessage(unwind_table=pb.UnwindTable(
                        file_id=fid, format_version=1, first=i == 0,
                        last=i + step >= len(data), total_rows=len(rows),
                        rows=data[i:i + step])))
                with STATS.lock:
                    STATS.tables_sent += 1
                    STATS.table_rows += len(rows)
                if args.verbose:
                    log("table", path, len(rows), "rows")

        if args.tables:
            for _ in range(args.table_workers):
                threading.Thread(target=table_worker, daemon=True).start()

        def ask(fid):
            path, size = files[fid][0], files[fid][1]
            rid = next_req[0]
            next_req[0] += 1
            length = min(4096, size)
            off = 0 if size <= 8192 else size // 2
            pending[rid] = (fid, off, length, path)
            out.put(pb.SymbolizerMessage(read_range=pb.ReadRange(
                request_id=rid, file_id=fid, offset=off, length=length)))

        def reader():
            asked = 0
            try:
                for m in request_iterator:
                    kind = m.WhichOneof("kind")
                    with STATS.lock:
                        STATS.kinds[kind] += 1
                    if kind == "hello":
                        log("hello:", m.hello.hostname, m.hello.kernel_release,
                            m.hello.frequency_hz, "Hz, version", m.hello.sensor_version)
                        out.put(pb.SymbolizerMessage(welcome=pb.Welcome(
                            protocol_version=1, max_message_bytes=16 << 20,
                            max_read_bytes=4 << 20)))
                        if args.bad_request and conn == 1:
                            # Fail-closed check: the sensor must end the stream.
                            out.put(pb.SymbolizerMessage(read_range=pb.ReadRange(
                                request_id=999, file_id=b"abc", offset=0, length=16)))
                    elif kind == "process":
                        p = m.process
                        with STATS.lock:
                            STATS.pids.add(p.pid)
                        record({"kind": "process", "pid": p.pid, "comm": p.comm,
                                "otel_service_name": p.otel_service_name})
                        for mp in p.mappings:
                            for plan in args.plans:
                                if (len(mp.file_id) == 16 and mp.path == plan["path"]
                                        and mp.file_id not in plans_sent):
                                    plans_sent.add(mp.file_id)
                                    out.put(probe_plan(mp.file_id, plan))
                                    log("probe plan sent for", mp.path)
                            for ic in args.interp_configs:
                                if (len(mp.file_id) == 16 and mp.path == ic["path"]
                                        and mp.file_id not in configs_sent):
                                    configs_sent.add(mp.file_id)
                                    for c in ic["configs"]:
                                        out.put(interp_config(mp.file_id, c))
                                    log(len(ic["configs"]), "interpreter configs sent for", mp.path)
                        for mp in p.mappings:
                            if len(mp.file_id) == 16:
                                with STATS.lock:
                                    STATS.paths.setdefault(mp.file_id, mp.path)
                            if (args.tables and len(mp.file_id) == 16 and mp.executable
                                    and mp.file_id not in tables_done):
                                tables_done.add(mp.file_id)
                                try:
                                    fd = os.open(f"/proc/{p.pid}/map_files/{mp.start:x}-{mp.end:x}",
                                                 os.O_RDONLY)
                                    table_jobs.put((mp.file_id, fd, mp.path))
                                except OSError:
                                    tables_done.discard(mp.file_id)
                            if len(mp.file_id) == 16 and mp.file_id not in files:
                                # map_files is the mapped inode even if the
                                # path was replaced since (as the sensor reads).
                                mf = f"/proc/{p.pid}/map_files/{mp.start:x}-{mp.end:x}"
                                files[mp.file_id] = (mf, mp.file_size, p.pid)
                                if asked < args.reads:
                                    asked += 1
                                    ask(mp.file_id)
                        if args.verbose:
                            log("process", p.pid, p.comm, p.exe_path, len(p.mappings), "maps")
                    elif kind == "exit":
                        with STATS.lock:
                            STATS.exits.add(m.exit.pid)
                        if args.verbose:
                            log("exit", m.exit.pid)
                    elif kind == "kernel_symbols":
                        with STATS.lock:
                            STATS.ksyms += len(m.kernel_symbols.symbols)
                        if m.kernel_symbols.last:
                            log("kernel symbols:", STATS.ksyms)
                    elif kind == "stacks":
                        for d in m.stacks.stacks:
                            if d.id in defs:
                                log("ERROR: stack id", d.id, "defined twice")
                            defs[d.id] = d
                            if args.verbose:
                                log("stack", d.id, pb.StackOutcome.Name(d.outcome),
                                    "kernel", ["%x" % a for a in d.kernel[:6]],
                                    "user", ["%s+%x" % (f.file_id.hex()[:8] or "raw", f.address)
                                             for f in d.user[:40]])
                            with STATS.lock:
                                STATS.stack_text[(conn, d.id)] = (
                                    pb.StackOutcome.Name(d.outcome),
                                    [(f.file_id, f.address) for f in d.user])
                                STATS.stack_defs += 1
                                STATS.outcomes[pb.StackOutcome.Name(d.outcome)] += 1
                                STATS.max_user = max(STATS.max_user, len(d.user))
                                if d.kernel:
                                    STATS.kernel_stacks += 1
                        tagged = [{"pid": s.pid, "tid": s.tid, "count": s.count,
                                   "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex()}
                                  for s in m.stacks.samples if s.span_id]
                        if tagged:
                            record({"kind": "span_samples", "samples": tagged})
                        for s in m.stacks.samples:
                            if s.stack_id not in defs:
                                log("ERROR: count for undefined stack", s.stack_id)
                            with STATS.lock:
                                STATS.samples += s.count
                                STATS.top[(s.comm, s.stack_id, conn)] += s.count
                                if s.stack_id in defs:
                                    STATS.outcome_samples[(s.comm, pb.StackOutcome.Name(
                                        defs[s.stack_id].outcome))] += s.count
                    elif kind == "file_range":
                        fr = m.file_range
                        req = pending.pop(fr.request_id, None)
                        if req is None:
                            log("ERROR: FileRange for unknown request", fr.request_id)
                            continue
                        fid, off, length, path = req
                        if fr.error:
                            log("file range error:", fr.error, path)
                            with STATS.lock:
                                STATS.ranges_bad += 1
                            continue
                        try:
                            with open(path, "rb") as f:
                                f.seek(off)
                                want = f.read(length)
                        except OSError as e:
                            want = None
                            log("cannot read", path, e)
                        ok = want == fr.data and fr.file_id == fid and fr.offset == off
                        with STATS.lock:
                            if ok:
                                STATS.ranges_ok += 1
                            else:
                                STATS.ranges_bad += 1
                        log("file range", fr.request_id, path, off, len(fr.data),
                            "OK" if ok else "MISMATCH")
                    elif kind == "probe_events":
                        pe = m.probe_events
                        record({"kind": "probe_events", "monotonic_to_unix_ns": pe.monotonic_to_unix_ns,
                                "records_lost": pe.records_lost,
                                "records": [r.hex() for r in pe.records]})
                    elif kind == "stats":
                        st = m.stats
                        with STATS.lock:
                            STATS.last_stats = st
                        record({"kind": "stats", "go_probe_files": st.go_probe_files,
                                "go_probe_links": st.go_probe_links,
                                "go_probe_attach_failures": st.go_probe_attach_failures,
                                "go_probe_records": st.go_probe_records,
                                "go_probe_records_lost": st.go_probe_records_lost,
                                "probe_plans_refused": st.probe_plans_refused,
                                "interpreter_configs_refused": st.interpreter_configs_refused})
                        log(f"stats: taken {st.samples_taken} lost {st.samples_lost} "
                            f"dropped {st.samples_dropped} procs {st.processes} "
                            f"files {st.files} tables {st.unwind_tables_loaded} "
                            f"rows {st.unwind_rows_loaded} rejected {st.unwind_tables_rejected} "
                            f"map bytes {st.bpf_map_bytes}")
            except grpc.RpcError as e:
                code = e.code() if hasattr(e, "code") else "cancelled"
                log("stream broke:", code)
            log("sensor half-closed" if context.is_active() else "stream over")
            for _ in range(args.table_workers):
                table_jobs.put(None)
            done.set()

        threading.Thread(target=reader, daemon=True).start()
        while True:
            try:
                msg = out.get(timeout=0.1)
                yield msg
                continue
            except queue.Empty:
                pass
            if done.is_set() and out.empty():
                # Answer outstanding reads first, then end the stream.
                if pending and context.is_active():
                    time.sleep(0.1)
                    if pending:
                        continue
                break
            if not context.is_active():
                break


def symbolize(fid, addr, leaf):
    path = STATS.paths.get(fid)
    if not path:
        return "raw+%x" % addr
    a = addr if leaf else addr - 1
    try:
        fn = subprocess.run(["addr2line", "-f", "-e", path, "%x" % a], capture_output=True,
                            text=True, timeout=10).stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError):
        fn = "?"
    return "%s:%s" % (os.path.basename(path), fn if fn != "??" else "+%x" % addr)


def print_stacks(comm, n):
    with STATS.lock:
        top = [(c, k) for k, c in STATS.top.items() if k[0] == comm]
    top.sort(reverse=True)
    shown = top[:n]
    # and the biggest stacks that did not complete, and signal frames
    shown += [t for t in top if STATS.stack_text.get((t[1][2], t[1][1]), ("",))[0]
              != "STACK_OUTCOME_COMPLETE"][:3]
    for count, (c, sid, conn) in shown:
        outcome, frames = STATS.stack_text.get((conn, sid), ("?", []))
        print("STACK %s count=%d %s frames=%d" % (c, count, outcome, len(frames)))
        for i, (fid, addr) in enumerate(frames):
            print("    ", symbolize(fid, addr, i == 0))


def summary():
    s = STATS
    for comm in sorted({k[0] for k in s.outcome_samples}):
        per = {o: c for (cm, o), c in s.outcome_samples.items() if cm == comm}
        total = sum(per.values())
        print("OUTCOMES %s samples=%d complete=%.1f%% %s" % (
            comm, total, 100.0 * per.get("STACK_OUTCOME_COMPLETE", 0) / total, per), flush=True)
    if s.last_stats is not None:
        st = s.last_stats
        print("SENSORSTATS tables=%d rows=%d rejected=%d map_bytes=%d" % (
            st.unwind_tables_loaded, st.unwind_rows_loaded, st.unwind_tables_rejected,
            st.bpf_map_bytes), flush=True)
    print("TABLES sent=%d rows=%d" % (s.tables_sent, s.table_rows), flush=True)
    print("SUMMARY connections=%d samples=%d stack_defs=%d outcomes=%s max_user_frames=%d "
          "kernel_stacks=%d processes=%d exits=%d ksyms=%d ranges_ok=%d ranges_bad=%d kinds=%s"
          % (s.connections, s.samples, s.stack_defs, dict(s.outcomes), s.max_user,
             s.kernel_stacks, len(s.pids), len(s.exits), s.ksyms, s.ranges_ok,
             s.ranges_bad, dict(s.kinds)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="unix:/tmp/sonde-fake.sock")
    ap.add_argument("--duration", type=float, default=0, help="exit after S seconds")
    ap.add_argument("--reads", type=int, default=3, help="ReadRanges per connection")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--bad-request", action="store_true",
                    help="send a malformed ReadRange on the first connection")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--tables", action="store_true",
                    help="send unwind tables made with readelf_tables.py")
    ap.add_argument("--chunk-rows", type=int, default=50000)
    ap.add_argument("--table-workers", type=int, default=4)
    ap.add_argument("--table-cache", default="/tmp/sonde-fake-tables",
                    help="rows per file ID kept across runs ('' for none)")
    ap.add_argument("--stacks", action="append", default=[], metavar="COMM",
                    help="print the top stacks of COMM at the end (repeatable)")
    ap.add_argument("--probe-plan", metavar="JSON", action="append", default=[],
                    help="send this ProbePlan for the file mapped at its 'path' (repeatable)")
    ap.add_argument("--interp-config", metavar="JSON", action="append", default=[],
                    help="send these InterpreterConfigs ({path, configs: [{runtime_offset, "
                         "layout (hex), kind, format_version}]}) for the file mapped at path")
    ap.add_argument("--record", metavar="FILE",
                    help="append ProbeEvents and ProcessUpdate service names as JSON lines")
    args = ap.parse_args()
    args.plans, args.interp_configs = [], []
    for path in args.probe_plan:
        with open(path) as f:
            args.plans.append(json.load(f))
    for path in args.interp_config:
        with open(path) as f:
            args.interp_configs.append(json.load(f))
    if args.listen.startswith("unix:"):
        try:
            os.unlink(args.listen[5:])
        except FileNotFoundError:
            pass
        addr = args.listen
    else:
        addr = args.listen[4:] if args.listen.startswith("tcp:") else args.listen
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         options=[("grpc.max_receive_message_length", 32 << 20)])
    pb_grpc.add_IngestServicer_to_server(Ingest(args), server)
    server.add_insecure_port(addr)
    server.start()
    if args.listen.startswith("unix:") and os.geteuid() == 0:
        # Like sonde-symbolizer's socket, root:sonde 0660: the sensor
        # connects as sonde-sensor with group sonde after set-up.
        import grp
        try:
            os.chown(args.listen[5:], 0, grp.getgrnam("sonde").gr_gid)
            os.chmod(args.listen[5:], 0o660)
        except KeyError:
            pass
    print("listening on", args.listen, flush=True)
    try:
        if args.duration:
            time.sleep(args.duration)
        else:
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        for comm in args.stacks:
            print_stacks(comm, 5)
        summary()
        server.stop(0.5)


if __name__ == "__main__":
    main()
