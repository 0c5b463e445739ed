"""bench/ab (issue 33, "HPACK" and "Aligned reads" in bench/doc/compare-h2.md): one short round
of the gatling under test against itself: 1 MiB over h2 with the two loaded in turn, over
HTTPS/1.1 together, 1 KiB over h2c, 1 KiB over h3 together (gatling's bench --h3).  Every sample was answered without an error, the CPU per
MB or per request is a figure a server can have (not zero: schedstat read; not absurd), and
the ratio lines are there."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, http_only


@http_only  # the driver sets up its own HTTPS; one pass (run-check's ONCE) is enough
# not serial: it checks that the figures are there, not what they are
@pytest.mark.parametrize("row,proto,together", [("1m", "h2", False), ("1m", "h1", True),
                                                ("1k", "h2c", False), ("1k", "h3", True)])
def test_ab_one_round(build, tmp_path, row, proto, together):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    for tool in ("h2load", "taskset", "openssl"):
        if not shutil.which(tool):
            pytest.skip("%s missing: sh tests/setup.sh bench installs it" % tool)
    extra = ["--together"] if together else []
    if proto == "h3":
        client = os.path.join(os.path.dirname(build.binary), "bench")
        version = subprocess.run([build.binary, "-V"], capture_output=True, text=True)
        if "h3" not in (version.stdout + version.stderr).split() or not os.access(client, os.X_OK):
            pytest.skip("a build without HTTP/3 or without its bench client")
        extra += ["--client", client]
    cmd = [sys.executable, os.path.join(ROOT, "bench", "ab"), "--base", build.binary,
           "--new", build.binary, "--row", row, "--proto", proto, "--rounds", "1",
           "--duration", "1", "-o", str(tmp_path)] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rate, unit, lo, hi = (("MB/s", "MB", 10, 100000) if row == "1m"
                          else ("req/s", "request", 0.1, 1000))
    samples = re.findall(r"^round 1 (base|new) *: +(\d+) %s +([\d.]+) us/%s .*errors (\d+)$"
                         % (re.escape(rate), unit), p.stdout, re.M)
    assert sorted(s[0] for s in samples) == ["base", "new"], p.stdout
    for _, n, us, errors in samples:
        assert int(n) > 0 and int(errors) == 0, p.stdout
        assert lo < float(us) < hi, p.stdout  # CPU really measured
    for what in ("server CPU per %s, us" % unit, rate):
        assert re.search(r"^%s %s %s: base [\d.]+ new [\d.]+; new/base per round median [\d.]+"
                         % (row, proto, re.escape(what)), p.stdout, re.M), p.stdout


def test_ab_refuses_bad_options(build, tmp_path):
    """A binary that is not there, or a round count out of range: a message and exit 2, before
    anything is started."""
    ab = os.path.join(ROOT, "bench", "ab")
    for args, why in ((["--base", str(tmp_path / "none"), "--new", build.binary], "not an executable"),
                      (["--base", build.binary, "--new", build.binary, "--rounds", "0"], "--rounds")):
        p = subprocess.run([sys.executable, ab] + args, capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and why in p.stderr, (args, p.returncode, p.stderr)
