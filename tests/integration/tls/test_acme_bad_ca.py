"""gatling --acme against a CA that answers wrong (issue 67's coverage of
acme/acme_proto.c): a small HTTPS server here plays the CA (the suite's
throwaway PKI: --acme-ca-root trusts it), answering each step of RFC 8555's
order from a script, one thing wrong per test.  The ACME client must say
what went wrong at which step, in the error log, and gatling go on serving:
a directory that is no JSON or lacks its URLs, or an HTTP error with a
problem document; newNonce without a Replay-Nonce; newAccount without a
Location; an order without a Location; an authorization that is not one,
is invalid, or offers only dns-01 without --acme-dns-*.  No real CA is
needed: the client's requests are not checked, only answered.
Runs in the plain HTTP pass (it starts its own HTTPS listener)."""
import http.server
import json
import os
import re
import shutil
import ssl
import threading

import pytest

from conftest import free_port, http_only, running_server, wait_for, fetch
from conftest import test_pki as suite_pki  # (not collected as a test by this name)

pytestmark = [http_only, pytest.mark.skipif(not shutil.which("openssl"),
                                            reason="needs openssl")]

NAME = "www.gatling.test"


class FakeCA:
    """An HTTPS server on localhost; the steps answered from `script`:
    {"dir": ..., "nonce": ..., "acct": ..., "order": ..., "authz": ...},
    each (status, headers, body) or None for the good answer."""

    def __init__(self, script):
        self.script, self.asked, self.done = script, [], set()
        self.lock = threading.Lock()
        ca = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                step = self.path.strip("/")
                ca.asked.append((self.command, step))
                with ca.lock:
                    got = ca.script.get(step)
                    got = got(ca) if callable(got) else got
                    status, hdrs, body = got or ca.good(step)
                    ca.done.add(step)
                self.send_response(status)
                hdrs = dict({"Replay-Nonce": "n%d" % len(ca.asked)}, **hdrs)
                for k, v in hdrs.items():
                    if v is not None:
                        self.send_header(k, v)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_HEAD = answer

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(suite_pki(), "certs", "server.pem"))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.base = "https://localhost:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def good(self, step):
        b = self.base
        if step == "dir":
            return 200, {}, {"newNonce": b + "/nonce", "newAccount": b + "/acct",
                             "newOrder": b + "/order"}
        if step == "nonce":
            return 200, {}, b""
        if step == "acct":
            return 201, {"Location": b + "/acct/1"}, {"status": "valid"}
        if step == "order":
            return 201, {"Location": b + "/order/1"}, {
                "status": "pending", "identifiers": [{"type": "dns", "value": NAME}],
                "authorizations": [b + "/authz/1"], "finalize": b + "/fin/1"}
        if step == "authz/1":  # pending until its challenge is posted
            return 200, {"Retry-After": "0"}, self.authz("valid" if "chal/1" in self.done
                                                       else "pending")
        if step == "chal/1":
            return 200, {}, dict(self.authz("pending")["challenges"][0], status="processing")
        if step == "order/1":  # ready; valid once finalized
            return 200, {"Retry-After": "0"}, self.order(
                "valid" if "fin/1" in self.done else "ready")
        if step == "fin/1":
            return 200, {"Retry-After": "0"}, self.order("processing")
        if step == "cert/1":  # a chain, but of the suite's server key: not the key sent
            with open(os.path.join(suite_pki(), "certs", "server.pem")) as f:
                return 200, {"Content-Type": "application/pem-certificate-chain"}, \
                    f.read().encode()
        return 404, {"Content-Type": "application/problem+json"}, {
            "type": "urn:ietf:params:acme:error:malformed", "detail": "not here"}

    def authz(self, status, error=None):
        """An authorization; error: its challenge's (RFC 8555 8: the challenge says why)."""
        chal = {"type": "http-01", "url": self.base + "/chal/1", "token": "T" * 43,
                "status": "invalid" if error else "pending"}
        if error:
            chal["error"] = error
        return {"status": status, "identifier": {"type": "dns", "value": NAME},
                "challenges": [chal]}

    def order(self, status, **more):
        o = {"status": status, "identifiers": [{"type": "dns", "value": NAME}],
             "authorizations": [self.base + "/authz/1"], "finalize": self.base + "/fin/1"}
        if status == "valid":
            o["certificate"] = self.base + "/cert/1"
        return dict(o, **more)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def run_against(build, tmp_path, script, says, extra=()):
    """gatling --acme for NAME against a FakeCA(script): the error log line
    matching says, while gatling serves HTTP on."""
    ca = FakeCA(script)
    root, certs, state = (str(tmp_path / d) for d in ("www", "certs", "acme"))
    for d in (root, certs):
        os.makedirs(d)
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("hi\n")
    args = ["-p", "0", "-e", str(free_port()), "-C", certs, "-S", "--acme", "ops@gatling.test",
            "--acme-ca", ca.base + "/dir", "--acme-ca-root", suite_pki() + "/ca.pem",
            "--acme-dir", state, "--acme-names", NAME] + list(extra)
    try:
        with running_server(build, root, args, env={"GATLING_TEST_ACME_BACKOFF": "60"},
                            check_fds=False) as srv:
            wait_for(lambda: any(re.search(says, l) for l in srv.errlog), 30,
                     "%r in the error log: %r (asked: %r)" % (says, srv.errlog, ca.asked))
            assert fetch(srv.port, "/index.html").status == 200
            return ca
    finally:
        ca.close()


PROBLEM = {"Content-Type": "application/problem+json"}


@pytest.mark.parametrize("script, says", [
    ({"dir": (200, {}, b"<html>not json</html>")},
     r"directory https://localhost:\d+/dir: not an ACME directory"),
    ({"dir": (200, {}, {"newNonce": "https://localhost:1/n"})}, r"not an ACME directory"),
    ({"dir": (503, dict(PROBLEM, **{"Retry-After": "120"}),
              {"type": "urn:ietf:params:acme:error:serverInternal", "detail": "down today"})},
     r"directory: HTTP 503: urn:ietf:params:acme:error:serverInternal: down today "
     r"\(failure 1, next attempt in 120 s\)"),  # its Retry-After
    ({"dir": (302, {"Location": "https://elsewhere.test/"}, b"")},
     r"directory: HTTP 302: a redirect to https://elsewhere.test/, not followed"),
    ({"nonce": (200, {"Replay-Nonce": None}, b"")}, r"newNonce: HTTP 200 without a Replay-Nonce"),
    ({"nonce": (500, {}, b"")}, r"newNonce: HTTP 500 \(no problem document\)"),
    ({"acct": (201, {}, {"status": "valid"})}, r"newAccount: HTTP 201 without a Location"),
    ({"acct": (400, PROBLEM, {"type": "urn:ietf:params:acme:error:invalidContact",
                              "detail": "no such domain"})},
     r"newAccount: HTTP 400: urn:ietf:params:acme:error:invalidContact: no such domain"),
    ({"order": (201, {}, {"status": "pending"})},
     r"newOrder: HTTP 201 without an order or its Location"),
    ({"authz/1": (200, {}, [1, 2])}, r"authorization https://localhost:\d+/authz/1: not an "
                                   r"authorization object"),
    ({"authz/1": (200, {}, {"status": "invalid", "identifier": {"type": "dns", "value": NAME},
                          "challenges": []})}, NAME + r": authorization is invalid"),
    ({"authz/1": (200, {}, {"status": "pending", "identifier": {"type": "dns", "value": NAME},
                          "challenges": [{"type": "dns-01", "url": "https://localhost:1/c",
                                          "token": "t" * 43, "status": "pending"}]})},
     NAME + r": no challenge offered that may be answered"),
], ids=["dir-not-json", "dir-no-urls", "dir-503", "dir-redirect", "no-replay-nonce",
        "nonce-500", "account-no-location", "account-problem", "order-no-location",
        "authz-not-object", "authz-invalid", "authz-dns-only"])
def test_bad_answer_named(build, tmp_path, script, says):
    run_against(build, tmp_path, script, says)


def order_after_finalize(**o):
    """order/1's answer once finalized: o (before it: ready)."""
    return lambda ca: (200, {}, ca.order(**o) if "fin/1" in ca.done else ca.order("ready"))


@pytest.mark.parametrize("script, says", [
    ({}, NAME + r": the certificate is not for the key sent"),
    ({"cert/1": (200, {}, b"no PEM here")},
     r"certificate https://localhost:\d+/cert/1: no PEM chain in the answer"),
    ({"fin/1": (200, {}, b"[]")}, NAME + r": finalize: not an order object"),
    ({"order/1": order_after_finalize(status="valid", certificate="")},
     NAME + r": order valid without a certificate"),
    ({"order/1": order_after_finalize(status="invalid", error={
        "type": "urn:ietf:params:acme:error:badCSR", "detail": "the CSR is odd"})},
     NAME + r": order invalid: .*the CSR is odd"),
    ({"order/1": lambda ca: (200, {}, ca.order("valid", certificate="x"))},
     NAME + r": order is valid, not ready, after its authorizations"),
    ({"authz/1": lambda ca: (200, {}, ca.authz("invalid", {
        "type": "urn:ietf:params:acme:error:unauthorized", "detail": "got 404 for the token"})
        if "chal/1" in ca.done else ca.authz("pending"))},
     NAME + r": authorization invalid: .*got 404 for the token"),
    ({"chal/1": (400, PROBLEM, {"type": "urn:ietf:params:acme:error:malformed",
                                "detail": "no such challenge"})},
     r"challenge: HTTP 400: urn:ietf:params:acme:error:malformed: no such challenge"),
], ids=["cert-not-for-key", "cert-not-pem", "finalize-not-object", "valid-no-certificate",
        "order-invalid", "order-not-ready", "authz-invalid-after-challenge", "challenge-400"])
def test_bad_answer_late_in_the_order(build, tmp_path, script, says):
    """The steps after the authorization's challenge: each wrong answer
    named, after the client answered the challenge (its token file served
    over HTTP while the CA looked, removed after)."""
    ca = run_against(build, tmp_path, script, says)
    assert ("POST", "chal/1") in ca.asked or "chal/1" in script


def test_profile_the_ca_does_not_list(build, tmp_path):
    """--acme-profile that the directory's meta.profiles does not list: said
    once (the order then goes without one)."""
    def directory(ca):
        b = ca.base
        return 200, {}, {"newNonce": b + "/nonce", "newAccount": b + "/acct",
                         "newOrder": b + "/order",
                         "meta": {"profiles": {"classic": "the usual", "shortlived": "days"}}}
    run_against(build, tmp_path, {"dir": directory},
                r"the CA does not list the profile tlsserver \(2 listed\): orders go "
                r"without one", ["--acme-profile", "tlsserver"])
