#!/usr/bin/python3
"""layering.py - checks that #include "..." reads one way.

Every source file under symbolizer/, sensor/ and common/ belongs to a layer,
by its directory (LAYERS below). A file may include headers of its own
layer and of the layers below it, never of one above. Within a layer that
holds several directories (the parsers), the directories must not include
each other in a circle; and no header may, through its includes, include
itself. Generated headers (*.pb-c.h, *.skel.h) count as the wire layer.
Below the export layer nothing includes the rpc wrapper (common/rpc*.h) or
a generated protobuf header: the core, the store and the parsers know no
wire. The rpc handlers in symbolizer/api/ include no other handler's header:
only their own and the shared ones (API_SHARED); what one handler needs
of another is wired in symbolizer/service.c.

Run from anywhere: tests/layering.py [SOURCE_ROOT]. Prints each violation
as FILE:LINE: reason, and exits 1 if there is any.
"""
import os
import re
import sys

# Lowest first. An entry is (layer name, directories or files relative to
# the source root). The symbolizer reads one way: main -> service -> api ->
# export -> core -> store -> parsers -> util -> common (and the wire).
LAYERS = [
    ("wire", ["bpf", "<generated>"]),
    ("common", ["common"]),
    ("util", ["symbolizer/util"]),
    ("parsers", ["symbolizer/go", "symbolizer/elf", "symbolizer/dwarf",
                 "symbolizer/unwind", "symbolizer/interp", "symbolizer/probes",
                 "symbolizer/ksyms"]),
    ("store", ["symbolizer/store"]),
    ("core", ["symbolizer/core"]),
    ("export", ["symbolizer/export"]),
    ("api", ["symbolizer/api"]),
    ("service", ["symbolizer/service.c", "symbolizer/service.h"]),
    ("main", ["symbolizer"]),
]
# The sensor is its own program: it may use common/ and the BPF headers,
# nothing of the symbolizer's.
SEPARATE = {"sensor": ["sensor"]}
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
# api/ headers every handler may include; any other api/ header belongs to
# the handler of its stem (fd_upload.h is the upload handler's descriptor
# socket, so upload.c may include it).
NO_WIRE = {"util", "parsers", "store", "core"}
WIRE_HEADER = re.compile(r"(^|/)(rpc[a-z_]*\.h|[^/]*\.pb-c\.h)$")
API_DIR = "symbolizer/api"
API_SHARED = {"api.h", "access_scope.h"}
API_OWNERS = {"fd_upload.h": {"fd_upload", "upload"}}
SCANNED = ["symbolizer", "sensor", "common", "bpf"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def unit_of(rel):
    """(layer, unit) of a file: unit is the directory (or file) entry that
    matched, the node of the directory graph."""
    best = None
    for layer, entries in list(LAYERS) + list(SEPARATE.items()):
        for e in entries:
            if rel == e or rel.startswith(e + "/"):
                if best is None or len(e) > len(best[1]):
                    best = (layer, e)
    return best


def allowed(src_layer, dst_layer):
    if src_layer in SEPARATE:
        return dst_layer in (src_layer, "wire", "common")
    if dst_layer in SEPARATE:
        return False
    return RANK[dst_layer] <= RANK[src_layer]


def api_handler_include(src, dst):
    """Whether src (an api/ .c file) includes another handler's header."""
    if not src.startswith(API_DIR + "/") or not dst.startswith(API_DIR + "/"):
        return False
    base = os.path.basename(dst)
    if base in API_SHARED:
        return False
    stem = os.path.splitext(os.path.basename(src))[0]
    owners = API_OWNERS.get(base, {os.path.splitext(base)[0]})
    return stem not in owners


def collect(root):
    files = []
    for top in SCANNED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(files)


def resolve(inc, src, by_base, by_path):
    """The file an include names: a path relative to the includer or to a
    scanned directory, else the one file of that name in the tree."""
    here = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if here in by_path:
        return here
    for top in SCANNED + ["."]:
        p = os.path.normpath(os.path.join(top, inc))
        if p in by_path:
            return p
    cands = by_base.get(os.path.basename(inc), [])
    cands = [c for c in cands if c.endswith("/" + inc) or c == inc]
    if len(cands) == 1:
        return cands[0]
    if inc.endswith((".pb-c.h", ".skel.h")):
        return "<generated>/" + inc
    return None


def find_cycle(graph):
    """One cycle of graph (node -> set of nodes) as a list, or None."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(root)
    files = collect(root)
    by_path = set(files)
    by_base = {}
    for f in files:
        by_base.setdefault(os.path.basename(f), []).append(f)
    errors = []
    file_graph = {}
    dir_graph = {}
    where = {}
    for src in files:
        su = unit_of(src)
        if su is None:
            continue
        with open(os.path.join(root, src), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                dst = resolve(m.group(1), src, by_base, by_path)
                if dst is None:
                    continue  # a system or build header: not ours
                du = unit_of(dst)
                if du is None:
                    continue
                if not allowed(su[0], du[0]):
                    errors.append(f"{src}:{lineno}: includes {dst} ({du[0]} layer) "
                                  f"from the {su[0]} layer, which may not use it")
                if su[0] in NO_WIRE and WIRE_HEADER.search(dst):
                    errors.append(f"{src}:{lineno}: includes {dst} from the {su[0]} layer, "
                                  f"which knows no rpc or protobuf")
                if api_handler_include(src, dst):
                    errors.append(f"{src}:{lineno}: includes {dst}, another rpc handler's "
                                  f"header (wire handlers together in symbolizer/service.c)")
                file_graph.setdefault(src, set()).add(dst)
                where[(src, dst)] = lineno
                if su[0] == du[0] and su[1] != du[1]:
                    dir_graph.setdefault(su[1], set()).add(du[1])
                    where.setdefault((su[1], du[1]), f"{src}:{lineno}")
    cycle = find_cycle(dir_graph)
    if cycle:
        steps = ", ".join(f"{a} -> {b} ({where[(a, b)]})" for a, b in zip(cycle, cycle[1:]))
        errors.append(f"{cycle[0]}: directories include each other in a circle: {steps}")
    cycle = find_cycle(file_graph)
    if cycle:
        steps = " -> ".join(cycle)
        errors.append(f"{cycle[0]}:{where[(cycle[0], cycle[1])]}: include cycle: {steps}")
    for e in errors:
        print(e)
    if errors:
        print(f"layering: {len(errors)} violation(s)", file=sys.stderr)
        return 1
    print(f"layering: {len(files)} files, includes read one way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
