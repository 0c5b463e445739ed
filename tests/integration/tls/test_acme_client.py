"""The ACME client alone (gatling/acme/, run by tests/acme/acme_try without the
server) against Pebble with its chaos on (5% of nonces refused, half of the
authorizations reused): HTTP-01 (a DNS name and an IP address) and TLS-ALPN-01
(the HTTP port closed) issue certificates that verify against Pebble's root,
in the -C layout acme.h promises; a renewal follows Pebble's ARI window and
sends `replaces`; External Account Binding and a preferred alternate chain;
and a CA that answers with a redirect, HTML or a body too long is one clear
line each, no crash.  Issue 54's faults, each a test that failed before its
fix: HTTP-01 unreachable falls back to TLS-ALPN-01; a client killed in its
order does not order again at once; two clients on one state directory
order once (the lock); a replaced account key is registered again; http://
URLs from the CA refused and an unlisted profile said; the client ends with
its keeper under -u; a state directory made anew is noticed; IPv6 names in
RFC 5952 form; an ARI Retry-After past time_t is no poll a second.  Pebble's
HTTP-01 and TLS-ALPN-01 validations reach small responders here that read
the client's challenge files, as the serving loops will.  Runs once
(tests/run-check's ONCE).
"""
import contextlib
import http.server
import json
import os
import re
import shutil
import socket
import ssl
import stat
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest

from conftest import BUILD_DIR, BUILDS, free_port, wait_for
from conftest import test_pki as suite_pki  # (not collected as a test by this name)
from acmelab import CHALLTESTSRV, PEBBLE, Fault, FaultProxy, listening, process, tail

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
            # its expiry as a UTC date, the certificate's notAfter (issue 79 item 8.6)
            m = re.search(r"acme: %s: certificate %s installed, valid until (\S+)," % (
                re.escape(name), serial), err)
            assert m and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m.group(1)), err
            end = subprocess.run(["openssl", "x509", "-noout", "-enddate", "-dateopt", "iso_8601",
                                  "-in", os.path.join(tmp, "live", name, "fullchain.pem")],
                                 capture_output=True, text=True, timeout=10).stdout
            assert end.strip() == "notAfter=" + m.group(1).replace("T", " "), (end, m.group(1))
        assert "2 SIGUSR1" in out, out
    st = status(tmp)
    assert re.search(r"^orders 2$", st, re.M) and re.search(r"^failures 0$", st, re.M), st
    # ... and the certificate's issuer, the rest of the line (issue 66)
    assert re.search(r"^cert a\.test [1-9]\d+ [1-9]\d+ 0 Pebble Intermediate CA \w+$", st,
                     re.M), st
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
        log = tail(plog, 100000)
        first = re.search(r"Issued certificate serial ([0-9a-f]+) for order", log)
        assert first, log
        if len(first.group(1)) < 16:
            # Pebble's 8 random bytes began with a zero byte (one certificate in
            # 256; its log prints the number without it): Pebble 2.10 cannot match
            # that certID (serverInternal, see test_acme_https's
            # test_refused_replacement_orders_plainly), so the client orders again
            # without `replaces` (acme_proto.c), and the name renews
            renewal = log[log.index("renewalInfo"):]
            assert renewal.count("POST /order-plz") >= 2, log
        else:
            assert re.search(r"ARI: order \S+ is a replacement of", log), log
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


def test_http01_unreachable_falls_back_to_tls_alpn01(tmp_path, monkeypatch):
    """Issue 54 (2): Pebble's HTTP-01 looks go to a port where nothing
    listens (port 80 blocked by a firewall) and no challenge is configured:
    HTTP-01 fails once, the schedule records it for the name, and the next
    attempt takes TLS-ALPN-01, which the CA offers too."""
    tmp, pki, port = str(tmp_path), suite_pki(), free_port()
    monkeypatch.setenv("GATLING_TEST_ACME_BACKOFF", "1")
    with alpn_responder(port, os.path.join(tmp, "state"), pki) as seen, \
            pebble(tmp, pki, free_port(), port) as (url, mgmt, plog):
        out, err = acme_try(tmp, url, pki + "/ca.pem", ["f.test"], secs=40, until=1)
        check_installed(tmp, "f.test", mgmt_get(pki, mgmt, "/roots/0"))
    assert ("f.test", True) in seen, seen
    assert "f.test: http-01 failed: the next attempt takes another challenge" in err, err
    with open(os.path.join(tmp, "state", "schedule")) as f:
        assert re.search(r"^f\.test \S+( -?\d+){6} http-01$", f.read(), re.M)


def children(pid):
    with contextlib.suppress(OSError):
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(c) for c in f.read().split()]
    return []


def test_a_client_killed_in_its_order_does_not_order_again_at_once(tmp_path):
    """Issue 54 (4): the client is killed (SIGKILL) as soon as Pebble has
    added its order, each time: the keeper starts it again within seconds,
    and the attempt, written to the schedule before newOrder, holds it to its
    back-off (a minute): one order in 15 s, not one per restart."""
    tmp, pki, port = str(tmp_path), suite_pki(), free_port()
    with http01_responder(port, os.path.join(tmp, "state")), \
            pebble(tmp, pki, port, free_port()) as (url, mgmt, plog):
        env = dict(os.environ, ACME_TRY_CHALLENGE="http")
        p = subprocess.Popen([TRY, url, pki + "/ca.pem", os.path.join(tmp, "state"),
                              os.path.join(tmp, "live"), "15", "g.test"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        killed = 0
        while p.poll() is None:
            if tail(plog, 1 << 20).count("Added order ") > killed:
                for keeper in children(p.pid):
                    for client in children(keeper):
                        with contextlib.suppress(OSError):
                            os.kill(client, 9)
                killed += 1
            time.sleep(0.02)
        out, err = p.communicate()
        orders = tail(plog, 1 << 20).count("Added order ")
    assert orders == 1, (orders, err)
    assert "the ACME client was ended by signal 9" in err, err


def test_two_clients_on_one_state_directory_order_once(tmp_path):
    """Issue 54 (3): two clients on the same state and -C directories (two
    servers, or the old and new binary of an upgrade): one holds the lock
    and orders; the other says it waits, takes over when the first ends,
    finds the certificate installed and orders nothing."""
    tmp, pki, port = str(tmp_path), suite_pki(), free_port()
    with http01_responder(port, os.path.join(tmp, "state")), \
            pebble(tmp, pki, port, free_port()) as (url, mgmt, plog):
        env = dict(os.environ, ACME_TRY_CHALLENGE="http", ACME_TRY_UNTIL="1")
        procs = [subprocess.Popen([TRY, url, pki + "/ca.pem", os.path.join(tmp, "state"),
                                   os.path.join(tmp, "live"), "10", "h.test"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env) for _ in range(2)]
        errs = [p.communicate(timeout=40)[1] for p in procs]
        check_installed(tmp, "h.test", mgmt_get(pki, mgmt, "/roots/0"))
        orders = tail(plog, 1 << 20).count("Added order ")
    assert orders == 1, (orders, errs)
    waited = [e for e in errs if "another ACME client holds" in e]
    assert len(waited) == 1 and "this one takes over" in waited[0], errs


def test_a_replaced_account_key_is_registered_again(tmp_path):
    """Issue 54 (3): the account's URL is kept with its key's thumbprint, so
    a key replaced (by hand, or by another client) is registered again
    instead of signing with the URL of another key's account."""
    tmp, pki, port = str(tmp_path), suite_pki(), free_port()
    with http01_responder(port, os.path.join(tmp, "state")), \
            pebble(tmp, pki, port, free_port()) as (url, mgmt, plog):
        acme_try(tmp, url, pki + "/ca.pem", ["i.test"], until=1, challenge="http")
        (cahash,) = os.listdir(os.path.join(tmp, "state", "account"))
        key = os.path.join(tmp, "state", "account", cahash, "key.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-out", key], check=True, timeout=10)
        out, err = acme_try(tmp, url, pki + "/ca.pem", ["j.test"], until=1, challenge="http")
        # not installed: the client's lines say why, and Pebble's log what it saw
        assert os.path.islink(os.path.join(tmp, "live", "j.test")), (out, err, tail(plog, 4096))
        check_installed(tmp, "j.test", mgmt_get(pki, mgmt, "/roots/0"))
        assert len(re.findall(r"There are now \d+ accounts", tail(plog, 1 << 20))) == 2


def test_plain_http_urls_from_the_ca_are_refused(tmp_path):
    """Issue 54 (6), RFC 8555 6.1: a directory whose URLs are http:// (here
    Pebble's, rewritten by the fault proxy) is refused in one line, before
    any request leaves in the clear; and --acme-profile that the CA does not
    list is said, not dropped silently."""
    tmp, pki = str(tmp_path), suite_pki()
    with pebble(tmp, pki, free_port(), free_port()) as (url, mgmt, plog), \
            FaultProxy(pki, int(url.rsplit(":", 1)[1].split("/")[0])) as proxy:
        proxy.add(Fault("plain", "/dir", times=1))
        out, err = acme_try(tmp, proxy.directory, pki + "/ca.pem", ["k.test"], secs=3,
                            profile="nosuch")
        assert [r for r in proxy.requests if r[2] != "/dir"] == [], proxy.requests
        os.mkdir(os.path.join(tmp, "b"))
        out, err2 = acme_try(os.path.join(tmp, "b"), url, pki + "/ca.pem", ["k.test"], secs=3,
                             profile="nosuch")
    assert "not an https:// URL (RFC 8555 6.1): refused" in err, err
    assert "the CA does not list the profile nosuch" in err2, err2


def alive(pid):
    """pid runs (a zombie, or gone: no)."""
    with contextlib.suppress(OSError):
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def try_closed_ca(state, live, secs, **env):
    """acme_try against a CA port where nothing listens: the client backs off."""
    e = dict(os.environ, **env)
    return subprocess.Popen([TRY, "https://127.0.0.1:%d/dir" % free_port(), "", state, live,
                             str(secs), "m.test"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=e)


@pytest.mark.skipif(os.geteuid() != 0, reason="-u's setuid needs root")
def test_the_client_dies_with_its_keeper_under_u(tmp_path):
    """Issue 54 (6): with -u the client drops to the user after it set
    PR_SET_PDEATHSIG, and the setuid cleared it: a keeper killed (SIGKILL)
    left the client running until its next wake-up.  It is set again after
    the setuid: the client ends with its keeper."""
    # the client drops to -u before it lays STATE out (gatling hands it STATE
    # at start, acme_setup.c; acme_try does not): a directory of the user's
    # that it can walk to (pytest's tmp_path sits below a 0700 directory)
    base = tempfile.mkdtemp(prefix="gatling-acme-u-")
    os.chmod(base, 0o755)
    os.chown(base, 65534, 65534)
    state = os.path.join(base, "state")
    p = try_closed_ca(state, os.path.join(base, "live"), 30, ACME_TRY_UID="65534")
    try:
        wait_for(lambda: os.path.exists(os.path.join(state, "challenges", "status")), 10,
                 "a first round")
        (keeper,) = children(p.pid)
        (client,) = children(keeper)
        with open("/proc/%d/status" % client) as f:
            assert re.search(r"^Uid:\s+65534\s", f.read(), re.M)
        os.kill(keeper, 9)
        wait_for(lambda: not alive(client), 3, "the client ended with its keeper")
    finally:
        p.kill()
        p.communicate()
        shutil.rmtree(base, ignore_errors=True)


def test_a_state_directory_made_anew_is_noticed(tmp_path, monkeypatch):
    """Issue 54 (6): the state directory removed and made again while the
    client runs (its descriptor then points at the removed one): the client
    says so and ends, and the keeper's next client lays the new one out."""
    state = str(tmp_path / "state")
    p = try_closed_ca(state, str(tmp_path / "live"), 20, GATLING_TEST_ACME_BACKOFF="1")
    try:
        wait_for(lambda: os.path.exists(os.path.join(state, "challenges", "status")), 10,
                 "a first round")
        # moved away, not rmtree'd: the client writes into it meanwhile, and a
        # removal raced its new files ("Directory not empty", a fresh clone's
        # check); either way the path then names another directory
        os.rename(state, state + ".old")
        os.mkdir(state)
        wait_for(lambda: os.path.exists(os.path.join(state, "challenges", "status")) and
                 os.path.isdir(os.path.join(state, "challenges", "http-01")), 10,
                 "the new state directory laid out and used")
    finally:
        p.terminate()
        out, err = p.communicate()
    assert "%s was removed or replaced: the ACME client starts again" % state in err, err


def test_ipv6_names_in_rfc5952_form(tmp_path):
    """Issue 54 (6): an IPv6 address given in another form than RFC 5952's
    (upper case, zeros written out) is the identifier, the file name and the
    status line in that form (RFC 8738; the serving side names TLS-ALPN-01's
    file by inet_ntop, which writes it so)."""
    state = str(tmp_path / "state")
    p = subprocess.Popen([TRY, "https://127.0.0.1:%d/dir" % free_port(), "", state,
                          str(tmp_path / "live"), "20", "2001:DB8:0:0:0:0:0:1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: os.path.exists(os.path.join(state, "challenges", "status")), 10,
                 "a first round")
    finally:
        p.terminate()
        out, err = p.communicate()
    assert re.search(r"^cert 2001:db8::1 0 ", status(str(tmp_path)), re.M), status(str(tmp_path))
    assert "acme: 2001:db8::1: " in err, err


def test_ari_retry_after_past_time_t_is_no_poll_a_second(tmp_path):
    """Issue 54 (5): renewalInfo answered 429 with Retry-After:
    99999999999999999999 (past a long): now + that overflowed time_t into
    the past, and the client asked renewalInfo once a second.  Read
    saturated and capped by a share of the certificate's time left, it asks
    once in the 8 s after its certificate."""
    tmp, pki, port = str(tmp_path), suite_pki(), free_port()
    with http01_responder(port, os.path.join(tmp, "state")), \
            pebble(tmp, pki, port, free_port()) as (url, mgmt, plog), \
            FaultProxy(pki, int(url.rsplit(":", 1)[1].split("/")[0])) as proxy:
        proxy.add(Fault("429", "/draft-ietf-acme-ari-03/renewalInfo/", times=1000,
                        retry_after="99999999999999999999"))
        out, err = acme_try(tmp, proxy.directory, pki + "/ca.pem", ["n.test"], secs=10,
                            challenge="http")
        check_installed(tmp, "n.test", mgmt_get(pki, mgmt, "/roots/0"))
        asked = proxy.seen("/draft-ietf-acme-ari-03/renewalInfo/")
    assert 1 <= len(asked) <= 2, (len(asked), err)
