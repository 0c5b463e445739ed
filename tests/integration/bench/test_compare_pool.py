"""bench/compare-pool (issue 45): one --quick round proves the driver end to end: two
trivial-server backends start, every proxy returns their exact body, each proxy of two backends
sends requests to both (and gatling with one backend to that one only), a CPU per request is
counted, and a backend killed and started again under load gives each pool a count of failed
requests.  It checks the answers, not the speeds.  gatling's pool rows run once the binary takes
a -P list of backends; until then the driver skips them with that reason, and so does the
gatling part of this test."""
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, http_only, serial

PEERS = {"nginx": "/usr/sbin/nginx", "haproxy": "/usr/sbin/haproxy"}
NO_POOL = "does not take a -P list of backends"  # the driver's words for a gatling before pools


def check_cpu(data, name, pool):
    """The CPU run of name: requests, no failure, a CPU per request, and the backends it used:
    both (backend 2 with a fair share of round robin) for a pool, backend 1 alone otherwise."""
    for r in data["samples"][name]:
        assert not r.get("problem"), (name, r)
        c = r["cpu"]
        assert not c.get("problem"), (name, c)
        assert c["requests"] > 0 and c["errors"] == 0 and c["cpu_us"] > 0, (name, c)
        share = c["b2_share_pct"]
        if pool:
            assert 20 <= share <= 80, (name, "backend 2's share of the backends' CPU", c)
        else:
            assert share == 0, (name, "one backend, yet backend 2 worked", c)


def check_failover(data, name):
    """The failover run: backend 2 killed, then restarted, under a load that was answered."""
    for r in data["samples"][name]:
        f = r["failover"]
        assert not f.get("problem"), (name, f)
        assert 0 < f["killed_s"] < f["restarted_s"], (name, f)
        assert f["requests"] > 0 and 0 <= f["failed"] <= f["requests"], (name, f)
        assert 0 < f["p99_ms"] <= f["max_ms"], (name, f)  # the clients' waits, stalls included
    assert data["table"][name]["failed"] == sum(r["failover"]["failed"]
                                                for r in data["samples"][name])


@serial
@http_only  # the driver starts its own proxies and backends; one pass is enough
def test_compare_pool_quick(build, tmp_path):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    if not shutil.which("taskset"):
        pytest.skip("taskset missing: sh tests/setup.sh installs util-linux")
    missing = [n for n, path in PEERS.items() if not os.access(path, os.X_OK)]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: sh tests/setup.sh bench")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-pool"), "--quick",
                        "--json", "--gatling", build.binary,
                        "--bench", os.path.join(build.dir, "bench"),
                        "--trivial", os.path.join(build.dir, "trivial-server"), "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads(p.stdout)
    assert data == json.loads((out / "results.json").read_text())
    table = (out / "table.md").read_text()
    for row in ("proxy CPU per request", "backend 2's share", "failover: failed requests",
                "Targets (issue 45)"):
        assert row in table, table
    check_cpu(data, "gatling-1", pool=False)
    assert "failover" not in data["samples"]["gatling-1"][0]  # its only backend is not killed
    for name in PEERS:
        check_cpu(data, name, pool=True)
        check_failover(data, name)
    assert "proxy_next_upstream error timeout http_502" in (out / "nginx.conf").read_text()
    hap = (out / "haproxy.conf").read_text()
    assert "option redispatch" in hap and "observe layer4" in hap, hap
    commands = (out / "commands.txt").read_text()
    assert "trivial-server" in commands and " -k -c " in commands, commands
    skipped = data["meta"]["skipped"].get("gatling")
    if skipped:
        # only the absence of pools is a reason to skip; any other failure is a failure
        assert NO_POOL in skipped, skipped
        pytest.skip("gatling's pool: " + skipped + " (runs once the pools are merged)")
    check_cpu(data, "gatling", pool=True)
    check_failover(data, "gatling")
    assert data["table"]["gatling"]["failed"] == 0, data["samples"]["gatling"]  # retries
    rules = [w[w.index("-P") + 1] for w in map(shlex.split, commands.splitlines())
             if "-P" in w]
    assert any(r.count("127.0.0.1/") == 2 for r in rules), rules  # a -P list of two members
    targets = table.split("Targets (issue 45)")[1].split("Notes:")[0]
    assert "n/a" not in targets, targets


@serial
@http_only
def test_compare_pool_together(build, tmp_path):
    """--together: the proxies started and loaded at once, each by its own bench at one open-loop
    rate: each answers that rate without a failure and has its own CPU per request, and no
    backend share is claimed for one of them (the backends serve them all at once)."""
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    if not shutil.which("taskset") or not os.access(PEERS["nginx"], os.X_OK):
        pytest.skip("taskset or nginx missing: sh tests/setup.sh bench")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-pool"), "--quick",
                        "--together", "--rate", "1000", "--no-failover", "--json",
                        "--proxies", "gatling,gatling-1,nginx", "--gatling", build.binary,
                        "--bench", os.path.join(build.dir, "bench"),
                        "--trivial", os.path.join(build.dir, "trivial-server")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads(p.stdout)
    assert data["meta"]["together"] and data["meta"]["rate"] == 1000
    ran = [n for n in ("gatling", "gatling-1", "nginx") if n in data["samples"]]
    assert set(ran) >= {"gatling-1", "nginx"}, data["meta"]["skipped"]
    if "gatling" not in ran:
        assert NO_POOL in data["meta"]["skipped"]["gatling"], data["meta"]["skipped"]
    for name in ran:
        (r,) = data["samples"][name]
        c = r["cpu"]
        assert not c.get("problem") and c["errors"] == 0, (name, c)
        assert c["requests"] >= 1000 and c["cpu_us"] > 0, (name, c)  # 2 s at 1,000 a second
        assert c["b2_share_pct"] is None and "failover" not in r, (name, r)
    cpus = {data["samples"][n][0]["cpu"]["proxy_cpu_s"] for n in ran}
    assert len(cpus) == len(ran), cpus  # each proxy's own CPU, not one figure for all
