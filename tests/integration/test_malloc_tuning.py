"""The symbolizer re-executes itself with glibc's malloc tunables
(symbolizer/malloc_tuning.c): one arena serves every thread, and the heap
is not advised for huge pages (RSS per connected sensor). A caller's own
GLIBC_TUNABLES is left alone."""
import os

from conftest import Symbolizer


def environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)


def heap_flags(pid):
    """VmFlags of the [heap] mappings."""
    flags, in_heap = [], False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if "-" in line.split()[0] and len(line.split()) >= 5:
                in_heap = line.rstrip().endswith("[heap]")
            elif in_heap and line.startswith("VmFlags:"):
                flags.append(line.split()[1:])
    return flags


def thp_mode():
    """The kernel's transparent huge page mode: always, madvise or never."""
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return "never"
    return text[text.index("[") + 1:text.index("]")]


def test_tunables_applied(tmp_path):
    sym = Symbolizer(tmp_path)
    try:
        st = sym.status()  # it serves after the exec (same pid)
        assert st.version
        with open(f"/proc/{sym.proc.pid}/comm") as f:
            assert f.read().strip() == "sonde-symbolize"  # not "exe"
        env = environ(sym.proc.pid)
        assert env.get(b"GLIBC_TUNABLES", b"").startswith(b"glibc.malloc.arena_max=1"), env
        # glibc would advise only in "madvise" mode ("always" needs no
        # advice, "never" takes none).
        if thp_mode() == "madvise":
            flags = heap_flags(sym.proc.pid)
            assert flags and not any("hg" in f for f in flags), f"[heap] advised for huge pages: {flags}"
    finally:
        sym.stop()
    assert "malloc tunables not applied" not in open(tmp_path / "symbolizer.log").read()


def test_callers_tunables_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=7")
    sym = Symbolizer(tmp_path)
    try:
        assert sym.status().version
        assert environ(sym.proc.pid)[b"GLIBC_TUNABLES"] == b"glibc.malloc.tcache_count=7"
        assert not any("hg" in f for f in heap_flags(sym.proc.pid))
    finally:
        sym.stop()
    assert "malloc tunables not applied" in open(tmp_path / "symbolizer.log").read()
