"""--acme-on-demand's refusals without a CA (issue 67's coverage of
acme/acme_ondemand.c): a name the ask URL does not allow is never ordered,
so no Pebble is needed; the CA named is a closed port.  The ask endpoint is
a small HTTP server here.  What is proven, from the outside (the handshake
ends with an alert, the error log says why, /metrics counts): an ask URL
that answers 500 (refused for 60 s, the fault's time, not 600), one that
cannot be reached (curl's reason logged), one with a query of its own
(domain= appended with &), --acme-on-demand-rate's hour in all (1,1: the
second name is over it, never asked), and a refused name not asked again.
Runs in the plain HTTP pass (it starts its own HTTPS listener)."""
import contextlib
import http.server
import os
import re
import shutil
import subprocess
import threading

import pytest

from conftest import free_port, http_only, recv_to_eof, running_server, wait_for
from conftest import test_pki as suite_pki  # (not collected as a test by this name)

pytestmark = [http_only, pytest.mark.skipif(not shutil.which("openssl"),
                                            reason="needs openssl")]


class Ask:
    """The ask endpoint: status for every name; the paths asked, in asked."""

    def __init__(self, status):
        self.status, self.asked = status, []
        ask = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                ask.asked.append(self.path)
                self.send_response(ask.status)
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


def test_rate_an_hour_in_all(build, tmp_path):
    """--acme-on-demand-rate 1,1: the first name is asked (and refused),
    the second is over the hour's asks, refused without an ask."""
    ask = Ask(404)
    try:
        with site(build, tmp_path, ask.url, ["--acme-on-demand-rate", "1,1"]) as srv:
            handshake_fails(srv.https, "one.customer.test")
            logged(srv, r"one\.customer\.test .*answered 404")
            handshake_fails(srv.https, "two.customer.test")
            logged(srv, r"two\.customer\.test \(from 127\.0\.0\.1\): over "
                        r"--acme-on-demand-rate's asks an hour: refused")
            assert ask.asked == ["/ask?domain=one.customer.test"]
            assert metric(srv, "gatling_acme_ondemand_limited_total") == 1
    finally:
        ask.close()
