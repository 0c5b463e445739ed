"""The response cache (route/cache.c, a vhost's .cache file) in front of
real backends, with real clients: a threaded HTTP/1.1 origin written here
(every answer says "request N", N its global count, so a test sees what
reached it and which answer each client got), php-fpm for FastCGI, and CGI
scripts.  The origin answers what the query asks: cc= (Cache-Control), sc=
(Surrogate-Control), cookie (Set-Cookie: n=N), vary=, etag= (and a 304 to a
matching If-None-Match), location=, status=, sleep= (seconds), slowfirst=
(only the first request of the path sleeps), echo (the request's fields in
the body), size= (a body that long), chunked= (that long, without a length,
"abcdefg" over and over after the first line; pause= seconds after its first
16 kB);
cdn= and cdn2= (one or two CDN-Cache-Control lines), vary2= (a second Vary
line), age= (Age), lm (Last-Modified: LM_DATE, and a 304 to a matching
If-Modified-Since), close (no length: the body ends with the connection),
short=N (a Content-Length N bytes over the body, then the connection closes;
shortfirst=N for the first request of the path only);
X-Want-Status in the request sets the status (a backend that refuses a
request for one of its fields).

What is proven, with the origin's counts, Cache-Status and bodies: the
micro-cache (ttl, Age, a stale hit and one background refresh) and RFC mode
(no freshness: not stored; max-age or Surrogate-Control: stored);
collapsing of parallel misses over HTTP/1.1, on 30 streams of one HTTP/2
connection, for FastCGI and for CGI, with clients that leave, with Vary,
Range and conditionals among the waiters; the lock's timeout; pass for an
unshareable answer (Set-Cookie never reaches a second client, the next
burst goes at once); grace; stale-if-error and must-revalidate with the
origin gone; attacks (forwarding fields, web cache deception with a path
after the script, credentials, a 400 or 404 provoked at the origin, request
smuggling, a GET with a body); invalidation by unsafe methods and Location;
PURGE, by prefix, and refused to others; Vary; Range, HEAD and conditionals
from a stored response; revalidation; the object and memory caps; SIGTERM
with fetches under way; a bad .cache; --cache.

Runs in the http, https and h2 passes (the framing tests are HTTP/1.1 only;
the PURGE-from-elsewhere test speaks HTTP/1.1 behind a PROXY header in all).
"""
import contextlib
import http.server
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest

from conftest import (ALARMING, H2, OTHER_BACKENDS, TLS, Client, H1Client, Mode, client_tls_context,
                      close_all_clients, h1_only, http_only, import_h2, make_docroot, serial,
                      start_server, wait_for, BENCH, figure, MARGIN)
from test_proxy import php_fpm, status_counters  # noqa: F401 (a fixture)

LOCK_MS = 1000  # test_lock_timeout's .cache: lock 1 (the default is 5 s)
PASS_SECS = 10  # CACHE_PASS_SECS

# The cache sits above the IO layer: on the other backends than the first
# (and its sanitizer build) only these run, the ones that lean on the loop's
# deadlines (the cache's clock) and its wakeups; the whole file runs on the
# first, over HTTP, HTTPS and HTTP/2.
ON_EVERY_BACKEND = ("test_collapsing_http1", "test_collapsing_cgi", "test_lock_timeout",
                    "test_clients_that_leave",
                    "test_shutdown_with_fetches_in_flight", "test_micro_cache_ttl")


ON_SANITIZER = ("test_unsized_response_over_the_object_cap", "test_memory_cap_evicts",
                "test_origin_cuts_the_body", "test_origin_cuts_a_passed_body",
                "test_overflow_with_a_range_owner", "test_clients_that_leave_mid_body",
                "test_length_over_the_object_cap_passes", "test_revalidation",
                "test_unsafe_methods_invalidate", "test_set_cookie_is_passed_not_queued",
                "test_clients_that_leave", "test_vary", "test_collapsing_fastcgi")
ON_TLS = ("test_collapsing_http2_streams", "test_streamed_response_collapsed",
          "test_range_and_conditional_waiters", "test_vary_waiters", "test_purge",
          "test_range_head_conditional_from_a_hit", "test_overflow_while_collapsed")


@pytest.fixture(autouse=True)
def _backend_subset(request):
    b = request.node.callspec.params.get("build") if hasattr(request.node, "callspec") else None
    if b in OTHER_BACKENDS and request.node.originalname not in ON_EVERY_BACKEND:
        pytest.skip("the cache is above io/: the whole file runs on the first backend")
    # over HTTPS the cache sees what it sees over HTTP (TLS is below the exchange):
    # the subset that crosses the codecs
    if TLS and not H2 and request.node.originalname not in ON_EVERY_BACKEND + ON_TLS:
        pytest.skip("over TLS the subset that crosses the codecs; the rest runs over HTTP")
    # the sanitizer build over HTTP: what moves memory around (buffers handed
    # over, entries held past eviction, fetches ended early); the rules are the
    # plain build's.  The h2 pass runs on the sanitizer build alone (make
    # check's CHECK_H2_BUILDS, run-check's cut of issue 55): the whole file there
    if b and b.endswith("-san") and not H2 and request.node.originalname not in \
            ON_EVERY_BACKEND + ON_TLS + ON_SANITIZER:
        pytest.skip("the sanitizer build runs the tests that move memory around")


# --------------------------------------------------------------------------
# The origin

class Origin:
    """A threaded HTTP/1.1 server on a loopback port, in this process."""

    def __init__(self):
        self.lock = threading.Lock()
        self.n = 0
        self.seen = []  # (method, target, {field: value}) of every request, in order
        self.delay = {}  # path -> seconds every request of it sleeps (set by a test)
        self.conns = set()
        self.stopped = False
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with origin.lock:
                    origin.conns.add(self.connection)

            def finish(self):
                with origin.lock:
                    origin.conns.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def log_message(self, *a):
                pass

            def do_GET(self):
                if origin.stopped:
                    self.close_connection = True
                    return
                origin.answer(self)
            do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def answer(self, h):
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            h.rfile.read(length)
        u = urllib.parse.urlsplit(h.path)
        q = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        with self.lock:
            self.n += 1
            n = self.n
            first = not any(s[1].split("?")[0] == u.path for s in self.seen)
            self.seen.append((h.command, h.path, {k.lower(): v for k, v in h.headers.items()}))
            delay = self.delay.get(u.path, 0)
        delay += float(q.get("sleep", 0)) + (float(q.get("slowfirst", 0)) if first else 0)
        if delay:
            time.sleep(delay)
        status = int(h.headers.get("X-Want-Status") or q.get("status", 200))
        body = b"request %d\n" % n
        if "echo" in q:
            body += b"".join(b"%s: %s\n" % (k.lower().encode("latin-1"), v.encode("latin-1"))
                             for k, v in h.headers.items())
        if "size" in q:
            body += b"s" * (int(q["size"]) - len(body))
        fields = [("Content-Type", "text/plain")]
        for name, field in (("cc", "Cache-Control"), ("vary", "Vary"), ("vary2", "Vary"),
                            ("sc", "Surrogate-Control"), ("cdn", "CDN-Cache-Control"),
                            ("cdn2", "CDN-Cache-Control"), ("age", "Age"),
                            ("location", "Location")):
            if name in q:
                fields.append((field, q[name]))
        if "lm" in q:
            fields.append(("Last-Modified", LM_DATE))
            if h.headers.get("If-Modified-Since") == LM_DATE:
                status, body = 304, b""
        if "cookie" in q:
            fields.append(("Set-Cookie", "n=%d; Path=/" % n))
        if "etag" in q:
            etag = '"%s"' % q["etag"]
            fields.append(("ETag", etag))
            if h.headers.get("If-None-Match") == etag:
                status, body = 304, b""
        h.send_response(status)
        for k, v in fields:
            h.send_header(k, v)
        if "chunked" in q and status != 304:
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            size = int(q["chunked"])
            data = body + (b"abcdefg" * (size // 7 + 1))[:size - len(body)]  # where each byte is
            for i in range(0, len(data), 16384):
                piece = data[i:i + 16384]
                h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                if i == 0 and "pause" in q:  # mid-body
                    h.wfile.flush()
                    time.sleep(float(q["pause"]))
            h.wfile.write(b"0\r\n\r\n")
            return
        short = int(q.get("short", 0) or (first and q.get("shortfirst", 0)) or 0)
        if "close" in q and status != 304:  # no length: the body ends with the connection
            h.send_header("Connection", "close")
            h.end_headers()
            h.wfile.write(body)
            h.close_connection = True
            return
        h.send_header("Content-Length", str(len(body) + short))
        h.end_headers()
        if h.command != "HEAD" and status != 304:
            h.wfile.write(body)
        if short:  # a length promised and not kept: the connection closes early
            h.close_connection = True

    def count(self, path=None):
        """Requests that reached the origin (for path, its query aside)."""
        with self.lock:
            return sum(1 for s in self.seen if path is None or s[1].split("?")[0] == path)

    def requests(self, path):
        with self.lock:
            return [s for s in self.seen if s[1].split("?")[0] == path]

    def stop(self):
        """Gone: the listener closed (connections refused) and every kept-alive
        connection gatling pooled shut down."""
        self.stopped = True
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            for c in list(self.conns):
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture
def origin():
    o = Origin()
    yield o
    if not o.stopped:
        o.stop()


def cache_server(gatling, origin, conf="", extra=(), tree=None):
    """A gatling with .proxy and .cache (conf) in its root, -S, and the rule
    ^/c/ -> origin."""
    t = {".proxy": "", ".cache": conf, "index.html": "static\n"}
    t.update(tree or {})
    args = ("-T", "10", "-S", "-P", "127.0.0.1/%d/^/c/" % origin.port) + tuple(extra)
    return gatling(t, args=args, check_fds=False)


def cs(r):
    return r.header("Cache-Status")


def body_n(r):
    """N of a "request N" body."""
    m = re.match(rb"request (\d+)\n", r.body)
    assert m, r
    return int(m.group(1))


def get(srv, target, headers=None, method="GET", timeout=10):
    with Client(srv.port, timeout=timeout) as c:
        return c.request(target, method=method, headers=headers)


def counters(srv):
    return {k: v for k, v in status_counters(srv).items() if k.startswith("cache_")}


def parallel(n, fn):
    """fn(i, barrier) in n threads at once; their results (an exception is raised)."""
    barrier = threading.Barrier(n)
    out = [None] * n

    def run(i):
        try:
            out[i] = fn(i, barrier)
        except BaseException as e:  # reported below
            out[i] = e
            barrier.abort()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    errors = [o for o in out if isinstance(o, BaseException)]
    if errors:
        raise errors[0]
    return out


def burst(srv, target, n, headers=None, timeout=15):
    """n clients, each connected first, send the same GET at once: their
    responses, each with .took (seconds from its request to its response)."""
    def one(i, barrier):
        with Client(srv.port, timeout=timeout) as c:
            barrier.wait(30)
            t0 = time.monotonic()
            r = c.request(target, headers=headers)
            r.took = time.monotonic() - t0
            return r
    return parallel(n, one)


def h2_burst(port, target, n, timeout=15):
    """n GETs of target as n streams of one HTTP/2 connection (h2c by prior
    knowledge on plain HTTP, ALPN h2 over TLS): [(status, fields, body)]."""
    import_h2()
    import h2.config
    import h2.connection
    import h2.events
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if TLS:
        sock = client_tls_context(["h2"]).wrap_socket(sock, server_hostname="localhost")
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                             header_encoding="latin-1"))
    c.initiate_connection()
    ids = []
    for _ in range(n):
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "GET"), (":path", target),
                             (":scheme", "https" if TLS else "http"),
                             (":authority", "localhost")], end_stream=True)
        ids.append(sid)
    heads, bodies, ended = {}, {s: b"" for s in ids}, set()
    deadline = time.monotonic() + timeout
    with sock:
        sock.sendall(c.data_to_send())
        while len(ended) < n:
            assert time.monotonic() < deadline, "HTTP/2: %d of %d streams ended" % (len(ended), n)
            data = sock.recv(65536)
            assert data, "the connection closed with %d of %d streams ended" % (len(ended), n)
            for ev in c.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    heads[ev.stream_id] = dict(ev.headers)
                elif isinstance(ev, h2.events.DataReceived):
                    bodies[ev.stream_id] += ev.data
                    c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    ended.add(ev.stream_id)
                elif isinstance(ev, h2.events.StreamReset):
                    raise AssertionError("stream %d reset (%s)" % (ev.stream_id, ev.error_code))
            sock.sendall(c.data_to_send())
    return [(int(heads[s][":status"]), heads[s], bodies[s]) for s in ids]


MAXAGE = "cc=max-age%3D60"  # a response fresh for a minute
LM_DATE = "Mon, 02 Jan 2023 10:00:00 GMT"  # the origin's Last-Modified (lm)


# --------------------------------------------------------------------------
# Freshness: the micro-cache and RFC mode

def test_micro_cache_ttl(gatling, origin):
    """ttl 3: a miss stored, hits with Age, then a stale hit that one
    background fetch refreshes, then the new body.  (ttl 3, not 2: the three
    hits must come within the ttl, on a busy machine too.)"""
    srv = cache_server(gatling, origin, "# the micro-cache\nttl 3\n")
    r = get(srv, "/c/micro")
    assert r.status == 200 and r.body == b"request 1\n", r
    assert cs(r) == "gatling; fwd=miss; stored", r
    for _ in range(3):
        r = get(srv, "/c/micro")
        assert r.status == 200 and r.body == b"request 1\n", r
        assert cs(r) == "gatling; hit", r
        assert re.fullmatch(r"\d+", r.header("Age") or ""), r
    assert origin.count() == 1
    time.sleep(3.1)  # past the ttl, inside the grace (10 s)
    t0 = time.monotonic()
    r = get(srv, "/c/micro")
    assert r.status == 200 and r.body == b"request 1\n", r
    assert cs(r) == "gatling; hit; detail=stale", r
    assert int(r.header("Age")) >= 3, r
    assert time.monotonic() - t0 < 5  # a hang (that it does not wait: test_grace_one_refresh)
    wait_for(lambda: counters(srv)["cache_stored"] == 2, 15, "the background refresh stored")
    assert origin.count() == 1 + 1, "one refresh"
    r = get(srv, "/c/micro")
    assert r.body == b"request 2\n" and cs(r).startswith("gatling; hit"), r
    st = counters(srv)
    assert st["cache_misses"] == 1 and st["cache_stale"] >= 1 and st["cache_fetches"] == 2, st
    assert st["cache_hits"] >= 3 and st["cache_entries"] == 1, st


def test_rfc_mode_needs_freshness(gatling, origin):
    """An empty .cache: a response without freshness information is not
    stored (each request reaches the origin; the key is "pass"), one with
    max-age is (or Surrogate-Control's); a ttl with a regex applies to the
    paths it matches only."""
    srv = cache_server(gatling, origin, "")
    r1, r2 = get(srv, "/c/plain"), get(srv, "/c/plain")
    assert (body_n(r1), body_n(r2)) == (1, 2), (r1, r2)
    assert cs(r1) == "gatling; fwd=miss; detail=pass", r1
    assert cs(r2) == "gatling; fwd=uri-miss; detail=pass", r2
    r3, r4 = get(srv, "/c/fresh?" + MAXAGE), get(srv, "/c/fresh?" + MAXAGE)
    assert body_n(r3) == body_n(r4) == 3, (r3, r4)
    assert cs(r3) == "gatling; fwd=miss; stored" and cs(r4) == "gatling; hit", (r3, r4)
    assert r4.header("Cache-Control") == "max-age=60", r4
    assert origin.count("/c/plain") == 2 and origin.count("/c/fresh") == 1
    st = counters(srv)
    assert st["cache_stored"] == 1 and st["cache_passes"] == 2 and st["cache_hits"] == 1, st

    # Surrogate-Control speaks to the cache in Cache-Control's place, and is
    # not passed on
    t = "/c/sc?cc=max-age%3D0&sc=max-age%3D60"
    r1, r2 = get(srv, t), get(srv, t)
    assert body_n(r1) == body_n(r2) and cs(r2) == "gatling; hit", (r1, r2)
    assert r2.header("Surrogate-Control") is None and r2.header("Cache-Control") == "max-age=0"
    seen = origin.requests("/c/sc")[0][2]
    assert seen.get("surrogate-capability") == 'gatling="Surrogate/1.0"', seen
    t = "/c/sc2?cc=no-store&sc=max-age%3D60%3Bgatling"
    r1, r2 = get(srv, t), get(srv, t)
    assert body_n(r1) == body_n(r2) and cs(r2) == "gatling; hit", "targeted at gatling"

    srv = cache_server(gatling, origin, "ttl 60 ^/c/yes\n")
    assert body_n(get(srv, "/c/yes")) == body_n(get(srv, "/c/yes")), "the ttl applies"
    assert body_n(get(srv, "/c/no")) != body_n(get(srv, "/c/no")), "not to this path"
    assert origin.count("/c/yes") == 1 and origin.count("/c/no") == 2


def test_surrogate_control_for_another_device(gatling, origin):
    srv = cache_server(gatling, origin, "")
    t = "/c/sc3?" + MAXAGE + "&sc=no-store%3Bakamai"
    assert cs(get(srv, t)) == "gatling; fwd=miss; stored"
    assert cs(get(srv, t)) == "gatling; hit"


# --------------------------------------------------------------------------
# Collapsing: one backend request however many ask

def check_collapsed(responses, statuses):
    bodies = {r.body for r in responses}
    assert len(bodies) == 1, bodies
    got = sorted(cs(r) for r in responses)
    want = sorted(["gatling; fwd=miss; stored"] + ["gatling; fwd=miss; collapsed"] *
                  (len(responses) - 1))
    assert got == want, got
    assert statuses == [200] * len(responses)


def test_collapsing_http1(gatling, origin):
    srv = cache_server(gatling, origin, "")
    t = "/c/slow?sleep=1&" + MAXAGE
    rs = burst(srv, t, 30)
    assert origin.count("/c/slow") == 1, "one backend request for 30 clients"
    check_collapsed(rs, [r.status for r in rs])
    assert rs[0].body == b"request 1\n"
    # one fetch of 1 s for all (one by one would be 30 s); 8: a busy machine
    assert max(r.took for r in rs) < 8, [round(r.took, 2) for r in rs]
    st = counters(srv)
    assert st["cache_misses"] == 1 and st["cache_collapsed"] == 29, st
    assert st["cache_fetches"] == 1 and st["cache_stored"] == 1, st
    r = get(srv, t)
    assert cs(r) == "gatling; hit" and r.body == b"request 1\n", r


def test_collapsing_http2_streams(gatling, origin):
    """30 streams of one HTTP/2 connection for one slow URL: one fetch."""
    srv = cache_server(gatling, origin, "")
    out = h2_burst(srv.port, "/c/slow?sleep=1&" + MAXAGE, 30)
    assert origin.count("/c/slow") == 1
    assert {b for _, _, b in out} == {b"request 1\n"}
    got = sorted(f.get("cache-status") for _, f, _ in out)
    assert got == sorted(["gatling; fwd=miss; stored"] +
                         ["gatling; fwd=miss; collapsed"] * 29), got
    assert [s for s, _, _ in out] == [200] * 30
    assert counters(srv)["cache_collapsed"] == 29


PHP_COUNTER = r'''<?php
function bump($name) {
    $fp = fopen(__DIR__ . "/$name.count", "c+");
    flock($fp, LOCK_EX);
    $n = (int)stream_get_contents($fp) + 1;
    ftruncate($fp, 0);
    rewind($fp);
    fwrite($fp, (string)$n);
    fflush($fp);
    flock($fp, LOCK_UN);
    fclose($fp);
    return $n;
}
header("Content-Type: text/plain");
'''

PHP_SLOW = PHP_COUNTER + r'''
$n = bump("slow");
usleep(1000000);
header("Cache-Control: max-age=60");
echo "request $n\n";
'''

# a page with a user's data; /account.php/x.css runs it (gatling sends SCRIPT_NAME
# /account.php and PATH_INFO /x.css: test_pathinfo.py)
PHP_ACCOUNT = PHP_COUNTER + r'''
$n = bump("account");
if (isset($_GET["private"]))
    header("Cache-Control: private");
if (isset($_COOKIE["sid"]))
    echo "account of ", $_COOKIE["sid"], "\n";
elseif (isset($_GET["private"]))
    echo "private page $n\n";
else {
    header("Set-Cookie: sid=s$n");
    echo "new session s$n\n";
}
echo "uri=", $_SERVER["REQUEST_URI"], " script=", basename($_SERVER["SCRIPT_FILENAME"]), "\n";
'''


def php_count(srv, name):
    try:
        with open(os.path.join(srv.docroot, name + ".count")) as f:
            return int(f.read() or 0)
    except FileNotFoundError:
        return 0


def test_collapsing_fastcgi(gatling, php_fpm):  # noqa: F811
    """12 clients of a slow PHP page (php-fpm has 2 processes): it runs once."""
    srv = gatling({".proxy": "", ".cache": "", "slow.php": PHP_SLOW},
                  args=("-T", "10", "-S", "-P", "F/unix:%s:\\.php$" % php_fpm), check_fds=False)
    rs = burst(srv, "/slow.php", 12)
    assert php_count(srv, "slow") == 1
    check_collapsed(rs, [r.status for r in rs])
    assert rs[0].body == b"request 1\n"
    assert counters(srv)["cache_collapsed"] == 11


def test_collapsing_cgi(gatling):
    """The cache in front of CGI: 8 clients of a slow script, one process."""
    script = "#!/bin/sh\nsleep 1\nprintf 'Content-Type: text/plain\\r\\n\\r\\nrequest %s\\n' $$\n"
    srv = gatling({".cache": "ttl 30\n", "slow.cgi": Mode(script, 0o755)},
                  args=("-T", "10", "-S", "-w", "\\.cgi$"), check_fds=False)
    rs = burst(srv, "/slow.cgi", 8)
    check_collapsed(rs, [r.status for r in rs])
    st = status_counters(srv)
    assert st["cgi_spawned"] == 1 and st["cache_collapsed"] == 7, st
    r = get(srv, "/slow.cgi")
    assert cs(r) == "gatling; hit" and r.body == rs[0].body, r


def test_cgi_local_redirect_to_a_file(gatling):
    script = "#!/bin/sh\nprintf 'Location: /plain.txt\\r\\n\\r\\n'\n"
    srv = gatling({".cache": "ttl 30\n", "local.cgi": Mode(script, 0o755),
                   "plain.txt": "plain file\n"}, args=("-T", "10", "-S", "-w", "\\.cgi$"),
                  check_fds=False)
    r = get(srv, "/local.cgi")
    assert r.status == 200 and r.body == b"plain file\n", r


def test_cgi_local_redirect_to_a_script(gatling):
    """A local redirect to another CGI program is followed inside the fetch;
    the answer is stored under the URL asked for."""
    loc = "#!/bin/sh\nprintf 'Location: /env.cgi?from=loc\\r\\n\\r\\n'\n"
    env = ("#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nquery %s pid %s\\n' "
           "\"$QUERY_STRING\" $$\n")
    tree = {".cache": "ttl 30\n", "local.cgi": Mode(loc, 0o755), "env.cgi": Mode(env, 0o755)}
    srv = gatling(tree, args=("-T", "10", "-S", "-w", "\\.cgi$"), check_fds=False)
    r1, r2 = get(srv, "/local.cgi"), get(srv, "/local.cgi")
    assert r1.status == 200 and r1.body.startswith(b"query from=loc pid "), r1
    assert r2.body == r1.body and cs(r2) == "gatling; hit", r2


@serial  # timed: 2 s, and its bounds assume a machine that is not overloaded
@http_only  # the lock is no matter of the protocol
def test_lock_timeout(gatling, origin):
    """A fetch slower than the lock (.cache's lock, 1 s here): the waiters
    stop waiting and go to the origin themselves; the slow answer is still
    stored."""
    srv = cache_server(gatling, origin, "lock 1\n")
    t = "/c/lock?slowfirst=2&" + MAXAGE
    rs = burst(srv, t, 4, timeout=20)
    assert origin.count("/c/lock") == 4
    owner = [r for r in rs if r.body == b"request 1\n"]
    waiters = [r for r in rs if r.body != b"request 1\n"]
    assert len(owner) == 1 and cs(owner[0]) == "gatling; fwd=miss; stored", rs
    assert owner[0].took >= 1.9, owner[0].took
    assert sorted(body_n(r) for r in waiters) == [2, 3, 4]
    for r in waiters:
        assert LOCK_MS / 1000 - 0.1 <= r.took, r.took  # not before the lock's time
        figure("a waiter gone to the origin after the 1 s lock", r.took, "s", hi=1.8,
               kind=BENCH)
        assert r.status == 200 and cs(r) is None, r
    st = counters(srv)
    assert st["cache_lock_timeouts"] == 3 and st["cache_collapsed"] == 3, st
    r = get(srv, t)
    assert r.body == b"request 1\n" and cs(r) == "gatling; hit", r


def send_only(srv, target, headers=None):
    """A client that sends a GET and does not read (yet)."""
    c = Client(srv.port, timeout=10)
    c.send(("GET %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n" % (
        target, "".join("%s: %s\r\n" % h for h in headers or []))).encode())
    return c


def test_clients_that_leave(gatling, origin):
    """The client whose request began a fetch, and a waiter, go away while it
    runs: the fetch goes on, the one left gets the answer, the next a hit.
    For an unshareable answer the waiter left goes to the origin itself."""
    srv = cache_server(gatling, origin, "")
    for target, stored in (("/c/leave?sleep=1&" + MAXAGE, True),
                           ("/c/leavepass?sleep=1&cookie&" + MAXAGE, False)):
        owner = send_only(srv, target)
        time.sleep(0.2)
        waiter, stays = send_only(srv, target), send_only(srv, target)
        time.sleep(0.2)
        owner.reset()
        waiter.reset()
        r = stays.read_response()
        stays.close()
        path = target.split("?")[0]
        if stored:
            assert r.status == 200 and body_n(r) == 1, r
            assert cs(r) == "gatling; fwd=miss; collapsed", r
            assert cs(get(srv, target)) == "gatling; hit"
            assert origin.count(path) == 1
        else:
            assert r.status == 200 and r.header("Set-Cookie") == "n=%d; Path=/" % body_n(r), r
            assert origin.count(path) == 2, "the waiter asked the origin itself"
    srv.check_alive()


def test_clients_that_leave_mid_body(gatling, origin):
    """The client whose request began a fetch goes away while the body comes
    (the origin pauses after its first 16 kB): the fetch goes on for the
    one collapsed on it, which gets the body whole; the entry is stored."""
    srv = cache_server(gatling, origin, "")
    t = "/c/trickle?chunked=100000&pause=1&" + MAXAGE
    owner = send_only(srv, t)
    time.sleep(0.2)
    stays = send_only(srv, t)
    wait_for(lambda: counters(srv)["cache_collapsed"] == 1, 10, "the second collapsed")
    time.sleep(0.3)  # inside the origin's pause: both have the head and 16 kB
    owner.reset()
    r = stays.read_response()
    stays.close()
    assert r.status == 200 and len(r.body) == 100000 and body_n(r) == 1, r
    assert cs(r) == "gatling; fwd=miss; collapsed", r
    r = get(srv, t)
    assert cs(r) == "gatling; hit" and len(r.body) == 100000 and body_n(r) == 1, r
    assert origin.count() == 1
    srv.check_alive()


def test_vary_variants_bounded(gatling, origin):
    """Nine values of a field the answer varies on: at most eight variants
    are kept (CACHE_VARIANTS); the newest are hits."""
    srv = cache_server(gatling, origin, "")
    t = "/c/vl?vary=Accept-Language&" + MAXAGE
    for i in range(9):
        r = get(srv, t, headers=[("Accept-Language", "l%d" % i)])
        assert cs(r) == "gatling; fwd=miss; stored" and body_n(r) == i + 1, r
    st = counters(srv)
    assert st["cache_entries"] == 8 and st["cache_stored"] == 9, st
    for i in range(1, 9):
        r = get(srv, t, headers=[("Accept-Language", "l%d" % i)])
        assert cs(r) == "gatling; hit" and body_n(r) == i + 1, (i, r)


def test_vary_waiters(gatling, origin):
    """Clients with two Accept-Encoding values wait on one fetch of a URL
    that varies on it: those the answer does not match ask again, and are
    collapsed on a second fetch -- two backend requests, not six."""
    srv = cache_server(gatling, origin, "")
    t = "/c/vw?vary=Accept-Encoding&sleep=0.7&echo&" + MAXAGE

    def one(i, barrier):
        ae = "gzip" if i % 2 else "br"
        with Client(srv.port, timeout=15) as c:
            barrier.wait(30)
            return ae, c.request(t, headers=[("Accept-Encoding", ae)])
    out = parallel(6, one)
    assert origin.count("/c/vw") == 2
    for ae, r in out:
        assert r.status == 200 and b"accept-encoding: %s\n" % ae.encode() in r.body, (ae, r)
    assert len({r.body for _, r in out}) == 2


def test_range_and_conditional_waiters(gatling, origin):
    """Collapsed clients with Range or If-None-Match get their 206 or 304
    from the response they waited for."""
    srv = cache_server(gatling, origin, "")
    t = "/c/rw?sleep=0.7&etag=w&" + MAXAGE
    want = [None, [("Range", "bytes=0-6")], [("If-None-Match", '"w"')], [("Range", "bytes=8-")]]

    def one(i, barrier):
        with Client(srv.port, timeout=15) as c:
            barrier.wait(30)
            return c.request(t, headers=want[i % 4])
    out = parallel(8, one)
    assert origin.count("/c/rw") == 1
    answers = [(200, b"request 1\n"), (206, b"request"), (304, b""), (206, b"1\n")]
    for i, r in enumerate(out):
        assert (r.status, r.body) == answers[i % 4], (i, r)


def test_length_over_the_object_cap_passes(gatling, origin):
    """A response whose Content-Length is over the object cap is not stored:
    the first client streams it, the waiters go to the origin each, all get
    it whole; the URL is pass."""
    srv = cache_server(gatling, origin, "", extra=("--cache", "4M,64K"))
    t = "/c/long?size=300000&sleep=0.5&" + MAXAGE
    rs = burst(srv, t, 3)
    assert [len(r.body) for r in rs] == [300000] * 3
    assert origin.count("/c/long") == 3
    assert sorted(body_n(r) for r in rs) == [1, 2, 3]
    st = counters(srv)
    assert st["cache_stored"] == 0 and st["cache_passes"] >= 1, st


def test_memory_cap_evicts(gatling, origin):
    """--cache 1M: 40 responses of 50 kB do not fit; the least recently used
    go, the store stays under its cap, the newest are still hits."""
    srv = cache_server(gatling, origin, "", extra=("--cache", "1M,64K"))
    for i in range(40):
        assert cs(get(srv, "/c/e%d?size=50000&%s" % (i, MAXAGE))) == "gatling; fwd=miss; stored"
    st = counters(srv)
    assert st["cache_evictions"] >= 20 and st["cache_bytes"] <= 1 << 20, st
    assert cs(get(srv, "/c/e39?size=50000&" + MAXAGE)) == "gatling; hit"
    assert cs(get(srv, "/c/e0?size=50000&" + MAXAGE)) == "gatling; fwd=miss; stored", "evicted"


def test_shutdown_with_fetches_in_flight(gatling, origin):
    """SIGTERM while a background refresh and a client's fetch are running:
    the client is answered (the drain), gatling exits 0 with a clean stderr."""
    srv = cache_server(gatling, origin, "ttl 1\n")
    assert body_n(get(srv, "/c/bg")) == 1
    time.sleep(1.1)
    origin.delay["/c/bg"] = 3
    assert cs(get(srv, "/c/bg")) == "gatling; hit; detail=stale", "a refresh under way"
    c = send_only(srv, "/c/fg?sleep=1&" + MAXAGE)
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.send_signal(signal.SIGTERM)
    r = c.read_response()
    assert r.status == 200 and cs(r) == "gatling; fwd=miss; stored", r
    c.close()
    assert srv.process.wait(15) == 0
    srv.finish()


# --------------------------------------------------------------------------
# Unshareable answers, grace, errors

@serial  # timed: one backend delay for a burst, not two or six
@http_only  # a matter of the cache, not of the protocol
def test_set_cookie_is_passed_not_queued(gatling, origin):
    """A response with Set-Cookie: the first burst gets 1 fetch, the others
    go at once when it comes; the next burst all go at once (one delay, not
    N); each client gets the cookie its own backend request set."""
    srv = cache_server(gatling, origin, "ttl 60\n")
    t = "/c/cookie?cookie&sleep=1&" + MAXAGE
    first = burst(srv, t, 6)
    assert origin.count("/c/cookie") == 6
    assert sorted(cs(r) or "" for r in first).count("gatling; fwd=miss; detail=pass") == 1
    took = sorted(round(r.took, 2) for r in first)
    # the first answered after one delay,
    figure("the first of a burst, one 1 s delay", took[0], "s", hi=1.7, kind=BENCH)
    figure("the last of a burst, two 1 s delays", took[-1], "s", hi=3.5, kind=BENCH)
    assert all(t >= 1.8 for t in took[1:]), took  # the others after its head, then their own
    passes = counters(srv)["cache_passes"]
    t0 = time.monotonic()
    second = burst(srv, t, 6)
    took = time.monotonic() - t0
    assert origin.count("/c/cookie") == 12
    # behind one fetch: 2 s; one by one: 6 s
    figure("the slowest of the second burst, 1 s each", max(r.took for r in second), "s",
           hi=1.7, kind=BENCH)
    figure("the second burst of six, 1 s each at once", took, "s", hi=3, kind=BENCH)
    assert all(cs(r) == "gatling; fwd=uri-miss; detail=pass" for r in second), second
    for r in first + second:
        assert r.header_all("Set-Cookie") == ["n=%d; Path=/" % body_n(r)], r
    assert sorted(body_n(r) for r in first + second) == list(range(1, 13))
    st = counters(srv)
    assert st["cache_passes"] == passes + 6 and st["cache_stored"] == 0, st


@serial  # timed: the stale answers must not wait for the refresh's second
@http_only  # a matter of the cache, not of the protocol
def test_grace_one_refresh(gatling, origin):
    """A stale entry in its grace: every client gets it at once while one
    fetch refreshes it (the origin sees one request, however many ask)."""
    srv = cache_server(gatling, origin, "ttl 2\n")
    swr = "/c/swr?cc=max-age%3D1%2C%20stale-while-revalidate%3D30"
    assert body_n(get(srv, "/c/grace")) == 1
    assert body_n(get(srv, swr)) == 2
    time.sleep(2.1)
    origin.delay["/c/grace"] = origin.delay["/c/swr"] = 1.0
    rs = burst(srv, "/c/grace", 8) + burst(srv, swr, 4)
    for r in rs:
        assert cs(r) == "gatling; hit; detail=stale", r
        figure("a stale hit beside a 1 s refresh", r.took, "s", hi=0.5,
               kind=MARGIN)  # under 0.01 s measured at a load of 20
    assert {r.body for r in rs[:8]} == {b"request 1\n"}
    assert {r.body for r in rs[8:]} == {b"request 2\n"}
    wait_for(lambda: counters(srv)["cache_stored"] == 4, 15, "both refreshes stored")
    assert origin.count("/c/grace") == 2 and origin.count("/c/swr") == 2, "one refresh each"
    origin.delay.clear()
    r = get(srv, "/c/grace")
    assert body_n(r) in (3, 4) and cs(r).startswith("gatling; hit"), r
    assert counters(srv)["cache_stale"] >= 12


def test_stale_if_error(gatling, origin):
    """The origin gone once entries are stored and stale: a micro-cached one
    is served within the grace, then 502; stale-if-error=60 answers for the
    failure (detail=stale-if-error) past the grace too; must-revalidate
    gives 504 (RFC 9111 5.2.2.2)."""
    # grace 4: the first stale answer must come within ttl + grace of the
    # store, after four requests and a second's pause (grace 2 left a busy
    # machine under a second)
    srv = cache_server(gatling, origin, "ttl 1\ngrace 4\n")
    paths = ["/c/micro", "/c/sie?cc=max-age%3D1%2C%20stale-if-error%3D60",
             "/c/mr?cc=max-age%3D1%2C%20must-revalidate", "/c/mr2?cc=must-revalidate"]
    for p in paths:
        assert cs(get(srv, p)) == "gatling; fwd=miss; stored", p
    stored = time.monotonic()
    origin.stop()
    time.sleep(1.1)
    r = get(srv, paths[0])
    assert r.status == 200 and r.body == b"request 1\n", r
    assert cs(r) in ("gatling; hit; detail=stale", "gatling; hit; detail=stale-if-error"), r
    r = get(srv, paths[1])
    assert r.status == 200 and r.body == b"request 2\n", r
    assert cs(r) == "gatling; hit; detail=stale-if-error", r
    assert get(srv, paths[1]).body == b"request 2\n", "again"
    for p in paths[2:]:
        r = get(srv, p)
        assert r.status == 504 and b"request" not in r.body, (p, r)
    st = counters(srv)
    assert st["cache_stale_errors"] >= 2, st
    time.sleep(max(0, stored + 5.05 - time.monotonic()))  # age >= ttl + grace
    r = get(srv, paths[0])
    assert r.status == 502, "past the grace: %r" % r
    assert get(srv, paths[1]).body == b"request 2\n", "stale-if-error=60 still"
    assert origin.count() == 4


# --------------------------------------------------------------------------
# Attacks

ATTACKER_FIELDS = [("X-Forwarded-Host", "evil.example"), ("X-Host", "evil.example"),
                   ("X-Forwarded-Server", "evil.example"), ("X-Forwarded-Port", "6666"),
                   ("X-Forwarded-Scheme", "nothttp"), ("X-Forwarded-Prefix", "/evil"),
                   ("X-Original-URL", "/evil"), ("X-Rewrite-URL", "/evil"),
                   ("X-HTTP-Method-Override", "DELETE"), ("X-Forwarded-Proto", "evilproto")]


def test_forwarding_fields_do_not_poison(gatling, origin):
    """An attacker's X-Forwarded-Host (and the other fields that change what
    a framework answers: the host, port, scheme, prefix, a method override)
    never reach the origin through a fetch; the proxy's own X-Forwarded-Host
    (from Host) does; the next client gets what the origin saw for it."""
    srv = cache_server(gatling, origin, "")
    t = "/c/echo?echo&" + MAXAGE
    a = get(srv, t, headers=ATTACKER_FIELDS)
    v = get(srv, t)
    assert cs(a) == "gatling; fwd=miss; stored" and cs(v) == "gatling; hit", (a, v)
    assert v.body == a.body
    assert b"evil" not in v.body and b"6666" not in v.body and b"DELETE" not in v.body, v.body
    assert b"x-forwarded-host: localhost\n" in v.body, v.body
    seen = origin.requests("/c/echo")[0][2]
    assert seen["x-forwarded-host"] == "localhost" and seen["host"] == "localhost", seen
    assert seen["x-forwarded-proto"] == ("https" if TLS else "http"), seen
    assert origin.count("/c/echo") == 1


def test_forwarded_rfc7239_does_not_poison(gatling, origin):
    srv = cache_server(gatling, origin, "")
    t = "/c/fwd?echo&" + MAXAGE
    get(srv, t, headers=[("Forwarded", "for=192.0.2.66;host=evil.example;proto=http")])
    v = get(srv, t)
    assert cs(v) == "gatling; hit", v
    assert b"evil.example" not in v.body, v.body


def test_web_cache_deception_fastcgi(gatling, php_fpm):  # noqa: F811
    """/account.php/x.css runs account.php (the rest a path info), with the
    micro-cache on for every path: a client with a session cookie bypasses
    the cache; a response with Set-Cookie or private is not stored: a second
    client without cookies never gets the first one's page."""
    srv = gatling({".proxy": "", ".cache": "ttl 60\n", "account.php": PHP_ACCOUNT},
                  args=("-T", "10", "-S", "-P", "F/unix:%s:\\.php" % php_fpm), check_fds=False)
    victim = get(srv, "/account.php/x.css", headers=[("Cookie", "sid=victim")])
    assert victim.body == b"account of victim\nuri=/account.php/x.css script=account.php\n", \
        victim
    assert cs(victim) is None, victim
    a1 = get(srv, "/account.php/x.css")
    a2 = get(srv, "/account.php/x.css")
    for a in (a1, a2):
        assert b"victim" not in a.body, a
    assert a1.body.startswith(b"new session s2\n") and a1.header("Set-Cookie") == "sid=s2", a1
    assert a2.body.startswith(b"new session s3\n") and a2.header("Set-Cookie") == "sid=s3", a2
    assert cs(a1) == "gatling; fwd=miss; detail=pass", a1
    p1 = get(srv, "/account.php/y.css?private")
    p2 = get(srv, "/account.php/y.css?private")
    assert p1.body.startswith(b"private page 4\n") and p2.body.startswith(b"private page 5\n"), (
        p1, p2)
    assert php_count(srv, "account") == 5
    st = counters(srv)
    assert st["cache_bypass"] == 1 and st["cache_stored"] == 0, st


def test_credentials_bypass(gatling, origin):
    """Authorization, or a Cookie not all allow-listed, bypass the cache (not
    stored, never answered from it); allow-listed cookies use it and are not
    sent to the origin."""
    srv = cache_server(gatling, origin, "cookie lang\ncookie theme\n")
    t = "/c/cred?echo&" + MAXAGE
    auth = [("Authorization", "Basic dXNlcjpzZWNyZXQ=")]
    r = get(srv, t, headers=auth)
    assert body_n(r) == 1 and b"authorization: Basic" in r.body and cs(r) is None, r
    anon = get(srv, t)
    assert body_n(anon) == 2 and b"authorization" not in anon.body, anon
    assert cs(anon) == "gatling; fwd=miss; stored", anon
    assert body_n(get(srv, t, headers=auth)) == 3, "not answered from the cache"
    r = get(srv, t, headers=[("Cookie", "sid=abc")])
    assert body_n(r) == 4 and b"cookie: sid=abc" in r.body, r
    r = get(srv, t, headers=[("Cookie", "lang=en; theme=dark")])
    assert r.body == anon.body and cs(r) == "gatling; hit", r
    r = get(srv, t, headers=[("Cookie", "lang=en; sid=abc")])
    assert body_n(r) == 5, "one cookie not allow-listed: %r" % r
    r = get(srv, "/c/lang?echo&" + MAXAGE, headers=[("Cookie", "lang=de")])
    assert cs(r) == "gatling; fwd=miss; stored" and b"cookie" not in r.body, r
    assert counters(srv)["cache_bypass"] == 4
    assert origin.count() == 6


def test_backend_400_not_stored(gatling, origin):
    """A 400 provoked at the origin by a field (an unkeyed one the fetch
    sends) is not stored: the next client's request gets its 200."""
    srv = cache_server(gatling, origin, "ttl 60\n")
    bad = get(srv, "/c/cpdos?" + MAXAGE, headers=[("X-Want-Status", "400")])
    assert bad.status == 400, bad
    r = get(srv, "/c/cpdos?" + MAXAGE)
    assert r.status == 200 and body_n(r) == 2, r


def test_backend_error_does_not_turn_caching_off(gatling, origin):
    srv = cache_server(gatling, origin, "ttl 60\n")
    t = "/c/cpdos?" + MAXAGE
    assert get(srv, t, headers=[("X-Want-Status", "400")]).status == 400
    r = get(srv, t)
    assert r.status == 200 and body_n(r) == 2, r
    r = get(srv, t)
    assert cs(r) == "gatling; hit" and body_n(r) == 2, "the 200 after the 400 stored: %r" % r


def test_404_stored_only_with_errors(gatling, origin):
    srv = cache_server(gatling, origin, "ttl 60\n")
    rs = [get(srv, "/c/missing?status=404") for _ in range(2)]
    assert [(r.status, body_n(r)) for r in rs] == [(404, 1), (404, 2)], rs
    srv = cache_server(gatling, origin, "ttl 60\nerrors 30\n")
    for path, status in (("/c/gone404", 404), ("/c/gone410", 410)):
        rs = [get(srv, "%s?status=%d" % (path, status)) for _ in range(3)]
        assert [r.status for r in rs] == [status] * 3, rs
        assert {r.body for r in rs} == {rs[0].body}, "stored: %r" % rs
        assert [cs(r) for r in rs] == ["gatling; fwd=miss; stored"] + ["gatling; hit"] * 2
        assert origin.count(path) == 1
    rs = [get(srv, "/c/err500?status=500") for _ in range(2)]
    assert [body_n(r) for r in rs] == [5, 6] and rs[0].status == 500, "a 500 never stored"


SMUGGLED = b"GET /c/smuggled?" + MAXAGE.encode() + b" HTTP/1.1\r\nHost: localhost\r\n\r\n"


@h1_only("request framing")
@pytest.mark.parametrize("head", [
    b"POST /c/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"GET /c/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST /c/x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"
    b"0\r\n\r\n",
    b"POST /c/x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"GET /c/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nContent-Length: 40\r\n\r\n",
    b"GET /c/x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
], ids=["cl-te-post", "cl-te-get", "te-twice-in-list", "te-two-lines", "cl-twice", "te-bad"])
def test_smuggling_refused_with_cache(gatling, origin, head):
    """The proxy's refusals of ambiguous framing stand with the cache on: one
    answer, the connection closed, nothing reaches the origin, and the
    request hidden behind is neither sent nor stored."""
    srv = cache_server(gatling, origin, "ttl 60\n")
    with H1Client(srv.port) as c:
        c.send(head + SMUGGLED)
        r = c.read_response()
        assert r.status in (400, 501), r
        assert c.closed_within(5), "still open after %d" % r.status
        assert b"HTTP/1." not in bytes(c.buf), bytes(c.buf[:200])
    assert origin.count() == 0, origin.seen
    r = get(srv, "/c/smuggled?" + MAXAGE)
    assert cs(r) == "gatling; fwd=miss; stored" and body_n(r) == 1, r


@h1_only("a GET with a body is HTTP/1.1 framing here")
def test_get_with_body_bypasses(gatling, origin):
    """A GET with a body (a request smuggled inside it) goes by the cache: the
    origin reads it as a body, nothing is stored, and the next GET is a miss
    of its own."""
    srv = cache_server(gatling, origin, "ttl 60\n")
    with H1Client(srv.port) as c:
        c.send(b"GET /c/gb HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s"
               % (len(SMUGGLED), SMUGGLED))
        r = c.read_response()
    assert r.status == 200 and body_n(r) == 1 and cs(r) is None, r
    assert [s[1] for s in origin.seen] == ["/c/gb"]
    r = get(srv, "/c/gb")
    assert body_n(r) == 2 and cs(r) == "gatling; fwd=miss; stored", r
    assert counters(srv)["cache_bypass"] == 1


# --------------------------------------------------------------------------
# Invalidation and PURGE

def test_unsafe_methods_invalidate(gatling, origin):
    srv = cache_server(gatling, origin, "")
    t = "/c/inv?" + MAXAGE
    n = body_n(get(srv, t))
    assert body_n(get(srv, t)) == n
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        r = get(srv, t, method=method)
        assert r.status == 200, (method, r)
        g = get(srv, t)
        assert cs(g) == "gatling; fwd=miss; stored", (method, g)
        assert body_n(g) == body_n(r) + 1, (method, g)
        n = body_n(g)
        assert body_n(get(srv, t)) == n, "stored again after the %s" % method
    r = get(srv, t, method="POST", headers=[("X-Want-Status", "500")])
    assert r.status == 500, r
    g = get(srv, t)
    assert cs(g) == "gatling; hit" and body_n(g) == n, "a failed POST invalidates nothing: %r" % g
    r = get(srv, t, method="DELETE", headers=[("X-Want-Status", "404")])
    assert cs(get(srv, t)) == "gatling; hit", "nor a 404"
    assert origin.count("/c/inv") == 1 + 4 * 2 + 2
    # a POST answered with a Location on the same host invalidates that URL too
    others = ["/c/made?" + MAXAGE, "/c/kept?" + MAXAGE]
    for o in others:
        assert cs(get(srv, o)) == "gatling; fwd=miss; stored"
    host = "%s://localhost" % ("https" if TLS else "http")
    loc = urllib.parse.quote(host + others[0], safe="")
    assert get(srv, "/c/form?location=" + loc, method="POST").status == 200
    assert cs(get(srv, others[0])) == "gatling; fwd=miss; stored", "named by Location"
    loc = urllib.parse.quote("http://elsewhere.example" + others[1], safe="")
    assert get(srv, "/c/form?location=" + loc, method="POST").status == 200
    assert cs(get(srv, others[1])) == "gatling; hit", "another host's URL is not touched"


def test_purge(gatling, origin):
    srv = cache_server(gatling, origin, "ttl 60\n")
    paths = ["/c/p/a", "/c/p/b", "/c/p/sub/c", "/c/q"]
    for p in paths:
        assert cs(get(srv, p)) == "gatling; fwd=miss; stored"
    r = get(srv, "/c/p/a", method="PURGE")
    assert r.status == 200 and r.body == b"purged 1\n", r
    r = get(srv, "/c/p/a")
    assert cs(r) == "gatling; fwd=miss; stored" and body_n(r) == 5, r
    assert cs(get(srv, "/c/p/b")) == "gatling; hit"
    r = get(srv, "/c/p/*", method="PURGE")
    assert r.status == 200 and r.body == b"purged 3\n", r
    for p in paths[:3]:
        assert cs(get(srv, p)) == "gatling; fwd=miss; stored", p
    assert cs(get(srv, "/c/q")) == "gatling; hit", "outside the prefix"
    assert get(srv, "/c/none", method="PURGE").body == b"purged 0\n"
    assert counters(srv)["cache_purges"] == 3
    assert origin.count() == 8


class ProxiedH1(H1Client):
    """An HTTP/1.1 connection from 127.0.0.2 that starts with a PROXY v1
    header naming src as the client (TLS after it in the TLS passes)."""

    def __init__(self, port, src):
        self.timeout = 5
        self.sock = socket.socket()
        self.sock.settimeout(5)
        self.sock.bind(("127.0.0.2", 0))
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(b"PROXY TCP4 %s 127.0.0.1 40000 80\r\n" % src.encode())
        if TLS:
            self.sock = client_tls_context(["http/1.1"]).wrap_socket(
                self.sock, server_hostname="localhost")
        self.buf = bytearray()
        self.sent = b""


def test_purge_refused_to_others(gatling, origin):
    """PURGE from an address that is neither loopback nor a purge net: 403
    (the client's address comes from a PROXY header, -y)."""
    srv = cache_server(gatling, origin, "purge 198.51.100.0/24\n",
                       extra=("-y", "http,https", "-Y", "127.0.0.2"))

    def req(src, method, target="/c/pp?" + MAXAGE):
        with ProxiedH1(srv.port, src) as c:
            return c.request(target, method=method)
    assert cs(req("192.0.2.7", "GET")) == "gatling; fwd=miss; stored"
    r = req("192.0.2.7", "PURGE")
    assert r.status == 403, r
    assert cs(req("192.0.2.7", "GET")) == "gatling; hit", "still there"
    r = req("198.51.100.9", "PURGE")
    assert r.status == 200 and r.body == b"purged 1\n", r
    r = req("127.0.0.1", "PURGE", "/c/*")
    assert r.status == 200, r
    assert cs(req("192.0.2.7", "GET")) == "gatling; fwd=miss; stored"
    assert origin.count() == 2


# --------------------------------------------------------------------------
# Vary, ranges, HEAD, conditionals, revalidation

def test_vary(gatling, origin):
    srv = cache_server(gatling, origin, "")
    t = "/c/v?vary=Accept-Encoding&echo&" + MAXAGE
    gz, br = [("Accept-Encoding", "gzip")], [("Accept-Encoding", "br")]
    r1, r2 = get(srv, t, headers=gz), get(srv, t, headers=br)
    assert (body_n(r1), body_n(r2)) == (1, 2), (r1, r2)
    assert b"accept-encoding: gzip\n" in r1.body and b"accept-encoding: br\n" in r2.body
    assert cs(r2) == "gatling; fwd=miss; stored", r2
    for _ in range(2):
        h1, h2 = get(srv, t, headers=gz), get(srv, t, headers=br)
        assert (h1.body, h2.body) == (r1.body, r2.body), (h1, h2)
        assert cs(h1) == cs(h2) == "gatling; hit", (h1, h2)
        assert h1.header("Vary") == "Accept-Encoding", h1
    r3 = get(srv, t)
    assert body_n(r3) == 3 and b"accept-encoding" not in r3.body, "a third variant: %r" % r3
    assert origin.count("/c/v") == 3
    star = [get(srv, "/c/star?vary=*&" + MAXAGE) for _ in range(2)]
    assert [body_n(r) for r in star] == [4, 5], "Vary: * never stored"
    assert cs(star[0]) == "gatling; fwd=miss; detail=pass", star[0]
    # a field the fetch does not send (Cookie): what the origin saw is not known
    vc = [get(srv, "/c/vc?vary=Cookie&" + MAXAGE) for _ in range(2)]
    assert [body_n(r) for r in vc] == [6, 7] and cs(vc[0]).endswith("detail=pass"), vc


def test_vary_field_lines_combined(gatling, origin):
    """A field of Vary sent on two lines is their values joined (RFC 9111
    4.1): one line with both values is the same variant; a value longer than
    the cache compares (2 kB) leaves the answer unstored."""
    srv = cache_server(gatling, origin, "")
    t = "/c/vj?vary=Accept-Language&" + MAXAGE
    r = get(srv, t, headers=[("Accept-Language", "en"), ("Accept-Language", "de")])
    assert cs(r) == "gatling; fwd=miss; stored" and body_n(r) == 1, r
    r = get(srv, t, headers=[("Accept-Language", "en, de")])
    assert cs(r) == "gatling; hit" and body_n(r) == 1, r
    r = get(srv, t, headers=[("Accept-Language", "de, en")])
    assert cs(r) == "gatling; fwd=miss; stored" and body_n(r) == 2, "another order: %r" % r
    long = [("Accept-Language", "x" * 1500), ("Accept-Language", "y" * 1500)]
    rs = [get(srv, t, headers=long) for _ in range(2)]
    assert [body_n(r) for r in rs] == [3, 4], rs
    assert cs(rs[0]).startswith("gatling; fwd=miss"), rs[0]


def test_host_spellings_share_a_key(gatling, origin):
    """The key's host is lower-cased, without the scheme's default port or a
    final dot: those spellings are hits of one entry; another port is
    another key."""
    srv = cache_server(gatling, origin, "")
    t = "/c/host?" + MAXAGE
    dflt = "443" if TLS else "80"

    def on(host):
        with Client(srv.port) as c:
            return c.request(t, host=host)
    assert cs(on("localhost")) == "gatling; fwd=miss; stored"
    for host in ("LocalHost", "localhost:" + dflt, "localhost.", "LOCALHOST.:" + dflt):
        r = on(host)
        assert cs(r) == "gatling; hit" and body_n(r) == 1, (host, r)
    r = on("localhost:8080")
    assert cs(r) == "gatling; fwd=miss; stored" and body_n(r) == 2, r


def test_final_dot_is_the_same_site(gatling):
    """Issue 92: "victim.example." is victim.example's site, found once (one
    final dot dropped, case folded) and keyed by the site chosen: before, it
    was served by default/ and stored under victim.example's key, so every
    later visitor of victim.example got default's page from the cache."""
    def site(word):
        script = "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n%s %%s\\n' $$\n" % word
        return {".cache": "ttl 30\n", "p.cgi": Mode(script, 0o755), "f.txt": word + "\n"}
    tree = {"victim.example/" + k: v for k, v in site("victim").items()}
    tree.update({"default/" + k: v for k, v in site("default").items()})
    srv = gatling(tree, args=("-T", "10", "-S", "-w", "\\.cgi$"), check_fds=False)

    def on(host, target="/p.cgi"):
        with Client(srv.port) as c:
            return c.request(target, host=host)
    for host in ("victim.example.", "VICTIM.Example.:%d" % srv.port):
        r = on(host, "/f.txt")
        assert r.status == 200 and r.body == b"victim\n", (host, r)
    r = on("victim.example.")
    assert r.status == 200 and r.body.startswith(b"victim "), r
    for host in ("victim.example", "VICTIM.example", "Victim.Example."):
        got = on(host)
        assert got.body == r.body and cs(got) == "gatling; hit", (host, got)
    r = on("other.example")
    assert r.status == 200 and r.body.startswith(b"default "), r
    for host in ("victim.example..", ".victim.example", "."):
        assert on(host, "/f.txt").status == 400, host


def test_range_head_conditional_from_a_hit(gatling, origin):
    srv = cache_server(gatling, origin, "")
    t = "/c/r?etag=v1&" + MAXAGE
    assert get(srv, t).body == b"request 1\n"
    r = get(srv, t, headers=[("Range", "bytes=0-6")])
    assert r.status == 206 and r.body == b"request", r
    assert r.header("Content-Range") == "bytes 0-6/10" and cs(r) == "gatling; hit", r
    r = get(srv, t, headers=[("Range", "bytes=-3")])
    assert r.status == 206 and r.body == b" 1\n", r
    r = get(srv, t, headers=[("Range", "bytes=50-")])
    assert r.status == 416 and r.header("Content-Range") == "bytes */10", r
    r = get(srv, t, method="HEAD")
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == "10", r
    assert r.header("ETag") == '"v1"' and cs(r) == "gatling; hit", r
    r = get(srv, t, headers=[("If-None-Match", '"v1"')])
    assert r.status == 304 and r.body == b"" and r.header("ETag") == '"v1"', r
    r = get(srv, t, headers=[("If-None-Match", '"v0"')])
    assert r.status == 200 and r.body == b"request 1\n", r
    r = get(srv, t, headers=[("Range", "bytes=0-6"), ("If-Range", '"v0"')])
    assert r.status == 200 and r.body == b"request 1\n", "If-Range does not match: %r" % r
    assert origin.count("/c/r") == 1
    assert all("range" not in s[2] for s in origin.seen)

    # on a miss: the fetch asks for the whole, the client gets its range
    r = get(srv, "/c/r2?" + MAXAGE, headers=[("Range", "bytes=2-4")])
    assert r.status == 206 and r.body == b"que", r
    seen = origin.requests("/c/r2")[0]
    assert "range" not in seen[2] and seen[0] == "GET", seen
    assert get(srv, "/c/r2?" + MAXAGE).body == b"request 2\n"
    # HEAD on a miss: the fetch is a GET, the body is stored for the next GET
    r = get(srv, "/c/h?" + MAXAGE, method="HEAD")
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == "10", r
    assert origin.requests("/c/h")[0][0] == "GET"
    r = get(srv, "/c/h?" + MAXAGE)
    assert r.body == b"request 3\n", r
    assert cs(r) in ("gatling; hit", "gatling; fwd=miss; collapsed"), r  # its body may be coming


def test_if_match_and_ranges_of_a_hit(gatling, origin):
    """From a stored response: If-Match that does not match (and
    If-Unmodified-Since before Last-Modified) 412, one that does the 200; a
    Range of another unit is ignored (the 200); a range deep in a body stored
    in several parts (chunked, 16 kB chunks) is cut from the right part."""
    srv = cache_server(gatling, origin, "")
    t = "/c/im?etag=v1&lm&" + MAXAGE
    assert get(srv, t).body == b"request 1\n"
    for field, value, status in (("If-Match", '"v0"', 412), ("If-Match", '"v1"', 200),
                                 ("If-Unmodified-Since", "Sun, 01 Jan 2023 10:00:00 GMT", 412),
                                 ("If-Unmodified-Since", LM_DATE, 200),
                                 ("Range", "items=0-3", 200)):
        r = get(srv, t, headers=[(field, value)])
        assert r.status == status and cs(r) == ("gatling; hit" if status == 200 else cs(r)), (
            field, value, r)
        assert (r.body == b"request 1\n") == (status == 200), (field, value, r)
    t = "/c/parts?chunked=40000&" + MAXAGE
    whole = get(srv, t).body
    assert len(whole) == 40000 and whole.startswith(b"request 2\n")
    r = get(srv, t, headers=[("Range", "bytes=20000-20009")])
    assert r.status == 206 and r.body == whole[20000:20010] and cs(r) == "gatling; hit", r
    r = get(srv, t, headers=[("Range", "bytes=16380-16399")])
    assert r.status == 206 and r.body == whole[16380:16400], "across two parts: %r" % r
    assert origin.count() == 2


def test_revalidation(gatling, origin):
    """max-age=0 with an ETag: stored, revalidated every time (the origin's
    304 freshens it, the client gets the stored body)."""
    srv = cache_server(gatling, origin, "")
    t = "/c/nc?cc=max-age%3D0&etag=e1"
    assert get(srv, t).body == b"request 1\n"
    for i in range(2):
        r = get(srv, t)
        assert r.status == 200 and r.body == b"request 1\n", r
        assert cs(r) == "gatling; fwd=stale; fwd-status=304", r
    assert origin.count("/c/nc") == 3
    assert [s[2].get("if-none-match") for s in origin.requests("/c/nc")] == [None, '"e1"', '"e1"']
    assert counters(srv)["cache_revalidated"] == 2


def test_streamed_response_collapsed(gatling, origin):
    """A chunked response (no length) streamed to the collapsed clients as it
    is stored."""
    srv = cache_server(gatling, origin, "")
    t = "/c/stream?chunked=200000&sleep=0.5&" + MAXAGE
    rs = burst(srv, t, 6)
    assert origin.count("/c/stream") == 1
    assert {len(r.body) for r in rs} == {200000} and {r.body[:10] for r in rs} == {b"request 1\n"}
    check_collapsed(rs, [r.status for r in rs])


# --------------------------------------------------------------------------
# What the origin sends: framings, a body cut short, 421, targeted fields, Age

@pytest.mark.parametrize("framing", ["length", "chunked=3000", "close"])
def test_every_framing_stored(gatling, origin, framing):
    """A Content-Length, chunked, or a body that ends with the connection:
    stored whole, and the hit has the length."""
    srv = cache_server(gatling, origin, "")
    t = "/c/fr?%s&%s" % (framing, MAXAGE)
    r1, r2 = get(srv, t), get(srv, t)
    size = 3000 if framing.startswith("chunked") else 10
    assert r1.status == 200 and len(r1.body) == size and body_n(r1) == 1, r1
    assert cs(r1) == "gatling; fwd=miss; stored", r1
    assert r2.body == r1.body and cs(r2) == "gatling; hit", r2
    assert r2.header("Content-Length") == str(size), r2
    assert origin.count() == 1 and counters(srv)["cache_stored"] == 1


def cut_or_none(c):
    """The response c reads, or None when the server cut it (a close over
    HTTP/1.1, a reset stream over HTTP/2 and HTTP/3)."""
    try:
        return c.read_response()
    except (ConnectionError, OSError):
        return None
    finally:
        c.close()


def test_origin_cuts_the_body(gatling, origin):
    """The origin promises 50 bytes more than it sends and closes: nothing is
    stored; the client that began the fetch and a collapsed one (their heads
    said 200) see the body cut, never a short body taken for whole; a waiter
    for a range (it waits for the complete response) asks the origin itself
    and gets its answer; the next request is a miss that stores."""
    srv = cache_server(gatling, origin, "")
    t = "/c/cut?shortfirst=50&slowfirst=0.7&" + MAXAGE
    owner = send_only(srv, t)
    time.sleep(0.2)
    waiter, ranged = send_only(srv, t), send_only(srv, t, [("Range", "bytes=0-6")])
    assert cut_or_none(owner) is None and cut_or_none(waiter) is None
    r = cut_or_none(ranged)
    assert r is not None and r.status in (200, 206) and r.body in (b"request 2\n", b"request"), r
    assert origin.count("/c/cut") == 2
    r = get(srv, t)
    assert r.status == 200 and body_n(r) == 3 and cs(r) == "gatling; fwd=miss; stored", r
    assert cs(get(srv, t)) == "gatling; hit"
    st = counters(srv)
    assert st["cache_stored"] == 1 and st["cache_entries"] == 1, st
    srv.check_alive()


def test_origin_cuts_a_passed_body(gatling, origin):
    """An unshareable answer (Set-Cookie) cut short: its client sees the cut;
    the URL is pass, and the next client gets a whole answer of its own."""
    srv = cache_server(gatling, origin, "")
    t = "/c/cutpass?shortfirst=50&cookie&" + MAXAGE
    assert cut_or_none(send_only(srv, t)) is None
    r = get(srv, t)
    assert r.status == 200 and body_n(r) == 2 and r.header("Set-Cookie") == "n=2; Path=/", r
    assert cs(r) == "gatling; fwd=uri-miss; detail=pass", r
    assert counters(srv)["cache_stored"] == 0
    srv.check_alive()


def test_origin_421_passed_not_stored(gatling, origin):
    """A 421 from the origin (it will not answer for that Host) reaches the
    client as it is, is not stored (4xx: 404 and 410 only, with errors), and
    leaves no mark: the next request is a miss again, not "pass"."""
    srv = cache_server(gatling, origin, "errors 30\n")
    t = "/c/mis?status=421&" + MAXAGE
    rs = [get(srv, t) for _ in range(2)]
    assert [(r.status, body_n(r)) for r in rs] == [(421, 1), (421, 2)], rs
    assert [cs(r) for r in rs] == ["gatling; fwd=miss; detail=pass"] * 2, rs
    st = counters(srv)
    assert st["cache_stored"] == 0 and st["cache_misses"] == 2, st


def test_cdn_cache_control(gatling, origin):
    """CDN-Cache-Control (RFC 9213) decides alone when it is a valid
    Dictionary: no-store in Cache-Control with max-age=60 in it is stored
    (both fields passed on), max-age in Cache-Control with no-store in it is
    not; its lines are joined into one Dictionary; a value that does not
    parse is ignored, Cache-Control speaks."""
    srv = cache_server(gatling, origin, "")
    t = "/c/cdn1?cc=no-store&cdn=max-age%3D60"
    r1, r2 = get(srv, t), get(srv, t)
    assert body_n(r1) == body_n(r2) == 1 and cs(r2) == "gatling; hit", (r1, r2)
    assert r2.header("CDN-Cache-Control") == "max-age=60", r2
    assert r2.header("Cache-Control") == "no-store", r2
    for t, n in (("/c/cdn2?%s&cdn=no-store" % MAXAGE, 2),
                 ("/c/cdn3?%s&cdn=max-age%%3D60&cdn2=no-store" % MAXAGE, 4)):
        r1, r2 = get(srv, t), get(srv, t)
        assert (body_n(r1), body_n(r2)) == (n, n + 1), (t, r1, r2)
        assert cs(r1) == "gatling; fwd=miss; detail=pass", (t, r1)
    t = "/c/cdn4?%s&cdn=MAX-AGE%%3D0" % MAXAGE  # upper case: not a Dictionary
    r1, r2 = get(srv, t), get(srv, t)
    assert body_n(r1) == body_n(r2) == 6 and cs(r2) == "gatling; hit", (r1, r2)
    assert origin.count() == 6


def test_age_from_the_origin(gatling, origin):
    """An upstream Age counts in the stored response's age (RFC 9111 4.2.3):
    the hits say at least that; one older than its max-age is stale at once
    (the next request goes to the origin); one that is not a number is
    ignored."""
    srv = cache_server(gatling, origin, "")
    t = "/c/age?age=40&" + MAXAGE
    r1, r2 = get(srv, t), get(srv, t)
    assert body_n(r1) == body_n(r2) == 1 and cs(r2) == "gatling; hit", (r1, r2)
    assert 40 <= int(r2.header("Age")) < 45, r2
    t = "/c/old?age=100&" + MAXAGE
    assert [body_n(get(srv, t)) for _ in range(2)] == [2, 3], "stale at once"
    t = "/c/bad?age=abc&" + MAXAGE
    r1, r2 = get(srv, t), get(srv, t)
    assert body_n(r2) == 4 and cs(r2) == "gatling; hit" and int(r2.header("Age")) < 5, r2


def test_revalidation_by_last_modified(gatling, origin):
    """max-age=0 with a Last-Modified and no ETag: the revalidation asks
    If-Modified-Since with the stored date, the origin's 304 freshens it,
    the client gets the stored body and its Last-Modified."""
    srv = cache_server(gatling, origin, "")
    t = "/c/lm?cc=max-age%3D0&lm"
    assert get(srv, t).body == b"request 1\n"
    r = get(srv, t)
    assert r.status == 200 and r.body == b"request 1\n", r
    assert cs(r) == "gatling; fwd=stale; fwd-status=304", r
    assert r.header("Last-Modified") == LM_DATE, r
    seen = [s[2].get("if-modified-since") for s in origin.requests("/c/lm")]
    assert seen == [None, LM_DATE], seen
    assert counters(srv)["cache_revalidated"] == 1


def test_two_vary_lines_not_stored(gatling, origin):
    """Vary on two lines is taken for Vary: * (not worth sorting out): passed."""
    srv = cache_server(gatling, origin, "")
    t = "/c/v2?vary=Accept-Encoding&vary2=Accept-Language&" + MAXAGE
    rs = [get(srv, t) for _ in range(2)]
    assert [body_n(r) for r in rs] == [1, 2], rs
    assert cs(rs[0]) == "gatling; fwd=miss; detail=pass", rs[0]


def test_conditional_and_head_on_a_passed_answer(gatling, origin):
    """An unshareable answer (Set-Cookie) with an ETag to the request that
    began the fetch: the fetch asked the whole (the client's validators do
    not go to the origin), so the cache answers the client's preconditions
    as it would from a hit (RFC 9110 13.2.1): a matching If-None-Match gets
    304 (with the ETag and the cookie), another the 200; an If-Match that
    does not match 412, one that does the 200; If-Modified-Since against
    Last-Modified likewise.  (The next requests of the URL, "pass", go to
    the origin with their fields.)  A HEAD gets the head of the fetch's GET,
    without the body."""
    srv = cache_server(gatling, origin, "")
    cases = [("/c/pc1?etag=pc", "If-None-Match", '"pc"', 304),
             ("/c/pc2?etag=pc", "If-None-Match", '"other"', 200),
             ("/c/pc3?etag=pc", "If-Match", '"other"', 412),
             ("/c/pc4?etag=pc", "If-Match", '"pc"', 200),
             ("/c/pc5?lm", "If-Modified-Since", LM_DATE, 304),
             ("/c/pc6?lm", "If-Modified-Since", "Sun, 01 Jan 2023 10:00:00 GMT", 200),
             ("/c/pc7?lm", "If-Unmodified-Since", "Sun, 01 Jan 2023 10:00:00 GMT", 412)]
    for i, (path, field, value, status) in enumerate(cases):
        r = get(srv, path + "&cookie&" + MAXAGE, headers=[(field, value)])
        assert r.status == status, (field, value, r)
        if status != 412:
            assert r.header("Set-Cookie") == "n=%d; Path=/" % (i + 1), r
            assert cs(r) == "gatling; fwd=miss; detail=pass", r
        assert r.body == (b"request %d\n" % (i + 1) if status == 200 else b"") or status == 412, r
        seen = origin.requests(path.split("?")[0])[0][2]
        assert field.lower() not in seen, seen
    r = get(srv, "/c/pc1?etag=pc&cookie&" + MAXAGE, headers=[("If-None-Match", '"pc"')])
    assert r.status == 304 and r.header("Set-Cookie") == "n=8; Path=/", "the origin's: %r" % r
    assert cs(r) == "gatling; fwd=uri-miss; detail=pass", r
    assert origin.requests("/c/pc1")[1][2].get("if-none-match") == '"pc"'
    t = "/c/ph?cookie&" + MAXAGE
    r = get(srv, t, method="HEAD")
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == "10", r
    assert r.header("Set-Cookie") == "n=9; Path=/", r
    assert origin.requests("/c/ph")[0][0] == "GET"


@serial  # timed: the entries must be stale, in their grace
def test_after_expiry_304_and_500(gatling, origin):
    """Past the ttl: a micro-cached entry with an ETag is served stale while
    one refresh revalidates it (the origin's 304 makes it fresh for the ttl
    again, the next request a hit of the same body); an entry with
    stale-if-error whose refresh gets a 500 from the origin answers for it."""
    srv = cache_server(gatling, origin, "ttl 1\n")
    mic, sie = "/c/mic?etag=m", "/c/sie5?cc=max-age%3D1%2C%20stale-if-error%3D60"
    assert cs(get(srv, mic)) == cs(get(srv, sie)) == "gatling; fwd=miss; stored"
    time.sleep(1.2)
    r = get(srv, mic)
    assert r.body == b"request 1\n" and cs(r) == "gatling; hit; detail=stale", r
    wait_for(lambda: counters(srv)["cache_revalidated"] == 1, 10, "the refresh's 304")
    assert origin.requests("/c/mic")[1][2].get("if-none-match") == '"m"'
    r = get(srv, mic)
    assert r.body == b"request 1\n" and cs(r) == "gatling; hit", r
    r = get(srv, sie, headers=[("X-Want-Status", "500")])
    assert r.status == 200 and r.body == b"request 2\n", r
    assert cs(r) == "gatling; hit; detail=stale-if-error", r
    assert origin.count("/c/sie5") == 2 and counters(srv)["cache_stale_errors"] == 1



@pytest.mark.skipif(not H2, reason="an empty DATA frame after the head is HTTP/2's")
def test_h2_request_with_an_empty_body(gatling, origin):
    """HTTP/2: a GET whose HEADERS say content-length: 0 and whose (empty)
    DATA frame ends the stream is a GET without a body: cached like any, on
    one connection, the second a hit.  The first's DATA comes while it waits
    for the fetch (the origin is slow to answer it)."""
    import_h2()
    import h2.config
    import h2.connection
    import h2.events
    srv = cache_server(gatling, origin, "")
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    sock = client_tls_context(["h2"]).wrap_socket(sock, server_hostname="localhost")
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                             header_encoding="latin-1"))
    c.initiate_connection()
    got = []
    with sock:
        for _ in range(2):
            sid = c.get_next_available_stream_id()
            c.send_headers(sid, [(":method", "GET"), (":path", "/c/e0?slowfirst=0.5&" + MAXAGE),
                                 (":scheme", "https"), (":authority", "localhost"),
                                 ("content-length", "0")])
            sock.sendall(c.data_to_send())
            time.sleep(0.1)  # the head first: the cache takes the request, then the end
            c.send_data(sid, b"", end_stream=True)
            sock.sendall(c.data_to_send())
            head, body, done = None, b"", False
            while not done:
                data = sock.recv(65536)
                assert data, "the connection closed"
                for ev in c.receive_data(data):
                    if isinstance(ev, h2.events.ResponseReceived):
                        head = dict(ev.headers)
                    elif isinstance(ev, h2.events.DataReceived):
                        body += ev.data
                        c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded):
                        done = True
                    elif isinstance(ev, h2.events.StreamReset):
                        raise AssertionError("stream reset (%s)" % ev.error_code)
                sock.sendall(c.data_to_send())
            got.append((head[":status"], head.get("cache-status"), body))
    assert got == [("200", "gatling; fwd=miss; stored", b"request 1\n"),
                   ("200", "gatling; hit", b"request 1\n")], got


@contextlib.contextmanager
def crash_proof_server(build, tmp_path, origin, conf, extra=()):
    """cache_server's gatling, stopped without the fixture's checks: a test
    that could crash the server (a use after free once did) reports it in its
    own call, not in the teardown.  Stopped by SIGTERM, killed only if it stays:
    a killed server writes no coverage counters (make coverage)."""
    root = make_docroot(str(tmp_path / "crashroot"), {".proxy": "", ".cache": conf})
    srv = start_server(build, root, ("-T", "10", "-S", "-P", "127.0.0.1/%d/^/c/" % origin.port)
                       + tuple(extra))
    try:
        yield srv
    finally:
        close_all_clients()
        if srv.alive():
            srv.process.terminate()
            try:
                srv.process.wait(5)
            except subprocess.TimeoutExpired:
                srv.process.kill()
        srv.process.wait(5)
        srv.join()


def assert_survived(srv):
    time.sleep(0.2)
    text = srv.stderr_text()
    assert srv.alive() and not any(a in text for a in ALARMING), (
        "gatling died (status %s):\n%s" % (srv.process.poll(), text[-3000:]))


def test_unsized_response_over_the_object_cap(build, tmp_path, origin):
    """One client, a cacheable 300 kB chunked answer, --cache 4M,64K: the
    client gets it whole (its head said "stored", the rest is passed on), the
    server goes on, and the next request is passed."""
    with crash_proof_server(build, tmp_path, origin, "", ("--cache", "4M,64K")) as srv:
        t = "/c/big?chunked=300000&" + MAXAGE
        try:
            r = get(srv, t)
        except (ConnectionError, OSError) as e:
            r = e
        assert_survived(srv)
        assert not isinstance(r, Exception) and r.status == 200, r
        assert len(r.body) == 300000 and r.body.startswith(b"request 1\n"), len(r.body)
        r = get(srv, t)  # the URL is "pass" now
        assert len(r.body) == 300000 and body_n(r) == 2, r
        assert cs(r) == "gatling; fwd=uri-miss; detail=pass", r


def test_overflow_while_collapsed(build, tmp_path, origin):
    """A response without a length that outgrows the object size while
    collapsed clients stream it (gatling.8: the cache holds no more than
    that for anyone): the first client gets it whole, past the cache; the
    others see it cut (their heads said 200 already); one origin request;
    the server lives, and the URL passes for a while."""
    with crash_proof_server(build, tmp_path, origin, "", ("--cache", "4M,64K")) as srv:
        rs = burst_tolerant(srv, "/c/big?chunked=300000&sleep=0.5&" + MAXAGE, 4)
        assert_survived(srv)
        assert origin.count() == 1
        whole = [r for r in rs if not isinstance(r, tuple) and len(r.body) == 300000]
        assert len(whole) >= 1, rs
        r = get(srv, "/c/big?chunked=300000&sleep=0.5&" + MAXAGE)
        assert len(r.body) == 300000 and cs(r) == "gatling; fwd=uri-miss; detail=pass", r


def burst_tolerant(srv, target, n):
    """burst(), a failed client's result a tuple (the exception,) rather than raised."""
    def one(i, barrier):
        with Client(srv.port, timeout=15) as c:
            barrier.wait(30)
            try:
                return c.request(target)
            except (ConnectionError, OSError) as e:
                return (e,)
    return parallel(n, one)


def test_overflow_with_a_range_owner(build, tmp_path, origin):
    """The client whose Range began the fetch waits for the whole response;
    it outgrows the object size: that client asks the origin itself (past
    the cache) and gets an answer whole; the URL passes."""
    with crash_proof_server(build, tmp_path, origin, "", ("--cache", "4M,64K")) as srv:
        t = "/c/bigr?chunked=300000&" + MAXAGE
        r = get(srv, t, headers=[("Range", "bytes=0-9")])
        assert_survived(srv)
        assert r.status in (200, 206) and r.body.startswith(b"request 2\n"), r
        assert origin.count() == 2
        r = get(srv, t)
        assert len(r.body) == 300000 and cs(r) == "gatling; fwd=uri-miss; detail=pass", r


# --------------------------------------------------------------------------
# Configuration

def test_bad_cache_file(gatling, origin):
    """A bad line: the cache is off for the host (every request passes, no
    Cache-Status), the error log names the real file, its line and what is
    wrong (issue 79: not the Host's name, which may be no directory);
    fixed, the cache is on."""
    srv = cache_server(gatling, origin, "ttl 60\n# fine\nfrobnicate 3\n")
    rs = [get(srv, "/c/bad?" + MAXAGE) for _ in range(3)]
    assert [body_n(r) for r in rs] == [1, 2, 3] and {cs(r) for r in rs} == {None}, rs
    real = os.path.realpath(srv.docroot)
    said = real + "/.cache:3: not a setting (ttl, grace, errors, lock, cookie, purge"
    wait_for(lambda: any(said in ln for ln in srv.errlog), 15,
             "the bad line in the error log")
    assert all(v == 0 for k, v in counters(srv).items()), counters(srv)
    with open(os.path.join(srv.docroot, ".cache"), "w") as f:
        f.write("ttl 60\n")
    time.sleep(1.1)  # the verdict is kept a second
    assert cs(get(srv, "/c/bad?" + MAXAGE)) == "gatling; fwd=miss; stored"
    assert cs(get(srv, "/c/bad?" + MAXAGE)) == "gatling; hit"
    for bad, why in (("ttl -1", "ttl: not a number of seconds"),
                     ("ttl 1 (", "ttl: not a POSIX extended regular expression"),
                     ("purge 10.0.0.0/33", "purge: not an address or addr/bits"),
                     ("cookie", "one value after the setting's name")):
        other = cache_server(gatling, origin, "# ok\nttl 60\n%s\n" % bad)
        assert cs(get(other, "/c/bad?" + MAXAGE)) is None, bad
        wait_for(lambda: any(".cache:3: " + why in ln for ln in other.errlog), 15, bad)


def test_cache_option_refused(build):
    for arg in ("0", "1K", "65G", "x", "1M,1K", "64M,128M", "", ",", "1M,", "-1M", "1M,4K,"):
        p = subprocess.run([build.binary, "--cache", arg, "-V"], capture_output=True, timeout=10)
        assert p.returncode == 2 and b"--cache" in p.stderr, (arg, p)
    p = subprocess.run([build.binary, "--cache"], capture_output=True, timeout=10)
    assert p.returncode == 2 and b"--cache needs an argument" in p.stderr, p
    for arg in ("1M", "64M,1M", "1G,4K", "2048K"):
        p = subprocess.run([build.binary, "--cache", arg, "-V"], capture_output=True, timeout=10)
        assert p.returncode == 0, (arg, p)
