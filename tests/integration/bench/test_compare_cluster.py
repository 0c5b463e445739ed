"""bench/compare-cluster (issue 57's benchmark): one --quick run without Caddy proves the driver
end to end in the network lab -- the three rows of returning TLS visitors (the cluster, three
nodes without --cluster, one node) each with requests, handshakes and no failure, sessions
resumed across the cluster's nodes (more than half of the handshakes) and not across the nodes
that share nothing (less than half), both names served by every node within the issuance's
timeout, and a renewal whose lock holder was SIGKILLed under load with no failed request and
a new certificate on every node.  It checks the answers, not the speeds.  Root, haproxy, etcd
and Pebble are needed (skipped otherwise, saying which); run-check runs it once (LAB)."""
import json
import os
import subprocess
import sys

from clusterlab import LAB_MARKS
from conftest import ROOT
from test_lb import PLAIN

pytestmark = LAB_MARKS
ROWS = ("cluster", "apart", "one")


def share(xs):
    return sum(x["resumed"] for x in xs) / sum(x["handshakes"] for x in xs)


def test_compare_cluster_quick(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare-cluster"),
                        "--quick", "--servers", "gatling", "--build", PLAIN[0], "-o", str(out)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    res = data["resumed"]
    assert sorted(res) == sorted(ROWS), res
    for row in ROWS:
        for x in res[row]:
            assert x["rate"] > 0 and x["responses"] > 0, (row, x)
            assert 0 < x["handshakes"] and 0 <= x["resumed"] <= x["handshakes"], (row, x)
            assert x["failed"] == 0, (row, x)
        # the exact command of each row, in the output
        assert "--resume https://" in r.stdout and ":%d/" % {"cluster": 7443, "apart": 7444,
                                                              "one": 7445}[row] in r.stdout
        assert "| %s |" % row in r.stdout
    # a session made on one node resumes on the others only where they share ticket keys
    assert share(res["cluster"]) > 0.5, res["cluster"]
    assert share(res["apart"]) < 0.5, res["apart"]
    for name in ("gatling.test", "www.gatling.test"):
        s = data["issue"]["gatling " + name]
        assert s is not None and 0 < s < 60, (name, data["issue"])
    ren = data["renewal"]
    assert ren["holder"] in ("g1", "g2", "g3"), ren
    assert sorted(k.split()[0] for k in ren["killed"]) == ["acme-client", "gatling-cluster"], ren
    assert (ren.get("new_cert_s") or 0) > 0, ren  # a node that still wanted the name ordered it
    assert 0 < ren["responses"] <= ren["requests"] and ren["failed"] == 0, ren
    assert "renewal under load" in (out / "commands.txt").read_text()
    print(data["table"])
