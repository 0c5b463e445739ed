"""bench/compare-ftp (issue 22): a tiny run (one round of half a second, 50 idle sessions)
against vsftpd and the gatling under test: every row of the table has vsftpd's figure, the
downloads had no error, the idle sessions were all held, and gatling is measured when its binary
has FTP (-f) and otherwise named as skipped.  Needs root, vsftpd and the `ftp` user."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, http_only, serial

sys.path.insert(0, os.path.join(ROOT, "bench"))
from benchkit import ftp as cf  # noqa: E402


@serial
@http_only  # the driver speaks FTP to its own servers; one pass is enough
def test_compare_ftp_tiny(build, tmp_path):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    if os.getuid() != 0:
        pytest.skip("vsftpd chroots anonymous sessions: run as root")
    vsftpd = cf.find_binary("vsftpd")
    if not os.access(vsftpd, os.X_OK):
        pytest.fail(f"{vsftpd} missing: sh tests/setup.sh installs vsftpd")
    has_ftp = cf.gatling_has_ftp(build.binary)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-ftp"),
                        "--servers", "gatling,vsftpd", "--rounds", "1", "--duration", "0.5",
                        "--idle", "50", "--gatling", build.binary,
                        "--bench", os.path.join(build.dir, "bench"), "-o", str(out)],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    table = (out / "table.md").read_text()
    for row in ("1 KiB downloads, 100 control connections", "latency p99, RETR to 226",
                "1 MiB downloads, 10 control connections",
                "memory per idle logged-in session, Pss", "server processes per idle session"):
        assert row in table, table
    data = json.loads((out / "results.json").read_text())
    servers = ["gatling", "vsftpd"] if has_ftp else ["vsftpd"]
    assert sorted(data["table"]) == servers, data["table"]
    if not has_ftp:
        assert "gatling: not run" in table and "no -f option" in table, table
        assert "skipping gatling" in p.stderr, p.stderr
    for name in servers:
        row = data["table"][name]
        for key in ("small_dps", "small_p99", "big_mbs", "idle_pss", "idle_procs"):
            assert row[key] is not None, (name, key, row)
        assert row["small_dps"] > 0 and row["big_mbs"] > 0, row
    # vsftpd holds a process per session: hundreds of KiB each, well above the noise;
    # gatling's few KiB are within what Pss moves when other processes start or stop
    # mapping its binary (its sign alone once failed in make check), so it is judged
    # against vsftpd's, not against zero
    assert data["table"]["vsftpd"]["idle_pss"] > 0, data["table"]["vsftpd"]
    if has_ftp:
        assert data["table"]["gatling"]["idle_pss"] < data["table"]["vsftpd"]["idle_pss"], data["table"]
        for r in data["samples"][name]:
            assert not r.get("problem"), (name, r)
            for test in ("small", "big"):
                assert r[test]["errors"] == 0 and r[test]["downloads"] > 0, (name, test, r)
            assert r["idle"]["held"] == 50 and r["idle"]["failed"] == 0, r["idle"]
    # vsftpd forks per session: at least one more process for each idle session
    assert data["table"]["vsftpd"]["idle_procs"] >= 1, data["table"]["vsftpd"]
    tsv = (out / "results.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == ["measurement", "unit"] + servers, tsv[0]
    assert "bench" in (out / "commands.txt").read_text()
    assert "anon_root=" in (out / "vsftpd.conf").read_text()
