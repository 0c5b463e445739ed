"""bench/compare-grpc (issue 65): one --quick round proves the driver end to end: the grpcio
and hypercorn backends start, every proxy present (gatling's h2c/ rules, nginx's grpc_pass,
HAProxy's proto h2, and the backends direct) passes a real grpcio client's unary call and
server stream, and each gives a row for every test: unary calls at the offered rate with a
p99 and a CPU per call, closed-loop calls, streamed messages with a CPU per message, and the
backend connections 1,000 h2c clients cost.  It checks the rows and their counts, not the
rates: gatling multiplexes (at most a handful of backend connections for the 1,000 clients,
a COUNT), the backends direct hold one each, and no request fails.  A peer that is not
installed is skipped by the driver, with its reason."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import BENCH, COUNT, ROOT, figure, http_only, serial

PY = "/usr/bin/python3"  # Debian's, with python3-grpcio and python3-hypercorn
PROXIES = {"direct", "gatling", "nginx", "haproxy"}
TESTS = {"unary", "max", "stream", "conns"}


@serial
@http_only  # the driver starts its own proxies and backends; one pass is enough
def test_compare_grpc_quick(build, tmp_path):
    if build.name != "epoll":
        pytest.skip("the driver is checked on the plain epoll build")
    if subprocess.run([PY, "-c", "import grpc, hypercorn"], capture_output=True).returncode:
        pytest.skip("python3-grpcio or python3-hypercorn missing: sh tests/setup.sh")
    out = tmp_path / "out"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-grpc"), "--quick",
                        "--gatling", build.binary, "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    figure("compare-grpc --quick", time.monotonic() - t0, "s", hi=240, kind=BENCH)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    assert "backend connections for 1,000 clients" in (out / "table.md").read_text()
    ran = set(data["samples"])
    assert ran | set(data["skipped"]) == PROXIES, data["skipped"]
    assert {"direct", "gatling"} <= ran, data["skipped"]
    rows = {(r["proxy"], r["test"]): r for r in data["rows"]}
    assert set(rows) == {(n, t) for n in ran for t in TESTS}, sorted(rows)
    for (name, test), r in rows.items():
        assert not r.get("problem"), (name, test, r)
        assert r["succeeded"] > 0 and r["failed"] == 0, (name, test, r)
        if name != "direct" and test != "conns":
            assert r["cpu_us"] > 0, (name, test, r)
    for name in ran:
        u, s, c = rows[name, "unary"], rows[name, "stream"], rows[name, "conns"]
        assert u["offered"] == 200 and u["p99_ms"] >= u["p50_ms"] > 0, (name, u)
        assert u["data"] >= 10 * u["succeeded"], (name, "a 10-byte gRPC message a call", u)
        assert s["messages"] > 0, (name, s)
        assert c["ok2xx"] == 1000 and c["peak"] >= 100, (name, c)
    # without a proxy, a connection per request in flight (ss every 50 ms sees most of the
    # backend's peak; on a loaded machine the 1,000 need not all be there at once)
    d = rows["direct", "conns"]
    assert d["backend_conns"] >= d["peak"] / 2, d
    held = rows["gatling", "conns"]["backend_conns"]
    # 1,000 streams at once, at most 100 a connection (streams= and hypercorn's limit)
    figure("gatling: backend connections for 1,000 h2c clients", held, "conns", lo=1, hi=20,
           kind=COUNT)
    assert rows["gatling", "unary"]["backend_conns"] <= 2, rows["gatling", "unary"]
    if "nginx" in ran:
        assert "grpc_pass grpc://grpcb;" in (out / "nginx.conf").read_text()
    if "haproxy" in ran:
        assert "proto h2" in (out / "haproxy.conf").read_text()
