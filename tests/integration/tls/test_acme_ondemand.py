"""--acme-on-demand (issue 66, item 1): a certificate got during the first
handshake for a name an ask endpoint allows, against real components: Pebble
with its chaos on (5% of good nonces rejected, authorizations reused) and
pebble-challtestsrv (acmelab.py), the ask endpoint a small HTTP server here
(GET /ask?domain=NAME: 200 for the names it allows, 404 for the others; it
records every ask).

gatling starts with no name at all (-C empty, no --acme-names): every
certificate it serves is got on demand.  What is checked, on the outside:

  - a new name's first handshake waits (paused, the loop free) and gets the
    name's certificate, verified against Pebble's root: over HTTP/1.1 and
    over HTTP/2 (each with a name of its own), then HTTP/3 serves it too,
    and a name HTTP/3 names first (QUIC's handshake asks but does not wait:
    a later one gets it); the time from the first handshake to the
    certificate served is printed;
  - 50 concurrent first handshakes of one new name: one ask, one order, all
    50 served the certificate;
  - while a handshake waits (the ask endpoint slow), plain HTTP and other
    handshakes are answered at once;
  - refused names are never ordered: the ask answers 404 (the handshake ends
    at once, with the alert of a store that has no certificate); an IP
    literal and a one-label name as SNI (never asked); a client address over
    --acme-on-demand-rate's ADDR (never asked);
  - /metrics and /server-status count asks, refusals and the names got; a
    restart keeps the names (the state directory's ondemand file); a name
    got on demand is renewed as the others (a 60 s profile);
  - with --cluster (etcd, two nodes), one order for the cluster;
  - issue 78: 60 names the ask refuses from six client addresses
    (127.0.0.2-7) spend no part of the hour's names: an allowed name after
    them is asked, ordered and served; --acme-on-demand-forget leaves a name
    that got its certificate alone.

The times printed: `python3 -m pytest -q -s
tests/integration/tls/test_acme_ondemand.py -k first_handshake` (1.4 to 1.8 s
from the first ClientHello to the certificate served, h1, h2 and h3, with
Pebble on loopback).
"""
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
import urllib.parse

import pytest

import acmelab
from acmelab import Pebble, free_port, wait_for
from conftest import BUILDS, Build, H2Client, recv_to_eof, running_server
from conftest import test_pki as suite_pki  # (not collected as a test by this name)
from test_acme_https import BODY, EMAIL, h3_get, has_h3, not_yet

PLAIN = [b for b in BUILDS if not b.endswith("-san")] or BUILDS
ISSUE_TIMEOUT = 60

pytestmark = [
    pytest.mark.skipif(bool(acmelab.missing()), reason="%s missing: %s" % (
        ", ".join(acmelab.missing()), acmelab.INSTALL_HINT)),
    pytest.mark.skipif(not PLAIN, reason="no build/*/gatling binary found"),
]


class Ask:
    """The ask endpoint: 200 for the names in allow, 404 for the others,
    after delay seconds; every domain asked, in order, in asked."""

    def __init__(self, allow=(), delay=0):
        self.allow, self.delay, self.asked = set(allow), delay, []
        ask = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                name = q.get("domain", [""])[0]
                ask.asked.append(name)
                time.sleep(ask.delay)
                self.send_response(200 if name in ask.allow else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/ask" % self.httpd.server_address[1]
        self.t = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Site:
    def __init__(self, tmp):
        self.tmp = tmp
        self.root = os.path.join(tmp, "www")
        os.makedirs(self.root, exist_ok=True)
        with open(os.path.join(self.root, "index.html"), "wb") as f:
            f.write(BODY)
        self.certs = os.path.join(tmp, "certs")
        self.state = os.path.join(tmp, "acme")
        os.makedirs(self.certs, exist_ok=True)
        self.http, self.https = free_port(), free_port()

    @contextlib.contextmanager
    def gatling(self, ca, ask_url, extra=()):
        args = ["-p", str(self.http), "-e", str(self.https), "-C", self.certs, "-s", "30",
                "-S", "--acme", EMAIL, "--acme-ca", ca,
                "--acme-ca-root", suite_pki() + "/ca.pem", "--acme-dir", self.state,
                "--acme-on-demand", ask_url] + list(extra)
        with running_server(Build(PLAIN[0]), self.root, args,
                            env={"GATLING_TEST_ACME_BACKOFF": "2"}, check_fds=False) as srv:
            srv.site = self
            yield srv


@contextlib.contextmanager
def lab(tmp_path, ask, extra=()):
    site = Site(str(tmp_path))
    with Pebble(site.tmp, suite_pki(), site.http, site.https) as pebble:
        pebble.start()
        with site.gatling(pebble.directory, ask.url, extra) as srv:
            yield site, pebble, srv


def h1_get(root, port, sni, timeout=40, src="127.0.0.1"):
    """GET / over HTTPS with SNI and Host sni, verified against root, from
    the address src: the certificate (DER) presented, once the body was BODY."""
    ctx = ssl.create_default_context(cadata=root)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                  source_address=(src, 0)) as raw, \
            ctx.wrap_socket(raw, server_hostname=sni) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % sni.encode())
        resp = recv_to_eof(s)
        cert = s.getpeercert(binary_form=True)
    head, _, body = resp.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and body == BODY, resp[:300]
    return cert


def h2_get(root, port, sni):
    ctx = ssl.create_default_context(cadata=root)
    ctx.set_alpn_protocols(["h2"])
    c = H2Client(port, sni=sni, context=ctx, timeout=40)
    try:
        r = c.request("/", host=sni)
        assert r.status == 200 and r.body == BODY, (r.status, r.body[:200])
        return c.sock.getpeercert(binary_form=True)
    finally:
        c.close()


def names_of(der):
    from cryptography import x509
    leaf = x509.load_der_x509_certificate(der)
    return leaf.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


def plain_get(port, path="/"):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                  % path.encode())
        resp = recv_to_eof(s)
    head, _, body = resp.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def metric(text, name, label=None):
    pat = "^" + re.escape(name) + (r'\{[^}]*name="%s"[^}]*\}' % re.escape(label) if label
                             else r"(\{[^}]*\})?") + r" (\S+)$"
    m = re.search(pat, text, re.M)
    return float(m.group(m.lastindex)) if m else None


def metrics(site):
    status, body = plain_get(site.http, "/metrics")
    assert status == 200, body[:300]
    return body.decode()


def handshake_fails(port, sni):
    """A handshake with SNI sni (any name, an IP literal too: openssl sends
    what it is given) that ends without a certificate: seconds it took."""
    t0 = time.monotonic()
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port,
                        "-servername", sni, "-brief"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert p.returncode != 0 and "alert" in p.stderr, (p.returncode, p.stderr[-500:])
    return took


def test_new_name_at_first_handshake_h1_h2_h3(tmp_path):
    """The first handshake of each name waits and is served its certificate:
    h1 for one name, h2 for another; then h3 serves the first; the time from
    the first handshake to the certificate served is printed."""
    ask = Ask(allow={"shop1.customer.test", "shop2.customer.test", "shop3.customer.test"})
    try:
        with lab(tmp_path, ask) as (site, pebble, srv):
            root = pebble.root()
            t0 = time.monotonic()
            der = h1_get(root, site.https, "shop1.customer.test")
            took = time.monotonic() - t0
            print("\non-demand: first handshake to certificate served (h1): %.2f s" % took)
            assert names_of(der) == ["shop1.customer.test"]
            t0 = time.monotonic()
            der2 = h2_get(root, site.https, "shop2.customer.test")
            print("on-demand: first handshake to certificate served (h2): %.2f s"
                  % (time.monotonic() - t0))
            assert names_of(der2) == ["shop2.customer.test"]
            assert h1_get(root, site.https, "shop1.customer.test") == der  # loaded: no wait
            asked = ["shop1.customer.test", "shop2.customer.test"]
            if has_h3():
                assert wait_for(lambda: h3_get(root, site.https, sni="shop1.customer.test")
                                == der, 20, "h3 serving the on-demand certificate")
                # a name HTTP/3 asks first: that handshake does not wait, a later one has it
                t0 = time.monotonic()
                der3 = wait_for(lambda: not_yet(h3_get, root, site.https, "127.0.0.1",
                                                "shop3.customer.test"), 40,
                                "h3 serving a name it asked for first", step=0.25)
                print("on-demand: first h3 handshake to certificate served: %.2f s"
                      % (time.monotonic() - t0))
                assert names_of(der3) == ["shop3.customer.test"]
                asked.append("shop3.customer.test")
            assert ask.asked == asked
            assert pebble.issued() == len(asked), pebble.log()[-2000:]
            text = metrics(site)
            assert metric(text, "gatling_acme_ondemand_allowed_total") == len(asked), \
                text[-3000:]
            assert metric(text, "gatling_acme_ondemand_name", "shop2.customer.test") == 1
            status, page = plain_get(site.http, "/server-status")
            assert b"<th>ACME on demand: names got</th><td>%d</td>" % len(asked) in page, \
                page[-3000:]
            assert b"<li>shop1.customer.test</li>" in page, page[-3000:]
            with open(os.path.join(site.state, "ondemand")) as f:
                assert [l.split()[0] for l in f.read().splitlines()] == asked  # NAME TIME
    finally:
        ask.close()


def test_fifty_concurrent_handshakes_one_order(tmp_path):
    """50 first handshakes of one new name at once: one ask, one order, and
    every one of them served the certificate."""
    name = "many.customer.test"
    ask = Ask(allow={name})
    try:
        with lab(tmp_path, ask) as (site, pebble, srv):
            root = pebble.root()
            got, errors = [], []

            def one():
                try:
                    got.append(h1_get(root, site.https, name, timeout=60))
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(repr(e))
            ts = [threading.Thread(target=one) for _ in range(50)]
            t0 = time.monotonic()
            for t in ts:
                t.start()
            for t in ts:
                t.join(90)
            print("\non-demand: 50 concurrent first handshakes served in %.2f s"
                  % (time.monotonic() - t0))
            assert not errors, errors[:3]
            assert len(got) == 50 and len(set(got)) == 1
            assert ask.asked == [name]
            assert pebble.orders() == 1 and pebble.issued() == 1, pebble.log()[-2000:]
    finally:
        ask.close()


def test_loop_answers_while_a_handshake_waits(tmp_path):
    """The ask endpoint takes 3 s: meanwhile plain HTTP is answered at once,
    and so is a handshake the server refuses (an IP literal)."""
    name = "slow.customer.test"
    ask = Ask(allow={name}, delay=3)
    try:
        with lab(tmp_path, ask) as (site, pebble, srv):
            root = pebble.root()
            out = {}
            t = threading.Thread(target=lambda: out.update(der=h1_get(root, site.https, name)))
            t.start()
            wait_for(lambda: ask.asked, 10, "the ask")
            worst = 0
            for _ in range(10):
                t0 = time.monotonic()
                assert plain_get(site.http) == (200, BODY)
                worst = max(worst, time.monotonic() - t0)
            assert handshake_fails(site.https, "192.0.2.7") < 2
            assert worst < 1, "plain HTTP took %.2f s while a handshake waited" % worst
            assert t.is_alive(), "the handshake did not wait for the slow ask"
            t.join(60)
            assert names_of(out["der"]) == [name]
    finally:
        ask.close()


def test_refused_names_never_ordered(tmp_path):
    """The ask says 404; an IP literal and a one-label name as SNI; a client
    address over --acme-on-demand-rate's ADDR (2): none is ordered, the
    first and the last two are never asked, each handshake ends at once (the
    store has no certificate: an alert), and /metrics counts them."""
    ask = Ask(allow=set())
    try:
        with lab(tmp_path, ask, ["--acme-on-demand-rate", "100,2"]) as (site, pebble, srv):
            assert handshake_fails(site.https, "nope.customer.test") < 5
            assert handshake_fails(site.https, "nope.customer.test") < 2  # the refusal cached
            assert handshake_fails(site.https, "192.0.2.1") < 2
            assert handshake_fails(site.https, "intranet") < 2
            assert handshake_fails(site.https, "second.customer.test") < 5
            assert handshake_fails(site.https, "third.customer.test") < 5  # over ADDR
            assert ask.asked == ["nope.customer.test", "second.customer.test"]
            # the client process counts them and the loop publishes its counts: they may come
            # a moment after the last handshake ended (make check-all beside two busy loops)
            def counted():
                text = metrics(site)  # one read for both counts
                return (metric(text, "gatling_acme_ondemand_refused_total"),
                        metric(text, "gatling_acme_ondemand_limited_total")) == (2, 1)
            wait_for(counted, 10, "/metrics counting the 2 names refused and the 1 over the rate")
            assert pebble.orders() == 0, pebble.log()[-2000:]
            print("\n" + "\n".join(l for l in srv.errlog if "on demand" in l))
            assert [l for l in srv.errlog if "the ask URL answered 404" in l]
            assert [l for l in srv.errlog if "third.customer.test" in l and "one address" in l]
    finally:
        ask.close()


def test_allowed_name_issued_after_sixty_refused(tmp_path):
    """--acme-on-demand-rate 10,10: six client addresses (127.0.0.2-7) name
    60 hosts the ask refuses; each is asked and refused, none spends the
    hour's ten names; then a name the ask allows, from 127.0.0.8, is asked,
    ordered and served its certificate, and its line is in the log.  (On
    8872b4ba the strangers' first ten asks took the hour: the allowed name
    was refused, "over --acme-on-demand-rate's asks an hour", never asked.)"""
    good = "late.customer.test"
    ask = Ask(allow={good})
    try:
        with lab(tmp_path, ask, ["--acme-on-demand-rate", "10,10"]) as (site, pebble, srv):
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            for a in range(6):
                for k in range(10):
                    with socket.create_connection(("127.0.0.1", site.https), timeout=30,
                                                  source_address=("127.0.0.%d" % (a + 2), 0)) \
                            as raw, pytest.raises((ssl.SSLError, ConnectionError)):
                        ctx.wrap_socket(raw, server_hostname="s%d-%d.stranger.test" % (a, k))
            assert len(ask.asked) == 60, ask.asked
            der = h1_get(pebble.root(), site.https, good, src="127.0.0.8")
            assert names_of(der) == [good]
            assert ask.asked[-1] == good and pebble.issued() == 1, pebble.log()[-2000:]
            assert [l for l in srv.errlog if good in l and "allows it: ordered" in l], \
                srv.errlog[-20:]
    finally:
        ask.close()


def test_names_in_use_kept_and_unused_ones_forgotten(tmp_path):
    """--acme-on-demand-forget 10: a name whose certificate handshakes keep
    naming (every 3 s for 15 s) stays listed, never asked of the ask URL
    again; once nobody names it, it is forgotten (not renewed), its
    certificate still served, and the next handshake naming it asks for it
    again and lists it again.  Strangers cannot keep names for good."""
    name = "stays.customer.test"
    ask = Ask(allow={name})
    try:
        with lab(tmp_path, ask, ["--acme-on-demand-forget", "10"]) as (site, pebble, srv):
            root = pebble.root()
            served = h1_get(root, site.https, name)
            for _ in range(5):
                time.sleep(3)
                assert h1_get(root, site.https, name) == served
            assert metric(metrics(site), "gatling_acme_ondemand_name", name) == 1
            assert not [l for l in srv.errlog if "forgotten" in l], srv.errlog[-10:]
            assert ask.asked == [name]
            # nobody names it for the forget time: forgotten, still served
            wait_for(lambda: [l for l in srv.errlog if "%s forgotten" % name in l], 30,
                     "the unused name forgotten")
            line = [l for l in srv.errlog if "%s forgotten" % name in l][0]
            assert "no handshake named it" in line and "serves until it expires" in line, line
            wait_for(lambda: not metric(metrics(site), "gatling_acme_ondemand_name", name), 10,
                     "/metrics without the name")
            assert h1_get(root, site.https, name) == served
            wait_for(lambda: ask.asked == [name, name], 15, "asked again: %s" % ask.asked)
            wait_for(lambda: metric(metrics(site), "gatling_acme_ondemand_name", name) == 1, 15,
                     "listed again")
    finally:
        ask.close()


def test_restart_keeps_the_names(tmp_path):
    """A name got on demand is in the state directory's list: the next run
    keeps it (renews it as the others) without asking again."""
    name = "kept.customer.test"
    ask = Ask(allow={name})
    try:
        site = Site(str(tmp_path))
        with Pebble(site.tmp, suite_pki(), site.http, site.https) as pebble:
            pebble.start()
            root = pebble.root()
            with site.gatling(pebble.directory, ask.url):
                h1_get(root, site.https, name)
            with site.gatling(pebble.directory, ask.url):
                wait_for(lambda: metric(metrics(site), "gatling_acme_ondemand_name", name) == 1,
                         20, "the name listed again after the restart")
                h1_get(root, site.https, name)
            assert ask.asked == [name]
    finally:
        ask.close()


@pytest.mark.skipif(not shutil.which("etcd"),
                    reason="needs etcd (Debian's etcd-server: tests/setup.sh)")
def test_cluster_orders_a_name_once(tmp_path):
    """--cluster (etcd; Pebble validating on node A's ports only): the first
    handshakes of one new name on both nodes at once make one order for the
    cluster (the name's lock, as for names given at start), and both nodes
    serve its certificate."""
    from test_acme_cluster import extra as cluster_extra
    from test_acme_https import NAME as STATIC, Site as ClusterSite
    from test_cluster import Etcd
    name = "both.customer.test"
    ask = Ask(allow={name})
    etcd = Etcd(str(tmp_path)).start()
    a, b = ClusterSite(str(tmp_path / "a")), ClusterSite(str(tmp_path / "b"))
    try:
        with Pebble(a.tmp, suite_pki(), a.http, a.https) as pebble:
            pebble.start()
            root = pebble.root()

            def args(site):
                return cluster_extra(etcd, "od", pebble, site, names=(STATIC,)) + (
                    "--acme-on-demand", ask.url, "-s", "60")
            with b.gatling(pebble.directory, args(b)) as nb, \
                    a.gatling(pebble.directory, args(a)) as na:
                wait_for(lambda: pebble.issued() == 1, 60, "the static name's certificate")
                got, errors = {}, []

                def one(label, site):
                    try:
                        got[label] = h1_get(root, site.https, name, timeout=70)
                    except Exception as e:  # noqa: BLE001 - reported below
                        errors.append((label, repr(e)))
                ts = [threading.Thread(target=one, args=(k, s)) for k, s in (("a", a), ("b", b))]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join(90)
                assert not errors, (errors, "\n".join(na.errlog[-20:]),
                                    "\n".join(nb.errlog[-20:]))
                assert got["a"] == got["b"] and names_of(got["a"]) == [name]
                assert pebble.orders() == 2 and pebble.issued() == 2, pebble.log()[-3000:]
    finally:
        ask.close()
        etcd.stop()


def test_renewed_as_the_names_given(tmp_path):
    """A name got on demand is renewed as a name given at start: with a 60 s
    profile, a new certificate (another serial) comes before the first
    expires, without asking again."""
    from cryptography import x509
    name = "renew.customer.test"
    ask = Ask(allow={name})
    site = Site(str(tmp_path))
    try:
        with Pebble(site.tmp, suite_pki(), site.http, site.https,
                    profiles={"short": 60}) as pebble:
            pebble.start()
            root = pebble.root()
            with site.gatling(pebble.directory, ask.url, ["--acme-profile", "short"]):
                first = x509.load_der_x509_certificate(h1_get(root, site.https, name))

                def renewed():
                    der = h1_get(root, site.https, name)
                    serial = x509.load_der_x509_certificate(der).serial_number
                    return serial != first.serial_number and serial
                wait_for(renewed, 75, "the on-demand name renewed", step=0.5)
            assert ask.asked == [name]
            assert pebble.issued() >= 2, pebble.log()[-2000:]
    finally:
        ask.close()


def test_wait_bounded_by_s(tmp_path):
    """The ask takes 3 s, -s is 1: the first handshake goes on after about 1 s
    as without the option (no certificate loaded yet: an alert); the name is
    ordered all the same, and a later handshake gets its certificate."""
    name = "late.customer.test"
    ask = Ask(allow={name}, delay=3)
    try:
        with lab(tmp_path, ask, ["-s", "1"]) as (site, pebble, srv):
            root = pebble.root()
            took = handshake_fails(site.https, name)
            assert 0.8 < took < 2.9, took
            der = wait_for(lambda: not_yet(h1_get, root, site.https, name), 60,
                           "the certificate for a later handshake: %s" % "\n".join(
                               srv.errlog[-30:]), step=0.5)
            assert names_of(der) == [name] and ask.asked == [name]
    finally:
        ask.close()


@pytest.mark.parametrize("args,said", [
    (["--acme-on-demand", "http://example.org/ask"], "not an https:// URL, or http:// to"),
    (["--acme-on-demand", "ftp://127.0.0.1/ask"], "not an https:// URL, or http:// to"),
    (["--acme-on-demand", "https://a.example/ask#x"], "no #"),
    (["--acme-on-demand-rate", "5,2"], "without --acme-on-demand"),
    (["--acme-on-demand", "http://127.0.0.1:9/a", "--acme-on-demand-rate", "5,9"],
     "not HOUR,ADDR"),
    (["--acme-on-demand", "http://127.0.0.1:9/a", "--acme-on-demand-rate", "0,0"],
     "not HOUR,ADDR"),
    (["--acme-on-demand-names", "5"], "--acme-on-demand-names without --acme-on-demand"),
    (["--acme-on-demand-forget", "60"], "--acme-on-demand-forget without --acme-on-demand"),
    (["--acme-on-demand", "http://127.0.0.1:9/a", "--acme-on-demand-names", "101"],
     "--acme-on-demand-names 101: not a number of names (1-100)"),
    (["--acme-on-demand", "http://127.0.0.1:9/a", "--acme-on-demand-names", "0"],
     "not a number of names"),
    (["--acme-on-demand", "http://127.0.0.1:9/a", "--acme-on-demand-forget", "9"],
     "--acme-on-demand-forget 9: not a time in seconds (10-31536000)"),
])
def test_bad_options_refused(tmp_path, args, said):
    p = subprocess.run([Build(PLAIN[0]).binary, "--acme", EMAIL, "--acme-dir",
                        str(tmp_path / "acme"), "-C", str(tmp_path), "--check"] + args,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and said in p.stderr, (p.returncode, p.stderr)
