"""One response head for three protocols (issue 53: http/head.c walks the
fields once for HTTP/1.1, HTTP/2 and HTTP/3): the same request over
HTTP/1.1 (over TLS, as the other two), HTTP/2 and HTTP/3 to one server gets
the same status, the same body and the same header fields with the same
values -- the server's own (Server, Content-Type, Content-Length,
Last-Modified, HSTS) and the handler's (ETag, Vary, a CGI script's, a
proxied backend's) -- Date aside (each response has one), and but for what
one protocol carries by design: HTTP/1.1's Connection and Transfer-Encoding,
connection-specific fields HTTP/2 and HTTP/3 do not carry (RFC 9113 8.2.2,
RFC 9114 4.2), and Alt-Svc, which names HTTP/3 and is no news over it.
The requests: a static file, a HEAD of it, a precompressed sibling (Vary,
Content-Encoding), a 304 to If-None-Match, a 404, a
CGI script's answer with a field name of 60 characters (HTTP/2 and HTTP/3
once cut such a name to 47), a CGI 204 whose script gave a length, and a
proxied backend's answer and its HEAD.
It speaks all three itself: the plain pass runs it (run-check's
HTTPS_SKIP)."""
import gzip
import os

import pytest

import appservers
from conftest import (TLS, H1Client, H2Client, H3Client, Mode, client_tls_context,
                      https_port, skip_without_h3)
from conftest import test_pki as pki_dir

LONG = "X-" + "Long" * 14 + "-Name"  # 60 characters
SH = "#!/bin/sh\n"
TREE = {
    "f.txt": b"the same file over three protocols\n",
    "g.css": b"body { color: black }\n" * 20,
    "g.css.gz": gzip.compress(b"body { color: black }\n" * 20, mtime=0),
    ".proxy": "",
    "hello.sh": Mode(SH + "printf 'Content-Type: text/plain\\r\\nX-Cgi: yes\\r\\n"
                     "%s: long\\r\\n\\r\\nhello\\n'\n" % LONG, 0o755),
    "empty.sh": Mode(SH + "printf 'Status: 204\\r\\nContent-Length: 5\\r\\nX-Cgi: none\\r\\n"
                     "\\r\\n'\n", 0o755),
}
BACKEND = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 8\r\n"
           b"X-Backend: yes\r\nETag: \"b-1\"\r\nCache-Control: no-store\r\n"
           b"Connection: close\r\n\r\nbackend\n")
# what one protocol carries and the others do not, by design
H1_OWN = {"connection", "keep-alive", "transfer-encoding"}


def backend(conn):
    """A backend that answers every request with BACKEND (a HEAD with its head)."""
    conn.settimeout(10)
    with conn, conn.makefile("rb") as f:
        line = f.readline()
        while f.readline() not in (b"\r\n", b""):
            pass
        head = BACKEND.split(b"\r\n\r\n")[0] + b"\r\n\r\n"
        conn.sendall(head if line.startswith(b"HEAD ") else BACKEND)


@pytest.fixture
def three(gatling, build):
    """A server with HTTPS, HTTP/3, HSTS, CGI and a proxied path, and a client
    of each protocol on its HTTPS port."""
    skip_without_h3(build.binary)
    lst = appservers.serve(appservers.listener(), backend, threaded=True)
    try:
        srv = gatling(TREE, args=("-T", "10", "-C", os.path.join(pki_dir(), "certs"),
                                  "-e", "0", "-x", "600", "-w", r"\.sh$",
                                  "-P", "127.0.0.1/%d/^/app/" % lst.getsockname()[1]),
                      check_fds=False)
        port = https_port(srv)
        h1 = H1Client(port)
        if not TLS:  # H1Client speaks TLS in the https pass only
            h1.sock = client_tls_context(["http/1.1"]).wrap_socket(
                h1.sock, server_hostname="localhost")
        clients = {"h1": h1, "h2": H2Client(port), "h3": H3Client(port)}
        yield clients
        for c in clients.values():
            c.close()
    finally:
        lst.close()


def same(clients, target, method="GET", headers=None, status=None):
    """Send the request over each protocol; assert that the three answers
    agree (Date aside, and HTTP/1.1's own and Alt-Svc as said above).
    Returns HTTP/1.1's response."""
    got = {p: c.request(target, method=method, headers=headers) for p, c in clients.items()}
    fields = {}
    for p, r in got.items():
        names = [k.lower() for k, _ in r.headers]
        assert names.count("date") == 1, "%s: one Date\n%r" % (p, r)
        fields[p] = sorted((k.lower(), v) for k, v in r.headers
                           if k.lower() != "date" and not (p == "h1" and k.lower() in H1_OWN))
    assert not [v for k, v in fields["h3"] if k == "alt-svc"], got["h3"]
    h1 = got["h1"]
    if status:
        assert h1.status == status, h1
    for p in ("h2", "h3"):
        want = [kv for kv in fields["h1"] if p != "h3" or kv[0] != "alt-svc"]
        assert got[p].status == h1.status, (got[p], h1)
        assert fields[p] == want, "%s %s: %s's fields differ from HTTP/1.1's:\n%r\n%r" % (
            method, target, p, fields[p], want)
        assert got[p].body == h1.body, (p, got[p].body[:80], h1.body[:80])
    return h1


def test_static_file_head_304_and_404(three):
    r = same(three, "/f.txt", status=200)
    assert r.header("Alt-Svc"), r
    assert r.header("Strict-Transport-Security") == "max-age=600", r
    assert r.header("ETag") and r.header("Last-Modified"), r
    assert r.header("Content-Length") == str(len(TREE["f.txt"])), r
    h = same(three, "/f.txt", method="HEAD", status=200)
    assert h.header("Content-Length") == r.header("Content-Length") and h.body == b"", h
    n = same(three, "/f.txt", headers=[("If-None-Match", r.header("ETag"))], status=304)
    assert n.header("Content-Length") is None and n.header("ETag") == r.header("ETag"), n
    e = same(three, "/missing.txt", status=404)
    assert e.header("Content-Type").startswith("text/html") and e.body, e
    same(three, "/missing.txt", method="HEAD", status=404)


def test_precompressed_sibling(three):
    r = same(three, "/g.css", headers=[("Accept-Encoding", "gzip")], status=200)
    assert r.header("Content-Encoding") == "gzip" and r.header("Vary") == "Accept-Encoding", r
    assert r.body == TREE["g.css.gz"], r


def test_cgi(three):
    r = same(three, "/hello.sh", status=200)
    assert r.header(LONG) == "long" and r.header("X-Cgi") == "yes", r
    e = same(three, "/empty.sh", status=204)
    assert e.header("Content-Length") is None and e.header("X-Cgi") == "none", e


def test_proxied(three):
    r = same(three, "/app/x", status=200)
    assert r.header("X-Backend") == "yes" and r.body == b"backend\n", r
    h = same(three, "/app/x", method="HEAD", status=200)
    assert h.header("Content-Length") == "8" and h.body == b"", h
