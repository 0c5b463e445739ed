"""bench --h3 (issue 34, "Load"): the load generator's HTTP/3 client (bench/lg/bench_h3.c) against
gatling's own HTTP/3.  What is checked: the requests bench counts are the ones the server logged
as HTTP/3.0 and its /server-status counts as QUIC handshakes; the byte counts add up; the
certificate is verified against -C (a CA that did not sign it fails the run, --insecure does not
verify); --idle holds connections without a request; a port with nothing on it is unreachable,
not a hang; -P 2 merges two workers; -R runs the open loop.  Skipped where bench or gatling
was built without HTTP/3."""
import json
import os
import re
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import skip_without_h3
from test_loadgen import (Gatling, bench_json, build, check_accounting, docroot,  # noqa: F401
                          pki, run)


def unused_udp_port():
    """A UDP port nothing is bound to (bound once, closed): datagrams get ICMP unreachable."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def g3(build, docroot, pki, tmp_path):
    """gatling with HTTPS (and so HTTP/3 on the same port number), /server-status (-S) and an
    access log."""
    skip_without_h3(build / "gatling")  # bench has --h3 where gatling has HTTP/3
    g = Gatling(build, docroot, args=["-S"], log=tmp_path / "access.log", pki=pki)
    g.log = tmp_path / "access.log"
    yield g
    g.stop()


def status(g):
    with urllib.request.urlopen(g.url("/server-status?json"), timeout=10) as r:
        return json.loads(r.read())


def h3_logged(g, code="200"):
    """Requests the server logged as HTTP/3 with this status (after stop(): flushed)."""
    g.stop()
    return sum(1 for x in g.log.read_text().splitlines() if f'" {code} ' in x and "HTTP/3.0" in x)


def check_h3(r, streams):
    check_accounting(r, depth=streams)
    assert r["protocol"] == "h3" and r["streams"] == streams and r["tls"] is True, r


def test_bench_h3_counts_match_the_server(build, g3, pki):
    """-c 4 --streams 10 -n 3000, the certificate verified: 3000 answers of 1 KiB, no error,
    4 connections; the server logged 3000 HTTP/3 requests and 4 QUIC handshakes."""
    p, r = bench_json(build, "--h3", "-C", pki / "ca.pem", "-c", "4", "--streams", "10",
                      "-n", "3000", g3.tls_url("/1k.html"))
    assert p.returncode == 0, p.stderr
    check_h3(r, 10)
    assert r["requests"] == r["responses"] == 3000 and r["errors_total"] == 0, r
    assert r["status"]["2xx"] == 3000 and r["body_bytes"] == 3000 * 1024
    assert r["connects"] == 4 and r["handshake_us"]["count"] == 4
    assert r["bytes"] > r["body_bytes"]  # datagrams: headers, framing, QUIC, AEAD tags
    st = status(g3)
    assert st["h3_handshakes"] == 4 and st["h3_connections"] == 4, st
    assert h3_logged(g3) == 3000


def test_bench_h3_processes_merge(build, g3, pki):
    """-P 2: two workers' counts and histograms merge; the server logged every request."""
    p, r = bench_json(build, "--h3", "-C", pki / "ca.pem", "-P", "2", "-c", "4", "--streams", "5",
                      "-n", "2000", g3.tls_url("/2k.txt"))
    assert p.returncode == 0, p.stderr
    check_h3(r, 5)
    assert r["processes"] == 2 and r["connects"] == 4 and r["responses"] == 2000, r
    assert r["latency_us"]["count"] == 2000 and r["body_bytes"] == 2000 * 2048
    assert status(g3)["h3_handshakes"] == 4
    assert h3_logged(g3) == 2000


def test_bench_h3_urls_statuses_and_duration(build, g3, pki, tmp_path):
    """-f with a 404 among the URLs, -d: statuses by class, a 404 counted as a status error;
    the text report names the protocol and the verification."""
    urls = tmp_path / "urls"
    urls.write_text("/1k.html\n/2k.txt\n/missing\n")
    p, r = bench_json(build, "--h3", "-C", pki / "ca.pem", "-c", "2", "--streams", "3",
                      "-n", "600", "-f", urls, g3.tls_url("/"))
    check_h3(r, 3)
    assert r["responses"] == 600 and r["lost"] == 0 and p.returncode == 3, (p.stderr, r)
    assert r["status"]["2xx"] == 400 and r["status"]["4xx"] == 200
    assert r["errors"]["status"] == 200 and r["errors_total"] == 200
    assert r["body_bytes"] >= 200 * (1024 + 2048)
    p = run([build / "bench", "-q", "--h3", "--insecure", "-c", "2", "--streams", "2", "-d", "1",
             g3.tls_url("/1k.html")])
    assert p.returncode == 0, p.stderr
    assert re.search(r"^protocol +h3 \(QUIC, ALPN h3, --insecure\), 2 streams per connection$",
                     p.stdout, re.M), p.stdout
    # past the server's -R (10,000 requests) a connection gets GOAWAY and bench opens another;
    # the streams that crossed the GOAWAY are refused unread (H3_REQUEST_REJECTED) and sent again
    m = re.search(r"^requests +(\d+) sent, (\d+) answered, 0 lost; (\d+) connections", p.stdout,
                  re.M)
    assert m and int(m.group(1)) == int(m.group(2)) > 0, p.stdout
    assert int(m.group(3)) >= max(2, int(m.group(2)) // 10000), p.stdout
    assert h3_logged(g3) == 400 + int(m.group(2))


def test_bench_h3_open_loop(build, g3):
    """-R over HTTP/3: due requests go to any connection with a free stream slot."""
    p, r = bench_json(build, "--h3", "--insecure", "-c", "2", "--streams", "4", "-R", "400",
                      "-d", "1.5", g3.tls_url("/1k.html"))
    assert p.returncode == 0, p.stderr
    check_h3(r, 4)
    assert r["open_loop_rate"] == 400 and r["errors_total"] == 0 and r["lost"] == 0
    # 400/s for 1.5 s: each due request is sent or, when every stream slot stayed busy until -d's
    # end (a loaded host lags), counted as unsent; none is dropped without a count
    assert 0 < r["requests"] and 600 - 2 <= r["requests"] + r["unsent"] <= 600 + 2, r
    assert r["responses"] == r["requests"] and r["connects"] == 2
    p = run([build / "bench", "--h3", "--insecure", "--idle", "2", "-R", "10",
             g3.tls_url("/1k.html")])
    assert p.returncode == 2 and "-R" in p.stderr, p.stderr


def test_bench_h3_certificate_not_verified(build, g3, tmp_path):
    """-C with a CA that did not sign the server's certificate: no handshake succeeds, the run
    fails (exit 1) and says why; neither -C nor --insecure is a usage error."""
    other = tmp_path / "other"
    subprocess.run(["sh", os.path.join(os.path.dirname(__file__), "..", "..", "..", "dist",
                                       "mkcert.sh"), str(other)],
                   check=True, capture_output=True, timeout=60)
    p, r = bench_json(build, "--h3", "-C", other / "ca.pem", "-c", "2", "-n", "10",
                      g3.tls_url("/1k.html"))
    assert p.returncode == 1 and r["connects"] == 0 and r["responses"] == 0, (p.stderr, r)
    assert r["errors"]["tls"] >= 1 and "no QUIC handshake succeeded" in p.stderr
    assert status(g3)["h3_handshakes"] == 0
    p = run([build / "bench", "--h3", "-n", "1", g3.tls_url("/1k.html")])
    assert p.returncode == 2 and "--insecure" in p.stderr, p.stderr
    p = run([build / "bench", "--h3", "--insecure", "-n", "1", g3.url("/1k.html")])
    assert p.returncode == 2 and "https://" in p.stderr, p.stderr


def test_bench_h3_idle_connections(build, g3, pki):
    """--idle 20 -d 1: 20 handshakes, no request; the server saw 20 and no request over h3."""
    p, r = bench_json(build, "--h3", "-C", pki / "ca.pem", "--idle", "20", "-d", "1",
                      g3.tls_url("/1k.html"))
    assert p.returncode == 0, p.stderr
    assert r["idle"] is True and r["connects"] == 20 and r["requests"] == 0, r
    assert "--idle: 20 connections open" in p.stderr
    assert status(g3)["h3_handshakes"] == 20
    assert h3_logged(g3) == 0


def test_bench_h3_unreachable(build, tmp_path):
    """Nothing on the UDP port: the ICMP refusal ends the run as unreachable, at once."""
    skip_without_h3(build / "gatling")
    port = unused_udp_port()
    p, r = bench_json(build, "--h3", "--insecure", "-c", "2", "-n", "10", "-t", "3",
                      f"https://127.0.0.1:{port}/")
    assert p.returncode == 1 and r["connects"] == 0, (p.stderr, r)
    assert "unreachable" in p.stderr or "no QUIC handshake" in p.stderr, p.stderr


def test_bench_h3_silent_server(build):
    """A UDP port that takes the Initials and never answers: each handshake times out at -t
    (ctimeout), the run ends as unreachable (exit 1) within the timeout, not at the hard cap."""
    skip_without_h3(build / "gatling")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    try:
        t0 = time.monotonic()
        p, r = bench_json(build, "--h3", "--insecure", "-c", "3", "-n", "10", "-t", "1",
                          f"https://127.0.0.1:{s.getsockname()[1]}/")
        took = time.monotonic() - t0
        s.settimeout(0)
        assert len(s.recv(2048)) >= 1200  # an Initial came, padded to QUIC's minimum
    finally:
        s.close()
    assert p.returncode == 1 and r["connects"] == 0 and r["requests"] == 0, (p.stderr, r)
    assert r["errors"]["ctimeout"] >= 1 and "unreachable" in p.stderr, (p.stderr, r)
    assert took < 10, took  # -t 1, not the hard cap (600 s); 10: a busy machine


def test_bench_h3_closes_its_connections_at_the_end(build, g3, pki):
    """-d 1 with 10 streams in flight on each of 20 connections when the time is up: every
    connection, the busy ones too once answered, ends with CONNECTION_CLOSE, so the server holds
    none of them after the run (a connection closed without a word stayed until its idle
    timeout, and held a SIGTERM drain that came next for seconds)."""
    p, r = bench_json(build, "--h3", "-C", pki / "ca.pem", "-c", "20", "--streams", "10",
                      "-d", "1", g3.tls_url("/1k.html"))
    assert p.returncode == 0 and r["errors_total"] == 0 and r["connects"] >= 20, (p.stderr, r)
    deadline = time.time() + 5
    while True:
        st = status(g3)
        if st["connections"] <= 1 or time.time() > deadline:  # 1: the status request's own
            break
        time.sleep(0.1)
    assert st["connections"] <= 1 and st["h3_idle"] == 0, st
