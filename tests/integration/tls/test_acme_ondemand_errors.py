"""--acme-on-demand's refusals without a CA (issue 67's coverage of
acme/acme_ondemand.c): a name the ask URL does not allow is never ordered,
so no Pebble is needed; the CA named is a closed port.  The ask endpoint is
a small HTTP server here.  What is proven, from the outside (the handshake
ends with an alert, the error log says why, /metrics counts): an ask URL
that answers 500 (refused for 60 s, the fault's time, not 600), one that
cannot be reached (curl's reason logged), one with a query of its own
(domain= appended with &), --acme-on-demand-rate's ADDR (1,1: the second
name from the address is over it, never asked), and a refused name not asked
again; the budget from several client addresses (127.0.0.x: 60 names the ask
refuses, from six, spend neither the hour nor the log, and an allowed name
after them is asked, ordered and logged); the room of the names got on demand
(--acme-on-demand-names, --acme-names not in it, a clear line when full);
and forgetting (--acme-on-demand-forget: a name whose orders fail forgotten,
asked for again; the ondemand file's time kept across a restart).
Runs in the plain HTTP pass (it starts its own HTTPS listener)."""
import contextlib
import http.server
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time

import pytest

from conftest import free_port, http_only, recv_to_eof, running_server, wait_for
from conftest import test_pki as suite_pki  # (not collected as a test by this name)

pytestmark = [http_only, pytest.mark.skipif(not shutil.which("openssl"),
                                            reason="needs openssl")]


class Ask:
    """The ask endpoint: status for every name (200 for those in allow); the
    paths asked, in asked."""

    def __init__(self, status, allow=()):
        self.status, self.asked, self.allow = status, [], set(allow)
        ask = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                ask.asked.append(self.path)
                name = self.path.rpartition("domain=")[2]
                self.send_response(200 if name in ask.allow else ask.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/ask" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@contextlib.contextmanager
def site(build, tmp_path, ask_url, extra=()):
    root, certs, state = (str(tmp_path / d) for d in ("www", "certs", "acme"))
    for d in (root, certs):
        os.makedirs(d)
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("hi\n")
    dead = free_port()  # a CA that is not there: nothing here is ordered
    https = free_port()
    args = ["-p", "0", "-e", str(https), "-C", certs, "-S", "--acme", "ops@gatling.test",
            "--acme-ca", "https://127.0.0.1:%d/dir" % dead, "--acme-ca-root",
            suite_pki() + "/ca.pem", "--acme-dir", state, "--acme-on-demand", ask_url]
    with running_server(build, root, args + list(extra), check_fds=False) as srv:
        srv.https = https
        yield srv


def handshake_fails(port, sni):
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port,
                        "-servername", sni, "-brief"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "alert" in p.stderr, (p.returncode, p.stderr[-500:])


def hello(port, sni, src="127.0.0.1"):
    """A handshake with SNI sni from the address src (127.0.0.x: each a
    client address of its own) that ends without a certificate (an alert,
    or no certificate of sni's)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=60,
                                  source_address=(src, 0)) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            ctx.wrap_socket(raw, server_hostname=sni).close()


def asked(ask):
    return [p.rpartition("domain=")[2] for p in ask.asked]


def logged(srv, pattern):
    wait_for(lambda: any(re.search(pattern, l) for l in srv.errlog), 15,
             "%r in %r" % (pattern, srv.errlog))


def metric(srv, name):
    import socket
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        text = recv_to_eof(s).decode()
    m = re.search("^" + re.escape(name) + r"(\{[^}]*\})? (\S+)$", text, re.M)
    return float(m.group(2)) if m else None


def test_ask_answering_500_is_a_fault(build, tmp_path):
    """500 from the ask URL: refused for 60 s (a fault, asked again sooner
    than a 404's 600 s), and not asked again at the next handshake."""
    ask = Ask(500)
    try:
        with site(build, tmp_path, ask.url) as srv:
            handshake_fails(srv.https, "broken.customer.test")
            logged(srv, r"on demand: broken\.customer\.test \(from 127\.0\.0\.1\): "
                        r"the ask URL answered 500: refused for 60 s")
            handshake_fails(srv.https, "broken.customer.test")
            assert ask.asked == ["/ask?domain=broken.customer.test"]
            assert metric(srv, "gatling_acme_ondemand_refused_total") == 1
    finally:
        ask.close()


def test_ask_url_with_a_query_and_403(build, tmp_path):
    """An ask URL with a query of its own gets &domain=NAME; its 403 refuses
    the name for 600 s."""
    ask = Ask(403)
    try:
        with site(build, tmp_path, ask.url + "?key=k1") as srv:
            handshake_fails(srv.https, "shop.customer.test")
            logged(srv, r"shop\.customer\.test .*the ask URL answered 403: refused for 600 s")
            assert ask.asked == ["/ask?key=k1&domain=shop.customer.test"]
    finally:
        ask.close()


def test_ask_url_unreachable(build, tmp_path):
    """An ask URL nothing listens at: curl's reason in the log, refused for
    the fault's 60 s."""
    url = "http://127.0.0.1:%d/ask" % free_port()
    with site(build, tmp_path, url) as srv:
        handshake_fails(srv.https, "far.customer.test")
        logged(srv, r"far\.customer\.test \(from 127\.0\.0\.1\): .*refused for 60 s")
        line = [l for l in srv.errlog if "far.customer.test" in l][0]
        assert "answered" not in line, line


def test_rate_an_hour_from_one_address(build, tmp_path):
    """--acme-on-demand-rate 1,1: the first name is asked (and refused),
    the second from the same address is over its asks, refused without an
    ask."""
    ask = Ask(404)
    try:
        with site(build, tmp_path, ask.url, ["--acme-on-demand-rate", "1,1"]) as srv:
            handshake_fails(srv.https, "one.customer.test")
            logged(srv, r"one\.customer\.test .*answered 404")
            handshake_fails(srv.https, "two.customer.test")
            logged(srv, r"two\.customer\.test \(from 127\.0\.0\.1\): over "
                        r"--acme-on-demand-rate's asks an hour from one address: refused")
            assert ask.asked == ["/ask?domain=one.customer.test"]
            assert metric(srv, "gatling_acme_ondemand_limited_total") == 1
    finally:
        ask.close()


def test_strangers_do_not_spend_the_hour(build, tmp_path):
    """--acme-on-demand-rate 10,10: six client addresses (127.0.0.2-7) send
    60 names the ask refuses, ten each: every one is asked (the address
    pays, not the hour), the log holds at most OD_LOG_BURST (5) of their
    lines and a count of the rest, never 60; then a name the ask allows,
    from a seventh address, is asked and ordered, and its line is in the
    log; an eleventh name from one of the six is over its address's asks.
    (On 8872b4ba the hour's ten asks went to the first strangers' names:
    the allowed one was "over the hour", never asked.)"""
    good = "shop.customer.test"
    ask = Ask(404, allow={good})
    try:
        with site(build, tmp_path, ask.url, ["--acme-on-demand-rate", "10,10"]) as srv:
            for a in range(6):
                for k in range(10):
                    hello(srv.https, "n%d-%d.stranger.test" % (a, k), "127.0.0.%d" % (a + 2))
            assert len(ask.asked) == 60, ask.asked
            hello(srv.https, good, "127.0.0.9")  # (no certificate: the CA is not there)
            assert good in asked(ask), asked(ask)[-5:]
            logged(srv, r"on demand: shop\.customer\.test \(from 127\.0\.0\.9\): "
                        r"the ask URL allows it: ordered")
            hello(srv.https, "eleventh.stranger.test", "127.0.0.2")
            logged(srv, r"eleventh\.stranger\.test \(from 127\.0\.0\.2\): over "
                        r"--acme-on-demand-rate's asks an hour from one address")
            assert "eleventh.stranger.test" not in asked(ask)
            no = [l for l in srv.errlog if "answered 404" in l]
            assert 1 <= len(no) <= 5, no
            assert metric(srv, "gatling_acme_ondemand_refused_total") == 60
            assert metric(srv, "gatling_acme_ondemand_allowed_total") == 1
    finally:
        ask.close()


def test_refusals_counted_when_the_minute_ends(build, tmp_path):
    """Past five refusals of one kind in a minute, the rest are one line:
    "N more refusals (the ask URL said no) not logged"; the five lines are
    there and the count says the others (slow: waits out the minute)."""
    ask = Ask(404)
    try:
        with site(build, tmp_path, ask.url, ["--acme-on-demand-rate", "100,20"]) as srv:
            for k in range(8):
                hello(srv.https, "n%d.stranger.test" % k)
            assert len([l for l in srv.errlog if "answered 404" in l]) == 5, srv.errlog
            time.sleep(61)
            hello(srv.https, "late.stranger.test")
            logged(srv, r"on demand: 3 more refusals \(the ask URL said no\) not logged in 60 s")
            logged(srv, r"late\.stranger\.test .*answered 404")
    finally:
        ask.close()


def test_the_list_full(build, tmp_path):
    """--acme-on-demand-names 2 beside --acme-names given.customer.test
    (which takes none of the room): two allowed names kept, the third
    allowed one refused with a line that names it and the option; /metrics
    counts two names got on demand."""
    names = ["a.customer.test", "b.customer.test", "c.customer.test"]
    ask = Ask(404, allow=names)
    try:
        with site(build, tmp_path, ask.url, ["--acme-on-demand-names", "2", "--acme-names",
                                             "given.customer.test"]) as srv:
            for i, n in enumerate(names):
                threading.Thread(target=lambda n=n, i=i: hello(srv.https, n, "127.0.0.%d" % (
                    i + 2)), daemon=True).start()
                logged(srv, re.escape(n) + " .*the ask URL allows it")
            logged(srv, r"on demand: c\.customer\.test \(from 127\.0\.0\.4\): the ask URL "
                        r"allows it, but the list of names got on demand is full "
                        r"\(--acme-on-demand-names\) \(2 names kept\): refused for 60 s")
            assert metric(srv, "gatling_acme_ondemand_names") == 2
            with open(os.path.join(str(tmp_path / "acme"), "ondemand")) as f:
                assert [l.split()[0] for l in f] == names[:2]
    finally:
        ask.close()


def test_failing_name_forgotten(build, tmp_path):
    """--acme-on-demand-forget 10: a name the ask allows whose orders fail
    (the CA is not there) is forgotten after 10 s: a line says so, the
    ondemand file and /metrics drop it, and its next handshake asks again.
    A name the file kept from a run long ago (its time 1000 s back) is
    forgotten at start."""
    name = "gone.customer.test"
    ask = Ask(404, allow={name})
    os.makedirs(str(tmp_path / "acme"), mode=0o700)
    with open(os.path.join(str(tmp_path / "acme"), "ondemand"), "w") as f:
        f.write("old.customer.test %d\n" % (time.time() - 1000))
    try:
        with site(build, tmp_path, ask.url, ["--acme-on-demand-forget", "10"]) as srv:
            logged(srv, r"on demand: old\.customer\.test forgotten: no handshake named it "
                        r"in \d+ s \(--acme-on-demand-forget\)")
            threading.Thread(target=hello, args=(srv.https, name), daemon=True).start()
            logged(srv, r"gone\.customer\.test .*the ask URL allows it: ordered")
            t0 = time.monotonic()
            wait_for(lambda: any("gone.customer.test forgotten" in l for l in srv.errlog), 30,
                     "the name forgotten")
            assert time.monotonic() - t0 > 5
            wait_for(lambda: metric(srv, "gatling_acme_ondemand_names") == 0, 10,
                     "/metrics without the name")
            with open(os.path.join(str(tmp_path / "acme"), "ondemand")) as f:
                assert f.read() == ""
            threading.Thread(target=hello, args=(srv.https, name, "127.0.0.3"),
                             daemon=True).start()
            wait_for(lambda: asked(ask).count(name) == 2, 15, "asked again")
    finally:
        ask.close()
