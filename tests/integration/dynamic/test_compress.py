"""Content coding on the fly of dynamic answers (--compress; route/compress.c,
site/zcoder.c): a CGI program's and a proxied backend's answers in zstd, br and
gzip, decoded by real decoders (Python's zstandard, brotli and gzip modules,
curl --compressed); a CGI writing a line a second arrives a line at a time,
each decodable as it comes; what is never coded (no-transform, an encoded
answer, 206, HEAD, 304, a small one, a type not on the list, a skipped path,
--compress off, past the streams cap) goes as it came; Vary merged with the
backend's, the ETag made weak, no length; /metrics counts each.
Runs in the http, https, h2 and h3 passes."""
import gzip
import socket
import sys
import threading
import time
import zlib

import pytest

import appservers
from conftest import (MUX, Client, Mode, build_request, fetch, no_h3_client, url,
                      wait_for)
from feature_helpers import curl, module_server

sys.path.append("/usr/lib/python3/dist-packages")  # Debian's, from another python3 too
zstandard = pytest.importorskip("zstandard")
brotli = pytest.importorskip("brotli")


def html(n):
    rows, i = [], 0
    while sum(map(len, rows)) < n:
        rows.append("<tr><td class=\"n\">%d</td><td>row %d of the report, %s</td></tr>\n"
                    % (i, i * 7919 % 1000, ["alpha", "beta", "gamma"][i % 3]))
        i += 1
    return ("<!doctype html><table>\n" + "".join(rows))[:n].encode()


PAGE = html(50 * 1024)
SMALL = b"<p>tiny</p>\n"

SH = "#!/bin/sh\n"
CGI = {
    "page.sh": SH + ("printf 'Content-Type: text/html; charset=utf-8\\r\\nETag: \"p1\"\\r\\n"
                     "Vary: Cookie\\r\\n\\r\\n'\ncat page.html\n"),
    "len.sh": SH + ("printf 'Content-Type: text/html\\r\\nContent-Length: %d\\r\\n\\r\\n'\n"
                    "cat page.html\n" % len(PAGE)),
    # one event, then an open stream: its coder lives until the client goes
    "hold.sh": SH + ("printf 'Content-Type: text/event-stream\\r\\n\\r\\n'\n"
                     "printf 'data: held\\n\\n'; sleep 30\n"),
    "tick.sh": SH + ("printf 'Content-Type: text/event-stream\\r\\n\\r\\n'\n"
                     "for i in 1 2 3; do printf 'data: tick %s\\n\\n' $i; sleep 1; done\n"),
    "small.sh": SH + "printf 'Content-Type: text/html\\r\\nContent-Length: 12\\r\\n\\r\\n'\n"
                     "printf '<p>tiny</p>\\n'\n",
    "png.sh": SH + "printf 'Content-Type: image/png\\r\\n\\r\\n'\ncat page.html\n",
    "json.sh": SH + "printf 'Content-Type: application/problem+json\\r\\n\\r\\n'\ncat page.html\n",
    "notrans.sh": SH + ("printf 'Content-Type: text/html\\r\\n"
                        "Cache-Control: public, no-transform\\r\\n\\r\\n'\ncat page.html\n"),
}


def tree():
    cgi = {k: Mode(v, 0o755) for k, v in CGI.items()}
    return {".proxy": "", "page.html": PAGE, "static.html": PAGE,
            "cgi": dict(cgi, **{"page.html": PAGE}),
            "secret": {"page.sh": Mode(CGI["page.sh"], 0o755), "page.html": PAGE}}


# ---- a backend written here: its answer by the path ----

BACKEND = {
    "/app/page": ([("Content-Type", "text/html"), ("ETag", '"b1"'), ("Vary", "Cookie"),
                   ("Accept-Ranges", "bytes")], PAGE),
    "/app/vary": ([("Content-Type", "text/html"), ("Vary", "accept-encoding")], PAGE),
    "/app/encoded": ([("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
                     gzip.compress(PAGE, mtime=0)),
    "/app/notrans": ([("Content-Type", "text/html"), ("Cache-Control", "no-transform")], PAGE),
    "/app/small": ([("Content-Type", "text/html")], SMALL),
    "/app/range": ([("Content-Type", "text/html"), ("Content-Range",
                                                     "bytes 0-99/%d" % len(PAGE))], PAGE[:100]),
    "/app/304": ([("ETag", '"b1"')], b""),
    "/app/identity": ([("Content-Type", "text/html"), ("Content-Encoding", "identity")], PAGE),
    "/app/cached": ([("Content-Type", "text/html"), ("Cache-Control", "max-age=60")], PAGE),
    "/app/slow": ([("Content-Type", "text/html"), ("Cache-Control", "max-age=60")], PAGE),
}
ASKED = []  # the backend's requests, by path


def backend_answer(conn):
    with conn:
        data = appservers.read_head(conn)
        if data is None:
            return
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        method, path = line.split(" ")[0], line.split(" ")[1]
        ASKED.append(path)
        fields, body = BACKEND.get(path, ([("Content-Type", "text/plain")], b"no such\n"))
        if path == "/app/slow":  # the clients that come meanwhile wait for this fill
            time.sleep(1)
        status = "206 Partial Content" if path == "/app/range" else \
            "304 Not Modified" if path == "/app/304" else "200 OK"
        head = "HTTP/1.1 %s\r\n" % status + "".join("%s: %s\r\n" % f for f in fields)
        if path != "/app/304":
            head += "Content-Length: %d\r\n" % len(body)
        head += "Connection: close\r\n\r\n"
        conn.sendall(head.encode() + (b"" if method == "HEAD" or path == "/app/304" else body))


@pytest.fixture(scope="module")
def backend():
    lst = appservers.serve(appservers.listener(), backend_answer, threaded=True)
    yield lst.getsockname()[1]
    lst.close()


ARGS = ("-T", "10", "-S", "-w", r"\.sh$")


@pytest.fixture(scope="module")
def srv(build, tmp_path_factory, backend):
    yield from module_server(build, tmp_path_factory, "compress", tree(),
                             args=ARGS + ("-P", "127.0.0.1/%d/^/app/" % backend,
                                          "--compress", "skip=/secret/"))


def decode(coding, body):
    if coding == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    if coding == "br":
        return brotli.decompress(body)
    if coding == "gzip":
        return gzip.decompress(body)
    assert coding is None, coding
    return body


def get(port, target, ae=None, method="GET", headers=()):
    h = list(headers) + ([("Accept-Encoding", ae)] if ae else [])
    with Client(port) as c:
        return c.request(target, method=method, headers=h)


@pytest.mark.parametrize("coding", ["zstd", "br", "gzip"])
@pytest.mark.parametrize("path", ["/cgi/page.sh", "/cgi/len.sh", "/app/page"])
def test_coded_and_decoded(srv, path, coding):
    """A CGI's answer (streamed, and with a Content-Length) and a proxied
    one, in each coding the client asks for: Content-Encoding says which,
    the bytes decode to the page, no length goes with them, the ETag is
    weak and Vary names Accept-Encoding beside the backend's own."""
    r = get(srv.port, path, coding)
    assert r.status == 200, r
    assert r.header("Content-Encoding") == coding, r
    assert decode(coding, r.body) == PAGE
    assert len(r.body) < len(PAGE) // 3, (coding, len(r.body))
    assert r.header("Content-Length") is None, r
    assert "accept-encoding" in r.tokens("Vary"), r
    if path != "/cgi/len.sh":
        assert "cookie" in r.tokens("Vary"), r
        assert r.header("ETag") == 'W/"%s"' % ("p1" if path.startswith("/cgi") else "b1"), r
    if path == "/app/page":
        assert r.header("Accept-Ranges") is None, r  # no ranges of the coded bytes


def test_preference_by_q(srv):
    """The client's q-values choose; ties go to the cheapest to code, zstd,
    br, gzip (issue 79: zstd 3 codes a 50 KB page in ~91 us, br 4 in ~476 us,
    for 1.3% fewer bytes; Caddy prefers zstd too), so what Chrome and Firefox
    send gets zstd; identity when none is acceptable."""
    cases = [("gzip, deflate, br, zstd", "zstd"), ("gzip, br", "br"),
             ("zstd;q=0.5, br", "br"), ("gzip;q=1, br;q=0.9", "gzip"), ("x-gzip", "gzip"),
             ("identity", None), ("compress, deflate", None), ("*", "zstd"), ("*;q=0", None)]
    for ae, want in cases:
        r = get(srv.port, "/cgi/page.sh", ae)
        assert r.status == 200 and r.header("Content-Encoding") == want, (ae, r)
        assert decode(want, r.body) == PAGE


@no_h3_client("Debian 12's curl has no HTTP/3")
def test_curl_compressed(srv):
    """curl --compressed (libcurl's own decoders) gets the page back."""
    for path in ("/cgi/page.sh", "/app/page"):
        p = curl(url(srv.port, path), "--compressed", "-D", "-")
        assert p.returncode == 0, p.stderr
        head, _, body = p.stdout.partition(b"\r\n\r\n")
        assert b"content-encoding:" in head.lower(), head
        assert body == PAGE


@pytest.mark.parametrize("path,why", [
    ("/cgi/notrans.sh", "Cache-Control: no-transform"),
    ("/app/notrans", "no-transform, from a backend"),
    ("/cgi/small.sh", "a known length under min="),
    ("/app/small", "a known length under min=, from a backend"),
    ("/cgi/png.sh", "a type not on the list"),
    ("/secret/page.sh", "a path of skip= (BREACH)"),
])
def test_left_alone(srv, path, why):
    r = get(srv.port, path, "zstd, br")
    assert r.status == 200, (why, r)
    assert r.header("Content-Encoding") is None, (why, r)
    assert r.body in (PAGE, SMALL), why


def test_static_file_keeps_its_own(srv):
    """A static file goes its own way (site/encoding.h: coded once on a worker
    thread and cached), with a length: never through the stage; coded once,
    its tie goes to the smallest (br), where an answer of the stage's gets zstd."""
    r = get(srv.port, "/static.html", "zstd, br")
    assert r.header("Content-Encoding") == "br" and r.header("Content-Length"), r
    assert decode("br", r.body) == PAGE and r.header("ETag").endswith('-br"'), r


def test_type_patterns(srv):
    """*+json is on the default list: application/problem+json is coded."""
    r = get(srv.port, "/cgi/json.sh", "zstd")
    assert r.header("Content-Encoding") == "zstd" and decode("zstd", r.body) == PAGE


def test_already_encoded(srv):
    """A backend's gzip passes as it is, never coded twice."""
    r = get(srv.port, "/app/encoded", "zstd, gzip")
    assert r.header("Content-Encoding") == "gzip", r
    assert gzip.decompress(r.body) == PAGE


def test_identity_replaced(srv):
    """A backend's Content-Encoding: identity is no coding: coded, and ours is
    the one Content-Encoding."""
    r = get(srv.port, "/app/identity", "zstd")
    assert r.header_all("Content-Encoding") == ["zstd"], r
    assert decode("zstd", r.body) == PAGE


def test_partial_and_not_modified(srv):
    """A backend's 206 and 304 go as they came: no coding, the ETag strong."""
    r = get(srv.port, "/app/range", "zstd", headers=[("Range", "bytes=0-99")])
    assert r.status == 206 and r.header("Content-Encoding") is None and r.body == PAGE[:100], r
    r = get(srv.port, "/app/304", "zstd", headers=[("If-None-Match", '"b1"')])
    assert r.status == 304 and r.header("Content-Encoding") is None, r
    assert r.header("ETag") == '"b1"', r


def test_head(srv):
    """HEAD: the head as it came (no Content-Encoding), no body."""
    for path in ("/cgi/page.sh", "/app/page"):
        r = get(srv.port, path, "zstd", method="HEAD")
        assert r.status == 200 and r.header("Content-Encoding") is None and not r.body, r


def test_vary_not_doubled(srv):
    """A backend's Vary naming Accept-Encoding already is kept as it is."""
    r = get(srv.port, "/app/vary", "br")
    assert r.header("Content-Encoding") == "br", r
    assert r.tokens("Vary") == ["accept-encoding"], r


def body_times(port, target, ae):
    """[(seconds since the request, body bytes so far)] each time the body
    grew, until it ends: the client's view of a streamed answer."""
    out, t0 = [], time.monotonic()
    deadline = t0 + 20
    with Client(port) as c:
        c.send(build_request(target, headers=[("Accept-Encoding", ae)]))
        if MUX:
            st = c.streams[c.order[0]]
            while not st.ended:
                c._recv(deadline, "body")
                if st.body and (not out or len(st.body) > len(out[-1][1])):
                    out.append((time.monotonic() - t0, bytes(st.body)))
            return out
        raw = b""
        while not raw.endswith(b"0\r\n\r\n"):
            chunk = c._recv_more(deadline, "body")
            assert chunk, "closed before the end: %r" % raw[-200:]
            raw += chunk
            body = dechunk(raw)
            if body and (not out or len(body) > len(out[-1][1])):
                out.append((time.monotonic() - t0, body))
        return out


def dechunk(raw):
    """The chunked body's bytes in raw so far (HTTP/1.1)."""
    head, sep, rest = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower() or not sep, head
    body = b""
    while rest:
        line, sep, rest = rest.partition(b"\r\n")
        if not sep:
            break
        n = int(line.split(b";")[0], 16)
        if n == 0 or len(rest) < n + 2:
            break
        body, rest = body + rest[:n], rest[n + 2:]
    return body


@pytest.mark.parametrize("coding", ["zstd", "br", "gzip"])
def test_streamed_a_line_at_a_time(srv, coding):
    """A CGI writing a line a second (server-sent events): each line can be
    decoded at the client about when it was written, not all at the end."""
    steps = body_times(srv.port, "/cgi/tick.sh", coding)
    d = {"zstd": lambda: zstandard.ZstdDecompressor().decompressobj(),
         "br": lambda: brotli.Decompressor(),
         "gzip": lambda: zlib.decompressobj(16 + 15)}[coding]
    seen = {}
    for t, body in steps:
        dec = d()
        text = dec.decompress(body) if coding != "br" else dec.process(body)
        for i in (1, 2, 3):
            if b"data: tick %d\n" % i in text and i not in seen:
                seen[i] = t
    assert sorted(seen) == [1, 2, 3], steps
    assert seen[2] - seen[1] > 0.5 and seen[3] - seen[2] > 0.5, seen
    assert seen[1] < steps[-1][0] - 1.5, (seen, steps[-1][0])


def metrics(port):
    r = fetch(port, "/metrics")
    out = {}
    for line in r.body.decode().splitlines():
        if line.startswith("gatling_compress"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def test_metrics(srv):
    before = metrics(srv.port)
    get(srv.port, "/cgi/page.sh", "zstd")
    get(srv.port, "/app/page", "gzip")
    after = metrics(srv.port)
    key = 'gatling_compressed_total{coding="%s"}'
    assert after[key % "zstd"] == before.get(key % "zstd", 0) + 1, after
    assert after[key % "gzip"] == before.get(key % "gzip", 0) + 1, after
    side = 'gatling_compress_bytes_total{side="%s"}'
    assert after[side % "in"] - before.get(side % "in", 0) == 2 * len(PAGE), after
    assert after[side % "out"] - before.get(side % "out", 0) < len(PAGE), after


def test_cache_hits_coded(gatling, backend):
    """The response cache in front of a backend: the miss that fills it and
    the hits after it are each coded as their client asks (the cache keeps
    the backend's bytes: one fetch), identity for a client that asks none."""
    srv = gatling(dict(tree(), **{".cache": "ttl 30\n"}),
                  args=ARGS + ("-P", "127.0.0.1/%d/^/app/" % backend))
    before = ASKED.count("/app/cached")
    for ae in ("zstd", "br", None, "gzip", "zstd"):
        r = get(srv.port, "/app/cached", ae)
        assert r.status == 200 and r.header("Content-Encoding") == ae, (ae, r)
        assert decode(ae, r.body) == PAGE, ae
    assert ASKED.count("/app/cached") == before + 1, "one fetch"
    assert "hit" in (r.header("Cache-Status") or ""), r


def counters(port, *prefixes):
    r = fetch(port, "/metrics")
    out = {}
    for line in r.body.decode().splitlines():
        if line.startswith(prefixes):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def test_cache_codes_once(gatling, backend):
    """--cache keeps coded bodies: the fill's own coded stream (zstd) is kept,
    so after it N hits in each coding cost one compression per other coding
    (/metrics' bytes in grow by the page twice, two bodies made; the zstd hits
    code nothing: before the fill kept its stream they coded it again), each
    client decodes its variant, named in Cache-Status, and a client that asks
    none gets the identity."""
    srv = gatling(dict(tree(), **{".cache": "ttl 30\n"}),
                  args=ARGS + ("-P", "127.0.0.1/%d/^/app/" % backend))
    r = get(srv.port, "/app/cached", "zstd")  # the miss: coded as it streams
    assert r.status == 200 and decode("zstd", r.body) == PAGE, r
    want = ("gatling_compress_bytes", "gatling_cache_coded")
    before = counters(srv.port, *want)
    for coding in ("zstd", "br", "gzip"):
        for _ in range(5):
            r = get(srv.port, "/app/cached", coding)
            assert r.status == 200 and r.header("Content-Encoding") == coding, r
            assert decode(coding, r.body) == PAGE, coding
            assert "hit" in r.header("Cache-Status") and \
                "detail=%s" % coding in r.header("Cache-Status"), r
            assert "accept-encoding" in r.header("Vary").lower(), r
            assert r.header("Accept-Ranges") is None, r
    after = counters(srv.port, *want)
    grew = {k: after[k] - before.get(k, 0) for k in after}
    assert grew['gatling_compress_bytes_total{side="in"}'] == 2 * len(PAGE), grew
    assert grew["gatling_cache_coded_total"] == 2, grew
    for coding in ("zstd", "br", "gzip"):
        assert grew['gatling_cache_coded_hits_total{coding="%s"}' % coding] == 5, grew
    r = get(srv.port, "/app/cached")
    assert r.header("Content-Encoding") is None and r.body == PAGE, r
    assert "detail" not in r.header("Cache-Status"), r
    r = get(srv.port, "/app/cached", "zstd", headers=[("Range", "bytes=0-99")])
    assert r.status == 206 and r.header("Content-Encoding") is None, r
    assert r.body == PAGE[:100], r  # a range of the uncoded body
    assert ASKED.count("/app/cached") >= 1


def test_cache_fill_coded_once(gatling, backend):
    """Clients collapsed on one fill, all asking br, while the backend takes
    its time: the page is coded once in all (/metrics' bytes in grow by one
    page: the fill's owner codes it as it streams and the others are sent
    that coded body), every client decodes it, one fetch.  Before, each
    collapsed client coded its own stream."""
    srv = gatling(dict(tree(), **{".cache": "ttl 30\n"}),
                  args=ARGS + ("-P", "127.0.0.1/%d/^/app/" % backend))
    want = ("gatling_compress_bytes", "gatling_cache_coded", "gatling_cache_stored")
    before = counters(srv.port, *want)
    asked = ASKED.count("/app/slow")
    out = [None] * 6

    def one(i):
        out[i] = get(srv.port, "/app/slow", "br")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(out))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for r in out:
        assert r is not None and r.status == 200, r
        assert r.header("Content-Encoding") == "br" and decode("br", r.body) == PAGE, r
    assert ASKED.count("/app/slow") == asked + 1, "one fetch"
    assert sum("collapsed" in r.header("Cache-Status") for r in out) >= 1, \
        [r.header("Cache-Status") for r in out]
    after = counters(srv.port, *want)
    grew = {k: after[k] - before.get(k, 0) for k in after}
    assert grew['gatling_compress_bytes_total{side="in"}'] == len(PAGE), grew
    assert grew["gatling_cache_coded_total"] == 1, grew


from test_proxy import php_fpm  # noqa: E402,F401 (the module's php-fpm, a fixture)


PHP = ("<?php header('Content-Type: text/html; charset=utf-8'); header('ETag: \"f1\"');\n"
       "readfile(__DIR__ . '/page.html');\n")


@pytest.mark.parametrize("coding", ["zstd", "br", "gzip"])
def test_fastcgi_php(gatling, php_fpm, coding):
    """A FastCGI backend (php-fpm) answers: coded as a proxied HTTP one is."""
    srv = gatling({".proxy": "", "page.php": PHP, "page.html": PAGE},
                  args=("-T", "10", "-P", "F/unix:%s:\\.php$" % php_fpm), check_fds=False)
    r = get(srv.port, "/page.php", coding)
    assert r.status == 200 and r.header("Content-Encoding") == coding, r
    assert decode(coding, r.body) == PAGE and r.header("ETag") == 'W/"f1"', r


def test_off(gatling, tmp_path, backend):
    """--compress off: every answer as it came (static files keep theirs)."""
    srv = gatling(tree(), args=ARGS + ("-P", "127.0.0.1/%d/^/app/" % backend,
                                       "--compress", "off"))
    for path in ("/cgi/page.sh", "/app/page"):
        r = get(srv.port, path, "zstd, br, gzip")
        assert r.status == 200 and r.header("Content-Encoding") is None and r.body == PAGE, r


def streaming(port):
    """A client whose zstd answer from hold.sh (one event, then an open
    stream) has begun: its head read and its first piece coded (zstd takes its
    window then, which the memory cap counts), its coder at work until the
    client closes.  tick.sh's three seconds ran out before the next request
    on a loaded machine (make check-all's sigio pass) and freed the coder."""
    key = 'gatling_compress_bytes_total{side="in"}'
    before = metrics(port).get(key, 0)
    c = Client(port)
    c.send(build_request("/cgi/hold.sh", headers=[("Accept-Encoding", "zstd")]))
    if MUX:
        c.read_head()
    else:
        while b"\r\n\r\n" not in c.buf:
            c.buf += c._recv_more(time.monotonic() + 10, "head")
    wait_for(lambda: metrics(port).get(key, 0) > before, 10, "hold.sh's first piece coded")
    return c


def test_streams_cap(gatling, tmp_path):
    """streams=1: while one coder works (a CGI that has not finished), the
    next answer goes identity, counted in /metrics."""
    srv = gatling(tree(), args=ARGS + ("--compress", "streams=1"))
    with streaming(srv.port):
        r = get(srv.port, "/cgi/page.sh", "zstd")
        assert r.header("Content-Encoding") is None and r.body == PAGE, r
        assert metrics(srv.port).get("gatling_compress_capped_total") == 1
    r = get(srv.port, "/cgi/page.sh", "zstd")  # the first has ended: a coder again
    assert r.header("Content-Encoding") == "zstd", r


def test_memory_cap(gatling):
    """memory=1M: two coders streaming (zstd's ~0.7 MiB each) fill it, and the
    next answer goes identity, counted."""
    srv = gatling(tree(), args=ARGS + ("--compress", "memory=1M"))
    clients = []
    try:
        for _ in range(2):
            clients.append(streaming(srv.port))
        r = get(srv.port, "/cgi/page.sh", "zstd")
        assert r.header("Content-Encoding") is None and r.body == PAGE, r
        assert metrics(srv.port).get("gatling_compress_capped_total") == 1
    finally:
        for c in clients:
            c.close()


@pytest.mark.parametrize("arg,says", [
    ("", "no such setting: --compress takes off, secrets, types=LIST, skip=/PATH[,...], min="),
    ("bogus", "no such setting: --compress takes off, secrets, types=LIST"),
    ("min=0", "min= is a size in bytes, 1 to 1G"),
    ("streams=0", "streams= is a count of coders, 1 to 1048576"),
    ("memory=1K", "memory= is a size in bytes, 1M to 1T"),
    ("types=", "types= is a list of Content-Types, comma-separated"),
    ("skip=nopath", "skip= is a list of path prefixes, comma-separated, each beginning with /"),
    ("types=text/html bad", "types= is a list of Content-Types"),
    ("memory=1023K", "memory= is a size in bytes, 1M to 1T"),
    ("streams=2000000", "streams= is a count of coders, 1 to 1048576")])
def test_bad_option(build, arg, says):
    """What --compress refuses (and, below, takes): one line naming the value,
    the setting that is wrong and what it accepts (issue 79 item 8.2)."""
    import subprocess
    p = subprocess.run([build.binary, "--compress", arg, "-V"], capture_output=True, timeout=10)
    err = p.stderr.decode()
    assert p.returncode == 2, (arg, p)
    assert err.startswith("gatling: --compress %s: %s" % (arg, says)), err
    assert err.splitlines()[1:] == ["gatling: try 'gatling -h' or see gatling(8)"], err


@pytest.mark.parametrize("arg", ["off", "secrets", "memory=32M", "memory=1048576", "streams=1", "min=1K",
                                 "types=text/html,*+json", "skip=/a,/b/c"])
def test_good_option(build, arg):
    import subprocess
    p = subprocess.run([build.binary, "--compress", arg, "-V"], capture_output=True, timeout=10)
    assert p.returncode == 0 and not p.stderr, (arg, p)
