"""bench/compare-h3 (issue 34, "Benchmark"): a --quick run against the gatling under test and
Caddy if it is installed.  Every row is in the table with a figure for each server that ran, the
h3 runs had no error and really were HTTP/3 (bench --h3 verified the certificate against the
driver's CA), gatling's h2 column came from h2load with the one suite, and the idle row held
every connection it asked for."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, http_only, serial, skip_without_h3

CADDY = "/usr/bin/caddy"


@serial
@http_only  # the driver sets up its own HTTPS and QUIC; one pass is enough
def test_compare_h3_quick(build, tmp_path):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    skip_without_h3(build.binary)
    for tool in ("h2load", "curl", "taskset"):
        if not shutil.which(tool):
            pytest.skip("%s missing: sh tests/setup.sh bench installs it" % tool)
    servers = ["gatling"] + (["caddy"] if os.access(CADDY, os.X_OK) else [])
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-h3"), "--quick",
                        "--idle", "200", "--servers", ",".join(servers), "--gatling",
                        build.binary, "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    table = (out / "table.md").read_text()
    for row in ("1 KiB, 100 conns x 10 streams", "server CPU per request", "1 MiB, 10 conns",
                "server CPU per MB", "memory per idle h3 connection, RSS"):
        assert row in table, table
    head = table.splitlines()[0]
    assert " gatling (h3) |" in head and " gatling-h2 (h2, h2load) |" in head, head
    assert " gatling h3 vs gatling h2 |" in head, head
    assert ("caddy (h3)" in head) == ("caddy" in servers), head
    assert "Targets (issue 34)" in table, table
    data = json.loads((out / "results.json").read_text())
    for name in servers:
        row = data["table"][name]
        for key in ("small_rps", "small_cpu", "big_mbs", "big_cpu", "idle_rss"):
            assert row[key] and row[key] > 0, (name, key, row)
        for r in data["samples"][name]:
            assert not r.get("problem"), (name, r)
            for test in ("small", "big"):
                if test in r:
                    assert r[test]["errors"] == 0 and r[test]["lost"] == 0, (name, test, r)
                    assert r[test]["requests"] > 0, (name, test, r)
            if "idle" in r:
                assert r["idle"]["held"] == 200 and r["idle"]["connects"] == 200, r["idle"]
    for r in data["samples"]["gatling"]:
        for test in ("h2small", "h2big"):
            if test in r:
                assert r[test]["cipher"] == "TLS_AES_128_GCM_SHA256", r[test]
                assert r[test]["errors"] == 0, r[test]
    assert data["table"]["gatling-h2"]["small_cpu"] > 0, data["table"]
    commands = (out / "commands.txt").read_text()
    assert "--h3" in commands and "--idle 200" in commands and "h2load" in commands


@http_only  # not serial: it checks that the figures are there, not what they are
def test_h3idle_bench_client(build):
    """bench/h3idle --client bench --cpu: a build's idle connections held by bench --idle and
    its CPU per 1 KiB request; every connection held, and each figure in the table is a
    positive number.  (One build: two would only run the same code twice.)"""
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    skip_without_h3(build.binary)
    if not shutil.which("taskset"):
        pytest.skip("taskset missing")
    bench = os.path.join(os.path.dirname(build.binary), "bench")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "h3idle"), "--client",
                        "bench", "-n", "50", "--rounds", "1", "--cpu", "1", "--bench", bench,
                        "--build", "a=" + build.binary],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    rounds = [ln for ln in p.stdout.splitlines() if ln.startswith("round ")]
    assert len(rounds) == 1, p.stdout
    for ln in rounds:  # "round 1 a: Rss N B/conn, ..., h3 open M, X us CPU/request (R req/s)"
        assert int(ln.split("h3 open ")[1].split(",")[0]) >= 50, ln
        assert float(ln.split("Rss ")[1].split()[0]) > 0, ln
        assert float(ln.split(", ")[-1].split()[0]) > 0, ln
    table = p.stdout.split("median of 1")[1].splitlines()
    rows = {ln.split()[0]: ln.split() for ln in table if ln.startswith(("a ", "b "))}
    assert set(rows) == {"a"}, p.stdout
    for cols in rows.values():  # build, then 'median [low-high]' for Rss, Pss_Anon and CPU
        assert len(cols) == 7 and all(float(cols[i]) > 0 for i in (1, 3, 5)), cols
