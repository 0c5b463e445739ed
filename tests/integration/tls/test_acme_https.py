"""gatling's own ACME client (issue 44, gatling/acme/) against real components:
Pebble and pebble-challtestsrv (acmelab.py, shared with test_acme.py's
certbot test), with Pebble's chaos left on (5% of good nonces rejected,
authorizations reused half the time) unless a test says why not, and its
random validation delay off (PEBBLE_VA_NOSLEEP=1) but in
test_issues_with_pebbles_validation_delay.

gatling runs as a user would run it: `--acme EMAIL --acme-ca PEBBLE
--acme-ca-root PKI/ca.pem --acme-dir STATE --acme-names gatling.test -C
CERTS`, with its HTTP and HTTPS ports fixed in advance (-p, -e: Pebble's
httpPort and tlsPort name them).  What is checked, on the outside only:

  - issuance: HTTP-01, and TLS-ALPN-01 with Pebble's httpPort unused; the
    certificate then served over HTTP/1.1, HTTP/2 and HTTP/3 (where the build
    has it and aioquic is there), verified against Pebble's root alone for
    gatling.test; -C holds NAME/fullchain.pem + privkey.pem (0600), a pair
    whose key matches; /metrics has its expiry; one account in Pebble's log;
  - renewal under load (a 60 s profile), -W 1 and -W 2: clients on h1, h2
    (and h3 with -W 1: -W 2 turns HTTP/3 off) each on a new connection per
    request see the new serial and no request fails; one account, one order
    per certificate issued;
  - ARI: a fault proxy (acmelab.FaultProxy) gives a renewalInfo window a few
    seconds ahead, long before the 1-hour certificate's two thirds: the new
    order comes inside it and carries `replaces` (Pebble logs the
    replacement);
  - faults: Pebble absent at start (HTTP serves; the certificate arrives once
    it starts), a 429 with Retry-After (honoured), answers that are not JSON,
    16 MiB long, a redirect elsewhere or a 500 (each a logged failure, no
    crash, a later success, the redirect not followed), Pebble stopped while
    an order is under way and started again afresh, the ACME process killed
    with SIGKILL while its certificate download is held (every -C entry a
    complete pair; the next attempt completes), the state directory and -C on
    a full tmpfs (root: a clear error, the old certificate still served, the
    renewal once space is back), a SIGUSR2 upgrade while the certificate
    download is held (the old client finishes the order, the new one takes
    it over: one order), an admin's symlink in -C (left alone, said);
  - the client's memory (root, /proc/PID/mem): no byte of a served key;
  - hostile input while a challenge is outstanding (the proxy holds the
    challenge POST): another token, the acme-challenge directory and a
    traversal are refused, the real token answered; ALPN acme-tls/1 alone
    for gatling.test gets the RFC 8737 certificate, for another name or
    beside h2 it does not;
  - a real browser: Debian's Chromium, headless, trusting Pebble's root and
    intermediate by SPKI (never the leaf gatling obtained), loads the page
    over h2 and over h3.

The client's first retry after a failure comes 2 s later instead of 60
(GATLING_TEST_ACME_BACKOFF, gatling/acme/acme.c's hook for tests), doubling
from there.  The waits are bounded but generous: this module runs
once (run-check's ONCE) in make check's phase 1 beside the other passes.  It
does not depend on the IO backend: it runs on the first plain build.
"""
import base64
import calendar
import contextlib
import hashlib
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

import pytest

import acmelab
from acmelab import Fault, FaultProxy, Pebble, free_port, wait_for
from conftest import (BUILDS, Build, H2Client, H3Client, end_upgrades, gatling_version, gone,
                      recv_to_eof, running_server)
from conftest import test_pki as suite_pki  # (not collected as a test by this name)

PLAIN = [b for b in BUILDS if not b.endswith("-san")] or BUILDS
NAME = "gatling.test"
EMAIL = "admin@gatling.test"
BODY = b"<!DOCTYPE html><title>gatling.test</title><p>served with gatling's own certificate\n"
# a first certificate: Pebble's newAccount, newOrder, validation and finalize
# take a second or two; the rest is room for nonce retries and phase 1's load
ISSUE_TIMEOUT = 60
# after a fault, the client's next attempt: its back-off (with jitter) from
# BACKOFF seconds (GATLING_TEST_ACME_BACKOFF) doubling at each failure
BACKOFF = 2
RETRY_TIMEOUT = 90
SHORT = 60  # the "short" profile's validity, seconds
ACME_TLS = "acme-tls/1"
ACME_ID_OID = "1.3.6.1.5.5.7.1.31"  # RFC 8737's acmeIdentifier extension

pytestmark = [
    pytest.mark.skipif(bool(acmelab.missing()), reason="%s missing: %s" % (
        ", ".join(acmelab.missing()), acmelab.INSTALL_HINT)),
    pytest.mark.skipif(not PLAIN, reason="no build/*/gatling binary found"),
]


def x509():
    from cryptography import x509 as x
    return x


def has_h3():
    if not PLAIN or not gatling_version(Build(PLAIN[0]).binary).endswith(" h3"):
        return False
    try:
        import aioquic  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------
# gatling with --acme

class Site:
    """A docroot, -C and state directories and the two ports for one gatling."""

    def __init__(self, tmp, http_port=None, https_port=None, certs=None, state=None):
        self.tmp = tmp
        self.root = os.path.join(tmp, "www")
        os.makedirs(self.root, exist_ok=True)
        with open(os.path.join(self.root, "index.html"), "wb") as f:
            f.write(BODY)
        self.certs = certs or os.path.join(tmp, "certs")
        self.state = state or os.path.join(tmp, "acme")
        os.makedirs(self.certs, exist_ok=True)
        self.http = http_port or free_port()
        self.https = https_port or free_port()

    def args(self, ca, extra=()):
        return ["-p", str(self.http), "-e", str(self.https), "-C", self.certs, "-T", "10",
                "-S", "--acme", EMAIL, "--acme-ca", ca,
                "--acme-ca-root", suite_pki() + "/ca.pem", "--acme-dir", self.state,
                "--acme-names", NAME] + list(extra)

    @contextlib.contextmanager
    def gatling(self, ca, extra=()):
        # the client's first retry after a failure 2 s later, not 60 (acme.c's
        # test hook; a CA's Retry-After still counts)
        env = {"GATLING_TEST_ACME_BACKOFF": str(BACKOFF)}
        with running_server(Build(PLAIN[0]), self.root, self.args(ca, extra), env=env,
                            check_fds=False) as srv:
            srv.site = self
            yield srv


def ctx_for(root_pem, alpn=None):
    ctx = ssl.create_default_context(cadata=root_pem)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def h1_get(ctx, port, path="/", sni=NAME):
    """GET path over HTTPS (HTTP/1.1, SNI and Host sni, verified by ctx): the
    certificate (DER) the server presented, once the body was BODY."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname=sni) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                  % (path.encode(), sni.encode()))
        resp = recv_to_eof(s)
        cert = s.getpeercert(binary_form=True)
    head, _, body = resp.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and body == BODY, resp[:300]
    return cert


def h2_get(root_pem, port):
    c = H2Client(port, sni=NAME, context=ctx_for(root_pem), timeout=10)
    try:
        r = c.request("/", host=NAME)
        assert r.status == 200 and r.body == BODY, (r.status, r.body[:200])
        return c.sock.getpeercert(binary_form=True)
    finally:
        c.close()


def h3_get(root_pem, port, addr="127.0.0.1", sni=NAME):
    from cryptography.hazmat.primitives.serialization import Encoding
    c = H3Client(port, host=addr, sni=sni, cadata=root_pem, timeout=10)
    try:
        r = c.request("/", host=sni)
        assert r.status == 200 and r.body == BODY, (r.status, r.body[:200])
        return c.quic.tls._peer_certificate.public_bytes(Encoding.DER)
    finally:
        c.close()


def not_yet(fn, *args):
    """fn(*args), or None if it raised OSError (ssl.SSLError is one) or a
    ConnectionError: not yet."""
    try:
        return fn(*args)
    except (OSError, ConnectionError):
        return None


def cert_serial(der):
    return x509().load_der_x509_certificate(der).serial_number


def plain_get(port, path="/", host=NAME):
    """status, body of GET path over plain HTTP."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                  % (path.encode(), host.encode()))
        resp = recv_to_eof(s)
    head, _, body = resp.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def metrics(srv):
    status, body = plain_get(srv.site.http, "/metrics", "127.0.0.1")
    assert status == 200, body[:300]
    return body.decode()


def metric(text, name, label=None):
    pat = "^" + re.escape(name) + (r'\{[^}]*name="%s"[^}]*\}' % re.escape(label) if label
                             else r"(\{[^}]*\})?") + r" (\S+)$"
    m = re.search(pat, text, re.M)
    return float(m.group(m.lastindex)) if m else None


def served(srv, root_pem, timeout=ISSUE_TIMEOUT, what="the first certificate served"):
    """Wait until HTTPS serves a certificate that verifies against root_pem
    for gatling.test; its DER."""
    ctx = ctx_for(root_pem)
    return wait_for(lambda: srv.alive() and not_yet(h1_get, ctx, srv.site.https), timeout,
                    "%s (stderr:\n%s)" % (what, "\n".join(srv.errlog[-30:])), step=0.25)


def pairs(certs):
    """Every NAME entry of -C (not the dot ones): {NAME: serial}, each checked
    to be a complete pair (fullchain.pem's leaf matches privkey.pem, 0600)."""
    from cryptography.hazmat.primitives import serialization
    out = {}
    for n in sorted(os.listdir(certs)):
        if n.startswith("."):
            continue
        d = os.path.join(certs, n)
        with open(os.path.join(d, "fullchain.pem"), "rb") as f:
            chain = f.read()
        with open(os.path.join(d, "privkey.pem"), "rb") as f:
            key = serialization.load_pem_private_key(f.read(), None)
        mode = os.stat(os.path.join(d, "privkey.pem")).st_mode & 0o777
        assert mode == 0o600, "%s/privkey.pem has mode %o" % (n, mode)
        assert chain.count(b"-----BEGIN CERTIFICATE-----") >= 2, "%s: no intermediate" % n
        leaf = x509().load_pem_x509_certificate(chain)
        pub = serialization.PublicFormat.SubjectPublicKeyInfo
        enc = serialization.Encoding.DER
        assert leaf.public_key().public_bytes(enc, pub) == \
            key.public_key().public_bytes(enc, pub), "%s: key and certificate differ" % n
        out[n] = leaf.serial_number
    return out


def children(pid):
    """The processes whose parent is pid: [(pid, comm)]."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
            fields = st.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append((int(p), st[st.index("(") + 1:st.rindex(")")]))
    return out


def acme_pid(srv):
    """The ACME client's process: the child of gatling's acme-keeper (its
    child that starts the client again whenever it dies) named acme-client."""
    def client():
        for p, comm in children(srv.pid):
            if comm.startswith("acme-keeper"):
                kids = [k for k, c in children(p) if c.startswith("acme-client")]
                return kids[0] if len(kids) == 1 else None
        return None
    wait_for(lambda: client() is not None, 15, "the ACME client under its keeper")
    return client()


def logged(srv, pattern, since=0):
    """The error-log lines (from index since) that match pattern."""
    return [l for l in srv.errlog[since:] if re.search(pattern, l, re.I)]


# --------------------------------------------------------------------------
# Issuance

@pytest.fixture
def pki():
    return suite_pki()


def test_free_ports_asked_together_differ():
    """acmelab.free_port (Pebble's DNS, management and ACME ports, each site's two) gives
    ports free when asked and bound later by another program: never the same one twice in
    a row of picks (compare-acme's Pebble was told to listen on its DNS server's port once,
    and exited: address already in use).  1,000 random picks collided every time before."""
    ports = [free_port() for _ in range(1000)]
    assert len(set(ports)) == len(ports)


def test_http01_issues_and_serves_h1_h2_h3(tmp_path, pki):
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https) as pebble:
        pebble.start()
        with site.gatling(pebble.directory) as srv:
            # HTTP serves from the start, before any certificate
            assert plain_get(site.http) == (200, BODY)
            root = pebble.root()
            der = served(srv, root)
            leaf = x509().load_der_x509_certificate(der)
            names = leaf.extensions.get_extension_for_class(
                x509().SubjectAlternativeName).value.get_values_for_type(x509().DNSName)
            assert names == [NAME]
            from cryptography.hazmat.primitives.asymmetric import ec
            assert isinstance(leaf.public_key(), ec.EllipticCurvePublicKey) and \
                leaf.public_key().curve.name == "secp256r1", "not ECDSA P-256 by default"
            assert h2_get(root, site.https) == der
            if has_h3():
                assert h3_get(root, site.https) == der
            assert pairs(site.certs) == {NAME: leaf.serial_number}
            # the account key, made once, 0600
            keys = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(site.state))
                    for f in fs if f == "key.pem"]
            assert keys and all(os.stat(k).st_mode & 0o777 == 0o600 for k in keys), keys
            assert pebble.accounts() == 1 and pebble.issued() == 1, pebble.log()[-3000:]


def test_metrics_after_issuance(tmp_path, pki):
    """/metrics: the certificate's expiry and next renewal per name, the
    orders made."""
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https) as pebble:
        pebble.start()
        with site.gatling(pebble.directory) as srv:
            leaf = x509().load_der_x509_certificate(served(srv, pebble.root()))
            # the expiry is the server's, the orders the ACME client's (its
            # status file, written before it tells the server to load)
            text = wait_for(lambda: (lambda t: t if metric(
                t, "gatling_tls_certificate_expiry_seconds", NAME) and metric(
                    t, "gatling_acme_orders_total") else None)(metrics(srv)),
                15, "the certificate's expiry and the orders in /metrics: %s" % [
                    l for l in metrics(srv).splitlines() if "acme" in l or "expiry" in l])
        # the expiry as a time (unix seconds) or as seconds left
        expiry = metric(text, "gatling_tls_certificate_expiry_seconds", NAME)
        not_after = calendar.timegm(leaf.not_valid_after_utc.timetuple())
        assert abs(expiry - not_after) <= 2 or abs(expiry - (not_after - time.time())) <= 30, \
            (expiry, not_after)
        assert (metric(text, "gatling_acme_orders_total") or 0) >= 1, text
        assert metric(text, "gatling_acme_next_renewal_seconds", NAME) is not None, text


def test_rsa_key_on_request(tmp_path, pki):
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https) as pebble:
        pebble.start()
        with site.gatling(pebble.directory, ["--acme-key", "rsa2048"]) as srv:
            der = served(srv, pebble.root())
            from cryptography.hazmat.primitives.asymmetric import rsa
            key = x509().load_der_x509_certificate(der).public_key()
            assert isinstance(key, rsa.RSAPublicKey) and key.key_size == 2048


def test_tls_alpn01_with_no_http_port(tmp_path, pki):
    """TLS-ALPN-01 only: Pebble's httpPort is a port nobody listens on."""
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, free_port(), site.https) as pebble:
        pebble.start()
        with site.gatling(pebble.directory, ["--acme-challenge", "tls-alpn-01"]) as srv:
            root = pebble.root()
            der = served(srv, root)
            assert h2_get(root, site.https) == der
            if has_h3():
                assert h3_get(root, site.https) == der
            # (Pebble's httpPort has no listener: only TLS-ALPN-01 can have passed)
            assert not outstanding(site, "http-01")


def test_issues_with_pebbles_validation_delay(tmp_path, pki):
    """Pebble's random 0-15 s wait before each validation left on: the client
    polls (honouring Retry-After) until the order is ready."""
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https, nosleep=False) as pebble:
        pebble.start()
        with site.gatling(pebble.directory) as srv:
            served(srv, pebble.root(), timeout=ISSUE_TIMEOUT + 30)


# --------------------------------------------------------------------------
# Renewal

class Load(threading.Thread):
    """Requests one after another, each on a new connection (its handshake
    shows the certificate of the moment), until stopped: fn(root, port) -> DER."""

    def __init__(self, fn, root, port):
        super().__init__(daemon=True)
        self.fn, self.root, self.port = fn, root, port
        self.stop, self.ok, self.failures, self.serials = threading.Event(), 0, [], set()

    def run(self):
        while not self.stop.is_set():
            try:
                self.serials.add(cert_serial(self.fn(self.root, self.port)))
                self.ok += 1
            except Exception as e:  # noqa: BLE001 -- every failure counts
                self.failures.append(repr(e))
            time.sleep(0.01)  # two CPUs: leave gatling, its client and Pebble theirs


def h1_load(root, port):
    return h1_get(ctx_for(root), port)


def orders_around_issuance(log, n):
    """Pebble's log read up to its n-th issued certificate: (the orders added before it, the
    time of that issuance, [the time of each order added after it]); times in whole seconds
    of Pebble's log stamps ("Pebble 2026/11/27 16:00:00 ..."), None before the n-th."""
    before, at, later = 0, None, []
    issued = 0
    for line in log.splitlines():
        m = re.match(r"Pebble (\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) ", line)
        t = calendar.timegm(time.strptime(m.group(1), "%Y/%m/%d %H:%M:%S")) if m else None
        if "Added order " in line:
            if at is None:
                before += 1
            else:
                later.append(t)
        elif "Issued certificate serial " in line and at is None:
            issued += 1
            if issued == n:
                at = t
    return before, at, later


@pytest.mark.parametrize("workers", [1, 2])
def test_renewal_under_load(tmp_path, pki, workers):
    site = Site(str(tmp_path))
    extra = ["--acme-profile", "short"] + (["-W", str(workers)] if workers > 1 else [])
    with Pebble(site.tmp, pki, site.http, site.https, profiles={"short": SHORT}) as pebble:
        pebble.start()
        with site.gatling(pebble.directory, extra) as srv:
            root = pebble.root()
            first = cert_serial(served(srv, root))
            fns = [h1_load, h2_get] + ([h3_get] if workers == 1 and has_h3() else [])
            loads = [Load(fn, root, site.https) for fn in fns]
            for l in loads:
                l.start()
            try:
                # the renewal comes inside the ARI window (Pebble's: the whole
                # lifetime for so short a one) or at two thirds: before expiry
                wait_for(lambda: all(len(l.serials - {first}) for l in loads), SHORT + 30,
                         "the renewed certificate seen by every client (%s)" % [
                             (l.fn.__name__, l.ok, len(l.failures)) for l in loads])
            finally:
                for l in loads:
                    l.stop.set()
                for l in loads:
                    l.join(15)
            for l in loads:
                assert not l.failures, "%s: %d of %d requests failed: %s" % (
                    l.fn.__name__, len(l.failures), l.ok + len(l.failures), l.failures[:5])
            log = pebble.log()
            assert pebble.accounts() == 1, log[-4000:]
            # one order a certificate, but for an attempt that failed and said so
            # (with Pebble's chaos and a loaded server an order may fail, and the
            # next attempt is a new order), counted up to the renewed certificate's
            # issuance: the renewed one is renewed in turn half its lifetime after
            # it (acme_sched_gap), and a test slowed past that saw its order made and
            # not yet issued (3 orders for 2 certificates, make check-all under load)
            failed = [l for l in srv.errlog if re.search(r"\(failure \d+, next attempt in", l)]
            before, at, later = orders_around_issuance(log, 2)
            assert at is not None and 2 <= before <= 2 + len(failed), (
                before, at, later, [l for l in srv.errlog if re.search("acme", l, re.I)][-20:],
                log[-3000:])
            assert all(t - at >= SHORT // 2 - 3 for t in later), (
                "an order %s s after the renewed certificate's issuance" % [t - at for t in later],
                log[-3000:])
            assert pebble.replacements() >= 1 or pebble.first_serial_unmatchable(), (
                "no order said `replaces`", log[-3000:])
            assert list(pairs(site.certs)) == [NAME]


def test_ari_window_and_replaces(tmp_path, pki):
    """The proxy answers renewalInfo with a window 15-25 s after it is first
    asked for a certificate (a one-hour certificate: without ARI its renewal
    would come at 40 minutes): the new order comes inside the window and
    says `replaces`."""
    site = Site(str(tmp_path))
    windows = {}

    def window(certid):
        if certid not in windows:
            now = time.time()
            windows[certid] = (now + 15, now + 25)
        return windows[certid]

    with Pebble(site.tmp, pki, site.http, site.https, profiles={"hour": 3600}) as pebble, \
            FaultProxy(pki, pebble.acme) as proxy:
        pebble.start()
        proxy.add(Fault("ari", "/draft-ietf-acme-ari-03/renewalInfo/", times=1000,
                        window=window))
        with site.gatling(proxy.directory, ["--acme-profile", "hour"]) as srv:
            first = cert_serial(served(srv, pebble.root()))
            wait_for(lambda: windows, 30, "a renewalInfo request")
            wait_for(lambda: len(proxy.seen("/order-plz", "POST")) >= 2 and pebble.issued() >= 2,
                     60, "the renewal's order")
            # the first order that says `replaces` (a 201, or Pebble's 500 for a
            # serial it cannot match, after which the client orders plainly)
            said = [r for r in proxy.seen("/order-plz", "POST") if (r[3] or {}).get("replaces")]
            certid, (start, end) = next(iter(windows.items()))
            assert said, proxy.seen("/order-plz", "POST")
            t, payload = said[0][0], said[0][3]
            assert start - 1 <= t <= end + 5, "the renewal at %+.1f s, window %+.1f..%+.1f s" % (
                t - start, 0, end - start)
            assert payload.get("replaces") == certid, payload
            assert pebble.replacements() >= 1 or pebble.first_serial_unmatchable()
            ctx = ctx_for(pebble.root())
            wait_for(lambda: cert_serial(h1_get(ctx, site.https)) != first, 15,
                     "the renewed certificate served")


def test_refused_replacement_orders_plainly(tmp_path, pki):
    """A CA that refuses the renewal's order because of its `replaces` (here
    500 serverInternal, Pebble 2.10.1's answer for a serial that starts with
    a zero byte, about one certificate in 256): the client orders again at
    once without it, and the renewed certificate is served.  It used to send
    the same `replaces` after each back-off: the name never renewed."""
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https, profiles={"hour": 3600}) as pebble, \
            FaultProxy(pki, pebble.acme) as proxy:
        pebble.start()
        now = time.time()
        proxy.add(Fault("ari", "/draft-ietf-acme-ari-03/renewalInfo/", times=1000,
                        window=lambda certid: (now, now + 2)))
        refuse = proxy.add(Fault("noreplace", "/order-plz", "POST", times=1000))
        with site.gatling(proxy.directory, ["--acme-profile", "hour"]) as srv:
            first = cert_serial(served(srv, pebble.root()))
            ctx = ctx_for(pebble.root())
            wait_for(lambda: cert_serial(h1_get(ctx, site.https)) != first, 40,
                     "the renewed certificate served")
            orders = proxy.seen("/order-plz", "POST")
            said = [i for i, r in enumerate(orders) if (r[3] or {}).get("replaces")]
            assert said and orders[said[0]][4] == 500, orders
            # Pebble's chaos refuses 5% of nonces (400 badNonce), and the client sends the
            # same order again at once: the plain order is the first 201 after the refusal
            after = orders[said[0] + 1:]
            done = next((r for r in after if r[4] == 201), None)
            assert done and not any((r[3] or {}).get("replaces") for r in after), after
            assert done[0] - orders[said[0]][0] < 3, "the plain order came after a back-off"
            assert refuse.hits


# --------------------------------------------------------------------------
# Faults

def test_pebble_absent_at_start(tmp_path, pki):
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https) as pebble:
        with site.gatling(pebble.directory) as srv:
            assert plain_get(site.http) == (200, BODY)
            wait_for(lambda: logged(srv, "acme"), 30, "a logged failure to reach the CA: %s"
                     % srv.errlog)
            time.sleep(2)
            assert srv.alive() and plain_get(site.http) == (200, BODY)
            pebble.start()
            served(srv, pebble.root(), timeout=RETRY_TIMEOUT, what="the certificate after "
                   "Pebble started")
            text = metrics(srv)
            assert (metric(text, "gatling_acme_failures_total") or 0) >= 1, \
                "no gatling_acme_failures_total >= 1 in /metrics: %s" % [
                    l for l in text.splitlines() if "acme" in l and not l.startswith("#")]


def test_pebble_stopped_during_an_order(tmp_path, pki):
    """Pebble stops while the proxy holds the client's challenge POST (the
    proxy then answers 502), and comes back without any of its state (a new
    root, no account, no order): HTTP serves throughout, and the client gets
    its certificate from the new Pebble."""
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https) as pebble, \
            FaultProxy(pki, pebble.acme) as proxy:
        pebble.start()
        f = proxy.add(Fault("delay", "/chalZ/", "POST", delay=2))
        with site.gatling(proxy.directory) as srv:
            wait_for(lambda: f.hits, ISSUE_TIMEOUT, "the challenge POST")
            pebble.stop()
            time.sleep(3)
            assert srv.alive() and plain_get(site.http) == (200, BODY)
            pebble.start()
            served(srv, pebble.root(), timeout=RETRY_TIMEOUT,
                   what="the certificate from the restarted Pebble")


def test_rate_limited_honours_retry_after(tmp_path, pki):
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https) as pebble, \
            FaultProxy(pki, pebble.acme) as proxy:
        pebble.start()
        f = proxy.add(Fault("429", "/order-plz", "POST", retry_after=5))
        with site.gatling(proxy.directory) as srv:
            served(srv, pebble.root(), timeout=RETRY_TIMEOUT)
            assert f.hits, "no newOrder reached the proxy"
            later = [r[0] for r in proxy.seen("/order-plz", "POST") if r[0] > f.hits[0] + 0.01]
            assert later and later[0] - f.hits[0] >= 5 - 0.2, \
                "newOrder again %.1f s after a 429 with Retry-After: 5" % (later[0] - f.hits[0])
            assert logged(srv, "rateLimited"), "no error-log line with the problem's type"


def trap():
    """A listener that counts the connections it gets: where a redirect points."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.settimeout(0.2)
    hits = []
    stop = threading.Event()

    def run():
        while not stop.is_set():
            with contextlib.suppress(OSError):
                c, _ = s.accept()
                hits.append(time.time())
                c.close()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return s, hits, stop


@pytest.mark.parametrize("kind", ["notjson", "huge", "redirect", "500"])
def test_hostile_ca_answer(tmp_path, pki, kind):
    """The CA's newOrder answer is not JSON, 16 MiB long, a redirect to
    another origin, or a 500: one logged failure, no crash of the ACME
    process, the redirect not followed, and a later success."""
    site = Site(str(tmp_path))
    sock, hits, stop = trap()
    try:
        with Pebble(site.tmp, pki, site.http, site.https) as pebble, \
                FaultProxy(pki, pebble.acme) as proxy:
            pebble.start()
            f = proxy.add(Fault(kind, "/order-plz", "POST", location="https://127.0.0.1:%d/x"
                                % sock.getsockname()[1]))
            with site.gatling(proxy.directory) as srv:
                wait_for(lambda: f.hits, ISSUE_TIMEOUT, "the newOrder the fault answers")
                pid = acme_pid(srv)
                n = len(srv.errlog)
                served(srv, pebble.root(), timeout=RETRY_TIMEOUT)
                assert acme_pid(srv) == pid, "the ACME process was replaced: it crashed?"
                assert not hits, "the client followed the redirect elsewhere"
                errs = [l for l in srv.errlog if re.search("acme", l, re.I)]
                assert errs, "no error-log line for the bad answer: %s" % srv.errlog[n - 5:]
    finally:
        stop.set()
        sock.close()


def test_sigkill_mid_issuance(tmp_path, pki):
    """The ACME process is killed while the proxy holds its certificate
    download: -C has no partial entry, and a next attempt completes."""
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https) as pebble, \
            FaultProxy(pki, pebble.acme) as proxy:
        pebble.start()
        f = proxy.add(Fault("delay", "/certZ/", "POST", delay=4))
        with site.gatling(proxy.directory) as srv:
            wait_for(lambda: f.hits, ISSUE_TIMEOUT, "the certificate download")
            pid = acme_pid(srv)
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not os.path.exists("/proc/%d" % pid), 10,
                     "the killed ACME process gone")
            assert srv.alive() and plain_get(site.http) == (200, BODY)
            assert pairs(site.certs) == {}, "an entry in -C from the killed download"
            der = served(srv, pebble.root(), timeout=RETRY_TIMEOUT,
                         what="the certificate from the next attempt")
            assert pairs(site.certs) == {NAME: cert_serial(der)}
            assert acme_pid(srv) != pid


def test_two_servers_on_one_state_directory_order_once(tmp_path, pki):
    """Issue 54 (3): two gatling processes on the same -C and --acme-dir (as
    the old and the new binary of a SIGUSR2 upgrade are for a while): the
    client that holds the state directory's lock orders, the other says in
    its error log that it waits; one order, and one certificate in -C."""
    site = Site(str(tmp_path))
    other = Site(str(tmp_path), certs=site.certs, state=site.state)
    with Pebble(site.tmp, pki, site.http, site.https) as pebble:
        pebble.start()
        with site.gatling(pebble.directory) as a, other.gatling(pebble.directory) as b:
            wait_for(lambda: NAME in pairs(site.certs), ISSUE_TIMEOUT, "the certificate in -C")
            time.sleep(3 * BACKOFF)  # a second order would come by now
            assert pebble.orders() == 1, pebble.log()[-3000:]
            waiting = [s for s in (a, b) if logged(s, "another ACME client holds")]
            assert len(waiting) == 1, (a.errlog[-5:], b.errlog[-5:])


def upgrade_pid(srv, since):
    """The new process's pid, once the old one (srv) says it started it."""
    for line in srv.errlog[since:]:
        if "binary upgrade: started pid" in line:
            return int(line.rsplit(" ", 1)[1])
    return None


def test_upgrade_during_an_order_orders_once(tmp_path, pki):
    """Issue 54 (3): a SIGUSR2 upgrade while the proxy holds the certificate
    download: the old process drains and ends its client, which finishes the
    order in flight (within ACME_STOP_GRACE) and installs the certificate;
    the new client, which waited on the lock, takes it over and orders
    nothing: one order in Pebble's log, the certificate served by the new
    process."""
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, site.http, site.https) as pebble, \
            FaultProxy(pki, pebble.acme) as proxy:
        pebble.start()
        f = proxy.add(Fault("delay", "/certZ/", "POST", delay=5))
        with site.gatling(proxy.directory) as srv:
            wait_for(lambda: f.hits, ISSUE_TIMEOUT, "the certificate download")
            mark = len(srv.errlog)
            os.kill(srv.pid, signal.SIGUSR2)
            pid = wait_for(lambda: upgrade_pid(srv, mark), 15, "the new process")
            try:
                wait_for(lambda: gone(srv.pid), 30, "the old process exiting")
                ctx = ctx_for(pebble.root())
                wait_for(lambda: not_yet(h1_get, ctx, site.https), 30,
                         "the certificate served by the new process (stderr:\n%s)"
                         % "\n".join(srv.errlog[-30:]), step=0.25)
                time.sleep(3 * BACKOFF)  # a second order would come by now
                assert pebble.orders() == 1, "\n".join(srv.errlog[-30:])
                assert logged(srv, "this one takes over", mark), "\n".join(srv.errlog[mark:])
            finally:
                end_upgrades(srv, [srv.pid, pid])
                srv.exit_checked = True


def memory_has(pid, needles):
    """Which of needles (bytes) are anywhere in pid's readable memory (read
    as root through /proc/PID/mem, over /proc/PID/maps)."""
    found = set()
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read().splitlines()
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        for line in maps:
            fields = line.split()
            if fields[1][0] != "r" or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if hi - lo > 1 << 30:  # a sanitizer's shadow or reserve: no heap of ours
                continue
            for at in range(lo, hi, 16 << 20):  # chunks that overlap by a page
                with contextlib.suppress(OSError, ValueError, OverflowError):
                    mem.seek(at)
                    data = mem.read(min(hi - at, (16 << 20) + 4096))
                    found.update(n for n in needles if n in data)
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="reads another process's memory: root")
def test_client_holds_no_served_key(tmp_path, pki):
    """Issue 54 (6): the ACME client, the process that talks to the network,
    is forked before the served certificates' keys (and the session-ticket
    secret, made in the same load) are loaded: an admin's server.pem in -C,
    served over HTTPS, and none of its private key in the client's memory
    (the PEM's lines, the DER, the private scalar either way round)."""
    from cryptography.hazmat.primitives import serialization
    site = Site(str(tmp_path))
    with open(os.path.join(pki, "certs", "server.pem"), "rb") as f:
        pem = f.read()
    with open(os.path.join(site.certs, "server.pem"), "wb") as f:
        f.write(pem)
    key = serialization.load_pem_private_key(pem, None)
    scalar = key.private_numbers().private_value.to_bytes(32, "big")
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    body = pem[pem.index(b"PRIVATE KEY-----"):].split(b"\n")[1:-2]
    needles = {b"PEM line %d" % i: l for i, l in enumerate(body) if len(l) >= 40}
    needles.update({b"DER": der, b"scalar": scalar, b"scalar reversed": scalar[::-1]})
    with Pebble(site.tmp, pki, site.http, site.https) as pebble:
        pebble.start()
        with site.gatling(pebble.directory) as srv:
            wait_for(lambda: logged(srv, "HTTPS with 1 certificate"), 15, "server.pem loaded")
            have = memory_has(srv.pid, needles.values())
            assert have, "the server itself holds the key: the search is wrong"
            pid = acme_pid(srv)
            have = memory_has(pid, needles.values())
            assert not have, "the ACME client holds %s" % sorted(
                k.decode() for k, v in needles.items() if v in have)


def test_admins_symlink_in_c_left_alone(tmp_path, pki):
    """Issue 54 (6): -C/gatling.test is the admin's symlink to certbot's
    live/gatling.test (a pair of the suite's CA): the client says in the
    error log that it is not its own and leaves it, ordering nothing; the
    admin's certificate is still served."""
    import datetime
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    site = Site(str(tmp_path))
    live = os.path.join(site.tmp, "letsencrypt", "live", NAME)
    os.makedirs(live)
    with open(os.path.join(pki, "ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), None)
    with open(os.path.join(pki, "ca.pem"), "rb") as f:
        ca = x509().load_pem_x509_certificate(f.read())
    # due for renewal: a month old, an hour left
    key, now = ec.generate_private_key(ec.SECP256R1()), datetime.datetime.now(datetime.timezone.utc)
    subject = x509().Name([x509().NameAttribute(x509().NameOID.COMMON_NAME, NAME)])
    cert = (x509().CertificateBuilder().subject_name(subject).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509().random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=30))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509().SubjectAlternativeName([x509().DNSName(NAME)]), False)
            .sign(ca_key, hashes.SHA256()))
    for name, part in (("fullchain.pem", cert.public_bytes(serialization.Encoding.PEM)),
                       ("privkey.pem", key.private_bytes(
                           serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                           serialization.NoEncryption()))):
        with open(os.path.join(live, name), "wb") as f:
            f.write(part)
    link = os.path.join(site.certs, NAME)
    os.symlink(live, link)
    with Pebble(site.tmp, pki, site.http, site.https) as pebble:
        pebble.start()
        with site.gatling(pebble.directory) as srv:
            wait_for(lambda: logged(srv, "gatling.test is not the ACME client's symlink"), 15,
                     "the client saying it leaves the admin's link (stderr:\n%s)"
                     % "\n".join(srv.errlog[-10:]))
            time.sleep(BACKOFF)
            assert os.readlink(link) == live and pebble.orders() == 0
            with open(os.path.join(pki, "ca.pem"), "rb") as f:
                assert cert_serial(h1_get(ctx_for(f.read().decode()), site.https)) == \
                    cert.serial_number


def test_full_disk_keeps_the_old_certificate(tmp_path, pki):
    """The state directory and -C on a 2 MiB tmpfs, filled once the first
    certificate is in: the renewal (brought forward by an ARI window from
    the proxy) fails with a clear error, the old certificate is served, and
    once space is back the renewal succeeds."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", mnt],
                       capture_output=True, text=True, timeout=20)
    if r.returncode:
        pytest.skip("cannot mount a tmpfs here: %s" % r.stderr.strip())
    try:
        site = Site(str(tmp_path), certs=mnt + "/certs", state=mnt + "/acme")
        windows = {}

        # the first certificate's renewal 15-20 s after the client first asks
        # (Pebble's answer says Retry-After 6 h: the client asks once)
        def window(certid):
            now = time.time()
            return windows.setdefault(certid, (now + 15, now + 20))

        # every order validated anew: a reused authorization writes no challenge
        with Pebble(site.tmp, pki, site.http, site.https, chaos=False) as pebble, \
                FaultProxy(pki, pebble.acme) as proxy:
            pebble.start()
            proxy.add(Fault("ari", "/draft-ietf-acme-ari-03/renewalInfo/", times=1000,
                            window=window))
            with site.gatling(proxy.directory) as srv:
                root = pebble.root()
                first = cert_serial(served(srv, root))
                wait_for(lambda: windows, 30, "the client asking renewalInfo")
                filler = os.path.join(mnt, "filler")
                with open(filler, "wb") as f:
                    with contextlib.suppress(OSError):
                        while True:
                            f.write(b"\0" * 65536)
                            f.flush()
                n = len(srv.errlog)
                assert windows and time.time() < min(w[0] for w in windows.values()), \
                    "the disk filled after the renewal window began: too slow here"
                wait_for(lambda: logged(srv, r"no space|ENOSPC|disk full", n), RETRY_TIMEOUT,
                         "a clear error for the full disk: %s" % srv.errlog[n:])
                assert srv.alive()
                assert cert_serial(h1_get(ctx_for(root), site.https)) == first
                assert pairs(site.certs) == {NAME: first}
                os.unlink(filler)
                wait_for(lambda: cert_serial(h1_get(ctx_for(root), site.https)) != first,
                         RETRY_TIMEOUT, "the renewal once space is back")
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=20)


# --------------------------------------------------------------------------
# Hostile input

def alpn_handshake(port, sni, alpn):
    """A handshake offering alpn for sni, verifying nothing: (the ALPN chosen,
    the certificate's DER), or None when the server refused it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(alpn)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname=sni) as s:
            return s.selected_alpn_protocol(), s.getpeercert(binary_form=True)
    except (ssl.SSLError, ConnectionError):
        return None


def has_acme_id(der):
    return any(e.oid.dotted_string == ACME_ID_OID
               for e in x509().load_der_x509_certificate(der).extensions)


def outstanding(site, kind):
    d = os.path.join(site.state, "challenges", kind)
    with contextlib.suppress(OSError):
        return [f for f in os.listdir(d) if not f.startswith(".")]
    return []


def test_hostile_http01_requests(tmp_path, pki):
    """While a challenge is outstanding (the proxy holds the challenge POST
    that tells Pebble to validate): its token is answered with its key
    authorization and nothing else under acme-challenge is."""
    site = Site(str(tmp_path))
    # what certbot's webroot leaves (issue 35): a file of the document root
    webroot = os.path.join(site.root, ".well-known", "acme-challenge")
    os.makedirs(webroot)
    with open(os.path.join(webroot, "certbot-token"), "wb") as f:
        f.write(b"certbot-token.thumbprint")
    with Pebble(site.tmp, pki, site.http, site.https, chaos=False) as pebble, \
            FaultProxy(pki, pebble.acme) as proxy:
        pebble.start()
        f = proxy.add(Fault("delay", "/chalZ/", "POST", delay=6))
        with site.gatling(proxy.directory, ["-d"]) as srv:  # -d: listings on
            wait_for(lambda: f.hits, ISSUE_TIMEOUT, "the challenge POST")
            tokens = wait_for(lambda: outstanding(site, "http-01"), 5, "a challenge file")
            tok = tokens[0]
            status, body = plain_get(site.http, "/.well-known/acme-challenge/" + tok)
            assert status == 200 and body.startswith(tok.encode() + b"."), (status, body)
            other = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
            for path in ["/.well-known/acme-challenge/" + other,
                         "/.well-known/acme-challenge/",
                         "/.well-known/acme-challenge",
                         "/.well-known/acme-challenge/..%2f..%2fstatus",
                         "/.well-known/acme-challenge/../../acme/status",
                         "/.well-known/acme-challenge/" + tok + "/x",
                         "/.well-known/acme-challenge/" + "A" * 4096]:
                status, body = plain_get(site.http, path)
                assert status in (301, 400, 403, 404, 414), (path, status, body[:200])
                assert tok.encode() not in body and b"orders " not in body, (path, body[:300])
                assert b"certbot-token" not in body, (path, body[:300])
            # a file of the document root there: served (certbot's webroot beside) or
            # not (only the client's tokens answer there), but never a listing of it
            status, body = plain_get(site.http, "/.well-known/acme-challenge/certbot-token")
            assert (status, body) in ((200, b"certbot-token.thumbprint"), (404, body)), status
            assert srv.alive()
            served(srv, pebble.root())


def test_hostile_tls_alpn01_handshakes(tmp_path, pki):
    """ALPN acme-tls/1 alone for gatling.test while its challenge is
    outstanding: the RFC 8737 certificate; for another name, or beside h2,
    or once no challenge is outstanding: never."""
    site = Site(str(tmp_path))
    with Pebble(site.tmp, pki, free_port(), site.https, chaos=False) as pebble, \
            FaultProxy(pki, pebble.acme) as proxy:
        pebble.start()
        f = proxy.add(Fault("delay", "/chalZ/", "POST", delay=6))
        with site.gatling(proxy.directory, ["--acme-challenge", "tls-alpn-01"]) as srv:
            wait_for(lambda: f.hits, ISSUE_TIMEOUT, "the challenge POST")
            wait_for(lambda: outstanding(site, "tls-alpn-01"), 5, "a challenge file")
            got = alpn_handshake(site.https, NAME, [ACME_TLS])
            assert got and got[0] == ACME_TLS and has_acme_id(got[1]), got
            for sni, alpn in [("other.test", [ACME_TLS]), ("www." + NAME, [ACME_TLS]),
                              (NAME, ["h2", ACME_TLS]), (NAME, [ACME_TLS, "http/1.1"])]:
                got = alpn_handshake(site.https, sni, alpn)
                assert got is None or (got[0] != ACME_TLS and not has_acme_id(got[1])), \
                    (sni, alpn, got and got[0])
            der = served(srv, pebble.root())
            got = alpn_handshake(site.https, NAME, [ACME_TLS])
            assert got is None or (got[0] != ACME_TLS and not has_acme_id(got[1])), got
            assert not has_acme_id(der) and srv.alive()


# --------------------------------------------------------------------------
# A real browser

def spki_sha256(pem):
    from cryptography.hazmat.primitives import serialization
    cert = x509().load_pem_x509_certificate(pem.encode())
    der = cert.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


PAGE = b"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>gatling.test</title>
</head><body><p>served with gatling's own certificate</p><pre id="proto">pending</pre>
<script>
window.addEventListener("load", function () {
  var nav = performance.getEntriesByType("navigation")[0];
  document.getElementById("proto").textContent = "proto=" + nav.nextHopProtocol;
});
</script></body></html>
"""


@pytest.mark.parametrize("proto", ["h2", "h3"])
def test_chromium_loads_the_page(tmp_path, pki, proto):
    from test_h3_browser import CHROMIUM, chromium, chromium_stderr
    if not CHROMIUM:
        pytest.skip("needs Debian's chromium (tests/setup.sh installs it)")
    if proto == "h3" and not gatling_version(Build(PLAIN[0]).binary).endswith(" h3"):
        pytest.skip("this build has no HTTP/3")
    site = Site(str(tmp_path))
    with open(os.path.join(site.root, "index.html"), "wb") as f:
        f.write(PAGE)
    with Pebble(site.tmp, pki, site.http, site.https) as pebble:
        pebble.start()
        with site.gatling(pebble.directory) as srv:
            root = pebble.root()
            ctx = ctx_for(root)

            def up():
                with contextlib.suppress(OSError):
                    with socket.create_connection(("127.0.0.1", site.https), timeout=5) as r, \
                            ctx.wrap_socket(r, server_hostname=NAME):
                        return True
            wait_for(up, ISSUE_TIMEOUT, "the certificate served: %s" % srv.errlog[-20:])
            # Pebble's root and intermediate, never the leaf gatling obtained
            spki = "%s,%s" % (spki_sha256(root), spki_sha256(pebble.intermediate()))
            origin = "%s:%d" % (NAME, site.https)
            url = "https://%s/" % origin
            home = str(tmp_path / "chromium")
            os.makedirs(home)
            args = ["--host-resolver-rules=MAP %s 127.0.0.1" % NAME, "--dump-dom", url]
            with chromium(home, origin if proto == "h3" else "127.0.0.1:1", spki, args) as p:
                try:
                    out, _ = p.communicate(timeout=45)
                except subprocess.TimeoutExpired:
                    raise AssertionError("chromium did not finish in 45 s; stderr:\n%s"
                                         % chromium_stderr(home))
            out = out.decode(errors="replace")
            assert "proto=" + proto in out, "%s\nstderr:\n%s" % (out[-2000:],
                                                                  chromium_stderr(home))


# --------------------------------------------------------------------------
# The benchmark's quick mode

@pytest.mark.serial
def test_compare_acme_quick(tmp_path):
    """bench/compare-acme --quick writes its table with every row."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bench = os.path.join(here, "..", "..", "bench", "compare-acme")
    out = str(tmp_path / "out")
    r = subprocess.run([sys.executable, bench, "--quick", "-o", out, "--build", PLAIN[0],
                        "--servers", "gatling"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(os.path.join(out, "results.tsv")) as f:
        rows = [l.split("\t") for l in f.read().splitlines()[1:]]
    got = {(row[0], row[1]) for row in rows}
    for key in ("first_cert_s", "renewal_failed", "p99_ratio", "acme_rss_kb"):
        assert ("gatling", key) in got, (key, rows)
