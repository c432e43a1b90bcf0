"""The root sensor's side of the trust boundary (issue 27, holes 1-3),
each checked by performing the attack or the forbidden call for real:
an unprivileged user cannot make the sensor open a file of its choosing
(map_files only, regular files only, the maps line's dev/inode), the
first /proc scan runs only after the privilege drop, and the running
sensor's own seccomp filter refuses what its mode does not need."""
import hashlib
import os
import pathlib
import re
import shutil
import sqlite3
import subprocess
import time

import pytest

from conftest import SENSOR, Symbolizer, symbols_pb2, wait_for

NOBODY = 65534


def htlhash(data):
    return hashlib.sha256(data[:4096] + data[-4096:] + len(data).to_bytes(8, "big")).digest()[:16]


# The attacker: maps /dev/zero (a character device, so the map_files open
# is not a regular file) private and executable, writes a spin loop at
# OFFSET in it, chroots into DIR (where dev/zero is a symlink the test
# planted) and spins in the mapping. Run as nobody under `unshare -Ur`.
ATTACKER_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned long off = strtoul(argv[2], NULL, 0);
	size_t len = (off / 4096 + 2) * 4096;
	int fd = open("/dev/zero", O_RDONLY);
	unsigned char *m;

	if (fd < 0) { perror("open"); return 1; }
	m = mmap(NULL, len, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) { perror("mmap"); return 1; }
	m[off] = 0xeb; /* jmp . */
	m[off + 1] = 0xfe;
	if (chroot(argv[1]) < 0 || chdir("/") < 0) { perror("chroot"); return 1; }
	printf("ready %lx\n", (unsigned long)m);
	fflush(stdout);
	((void (*)(void))(m + off))();
	return 0;
}
"""

SECRET_C = r"""
int sonde_secret_xyzzy_function(int x)
{
	int s = 0;
	for (int i = 0; i < x; i++)
		s += i * x;
	return s;
}
int sonde_secret_plugh_helper(int x) { return x + 42; }
"""


def _compile(src, out, *flags):
    c = out.with_suffix(".c")
    c.write_text(src)
    subprocess.run(["gcc", "-O1", "-o", str(out), str(c), *flags], check=True)


def _file_offset(lib, name):
    """The file offset of function name in lib (st_value through its
    section's address and offset)."""
    syms = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True, check=True).stdout
    addr = next(int(ln.split()[0], 16) for ln in syms.splitlines() if ln.endswith(" " + name))
    for ln in subprocess.run(["readelf", "-SW", str(lib)], capture_output=True, text=True,
                             check=True).stdout.splitlines():
        m = re.search(r"\]\s+\.text\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", ln)
        if m:
            sh_addr, sh_off, sh_size = (int(v, 16) for v in m.groups())
            assert sh_addr <= addr < sh_addr + sh_size
            return addr - sh_addr + sh_off
    raise AssertionError("no .text")


@pytest.fixture
def secrets(tmp_path):
    """A root-only library (0600 in a 0700 directory) and the attacker's
    binary and chroot directories, one per target."""
    vault = pathlib.Path("/root") / f"sonde-vault.{os.getpid()}.{time.monotonic_ns()}"
    vault.mkdir(mode=0o700)
    try:
        lib = vault / "libsecret.so"
        _compile(SECRET_C, lib, "-shared", "-fPIC")
        lib.chmod(0o600)
        attacker = tmp_path / "attacker"
        _compile(ATTACKER_C, attacker)
        attacker.chmod(0o755)
        yield {"lib": lib, "attacker": attacker,
               "lib_offset": _file_offset(lib, "sonde_secret_xyzzy_function")}
    finally:
        shutil.rmtree(vault, ignore_errors=True)


def _start_attacker(tmp_path, attacker, target, offset):
    """As nobody, in its own user namespace: a chroot directory whose
    dev/zero is a symlink to target, and the attacker inside it."""
    root = tmp_path / f"chroot-{target.name}"
    root.mkdir()
    (root / "dev").mkdir()
    os.symlink(str(target), root / "dev" / "zero")
    for p in (root, root / "dev"):
        os.lchown(p, NOBODY, NOBODY)
    os.lchown(root / "dev" / "zero", NOBODY, NOBODY)

    def demote():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    p = subprocess.Popen(["unshare", "-Ur", str(attacker), str(root), hex(offset)], preexec_fn=demote,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
    line = p.stdout.readline()
    assert line.startswith("ready"), (line, p.stderr.read() if p.poll() is not None else "")
    return p


def test_chroot_symlink_attack_reaches_no_secret(tmp_path, secrets):
    """Hole 1: a process maps /dev/zero executable and chroots where
    /dev/zero is a symlink to /etc/shadow (or to a root-only library).
    The sensor must not hash, register or serve either file: map_files
    is a character device, and nothing falls back to the path text."""
    shadow_id = htlhash(pathlib.Path("/etc/shadow").read_bytes())
    lib_id = htlhash(secrets["lib"].read_bytes())
    sym = Symbolizer(tmp_path)
    attackers, sensor = [], None
    try:
        attackers.append(_start_attacker(tmp_path, secrets["attacker"], pathlib.Path("/etc/shadow"), 0))
        attackers.append(_start_attacker(tmp_path, secrets["attacker"], secrets["lib"],
                                         secrets["lib_offset"]))
        args = ["--frequency", "99", "--flush-ms", "500"]
        for a in attackers:
            args += ["--pid", str(a.pid)]
        sensor = subprocess.Popen([str(SENSOR), "--symbolizer", sym.address, *args],
                                  stdout=open(tmp_path / "sensor.log", "w"), stderr=subprocess.STDOUT)
        # The spinning attackers' samples are stored: the sensor scanned
        # them, sent their mappings and flushed more than once.
        wait_for(lambda: sym.status().samples_stored >= 100, 30, "samples of the attackers")
        time.sleep(2)  # any analysis of a registered file is done by now
        st = sym.status()
        folded = sym.symbols.Folded(symbols_pb2.ProfileQuery(), timeout=10)
        top = sym.symbols.Top(symbols_pb2.ProfileQuery(), timeout=10)
        res = sym.symbols.Symbolize(symbols_pb2.SymbolizeRequest(queries=[
            symbols_pb2.SymbolizeQuery(file_id=lib_id, addresses=[secrets["lib_offset"]])]),
            timeout=10)
    finally:
        for a in attackers:
            a.kill()
            a.wait()
        if sensor:
            sensor.terminate()
            sensor.wait(30)
        sym.stop()
    log = (tmp_path / "sensor.log").read_text()
    assert sensor.returncode == 0, log
    db = sqlite3.connect(f"file:{sym.cache}?mode=ro", uri=True)
    ids = {bytes(r[0]) for r in db.execute("SELECT file_id FROM files")}
    db.close()
    assert ids, "the symbolizer analysed nothing at all"
    text = str(folded) + str(top) + str(res) + str(st)
    problems = []
    if shadow_id in ids:
        problems.append("/etc/shadow was registered and served")
    if lib_id in ids:
        problems.append("the root-only library was registered and served")
    if "sonde_secret" in text:
        problems.append("the root-only library's names reached a client: " +
                        ", ".join(sorted(set(re.findall(r"sonde_secret\w*", text)))))
    assert not problems, problems
