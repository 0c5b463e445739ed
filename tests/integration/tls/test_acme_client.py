"""The ACME client alone (gatling/acme/, run by tests/acme/acme_try without the
server) against Pebble with its chaos on (5% of nonces refused, half of the
authorizations reused): HTTP-01 (a DNS name and an IP address) and TLS-ALPN-01
(the HTTP port closed) issue certificates that verify against Pebble's root,
in the -C layout acme.h promises; a renewal follows Pebble's ARI window and
sends `replaces`; External Account Binding and a preferred alternate chain;
and a CA that answers with a redirect, HTML or a body too long is one clear
line each, no crash.  Pebble's HTTP-01 and TLS-ALPN-01 validations reach
small responders here that read the client's challenge files, as the
serving loops will.  Runs once (tests/run-check's ONCE).
"""
import contextlib
import http.server
import json
import os
import re
import socket
import ssl
import stat
import subprocess
import threading
import urllib.request

import pytest

from conftest import BUILD_DIR, BUILDS, free_port
from conftest import test_pki as suite_pki  # (not collected as a test by this name)
from acmelab import CHALLTESTSRV, PEBBLE, listening, process, tail

TRY = next((p for p in (os.path.join(BUILD_DIR, b, "tests", "acme_try") for b in BUILDS)
            if os.access(p, os.X_OK)), None)
EAB_KID, EAB_KEY = "kid-1", "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"

pytestmark = [
    pytest.mark.skipif(not (PEBBLE and CHALLTESTSRV), reason="pebble missing (tests/setup.sh)"),
    pytest.mark.skipif(not TRY, reason="no build/*/tests/acme_try (make tests-build)"),
]


class Http01(http.server.BaseHTTPRequestHandler):
    """Pebble's HTTP-01 look: the client's file for the token, as the server
    will answer it."""
    state = None

    def do_GET(self):
        m = re.fullmatch(r"/\.well-known/acme-challenge/([A-Za-z0-9_-]+)", self.path)
        path = m and os.path.join(self.state, "challenges", "http-01", m.group(1))
        if not path or not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@contextlib.contextmanager
def serving(server):
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def http01_responder(port, state):
    handler = type("H", (Http01,), {"state": state})
    return serving(http.server.ThreadingHTTPServer(("127.0.0.1", port), handler))


@contextlib.contextmanager
def alpn_responder(port, state, pki):
    """TLS-ALPN-01's responder: the client's challenge certificate for the SNI
    name, to a handshake offering acme-tls/1."""
    default = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    default.load_cert_chain(pki + "/certs/server.pem")
    default.set_alpn_protocols(["acme-tls/1"])
    seen = []

    def sni(sock, name, ctx):
        pem = os.path.join(state, "challenges", "tls-alpn-01", "%s.pem" % name)
        seen.append((name, os.path.exists(pem)))
        if name and os.path.exists(pem):
            c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            c.load_cert_chain(pem)
            c.set_alpn_protocols(["acme-tls/1"])
            sock.context = c
    default.sni_callback = sni
    ls = socket.create_server(("127.0.0.1", port))
    stop = []

    def accept():
        while not stop:
            with contextlib.suppress(OSError):
                conn, _ = ls.accept()
                with contextlib.suppress(OSError, ssl.SSLError):
                    default.wrap_socket(conn, server_side=True).close()
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield seen
    finally:
        stop.append(1)
        ls.close()


@contextlib.contextmanager
def pebble(tmp, pki, http_port, tls_port, eab=False, env=None):
    """pebble-challtestsrv (DNS: everything is 127.0.0.1) and Pebble; yields
    (directory URL, management port, Pebble's log)."""
    dns, cmgmt, acme, pmgmt = (free_port() for _ in range(4))
    conf = os.path.join(tmp, "pebble.json")
    p = {"listenAddress": "127.0.0.1:%d" % acme, "managementListenAddress": "127.0.0.1:%d" % pmgmt,
         "certificate": pki + "/certs/server.pem", "privateKey": pki + "/certs/server.pem",
         "httpPort": http_port, "tlsPort": tls_port, "ocspResponderURL": "",
         "externalAccountBindingRequired": eab, "retryAfter": {"authz": 1, "order": 1},
         "profiles": {"default": {"description": "90 days", "validityPeriod": 7776000},
                      "shortlived": {"description": "90 seconds", "validityPeriod": 90}}}
    if eab:
        p["externalAccountMACKeys"] = {EAB_KID: EAB_KEY}
    with open(conf, "w") as f:
        json.dump({"pebble": p}, f)
    srv_cmd = [CHALLTESTSRV, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
               "-dnsserver", "127.0.0.1:%d" % dns, "-management", "127.0.0.1:%d" % cmgmt,
               "-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""]
    penv = dict(os.environ, PEBBLE_VA_NOSLEEP="1", **(env or {}))  # chaos left on
    dlog, plog = os.path.join(tmp, "challtestsrv.log"), os.path.join(tmp, "pebble.log")
    with process(srv_cmd, dlog) as d, \
            process([PEBBLE, "-config", conf, "-dnsserver", "127.0.0.1:%d" % dns], plog,
                    penv) as pb:
        listening(cmgmt, d, dlog)
        listening(acme, pb, plog)
        yield "https://127.0.0.1:%d/dir" % acme, pmgmt, plog


def mgmt_get(pki, port, path):
    ctx = ssl.create_default_context(cafile=pki + "/ca.pem")
    with urllib.request.urlopen("https://127.0.0.1:%d%s" % (port, path), context=ctx,
                                timeout=10) as r:
        return r.read().decode()


def acme_try(tmp, url, ca, names, secs=60, until=None, **env):
    """acme_try's run: (its stdout, the client's error-log lines)."""
    e = dict(os.environ, **{"ACME_TRY_" + k.upper(): str(v) for k, v in env.items()})
    if until:
        e["ACME_TRY_UNTIL"] = str(until)
    r = subprocess.run([TRY, url, ca or "", os.path.join(tmp, "state"), os.path.join(tmp, "live"),
                        str(secs)] + list(names), capture_output=True, text=True,
                       timeout=secs + 30, env=e)
    assert r.returncode == 0 and "child exit 0" in r.stdout, (r.stdout, r.stderr)
    return r.stdout, r.stderr


def check_installed(tmp, name, root_pem):
    """NAME -> .acme/NAME.SERIAL/ with fullchain.pem verifying against root_pem
    and privkey.pem 0600: the certificate's serial."""
    live = os.path.join(tmp, "live")
    target = os.readlink(os.path.join(live, name))
    assert re.fullmatch(r"\.acme/%s\.[0-9a-f]+" % re.escape(name), target), target
    chain = os.path.join(live, name, "fullchain.pem")
    root = os.path.join(tmp, "root.pem")
    with open(root, "w") as f:
        f.write(root_pem)
    r = subprocess.run(["openssl", "verify", "-CAfile", root, "-untrusted", chain, chain],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stdout + r.stderr
    st = os.stat(os.path.join(live, name, "privkey.pem"))
    assert stat.S_IMODE(st.st_mode) == 0o600
    return target.rsplit(".", 1)[1]


def status(tmp):
    with open(os.path.join(tmp, "state", "challenges", "status")) as f:
        return f.read()


def test_http01_issues_for_a_name_and_an_address(tmp_path):
    tmp, pki, port = str(tmp_path), suite_pki(), free_port()
    with http01_responder(port, os.path.join(tmp, "state")), \
            pebble(tmp, pki, port, free_port()) as (url, mgmt, plog):
        out, err = acme_try(tmp, url, pki + "/ca.pem", ["a.test", "127.0.0.1"], until=2,
                            challenge="http")
        root = mgmt_get(pki, mgmt, "/roots/0")
        for name in ("a.test", "127.0.0.1"):
            serial = check_installed(tmp, name, root)
            assert "acme: %s: certificate %s installed" % (name, serial) in err, err
        assert "2 SIGUSR1" in out, out
    st = status(tmp)
    assert re.search(r"^orders 2$", st, re.M) and re.search(r"^failures 0$", st, re.M), st
    assert re.search(r"^cert a\.test [1-9]\d+ [1-9]\d+ 0$", st, re.M), st
    assert os.listdir(os.path.join(tmp, "state", "challenges", "http-01")) == []
    key = os.path.join(tmp, "state", "account")
    (cahash,) = os.listdir(key)
    assert stat.S_IMODE(os.stat(os.path.join(key, cahash, "key.pem")).st_mode) == 0o600


def test_tls_alpn01_with_the_http_port_closed(tmp_path):
    tmp, pki, port = str(tmp_path), suite_pki(), free_port()
    with alpn_responder(port, os.path.join(tmp, "state"), pki) as seen, \
            pebble(tmp, pki, free_port(), port) as (url, mgmt, plog):
        out, err = acme_try(tmp, url, pki + "/ca.pem", ["b.test"], until=1, nohttp=1)
        check_installed(tmp, "b.test", mgmt_get(pki, mgmt, "/roots/0"))
    assert ("b.test", True) in seen, seen
    assert os.listdir(os.path.join(tmp, "state", "challenges", "tls-alpn-01")) == []


def test_ari_renewal_sends_replaces(tmp_path):
    """A 90-second certificate: Pebble's renewalInfo window is the whole
    lifetime (its 2-day window, clamped to issuance and expiry), the client
    picks a time in it at random, and the new order replaces the old
    certificate.  (With 10 minutes, the pick alone could pass the bound.)"""
    tmp, pki, port = str(tmp_path), suite_pki(), free_port()
    with http01_responder(port, os.path.join(tmp, "state")), \
            pebble(tmp, pki, port, free_port()) as (url, mgmt, plog):
        out, err = acme_try(tmp, url, pki + "/ca.pem", ["c.test"], secs=240, until=2,
                            profile="shortlived", challenge="http")
        assert "2 SIGUSR1" in out, (out, err)
        check_installed(tmp, "c.test", mgmt_get(pki, mgmt, "/roots/0"))
        assert "(renewal)" in err, err
        assert re.search(r"ARI: order \S+ is a replacement of", tail(plog, 100000)), tail(plog)
    # the previous version is kept beside the new one
    assert len(os.listdir(os.path.join(tmp, "live", ".acme"))) == 2


def test_eab_and_the_preferred_chain(tmp_path):
    tmp, pki, port = str(tmp_path), suite_pki(), free_port()
    with http01_responder(port, os.path.join(tmp, "state")), \
            pebble(tmp, pki, port, free_port(), eab=True,
                   env={"PEBBLE_ALTERNATE_ROOTS": "1"}) as (url, mgmt, plog):
        alt = mgmt_get(pki, mgmt, "/roots/1")
        cn = re.search(r"CN ?= ?(.*)", subprocess.run(
            ["openssl", "x509", "-noout", "-subject"], input=alt, capture_output=True,
            text=True, timeout=10).stdout).group(1).strip()
        out, err = acme_try(tmp, url, pki + "/ca.pem", ["d.test"], secs=30, until=1,
                            challenge="http", eab_kid=EAB_KID, eab_hmac=EAB_KEY, issuer=cn)
        check_installed(tmp, "d.test", alt)


class Hostile(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:1/elsewhere")
            self.end_headers()
            return
        body = b"<html>not ACME</html>" if self.path == "/html" else b'{"a":"' + b"x" * (2 << 20)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.mark.parametrize("path,said", [
    ("/redirect", "HTTP 302: a redirect to http://127.0.0.1:1/elsewhere, not followed"),
    ("/html", "not an ACME directory"),
    ("/long", "the answer is longer than 1 MiB"),
])
def test_a_hostile_ca_is_one_clear_line(tmp_path, path, said):
    tmp, port = str(tmp_path), free_port()
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", port), Hostile)):
        out, err = acme_try(tmp, "http://127.0.0.1:%d%s" % (port, path), None, ["e.test"],
                            secs=2)
    lines = [ln for ln in err.splitlines() if "acme:" in ln]
    assert len(lines) == 1 and said in lines[0] and "failure 1, next attempt in" in lines[0], err
    assert os.listdir(os.path.join(tmp, "live")) == []
    assert re.search(r"^cert e\.test 0 [1-9]\d+ 1$", status(tmp), re.M), status(tmp)
