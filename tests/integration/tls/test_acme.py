"""A real ACME issuance and renewal through gatling (issue 35): Debian's certbot
against Pebble, Let's Encrypt's own ACME test server, with gatling serving the
HTTP-01 challenges from its document root and then HTTPS with what certbot
wrote, never restarted.

  - pebble-challtestsrv is Pebble's DNS: it answers every A query with
    127.0.0.1 (only its DNS server runs), so Pebble's validation of
    gatling.test reaches gatling's HTTP port, which Pebble's httpPort names.
  - Pebble's own HTTPS certificate comes from the suite's throwaway CA
    (dist/mkcert.sh: localhost, 127.0.0.1), which certbot trusts through
    REQUESTS_CA_BUNDLE; no --no-verify-ssl.
  - gatling starts with -C on certbot's live/ while it is still empty: HTTP
    is served, the HTTPS port refuses handshakes.  certbot certonly --webroot
    runs with --deploy-hook sending gatling SIGUSR1 (what gatling(8)
    recommends, with the pid here, as other tests' gatlings run beside), and
    HTTPS then serves the docroot with live/gatling.test/cert.pem, whose chain
    verifies against Pebble's root (its management API's /roots/0).
  - certbot renew --force-renewal (the hook comes from the renewal
    configuration certbot wrote) while a client makes HTTPS requests without
    pause: afterwards the certificate served is the new one, and no request
    of the client failed.

Pebble and pebble-challtestsrv come from `go install` (tests/setup.sh, where Go
exists), certbot from Debian; the test is skipped, saying which is missing,
without them (Pebble's set-up is acmelab.py's, shared with test_acme_https.py).  It
does not depend on the IO backend or the scheme: run-check
runs it once (ONCE), on the first plain build.
"""
import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.request

import pytest

import acmelab
from conftest import (BUILDS, Build, free_port, https_port, recv_to_eof, running_server,
                      wait_for)
from conftest import test_pki as suite_pki  # (not collected as a test by this name)

PLAIN = [b for b in BUILDS if not b.endswith("-san")] or BUILDS
NAME = "gatling.test"
BODY = b"served over HTTPS from certbot's certificate\n"
CERTBOT_TIMEOUT = 60


PEBBLE, CHALLTESTSRV = acmelab.PEBBLE, acmelab.CHALLTESTSRV
CERTBOT = shutil.which("certbot")
MISSING = acmelab.missing() + ([] if CERTBOT else ["certbot"])
tail = acmelab.tail

pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason="%s missing: `go install github.com/letsencrypt/"
                       "pebble/v2/cmd/pebble@v2.10.1` (and cmd/pebble-challtestsrv), "
                       "apt-get install certbot; tests/setup.sh does both"
                       % ", ".join(MISSING)),
    pytest.mark.skipif(not PLAIN, reason="no build/*/gatling binary found"),
]


@contextlib.contextmanager
def acme_server(tmp, http_port, pki):
    """pebble-challtestsrv (DNS only) and Pebble, validating HTTP-01 on
    http_port, with no artificial waits, no nonces refused at random and every
    order validated anew (the renewal too goes through gatling's HTTP port);
    yields Pebble's directory URL, its management port and its log."""
    # no TLS-ALPN-01 here: nobody listens at tls_port
    with acmelab.Pebble(tmp, pki, http_port, free_port(), chaos=False) as p:
        p.start()
        yield p.directory, p.mgmt, p.plog


def pebble_root(pki, mgmt):
    """Pebble's issuing root (made anew at each start), from its management API."""
    ctx = ssl.create_default_context(cafile=pki + "/ca.pem")
    with urllib.request.urlopen("https://127.0.0.1:%d/roots/0" % mgmt, context=ctx,
                                timeout=10) as r:
        return r.read().decode()


def certbot(tmp, pki, plog, *args):
    """certbot with its directories below tmp, trusting Pebble's HTTPS
    certificate (pki's CA); its log and Pebble's (plog) say why it failed."""
    d = os.path.join(tmp, "certbot")
    cmd = [CERTBOT] + list(args) + [
        "--config-dir", d + "/config", "--work-dir", d + "/work", "--logs-dir", d + "/logs",
        "--non-interactive"]
    env = dict(os.environ, REQUESTS_CA_BUNDLE=pki + "/ca.pem")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=CERTBOT_TIMEOUT, env=env)
    assert r.returncode == 0, "%s failed (%d):\n%s\n%s\nlog: %s\nPebble: %s" % (
        " ".join(cmd), r.returncode, r.stdout, r.stderr, tail(d + "/logs/letsencrypt.log"),
        tail(plog))
    return r


def live_cert(live):
    """The DER certificate certbot's live/NAME/cert.pem holds."""
    with open(os.path.join(live, NAME, "cert.pem")) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def serial(der):
    r = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"],
                       input=der, capture_output=True, timeout=10, check=True)
    return r.stdout.decode().strip()


def get(ctx, port):
    """GET /f.txt over HTTPS with SNI gatling.test, verified by ctx: the body
    and the certificate (DER) the server presented."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname=NAME) as s:
        s.sendall(b"GET /f.txt HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                  % NAME.encode())
        resp = recv_to_eof(s)
        cert = s.getpeercert(binary_form=True)
    head, _, body = resp.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and body == BODY, resp[:300]
    return cert


def not_yet(fn, *args):
    """fn(*args), or None if it raised OSError (ssl.SSLError is one): not yet."""
    try:
        return fn(*args)
    except OSError:
        return None


class Client(threading.Thread):
    """HTTPS requests one after another, each on a new connection (so each
    handshake shows the certificate of the moment), until stopped."""

    def __init__(self, ctx, port):
        super().__init__(daemon=True)
        self.ctx, self.port = ctx, port
        self.stop, self.ok, self.failures, self.certs = threading.Event(), 0, [], set()

    def run(self):
        while not self.stop.is_set():
            try:
                self.certs.add(get(self.ctx, self.port))
                self.ok += 1
            except (OSError, AssertionError) as e:
                self.failures.append(repr(e))
            time.sleep(0.005)  # two CPUs: leave certbot and Pebble theirs


def test_certbot_issues_and_renews_through_gatling(tmp_path):
    tmp, pki = str(tmp_path), suite_pki()
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    with open(os.path.join(root, "f.txt"), "wb") as f:
        f.write(BODY)
    live = os.path.join(tmp, "certbot", "config", "live")
    os.makedirs(live, mode=0o700)  # as certbot makes it; it keeps one that exists
    args = ("-T", "10", "-C", live, "-e", "0")
    with running_server(Build(PLAIN[0]), root, args) as srv:
        port = https_port(srv)
        assert any("no certificate in %s yet" % live in l for l in srv.errlog), srv.errlog
        with acme_server(tmp, srv.port, pki) as (directory, mgmt, plog):
            ctx = ssl.create_default_context(cadata=pebble_root(pki, mgmt))
            with pytest.raises(ssl.SSLError, match="ALERT_INTERNAL_ERROR"):
                get(ctx, port)
            # gatling(8)'s deploy hook, pkill -USR1 -x gatling, by pid here: other
            # tests' gatlings run beside this one
            hook = "kill -USR1 %d" % srv.pid
            certbot(tmp, pki, plog, "certonly", "--server", directory, "--agree-tos",
                    "--register-unsafely-without-email", "--webroot", "-w", root, "-d", NAME,
                    "--deploy-hook", hook)
            first = live_cert(live)
            with open(os.path.join(live, NAME, "fullchain.pem")) as f:
                assert f.read().count("BEGIN CERTIFICATE") >= 2, "no intermediate in the chain"
            # the hook's SIGUSR1 reached gatling after certbot wrote the files; ctx
            # trusts Pebble's root alone, so the chain served (leaf, intermediate)
            # verifies against it, for gatling.test
            cert = wait_for(lambda: not_yet(get, ctx, port), 15, "HTTPS after issuance")
            assert cert == first, "the certificate served is not live/%s/cert.pem" % NAME
            client = Client(ctx, port)
            client.start()
            try:
                wait_for(lambda: client.ok >= 5, 10, "the client's first requests")
                certbot(tmp, pki, plog, "renew", "--force-renewal", "--no-random-sleep-on-renew")
                second = live_cert(live)
                assert serial(second) != serial(first)
                wait_for(lambda: second in client.certs, 15, "the renewed certificate served")
                seen = client.ok
                wait_for(lambda: client.ok > seen, 15, "requests after the renewal")
            finally:
                client.stop.set()
                client.join(10)
            assert not client.failures, "%d of %d requests failed: %s" % (
                len(client.failures), client.ok + len(client.failures), client.failures[:5])
            assert get(ctx, port) == second and client.certs == {first, second}
        text = srv.stderr_text()
        assert "HTTPS: 1 certificate loaded from %s: HTTPS answers now" % live in text, text
        assert "certificates reloaded" in text and "failed" not in text, text

