"""bench/ledger (issue 85): the server's instructions per request under callgrind, against a
ledger file.  Two rows measured on small counts (-n 100): the table's shape (each row, its count,
the file's, the change) and a count a server can have; a planted file whose numbers are a fifth
under the measured ones fails (exit 1, the rows named); one whose numbers are what was
measured passes (within 10%: -n 100 is a short count); --update writes the rows with the
commit, the date and the why, and refuses an empty why."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, http_only

LEDGER = os.path.join(ROOT, "bench", "ledger")
ROW = re.compile(r"^(h1|h2c) +(\d+) +(\d+|-) +([-+]\d+\.\d\d%|new)(.*)$", re.M)


def run(build, tmp_path, *args):
    cmd = [sys.executable, LEDGER, "--gatling", build.binary, "--bench",
           os.path.join(os.path.dirname(build.binary), "bench"), "--rows", "h1,h2c", "-n", "100"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=600,
                          cwd=str(tmp_path))


@http_only  # the tool starts its own servers; one pass (run-check's ONCE) is enough
def test_ledger_table_and_planted_rise(build, tmp_path):
    if build.name != "epoll":
        pytest.skip("the ledger is measured on the plain epoll build")
    for tool in ("valgrind", "h2load", "openssl"):
        if not shutil.which(tool):
            pytest.skip("%s missing: sh tests/setup.sh check installs it" % tool)
    if not os.access(os.path.join(os.path.dirname(build.binary), "bench"), os.X_OK):
        pytest.skip("no bench client beside the server (make IO=epoll tests-build)")
    f = tmp_path / "ledger.tsv"
    p = run(build, tmp_path, "--file", str(f), "--update", "first count")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rows = {m[0]: m for m in ROW.findall(p.stdout)}
    assert sorted(rows) == ["h1", "h2c"], p.stdout
    for name, n, base, change, _ in rows.values():
        assert base == "-" and change == "new", p.stdout  # no file yet
        assert 1000 < int(n) < 1000000, p.stdout  # callgrind counted a request, not a run
    lines = [x.split("\t") for x in f.read_text().splitlines() if not x.startswith("#")]
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=8", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    assert [x[0] for x in lines] == ["h1", "h2c"], lines
    for x in lines:
        assert len(x) == 5 and x[2] == head and re.match(r"\d{4}-\d\d-\d\d$", x[3]), x
        assert x[4] == "first count", x
    # the same binary against its own counts: exit 0 (10%: what 100 requests' rounds vary)
    p = run(build, tmp_path, "--file", str(f), "--max-rise", "10")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(ROW.findall(p.stdout)) == 2 and "ROSE" not in p.stdout, p.stdout
    # a file a fifth under what this binary costs: the rise is seen, exit 1
    low = "".join("%s\t%d\tplanted\t2026-01-01\tplanted\n" % (x[0], int(x[1]) * 80 // 100)
                  for x in lines)
    f.write_text(low)
    p = run(build, tmp_path, "--file", str(f))
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    for name, _, _, change, flag in ROW.findall(p.stdout):
        assert 10 < float(change[:-1]) < 45 and "ROSE" in flag, p.stdout
    assert re.search(r"^ledger: h1, h2c rose more than allowed over ", p.stdout, re.M), p.stdout


def test_ledger_refuses_bad_options(build, tmp_path):
    """An unknown row, a binary that is not there, an empty why: a message and exit 2, before
    anything is measured."""
    for args, why in ((["--rows", "h9"], "unknown rows h9"),
                      (["--gatling", str(tmp_path / "none")], "not an executable"),
                      (["--update", " "], "--update needs a why")):
        p = subprocess.run([sys.executable, LEDGER, "--rows", "h1", "-n", "2"] + args,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 2 and why in p.stderr, (args, p.returncode, p.stderr)
