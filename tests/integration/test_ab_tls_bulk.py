"""bench/ab-tls-bulk (issue 33, "Aligned reads" in bench/doc/compare-h2.md): one short round
of the gatling under test against itself, over h2 and over HTTPS/1.1, the two loaded in turn
and then together.  Every sample moved bytes without an error, the CPU per MB is a figure a
server can have (not zero: schedstat read; not absurd), and the ratio lines are there."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, http_only, serial


@serial
@http_only  # the driver sets up its own HTTPS; one pass is enough
@pytest.mark.parametrize("proto,together", [("h2", False), ("h1", True)])
def test_ab_tls_bulk_one_round(build, tmp_path, proto, together):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    for tool in ("h2load", "taskset", "openssl"):
        if not shutil.which(tool):
            pytest.skip("%s missing: sh tests/setup.sh bench installs it" % tool)
    cmd = [sys.executable, os.path.join(ROOT, "bench", "ab-tls-bulk"), "--base", build.binary,
           "--new", build.binary, "--proto", proto, "--rounds", "1", "--duration", "1",
           "-o", str(tmp_path)] + (["--together"] if together else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    samples = re.findall(r"^round 1 (base|new) *: +(\d+) MB/s +([\d.]+) us/MB .*errors (\d+)$",
                         p.stdout, re.M)
    assert sorted(s[0] for s in samples) == ["base", "new"], p.stdout
    for _, mbs, us, errors in samples:
        assert int(mbs) > 0 and int(errors) == 0, p.stdout
        assert 10 < float(us) < 100000, p.stdout  # CPU per MB really measured
    for what in ("server CPU per MB, us", "MB/s"):
        assert re.search(r"^%s %s: base [\d.]+ new [\d.]+; new/base per round median [\d.]+"
                         % (proto, re.escape(what)), p.stdout, re.M), p.stdout
