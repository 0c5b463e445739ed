"""/metrics (-S): Prometheus' text exposition format beside /server-status.

The page against promtool's checks and the format's rules, every counter of
/server-status on it with the same value, every metric named in gatling.8,
loopback only, the request duration histograms per protocol, -W's workers
summed (a killed worker's counts kept), and Debian's Prometheus scraping
gatling every second and answering exactly the requests made.

promtool and prometheus come from Debian's prometheus package (tests/setup.sh).
The Prometheus test runs once per make check: on the epoll build (else the
first that is not a sanitizer build), over plain HTTP.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

from conftest import (ROOT, TLS, Client, assert_status, fetch, free_port,
                      http_only, make_docroot, once_build, running_server, wait_for)

TREE = {"f.txt": "hello\n", "a.txt": "a\n", "b.txt": "b\n"}
CTYPE = "text/plain; version=0.0.4; charset=utf-8"
# a -P rule whose backend needs escaping in a label; nothing is ever proxied
# (no vhost holds a .proxy file), but the backend families show it
ODD_RULE = 'F/unix:/tmp/no"such\\gatling.sock:^/php/'
ODD_BACKEND = 'F/unix:/tmp/no"such\\gatling.sock'
# its labels: the anonymous pool of rule 1, the address as written (no protocol)
ODD = {"pool": "P1", "backend": 'unix:/tmp/no"such\\gatling.sock'}
BOUNDS = ["0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
          "0.5", "1", "2.5", "5", "10", "+Inf"]
PROTOCOLS = ("http1", "h2", "ftp", "h3")

# /server-status?json's keys and where /metrics has them: (name, labels); a
# key in neither this nor NOT_ON_METRICS fails the test, so a new counter on
# /server-status must be added to /metrics too
ON_METRICS = {
    "connections": ("gatling_connections", {}),
    "refused_connection_cap": ("gatling_refused_total", {"reason": "connection_cap"}),
    "refused_address_cap": ("gatling_refused_total", {"reason": "address_cap"}),
    "refused_descriptors": ("gatling_refused_total", {"reason": "descriptors"}),
    "refused_offender": ("gatling_refused_total", {"reason": "offender"}),
    "flood_offences": ("gatling_flood_offences_total", {}),
    "flood_reduced": ("gatling_flood_reduced_total", {}),
    "rate_limited": ("gatling_rate_limited_total", {}),
    "auth_throttled": ("gatling_auth_throttled_total", {}),
    "auth_remembered": ("gatling_auth_remembered_total", {}),
    "busy": ("gatling_busy_total", {}),
    "responses_4xx": ("gatling_responses_total", {"class": "4xx"}),
    "responses_5xx": ("gatling_responses_total", {"class": "5xx"}),
    "gzip_skipped_busy": ("gatling_gzip_skipped_busy_total", {}),
    "gzip_paced": ("gatling_gzip_paced_total", {}),
    "timeout_head": ("gatling_timeouts_total", {"phase": "head"}),
    "idle_closed": ("gatling_idle_closed_total", {}),
    "timeout_body": ("gatling_timeouts_total", {"phase": "body"}),
    "timeout_drain": ("gatling_timeouts_total", {"phase": "drain"}),
    "timeout_idle": ("gatling_timeouts_total", {"phase": "idle"}),
    "max_requests": ("gatling_max_requests_closed_total", {}),
    "head_overflows": ("gatling_head_overflows_total", {}),
    "memory_files": ("gatling_memory_files", {}),
    "memory_bytes": ("gatling_memory_bytes", {}),
    "memory_full": ("gatling_memory_full_total", {}),
    "https_connections": ("gatling_tls_connections", {}),
    "tls_handshakes": ("gatling_tls_handshakes_total", {"result": "ok"}),
    "tls_resumed": ("gatling_tls_resumed_total", {}),
    "tls_failed": ("gatling_tls_handshakes_total", {"result": "failed"}),
    "tls_not_tls": ("gatling_tls_not_tls_total", {}),
    "timeout_handshake": ("gatling_timeouts_total", {"phase": "tls_handshake"}),
    "tls_misdirected": ("gatling_tls_misdirected_total", {}),
    "tls_client_refused": ("gatling_tls_client_refused_total", {}),
    "tls_ktls": ("gatling_tls_ktls_total", {}),
    "early_data_accepted": ("gatling_early_data_total", {"outcome": "accepted"}),
    "early_data_replayed": ("gatling_early_data_total", {"outcome": "replayed"}),
    "early_data_refused": ("gatling_early_data_total", {"outcome": "refused"}),
    "early_data_requests": ("gatling_early_data_requests_total", {"answer": "early"}),
    "early_data_held": ("gatling_early_data_requests_total", {"answer": "held"}),
    "early_data_too_early": ("gatling_early_data_requests_total", {"answer": "too_early"}),
    "tls_no_certificate": ("gatling_tls_no_certificate_total", {}),
    "tls_cert_reload_failures": ("gatling_cert_reload_failures_total", {}),
    "acme_http01": ("gatling_acme_http01_answered_total", {}),
    "acme_http01_refused": ("gatling_acme_http01_refused_total", {}),
    "acme_tls_alpn01": ("gatling_acme_tls_alpn01_answered_total", {}),
    "acme_tls_alpn01_refused": ("gatling_acme_tls_alpn01_refused_total", {}),
    "h2_connections": ("gatling_h2_connections_total", {}),
    "h2_errors": ("gatling_h2_errors_total", {}),
    "h2_yields": ("gatling_h2_yields_total", {}),
    "h2_refused": ("gatling_h2_refused_streams_total", {}),
    "h2_file_waits": ("gatling_h2_file_waits_total", {}),
    "h3_connections": ("gatling_h3_connections_total", {}),
    "h3_handshakes": ("gatling_h3_handshakes_total", {}),
    "h3_failed": ("gatling_h3_failed_total", {}),
    "h3_idle": ("gatling_h3_idle_total", {}),
    "h3_refused": ("gatling_h3_refused_total", {}),
    "h3_stateless_resets": ("gatling_h3_stateless_resets_total", {}),
    "h3_version_negotiations": ("gatling_h3_version_negotiations_total", {}),
    "h3_dropped": ("gatling_h3_dropped_total", {}),
    "h3_send_lost": ("gatling_h3_send_lost_total", {}),
    "h3_retries": ("gatling_h3_retries_total", {}),
    "h3_bad_tokens": ("gatling_h3_bad_tokens_total", {}),
    "h3_validated": ("gatling_h3_validated_total", {}),
    "h3_rapid_reset": ("gatling_h3_rapid_reset_total", {}),
    "h3_fields_refused": ("gatling_h3_fields_refused_total", {}),
    "h3_streams_refused": ("gatling_h3_refused_streams_total", {}),
    "proxy_headers": ("gatling_proxy_protocol_headers_total", {"result": "client"}),
    "proxy_local": ("gatling_proxy_protocol_headers_total", {"result": "local"}),
    "proxy_untrusted": ("gatling_proxy_protocol_untrusted_total", {}),
    "proxy_malformed": ("gatling_proxy_protocol_malformed_total", {}),
    "proxy_timeout": ("gatling_timeouts_total", {"phase": "proxy_header"}),
    "health_ok": ("gatling_health_checks_total", {"result": "ok"}),
    "health_failed": ("gatling_health_checks_total", {"result": "draining"}),
    "backend_connects": ("gatling_backend_connections_total", ODD),
    "backend_reuses": ("gatling_backend_reuses_total", ODD),
    "backend_502": ("gatling_backend_failures_total", ODD),
    "backend_504": ("gatling_backend_timeouts_total", ODD),
    "backend_tunnel_idle": ("gatling_backend_tunnels_idle_total", ODD),
    "backend_unsized": ("gatling_backend_unsized_total", ODD),
    "backend_requests": ("gatling_backend_requests_total", ODD),
    "backend_retries": ("gatling_backend_retries_total", ODD),
    "backend_downs": ("gatling_backend_downs_total", ODD),
    "draining": ("gatling_draining", {}),
    "ftp_bounce": ("gatling_ftp_bounce_refused_total", {}),
    "compress_padded": ("gatling_compress_padded_total", {}),
}
for _k in ("cgi_spawned", "cgi_killed", "cgi_redirects", "cgi_refused", "cgi_failed",
           "cache_hits", "cache_stale", "cache_stale_errors", "cache_misses",
           "cache_collapsed", "cache_fetches", "cache_stored", "cache_revalidated",
           "cache_passes", "cache_bypass", "cache_lock_timeouts", "cache_purges",
           "cache_evictions", "ftp_sessions", "ftp_logins", "ftp_downloads", "ftp_uploads",
           "ftp_refused", "ftp_pasv_theft", "ftp_timeouts"):
    ON_METRICS[_k] = ("gatling_%s_total" % _k, {})
for _k in ("cache_entries", "cache_bytes"):
    ON_METRICS[_k] = ("gatling_" + _k, {})
for _k in ("settings", "ping", "window_update", "empty_data", "other", "reset_sent",
           "rapid_reset", "continuation"):
    ON_METRICS["h2_flood_" + _k] = ("gatling_h2_floods_total", {"kind": _k})
# ... and the keys /metrics says otherwise: checked one by one in the test
NOT_ON_METRICS = {
    "version", "backend", "pid",  # gatling_info{version,io}; a page has no pid
    "backends",                    # an array: each backend's gatling_backend_* series
    "uptime",                      # gatling_start_time_seconds
    "requests", "bytes",           # gatling_requests_total, _transferred_bytes_total by protocol
    "requests_per_second", "bytes_per_second",  # rate() of those
    "now", "window", "series", "series_10s",  # the graphs (test_status_page.py): rate()
    "warnings",                    # what the page marks, from these numbers
    "gzip_paced_ms",               # gatling_gzip_paced_seconds_total
    "tls_certificate_expiry_first",  # the least of gatling_tls_certificate_expiry_seconds{name}
    "acme_orders", "acme_failures",  # --acme: test_acme_serve.py checks them
    "processes",                   # pids, as "pid": privilege/test_process_tree.py checks them
    "per_worker",                  # -W: each worker's; their sums are the counters above
}


# --------------------------------------------------------------------------
# The exposition format (version 0.0.4), parsed strictly

SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse_labels(text):
    labels, pos = {}, 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        assert m, "bad labels at %r" % text[pos:]
        labels[m.group(1)] = re.sub(r'\\(.)', lambda e: {"n": "\n"}.get(e.group(1), e.group(1)),
                                    m.group(2))
        pos = m.end()
    return labels


class Page:
    """help, type: by family; samples: (name, labels, value) in order."""

    def __init__(self, text):
        self.text = text
        self.help, self.type, self.samples = {}, {}, []
        for line in text.split("\n")[:-1]:
            if line.startswith("# HELP "):
                name, _, h = line[7:].partition(" ")
                assert name not in self.help and h, line
                self.help[name] = h
            elif line.startswith("# TYPE "):
                name, _, t = line[7:].partition(" ")
                assert name not in self.type and t in ("counter", "gauge", "histogram"), line
                self.type[name] = t
            else:
                m = SAMPLE.match(line)
                assert m, "not a sample line: %r" % line
                self.samples.append((m.group(1), parse_labels(m.group(2) or ""),
                                     float(m.group(3))))
        assert text.endswith("\n"), "the page ends without a newline"

    def family(self, name):
        """The family a sample belongs to (a histogram's _bucket, _sum, _count)."""
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[:-len(suffix)]
            if name.endswith(suffix) and self.type.get(base) == "histogram":
                return base
        return name

    def get(self, name, **labels):
        found = [v for n, lb, v in self.samples if n == name and lb == labels]
        assert len(found) == 1, "%s%r: %d samples on the page" % (name, labels, len(found))
        return found[0]

    def total(self, name):
        return sum(v for n, _, v in self.samples if n == name)


def scrape(port, client=None):
    r = client.request("/metrics") if client else fetch(port, "/metrics")
    assert_status(r, 200, "/metrics")
    return r, Page(r.body.decode("utf-8"))


def h2c(port, paths):
    """The paths as streams of one HTTP/2 connection by prior knowledge."""
    assert shutil.which("nghttp"), "needs nghttp2-client's nghttp (tests/setup.sh)"
    urls = ["http://127.0.0.1:%d%s" % (port, p) for p in paths]
    r = subprocess.run(["nghttp", "-n"] + urls, capture_output=True, timeout=10)
    assert r.returncode == 0, r.stderr


def promtool():
    tool = shutil.which("promtool")
    assert tool, "promtool missing: Debian's prometheus package (tests/setup.sh installs it)"
    return tool


# families present only with certificates or --acme, described in gatling.8's
# AUTOMATIC HTTPS (ACME) section rather than in /metrics' list
OWN_SECTION = {"gatling_tls_certificate_expiry_seconds", "gatling_acme_orders_total",
               "gatling_acme_failures_total", "gatling_acme_next_renewal_seconds",
               "gatling_acme_name_failures"}


def man_metric_names():
    """The metric names the /metrics subsection of gatling.8 lists."""
    with open(os.path.join(ROOT, "man", "gatling.8")) as f:
        man = f.read()
    start = man.index("\n.SS /metrics\n")
    end = man.index("\n.S", start + 1)
    return set(re.findall(r"gatling_[a-z0-9_]+", man[start:end].replace("\\_", "_")))


# --------------------------------------------------------------------------

def test_page_format_and_promtool(gatling):
    srv = gatling(TREE, args=("-T", "10", "-S", "-P", ODD_RULE))
    fetch(srv.port, "/f.txt")
    r, page = scrape(srv.port)
    assert r.header("Content-Type") == CTYPE, r
    assert r.header("Cache-Control") == "no-store", r
    assert r.header("Content-Length") == str(len(r.body)), r
    seen = set()
    for name, labels, value in page.samples:
        fam = page.family(name)
        seen.add(fam)
        assert fam in page.help and fam in page.type, "%s: no HELP or TYPE" % name
        assert value >= 0 and value == value, (name, labels, value)
        if page.type[fam] == "counter":
            assert name.endswith("_total"), "a counter not named *_total: %s" % name
        else:
            assert not name.endswith("_total"), "a %s named *_total: %s" % (page.type[fam], name)
    assert seen == set(page.type) == set(page.help), "families without samples"
    assert len({(n, tuple(sorted(lb.items()))) for n, lb, _ in page.samples}) == len(
        page.samples), "a series twice"
    assert page.get("gatling_backend_connections_total", **ODD) == 0
    assert page.get("gatling_info", version=page.samples[0][1]["version"],
                    io=srv.build.backend) == 1
    p = subprocess.run([promtool(), "check", "metrics"], input=r.body, capture_output=True,
                       timeout=20)
    assert p.returncode == 0 and not p.stdout and not p.stderr, (
        "promtool check metrics: status %d\n%s%s" % (p.returncode, p.stdout.decode(),
                                                       p.stderr.decode()))
    # gatling.8 lists every metric, and no other (but for the families of
    # certificates and --acme, which its AUTOMATIC HTTPS section names: with
    # GATLING_SCHEME=https the page has the certificate's expiry)
    names, listed = man_metric_names(), set(page.type) - OWN_SECTION
    assert names == listed, "gatling.8 lacks %s; names %s not on the page" % (
        sorted(listed - names), sorted(names - listed))


def test_every_server_status_counter(gatling):
    """Each /server-status key has its sample, with the same value (the two
    pages asked on one connection, one after the other: the status request
    is counted in between; a second boundary between them may expire the
    memory cache's file, so the pair is asked again then)."""
    srv = gatling(TREE, args=("-T", "10", "-S", "-P", ODD_RULE))
    with Client(srv.port) as c:
        for _ in range(3):
            assert_status(c.request("/f.txt"), 200)
        for attempt in range(3):
            r = c.request("/server-status?json")
            assert_status(r, 200)
            st = json.loads(r.body)
            _, page = scrape(srv.port, c)
            missing = set(st) - set(ON_METRICS) - NOT_ON_METRICS
            assert not missing, "/server-status keys not on /metrics: %s" % sorted(missing)
            differ = {key: (st[key], page.get(name, **labels))
                      for key, (name, labels) in ON_METRICS.items()
                      if page.get(name, **labels) != st[key]}
            if not differ:
                break
        assert not differ, "/server-status and /metrics differ: %s" % differ
    assert page.total("gatling_requests_total") == st["requests"] + 1 == 4 + 2 * attempt
    assert page.total("gatling_transferred_bytes_total") > st["bytes"]
    assert page.get("gatling_gzip_paced_seconds_total") == st["gzip_paced_ms"] / 1000
    # uptime is whole seconds, and a busy machine may take a second between the
    # status request and this line: 4 s of room, still far from any other clock
    assert abs(page.get("gatling_start_time_seconds") - (time.time() - st["uptime"])) <= 4
    assert page.get("gatling_workers") == 1


def status_code_from(port, src, target):
    """The status a client at src (named by a PROXY header) gets for target."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"PROXY TCP4 %s 127.0.0.1 40000 80\r\n" % src.encode() +
                  b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                  % target.encode())
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            assert chunk, "closed without an answer"
            head += chunk
    return int(head.split()[1])


@http_only
def test_loopback_only(gatling):
    """A client that is not on loopback (named by a PROXY header from a
    trusted proxy) gets 403, as for /server-status."""
    srv = gatling(TREE, args=("-T", "10", "-S", "-y", "http", "-Y", "127.0.0.1"))
    for src, want in (("192.0.2.7", 403), ("127.0.0.9", 200)):
        for target in ("/metrics", "/server-status?json"):
            assert status_code_from(srv.port, src, target) == want, (src, target)


@http_only
def test_status_from_opens_the_pages_to_listed_nets(gatling):
    """--status-from: a Prometheus server on another host scrapes; -S is implied,
    loopback keeps its access, an address outside the nets gets 403."""
    srv = gatling(TREE, args=("-T", "10", "-y", "http", "-Y", "127.0.0.1",
                              "--status-from", "192.0.2.0/28,2001:db8::1"))
    for src, want in (("192.0.2.7", 200), ("192.0.2.16", 403), ("198.51.100.1", 403),
                      ("127.0.0.9", 200)):
        for target in ("/metrics", "/server-status?json"):
            assert status_code_from(srv.port, src, target) == want, (src, target)


@http_only
def test_pages_stay_on_plain_http_under_X(gatling):
    """-X sends plain HTTP to HTTPS, but -S's pages are answered where the
    clients allowed to read them ask (issue 68): a Prometheus scrape of
    http://127.0.0.1/metrics was redirected to https://127.0.0.1/metrics,
    whose certificate names no address.  Anyone else, and every other path,
    is still redirected."""
    from conftest import test_pki as pki_dir  # not test_*: pytest would collect it
    srv = gatling(TREE, args=("-T", "10", "-X", "-C", os.path.join(pki_dir(), "certs"),
                              "-e", "0", "-y", "http", "-Y", "127.0.0.1",
                              "--status-from", "192.0.2.0/28"))
    for src, want in (("127.0.0.9", 200), ("192.0.2.7", 200), ("198.51.100.1", 301)):
        for target in ("/metrics", "/server-status", "/server-status?json"):
            assert status_code_from(srv.port, src, target) == want, (src, target)
    assert status_code_from(srv.port, "127.0.0.9", "/f.txt") == 301


@http_only
def test_histograms_per_protocol(gatling):
    """HTTP/1.1 and h2c requests in their own histograms: cumulative
    buckets on the fixed bounds, +Inf == _count == requests; a request whose
    head took 80 ms to arrive is timed from its first bytes."""
    srv = gatling(TREE, args=("-T", "10", "-S"))
    for _ in range(5):
        assert_status(fetch(srv.port, "/f.txt"), 200)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        s.sendall(b"GET /f.txt HTTP/1.1\r\nHo")
        time.sleep(0.08)
        s.sendall(b"st: x\r\nConnection: close\r\n\r\n")
        assert b"hello" in s.makefile("rb").read()
    h2c(srv.port, ["/f.txt", "/a.txt", "/b.txt", "/f.txt?2"])
    _, page = scrape(srv.port)
    want = {"http1": 6, "h2": 4, "ftp": 0, "h3": 0}  # this scrape is counted once it is sent
    for proto in PROTOCOLS:
        assert page.get("gatling_requests_total", protocol=proto) == want[proto], proto
        buckets = [(lb["le"], v) for n, lb, v in page.samples
                   if n == "gatling_request_duration_seconds_bucket" and lb["protocol"] == proto]
        assert [le for le, _ in buckets] == BOUNDS, buckets
        counts = [v for _, v in buckets]
        assert counts == sorted(counts), "not cumulative: %s" % buckets
        count = page.get("gatling_request_duration_seconds_count", protocol=proto)
        assert counts[-1] == count == want[proto], (proto, buckets, count)
        assert counts[BOUNDS.index("10")] == want[proto], "a request over 10 s: %s" % buckets
    le50ms = page.get("gatling_request_duration_seconds_bucket", protocol="http1", le="0.05")
    assert le50ms <= 5, "the slow head was not timed from its first bytes"
    # the head's first bytes are timed when the loop reads them, which a busy
    # machine can make a few ms after they were sent: 80 ms less some room
    assert page.get("gatling_request_duration_seconds_sum", protocol="http1") >= 0.06
    assert page.get("gatling_request_duration_seconds_sum", protocol="h2") < 4 * 10
    assert page.get("gatling_transferred_bytes_total", protocol="h2") >= 4 * 2


@http_only
def test_workers_summed(gatling):
    """-W 2: whichever worker answers, the page sums both; a worker killed
    and replaced leaves its counts in.  Each scrape is a request, counted by
    the worker that answered it once it is sent and published by it within
    METRICS_PUBLISH_MS (0.1 s): a scrape 0.15 s after another sees it (or a
    later one does, on a loaded machine), and the sum never goes down."""
    srv = gatling(TREE, args=("-T", "10", "-S", "-W", "2", "-n"), check_fds=False)
    for _ in range(20):  # new connections: the kernel spreads them over the workers
        assert_status(fetch(srv.port, "/f.txt"), 200)
    seen = []

    def exact(what):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.15)
            _, page = scrape(srv.port)
            seen.append(page.total("gatling_requests_total"))
            assert seen == sorted(seen), "the sum went down: %s" % seen
            if seen[-1] == 20 + len(seen) - 1:
                return page
        raise AssertionError("%s: the sum is not the requests made: %s" % (what, seen))

    page = exact("both workers")
    assert page.get("gatling_workers") == 2
    # the scrape's connection, and the other worker's last one if it published
    # before it saw the close
    assert 1 <= page.get("gatling_connections") <= 2, page.get("gatling_connections")
    with open("/proc/%d/task/%d/children" % (srv.pid, srv.pid)) as f:
        kids = [int(x) for x in f.read().split()]
    assert len(kids) == 2, kids
    time.sleep(1.0)  # the last scrape's count published by its worker (0.1 s; a busy machine)
    os.kill(kids[0], signal.SIGKILL)
    wait_for(lambda: any("restarting" in line for line in srv.errlog), 15, "the restart")
    exact("after a worker was killed and replaced")


def status_requests(port, query="json"):
    r = fetch(port, "/server-status?" + query)
    assert_status(r, 200, "/server-status?" + query)
    return json.loads(r.body)


@http_only
def test_status_json_sums_workers_as_metrics_does(gatling):
    """-W 2 under a small load: /server-status?json's counters are the whole
    server's, as /metrics's are, whichever worker answers (they read one
    worker's alone before issue 90).  Fetched in turn, the two never go down
    and never pass the requests made (the load's, at most one in flight, and
    the fetches before); quiet, each one is exactly the requests made.
    ?json&worker is the answering worker's alone, with its slot."""
    srv = gatling(TREE, args=("-T", "10", "-S", "-W", "2", "-n"), check_fds=False)
    made, stop, failed = [0], threading.Event(), []

    def load():
        while not stop.is_set():
            r = fetch(srv.port, "/f.txt")  # new connections: both workers answer
            if r.status != 200:
                failed.append(r.status)
            made[0] += 1
            time.sleep(0.005)

    t = threading.Thread(target=load)
    t.start()
    seen, asked = [], 0
    try:
        for i in range(24):
            time.sleep(0.15)
            if i % 2:
                v = scrape(srv.port)[1].total("gatling_requests_total")
            else:
                v = status_requests(srv.port)["requests"]
            seen.append(v)
            asked += 1
            assert seen == sorted(seen), "json, metrics, ... went down: %s" % seen
            assert v <= made[0] + 1 + i, (v, made[0], i, seen)
    finally:
        stop.set()
        t.join()
    assert not failed and made[0] > 20, (failed, made[0])
    for i in range(6):
        want = made[0] + asked
        deadline = time.monotonic() + 10
        while True:
            time.sleep(0.15)
            if i % 2:
                v = scrape(srv.port)[1].total("gatling_requests_total")
            else:
                v = status_requests(srv.port)["requests"]
            asked += 1
            assert v <= want, (v, want)
            if v == want:
                break
            assert time.monotonic() < deadline, "%s: %d, not the %d made" % (i, v, want)
            want += 1
    workers = {}
    for _ in range(40):
        one = status_requests(srv.port, "json&worker")
        workers[one["worker"]] = one["requests"]
        if len(workers) == 2:
            break
    assert sorted(workers) == [0, 1], workers
    total = status_requests(srv.port)["requests"]
    assert all(0 < v < total for v in workers.values()), (workers, total)
    assert "worker" not in status_requests(srv.port)


@http_only
def test_status_shows_each_worker(gatling):
    """Issue 90, item 1's "each worker's where asked": under -W 2, ?json's
    per_worker and the page's Workers table give each worker's own numbers
    (slot, pid, requests...), summing to the server's; ?json&worker=N is
    worker N's counters whichever worker answers, N out of range 404.
    Without -W: no per-worker table, worker 0 is the one process."""
    srv = gatling(TREE, args=("-T", "10", "-S", "-W", "2", "-n"), check_fds=False)
    for _ in range(40):
        assert_status(fetch(srv.port, "/f.txt"), 200)  # new connections: both workers
    seen = {}

    def settled():  # the other worker's last count published (0.1 s)
        j = seen["j"] = status_requests(srv.port)
        return sum(w["requests"] for w in j["per_worker"]) == j["requests"] >= 40
    wait_for(settled, 10, "per_worker summing to the server's requests")
    j = seen["j"]
    per = j["per_worker"]
    assert [w["worker"] for w in per] == [0, 1], per
    assert sorted(w["pid"] for w in per) == sorted(j["processes"]["workers"]), (per, j)
    assert all(w["requests"] > 0 for w in per), per  # else the test shows nothing
    for w in per:
        one = status_requests(srv.port, "json&worker=%d" % w["worker"])
        assert one["worker"] == w["worker"], one
        # fetches since are counted, one at most by this worker
        assert w["requests"] <= one["requests"] <= w["requests"] + 2, (w, one["requests"])
        assert "per_worker" in one
    assert fetch(srv.port, "/server-status?json&worker=2").status == 404
    page = fetch(srv.port, "/server-status").body.decode()
    table = page.split('<table id="workers">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr><td>") == 2, table
    for w in per:
        assert "<tr><td>%d</td><td>%d</td>" % (w["worker"], w["pid"]) in table, table
    one = gatling(TREE, args=("-T", "10", "-S"))
    j = status_requests(one.port)
    assert j["per_worker"] == [], j["per_worker"]
    assert 'id="workers"' not in fetch(one.port, "/server-status").body.decode()
    assert status_requests(one.port, "json&worker=0")["worker"] == 0
    assert fetch(one.port, "/server-status?json&worker=1").status == 404


# --------------------------------------------------------------------------
# Debian's Prometheus scraping gatling


def prom_query(port, expr):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
    with urllib.request.urlopen(url, timeout=5) as r:
        answer = json.load(r)
    assert answer["status"] == "success", answer
    return [float(s["value"][1]) for s in answer["data"]["result"]]


@pytest.fixture(scope="module", autouse=True)
def scraped(build, tmp_path_factory):
    """A gatling of its own and Prometheus scraping it every second, started
    with the module (Prometheus scrapes a new target only after about 5 s, a
    wait the other tests fill): (server, Prometheus' API port, its log), or None on
    the other builds and passes.  Prometheus is killed at the end."""
    if build.name != once_build() or TLS:
        yield None
        return
    binary = shutil.which("prometheus")
    assert binary, "prometheus missing: Debian's prometheus package (tests/setup.sh)"
    d = tmp_path_factory.mktemp("prometheus")
    make_docroot(str(d / "www"), TREE)
    with running_server(build, str(d / "www"), ("-T", "10", "-S", "-n")) as srv:
        conf = d / "prometheus.yml"
        conf.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        "scrape_configs:\n  - job_name: gatling\n    static_configs:\n"
                        "      - targets: ['127.0.0.1:%d']\n" % srv.port)
        port = free_port()
        with open(d / "prometheus.log", "wb") as log:
            proc = subprocess.Popen(
                [binary, "--config.file=%s" % conf, "--storage.tsdb.path=%s" % (d / "tsdb"),
                 "--web.listen-address=127.0.0.1:%d" % port],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=str(d))
        try:
            yield srv, port, d / "prometheus.log"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@http_only
def test_prometheus_scrapes_exact_counts(scraped):
    """Last in the module: Prometheus has had the other tests' time to
    begin scraping."""
    if not scraped:
        pytest.skip("the Prometheus test runs once, on the %s build" % once_build())
    srv, port, log = scraped

    def up():
        try:
            return prom_query(port, 'up{job="gatling"}') == [1.0]
        except OSError:
            return False

    wait_for(up, 20, "Prometheus' first scrape of gatling (log: %s)" % log)
    for _ in range(7):
        assert_status(fetch(srv.port, "/f.txt"), 200)
    h2c(srv.port, ["/f.txt", "/a.txt", "/b.txt"])
    # every scrape is a request too, counted once answered: the k-th scrape
    # sees the k - 1 before it, and Prometheus holds k samples of `up`
    exact = 'sum(gatling_requests_total) - sum(count_over_time(up{job="gatling"}[1h])) + 1'

    def answered():
        return (prom_query(port, exact) == [10.0] and
                prom_query(port, 'gatling_requests_total{protocol="h2"}') == [3.0])

    wait_for(answered, 20, "Prometheus to answer exactly 10 requests, 3 of them h2 (log: %s)"
             % log)
    buckets = prom_query(port, 'gatling_request_duration_seconds_bucket{protocol="h2",le="+Inf"}')
    assert buckets == [3.0], buckets
