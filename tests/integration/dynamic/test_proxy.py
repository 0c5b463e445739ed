"""Reverse proxying (-P) to real backends: gunicorn (Debian) running a WSGI
application this module writes, php-fpm (Debian) on a unix socket, a small
SCGI server written here, and raw sockets for the failures (a refused port, a
port that accepts and never answers, a backend that closes mid-response).
Runs in the http, https and h2 passes: the client's side is plain HTTP.

What is proven: GET and POST (Content-Length and chunked bodies) through the
proxy, chunked and large responses re-framed, keep-alive reuse of backend
connections (the application reports the client port of the connection it
was asked on: many requests, few distinct ports), X-Forwarded-*/Forwarded
seen by the application and hop-by-hop fields not, 502 and 504, the .proxy
file, WebSocket through the tunnel (h1 only), FastCGI and SCGI environments,
bodies (one without a length read whole first, 413 over 1 MiB) and large
outputs, FastCGI stderr in the error log and not to the
client, the /server-status counters, and no descriptor left behind.
A raw HTTP backend (path_backend) answers with every framing (BACKEND_ANSWERS:
1xx first, chunked with extensions and trailers, to the close, lengths repeated,
contradicting or not numbers, obs-fold, bare LF), a malformed chunked body, a HEAD
with a body; and shows the request as it came (origin-form, chunked, no host).
A fake FastCGI application (FCGI_ANSWERS) sends what php-fpm does not: a head
over several records, padding, records of another request and of other
types, an empty STDERR, a non-zero exit status, END_REQUEST before a head, a
malformed head, a 1xx, a bad record version, a close before the head and in
the body, silence past -Q.
"""
import asyncio
import contextlib
import os
import random
import signal
import socket
import string
import struct
import subprocess
import threading
import time

import pytest

import appservers
from appservers import stop
from conftest import (H2, H3, LOG_VERSION, MUX, TLS, Client, ServerHang, build_request,
                      client_tls_context, curl_version_args, cut_short, fetch, free_port, h1_only,
                      http_only, import_h2, no_h3_client, plain_bound, recv_to_eof, url,
                      wait_for)

APP = r'''
import os, time

def application(environ, start_response):
    path = environ["PATH_INFO"]
    ctype = [("Content-Type", "text/plain")]
    if path == "/app/port":
        body = environ.get("REMOTE_PORT", "").encode()
    elif path == "/app/echo":
        body = environ["wsgi.input"].read()
    elif path == "/app/headers":
        body = "\n".join("%s=%s" % (k, v) for k, v in sorted(environ.items())
                         if k.startswith("HTTP_")).encode()
    elif path == "/app/chunked":
        start_response("200 OK", ctype)
        return iter([b"a" * 1000, b"b" * 1000, b"c"])
    elif path == "/app/big":
        n = 4 << 20
        start_response("200 OK", ctype + [("Content-Length", str(n))])
        return iter([bytes([i % 251]) * 65536 for i in range(n // 65536)])
    elif path == "/app/huge":
        n = 32 << 20
        start_response("200 OK", ctype + [("Content-Length", str(n))])
        return iter([b"h" * 65536] * (n // 65536))
    elif path == "/app/count":
        time.sleep(0.5)
        n, inp = 0, environ["wsgi.input"]
        while True:
            k = len(inp.read(65536))
            if not k:
                break
            n += k
        body = str(n).encode()
    elif path == "/app/slow":
        time.sleep(4)
        body = b"late"
    elif path == "/app/status":
        start_response("201 Created", ctype + [("Location", "/app/x"), ("Content-Length", "2")])
        return [b"ok"]
    else:
        body = b"hello " + path.encode()
    start_response("200 OK", ctype + [("Content-Length", str(len(body))), ("X-App", "1")])
    return [body]
'''

PHP_ENV = r'''<?php
header("Content-Type: text/plain");
header("X-Php: 1");
foreach (["SCRIPT_NAME", "SCRIPT_FILENAME", "REQUEST_METHOD", "QUERY_STRING", "REMOTE_ADDR",
          "HTTPS", "HTTP_X_TEST", "CONTENT_LENGTH", "SERVER_PROTOCOL"] as $k)
    echo "$k=", $_SERVER[$k] ?? "", "\n";
error_log("php-stderr-marker");
echo "body=", file_get_contents("php://input");
'''

PHP_BIG = r'''<?php
header("Content-Type: application/octet-stream");
for ($i = 0; $i < 64; $i++) echo str_repeat(chr(65 + $i % 26), 32768);
'''

PHP_SLEEP = r'''<?php
usleep(300000);
echo "slept";
'''

PHP_STATUS = r'''<?php
http_response_code(404);
echo "not here";
'''


def import_websockets():
    """Debian's python3-websockets, also when the suite runs under another python3."""
    import sys
    try:
        import websockets
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            import websockets
        except ImportError:
            pytest.fail("python3-websockets is not installed: run sh tests/setup.sh as root")
    return websockets


@pytest.fixture(scope="module")
def gunicorn(tmp_path_factory):
    d = tmp_path_factory.mktemp("wsgi")
    (d / "app.py").write_text(APP)
    port = free_port()
    proc = appservers.gunicorn(d, port)
    try:
        yield port
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def php_fpm(tmp_path_factory):
    d = tmp_path_factory.mktemp("fpm")
    proc = appservers.php_fpm(d)
    try:
        yield str(d / "fpm.sock")
    finally:
        stop(proc)


def scgi_serve(conn):
    """One SCGI request: the netstring of headers, the body, a CGI response."""
    with conn:
        data = b""
        while b":" not in data:
            data += conn.recv(4096)
        n, rest = data.split(b":", 1)
        n = int(n)
        while len(rest) < n + 1:
            rest += conn.recv(65536)
        items = rest[:n].split(b"\0")
        env = dict(zip(items[0::2], items[1::2]))
        body = rest[n + 1:]
        want = int(env[b"CONTENT_LENGTH"])
        while len(body) < want:
            body += conn.recv(65536)
        first = items[0].decode()
        out = ["first=" + first] + ["%s=%s" % (k.decode(), env.get(k, b"").decode()) for k in
                                    (b"SCGI", b"REQUEST_METHOD", b"SCRIPT_NAME", b"QUERY_STRING",
                                     b"HTTP_X_TEST")]
        big = b"S" * (1 << 20) if env.get(b"QUERY_STRING") == b"big" else b""
        conn.sendall(b"Status: 202 Accepted\r\nContent-Type: text/plain\r\nX-Scgi: 1\r\n\r\n" +
                     "\n".join(out).encode() + b"\nbody=" + body + big)


@pytest.fixture(scope="module")
def scgi_server():
    lst = appservers.serve(appservers.listener(), scgi_serve, threaded=True)
    yield lst.getsockname()[1]
    lst.close()


def proxied(gatling, rules, extra=(), tree=None):
    """A gatling whose document root holds .proxy, with these -P rules."""
    args = ["-T", "10", "-S"]
    for r in rules:
        args += ["-P", r]
    t = {".proxy": "", "index.html": "static\n"}
    t.update(tree or {})
    return gatling(t, args=tuple(args) + tuple(extra), check_fds=False)


def status_counters(srv):
    import json
    r = fetch(srv.port, "/server-status?json")
    assert r.status == 200, r
    return json.loads(r.body)


def test_get_post_and_static(gatling, gunicorn):
    srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % gunicorn])
    r = fetch(srv.port, "/app/hello")
    assert r.status == 200, r
    assert r.body == b"hello /app/hello"
    assert r.header("X-App") == "1"
    assert r.header("Content-Type") == "text/plain"
    assert r.header("Server").startswith("gatling"), r
    log = srv.wait_log(1)
    assert '"GET /app/hello %s" 200 16 ' % LOG_VERSION in log[0], log
    assert fetch(srv.port, "/index.html").body == b"static\n", "no rule: the file"
    body = os.urandom(300000)
    r = fetch(srv.port, "/app/echo", method="POST", body=body,
              headers=[("Content-Length", str(len(body)))])
    assert r.status == 200 and r.body == body, r
    r = fetch(srv.port, "/app/status")
    assert r.status == 201 and r.header("Location") == "/app/x" and r.body == b"ok", r
    r = fetch(srv.port, "/app/hello", method="HEAD")
    assert r.status == 200 and r.body == b"", r


def test_acme_challenge_ahead_of_a_catch_all_rule(gatling, gunicorn):
    # certbot --webroot behind a proxy for everything: its token comes from
    # the docroot (no .proxy regex can leave a path out); the rest of
    # /.well-known/ and a missing token go where the rule sends them
    tree = {".well-known": {"acme-challenge": {"tok": "tok.thumb"}, "x.txt": "disk\n"}}
    srv = proxied(gatling, ["127.0.0.1/%d/^/" % gunicorn], tree=tree)
    r = fetch(srv.port, "/.well-known/acme-challenge/tok")
    assert r.status == 200 and r.body == b"tok.thumb" and r.header("X-App") is None, r
    r = fetch(srv.port, "/.well-known/acme-challenge/missing")
    assert r.status == 404 and r.header("X-App") is None, r
    r = fetch(srv.port, "/.well-known/x.txt")
    assert r.header("X-App") == "1", r
    r = fetch(srv.port, "/.well-known/acme-challenge/tok", method="POST", body=b"",
              headers=[("Content-Length", "0")])
    assert r.header("X-App") == "1", r


@h1_only("a chunked request body is HTTP/1.1 framing")
def test_chunked_request_body(gatling, gunicorn):
    srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % gunicorn])
    with Client(srv.port) as c:
        c.send(b"POST /app/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        r = c.read_response()
    assert r.status == 200 and r.body == b"hello world", r


def test_chunked_and_large_responses(gatling, gunicorn):
    srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % gunicorn])
    r = fetch(srv.port, "/app/chunked")
    assert r.status == 200 and r.body == b"a" * 1000 + b"b" * 1000 + b"c", r
    r = fetch(srv.port, "/app/big", timeout=30)
    want = b"".join(bytes([i % 251]) * 65536 for i in range(64))
    assert r.status == 200 and len(r.body) == len(want) and r.body == want


def rss_kib(pid, what="VmRSS:"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(what):
                return int(line.split()[1])
    return 0


@plain_bound
def test_large_upload_bounded_memory(gatling, gunicorn, build):
    """32 MiB uploaded to an application that reads slowly: gatling holds at
    most a window of it (its peak RSS does not grow by the body)."""
    srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % gunicorn])
    assert fetch(srv.port, "/app/hello").status == 200
    before = rss_kib(srv.pid, "VmHWM:")
    body = b"u" * (32 << 20)
    r = fetch(srv.port, "/app/count", method="POST", body=body, timeout=60,
              headers=[("Content-Length", str(len(body)))])
    assert r.status == 200 and r.body == str(len(body)).encode(), r
    grown = rss_kib(srv.pid, "VmHWM:") - before
    if not build.sanitized:
        assert grown < 8192, "peak RSS grew by %d KiB for a streamed upload" % grown


@plain_bound
def test_slow_client_bounded_memory(gatling, gunicorn, build):
    """A client that does not read: gatling stops reading the backend (256 KiB
    queued), it does not take the 32 MiB in; then the whole arrives."""
    srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % gunicorn])
    assert fetch(srv.port, "/app/hello").status == 200  # warm up: the pool, the caches
    before = rss_kib(srv.pid)
    with Client(srv.port, rcvbuf=16384, timeout=60) as c:
        c.send(b"GET /app/huge HTTP/1.1\r\nHost: localhost\r\n\r\n")
        time.sleep(1.5)
        grown = rss_kib(srv.pid) - before
        if not build.sanitized:  # ASan's quarantine keeps freed memory resident
            assert grown < 8192, "gatling took %d KiB in for a client that reads nothing" % grown
        r = c.read_response()
    assert r.status == 200 and len(r.body) == 32 << 20 and r.body.count(b"h") == 32 << 20


def test_keepalive_reuse(gatling, gunicorn):
    srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % gunicorn])
    ports = set()
    for _ in range(12):  # a new client connection each time: the pool is per rule
        r = fetch(srv.port, "/app/port")
        assert r.status == 200, r
        ports.add(r.body)
    assert len(ports) <= 2, "backend connections not reused: %d ports for 12 requests" % len(
        ports)
    st = status_counters(srv)
    assert st["backend_reuses"] >= 10 and st["backend_connects"] <= 2, st


def test_forwarded_fields(gatling, gunicorn):
    srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % gunicorn])
    r = fetch(srv.port, "/app/headers",
              headers=[("X-Forwarded-For", "10.1.2.3"), ("X-Forwarded-Proto", "gopher"),
                       ("Keep-Alive", "timeout=5"), ("Proxy-Authorization", "Basic eDp5"),
                       ("X-Hop", "secret"), ("Connection", "X-Hop, Host"), ("X-Kept", "yes")]
              if not H2 else [("X-Forwarded-For", "10.1.2.3"), ("X-Forwarded-Proto", "gopher"),
                              ("Proxy-Authorization", "Basic eDp5"), ("X-Kept", "yes")])
    env = dict(line.split("=", 1) for line in r.body.decode().splitlines())
    proto = "https" if TLS else "http"
    assert env["HTTP_X_FORWARDED_FOR"] == "10.1.2.3, 127.0.0.1", env
    assert env["HTTP_X_FORWARDED_PROTO"] == proto, env
    assert env["HTTP_X_FORWARDED_HOST"] == "localhost", env
    assert env["HTTP_FORWARDED"] == 'for=127.0.0.1;proto=%s;host="localhost"' % proto, env
    assert env["HTTP_HOST"] == "localhost", env
    assert env["HTTP_X_KEPT"] == "yes", env
    for gone in ("HTTP_KEEP_ALIVE", "HTTP_PROXY_AUTHORIZATION", "HTTP_X_HOP", "HTTP_TE",
                 "HTTP_UPGRADE", "HTTP_PROXY_CONNECTION"):
        assert gone not in env, (gone, env)


def test_proxy_file_required(gatling, gunicorn):
    """The rule applies only where a .proxy file is, and one that a process
    without privileges could see: not behind a directory others may not
    search (issue 35).  The verdict is kept for a second per vhost name: each
    step asks with a Host of its own (all served from the root)."""
    args = ("-T", "10", "-P", "127.0.0.1/%d/^/app/" % gunicorn)
    srv = gatling({"app": {"hello": "the file\n"}, "shut": {"marker": ""}}, args=args,
                  check_fds=False)
    proxy, shut = os.path.join(srv.docroot, ".proxy"), os.path.join(srv.docroot, "shut")
    r = fetch(srv.port, "/app/hello", host="one")
    assert r.status == 200 and r.body == b"the file\n", "no .proxy: the rule does not apply"
    os.chmod(shut, 0o700)
    os.symlink("shut/marker", proxy)
    r = fetch(srv.port, "/app/hello", host="two")
    assert r.status == 200 and r.body == b"the file\n", "a .proxy in a closed directory"
    os.chmod(shut, 0o755)
    assert fetch(srv.port, "/app/hello", host="three").body == b"hello /app/hello"
    os.unlink(proxy)
    os.mknod(proxy)
    assert fetch(srv.port, "/app/hello", host="four").body == b"hello /app/hello"


def test_refused_is_502(gatling):
    port = free_port()
    srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % port])
    r = fetch(srv.port, "/app/x")
    assert r.status == 502, r
    assert status_counters(srv)["backend_502"] >= 1


def test_backend_errors_name_the_backend_and_errno(gatling, tmp_path):
    """A FastCGI socket that does not exist and an HTTP port that refuses:
    502, and the error log names the backend as the rule wrote it and the
    errno it got (issue 68: it said "connect() to the backend failed: No
    route to host", the errno of finding no other backend to try)."""
    sock = str(tmp_path / "no-such-fpm.sock")
    port = free_port()
    srv = proxied(gatling, [r"F/unix:%s:\.php$" % sock, "127.0.0.1/%d/^/app/" % port])
    assert fetch(srv.port, "/x.php").status == 502
    assert fetch(srv.port, "/app/x").status == 502
    fcgi = "connect() to the FastCGI backend unix:%s failed: No such file or directory" % sock
    http = "connect() to the HTTP backend 127.0.0.1/%d failed: Connection refused" % port
    for line, path in ((fcgi, "/x.php"), (http, "/app/x")):
        wait_for(lambda: any(line in l and l.endswith(" " + path) for l in srv.errlog), 5,
                 "%s in the error log" % line)
    assert not any("No route to host" in l for l in srv.errlog), srv.errlog


def assert_504_at_q1(srv, path):
    """path, to a backend that never answers behind -Q 1: a 504 after about
    a second, counted once in backend_504."""
    t0 = time.monotonic()
    r = fetch(srv.port, path, timeout=10)
    took = time.monotonic() - t0
    assert r.status == 504, r
    assert 0.8 < took < 8, took  # -Q 1; 8: a busy machine, below fetch's 10
    assert status_counters(srv)["backend_504"] == 1


def test_silent_backend_is_504(gatling):
    lst = appservers.listener(backlog=8)  # accepted by the kernel, never answered
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]], ("-Q", "1"))
        assert_504_at_q1(srv, "/app/x")
    finally:
        lst.close()


def test_slow_app_is_504(gatling, gunicorn):
    srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % gunicorn], ("-Q", "1"))
    r = fetch(srv.port, "/app/slow", timeout=10)
    assert r.status == 504, r
    assert fetch(srv.port, "/app/hello").status == 200, "the server goes on"


def one_shot_backend(answer, family=socket.AF_INET):
    """A backend that reads a request, writes answer, and closes."""
    lst = appservers.listener(family, 8)

    def answer_once(c):
        with c:
            c.recv(65536)
            c.sendall(answer)
    return appservers.serve(lst, answer_once)


def test_backend_dies_mid_response(gatling):
    lst = one_shot_backend(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 5000)
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]])
        with Client(srv.port) as c:
            c.send(b"GET /app/x HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                r = c.read_response()
            except ServerHang:  # a hang is a failure, not a cut
                raise
            except Exception:  # cut short: a closed connection, a reset stream
                r = None
            assert r is None, "a complete-looking response: %r" % r
        assert fetch(srv.port, "/index.html").status == 200
    finally:
        lst.close()


def test_response_hop_by_hop_removed(gatling):
    lst = one_shot_backend(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: X-Secret, "
                           b"keep-alive\r\nKeep-Alive: timeout=5\r\nX-Secret: hop\r\n"
                           b"X-Fine: 1\r\nServer: raw\r\nProxy-Connection: x\r\n\r\nok")
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]])
        r = fetch(srv.port, "/app/x")
        assert r.status == 200 and r.body == b"ok" and r.header("X-Fine") == "1", r
        for gone in ("Keep-Alive", "X-Secret", "Proxy-Connection"):
            assert r.header(gone) is None, (gone, r)
        assert r.header_all("Server") == ["gatling/0.1"] or H2, r
    finally:
        lst.close()


def test_backend_header_fields_up_to_4_kib(gatling):
    """A backend's header fields are passed on up to about 4 KiB in all (names and values;
    gatling.8, Failures): three of 1,000 random bytes reach the client whole over every
    scheme; five are a 502 with a line in the error log, and the server goes on."""
    rnd = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "+/"
    big = ["".join(rnd.choice(alphabet) for _ in range(1000)) for _ in range(5)]

    def head(k):
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + b"".join(
            b"X-Big-%d: %s\r\n" % (i, v.encode()) for i, v in enumerate(big[:k])) + b"\r\nok"
    fits, over = one_shot_backend(head(3)), one_shot_backend(head(5))
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/fits/" % fits.getsockname()[1],
                                "127.0.0.1/%d/^/over/" % over.getsockname()[1]])
        r = fetch(srv.port, "/fits/x")
        assert r.status == 200 and r.body == b"ok", r
        for i, v in enumerate(big[:3]):
            assert r.header("X-Big-%d" % i) == v, (i, (r.header("X-Big-%d" % i) or "")[:40])
        r = fetch(srv.port, "/over/x")
        assert r.status == 502, (r, [k for k in range(5) if r.header("X-Big-%d" % k)])
        wait_for(lambda: any("too many or too large header fields" in x for x in srv.errlog), 5,
                 "the error log's line")
        assert fetch(srv.port, "/index.html").status == 200
    finally:
        fits.close()
        over.close()


def test_retry_after_stale_pooled_connection(gatling):
    """A backend that closes a kept-alive connection as the next request
    arrives (the race every pool meets): a GET is sent again, once, on a
    new connection; a POST is not (502)."""
    lst = appservers.listener(backlog=8)
    conns = []

    def serve(c):
        conns.append(c)
        with c:
            c.recv(65536)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
            c.recv(65536)  # the second request on this connection: closed unanswered
    appservers.serve(lst, serve, threaded=True)
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]])
        assert fetch(srv.port, "/app/1").body == b"first"
        r = fetch(srv.port, "/app/2")
        assert r.status == 200 and r.body == b"first", r
        assert len(conns) == 2, "the GET went again on a new connection"
        r = fetch(srv.port, "/app/3", method="POST", body=b"x", headers=[("Content-Length", "1")])
        assert r.status == 502, "a POST is not sent twice: %r" % r
        st = status_counters(srv)
        assert st["backend_reuses"] == 2 and st["backend_connects"] == 2, st
    finally:
        lst.close()


def test_ipv6_backend(gatling):
    lst = one_shot_backend(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nsix!", socket.AF_INET6)
    try:
        srv = proxied(gatling, ["[::1]/%d/^/app/" % lst.getsockname()[1]])
        r = fetch(srv.port, "/app/x")
        assert r.status == 200 and r.body == b"six!", r
    finally:
        lst.close()


def test_bodiless_statuses(gatling):
    """A 304 or 204 that names a Content-Length has no body: answered at once."""
    for head in (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\nETag: \"e\"\r\n\r\n",
                 b"HTTP/1.1 204 No Content\r\n\r\n"):
        lst = one_shot_backend(head)
        try:
            srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]], ("-Q", "30"))
            t0 = time.monotonic()
            r = fetch(srv.port, "/app/x", timeout=20)
            assert r.status in (304, 204) and r.body == b"", r
            # at once, not at -Q 30 (10: room for a busy machine)
            assert time.monotonic() - t0 < 10, "waited for a body that never comes"
        finally:
            lst.close()


# What a backend may answer, and what the client gets: (what, answer, status, body).
# RFC 9112: a 1xx before the final answer is skipped; chunked with extensions and
# trailers is decoded; no length is a body to the close (as from an HTTP/1.0
# backend); Transfer-Encoding wins over Content-Length; bytes past the length are
# dropped; lengths that disagree, or are not a number, are a 502 (6.3); obsolete
# line folding is refused (5.2: a 502 from a proxy).
BACKEND_ANSWERS = [
    ("100, then the answer", b"HTTP/1.1 100 Continue\r\n\r\n"
     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, b"ok"),
    ("103 Early Hints, then the answer", b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
     b"HTTP/1.1 201 Created\r\nContent-Length: 7\r\n\r\ncreated", 201, b"created"),
    ("two 1xx, then a chunked answer", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing"
     b"\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
     200, b"ok"),
    ("chunked, extensions and trailers", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"3;name=value\r\nabc\r\n2 ; q=\"x y\"\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n", 200, b"abcde"),
    ("to the close", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nup to the close",
     200, b"up to the close"),
    ("HTTP/1.0, to the close", b"HTTP/1.0 200 OK\r\n\r\nold", 200, b"old"),
    ("chunked and a Content-Length", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 200, b"ok"),
    ("bytes past the length", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", 200, b"ok"),
    ("the same length twice",
     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", 200, b"ok"),
    ("no reason phrase", b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", 200, b"ok"),
    ("bare LFs", b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", 200, b"ok"),
    ("a 204 with a body", b"HTTP/1.1 204 No Content\r\nContent-Length: 4\r\n\r\nbody", 204, b""),
    ("lengths that disagree",
     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", 502, None),
    ("a length not a number", b"HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok", 502, None),
    ("a length of 19 digits", b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000000\r\n\r\nok",
     502, None),
    ("obsolete line folding",
     b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nok", 502, None),
    ("a 1xx and the close", b"HTTP/1.1 100 Continue\r\n\r\n", 502, None),
    ("a Connection list with blanks and empty items",
     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: \t, ,X-Folded\t,,keep-alive\r\n"
     b"X-Folded: hop\r\n\r\nok", 200, b"ok"),
    ("chunked last in a list", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, CHUNKED\r\n"
     b"\r\n2\r\nok\r\n0\r\n\r\n", 200, b"ok"),
    ("a coding that is not chunked: to the close",
     b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\nuntil close", 200, b"until close"),
    ("a length of 0", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 200, b""),
    ("an empty length", b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nok", 502, None),
]


def path_backend(answers):
    """A backend that reads a request's head, writes answers[path's last part], and
    closes; the heads it read, by that part, in heads."""
    lst = appservers.listener(backlog=16)
    heads = {}

    def serve(c):
        with c:
            got = b""
            while b"\r\n\r\n" not in got:
                data = c.recv(65536)
                if not data:
                    return
                got += data
            head = got.split(b"\r\n\r\n", 1)[0].lower()
            while (b"transfer-encoding: chunked" in head and not got.endswith(b"0\r\n\r\n")) or (
                    b"content-length: " in head and len(got) < len(head) + 4 + int(
                        head.split(b"content-length: ")[1].split(b"\r\n")[0])):
                data = c.recv(65536)
                if not data:
                    return
                got += data
            key = got.split(b" ", 2)[1].rsplit(b"/", 1)[-1].split(b"?")[0].decode()
            heads[key] = got
            c.sendall(answers[key])
    appservers.serve(lst, serve, threaded=True)
    return lst, heads


def test_backend_framings(gatling):
    lst, _ = path_backend({str(i): a[1] for i, a in enumerate(BACKEND_ANSWERS)})
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]])
        for i, (what, _, status, body) in enumerate(BACKEND_ANSWERS):
            r = fetch(srv.port, "/app/%d" % i)
            assert r.status == status, (what, r)
            assert body is None or r.body == body, (what, r)
            assert r.header("X-Folded") is None, (what, r)
        assert fetch(srv.port, "/index.html").status == 200
    finally:
        lst.close()


@http_only
def test_forwarded_names_an_ipv6_client_as_such(gatling):
    """On a dual-stack listener (-i ::) the backend hears of an IPv6 client as
    one (X-Forwarded-For ::1, Forwarded for="[::1]", RFC 7239 6) and of an
    IPv4 one by its IPv4 address, not its v4-mapped form."""
    lst, heads = path_backend({"v6": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n6",
                               "v4": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n4"})
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]], ("-i", "::"))
        with socket.create_connection(("::1", srv.port), timeout=10) as c:
            c.sendall(b"GET /app/v6 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            assert recv_to_eof(c).endswith(b"\r\n\r\n6")
        r = fetch(srv.port, "/app/v4")  # 127.0.0.1: ::ffff:127.0.0.1 on the socket
        assert r.status == 200 and r.body == b"4", r
        h6, h4 = heads["v6"].lower(), heads["v4"].lower()
        assert b"\r\nx-forwarded-for: ::1\r\n" in h6, h6
        assert b'\r\nforwarded: for="[::1]";proto=http;host="h"\r\n' in h6, h6
        assert b"\r\nx-forwarded-for: 127.0.0.1\r\n" in h4, h4
        assert b"\r\nforwarded: for=127.0.0.1;proto=http" in h4, h4
    finally:
        lst.close()


def test_malformed_chunked_response_cut(gatling):
    """A chunked body that goes wrong after its head was passed on: the
    response is cut (not ended as if whole), the error log says why."""
    lst, _ = path_backend({"x": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                b"2\r\nok\r\nzz\r\n"})
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]])
        with Client(srv.port) as c:
            c.send(build_request("/app/x"))
            r = cut_short(c)
            assert r is None, "a complete-looking response: %r" % r
        wait_for(lambda: any("malformed chunked body from the backend" in x for x in srv.errlog),
                 5, "the error log's line")
    finally:
        lst.close()


def test_head_answered_with_a_body(gatling):
    """A backend that answers a HEAD with a body: the client gets the head,
    with the length the backend named, and no body; its connection goes on."""
    lst, _ = path_backend({"x": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"})
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]])
        with Client(srv.port) as c:
            r = c.request("/app/x", method="HEAD")
            assert r.status == 200 and r.body == b"", r
            assert r.header("Content-Length") in ("5", None if MUX else "5"), r
            r = c.request("/index.html")
            assert r.status == 200 and r.body == b"static\n", r
    finally:
        lst.close()


def test_request_as_the_backend_sees_it(gatling):
    """An absolute-form target reaches the backend in origin-form, with its
    query; a chunked upload (an extension, a trailer) is passed on chunked,
    its data whole; the fields Connection names are not passed on."""
    lst, heads = path_backend({"abs": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
                                      b"Connection: close\r\n\r\na",  # not pooled: a POST next
                               "up": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nu"})
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]])
        r = fetch(srv.port, "http://localhost/app/abs?q=1")
        assert r.status == 200 and r.body == b"a", r
        assert heads["abs"].startswith(b"GET /app/abs?q=1 HTTP/1.1\r\n"), heads["abs"]
        with Client(srv.port) as c:
            if MUX:  # no chunked coding here: a stated length
                r = c.request("/app/up", method="POST", body=b"abcdef",
                              headers=[("Content-Length", "6")])
            else:
                c.send(b"POST /app/up HTTP/1.1\r\nHost: localhost\r\nConnection: X-Hop\r\n"
                       b"X-Hop: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"3;ext=1\r\nabc\r\n3\r\ndef\r\n0\r\nX-Trailer: t\r\n\r\n")
                r = c.read_response()
        assert r.status == 200 and r.body == b"u", r
        head, data = heads["up"].split(b"\r\n\r\n", 1)
        assert b"x-hop" not in head.lower(), head
        if b"transfer-encoding: chunked" in head.lower():
            out, rest = b"", data  # chunks as gatling read them: decoded here
            while not rest.startswith(b"0\r\n"):
                size, rest = rest.split(b"\r\n", 1)
                out, rest = out + rest[:int(size, 16)], rest[int(size, 16) + 2:]
            assert out == b"abcdef" and rest == b"0\r\n\r\n", data
        else:
            assert data == b"abcdef" and b"content-length: 6" in head.lower(), heads["up"]
    finally:
        lst.close()


@h1_only("an HTTP/1.0 request without a Host")
def test_forwarded_without_a_host(gatling):
    """An HTTP/1.0 request with no Host: the backend gets Forwarded and
    X-Forwarded-For, no X-Forwarded-Host and no host= (none to name)."""
    lst, heads = path_backend({"x": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"})
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]])
        with Client(srv.port) as c:
            c.send(b"GET /app/x HTTP/1.0\r\n\r\n")
            r = c.read_response()
        assert r.status == 200 and r.body == b"x", r
        head = heads["x"].decode().lower()
        proto = "https" if TLS else "http"
        assert "\r\nforwarded: for=127.0.0.1;proto=%s\r\n" % proto in head, head
        assert "x-forwarded-for: 127.0.0.1\r\n" in head and "x-forwarded-host" not in head, head
    finally:
        lst.close()


def test_backend_closes_before_head_is_502(gatling):
    for answer in (b"", b"HTTP/1.1 2", b"garbage\r\n\r\n"):
        lst = one_shot_backend(answer)
        try:
            srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % lst.getsockname()[1]])
            r = fetch(srv.port, "/app/x")
            assert r.status == 502, (answer, r)
        finally:
            lst.close()


def test_descriptors_released(gatling, tmp_path):
    """Pooled connections are closed when the backend closes them; nothing leaks."""
    (tmp_path / "app.py").write_text(APP)
    port = free_port()
    proc = appservers.gunicorn(tmp_path, port, threads=None)
    try:
        srv = gatling({".proxy": ""}, args=("-T", "10", "-P", "127.0.0.1/%d/^/app/" % port))
        for _ in range(3):
            assert fetch(srv.port, "/app/hello").status == 200
        assert srv.fds(sockets_only=True) > srv.baseline_socks, "a pooled connection"
    finally:
        stop(proc)
    srv.check_fds("the backend went away")


def test_gunicorn_killed_mid_response(gatling, tmp_path):
    """The application server dies while a 32 MiB response is under way: the
    client sees it cut short (HTTP/1.1: closed before the length; HTTP/2:
    the stream reset), never a complete-looking response; gatling goes on."""
    (tmp_path / "app.py").write_text(APP)
    port = free_port()
    proc = appservers.gunicorn(tmp_path, port, threads=None, keepalive=None)
    try:
        srv = proxied(gatling, ["127.0.0.1/%d/^/app/" % port])
        with Client(srv.port, timeout=20) as c:
            c.send(b"GET /app/huge HTTP/1.1\r\nHost: localhost\r\n\r\n")
            time.sleep(0.5)  # gatling has the head out and waits for the client
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            t0 = time.monotonic()
            try:
                r = c.read_response()
            except ServerHang:  # a hang is a failure, not a cut
                raise
            except Exception:  # cut short: what we want
                r = None
            assert r is None, "a complete-looking response from a dead backend: %r" % r
            assert time.monotonic() - t0 < 10
        assert fetch(srv.port, "/index.html").status == 200
        assert status_counters(srv)["backend_502"] == 1
    finally:
        stop(proc)


@pytest.fixture
def ws_echo():
    """A WebSocket echo server (Debian's python3-websockets) on a thread; its port.
    It sends no pings of its own: an idle tunnel stays idle."""
    websockets = import_websockets()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box = {}

    async def echo(ws, path=None):
        async for m in ws:
            await ws.send(m)

    async def main():
        server = await websockets.serve(echo, "127.0.0.1", 0, ping_interval=None)
        box["port"] = server.sockets[0].getsockname()[1]
        box["server"] = server
        started.set()
        await server.wait_closed()

    t = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    t.start()
    assert started.wait(10), "the WebSocket echo server did not start"
    yield box["port"]
    loop.call_soon_threadsafe(box["server"].close)
    t.join(5)


def ws_connect(srv, path="/ws/"):
    """A WebSocket client connection through gatling (wss under TLS), no pings."""
    websockets = import_websockets()
    scheme = "wss" if TLS else "ws"
    ssl = client_tls_context() if TLS else None
    return websockets.connect("%s://localhost:%d%s" % (scheme, srv.port, path), ssl=ssl,
                              ping_interval=None)


@h1_only("WebSocket upgrades are HTTP/1.1")
def test_websocket_echo(gatling, ws_echo):
    srv = proxied(gatling, ["127.0.0.1/%d/^/ws/" % ws_echo])

    async def client():
        async with ws_connect(srv) as ws:
            out = []
            for m in ("hello", "x" * 70000, b"\x00\x01binary"):
                await ws.send(m)
                out.append(await ws.recv())
            return out
    got = asyncio.run(client())
    assert got == ["hello", "x" * 70000, b"\x00\x01binary"]


@h1_only("WebSocket upgrades are HTTP/1.1")
def test_websocket_idle_limit_is_the_tunnels(gatling, ws_echo):
    """A quiet WebSocket outlives -Q (a backend's silence limit) and is
    closed at -Q's second value, the tunnel's idle limit; neither counts as
    a backend failure."""
    websockets = import_websockets()
    srv = proxied(gatling, ["127.0.0.1/%d/^/ws/" % ws_echo], ("-Q", "1,3"))

    async def client():
        async with ws_connect(srv) as ws:
            await ws.send("one")
            assert await ws.recv() == "one"
            await asyncio.sleep(2)  # past -Q, inside the tunnel's 3 s
            await ws.send("two")
            assert await ws.recv() == "two", "a tunnel cut at -Q"
            t0 = time.monotonic()
            try:
                await asyncio.wait_for(ws.recv(), 15)
            except websockets.exceptions.ConnectionClosed:
                return time.monotonic() - t0
            raise AssertionError("a message from an idle tunnel")
    idle = asyncio.run(client())
    assert 2.5 <= idle < 10, "closed after %.1f s idle, not at the tunnel's 3 s" % idle
    st = status_counters(srv)
    assert st["backend_502"] == 0 and st["backend_504"] == 0, st
    assert st["backend_tunnel_idle"] == 1, st


def test_fastcgi_php(gatling, php_fpm):
    srv = proxied(gatling, ["F/unix:%s:\\.php$" % php_fpm],
                  tree={"env.php": PHP_ENV, "big.php": PHP_BIG, "gone.php": PHP_STATUS})
    r = fetch(srv.port, "/env.php?a=b", headers=[("X-Test", "yes")])
    assert r.status == 200, r
    assert r.header("X-Php") == "1" and r.header("Content-Type").startswith("text/plain"), r
    env = dict(line.split("=", 1) for line in r.body.decode().splitlines())
    assert env["SCRIPT_NAME"] == "/env.php" and env["QUERY_STRING"] == "a=b", env
    assert env["SCRIPT_FILENAME"] == os.path.realpath(os.path.join(srv.docroot, "env.php"))
    assert env["HTTP_X_TEST"] == "yes" and env["REMOTE_ADDR"] == "127.0.0.1", env
    assert env["HTTPS"] == ("on" if TLS else ""), env
    assert b"php-stderr-marker" not in r.body
    wait_for(lambda: "php-stderr-marker" in srv.stderr_text(), 15, "stderr in the error log")
    body = b"field=" + b"v" * 200000
    r = fetch(srv.port, "/env.php", method="POST", body=body,
              headers=[("Content-Length", str(len(body))),
                       ("Content-Type", "application/octet-stream")])
    assert r.status == 200 and r.body.endswith(b"body=" + body), r
    r = fetch(srv.port, "/big.php", timeout=30)
    want = b"".join(bytes([65 + i % 26]) * 32768 for i in range(64))
    assert r.status == 200 and r.body == want
    assert fetch(srv.port, "/gone.php").status == 404
    for _ in range(4):
        assert fetch(srv.port, "/env.php").status == 200
    st = status_counters(srv)
    assert st["backend_reuses"] >= 4, st


def fcgi_record(rtype, content=b"", rid=1, pad=0, version=1):
    """One FastCGI record: its 8-byte header, its content, pad bytes of padding."""
    return struct.pack(">BBHHBx", version, rtype, rid, len(content), pad) + content + b"\0" * pad


def fcgi_stdout(data, rid=1, pad=0):
    return fcgi_record(6, data, rid, pad)


def fcgi_end(app_status=0, proto_status=0):
    return fcgi_record(3, struct.pack(">IB3x", app_status, proto_status))


def fcgi_params(data):
    """FastCGI name-value pairs (lengths of 1 or 4 bytes) as a dict of str."""
    env, i = {}, 0
    while i < len(data):
        lens = []
        for _ in range(2):
            if data[i] < 128:
                lens.append(data[i])
                i += 1
            else:
                lens.append(struct.unpack(">I", data[i:i + 4])[0] & 0x7fffffff)
                i += 4
        name, value = data[i:i + lens[0]], data[i + lens[0]:i + lens[0] + lens[1]]
        env[name.decode()] = value.decode("latin-1")
        i += lens[0] + lens[1]
    return env


class FcgiConn:
    """A backend's end of one FastCGI connection: requests read record by record."""

    def __init__(self, conn):
        self.conn, self.buf = conn, b""

    def _need(self, n):
        while len(self.buf) < n:
            more = self.conn.recv(65536)
            if not more:
                return False
            self.buf += more
        return True

    def request(self):
        """The PARAMS of the next request, read up to its empty STDIN; None at EOF."""
        params = b""
        while True:
            if not self._need(8):
                return None
            _, rtype, _, clen, pad = struct.unpack(">BBHHBx", self.buf[:8])
            if not self._need(8 + clen + pad):
                return None
            content, self.buf = self.buf[8:8 + clen], self.buf[8 + clen + pad:]
            if rtype == 4:
                params += content
            elif rtype == 5 and not clen:
                return fcgi_params(params)


# What the fake FastCGI application answers, by the request's query; None: it
# closes the connection there.
FCGI_ANSWERS = {
    # the head split over two records, padding, a record of another request,
    # record types the server ignores, STDERR, a non-zero application status
    # (the empty STDERR first: once the other's line is logged, its would be)
    "ok": [fcgi_stdout(b"Content-Type: text/pl"), fcgi_record(7, b"\r\n"),
           fcgi_stdout(b"ain\r\nX-Fake: 1\r\n\r\nhel", pad=5),
           fcgi_stdout(b"not ours", rid=2), fcgi_record(11, b"\x63" + b"\0" * 7),
           fcgi_record(10, b"\x04\x01MAXS1"), fcgi_record(7, b"fake warning one\n"),
           fcgi_stdout(b"lo"), fcgi_end(app_status=3)],
    "overloaded": [fcgi_end(proto_status=2)],
    "badhead": [fcgi_stdout(b"this is no header\r\n\r\nbody"), fcgi_end()],
    "early": [fcgi_stdout(b"Status: 103\r\nLink: </s.css>\r\n\r\n"), fcgi_end()],
    "local": [fcgi_stdout(b"Location: /index.html\r\n\r\n"), fcgi_end()],
    "cut": [fcgi_stdout(b"Content-Type: text/plain\r\n\r\n" + b"c" * 5000), None],
    "wide": [fcgi_stdout(b"".join(b"X-Wide-%d: %s\r\n" % (i, b"w" * 1000) for i in range(5)) +
                         b"\r\nbody"), fcgi_end()],
    "longhead": [fcgi_stdout(b"X-Long: " + b"l" * 20000), fcgi_end()],
    "closed": [None],
    "silent": [],
    "badrecord": [fcgi_record(6, b"Content-Type: text/plain\r\n\r\nx", version=2), fcgi_end()],
}


def fcgi_fake(c):
    """The fake FastCGI application: FCGI_ANSWERS for each request on the
    connection (FCGI_KEEP_CONN), until the server closes it or an answer does."""
    fc = FcgiConn(c)
    with c, contextlib.suppress(OSError):  # the server may close first (after a 502)
        while True:
            env = fc.request()
            if env is None:
                return
            for rec in FCGI_ANSWERS[env.get("QUERY_STRING", "ok")]:
                if rec is None:
                    return
                c.sendall(rec)


@pytest.fixture
def fcgi_fake_port():
    """The fake FastCGI application's port."""
    lst = appservers.serve(appservers.listener(), fcgi_fake, threaded=True)
    try:
        yield lst.getsockname()[1]
    finally:
        lst.close()


@pytest.fixture
def fcgi_app(gatling, fcgi_fake_port):
    """A gatling whose rule sends /fake/ to the fake FastCGI application."""
    return proxied(gatling, ["F/127.0.0.1/%d/^/fake/" % fcgi_fake_port])


def test_fastcgi_records_a_backend_may_send(fcgi_app):
    """gatling.8: STDOUT is parsed as a CGI response (a head over several
    records), STDERR goes to the error log one line per record (an empty one
    not at all), records of another request and of other types are skipped,
    padding too, and END_REQUEST ends the response whatever the application's
    exit status; HEAD gets the head alone."""
    srv = fcgi_app
    r = fetch(srv.port, "/fake/x?ok")
    assert r.status == 200 and r.body == b"hello", r
    assert r.header("X-Fake") == "1" and r.header("Content-Type") == "text/plain", r
    wait_for(lambda: sum(l.endswith("fake warning one") for l in srv.errlog) == 1, 5,
             "the GET's STDERR record in the error log")
    stderr_lines = [l for l in srv.errlog if "(its stderr)" in l]
    assert len(stderr_lines) == 1, stderr_lines  # the empty record is no line
    # issue 79: which backend wrote it, and for which path
    assert "the FastCGI backend 127.0.0.1/" in stderr_lines[0] and \
        ", for /fake/x:" in stderr_lines[0] and "failed" not in stderr_lines[0], stderr_lines
    # a HEAD's exchange ends at the head: the records after it are read only
    # when they came in the same read (over HTTP/2 they often did not: a fresh
    # check's h2 pass saw one line, not two), so its STDERR is not counted
    r = fetch(srv.port, "/fake/x?ok", method="HEAD")
    assert r.status == 200 and r.body == b"" and r.header("X-Fake") == "1", r
    assert not any("not ours" in l for l in srv.errlog)
    assert status_counters(srv)["backend_502"] == 0


def test_fastcgi_backend_failures(fcgi_app):
    """A FastCGI backend that ends the request before a head (here
    FCGI_OVERLOADED), sends a malformed head, one over 16 KiB, header fields
    over about 4 KiB, a 1xx status, a record of another version, or closes
    before a head: 502 with its line in the error log; one that closes in
    the middle of the body: the response cut off.  A local Location goes to
    the client as a 302."""
    srv = fcgi_app
    for q, line in (("overloaded", "FastCGI request ended before a complete head"),
                    ("badhead", "malformed CGI response head from the backend"),
                    ("longhead", "malformed CGI response head from the backend"),
                    ("wide", "too many or too large header fields from the backend"),
                    ("early", "a 1xx status from a CGI backend"),
                    ("badrecord", "malformed FastCGI record from the backend"),
                    ("closed", "the backend closed before its response head")):
        r = fetch(srv.port, "/fake/x?" + q)
        assert r.status == 502 and r.header("Link") is None, (q, r)
        assert r.header("X-Wide-0") is None and r.header("X-Long") is None, (q, r)
        wait_for(lambda: any(line in l for l in srv.errlog), 5, "%s: %s" % (q, line))
    r = fetch(srv.port, "/fake/x?local")
    assert r.status == 302 and r.header("Location") == "/index.html", r
    with Client(srv.port) as c:
        c.send(b"GET /fake/x?cut HTTP/1.1\r\nHost: x\r\n\r\n")
        r = cut_short(c)
        assert r is None, "a complete-looking response: %r" % r
    wait_for(lambda: any("the backend closed in the middle of the body" in l
                         for l in srv.errlog), 5, "the cut in the error log")
    assert fetch(srv.port, "/index.html").status == 200


def test_fastcgi_silent_backend_is_504(gatling, fcgi_fake_port):
    """A FastCGI application that takes the request and never answers: 504 at
    -Q, counted as backend_504; the server goes on."""
    srv = proxied(gatling, ["F/127.0.0.1/%d/^/fake/" % fcgi_fake_port], ("-Q", "1"))
    assert_504_at_q1(srv, "/fake/x?silent")
    assert fetch(srv.port, "/fake/x?ok").body == b"hello"


def test_fastcgi_more_requests_than_processes(gatling, php_fpm):
    """php-fpm (2 processes here) gives each connection a process until it
    closes: kept-alive idle connections must not starve requests waiting in
    its backlog.  Three waves of 6 concurrent requests, all answered."""
    srv = proxied(gatling, ["F/unix:%s:\\.php$" % php_fpm], ("-Q", "20"),
                  tree={"sleep.php": PHP_SLEEP})
    t0 = time.monotonic()
    for wave in range(3):
        results = []

        def one():
            try:
                results.append(fetch(srv.port, "/sleep.php", timeout=25).status)
            except Exception as e:  # reported below
                results.append(repr(e))
        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results == [200] * 6, (wave, results)
    # 18 requests of 0.3 s on 2 processes: 2.7 s; starved ones would wait for -Q
    # (20 s; 16: room for a busy machine)
    assert time.monotonic() - t0 < 16, time.monotonic() - t0


def test_scgi(gatling, scgi_server):
    srv = proxied(gatling, ["S/127.0.0.1/%d/^/scgi/" % scgi_server])
    r = fetch(srv.port, "/scgi/x?q=1", headers=[("X-Test", "t")])
    assert r.status == 202 and r.header("X-Scgi") == "1", r
    env = dict(line.split("=", 1) for line in r.body.decode().splitlines())
    assert env["first"] == "CONTENT_LENGTH" and env["SCGI"] == "1", env
    assert env["REQUEST_METHOD"] == "GET" and env["QUERY_STRING"] == "q=1", env
    assert env["HTTP_X_TEST"] == "t" and env["body"] == "", env
    r = fetch(srv.port, "/scgi/p", method="POST", body=b"posted",
              headers=[("Content-Length", "6")])
    assert r.status == 202 and r.body.endswith(b"body=posted"), r
    r = fetch(srv.port, "/scgi/x?big", timeout=20)
    assert r.status == 202 and r.body.endswith(b"S" * (1 << 20)), len(r.body)


@no_h3_client("curl (Debian 12's has no HTTP/3) -T - sends a body without a length, "
              "which H3Client cannot")
def test_body_without_length_to_fastcgi_and_scgi(gatling, php_fpm, scgi_server):
    """FastCGI and SCGI put CONTENT_LENGTH before the body: one sent without
    a length (chunked over HTTP/1.1, DATA without content-length over
    HTTP/2: curl -T -) is read whole first, up to 1 MiB, and arrives with
    its length; a longer one is answered 413."""
    srv = proxied(gatling, ["F/unix:%s:\\.php$" % php_fpm,
                            "S/127.0.0.1/%d/^/scgi/" % scgi_server], tree={"env.php": PHP_ENV})

    def post(path, data, *args):
        p = subprocess.run(["curl", "-sS", "-T", "-", "-X", "POST", "-H",
                            "Content-Type: application/octet-stream", "-w", "\n%{http_code}",
                            "--max-time", "30"] + curl_version_args() + list(args) +
                           [url(srv.port, path)], input=data, capture_output=True, timeout=60)
        out, code = p.stdout.rsplit(b"\n", 1)
        return int(code), out, p.stderr

    data = os.urandom(150000).hex().encode() + b"end"
    code, out, err = post("/env.php", data)
    assert code == 200, (code, out[:300], err)
    assert b"CONTENT_LENGTH=%d\n" % len(data) in out and out.endswith(b"body=" + data), out[:300]
    code, out, err = post("/scgi/p", data)
    assert code == 202 and out.endswith(b"body=" + data), (code, out[:300], err)
    code, out, err = post("/env.php", b"")
    assert code == 200 and out.endswith(b"body="), (code, out, err)
    # Over the cap, as HTTP/1.1: the 413 comes while curl still uploads, and
    # Debian's curl 7.88 over HTTP/2 then often reports "Empty reply" although
    # the server sent the response and RST_STREAM(NO_ERROR) after it (RFC 9113
    # 8.1; the access log has the 413 and its bytes)
    code, out, err = post("/env.php", b"y" * ((1 << 20) + 1), "--http1.1")
    assert code == 413, (code, out[:300], err, srv.log[-2:])
    wait_for(lambda: any('"POST /env.php HTTP/1.1" 413 ' in l for l in srv.log), 15,
             "the 413 in the access log")
    assert status_counters(srv)["backend_unsized"] == 1
    assert fetch(srv.port, "/index.html").status == 200


def h2_post_unsized(port, path, size):
    """POST size bytes over HTTP/2 without content-length (TLS with ALPN h2, or
    h2c by prior knowledge on plain HTTP), sending while the flow-control
    window allows and reading meanwhile: (status, body, events seen)."""
    import_h2()
    import h2.config
    import h2.connection
    import h2.events
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if TLS:
        sock = client_tls_context(["h2"]).wrap_socket(sock, server_hostname="localhost")
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    c.send_headers(1, [(":method", "POST"), (":path", path), (":scheme",
                       "https" if TLS else "http"), (":authority", "localhost")])
    left, status, body, seen = size, None, b"", []
    with sock:
        while not seen or not isinstance(seen[-1], (h2.events.StreamEnded,
                                                     h2.events.StreamReset)):
            while left and status is None:  # answered: the rest is not wanted
                w = min(c.local_flow_control_window(1), c.max_outbound_frame_size, left)
                if w <= 0:
                    break
                c.send_data(1, b"y" * w, end_stream=w == left)
                left -= w
            sock.sendall(c.data_to_send())
            data = sock.recv(65536)
            assert data, "closed before the stream ended: %s" % seen
            for ev in c.receive_data(data):
                seen.append(ev)
                if isinstance(ev, h2.events.ResponseReceived):
                    status = int(dict(ev.headers)[b":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    body += ev.data
                    c.acknowledge_received_data(ev.flow_controlled_length, 1)
            sock.sendall(c.data_to_send())
    return status, body, seen


@pytest.mark.skipif(H3, reason="HTTP/2 itself (its own client): the h2 pass runs it")
def test_unsized_h2_body_over_the_cap_is_413(gatling, php_fpm):
    """The spooled body's 413 over HTTP/2, with a client that reads the
    response while it uploads (curl 7.88 does not: see above): HEADERS 413,
    its page, END_STREAM."""
    srv = proxied(gatling, ["F/unix:%s:\\.php$" % php_fpm], tree={"env.php": PHP_ENV})
    status, body, seen = h2_post_unsized(srv.port, "/env.php", (1 << 20) + 1)
    assert status == 413 and b"413" in body, (status, body, seen[-3:])
    assert status_counters(srv)["backend_unsized"] == 1
    status, body, seen = h2_post_unsized(srv.port, "/env.php", 5000)
    assert status == 200 and body.endswith(b"body=" + b"y" * 5000), (status, body[-100:])


def test_bad_rules_refused(build):
    for rule in ("host.example/80/x", "127.0.0.1/0/x", "127.0.0.1/80/(", "127.0.0.1/80/",
                 "F/unix:relative:x", "[::1/80/x", "S/unix:/no/pattern"):
        p = subprocess.run([build.binary, "-P", rule, "-V"], capture_output=True, timeout=10)
        assert p.returncode != 0 and b"-P" in p.stderr, (rule, p)
    p = subprocess.run([build.binary, "-P", "F/unix:/run/php/fpm.sock:\\.php$", "-P",
                        "[::1]/8080/^/api/", "-V"], capture_output=True, timeout=10)
    assert p.returncode == 0, p


def test_bad_dyn_timeouts_refused(build):
    for arg in ("0", "1,0", "1,", ",5", "30,86401", "x", "5,6,7", "9" * 12, ""):
        p = subprocess.run([build.binary, "-Q", arg, "-V"], capture_output=True, timeout=10)
        assert p.returncode == 2 and b"-Q" in p.stderr, (arg, p)
    for arg in ("30", "5,60", "86400,1"):
        p = subprocess.run([build.binary, "-Q", arg, "-V"], capture_output=True, timeout=10)
        assert p.returncode == 0, (arg, p)


@pytest.mark.parametrize("tree, says", [
    ({"index.html": "static\n"}, "no .proxy file in "),
    ({"a.test:80/index.html": "a\n", "default/index.html": "d\n"},
     "(its virtual host directories: "),
])
def test_no_switch_warns_at_start(gatling, tree, says):
    """-P with no .proxy anywhere (issue 55): the rules proxy nothing, and
    the start says so, naming them and the directories it looked in; with a
    .proxy in a directory that serves requests, no warning."""
    srv = gatling(dict(tree), args=("-P", "127.0.0.1/9/^/app/", "-P", "127.0.0.1/9/^/b/"))
    warned = [l for l in srv.errlog if "warning: -P" in l]
    assert len(warned) == 1 and says in warned[0] and "^/app/" in warned[0] and \
        "other -P rules" in warned[0] and "nothing is proxied" in warned[0], srv.errlog
    if "default/index.html" in tree:
        assert "a.test:80" in warned[0] and "default" in warned[0], warned
    assert fetch(srv.port, "/app/x").status == 404  # gatling's own answer, as it warned
    switched = dict(tree, **{("default/.proxy" if "default/index.html" in tree
                              else ".proxy"): ""})
    srv = gatling(switched, args=("-P", "127.0.0.1/9/^/app/"))
    warned = [l for l in srv.errlog if "warning: -P" in l]
    if "default/index.html" not in tree:
        assert not warned, srv.errlog
        return
    # issue 76: a host without .proxy beside one with it is named: nothing is proxied
    # there, and a FastCGI rule's scripts are refused there, never sent as source
    assert len(warned) == 1 and "a.test:80" in warned[0] and "default" not in warned[0] and \
        "nothing is proxied there" in warned[0], warned
    other = dict(tree, **{"a.test:80/.proxy": "", "default/app/x": "file\n",
                          "default/db.php": "<?php $password = 'secret';\n"})
    srv = gatling(other, args=("-P", "127.0.0.1/9/^/app/",
                               "-P", r"F/unix:/nonexistent.sock:\.php$"))
    warned = [l for l in srv.errlog if "warning: -P" in l and "no .proxy file" in l]
    assert len(warned) == 1 and "directory default of" in warned[0] and \
        "refused (403)" in warned[0], warned
    assert fetch(srv.port, "/app/x").body == b"file\n"  # the default host: its files
    r = fetch(srv.port, "/db.php")
    assert r.status == 403 and b"secret" not in r.body, r
    switched["a.test:80/.proxy"] = ""
    srv = gatling(switched, args=("-P", "127.0.0.1/9/^/app/"))
    assert not [l for l in srv.errlog if "warning: -P" in l], srv.errlog


def test_router_order_rule_before_status_pages(gatling, gunicorn):
    """The router's table puts -P before -S's pages: a rule that takes
    /server-status sends it to the backend, while /metrics, which no rule
    takes, is still the status page; without the rule /server-status is
    the status page, also asked for with an escape (%73erver-status)."""
    srv = proxied(gatling, ["127.0.0.1/%d/^/server-status" % gunicorn])
    r = fetch(srv.port, "/server-status")
    assert r.status == 200 and r.body == b"hello /server-status", r
    m = fetch(srv.port, "/metrics")
    assert m.status == 200 and b"# TYPE" in m.body, m
    plain = proxied(gatling, ["127.0.0.1/%d/^/app/" % gunicorn])
    for target in ("/server-status?json", "/%73erver-status?json"):
        r = fetch(plain.port, target)
        assert r.status == 200 and r.body.lstrip().startswith(b"{"), (target, r)
    r = fetch(plain.port, "/app/server-status")
    assert r.body == b"hello /app/server-status", "the rule, not the page: %r" % (r,)
