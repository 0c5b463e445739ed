"""A gatling cluster (issue 57) in a network lab, as it runs on several machines: three
gatling nodes behind HAProxy, a three-member etcd, and Pebble validating through the
balancer with its chaos on.

The lab is tests/integration/clusterlab.py's (bench/compare-cluster measures the same):
hosts lb (haproxy: round robin to the nodes with a PROXY v2 header, lb:80 and lb:443, and
lb:800N, lb:440N to node gN alone), g1, g2, g3 (a gatling --cluster node and an etcd
member each), ca (Pebble, its chaos on, validating through lb) and c1 (the client); g1 and
g2 race for gatling.test's lock (HTTP-01), g3 orders www.gatling.test by TLS-ALPN-01.
Shown: every node serves both certificates (the same serial) over HTTP/1.1
and HTTP/2 (curl through the node's frontend, trusting Pebble's root only) and HTTP/3
(the suite's aioquic client, straight to the node: haproxy passes no QUIC); a TLS session
made on g1 is resumed on g2 and g3 (openssl s_client -sess_out/-sess_in, TLS 1.3 and
1.2); a PURGE on g1 is a miss on g2 and g3 within a second; Pebble's log counts one order
and one certificate per name, one account, and haproxy's log shows both validations
passing through it; g3 cut off from g1 and g2 (blackhole routes) keeps serving both
certificates, misses a PURGE made meanwhile, and syncs again once the routes are gone.

Root and network namespaces are needed, and haproxy, etcd, Pebble, curl and openssl:
skipped, saying which, otherwise.  It does not depend on the IO backend: the first plain
build's gatling serves, and run-check runs the module once (LAB: in the `once` job, one
test at a time, as the other lab modules).
"""
import re
import shutil
import subprocess
import time

import pytest

from clusterlab import (BACKOFF, BODY, ClusterLab, HOLDS, HTTP_PORT, HTTPS_PORT, LAB_MARKS,
                        NAME, NAMES, NODES, said, served_serial)
from conftest import wait_for
from test_acme_https import cert_serial, h3_get, has_h3
from test_cluster import http, reused, s_client

pytestmark = LAB_MARKS + [
    pytest.mark.skipif(not shutil.which("openssl") or not shutil.which("curl"),
                       reason="needs openssl and curl"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The lab, its three etcd members, the three nodes, haproxy UP, then Pebble; yields
    once every node has both certificates; everything stopped and the lab removed
    afterwards."""
    lab = ClusterLab(tmp_path_factory.mktemp("clab"))
    try:
        lab.start_pebble()
        cl = lab.wait_certificates()
        print("lab up to both certificates on every node: %.1f s" % (cl.issued - lab.t0))
        yield cl
    finally:
        lab.close()


def curl_https(cl, i, name, version):
    """GET / of name through lb's frontend for node i (curl on c1, --http1.1 or --http2,
    trusting Pebble's root alone): (HTTP version, body, the served leaf's serial)."""
    root, body = cl.tmp / "pebble-root.pem", cl.tmp / "body"
    root.write_text(cl.root)
    port = HTTPS_PORT + i
    with cl.lab.host("c1").inside():
        r = subprocess.run(["curl", "-sS", "--max-time", "10", version, "--cacert", str(root),
                            "--resolve", "%s:%d:%s" % (name, port, cl.addrs["lb"]),
                            "-o", str(body), "-w", "%{http_version}\n%{certs}",
                            "https://%s:%d/" % (name, port)], capture_output=True, timeout=20)
    assert r.returncode == 0, (name, i, version, r.stderr)
    lines = r.stdout.decode(errors="replace").splitlines()
    serial = next(l.split(":", 1)[1] for l in lines if l.startswith("Serial Number:"))
    return lines[0], body.read_bytes(), int(serial.replace(":", ""), 16)


def test_every_node_serves_both_certificates(cluster):
    """Each node, through its own frontend on lb, serves both names with the cluster's
    certificate (Pebble's, the same serial on every node) over HTTP/1.1 and HTTP/2."""
    for i, g in enumerate(NODES, 1):
        for name in NAMES:
            for flag, want in (("--http1.1", "1.1"), ("--http2", "2")):
                version, body, serial = curl_https(cluster, i, name, flag)
                assert (version, body) == (want, BODY), (g, name, flag, version, body[:200])
                assert serial == cluster.serials[name], (g, name, flag, serial,
                                                         cluster.serials)
    # each node's access log names c1 (the PROXY header's client) for the requests
    for g in NODES:
        lines = [l for l in cluster.gatlings[g].log_lines() if '"GET / ' in l]
        assert {l.split(" ")[0] for l in lines} == {cluster.addrs["c1"]}, (g, lines)
        assert len(lines) == 2 * len(NAMES), (g, lines)


@pytest.mark.skipif(not has_h3(), reason="the build has no HTTP/3 or aioquic is missing "
                    "(curl here has no --http3)")
def test_every_node_serves_both_certificates_over_h3(cluster):
    """HTTP/3 from c1 straight to each node's UDP port 443 (haproxy passes no QUIC):
    both names, the cluster's certificates, verified against Pebble's root alone."""
    for g in NODES:
        for name in NAMES:
            with cluster.lab.host("c1").inside():
                der = h3_get(cluster.root, 443, addr=cluster.addrs[g], sni=name)
            assert cert_serial(der) == cluster.serials[name], (g, name)


def ticket_keys(cl):
    for g in NODES:
        wait_for(lambda: said(cl.gatlings[g], "ticket keys: generation"), 15,
                 "%s with the cluster's ticket keys (%s)" % (g, cl.gatlings[g].err))


@pytest.mark.parametrize("version", ["-tls1_3", "-tls1_2"])
def test_session_from_g1_resumes_on_g2_and_g3(cluster, version):
    """openssl s_client on c1 makes a session on g1 (through lb:4401) and resumes it on
    g2 and g3 (lb:4402, lb:4403): the cluster's ticket keys; and on g1 again."""
    ticket_keys(cluster)
    sess = str(cluster.tmp / ("sess" + version))
    lb = cluster.addrs["lb"]
    with cluster.lab.host("c1").inside():
        first = s_client(HTTPS_PORT + 1, sess_out=sess, version=version, addr=lb, name=NAME)
        assert not reused(first), first
        for i in (2, 3, 1):
            out = s_client(HTTPS_PORT + i, sess_in=sess, version=version, addr=lb, name=NAME)
            assert reused(out), ("g%d" % i, out)


def test_purge_on_one_node_empties_the_others(cluster):
    """A CGI's answer cached on every node (GET through each node's frontend, one Host);
    a PURGE from c1 on g1 (allowed: .cache's purge line names c1, which the PROXY header
    carries) is a miss on g2 and g3 within a second."""
    lb = cluster.addrs["lb"]
    ticket_keys(cluster)  # the side processes talk to etcd by now

    def get(i, method="GET"):
        with cluster.lab.host("c1").inside():
            return http(HTTP_PORT + i, "/p.cgi", method, addr=lb)
    for i in (1, 2, 3):
        get(i)
        assert get(i)[0] == "gatling; hit", "g%d" % i
    t0 = time.monotonic()
    assert get(1, "PURGE")[1] == "purged 1\n"
    for i in (2, 3):
        wait_for(lambda: get(i)[0] != "gatling; hit", timeout=1.0, step=0.05,
                 what="g%d's entry purged within a second" % i)
    took = time.monotonic() - t0
    assert took < 1.0, took
    for i in (2, 3):
        assert get(i)[0] == "gatling; hit", "g%d stored it again" % i
    print("PURGE on g1 to a miss on g2 and g3: %.2f s" % took)


def test_one_order_per_name(cluster):
    """Pebble's log: one order and one certificate per name, one account, for a cluster
    of three nodes (g1 and g2 both wanting gatling.test); each name's lock taken once;
    haproxy's log shows the HTTP-01 validations of gatling.test on lb:80 and the
    TLS-ALPN-01 ones of www.gatling.test on lb:443, answered by every node."""
    # a second order, if any, would come within the clients' back-off
    time.sleep(max(0.0, cluster.issued + 3 * BACKOFF - time.monotonic()))
    pebble = cluster.pebble
    log = pebble.log()[-3000:]
    assert pebble.orders() == len(NAMES), log
    assert pebble.issued() == len(NAMES), log
    assert pebble.accounts() == 1, log
    holders = {}
    for name in NAMES:
        took = [g for g in NODES for _ in said(cluster.gatlings[g], HOLDS % re.escape(name))]
        assert len(took) == 1, (name, took)
        holders[name] = took[0]
    assert holders[NAMES[1]] == "g3" and holders[NAME] in ("g1", "g2"), holders
    # Pebble validates from three perspectives at once: round robin gives each node one,
    # so every node answered a challenge whichever node's client placed it
    hp = cluster.haproxy.text()
    http01 = re.findall(r" www gatling/(g\d) \S+ (\d+) .*\"GET /\.well-known/acme-challenge/",
                        hp)
    alpn = re.findall(r" tls tls/(g\d) ", hp)
    assert sorted(http01) == [(g, "200") for g in NODES], hp[-3000:]
    assert sorted(alpn) == list(NODES), hp[-3000:]
    print("the locks' holders: %s" % holders)


def test_node_cut_off_from_etcd_serves_and_syncs_again(cluster):
    """A network partition: g3 cut off from g1 and g2 (blackhole routes on g3, so its own
    etcd member has no quorum and the others' are unreachable) while lb still reaches it.
    g3 goes on serving both certificates (the same serials) through its frontend; a PURGE
    on g1 reaches g2 but not g3 (the partition is real); once the routes are gone, g3
    syncs again: a PURGE on g1 is a miss on g3 within a second.  (The etcd leader killed
    right after this heal: 1 run of 4 saw no purge reach g3 within 15 s when the leader was
    g3's own member; not explained yet, so not in make check: see ops/test_cluster.py's
    test_etcd_leader_killed for the leader on loopback.)"""
    lb, g3 = cluster.addrs["lb"], cluster.lab.host("g3")

    def get(i, method="GET"):
        with cluster.lab.host("c1").inside():
            return http(HTTP_PORT + i, "/p.cgi", method, addr=lb)

    def cached(i):
        get(i)
        return get(i)[0] == "gatling; hit"
    for i in (1, 2, 3):
        assert cached(i), "g%d" % i
    routes = ["%s/32" % cluster.addrs[g] for g in ("g1", "g2")]
    with g3.inside():
        for r in routes:
            subprocess.run(["ip", "route", "add", "blackhole", r], check=True, timeout=10)
    try:
        time.sleep(1.0)
        assert get(1, "PURGE")[1] == "purged 1\n"
        wait_for(lambda: get(2)[0] != "gatling; hit", timeout=2.0, step=0.05,
                 what="g2's entry purged")
        time.sleep(1.5)
        assert get(3)[0] == "gatling; hit", "g3 purged although cut off from etcd"
        for name in NAMES:
            s = served_serial(cluster.lab.host("c1"), lb, HTTPS_PORT + 3, name, cluster.root)
            assert s == cluster.serials[name], (name, s, cluster.serials)
    finally:
        with g3.inside():
            for r in routes:
                subprocess.run(["ip", "route", "del", "blackhole", r], timeout=10)
    t0 = time.monotonic()

    def purged_everywhere():
        if not all(cached(i) for i in (1, 2, 3)):
            return False
        assert get(1, "PURGE")[1] == "purged 1\n"
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            if get(3)[0] != "gatling; hit":
                return True
            time.sleep(0.05)
        return False
    wait_for(purged_everywhere, timeout=30, step=0.2,
             what="g3 back in the cluster: a PURGE on g1 a miss on g3 within a second (%s)"
             % said(cluster.gatlings["g3"], "cluster|etcd")[-5:])
    print("g3 synced again %.1f s after the partition ended" % (time.monotonic() - t0))

