"""HTTP behaviour of gatling against raw sockets, once per build.

Most tests share one server per build (the `srv` fixture); each test is
followed by a descriptor-leak check.  Tests that need their own flags start
their own server with the `gatling` factory fixture.
"""
import email.utils
import hashlib
import os
import re
import socket
import time
import urllib.parse

import pytest

from conftest import (http_only, h1_only, h3_bug, BIG, HTTP_VERSION, IMF_FIXDATE, MTIME, SECRET,
                      TEXT, Client, assert_ends_connection, assert_refused, assert_status,
                      build_request, fetch, norm_ctype, raw_exchange, random_bytes)

ALLOW = ["get", "head", "options"]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def assert_error_body(resp):
    """Error responses carry a small text/html body with a correct length."""
    assert norm_ctype(resp.header("Content-Type")).startswith("text/html"), resp
    assert resp.header("Content-Length") is not None, resp
    assert int(resp.header("Content-Length")) == len(resp.body) > 0, resp
    assert len(resp.body) < 4096, resp


# --------------------------------------------------------------------------
# GET and HEAD of regular files

def test_get_file(srv):
    r = fetch(srv.port, "/f.txt")
    assert_status(r, 200)
    assert r.body == TEXT
    assert r.version == HTTP_VERSION
    assert r.header("Content-Length") == str(len(TEXT))


def test_get_headers(srv):
    t0 = time.time()
    r = fetch(srv.port, "/f.txt")
    assert_status(r, 200)
    date = r.header("Date")
    assert date and IMF_FIXDATE.fullmatch(date), "Date not an IMF-fixdate: %r" % date
    when = email.utils.parsedate_to_datetime(date).timestamp()
    assert t0 - 2 <= when <= time.time() + 2, "Date %r is not now" % date
    assert r.header("Server"), "no Server header:\n%r" % r
    assert norm_ctype(r.header("Content-Type")) == "text/plain;charset=utf-8", r
    assert r.header("Last-Modified") == email.utils.formatdate(MTIME, usegmt=True), (
        "Last-Modified %r, file mtime is %s" % (r.header("Last-Modified"),
                                               email.utils.formatdate(MTIME, usegmt=True)))
    for name in ("Date", "Server", "Content-Type", "Content-Length", "Last-Modified"):
        assert len(r.header_all(name)) == 1, "%s appears %d times" % (name, len(r.header_all(name)))


@pytest.mark.parametrize("path,ctype", [
    ("/page.html", "text/html;charset=utf-8"),
    ("/f.txt", "text/plain;charset=utf-8"),
    ("/style.css", "text/css;charset=utf-8"),
    ("/img.png", "image/png"),
    ("/data.json", "application/json"),
    ("/noext", "application/octet-stream"),
    ("/blob.xyzzy", "application/octet-stream"),
])
def test_content_type(srv, path, ctype):
    r = fetch(srv.port, path)
    assert_status(r, 200, path)
    assert norm_ctype(r.header("Content-Type")) == ctype, "%s: %r" % (path, r)
    with open(os.path.join(srv.docroot, path[1:]), "rb") as f:
        assert r.body == f.read()


def test_empty_file(srv):
    r = fetch(srv.port, "/empty.txt")
    assert_status(r, 200)
    assert r.header("Content-Length") == "0" and r.body == b""


def test_head_same_headers_no_body(srv):
    with Client(srv.port) as c:
        g = c.request("/f.txt")
        h = c.request("/f.txt", method="HEAD")
        # if HEAD had sent a body, it would be parsed as the next status line
        g2 = c.request("/f.txt")
    assert_status(h, 200)
    assert g2.status == 200 and g2.body == TEXT, "bytes after HEAD response: %r" % g2
    for name in ("Content-Type", "Content-Length", "Last-Modified", "Server"):
        assert h.header(name) == g.header(name), "%s: GET %r, HEAD %r" % (
            name, g.header(name), h.header(name))
    assert h.header("Date")


def test_head_big_file_no_body(srv):
    with Client(srv.port) as c:
        h = c.request("/big.bin", method="HEAD")
        assert_status(h, 200)
        assert h.header("Content-Length") == str(len(BIG))
        r = c.request("/f.txt")
        assert r.status == 200 and r.body == TEXT, r


def test_big_file_identical(srv):
    r = fetch(srv.port, "/big.bin")
    assert_status(r, 200)
    assert r.header("Content-Length") == str(len(BIG))
    assert len(r.body) == len(BIG) and sha(r.body) == sha(BIG), "5 MiB body differs"


def test_big_file_twice_keepalive(srv):
    with Client(srv.port) as c:
        for _ in range(2):
            r = c.request("/big.bin")
            assert_status(r, 200)
            assert sha(r.body) == sha(BIG)


def test_root_serves_index(srv):
    r = fetch(srv.port, "/")
    assert_status(r, 200)
    assert b"root index" in r.body
    assert norm_ctype(r.header("Content-Type")).startswith("text/html")


# --------------------------------------------------------------------------
# Keep-alive and connection handling

def test_keepalive_http11(srv):
    with Client(srv.port) as c:
        r1 = c.request("/f.txt")
        assert_status(r1, 200)
        assert "close" not in r1.tokens("Connection"), r1
        c.assert_open(0.2)
        r2 = c.request("/page.html")
        assert_status(r2, 200)
        assert b"page" in r2.body


@h1_only("HTTP/1.0")
def test_http10_closes(srv):
    with Client(srv.port) as c:
        r = c.request("/f.txt", version="HTTP/1.0")
        assert_status(r, 200)
        assert r.body == TEXT
        assert "keep-alive" not in r.tokens("Connection"), r
        c.assert_closed(5, "after an HTTP/1.0 response without keep-alive")


@h1_only("HTTP/1.0")
def test_http10_without_host_ok(srv):
    r = raw_exchange(srv.port, b"GET /f.txt HTTP/1.0\r\n\r\n")
    assert_status(r, 200, "HTTP/1.0 needs no Host")
    assert r.body == TEXT


@h1_only("HTTP/1.0")
def test_http10_keepalive(srv):
    with Client(srv.port) as c:
        r = c.request("/f.txt", version="HTTP/1.0", headers=["Connection: keep-alive"])
        assert_status(r, 200)
        assert "keep-alive" in r.tokens("Connection"), "no Connection: keep-alive\n%r" % r
        c.assert_open(0.3)
        r2 = c.request("/page.html", version="HTTP/1.0", headers=["Connection: keep-alive"])
        assert_status(r2, 200)
        assert b"page" in r2.body


@h1_only("Connection: close")
def test_http11_connection_close(srv):
    with Client(srv.port) as c:
        r = c.request("/f.txt", headers=["Connection: close"])
        assert_status(r, 200)
        assert r.body == TEXT
        assert "close" in r.tokens("Connection"), "no Connection: close\n%r" % r
        c.assert_closed(5, "after Connection: close")
        assert c.buf == b"", "extra bytes after the response: %r" % c.buf


def test_keepalive_after_404(srv):
    with Client(srv.port) as c:
        r = c.request("/nope.txt")
        assert_status(r, 404)
        r2 = c.request("/f.txt")
        assert_status(r2, 200)
        assert r2.body == TEXT


def test_many_requests_one_connection(srv):
    with Client(srv.port) as c:
        for i in range(50):
            r = c.request("/f.txt" if i % 2 else "/data.json")
            assert_status(r, 200, "request %d" % i)


# --------------------------------------------------------------------------
# Pipelining

PIPE = [("GET", "/f.txt"), ("HEAD", "/page.html"), ("GET", "/missing"),
        ("GET", "/data.json"), ("GET", "/img.png"), ("GET", "/big.bin"), ("GET", "/dir/")]


def pipelined_bytes():
    return b"".join(build_request(t, m) for m, t in PIPE)


def check_pipelined(c, srv):
    for m, t in PIPE:
        r = c.read_response(m)
        if t == "/missing":
            assert_status(r, 404, t)
            continue
        assert_status(r, 200, "%s %s" % (m, t))
        with open(os.path.join(srv.docroot, t[1:] if t != "/dir/" else "dir/index.html"),
                  "rb") as f:
            data = f.read()
        if m == "HEAD":
            assert r.body == b"" and r.header("Content-Length") == str(len(data))
        else:
            assert sha(r.body) == sha(data), "%s %s: body differs" % (m, t)


def test_pipelined_one_write(srv):
    with Client(srv.port) as c:
        c.send(pipelined_bytes())
        check_pipelined(c, srv)
        c.assert_open(0.1)


@pytest.mark.parametrize("sizes", [(1,), (7,), (3, 11, 2, 29), (37, 1, 64)],
                         ids=["bytewise", "7", "mixed", "odd"])
def test_pipelined_split(srv, sizes):
    data = pipelined_bytes()
    if sizes == (1,):
        data = build_request("/f.txt") + build_request("/missing") + build_request("/f.txt")
    with Client(srv.port) as c:
        c.send_split(data, sizes, pause=0.002)
        if sizes == (1,):
            assert c.read_response().body == TEXT
            assert c.read_response().status == 404
            assert c.read_response().body == TEXT
        else:
            check_pipelined(c, srv)


def test_pipelined_many(srv):
    n = 100
    with Client(srv.port) as c:
        c.send(build_request("/f.txt") * n)
        for i in range(n):
            r = c.read_response()
            assert r.status == 200 and r.body == TEXT, "response %d: %r" % (i, r)


@h1_only("Connection: close")
def test_pipelined_then_close(srv):
    with Client(srv.port) as c:
        c.send(build_request("/f.txt") + build_request("/page.html", headers=["Connection: close"])
               + build_request("/data.json"))
        assert c.read_response().body == TEXT
        r = c.read_response()
        assert b"page" in r.body
        c.assert_closed(5, "after Connection: close in a pipeline")
        assert c.buf == b"", "answered a request after Connection: close: %r" % c.buf[:200]


# --------------------------------------------------------------------------
# Malformed requests

@h1_only("Host (HTTP/2 has :authority)")
def test_http11_without_host_400(srv):
    r = raw_exchange(srv.port, b"GET /f.txt HTTP/1.1\r\n\r\n")
    assert_status(r, 400, "HTTP/1.1 without Host")
    assert_error_body(r)


@pytest.mark.parametrize("line", [
    b"garbage",
    b"GET",
    b"GET /f.txt",
    b"GET /f.txt HTTP/1",
    b"GET /f.txt HTTP/1.",
    b"GET /f.txt HTTP/1.1.1",
    b"GET /f.txt HTTP/11",
    b"GET /f.txt HTTX/1.1",
    b"GET /f.txt http/1.1",
    b"GET /f.txt HTTP/a.b",
    b"GET /f.txt HTTP/1.10",
    b"GET  /f.txt HTTP/1.1",
    b"GET /f.txt  HTTP/1.1",
    b" GET /f.txt HTTP/1.1",
    b"GET /f.txt HTTP/1.1 ",
    b"GET /f.txt HTTP/1.1 extra",
    b"GET /a b.txt HTTP/1.1",
    b"GET /f.txt\x00 HTTP/1.1",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
], ids=lambda b: repr(b)[2:-1][:40])
@h1_only("the request line")
def test_malformed_request_line_400(srv, line):
    r = raw_exchange(srv.port, line + b"\r\nHost: x\r\n\r\n")
    assert_status(r, 400, "request line %r" % line)


@h1_only("the request line's version")
@pytest.mark.parametrize("version", [b"HTTP/2.0", b"HTTP/3.1", b"HTTP/2.2", b"HTTP/9.9"])
def test_unsupported_version_505(srv, version):
    r = raw_exchange(srv.port, b"GET /f.txt " + version + b"\r\nHost: x\r\n\r\n")
    assert_status(r, 505, version.decode())
    assert r.version == "HTTP/1.1", r


@h1_only("the HTTP/1.1 parser")
def test_header_without_colon_400(srv):
    r = raw_exchange(srv.port, b"GET /f.txt HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n")
    assert_status(r, 400)


@h1_only("the HTTP/1.1 parser")
def test_bare_lf_accepted(srv):
    with Client(srv.port) as c:
        c.send(b"GET /f.txt HTTP/1.1\nHost: x\nUser-Agent: lf\n\n")
        r = c.read_response()
        assert_status(r, 200, "bare LF line endings (RFC 9112 2.2)")
        assert r.body == TEXT
        c.send(b"GET /data.json HTTP/1.1\nHost: x\n\n")
        assert_status(c.read_response(), 200, "second bare-LF request")


@h1_only("the HTTP/1.1 parser")
def test_obs_fold_400(srv):
    r = raw_exchange(srv.port, b"GET /f.txt HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n  b\r\n\r\n")
    assert_status(r, 400, "obs-fold")


@h1_only("the HTTP/1.1 parser")
def test_obs_fold_first_header_400(srv):
    r = raw_exchange(srv.port, b"GET /f.txt HTTP/1.1\r\n Host: x\r\n\r\n")
    assert_status(r, 400, "whitespace before the first header line")


# libnghttp3 0.8 drops a regular field whose name or value has a NUL before
# h3.c sees it (NGHTTP3_ERR_REMOVE_HTTP_HEADER): the request is served without
# it, where RFC 9114 10.3 wants it malformed; 0.8 has no callback to say so
NGHTTP3_DROPS = h3_bug("libnghttp3 0.8 drops the field and the request is answered")


@pytest.mark.parametrize("req", [
    pytest.param(b"GET /f.txt HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n",
                 marks=NGHTTP3_DROPS),
    b"GET /f.txt HTTP/1.1\r\nHost: x\x00\r\n\r\n",
    pytest.param(b"GET /f.txt HTTP/1.1\r\nX\x00Y: 1\r\nHost: x\r\n\r\n",
                 marks=NGHTTP3_DROPS),
    b"GET /f\x00.txt HTTP/1.1\r\nHost: x\r\n\r\n",
], ids=["in-value", "in-host", "in-name", "in-target"])
def test_nul_byte_400(srv, req):
    r = raw_exchange(srv.port, req)
    assert_refused(r, 400, "NUL byte")


# --------------------------------------------------------------------------
# 404, 403, error bodies

def test_404(srv):
    r = fetch(srv.port, "/does-not-exist.html")
    assert_status(r, 404)
    assert_error_body(r)


def test_404_in_missing_dir(srv):
    assert_status(fetch(srv.port, "/nodir/x.txt"), 404)


def test_404_file_as_dir(srv):
    # f.txt is a file; "f.txt/x" is ENOTDIR, which is a "not found"
    assert_status(fetch(srv.port, "/f.txt/x"), 404)


def test_403_not_world_readable(srv):
    r = fetch(srv.port, "/private.txt")
    assert_status(r, 403, "mode 0600 file")
    assert b"not world-readable" not in r.body
    assert_error_body(r)


def test_head_404_no_body(srv):
    with Client(srv.port) as c:
        r = c.request("/nope", method="HEAD")
        assert_status(r, 404)
        r2 = c.request("/f.txt")
        assert r2.status == 200 and r2.body == TEXT, "HEAD 404 leaked a body: %r" % r2


def test_error_response_has_date_and_server(srv):
    r = fetch(srv.port, "/nope")
    assert r.header("Date") and IMF_FIXDATE.fullmatch(r.header("Date")), r
    assert r.header("Server"), r


# --------------------------------------------------------------------------
# Methods

def test_options(srv):
    with Client(srv.port) as c:
        r = c.request("/f.txt", method="OPTIONS")
        assert_status(r, (200, 204), "OPTIONS")
        assert sorted(r.tokens("Allow")) == ALLOW, "Allow: %r" % r.header_all("Allow")
        if r.status == 200:
            assert r.header("Content-Length") is not None, "200 without Content-Length: %r" % r
        # the connection stays usable
        assert c.request("/f.txt").body == TEXT


def test_options_asterisk(srv):
    r = raw_exchange(srv.port, b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_status(r, (200, 204), "OPTIONS * (RFC 9110 9.3.7)")
    assert sorted(r.tokens("Allow")) == ALLOW, r


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "TRACE"])
def test_method_not_allowed(srv, method):
    r = raw_exchange(srv.port, build_request("/f.txt", method))
    assert_status(r, 405, method)
    assert sorted(r.tokens("Allow")) == ALLOW, "Allow: %r" % r.header_all("Allow")
    assert_error_body(r)


def test_connect_405(srv):
    r = raw_exchange(srv.port, b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n")
    assert_status(r, 405, "CONNECT (authority-form target)")
    assert sorted(r.tokens("Allow")) == ALLOW, r


def test_post_body_not_taken_as_request(srv):
    # the body must be skipped (or the connection closed), never parsed as a request
    body = b"GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n"
    with Client(srv.port) as c:
        c.send(build_request("/f.txt", "POST", headers=["Content-Length: %d" % len(body)],
                             body=body) + build_request("/data.json"))
        assert_status(c.read_response(), 405)
        try:
            r = c.read_response()
        except ConnectionError:
            return  # closed after the 405: fine
        assert r.status == 200 and r.body == b'{"a": 1}\n', (
            "the POST body was answered as a request:\n%r" % r)


@pytest.mark.parametrize("method", ["FROB", "BREW", "GETX"])
def test_unknown_method_501(srv, method):
    r = raw_exchange(srv.port, build_request("/f.txt", method))
    assert_status(r, 501, method)
    assert_error_body(r)


def test_lowercase_get_is_unknown(srv):
    # methods are case-sensitive (RFC 9110 9.1): "get" is not GET
    r = raw_exchange(srv.port, build_request("/f.txt", "get"))
    assert_status(r, 501, "lower-case method")


# --------------------------------------------------------------------------
# Limits

def target_of(n):
    """A target of exactly n bytes, in short segments under a missing
    directory (so no file-system limit such as NAME_MAX comes into play)."""
    t = "/nx/" + "abcdefg/" * (n // 8)
    return t[:n - 1] + "z" if len(t) >= n else t + "z" * (n - len(t))


def test_target_4096_not_414(srv):
    r = raw_exchange(srv.port, build_request(target_of(4096)))
    assert_status(r, 404, "4096-byte target (limit is 'longer than 4096')")


def test_target_4097_414(srv):
    with Client(srv.port) as c:
        c.send(build_request(target_of(4097)))
        r = c.read_response()
        assert_status(r, 414)
        assert_error_body(r)
        assert_ends_connection(c, 5, "after 414")


def test_target_huge_414(srv):
    with Client(srv.port) as c:
        try:
            c.send(build_request(target_of(60000)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = c.read_response()
        # the request line alone is over the 16 KB head limit too, so 431 is right as well
        assert_status(r, (414, 431))
        assert_ends_connection(c, 5, "after 414")


def head_of(size, host=True):
    """A GET request head of about `size` bytes, in headers under 8 KB each."""
    base = build_request("/f.txt", headers=[])
    pad = size - len(base)
    hdrs, i = [], 0
    while pad > 0:
        n = min(pad, 8000)
        h = "X-Pad-%d: %s" % (i, "p" * max(1, n - len("X-Pad-%d: \r\n" % i)))
        hdrs.append(h)
        pad -= len(h) + 2
        i += 1
    return build_request("/f.txt", headers=hdrs)


def test_head_under_limit_ok(srv):
    req = head_of(15000)
    assert 14000 < len(req) < 16384
    r = raw_exchange(srv.port, req)
    assert_status(r, 200, "15 KB request head")


def test_head_too_large_431(srv):
    req = head_of(17000)
    assert len(req) > 16384
    with Client(srv.port) as c:
        c.send(req)
        r = c.read_response()
        assert_status(r, 431, "%d-byte request head" % len(req))
        assert_error_body(r)
        assert_ends_connection(c, 5, "after 431")


@h1_only("a request head that never ends")
def test_head_endless_431(srv):
    # headers that never end: the server must answer 431 without waiting for CRLFCRLF
    with Client(srv.port) as c:
        c.send(b"GET /f.txt HTTP/1.1\r\nHost: x\r\n")
        try:
            for i in range(40):
                c.send(b"X-Long-%d: %s\r\n" % (i, b"v" * 1000))
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = c.read_response()
        assert_status(r, 431)
        assert_ends_connection(c, 5, "after 431")


def fields(n):
    """A request with exactly n header fields (Host included)."""
    return build_request("/f.txt", headers=["X-F%d: %d" % (i, i) for i in range(n - 1)])


def test_100_header_fields_ok(srv):
    r = raw_exchange(srv.port, fields(100))
    assert_status(r, 200, "100 header fields")


def test_101_header_fields_431(srv):
    with Client(srv.port) as c:
        c.send(fields(101))
        r = c.read_response()
        assert_status(r, 431, "101 header fields")
        assert_ends_connection(c, 5, "after 431")


# --------------------------------------------------------------------------
# Path safety

def test_percent_decoding(srv):
    r = fetch(srv.port, "/a%20b.txt")
    assert_status(r, 200)
    assert r.body == b"file with a space\n"


def test_percent_decoding_mixed_case(srv):
    r = fetch(srv.port, "/%66%2E%74xt")  # "/f.txt"
    assert_status(r, 200)
    assert r.body == TEXT


def test_encoded_question_mark_is_part_of_name(srv):
    r = fetch(srv.port, "/q%3F.txt")
    assert_status(r, 200, "%3F decodes to a name character, not a query")
    assert r.body == b"file with a question mark\n"


@pytest.mark.parametrize("target", ["/f.txt%00", "/%00f.txt", "/f%00.txt.html", "/dir%00/",
                                    "/f.txt%00?x=1"])
def test_percent_nul_400(srv, target):
    assert_status(fetch(srv.port, target), 400, target)


@pytest.mark.parametrize("target", ["/%", "/%2", "/%zz.txt", "/f%g1.txt"])
def test_bad_percent_escape_400(srv, target):
    # RFC 3986 pct-encoded = "%" HEXDIG HEXDIG; anything else is a bad request
    assert_status(fetch(srv.port, target), 400, target)


TRAVERSALS = [
    "/../secret.txt",
    "/../../../../../../etc/passwd",
    "/%2e%2e/secret.txt",
    "/%2E%2E/secret.txt",
    "/%2E%2E%2Fsecret.txt",
    "/%2E%2E%2F../secret.txt",
    "/..%2fsecret.txt",
    "/..%2Fsecret.txt",
    "/.%2e/secret.txt",
    "/%2e./secret.txt",
    "/x/../../secret.txt",
    "/x/../../etc/passwd",
    "/dir/../../secret.txt",
    "/dir/%2e%2e/%2e%2e/secret.txt",
    "/./../secret.txt",
    "/dir/./../../secret.txt",
    "//etc/passwd",
    "///etc/passwd",
    "/..",
    "/../",
    "/%2e%2e",
    "/..\\secret.txt",
    "/%2e%2e%5csecret.txt",
    "/dir/..%2f..%2fsecret.txt",
    "/%252e%252e/secret.txt",
    "/../outside/secret.txt",
]


@pytest.mark.parametrize("target", TRAVERSALS)
def test_traversal_stays_in_docroot(srv, target):
    r = fetch(srv.port, target)
    # RFC 3986 5.2.4 clamps ".." at the root: "/.." and "/../" may become "/"
    to_root = target in ("/..", "/../", "/%2e%2e")
    assert r.status in (400, 403, 404) or (to_root and (
        r.status in (301, 308) or (r.status == 200 and b"root index" in r.body))), (
        "%s: expected 400/403/404, got\n%r%r" % (target, r, r.body[:200]))
    assert SECRET not in r.body and b"root:x:0:0" not in r.body, (
        "%s leaked a file from outside the docroot!" % target)


def test_traversal_raw_in_pipeline(srv):
    # same, with the server's parser fed the dots byte by byte
    with Client(srv.port) as c:
        c.send_split(build_request("/../secret.txt"), (1,), pause=0.001)
        r = c.read_response()
    assert r.status in (400, 403, 404), r
    assert SECRET not in r.body


def test_symlink_inside_served(srv):
    r = fetch(srv.port, "/link_ok.txt")
    assert_status(r, 200, "symlink to a file in the docroot")
    assert r.body == TEXT


def test_symlink_relative_up_inside_served(srv):
    r = fetch(srv.port, "/dir/link_up.txt")
    assert_status(r, 200, "dir/link_up.txt -> ../f.txt (still inside)")
    assert r.body == TEXT


@pytest.mark.parametrize("target", ["/link_passwd", "/link_secret.txt",
                                    "/link_outdir/secret.txt"])
def test_symlink_outside_403(srv, target):
    r = fetch(srv.port, target)
    assert SECRET not in r.body and b"root:x:0:0" not in r.body, "%s leaked" % target
    assert_status(r, 403, "symlink leading outside the docroot")


def test_symlink_outside_head_403(srv):
    r = raw_exchange(srv.port, build_request("/link_secret.txt", "HEAD"), method="HEAD")
    assert_status(r, 403)
    assert r.header("Content-Length") != str(len(SECRET)), "HEAD reveals the secret's size"


@pytest.mark.parametrize("target", ["/f.txt?x=1", "/f.txt?", "/f.txt?a=b&c=/../secret.txt",
                                    "/f.txt?%00"])
def test_query_ignored(srv, target):
    r = fetch(srv.port, target)
    assert_status(r, 200, target)
    assert r.body == TEXT


# --------------------------------------------------------------------------
# Directories

def test_dir_slash_serves_index(srv):
    r = fetch(srv.port, "/dir/")
    assert_status(r, 200)
    assert r.body == b"<html>dir index</html>\n"
    assert norm_ctype(r.header("Content-Type")) == "text/html;charset=utf-8"


def test_nested_dir_index(srv):
    r = fetch(srv.port, "/dir/sub/")
    assert_status(r, 200)
    assert r.body == b"<html>sub index</html>\n"


def check_location(r, want_path, want_query=""):
    loc = r.header("Location")
    assert loc, "no Location header:\n%r" % r
    u = urllib.parse.urlsplit(loc)
    if u.scheme or u.netloc:  # RFC 9110 10.2.2 allows an absolute URI too
        assert u.scheme == "http", loc
    assert u.path == want_path and u.query == want_query, (
        "Location %r, want path %r query %r" % (loc, want_path, want_query))


@pytest.mark.parametrize("target,path", [("/dir", "/dir/"), ("/dir/sub", "/dir/sub/"),
                                         ("/noindex", "/noindex/")])
def test_dir_without_slash_301(srv, target, path):
    with Client(srv.port) as c:
        r = c.request(target)
        assert_status(r, 301, target)
        check_location(r, path)
        assert r.header("Content-Length") is not None and int(
            r.header("Content-Length")) == len(r.body), r
        assert c.request("/f.txt").body == TEXT, "connection unusable after 301"


def test_dir_redirect_keeps_query(srv):
    r = fetch(srv.port, "/dir?a=b")
    assert_status(r, 301)
    check_location(r, "/dir/", "a=b")


def test_dir_redirect_keeps_encoding(srv):
    r = fetch(srv.port, "/my%20dir")
    assert_status(r, 301)
    loc = r.header("Location") or ""
    assert " " not in loc, "Location must stay percent-encoded: %r" % loc
    check_location(r, "/my%20dir/")
    r2 = fetch(srv.port, urllib.parse.urlsplit(loc).path)
    assert_status(r2, 200)
    assert b"my dir index" in r2.body


def test_dir_without_index_403(srv):
    r = fetch(srv.port, "/noindex/")
    assert_status(r, 403, "directory without index.html (no listings yet)")
    assert b"x.txt" not in r.body, "looks like a directory listing"


def test_file_in_dir(srv):
    r = fetch(srv.port, "/dir/f.txt")
    assert_status(r, 200)
    assert r.body == b"in dir\n"


def test_file_with_trailing_slash(srv):
    r = fetch(srv.port, "/f.txt/")
    assert r.status in (404, 400, 403), "a file with a trailing slash: %r" % r


# --------------------------------------------------------------------------
# Junk and abuse: the server survives and keeps serving

def still_serving(srv):
    srv.check_alive()
    r = fetch(srv.port, "/f.txt")
    assert r.status == 200 and r.body == TEXT, "server no longer serves after abuse: %r" % r


@h1_only("bytes that are no request")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bytes(srv, seed):
    data = random_bytes(20000, seed)
    with Client(srv.port, timeout=3) as c:
        try:
            c.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            r = c.read_response()
            assert r.status in (400, 414, 431, 501, 505), "answer to random bytes: %r" % r
        except ConnectionError:
            pass
    still_serving(srv)


@h1_only("bytes that are no request")
def test_random_bytes_after_request_line(srv):
    with Client(srv.port, timeout=3) as c:
        try:
            c.send(b"GET /f.txt HTTP/1.1\r\n" + random_bytes(5000, 9) + b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            r = c.read_response()
            assert r.status in (400, 431), r
        except ConnectionError:
            pass
    still_serving(srv)


@h1_only("bytes that are no request")
def test_100k_spaces(srv):
    with Client(srv.port, timeout=3) as c:
        try:
            c.send(b" " * 100000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            r = c.read_response()
            assert r.status in (400, 414, 431), r
            c.assert_closed(5, "after 100 KB of spaces")
        except ConnectionError:
            pass
    still_serving(srv)


@h1_only("bytes that are no request")
def test_100k_crlf(srv):
    # RFC 9112 2.2 allows ignoring a few leading empty lines; 100 KB of them is abuse
    with Client(srv.port, timeout=3) as c:
        try:
            c.send(b"\r\n" * 50000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        c.closed_within(0.3)
    still_serving(srv)


@h1_only("a partial request head")
def test_half_request_then_close(srv):
    for cut in (1, 10, 25):
        c = Client(srv.port)
        c.send(build_request("/big.bin")[:cut])
        c.close()
    c = Client(srv.port)
    c.send(b"GET /f.txt HTTP/1.1\r\nHos")
    c.sock.shutdown(socket.SHUT_WR)
    c.closed_within(1)
    c.close()
    still_serving(srv)


def test_200_connections_at_once(srv):
    socks = [socket.create_connection(srv.addr(), timeout=3) for _ in range(200)]
    for s in socks:
        s.close()
    time.sleep(0.1)
    still_serving(srv)


def test_200_concurrent_requests(gatling):
    # a server of its own with -T 60: over HTTP/3 each client is a QUIC
    # handshake in Python, and on a busy machine the 200 took more than the
    # module server's -T 10, its idle timeout, so the first connections were
    # closed (NO_ERROR) before the loop below read them; and -s 60: the first
    # connection's request goes only when the 200th is up, and a connection
    # with no request head -s seconds after its handshake is closed as a
    # slowloris (H3_NO_ERROR: make check's h3 pass at a load of 20 saw it)
    srv = gatling({"f.txt": TEXT}, args=("-T", "60", "-s", "60"))
    clients = [Client(srv.port) for _ in range(200)]
    for c in clients:
        c.send(build_request("/f.txt"))
    for i, c in enumerate(clients):
        r = c.read_response()
        assert r.status == 200 and r.body == TEXT, "client %d: %r" % (i, r)
    for c in clients:
        c.close()
    still_serving(srv)


def test_client_vanishes_mid_transfer(srv):
    for how in ("close", "reset"):
        c = Client(srv.port, rcvbuf=4096)
        c.send(build_request("/big.bin"))
        c.sock.recv(1000)
        time.sleep(0.05)
        c.reset() if how == "reset" else c.close()
    still_serving(srv)


@http_only
def test_request_sent_then_shutdown_wr(srv):
    # a client may half-close after sending its request; the answer still comes
    with Client(srv.port) as c:
        c.send(build_request("/f.txt", headers=["Connection: close"]))
        c.sock.shutdown(socket.SHUT_WR)
        r = c.read_response()
        assert_status(r, 200, "request followed by FIN")
        assert r.body == TEXT


def test_status_pages_routed_before_files(gatling):
    """-S's /server-status and /metrics are handlers of the router's table
    ahead of the files: a file of that name is not served while -S is on,
    and is without it; only GET and HEAD reach them (POST: 405, as for a
    file); HEAD /metrics has the page's head without its body."""
    tree = {"server-status": b"a file\n", "metrics": b"another\n"}
    srv = gatling(tree, args=("-T", "10", "-S"))
    r = fetch(srv.port, "/server-status")
    assert_status(r, 200)
    assert b"<title>gatling status</title>" in r.body, r.body[:200]
    m = fetch(srv.port, "/metrics")
    assert_status(m, 200)
    assert b"# TYPE" in m.body, m.body[:200]
    h = fetch(srv.port, "/metrics", method="HEAD")
    assert_status(h, 200)
    assert h.body == b"" and h.header("Content-Type") == m.header("Content-Type"), h
    p = fetch(srv.port, "/server-status", method="POST", body=b"x")
    assert_status(p, 405)
    off = gatling(tree, args=("-T", "10"))
    assert fetch(off.port, "/server-status").body == b"a file\n"
    assert fetch(off.port, "/metrics").body == b"another\n"
