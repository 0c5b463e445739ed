"""bench/compare-h2 (issue 20): a --quick run against the gatling under test and whichever of
h2o and nginx are installed; every row of the table is there, with figures for each server
that ran, and the h2 connections really were h2 over TLS 1.3 with the one suite."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, http_only, serial

PEERS = {"h2o": "/usr/bin/h2o", "nginx": "/usr/sbin/nginx"}


@serial
@http_only  # the driver sets up its own HTTPS; one pass is enough
def test_compare_h2_quick(build, tmp_path):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    for tool in ("h2load", "nghttp", "curl", "taskset"):
        if not shutil.which(tool):
            pytest.skip("%s missing: sh tests/setup.sh bench installs it" % tool)
    servers = ["gatling"] + [n for n, path in PEERS.items() if os.access(path, os.X_OK)]
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-h2"), "--quick",
                        "--idle", "300", "--servers", ",".join(servers), "--gatling",
                        build.binary, "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    table = (out / "table.md").read_text()
    for row in ("1 KiB, 100 conns x 10 streams (h2load)", "server CPU per request",
                "1 MiB, 10 conns (h2load)", "server CPU per MB",
                "page load: html + 50 assets, last byte", "memory per idle h2 connection, RSS"):
        assert row in table, table
    # the targets are ratios to the peers: without one (a machine without `setup.sh bench`)
    # there is nothing to compare, and the driver says so by leaving them out
    assert ("Targets (issue 20)" in table) == (len(servers) > 1), (servers, table)
    data = json.loads((out / "results.json").read_text())
    assert sorted(data["table"]) == sorted(servers), data["table"]
    for name in servers:
        row = data["table"][name]
        for key in ("small_rps", "small_cpu", "big_mbs", "big_cpu", "page_ms", "idle_rss"):
            assert row[key] and row[key] > 0, (name, key, row)
        for r in data["samples"][name]:
            assert not r.get("problem"), (name, r)
            for test in ("small", "big"):
                if test in r:
                    assert r[test]["cipher"] == "TLS_AES_128_GCM_SHA256", r[test]
                    assert r[test]["errors"] == 0, (name, test, r[test])
            if "idle" in r:
                assert r["idle"]["held"] == 300, r["idle"]
                assert r["idle"]["cipher"] == "TLS_AES_128_GCM_SHA256", r["idle"]
    if not data["meta"]["bench_h2"]:
        assert "bench --h2 row skipped" in table, table
    else:
        assert "(bench --h2)" in table, table
    assert "h2load" in (out / "commands.txt").read_text()
