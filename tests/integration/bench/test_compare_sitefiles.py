"""bench/compare-sitefiles (issue 77): a tiny run (two rounds of a second, with _headers)
measures both sites, writes its samples, and says the median ratio and the verdict; the
verdict itself is the driver's on a quiet machine (bench/doc/compare-sitefiles.md), not
judged here where the suite shares the CPUs."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, http_only, serial


@serial
@http_only  # the driver starts its own servers; one pass is enough
def test_compare_sitefiles_tiny(build, tmp_path):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-sitefiles"),
                        "--rounds", "2", "--duration", "1", "--headers",
                        "--gatling", build.binary, "--bench", os.path.join(build.dir, "bench"),
                        "-o", str(out)], capture_output=True, text=True, timeout=180)
    assert p.returncode in (0, 1), p.stderr[-3000:]
    m = re.search(r"median (\d+\.\d+) \(none \d+ ns, rules \d+ ns a request\); budget 1\.05: "
                  r"(within|OVER)", p.stdout)
    assert m, p.stdout + p.stderr[-2000:]
    assert (p.returncode == 0) == (m.group(2) == "within")
    data = json.loads((out / "samples.json").read_text())
    assert len(data["ratios"]) == 2 and data["headers"] is True
    assert all(len(v) == 2 and min(v) > 0 for v in data["samples_ns"].values()), data
