"""The HTML flame graph, checked in a real browser (Debian's Chromium,
driven by playwright-core): frames, tooltip, zoom, search, no network."""
import json
import subprocess

from conftest import SONDE, SRC, WORKLOAD, make_tmp


def test_flamegraph_in_a_browser():
    tmp = make_tmp()
    out = tmp / "profile.html"
    rec = subprocess.run([str(SONDE), "record", "-F", "99", "-o", str(out), "--", str(WORKLOAD), "3"],
                         capture_output=True, text=True, timeout=120)
    assert rec.returncode == 0, rec.stderr[-2000:]
    html = out.read_text()
    assert "http://" not in html and "https://" not in html, "the page must not load anything"
    p = subprocess.run(["node", str(SRC / "tests" / "browser" / "flamegraph.mjs"), str(out), "leaf_b_hash"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout)
    print(r)
    assert not r["errors"] and not r["requests"], r
    assert r["frames"] > 10
    for name in ("all", "main", "leaf_a_compute", "leaf_b_hash", "work_lib_leaf"):
        assert name in r["names"], r["names"]
    assert r["tooltip"].startswith("leaf_b_hash\n") and "samples" in r["tooltip"] and "%" in r["tooltip"]
    # Zoom: the clicked frame fills the width afterwards.
    assert r["zoom_width_after"] > 1.5 * r["zoom_width_before"], r
    # Search: all three leaves match, and they hold most of the samples.
    share = float(r["matched"].rsplit(" ", 1)[1].rstrip("%"))
    assert r["hit_names"] == ["leaf_a_compute", "leaf_b_hash", "work_lib_leaf"] and share > 80, r
