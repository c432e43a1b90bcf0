"""Probe plans of Go executables (issue 7, docs/go-probes.md), the
symbolizer's half: symbolizer/probes/go_plan.c (through go-plan-dump)
against a plan computed independently from the same binary (go_plan.py:
`go tool objdump` for the entry and every RET, readelf for the program
headers and the DWARF), for a build with DWARF and a `-s -w` one (symbols
from .gopclntab, offsets from the table); and the real symbolizer sending
that plan to a sensor that maps the file, as it does unwind tables."""
import json
import os
import subprocess

import pytest

from conftest import BUILD, SRC, Symbolizer, make_tmp, wait_for
from pysensor import PySensor
import go_plan

DUMP = BUILD / "tests" / "unit" / "go-plan-dump"


@pytest.fixture(scope="module")
def gobins():
    tmp = make_tmp("sonde-goplan.")
    env = dict(os.environ, GOTOOLCHAIN="local", GOPROXY="off", GOFLAGS="-mod=mod",
               GOCACHE=str(tmp / "gocache"), GOPATH=str(tmp / "gopath"), HOME=str(tmp))
    src = SRC / "tests" / "workload" / "gohttp"
    full, stripped = tmp / "gohttp", tmp / "gohttp-stripped"
    subprocess.run([go_plan.GO, "build", "-o", str(full), "."], check=True, env=env, cwd=src, timeout=300)
    subprocess.run([go_plan.GO, "build", "-ldflags=-s -w", "-o", str(stripped), "."], check=True, env=env,
                   cwd=src, timeout=300)
    yield full, stripped
    subprocess.run(["rm", "-rf", str(tmp)])


def dump(path):
    out = subprocess.run([str(DUMP), str(path)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def compare(mine, ref):
    assert mine["go"] and mine["error"] is None, mine
    assert mine["go_version"].startswith(ref["go_version"]), (mine["go_version"], ref["go_version"])
    assert [p["probe"] for p in mine["probes"]] == [p["probe"] for p in ref["probes"]]
    for mp, rp in zip(mine["probes"], ref["probes"]):
        assert mp["error"] is None, mp
        assert [(a["program"], a["file_offset"]) for a in mp["attaches"]] == \
               [(a["program"], a["file_offset"]) for a in rp["attaches"]], mp["probe"]
        for k, v in rp["consts"].items():
            assert mp["consts"][k] == v, (mp["probe"], k, mp["consts"][k], v)


def test_plan_matches_objdump_and_dwarf(gobins):
    full, stripped = gobins
    mine = dump(full)
    assert mine["offsets_from"] == "dwarf"
    compare(mine, go_plan.plan_for(str(full), str(full)))
    # Stripped: functions from .gopclntab, offsets from the go1.19 table.
    # go tool objdump cannot read it; -s -w drops symbols and DWARF but
    # not code, so the reference is the DWARF build's plan, checked
    # against the stripped file's own bytes (a RET at every RET offset,
    # the same entry bytes).
    mine_s = dump(stripped)
    assert mine_s["offsets_from"] == "table"
    ref = go_plan.plan_for(str(full), str(full))
    compare(mine_s, ref)
    sb, fb = stripped.read_bytes(), full.read_bytes()
    for p in mine_s["probes"]:
        entry = p["attaches"][0]["file_offset"]
        assert sb[entry:entry + 16] == fb[entry:entry + 16]
        for a in p["attaches"][1:]:
            assert sb[a["file_offset"]] in (0xc3, 0xc2), a
    # Not Go: no plan.
    assert dump("/usr/bin/xz") == {"go": False}


def test_symbolizer_sends_the_plan(gobins):
    full, _ = gobins
    tmp = make_tmp()
    sym = Symbolizer(tmp)
    try:
        ps = PySensor(sym.address, {str(full): full.read_bytes()})
        ps.hello()
        ps.process(777, "gohttp", [str(full)])
        wait_for(lambda: ps.plans or None, 60, "a ProbePlan from the symbolizer", interval=0.2)
        plan = ps.plans[0]
        assert plan.file_id == ps.ids[str(full)]
        assert plan.error == "" and plan.go_version.startswith("go1.19")
        mine = dump(full)
        got = {p.probe: p for p in plan.probes}
        for mp in mine["probes"]:
            gp = got[mp["probe"]]
            assert {c.name: c.value for c in gp.consts} == mp["consts"]
            assert [(a.program, a.file_offset) for a in gp.attaches] == \
                   [(a["program"], a["file_offset"]) for a in mp["attaches"]]
        ps.close()
        # A restarted symbolizer sends it again, from its cache.
        sym.stop()
        sym = Symbolizer(tmp)
        ps = PySensor(sym.address, {str(full): full.read_bytes()})
        ps.hello()
        ps.process(778, "gohttp", [str(full)])
        wait_for(lambda: ps.plans or None, 30, "the ProbePlan again, from the cache", interval=0.2)
        assert not ps.reads, "the cached plan needed no reads"
        ps.close()
    finally:
        sym.stop()
