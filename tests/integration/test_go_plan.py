"""Probe plans of Go executables (issue 7, docs/go-probes.md), the
symbolizer's half: symbolizer/probes/go_plan.c (through go-plan-dump)
against a plan computed independently from the same binary (go_plan.py:
`go tool objdump` for the entry and every RET, readelf for the program
headers and the DWARF), for a build with DWARF and a `-s -w` one (symbols
from .gopclntab, offsets from the table); and the real symbolizer sending
that plan to a sensor that maps the file, as it does unwind tables."""
import json
import subprocess

import pytest

from conftest import BUILD, SRC, Symbolizer, go_env, make_tmp, wait_for
from pysensor import PySensor
import go_plan

DUMP = BUILD / "tests" / "unit" / "go-plan-dump"


def build_pair(go, tmp, mode="exe"):
    """gohttp built by the toolchain go, with DWARF and -s -w. mode
    "cgo-pie": a PIE linked by the system linker."""
    link = ["-linkmode=external"] if mode == "cgo-pie" else []
    mode = "pie" if mode == "cgo-pie" else mode
    env = go_env(tmp)
    src = SRC / "tests" / "workload" / "gohttp"
    full, stripped = tmp / f"gohttp-{mode}", tmp / f"gohttp-{mode}-stripped"
    subprocess.run([go, "build", f"-buildmode={mode}", *(["-ldflags=" + link[0]] if link else []),
                    "-o", str(full), "."], check=True, env=env, cwd=src, timeout=300)
    subprocess.run([go, "build", f"-buildmode={mode}", "-ldflags=" + " ".join(link + ["-s -w"]),
                    "-o", str(stripped), "."], check=True, env=env, cwd=src, timeout=300)
    return full, stripped


@pytest.fixture(scope="module")
def gobins():
    tmp = make_tmp("sonde-goplan.")
    yield build_pair(go_plan.GO, tmp)
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


# Every Go here: each build with DWARF against objdump and its DWARF; each
# -s -w build (functions from .gopclntab, the table's offsets) against the
# same.
# A PIE build too: its table is .data.rel.ro.gopclntab, its offsets the
# same computation; and a cgo PIE linked by the system linker, whose table
# has no section (found inside .data.rel.ro, its text start relocated).
@pytest.mark.parametrize("go,mode", [(go_plan.GO, "exe")] + [(g, "exe") for g in go_plan.GO_BACKPORTS] +
                         [(go_plan.GO, "pie"), (go_plan.GO, "cgo-pie")],
                         ids=lambda v: v.split("/")[-3] if "/" in v else v)
def test_plan_matches_objdump_and_dwarf(go, mode, gobins, tmp_path):
    full, stripped = gobins if (go, mode) == (go_plan.GO, "exe") else build_pair(go, tmp_path, mode)
    mine = dump(full)
    assert mine["offsets_from"] == "dwarf"
    compare(mine, go_plan.plan_for(str(full), str(full)))
    # Stripped: functions from .gopclntab, offsets from the table (which
    # compare() checks against the DWARF build's offsets).
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


def test_buildinfo_layouts_and_versions(gobins):
    """Small ELFs assembled by tests/fuzz/make-go-corpus.py (the fuzz
    seeds' maker) with the two hooked functions: the Go 1.18+ inline
    version and the older pointer layout are both read; go1.16 has no
    register ABI; and the plan's entries and RETs are where objdump puts
    those symbols and their ret instructions."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_go_corpus", SRC / "tests" / "fuzz" / "make-go-corpus.py")
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    full, _ = gobins
    bi = mk.section(full, ".go.buildinfo")
    tmp = make_tmp("sonde-gobi.")
    try:
        inline = tmp / "inline"
        inline.write_bytes(mk.elf(str(tmp), bi, "a"))
        old = tmp / "pointers"
        old.write_bytes(mk.elf(str(tmp), "go1.17.13", "b"))
        older = tmp / "pointers16"
        older.write_bytes(mk.elf(str(tmp), "go1.16.15", "c"))

        d = dump(old)
        assert d["go"] and d["go_version"] == "go1.17.13"
        # No DWARF and not a version of the table: said so, no probes.
        assert "offset table" in d["error"] and d["probes"] == []
        d = dump(older)
        assert d["go_version"] == "go1.16.15" and "register ABI" in d["error"]

        d = dump(inline)
        assert d["error"] is None and d["offsets_from"] == "table"
        assert d["go_version"] == subprocess.run(
            [go_plan.GO, "version", str(full)], capture_output=True, text=True).stdout.split()[1]
        # Reference: objdump's symbol addresses and ret instructions,
        # through readelf's program headers to file offsets.
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(inline)],
                             capture_output=True, text=True, check=True).stdout
        ref, cur = {}, None
        for line in dis.splitlines():
            if line.endswith(">:"):
                cur = line.split("<", 1)[1][:-2]
                ref[cur] = [int(line.split()[0], 16)]
            elif cur and "\tret" in line:
                ref[cur].append(int(line.split(":")[0], 16))
        ph = subprocess.run(["readelf", "-lW", str(inline)], capture_output=True, text=True).stdout
        loads = [[int(x, 16) for x in l.split()[1:4]] for l in ph.splitlines() if l.strip().startswith("LOAD")]

        def off(v):
            return next(o + v - va for o, va, _ in sorted(loads, key=lambda x: -x[1]) if va <= v)
        syms = {"go_http_server": "net/http.serverHandler.ServeHTTP",
                "go_http_client": "net/http.(*Transport).roundTrip"}
        for p in d["probes"]:
            assert p["error"] is None, p
            want = [off(a) for a in ref[syms[p["probe"]]]]
            assert [a["file_offset"] for a in p["attaches"]] == want, p["probe"]
        assert len(ref[syms["go_http_server"]]) == 3  # ret and ret $8
    finally:
        subprocess.run(["rm", "-rf", str(tmp)])


def test_go_file_cached_before_plans_is_planned(gobins):
    """A cache from before probe plans (schema 7 and older) has the Go
    executable's unwind table but no plan; analysis, which makes both,
    would never run for it again. Opening that cache forgets the unwind
    tables once (schema 8), so the file is read and planned again."""
    import sqlite3
    full, _ = gobins
    tmp = make_tmp()
    sym = Symbolizer(tmp)
    try:
        ps = PySensor(sym.address, {str(full): full.read_bytes()})
        ps.hello()
        ps.process(779, "gohttp", [str(full)])
        wait_for(lambda: ps.plans or None, 60, "a ProbePlan from the symbolizer", interval=0.2)
        ps.close()
        sym.stop()
        db = sqlite3.connect(str(sym.cache))
        assert db.execute("SELECT count(*) FROM unwind").fetchone()[0] >= 1
        db.execute("DELETE FROM probe_plans")
        db.execute("PRAGMA user_version = 7")
        db.commit()
        db.close()

        sym = Symbolizer(tmp)
        ps = PySensor(sym.address, {str(full): full.read_bytes()})
        ps.hello()
        ps.process(780, "gohttp", [str(full)])
        wait_for(lambda: ps.plans or None, 60, "the ProbePlan made again", interval=0.2)
        assert ps.reads, "the file was read again"
        assert ps.plans[0].error == "" and ps.plans[0].file_id == ps.ids[str(full)]
        ps.close()
    finally:
        sym.stop()
