"""deploy/quickstart prints the host's top functions within 40 s."""
import subprocess
import time

from conftest import SRC, WORKLOAD, parse_folded


def test_quickstart_within_40_seconds(tmp_path):
    busy = subprocess.Popen([str(WORKLOAD), "35"])  # something to see on the host
    try:
        t0 = time.monotonic()
        p = subprocess.run([str(SRC / "deploy" / "quickstart")], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        busy.kill()
        busy.wait()
    print(f"quickstart took {elapsed:.1f} s")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "FUNCTION" in p.stdout and "leaf_b_hash" in p.stdout, p.stdout
    assert elapsed < 40, f"quickstart took {elapsed:.1f} s"
    stacks = parse_folded((tmp_path / "sonde-profile.folded").read_text())
    assert sum(c for _, c in stacks) > 100
