"""go_plan.py - a test's own ProbePlan for a Go executable
(docs/go-probes.md), computed independently of the symbolizer: entry and
RET addresses from `go tool objdump`, file offsets from the program
headers (readelf -l), struct field offsets from the DWARF (readelf
--debug-dump=info). Also the decoder of struct sonde_go_http_event
(bpf/probes/go_http.h) with Python's struct."""
import re
import struct
import subprocess

GO = "/usr/lib/go-1.19/bin/go"
# bookworm-backports' Go toolchains (deploy/deps.sh installs them for tests);
# GO_NEW is the newest.
GO_BACKPORTS = [f"/usr/lib/go-1.{n}/bin/go" for n in (21, 22, 23)]
GO_NEW = GO_BACKPORTS[-1]

SERVER_FN = "net/http.serverHandler.ServeHTTP"
CLIENT_FN = "net/http.(*Transport).roundTrip"


def load_segments(binary):
    segs = []
    for line in subprocess.run(["readelf", "-lW", binary], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[2], 16), int(f[1], 16), int(f[4], 16)))  # vaddr, offset, filesz
    return segs


def file_offset(segs, vaddr):
    for va, off, size in segs:
        if va <= vaddr < va + size:
            return vaddr - va + off
    raise AssertionError(f"0x{vaddr:x} in no LOAD segment")


def entry_and_rets(binary, fn):
    """(function start, entry probe address, [RET addresses]) of fn, from
    go tool objdump. The entry probe sits on the stack check's JBE when fn
    starts with one ([LEAQ -N(SP), R12;] CMPQ SP|R12, 0x10(R14); JBE):
    the kernel emulates the jump instead of single-stepping the compare."""
    out = subprocess.run([GO, "tool", "objdump", "-s", "^" + re.escape(fn) + "$", binary],
                         check=True, capture_output=True, text=True).stdout
    insns, rets = [], []
    for line in out.splitlines():
        f = line.split(None, 3)
        if len(f) >= 4 and f[1].startswith("0x"):
            insns.append((int(f[1], 16), f[3].split()))
            if f[3].split()[0] == "RET":
                rets.append(int(f[1], 16))
    assert insns and rets, f"{fn} not found or without RET in {binary}"
    # Operands as a set: this objdump prints CMPQ's in either order.
    ops = [(i[1][0], set(" ".join(i[1][1:]).split(", "))) for i in insns[:3]]
    probe = insns[0][0]
    at = 1 if ops[0][0] == "LEAQ" and "R12" in ops[0][1] else 0
    if len(ops) > at + 1 and ops[at][0] == "CMPQ" and "0x10(R14)" in ops[at][1] and \
            ops[at][1] & {"SP", "R12"} and ops[at + 1][0] == "JBE":
        probe = insns[at + 1][0]
    return insns[0][0], probe, rets


def struct_fields(binary, wanted):
    """{struct name: {member: offset}} for the structs in wanted (a dict
    struct name -> member names), from the DWARF."""
    text = subprocess.run(["readelf", "--debug-dump=info", binary], check=True,
                          capture_output=True, text=True).stdout
    found = {}
    cur = None
    depth_re = re.compile(r"^\s*<(\d+)><[0-9a-f]+>: Abbrev Number: \d+ \((\w+)\)")
    tag = depth = None
    member = None
    for line in text.splitlines():
        m = depth_re.match(line)
        if m:
            depth, tag = int(m.group(1)), m.group(2)
            if depth <= 1:
                cur = None
            member = None
            continue
        if "DW_AT_name" in line:
            name = line.split(":", 1)[1].strip()
            if tag == "DW_TAG_structure_type" and depth == 1 and name in wanted and name not in found:
                cur = name
                found[cur] = {}
            elif tag == "DW_TAG_member" and cur and depth == 2:
                member = name
        elif "DW_AT_data_member_location" in line and cur and member:
            found[cur][member] = int(line.split(":", 1)[1].strip())
    out = {}
    for s, members in wanted.items():
        assert s in found, f"struct {s} not in the DWARF of {binary}"
        for mem in members:
            assert mem in found[s], f"{s}.{mem} not in the DWARF"
        out[s] = {mem: found[s][mem] for mem in members}
    return out


def plan_for(binary, path_in_maps):
    f = struct_fields(binary, {
        "net/http.Request": ["Method", "URL", "Host", "Header"],
        "net/url.URL": ["Path", "Host", "Scheme"],
        "net/http.response": ["status"],
        "net/http.Response": ["StatusCode"],
    })
    req, url = f["net/http.Request"], f["net/url.URL"]
    segs = load_segments(binary)

    def attaches(fn, enter, ret):
        entry, probe, rets = entry_and_rets(binary, fn)
        return ([{"program": enter, "file_offset": file_offset(segs, probe), "symbol": fn}] +
                [{"program": ret, "file_offset": file_offset(segs, r), "symbol": f"{fn}+0x{r - entry:x}"}
                 for r in rets])

    return {
        "path": path_in_maps,
        "go_version": subprocess.run([GO, "version", binary], check=True, capture_output=True,
                                     text=True).stdout.split()[1],
        "probes": [
            {"probe": "go_http_server",
             "consts": {"req_method_off": req["Method"], "req_url_off": req["URL"],
                        "req_host_off": req["Host"], "req_header_off": req["Header"],
                        "url_path_off": url["Path"],
                        "response_status_off": f["net/http.response"]["status"],
                        "header_lookup": 1},
             "attaches": attaches(SERVER_FN, "server_enter", "server_return")},
            {"probe": "go_http_client",
             "consts": {"req_method_off": req["Method"], "req_url_off": req["URL"],
                        "req_host_off": req["Host"], "url_path_off": url["Path"],
                        "url_host_off": url["Host"], "url_scheme_off": url["Scheme"],
                        "resp_status_code_off": f["net/http.Response"]["StatusCode"]},
             "attaches": attaches(CLIENT_FN, "client_enter", "client_return")},
        ],
    }


# struct sonde_go_http_event (bpf/probes/go_http.h)
EVENT = struct.Struct("<IIIIQQQ16s8s8sIiIIII16s128s64s8s")
assert EVENT.size == 312
SERVER, CLIENT = 1, 2
HAS_PARENT, SAMPLED, REMOTE_PARENT = 0x1, 0x2, 0x4


def decode(raw):
    (version, kind, pid, tid, g, start, end, trace_id, span_id, parent, flags, status,
     mlen, plen, hlen, slen, method, path, host, scheme) = EVENT.unpack(raw)
    assert version == 1

    def s(b, n):
        return b[:min(n, len(b))].decode("utf-8", "replace")
    return {"kind": kind, "pid": pid, "tid": tid, "g": g, "start": start, "end": end,
            "trace_id": trace_id.hex(), "span_id": span_id.hex(), "parent": parent.hex(),
            "flags": flags, "status": status, "method": s(method, mlen),
            "path": s(path, plen), "host": s(host, hlen), "scheme": s(scheme, slen),
            "path_len": plen}
